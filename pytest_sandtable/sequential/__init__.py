"""Sequential (adaptive) trials: per task a test that decides after each graded trial
whether the task's verdict is settled, with error guarantees that hold however often the
running figures are looked at (docs/adaptive.md).

Nothing here imports pytest or the engine: the plugin feeds graded outcomes in, in trial
order, and asks which tasks still need trials.
"""

from __future__ import annotations

from .design import Design, DesignError
from .multiple import bonferroni, e_bh
from .regression import PairedRegression, RegressionVerdict, StoredRegression
from .sprt import TaskSequence, Verdict

__all__ = [
    "Design",
    "DesignError",
    "PairedRegression",
    "RegressionVerdict",
    "StoredRegression",
    "TaskSequence",
    "Verdict",
    "bonferroni",
    "e_bh",
]
