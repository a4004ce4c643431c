"""Aggregating trials: pass^j and pass@j with their 95% intervals, verdicts per task,
scores per tag and per domain, failure modes and their likely owners, drafted items
pending review, soft rules, usage.

The summary is a JSON-compatible dict (typed as :class:`~pytest_sandtable.report.types.Summary`),
so the terminal, results.json and the HTML report all render the same numbers. The
statistics are :mod:`.stats`'s; the rules (which tasks a pass^j counts, how tags are
scoped by domain) are documented in docs/results.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from ..engine.results import ERRORED, PASSED, TrialResult
from . import stats
from .safe import named_usage
from .stats import pass_hat
from .types import (
    Cost,
    ErroredTrial,
    FailureMode,
    Interval,
    IntervalMethod,
    Intervals,
    Latency,
    OwnerCluster,
    PassHat,
    PendingItem,
    Score,
    SoftRuleRate,
    Summary,
    SummaryUsage,
    TagScore,
    TaskSummary,
    UsageByModel,
)

VERDICT_ORDER = {"failed": 0, "flaky": 1, "skipped": 2, "passed": 3}
OWNERS = ("agent", "task", "user")  # the order owners are listed in at equal counts


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
    """A task's verdict over its ``n`` graded trials of which ``c`` passed. ``flaky`` says
    flakiness is established: a pass and a fail were both seen. ``passed`` does not say
    the task cannot fail: the Wilson interval of its rate (``rate_ci``) says how often it
    still might (8 of 8 passes: 68-100%)."""
    if n == 0:
        return "skipped"
    if c == n:
        return "passed"
    if c == 0:
        return "failed"
    return "flaky"


def _file(t: TrialResult) -> str:
    return t.location.rpartition(":")[0]


def trial_order_key(t: TrialResult) -> tuple[str, str, int, str, int]:
    """Where a trial comes in results.json: by domain, file, the task's line, task, trial."""
    file, _, line = t.location.rpartition(":")
    return (t.domain, file, int(line) if line.isdigit() else 0, t.task, t.trial)


def order_trials(trials: Iterable[TrialResult]) -> list[TrialResult]:
    """A stable order whatever order the trials finished in (xdist)."""
    return sorted(trials, key=trial_order_key)


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


def _interval(iv: stats.Interval | None) -> Interval | None:
    """An interval as results.json writes it: ``[low, high]``."""
    return None if iv is None else [iv[0], iv[1]]


def _around(iv: stats.Interval | None, estimate: float | None) -> Interval | None:
    """A task's interval, stretched to hold its own estimate. The interval is of p^j (or
    1 - (1 - p)^j) at the Wilson ends of its rate, while the unbiased estimate at j = n
    is 0 or 1 exactly (3 of 4 passed: pass^4 is 0): a score must never show outside its
    own interval."""
    if iv is None or estimate is None:
        return _interval(iv)
    return [min(iv[0], estimate), max(iv[1], estimate)]


@lru_cache(maxsize=4096)
def _task_scores(c: int, n: int, js: tuple[str, ...]) -> tuple[PassHat, Intervals, PassHat, Intervals]:
    """One task's pass^j, its intervals, pass@j and its intervals for every j, from its
    counts alone (many tasks share counts: computed once per counts). Callers copy."""
    hat = {j: pass_hat(c, n, int(j)) for j in js}
    hat_ci = {j: _around(stats.pass_hat_interval(c, n, int(j)), hat[j]) for j in js}
    at = {j: stats.pass_at(c, n, int(j)) for j in js}
    at_ci = {j: _around(stats.pass_at_interval(c, n, int(j)), at[j]) for j in js}
    return hat, hat_ci, at, at_ci


def _task_summary(name: str, trials: Sequence[TrialResult], js: Sequence[str], failing: bool = False) -> TaskSummary:
    """A task's verdict, pass^j and pass@j, its success rate and their 95% intervals
    over its trials (``trials`` all of the one task). ``failing``: an adaptive run
    settled the task unreliable, so at every j past its graded trials its pass^j counts
    as failing (0, its interval [0, 0]) where it would be left out (see :func:`summarize`)."""
    first = trials[0]
    graded = len(_graded(trials))
    passed = sum(t.verdict == PASSED for t in trials)
    hat, hat_ci, at, at_ci = _task_scores(passed, graded, tuple(js))
    if failing:
        hat, hat_ci = dict(hat), dict(hat_ci)
        for j in js[graded:]:
            hat[j], hat_ci[j] = 0.0, [0.0, 0.0]
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
        "pass_hat": dict(hat),
        "rate": passed / graded if graded else None,
        "rate_ci": _interval(stats.wilson(passed, graded)),
        "pass_hat_ci": dict(hat_ci),
        "pass_at": dict(at),
        "pass_at_ci": dict(at_ci),
    }


def pass_hat_js(by_task: Mapping[_TaskKey, Sequence[TrialResult]], k: int) -> list[str]:
    """The j of pass^j, as text: 1 .. k, or 1 .. the most graded trials of a task when
    one has more than k."""
    kmax = max([k] + [len(_graded(ts)) for ts in by_task.values()])
    return [str(j) for j in range(1, kmax + 1)]


def _critical_then_worst(tasks: Iterable[TaskSummary]) -> list[TaskSummary]:
    """Critical tasks first, then failed, flaky, skipped, passed (stable otherwise)."""
    return sorted(tasks, key=lambda e: (not e["critical"], VERDICT_ORDER[e["verdict"]]))


# --------------------------------------------------------------------------- the pass^j table
#
# A pass^j (and pass@j) over a group of tasks is the mean of the tasks' estimates over the
# tasks with at least j graded trials: a task with fewer cannot be estimated at that j
# (C(n, j) is 0). Every group, interval and j follows that one rule, and the tasks each j
# counted are written beside it (``pass_hat_tasks``), so a pass^j over fewer tasks is seen.
# One exception: a task an adaptive run settled unreliable (``failing``) was stopped because
# it fails too often; past its graded trials its pass^j counts as failing (0), so that
# stopping a failing task early can never raise the headline. In the bootstrap of pass^j it
# is then a task of 0 passes in as many trials as the largest j, 0 in every resample. Its
# pass@j (at least one of j passes, which a flaky task settled unreliable may well do) is
# left out as before, and the tasks pass@j counted are written apart (``pass_at_tasks``)
# where they differ from pass^j's.

# Bootstrap work the end of a run may spend (resampled tasks plus estimate lookups, over
# every group), about half a second; a run past it gets fewer resamples, never fewer j.
BOOTSTRAP_WORK = 5_000_000
MIN_RESAMPLES = 500


def _resamples(groups: Iterable[Sequence[TaskSummary]], js: Sequence[str]) -> int:
    """How many bootstrap resamples the groups get: :data:`stats.BOOTSTRAP_RESAMPLES`,
    or fewer (down to :data:`MIN_RESAMPLES`) when so many tasks, trials and j would
    make the end of the run slow. One number for the run, written in ``summary.intervals``."""
    per_resample = 0
    for tasks in groups:
        m = len(tasks)
        if m == 1:
            continue  # a group of one task takes the task's own intervals
        # the distinct (trials, count) a resample draws: one or two for the tasks that always
        # or never passed, about one per flaky task, at most one per possible count
        flaky = sum(0 < t["passed"] < t["graded"] for t in tasks)
        distinct = min(m, max((t["graded"] for t in tasks), default=0) + 1, flaky + 2)
        per_resample += m + 2 * len(js) * distinct
    if per_resample == 0:
        return stats.BOOTSTRAP_RESAMPLES
    return max(MIN_RESAMPLES, min(stats.BOOTSTRAP_RESAMPLES, BOOTSTRAP_WORK // per_resample))


class _Scorer:
    """Scores groups of tasks (all, per domain, per tag) for every j. The intervals are
    the bootstrap's (:func:`stats.bootstrap_table`), once per distinct set of counts: a
    tag every task has costs nothing more than the overall score."""

    def __init__(self, js: Sequence[str], resamples: int, failing: Collection[tuple[str, str]] = ()) -> None:
        self.js = list(js)
        self.resamples = resamples
        self.failing = frozenset(failing)
        self._memo: dict[tuple[tuple[tuple[int, int], ...], tuple[int, ...], tuple[str, ...]],
                         dict[str, dict[int, stats.Interval | None]]] = {}

    def _fails(self, t: TaskSummary) -> bool:
        return (t["domain"], t["task"]) in self.failing

    def _counts_at(self, tasks: Sequence[TaskSummary], j: int) -> tuple[tuple[int, int], ...]:
        """The counts the bootstrap draws from at j: a failing task short of j trials as
        0 passes in as many trials as the largest j (0 in every resample)."""
        top = int(self.js[-1])
        return tuple(sorted((0, top) if self._fails(t) and t["graded"] < j else (t["passed"], t["graded"])
                            for t in tasks))

    def _table(self, counts: tuple[tuple[int, int], ...], js: tuple[int, ...],
               measures: tuple[str, ...]) -> dict[str, dict[int, stats.Interval | None]]:
        key = (counts, js, measures)
        table = self._memo.get(key)
        if table is None:
            table = self._memo[key] = stats.bootstrap_table(counts, js, measures, resamples=self.resamples)
        return table

    def _intervals(self, tasks: Sequence[TaskSummary]) -> dict[str, dict[int, stats.Interval | None]]:
        """Per measure and j, the group's bootstrap interval, once per distinct set of counts:
        every task as counted (pass@j, and pass^j wherever no failing task is short of j),
        then pass^j at the j where a failing task counts as 0."""
        js = tuple(int(j) for j in self.js)
        plain = self._counts_at(tasks, 0)
        table = self._table(plain, js, ("pass_hat", "pass_at"))
        out = {"pass_hat": dict(table["pass_hat"]), "pass_at": table["pass_at"]}
        failing_at: dict[tuple[tuple[int, int], ...], list[int]] = {}
        for j in js:
            counts = self._counts_at(tasks, j)
            if counts != plain:
                failing_at.setdefault(counts, []).append(j)
        for counts, at_js in failing_at.items():
            out["pass_hat"].update(self._table(counts, tuple(at_js), ("pass_hat",))["pass_hat"])
        return out

    def score(self, tasks: Sequence[TaskSummary]) -> Score:
        """The group's score; the means add the tasks up in the order given. A group of
        one task has that task's intervals: resampling one task can only redraw its
        trials at its observed rate, which says nothing at 0/n or n/n."""
        js = self.js
        hat = {j: _mean(e["pass_hat"][j] for e in tasks) for j in js}
        at = {j: _mean(e.get("pass_at", {}).get(j) for e in tasks) for j in js}
        if len(tasks) == 1:
            hat_ci, at_ci = dict(tasks[0].get("pass_hat_ci") or {}), dict(tasks[0].get("pass_at_ci") or {})
        else:
            # the bootstrap redraws trials at each task's observed rate, so its intervals sit
            # around the plug-in rate^j, while the estimate at j near n is the unbiased one
            # (a task 3 of 4 counts 0 in pass^4): each is stretched to hold its estimate
            table = self._intervals(tasks)
            hat_ci = {j: _around(table["pass_hat"][int(j)], hat[j]) for j in js}
            at_ci = {j: _around(table["pass_at"][int(j)], at[j]) for j in js}
        score: Score = {
            "tasks": len(tasks),
            "pass_hat": hat,
            "pass_hat_ci": hat_ci,
            "pass_hat_tasks": {j: sum(e["graded"] >= int(j) or self._fails(e) for e in tasks) for j in js},
            "pass_at": at,
            "pass_at_ci": at_ci,
        }
        at_tasks = {j: sum(e["graded"] >= int(j) for e in tasks) for j in js}
        if at_tasks != score["pass_hat_tasks"]:
            score["pass_at_tasks"] = at_tasks
        return score


def _tag_key(tag: str, domain: str, shared: Iterable[str], multi: bool) -> str:
    """The name a task's tag is scored under: ``tag``, or ``domain/tag`` in a run of several
    domains unless the task's domain declares the tag shared (then pooled across domains)."""
    return f"{domain}/{tag}" if multi and tag not in shared else tag


def _tag_groups(entries: Sequence[tuple[TaskSummary, Sequence[str]]], multi: bool) -> dict[str, list[TaskSummary]]:
    """Per tag as scored (see :func:`_tag_key`), sorted, the tasks that have it, in order.
    ``entries`` pairs each task with its shared tags."""
    groups: dict[str, list[TaskSummary]] = {}
    for e, shared in entries:
        for tag in e["tags"]:
            groups.setdefault(_tag_key(tag, e["domain"], shared, multi), []).append(e)
    return {key: groups[key] for key in sorted(groups)}


def _tag_score(score: Score, key: str, tasks: Sequence[TaskSummary]) -> TagScore:
    """A tag's score, naming its domain when it is scoped to one."""
    tag: TagScore = {**score}  # type: ignore[typeddict-item]
    domain = key.partition("/")[0]
    if "/" in key and all(e["domain"] == domain for e in tasks):
        tag["domain"] = domain
    return tag


def find_tag(tags: Mapping[str, Any], tag: str) -> tuple[str | None, list[str]]:
    """Where ``tag`` (as a user gives it, e.g. to ``--sandtable-floor``) is scored in
    ``summary.tags``: ``(key, [])`` for the tag itself, or for its one domain-scoped form
    ``domain/tag`` when only one domain has it (a run of several domains scores a tag
    that is not shared per domain); ``(None, [keys...])`` when several domains have it,
    naming the forms to choose from; ``(None, [])`` when no task has it."""
    if tag in tags:
        return tag, []
    scoped = sorted(key for key in tags if key.partition("/")[2] == tag and "/" in key)
    if len(scoped) == 1:
        return scoped[0], []
    return None, scoped


# --------------------------------------------------------------------------- failure modes and soft rules


def _owner_order(counts: Mapping[str, int]) -> list[str]:
    """Owners, most trials first, then agent, task, user."""
    rank = {o: i for i, o in enumerate(OWNERS)}
    return sorted(counts, key=lambda o: (-counts[o], rank.get(o, len(rank)), o))


def _owner(t: TrialResult) -> str | None:
    """The likely owner of a failed trial, when it was attributed."""
    a = t.attribution
    owner = a.get("owner") if isinstance(a, Mapping) else None
    return owner if isinstance(owner, str) and owner else None


def _failed(trials: Iterable[TrialResult]) -> list[TrialResult]:
    return [t for t in trials if t.verdict not in (PASSED, ERRORED)]


def failure_modes(trials: Iterable[TrialResult]) -> list[FailureMode]:
    """Failed checks of graded trials grouped by ``(kind, id)``, most frequent first, each
    with the tasks it hit, its first occurrence as an example and the likely owners of
    its trials (owner -> trials; the trials attributed to no one are left out)."""
    modes: dict[tuple[str, str], FailureMode] = {}
    owners: dict[tuple[str, str], dict[str, int]] = {}
    for t in _graded(trials):
        owner = _owner(t)
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
            if owner is not None:
                by_owner = owners.setdefault((c.kind, c.id), {})
                by_owner[owner] = by_owner.get(owner, 0) + 1
    for key, m in modes.items():
        by_owner = owners.get(key, {})
        m["owners"] = {o: by_owner[o] for o in _owner_order(by_owner)}
    return sorted(modes.values(), key=lambda m: (-m["trials"], m["kind"], m["id"]))


def owner_clusters(trials: Iterable[TrialResult], names: Mapping[_TaskKey, str]) -> list[OwnerCluster]:
    """The failed trials by likely owner, most trials first: how many, and which tasks
    (by name, as the tables show them). Failed trials attributed to no one are in none."""
    trials_of: dict[str, int] = {}
    tasks_of: dict[str, list[str]] = {}
    for t in _failed(trials):
        owner = _owner(t)
        if owner is None:
            continue
        trials_of[owner] = trials_of.get(owner, 0) + 1
        name = names.get((t.domain, _file(t), t.task), t.task)
        tasks = tasks_of.setdefault(owner, [])
        if name not in tasks:
            tasks.append(name)
    return [{"owner": o, "trials": trials_of[o], "tasks": tasks_of[o]} for o in _owner_order(trials_of)]


def pending_items(trials: Iterable[TrialResult]) -> list[PendingItem]:
    """The drafted items (tasks, rules) nobody has accepted yet that trials ran under, by
    domain, kind and id, with how many trials ran under each. Any makes the run
    provisional."""
    count: dict[tuple[str, str, str], int] = {}
    for t in trials:
        for p in t.pending or ():
            key = (t.domain, str(p.get("kind", "")), str(p.get("id", "")))
            count[key] = count.get(key, 0) + 1
    return [{"domain": d, "kind": k, "id": i, "trials": count[(d, k, i)]} for d, k, i in sorted(count)]


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
    """Estimated cost at list prices per side and model (None where the price is unknown),
    and what prompt caching saved when any model used a cache (``cache_saving``)."""
    from .prices import all_prices, builtin_prices_as_of, estimate_cost
    from .usage import cache_saving

    table = prices if prices is not None else all_prices(None)
    agent = estimate_cost(usage.get("agent") or {}, table)
    user = estimate_cost(usage.get("user") or {}, table)
    costs = [*agent.items(), *user.items()]
    cost: Cost = {
        "currency": "USD",
        "prices_as_of": builtin_prices_as_of(),
        "agent": agent,
        "user": user,
        "total": sum((c for _, c in costs if c is not None), 0.0),
        "unpriced": sorted({str(model) for model, c in costs if c is None}),
    }
    saving = cache_saving(usage, table)
    if saving is not None:
        cost["cache_saving"] = saving
    return cost


def _with_replayed(cost: Cost, trials: Sequence[TrialResult],
                   prices: Mapping[str, Mapping[str, float]] | None) -> Cost:
    """``cost`` with ``replayed`` when some trials were replayed from recordings: their
    recorded usage priced as if live, and what the run cost now (replays cost nothing)."""
    replayed = [t for t in trials if t.replayed]
    if replayed:
        live = cost_summary(usage_totals(replayed), prices)["total"]
        cost["replayed"] = {"trials": len(replayed), "live": live, "now": max(cost["total"] - live, 0.0)}
    return cost


def latency(trials: Iterable[TrialResult]) -> Latency:
    """Agent turn latency over all trials: how many turns, p50 and p95 in seconds."""
    lat = [x for t in trials for x in t.latency]
    return {"turns": len(lat), "p50": _percentile(lat, 0.5), "p95": _percentile(lat, 0.95)}


# --------------------------------------------------------------------------- the summary


def _score_all(
    entries: Sequence[tuple[TaskSummary, Sequence[str]]], js: Sequence[str],
    failing: Collection[tuple[str, str]] = (),
) -> tuple[Score, dict[str, TagScore], dict[str, Score] | None, int]:
    """The overall score, per tag, per domain (None with one domain), and the bootstrap
    resamples they took. ``entries`` pairs each task, in the order of its first trial,
    with its shared tags."""
    tasks = [e for e, _ in entries]
    domains: dict[str, list[TaskSummary]] = {}
    for e in tasks:
        domains.setdefault(e["domain"], []).append(e)
    multi = len(domains) > 1
    tag_groups = _tag_groups(entries, multi)
    groups = [tasks, *tag_groups.values(), *(domains.values() if multi else ())]
    resamples = _resamples(groups, js)
    scorer = _Scorer(js, resamples, failing)
    overall = scorer.score(tasks)
    tags = {key: _tag_score(scorer.score(ts), key, ts) for key, ts in tag_groups.items()}
    by_domain = {d: scorer.score(domains[d]) for d in sorted(domains)} if multi else None
    return overall, tags, by_domain, resamples


def _interval_method(resamples: int) -> IntervalMethod:
    return {"level": 0.95, "task": "wilson", "aggregate": "two-level bootstrap", "resamples": resamples,
            "seed": stats.BOOTSTRAP_SEED}


def summarize(
    trials: Iterable[TrialResult], k: int | None = None, prices: Mapping[str, Mapping[str, float]] | None = None,
    failing: Collection[tuple[str, str]] = (),
) -> Summary:
    """The run's figures. ``prices`` (model -> per-million-token prices) defaults to the
    built-in list prices; models without a price get a cost of None ("n/a"). ``failing``:
    the (domain, task) of the tasks an adaptive run settled unreliable; each counts as
    failing in pass^j at every j past its graded trials, where another task is left out (a
    task stopped for failing must not drop out of the headline); its pass@j is left out
    there as another task's is."""
    trials = order_trials(trials)
    k = k or max((t.trial for t in trials), default=1)
    by_task = _trials_by_task(trials)
    js = pass_hat_js(by_task, k)
    names = _task_names(by_task)
    # the averages add the tasks up in the order of their trials; the table lists the worst first
    failing = frozenset(failing)
    entries = [(_task_summary(names[key], ts, js, (key[0], key[2]) in failing), list(ts[0].shared_tags or ()))
               for key, ts in by_task.items()]
    tasks = [e for e, _ in entries]
    overall, tags, by_domain, resamples = _score_all(entries, js, failing)
    errored = errored_trials(trials)
    usage = usage_totals(trials)
    summary: Summary = {
        "k": k,
        "trials": len(trials),
        "passed": sum(t.verdict == PASSED for t in trials),
        "failed": len(_failed(trials)),
        "errored": len(errored),
        "errored_trials": errored,
        "pass_hat": overall["pass_hat"],
        "pass_hat_ci": overall["pass_hat_ci"],
        "pass_hat_tasks": overall["pass_hat_tasks"],
        "pass_at": overall["pass_at"],
        "pass_at_ci": overall["pass_at_ci"],
        "tags": tags,
        "tasks": _critical_then_worst(tasks),
        "failure_modes": failure_modes(trials),
        "owners": owner_clusters(trials, names),
        "provisional": pending_items(trials),
        "soft_rules": soft_rules(trials),
        "usage": usage,
        "cost": _with_replayed(cost_summary(usage, prices), trials, prices),
        "latency": latency(trials),
        "agents": sorted({t.agent for t in trials}),
        "users": sorted({t.user for t in trials}),
        "domains": sorted({t.domain for t in trials}),
        "intervals": _interval_method(resamples),
    }
    if "pass_at_tasks" in overall:
        summary["pass_at_tasks"] = overall["pass_at_tasks"]
    if by_domain is not None:
        summary["domain_scores"] = by_domain
    return summary
