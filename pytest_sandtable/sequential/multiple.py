"""Across tasks: which tasks' stopped e-values are large enough to flag, with the whole
run's error under control. Both take a mapping from a task's name to its e-value at its
stop (`TaskSequence.e_value`, `PairedRegression.e_value`, `StoredRegression.e_value`) and
return the flagged names, largest e-value first (ties by name).

An e-value here is a nonnegative figure whose mean is at most 1 when its task's null
("not reliable", "no drop") holds. A sequential test's likelihood ratio stopped at any
stopping time is one, so these stay valid however each task's trials were scheduled and
stopped, provided the tasks' trials are independent of each other given the builds (a
scheduler or budget that looks at every task then only decides when a task stops).
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def _ranked(e_values: Mapping[str, float], alpha: float) -> list[tuple[str, float]]:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), not {alpha!r}")
    for name, e in e_values.items():
        if math.isnan(e) or e < 0.0:
            raise ValueError(f"the e-value of {name!r} must be a nonnegative number, not {e!r}")
    return sorted(e_values.items(), key=lambda item: (-item[1], item[0]))


def e_bh(e_values: Mapping[str, float], alpha: float = 0.05) -> list[str]:
    """e-BH (Wang and Ramdas, 2022): with m tasks and the e-values sorted from the largest,
    flag the first k* where k* is the largest k with e_(k) >= m / (alpha k).

    Guarantees a false discovery rate at most alpha (the expected share of flagged tasks
    whose null holds) under any dependence between the e-values; in fact at most
    alpha * m0 / m with m0 the tasks whose null holds. For flagging many tasks at once
    (e.g. which tasks regressed in a large suite)."""
    ranked = _ranked(e_values, alpha)
    m = len(ranked)
    flagged = 0
    for k, (_, e) in enumerate(ranked, start=1):
        if e >= m / (alpha * k):
            flagged = k
    return [name for name, _ in ranked[:flagged]]


def bonferroni(e_values: Mapping[str, float], alpha: float = 0.05) -> list[str]:
    """Bonferroni on e-values: flag every task with e >= m / alpha.

    Guarantees a family-wise error at most alpha (the chance of flagging even one task
    whose null holds) under any dependence: by Markov's inequality each null task is
    flagged with probability at most alpha / m. Stricter than e-BH; for a gate where one
    wrong flag is costly."""
    ranked = _ranked(e_values, alpha)
    m = len(ranked)
    return [name for name, e in ranked if e >= m / alpha]
