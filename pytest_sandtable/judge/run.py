"""A run's finished trials judged: the ``judged`` object results.json carries.

The plugin calls :func:`judge_trials` at the end of a run, after every trial was graded
and the gate evaluated, with the stored trials read back one at a time (as policy
coverage reads them); ``regrade`` calls it on the trials it regraded. Errored trials are
not judged (their transcript is cut short by an error, not by the agent). Nothing it
returns is read by the verdicts, the gate or the exit status.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..domain.model import Domain
from .calibrate import calibrated_criteria
from .panel import Panel
from .prompt import all_lines
from .scores import judged_scores

DomainOf = Callable[[Mapping[str, Any]], "Domain | None"]
"""The domain of a stored trial (None when it cannot be loaded: its trial is not judged)."""


def judge_trials(trials: Iterable[Mapping[str, Any]], domain_of: DomainOf, panel: Panel, *,
                 calibration: Mapping[str, Any] | None = None, concurrency: int = 4) -> dict[str, Any] | None:
    """The ``judged`` object of ``trials``; None when no trial has a criterion to judge."""
    return asyncio.run(_judge_trials(trials, domain_of, panel, calibration, concurrency))


async def _judge_trials(trials: Iterable[Mapping[str, Any]], domain_of: DomainOf, panel: Panel,
                        calibration: Mapping[str, Any] | None, concurrency: int) -> dict[str, Any] | None:
    started = time.monotonic()
    gate = asyncio.Semaphore(max(1, concurrency))
    questions: dict[tuple[str, str], str] = {}
    domains: dict[str, Domain] = {}

    async def one(t: Mapping[str, Any], domain: Domain) -> dict[str, Any]:
        task = domain.task(str(t["task"]))
        criteria = domain.criteria_for(task)
        async with gate:
            judged, usage = await panel.judge_trial(domain.policy, criteria, t)
        return {"domain": domain.name, "task": task.id, "trial": t.get("trial"), "verdict": t.get("verdict"),
                "tags": list(t.get("tags") or []), "criteria": judged, "usage": usage,
                "evidence": evidence(t, judged)}

    jobs = []
    for t in trials:
        if t.get("verdict") == "errored":
            continue
        domain = domain_of(t)
        if domain is None:
            continue
        try:
            task = domain.task(str(t.get("task")))
        except KeyError:
            continue
        criteria = domain.criteria_for(task)
        if not criteria:
            continue
        domains[domain.name] = domain
        for c in criteria:
            questions[(domain.name, c.id)] = c.question
        jobs.append(one(dict(t), domain))
    if not jobs:
        return None
    judged_trials = list(await asyncio.gather(*jobs))
    calibrated = calibrated_criteria(calibration, domains, panel.names)
    from ..report.prices import estimate_cost

    by_model = estimate_cost(panel.usage.models, panel.options.prices)
    known = [c for c in by_model.values() if c is not None]
    return {
        "judges": panel.names,
        "trials": judged_trials,
        **judged_scores(judged_trials, questions, calibrated),
        "usage": panel.usage.to_dict(),
        "cost": {"total": sum(known) if len(known) == len(by_model) else None, "by_model": by_model},
        "calls": panel.calls,
        "cached": panel.cached,
        "seconds": round(time.monotonic() - started, 3),
        "max_cost": panel.options.max_cost,
        "budget_reached": panel.budget_reached(),
    }


def evidence(trial: Mapping[str, Any], judged: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """The transcript entries the judges quoted, by their index (as text: a JSON key):
    ``{label, text}`` as the judge saw them, for report.html to show with the quotes marked."""
    quoted = {j["at"] for c in judged for j in c.get("judges", []) if isinstance(j.get("at"), int)}
    return {str(line.index): {"label": line.label, "text": line.text}
            for line in all_lines(trial) if line.index in quoted}
