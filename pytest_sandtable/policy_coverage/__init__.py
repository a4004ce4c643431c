"""Policy coverage: how much of a domain's policy a set of trials exercises.

:func:`coverage` takes a domain and any trials of its tasks (the references' replays
from :func:`reference_results`, a run's from :func:`results_from_file`, or mutants'
replays, fed one at a time to a :class:`CoverageAccumulator`) and says, per rule, the
highest level the trials reached (:data:`LEVELS`: declared, applied, could-fire,
both-outcomes, boundary), which rules no trial reaches,
which policy sentences no rule quotes, and which tasks exercise no rule.
:func:`coverage_lines` and :func:`coverage_json` render it. docs/grading.md, "Policy
coverage", says how to read it.

May import ``report``, ``engine`` and ``domain``.
"""

from __future__ import annotations

from .compute import (
    LEVELS,
    CoverageAccumulator,
    DomainCoverage,
    RuleCoverage,
    coverage,
    limit_step,
    policy_sentences,
)
from .render import coverage_json, coverage_lines
from .sources import reference_results, results_from_file

__all__ = [
    "LEVELS",
    "CoverageAccumulator",
    "DomainCoverage",
    "RuleCoverage",
    "coverage",
    "coverage_json",
    "coverage_lines",
    "limit_step",
    "policy_sentences",
    "reference_results",
    "results_from_file",
]
