"""The trials coverage is computed from: each task's reference replayed as ``lint``
replays it (the reference agent and the scripted user, no model), or a results.json's
trials read one at a time."""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..domain.model import Domain
from ..engine.reference import ReferenceAgent
from ..engine.results import TrialResult
from ..engine.scripted_user import ScriptedUser
from ..engine.trial import run_trial
from ..report.reading import open_results


def reference_results(domain: Domain) -> Iterator[TrialResult]:
    """Each task's reference replayed with the scripted user, as lint replays it; a task
    without a reference, or whose scripted user has nothing to say, gives no trial."""
    for task in domain.tasks:
        if task.reference and (task.user.opening or task.user.script):
            yield run_trial(domain, task, ReferenceAgent(), ScriptedUser(), wait_latency=False)


def results_from_file(path: str | os.PathLike[str]) -> Iterator[TrialResult]:
    """The trials of a results.json (or of a run folder's), checked against the schema
    and read one at a time; raises :class:`~pytest_sandtable.report.results_json.ResultsError`
    naming the file when it does not read."""
    with open_results(path) as run:
        for trial in run.trials():
            yield TrialResult.from_dict(trial)
