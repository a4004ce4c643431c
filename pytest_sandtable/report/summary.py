"""Aggregating trials: pass^j, verdicts per task, failure modes, soft rules, usage.

The summary is a JSON-compatible dict (typed as :class:`~pytest_sandtable.report.types.Summary`),
so the terminal, results.json and the HTML report all render the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import comb
from typing import Any

from ..engine.results import ERRORED, PASSED, TrialResult
from .safe import named_usage
from .types import (
    Cost,
    ErroredTrial,
    FailureMode,
    Latency,
    PassHat,
    SoftRuleRate,
    Summary,
    SummaryUsage,
    TagScore,
    TaskSummary,
    UsageByModel,
)

VERDICT_ORDER = {"failed": 0, "flaky": 1, "skipped": 2, "passed": 3}


def pass_hat(c: int, n: int, j: int) -> float | None:
    """The unbiased estimator of pass^j for one task: C(c, j) / C(n, j).

    None when the task has fewer than j graded trials (it is left out of the average).
    """
    if n < j or j < 1:
        return None
    return comb(c, j) / comb(n, j)


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _percentile(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    # nearest-rank on a 0..n-1 scale with linear interpolation
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def task_verdict(n: int, c: int) -> str:
    if n == 0:
        return "skipped"
    if c == n:
        return "passed"
    if c == 0:
        return "failed"
    return "flaky"


def _file(t: TrialResult) -> str:
    return t.location.rpartition(":")[0]


def order_trials(trials: Iterable[TrialResult]) -> list[TrialResult]:
    """A stable order whatever order the trials finished in (xdist)."""

    def key(t: TrialResult) -> tuple[str, str, int, str, int]:
        file, _, line = t.location.rpartition(":")
        return (t.domain, file, int(line) if line.isdigit() else 0, t.task, t.trial)

    return sorted(trials, key=key)


def _graded(trials: Iterable[TrialResult]) -> list[TrialResult]:
    """The trials that were graded: errored ones are left out of every rate."""
    return [t for t in trials if t.verdict != ERRORED]


# --------------------------------------------------------------------------- verdicts per task


_TaskKey = tuple[str, str, str]  # (domain, file, task)


def _trials_by_task(trials: Sequence[TrialResult]) -> dict[_TaskKey, list[TrialResult]]:
    """The trials of each task, tasks in the order their first trial comes. Two domain
    files may share a ``name``: their tasks stay apart, told apart by file."""
    by_task: dict[_TaskKey, list[TrialResult]] = {}
    for t in trials:
        by_task.setdefault((t.domain, _file(t), t.task), []).append(t)
    return by_task


def _task_names(by_task: Mapping[_TaskKey, Sequence[TrialResult]]) -> dict[_TaskKey, str]:
    """The name tables show for each task: ``task``, or ``domain/task`` when the run has
    several domains, plus ``(file)`` when two files hold a task of the same domain and name."""
    multi = len({domain for domain, _, _ in by_task}) > 1
    files_of: dict[tuple[str, str], set[str]] = {}
    for domain, file, task in by_task:
        files_of.setdefault((domain, task), set()).add(file)
    names = {}
    for domain, file, task in by_task:
        name = f"{domain}/{task}" if multi else task
        if len(files_of[(domain, task)]) > 1:
            name += f" ({file})"
        names[(domain, file, task)] = name
    return names


def _task_summary(name: str, trials: Sequence[TrialResult], js: Sequence[str]) -> TaskSummary:
    """A task's verdict and pass^j over its trials (``trials`` all of the one task)."""
    first = trials[0]
    graded = len(_graded(trials))
    passed = sum(t.verdict == PASSED for t in trials)
    return {
        "domain": first.domain,
        "task": first.task,
        "name": name,
        "tags": list(first.tags),
        "critical": first.critical,
        "trials": len(trials),
        "graded": graded,
        "passed": passed,
        "errored": len(trials) - graded,
        "verdict": task_verdict(graded, passed),
        "pass_hat": {j: pass_hat(passed, graded, int(j)) for j in js},
    }


def pass_hat_js(by_task: Mapping[_TaskKey, Sequence[TrialResult]], k: int) -> list[str]:
    """The j of pass^j, as text: 1 .. k, or 1 .. the most graded trials of a task when
    one has more than k."""
    kmax = max([k] + [len(_graded(ts)) for ts in by_task.values()])
    return [str(j) for j in range(1, kmax + 1)]


def task_summaries(by_task: Mapping[_TaskKey, Sequence[TrialResult]], js: Sequence[str]) -> list[TaskSummary]:
    """Every task's verdict and pass^j, tasks in the order of their first trial."""
    names = _task_names(by_task)
    return [_task_summary(names[key], ts, js) for key, ts in by_task.items()]


def _critical_then_worst(tasks: Iterable[TaskSummary]) -> list[TaskSummary]:
    """Critical tasks first, then failed, flaky, skipped, passed (stable otherwise)."""
    return sorted(tasks, key=lambda e: (not e["critical"], VERDICT_ORDER[e["verdict"]]))


# --------------------------------------------------------------------------- the pass^j table


def overall_pass_hat(tasks: Sequence[TaskSummary], js: Sequence[str]) -> PassHat:
    """pass^j averaged over the tasks with at least j graded trials."""
    return {j: _mean(e["pass_hat"][j] for e in tasks) for j in js}


def tag_scores(tasks: Sequence[TaskSummary], js: Sequence[str]) -> dict[str, TagScore]:
    """Per tag, sorted by tag: how many tasks have it and their average pass^j."""
    scores: dict[str, TagScore] = {}
    for tag in sorted({tag for e in tasks for tag in e["tags"]}):
        mine = [e for e in tasks if tag in e["tags"]]
        scores[tag] = {"tasks": len(mine), "pass_hat": {j: _mean(e["pass_hat"][j] for e in mine) for j in js}}
    return scores


# --------------------------------------------------------------------------- failure modes and soft rules


def failure_modes(trials: Iterable[TrialResult]) -> list[FailureMode]:
    """Failed checks of graded trials grouped by ``(kind, id)``, most frequent first, each
    with the tasks it hit and its first occurrence as an example."""
    modes: dict[tuple[str, str], FailureMode] = {}
    for t in _graded(trials):
        for c in t.failed_checks:
            m = modes.get((c.kind, c.id))
            if m is None:
                m = modes[(c.kind, c.id)] = {
                    "kind": c.kind,
                    "id": c.id,
                    "trials": 0,
                    "tasks": [],
                    "example": {"task": t.task, "domain": t.domain, "trial": t.trial, "detail": c.detail},
                }
            m["trials"] += 1
            if t.task not in m["tasks"]:
                m["tasks"].append(t.task)
    return sorted(modes.values(), key=lambda m: (-m["trials"], m["kind"], m["id"]))


def soft_rules(trials: Iterable[TrialResult]) -> list[SoftRuleRate]:
    """Per soft rule, sorted by id: in how many graded trials it applied (its tool was
    attempted) and was broken there, and that rate (None where it never applied)."""
    flags: dict[str, list[Mapping[str, Any]]] = {}
    for t in _graded(trials):
        for rid, s in t.soft.items():
            flags.setdefault(rid, []).append(s)
    rates: list[SoftRuleRate] = []
    for rid in sorted(flags):
        applied = sum(bool(s.get("applied")) for s in flags[rid])
        broken = sum(bool(s.get("broken")) and bool(s.get("applied")) for s in flags[rid])
        rates.append({"id": rid, "tool": flags[rid][0].get("tool"), "applied": applied, "broken": broken,
                      "rate": broken / applied if applied else None})
    return rates


def errored_trials(trials: Iterable[TrialResult]) -> list[ErroredTrial]:
    """The trials that errored (not graded) and why."""
    return [
        {"task": t.task, "domain": t.domain, "trial": t.trial, "error": t.error} for t in trials if t.verdict == ERRORED
    ]


# --------------------------------------------------------------------------- usage, cost, latency


def usage_totals(trials: Iterable[TrialResult]) -> SummaryUsage:
    """Token counters summed by side and model, errored trials included (they cost all the same)."""
    usage: SummaryUsage = {"agent": {}, "user": {}}
    for t in trials:
        _add_usage(usage["agent"], t.usage.get("agent") or {})
        _add_usage(usage["user"], t.usage.get("user") or {})
    return usage


def _add_usage(into: UsageByModel, by_model: Mapping[str, Mapping[str, Any]]) -> None:
    """Adds one trial's side to the totals, under printable model names (a model given as
    None or empty counts as ``(unknown model)``, priced n/a) and whole counters."""
    for model, u in named_usage(by_model).items():
        acc = into.setdefault(model, {})
        for f, v in u.items():
            acc[f] = acc.get(f, 0) + v


def cost_summary(usage: SummaryUsage, prices: Mapping[str, Mapping[str, float]] | None = None) -> Cost:
    """Estimated cost at list prices per side and model (None where the price is unknown)."""
    from .prices import all_prices, builtin_prices_as_of, estimate_cost

    table = prices if prices is not None else all_prices(None)
    agent = estimate_cost(usage.get("agent") or {}, table)
    user = estimate_cost(usage.get("user") or {}, table)
    costs = [*agent.items(), *user.items()]
    return {
        "currency": "USD",
        "prices_as_of": builtin_prices_as_of(),
        "agent": agent,
        "user": user,
        "total": sum((c for _, c in costs if c is not None), 0.0),
        "unpriced": sorted({str(model) for model, c in costs if c is None}),
    }


def latency(trials: Iterable[TrialResult]) -> Latency:
    """Agent turn latency over all trials: how many turns, p50 and p95 in seconds."""
    lat = [x for t in trials for x in t.latency]
    return {"turns": len(lat), "p50": _percentile(lat, 0.5), "p95": _percentile(lat, 0.95)}


# --------------------------------------------------------------------------- the summary


def summarize(
    trials: Iterable[TrialResult], k: int | None = None, prices: Mapping[str, Mapping[str, float]] | None = None
) -> Summary:
    """The run's figures. ``prices`` (model -> per-million-token prices) defaults to the
    built-in list prices; models without a price get a cost of None ("n/a")."""
    trials = order_trials(trials)
    k = k or max((t.trial for t in trials), default=1)
    by_task = _trials_by_task(trials)
    js = pass_hat_js(by_task, k)
    # the averages add the tasks up in the order of their trials; the table lists the worst first
    tasks = task_summaries(by_task, js)
    overall = overall_pass_hat(tasks, js)
    errored = errored_trials(trials)
    usage = usage_totals(trials)
    return {
        "k": k,
        "trials": len(trials),
        "passed": sum(t.verdict == PASSED for t in trials),
        "failed": sum(t.verdict not in (PASSED, ERRORED) for t in trials),
        "errored": len(errored),
        "errored_trials": errored,
        "pass_hat": overall,
        "tags": tag_scores(tasks, js),
        "tasks": _critical_then_worst(tasks),
        "failure_modes": failure_modes(trials),
        "soft_rules": soft_rules(trials),
        "usage": usage,
        "cost": cost_summary(usage, prices),
        "latency": latency(trials),
        "agents": sorted({t.agent for t in trials}),
        "users": sorted({t.user for t in trials}),
        "domains": sorted({t.domain for t in trials}),
    }
