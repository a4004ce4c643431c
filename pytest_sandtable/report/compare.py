"""Did this change make the agent better or worse? Two or more runs, compared.

:func:`compare` puts a new run beside a baseline, task by task (matched by domain
name and task id): each task's passes of its graded trials before and after, what
its verdict became (``newly failing``, ``fixed``, ``newly flaky``, ...), and whether
the change is beyond chance (one-sided Fisher exact tests, both directions, at the
level ``alpha``); then pass^j over the tasks in both runs, overall and per tag, with
the 95% interval of each change (a paired bootstrap over tasks); failure modes that
appeared or vanished; usage and cost; and, when a domain file changed between the
runs, which tasks were added or removed. :func:`leaderboard` ranks three or more runs.

:func:`regression_checks` turns a comparison into gate checks, the one rule both the
pytest gate (``--sandtable-fail-on-regression``) and ``compare --fail-on-regression``
apply: a task's drop beyond chance, any drop of a critical task, or (with a maximum
drop given) overall pass^k falling by more than that many points.

The renderers (:func:`terminal_lines`, :func:`markdown`, :func:`as_json`) return text
and documents; nothing here prints, and the only I/O is reading results files through
:func:`~pytest_sandtable.report.reading.open_results` (:func:`read_runs`: one trial at a
time, each kept as light as a comparison needs). The methods, and why, are in docs/ci.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from .fmt import format_cost, number, one_line, pct, pct_range, plural, points, secs
from .gates import GateCheck
from .reading import open_results
from .results_json import RESULTS_FILE
from .stats import Interval, bootstrap_differences, bootstrap_intervals, fisher_greater, fisher_less, pass_hat
from .summary import task_verdict

__all__ = [
    "DEFAULT_ALPHA",
    "CompareError",
    "Comparison",
    "LeaderRow",
    "RunDoc",
    "TaskChange",
    "as_json",
    "compare",
    "compare_all",
    "headline",
    "leaderboard",
    "light_trial",
    "markdown",
    "p_value",
    "parse_alpha",
    "read_runs",
    "regression_checks",
    "summary_lines",
    "terminal_lines",
]

DEFAULT_ALPHA = 0.05
JSON_FORMAT = "pytest-sandtable compare"
JSON_VERSION = 1

# what a task's verdict became, by (verdict before, verdict after)
_CHANGES: Mapping[tuple[str, str], str] = {
    ("passed", "passed"): "still passing",
    ("passed", "flaky"): "newly flaky",
    ("passed", "failed"): "newly failing",
    ("flaky", "passed"): "fixed",
    ("flaky", "flaky"): "still flaky",
    ("flaky", "failed"): "now always failing",
    ("failed", "passed"): "fixed",
    ("failed", "flaky"): "partly fixed",
    ("failed", "failed"): "still failing",
}
_UNCHANGED = frozenset({"still passing", "still flaky", "still failing"})
ADDED, REMOVED, NOT_GRADED = "added", "removed", "not graded"
REGRESSED, IMPROVED = "regressed", "improved"
# why the regression rule counts a task (TaskChange.regression)
BEYOND_CHANCE, CRITICAL = "beyond chance", "critical"


class CompareError(Exception):
    """Runs that cannot be compared (no domain or task in common), or a bad option value."""


@dataclass(frozen=True)
class RunDoc:
    """One run to compare: how to call it, the path it was read from (as given), its results.json."""

    label: str
    path: str
    doc: Mapping[str, Any]


@dataclass(frozen=True)
class Counts:
    """One task's trials in one run: ``passed`` of ``graded`` (errored trials are not graded)."""

    passed: int
    graded: int
    errored: int

    @property
    def verdict(self) -> str:
        return task_verdict(self.graded, self.passed)

    def text(self) -> str:
        """``2/8``, with ``+1 errored`` when some trials were not graded."""
        return f"{self.passed}/{self.graded}" + (f" +{self.errored} errored" if self.errored else "")

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "graded": self.graded, "errored": self.errored, "verdict": self.verdict}


@dataclass(frozen=True)
class TaskChange:
    """One task, before and after. ``base`` or ``new`` is None for a task only one run has.

    ``p_drop`` is the one-sided Fisher p-value of the new run having this few passes
    or fewer if both runs shared one success rate; ``p_rise`` the same the other way.
    ``beyond_chance`` is ``regressed`` or ``improved`` when that p-value is below the
    comparison's alpha, else None. :attr:`regression` says whether, and by which part
    of the regression rule, the task regressed."""

    domain: str
    task: str
    name: str
    critical: bool
    tags: tuple[str, ...]
    base: Counts | None
    new: Counts | None
    change: str
    p_drop: float | None
    p_rise: float | None
    beyond_chance: str | None

    @property
    def compared(self) -> bool:
        """Both runs graded at least one trial of it: only then is there a rate to compare."""
        return self.base is not None and self.new is not None and self.base.graded > 0 and self.new.graded > 0

    @property
    def dropped(self) -> bool:
        """A lower success rate than in the baseline (exact: c'/n' < c/n as c'n < cn')."""
        if not self.compared:
            return False
        assert self.base is not None and self.new is not None
        return self.new.passed * self.base.graded < self.base.passed * self.new.graded

    @property
    def regression(self) -> str | None:
        """Whether the regression rule counts this task as regressed, and by which part:
        ``beyond chance`` (its drop is), ``critical`` (a critical task whose success rate
        dropped at all, but not beyond chance: 8/8 to 7/8), None when it did not regress."""
        if self.beyond_chance == REGRESSED:
            return BEYOND_CHANCE
        return CRITICAL if self.critical and self.dropped else None

    @property
    def noteworthy(self) -> bool:
        """Shown among the changed tasks: a verdict that changed, a change beyond chance,
        or a regression."""
        return self.change not in _UNCHANGED or self.beyond_chance is not None or self.regression is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain, "task": self.task, "name": self.name, "critical": self.critical,
            "tags": list(self.tags),
            "base": self.base.to_dict() if self.base else None,
            "new": self.new.to_dict() if self.new else None,
            "change": self.change, "p_drop": self.p_drop, "p_rise": self.p_rise,
            "beyond_chance": self.beyond_chance, "regression": self.regression,
        }


@dataclass(frozen=True)
class Delta:
    """pass^j in both runs over the same tasks, and the 95% interval of the change."""

    tasks: int  # tasks with at least j graded trials in both runs
    base: float | None
    new: float | None
    interval: Interval | None

    @property
    def change(self) -> float | None:
        return None if self.base is None or self.new is None else self.new - self.base

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "base": self.base, "new": self.new, "change": self.change,
                "interval": list(self.interval) if self.interval else None}


@dataclass(frozen=True)
class Scores:
    """pass^j changes for j = 1..k over a set of tasks (all of them, or one tag's)."""

    tasks: int
    js: dict[int, Delta]

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "pass_hat": {str(j): d.to_dict() for j, d in self.js.items()}}


@dataclass(frozen=True)
class ModeChange:
    """A failure mode (failed check ``(kind, id)``) in how many graded trials of the tasks
    in both runs, before and after; ``example`` is one failing trial's detail."""

    kind: str
    id: str
    base: int
    new: int
    example: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "base_trials": self.base, "new_trials": self.new,
                "example": self.example}


@dataclass(frozen=True)
class DomainChange:
    """One domain in either run: its file's sha256 in each (None: not in that run), and
    the task ids only one run has."""

    name: str
    base_sha256: tuple[str, ...]
    new_sha256: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.base_sha256) and bool(self.new_sha256) and set(self.base_sha256) != set(self.new_sha256)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "base_sha256": list(self.base_sha256), "new_sha256": list(self.new_sha256),
                "changed": self.changed, "tasks_added": list(self.added), "tasks_removed": list(self.removed)}


@dataclass(frozen=True)
class Spend:
    """What one whole run used: trials, tokens (summed over sides and models) and the
    estimated cost (``summary.cost.total``; None when the file has none)."""

    trials: int
    tokens: dict[str, int]
    cost: float | None

    @property
    def cost_per_trial(self) -> float | None:
        return None if self.cost is None or not self.trials else self.cost / self.trials

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "tokens": dict(self.tokens), "cost": self.cost,
                "cost_per_trial": self.cost_per_trial}


@dataclass(frozen=True)
class Comparison:
    """A new run against a baseline (see the module docstring)."""

    base: RunDoc
    new: RunDoc
    alpha: float
    k: int  # pass^j is compared for j = 1..k (the smaller k of the two runs)
    tasks: list[TaskChange]
    overall: Scores
    tags: dict[str, Scores]
    modes: list[ModeChange]
    domains: list[DomainChange]
    spend: tuple[Spend, Spend]
    notes: list[str] = field(default_factory=list)

    @property
    def matched(self) -> list[TaskChange]:
        """The tasks both runs have."""
        return [t for t in self.tasks if t.base is not None and t.new is not None]

    @property
    def added(self) -> list[TaskChange]:
        return [t for t in self.tasks if t.base is None]

    @property
    def removed(self) -> list[TaskChange]:
        return [t for t in self.tasks if t.new is None]


@dataclass(frozen=True)
class LeaderRow:
    """One run of a leaderboard: pass^j (with its 95% interval) over the tasks every run
    has, and the whole run's cost per trial and agent turn p95 latency."""

    label: str
    path: str
    tasks: int
    trials: int
    pass_hat: dict[int, tuple[float | None, Interval | None]]
    cost_per_trial: float | None
    p95: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "path": self.path, "tasks": self.tasks, "trials": self.trials,
                "pass_hat": {str(j): {"value": v, "interval": list(i) if i else None}
                             for j, (v, i) in self.pass_hat.items()},
                "cost_per_trial": self.cost_per_trial, "p95_latency": self.p95}


# --------------------------------------------------------------------------- reading


def read_runs(paths: Sequence[str]) -> list[RunDoc]:
    """Read each results.json (or run folder), labelled for tables (see :func:`labels`),
    its trials read one at a time and kept as :func:`light_trial` has them. Raises
    :class:`~pytest_sandtable.report.results_json.ResultsError` naming the file:
    missing, unreadable, not a results.json, or of another schema major version."""
    docs = [(p, _read_light(p)) for p in paths]
    return [RunDoc(label, p, doc) for (p, doc), label in zip(docs, labels(docs), strict=True)]


# what a comparison reads of a trial (_tasks_of); the transcript, calls and diff are most of it
_COMPARED = ("domain", "task", "trial", "verdict", "critical", "tags", "shared_tags")


def light_trial(trial: Mapping[str, Any]) -> dict[str, Any]:
    """A stored trial with only what a comparison reads: who it is, its verdict, tags
    and critical flag, and its failed checks (the failure modes); a few hundred bytes
    in place of a transcript's kilobytes."""
    light = {name: trial[name] for name in _COMPARED if name in trial}
    light["checks"] = [c for c in trial.get("checks") or [] if not c.get("passed")]
    return light


def _read_light(path: str) -> dict[str, Any]:
    """A checked results.json whose trials are light (:func:`light_trial`), read one at a
    time when the file is in the layout the writer writes (:mod:`.reading`)."""
    with open_results(path) as stored:
        return {**stored.doc, "trials": [light_trial(t) for t in stored.trials()]}


def labels(docs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Each run's label: the agent it ran (``summary.agents``, else ``run.agent``); the
    file's name when two runs share an agent (a run folder's name for ``.../results.json``);
    the path as given when those repeat too."""
    agents = [", ".join((d.get("summary") or {}).get("agents") or []) or str(d["run"]["agent"]) for _, d in docs]
    if len(set(agents)) == len(agents):
        return agents
    names = [_file_name(p) for p, _ in docs]
    return names if len(set(names)) == len(names) else [p for p, _ in docs]


def _file_name(path: str) -> str:
    p = Path(path)
    if p.name == RESULTS_FILE and p.parent.name:
        return p.parent.name
    return p.name or path


# --------------------------------------------------------------------------- per task


_Key = tuple[str, str]  # (domain, task)


@dataclass
class _Task:
    passed: int = 0
    graded: int = 0
    errored: int = 0
    critical: bool = False
    tags: tuple[str, ...] = ()
    shared: frozenset[str] = frozenset()
    modes: dict[tuple[str, str], str] = field(default_factory=dict)  # failed (kind, id) -> an example
    mode_trials: dict[tuple[str, str], int] = field(default_factory=dict)

    def counts(self) -> Counts:
        return Counts(self.passed, self.graded, self.errored)


def _tasks_of(doc: Mapping[str, Any]) -> dict[_Key, _Task]:
    """Each task's counts and failed checks, from ``trials[]`` (graded = not errored), in
    the order of the file's trials."""
    tasks: dict[_Key, _Task] = {}
    for t in doc.get("trials") or []:
        key = (str(t["domain"]), str(t["task"]))
        acc = tasks.get(key)
        if acc is None:
            acc = tasks[key] = _Task(critical=bool(t.get("critical")), tags=tuple(t.get("tags") or ()),
                                     shared=frozenset(t.get("shared_tags") or ()))
        if t.get("verdict") == "errored":
            acc.errored += 1
            continue
        acc.graded += 1
        if t.get("verdict") == "passed":
            acc.passed += 1
        seen: set[tuple[str, str]] = set()
        for c in t.get("checks") or []:
            if c.get("passed") or c.get("counted") is False:  # (issue 22: not counted: no failure mode)
                continue
            mode = (str(c.get("kind", "")), str(c.get("id", "")))
            if mode in seen:
                continue
            seen.add(mode)
            acc.mode_trials[mode] = acc.mode_trials.get(mode, 0) + 1
            acc.modes.setdefault(mode, f"{key[1]}[{t.get('trial')}]: {c.get('detail', '')}")
    return tasks


def _change(base: Counts | None, new: Counts | None) -> str:
    if base is None:
        return ADDED
    if new is None:
        return REMOVED
    if not base.graded or not new.graded:
        return NOT_GRADED
    return _CHANGES[(base.verdict, new.verdict)]


def _task_change(key: _Key, name: str, b: _Task | None, n: _Task | None, alpha: float) -> TaskChange:
    base, new = (b.counts() if b else None), (n.counts() if n else None)
    p_drop = p_rise = None
    beyond: str | None = None
    if base is not None and new is not None and base.graded and new.graded:
        p_drop = fisher_less(base.passed, base.graded, new.passed, new.graded)
        p_rise = fisher_greater(base.passed, base.graded, new.passed, new.graded)
        beyond = REGRESSED if p_drop < alpha else IMPROVED if p_rise < alpha else None
    info = n or b
    assert info is not None
    return TaskChange(domain=key[0], task=key[1], name=name, critical=info.critical, tags=info.tags,
                      base=base, new=new, change=_change(base, new), p_drop=p_drop, p_rise=p_rise,
                      beyond_chance=beyond)


# --------------------------------------------------------------------------- pass^j changes


def _scores(pairs: Sequence[tuple[Counts, Counts]], k: int) -> Scores:
    """pass^j before and after over the tasks with at least j graded trials in both runs,
    and the paired bootstrap interval of each change."""
    js = list(range(1, k + 1))
    counts = [((b.passed, b.graded), (n.passed, n.graded)) for b, n in pairs]
    intervals = bootstrap_differences([b for b, _ in counts], [n for _, n in counts], js)
    out: dict[int, Delta] = {}
    for j in js:
        kept = [(b, n) for b, n in counts if b[1] >= j and n[1] >= j]
        base = _mean(pass_hat(c, m, j) for c, m in (b for b, _ in kept))
        new = _mean(pass_hat(c, m, j) for c, m in (n for _, n in kept))
        out[j] = Delta(len(kept), base, new, intervals[j])
    return Scores(len(pairs), out)


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _tag_names(change: TaskChange, info: _Task, multi: bool) -> list[str]:
    """The task's tags as scores name them: ``domain/tag`` when several domains are
    compared, unless the domain declares the tag shared across domains."""
    return [t if not multi or t in info.shared else f"{change.domain}/{t}" for t in change.tags]


# --------------------------------------------------------------------------- domains, spend


def _domain_shas(doc: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    out: dict[str, set[str]] = {}
    for d in doc["run"].get("domains") or []:
        out.setdefault(str(d["name"]), set()).add(str(d.get("sha256") or ""))
    return {name: tuple(sorted(s)) for name, s in out.items()}


def _domains(base: Mapping[str, Any], new: Mapping[str, Any], bt: Mapping[_Key, _Task],
             nt: Mapping[_Key, _Task]) -> list[DomainChange]:
    bs, ns = _domain_shas(base), _domain_shas(new)
    names = sorted(set(bs) | set(ns) | {d for d, _ in bt} | {d for d, _ in nt})
    out = []
    for name in names:
        before = [t for d, t in bt if d == name]
        after = [t for d, t in nt if d == name]
        out.append(DomainChange(name, bs.get(name, ()), ns.get(name, ()),
                                added=tuple(t for t in after if t not in set(before)) if before else (),
                                removed=tuple(t for t in before if t not in set(after)) if after else ()))
    return out


def _spend(doc: Mapping[str, Any]) -> Spend:
    summary = doc.get("summary") or {}
    tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
    for side in ("agent", "user"):
        for counters in ((summary.get("usage") or {}).get(side) or {}).values():
            for name in tokens:
                value = counters.get(name) if isinstance(counters, Mapping) else None
                if isinstance(value, int) and not isinstance(value, bool):
                    tokens[name] += value
    cost = summary.get("cost")
    total = cost.get("total") if isinstance(cost, Mapping) else None
    known = isinstance(total, (int, float)) and not isinstance(total, bool) and math.isfinite(total)
    return Spend(len(doc.get("trials") or []), tokens, float(total) if known and total is not None else None)


# --------------------------------------------------------------------------- compare


def _domain_list(doc: Mapping[str, Any], tasks: Mapping[_Key, _Task]) -> str:
    names = sorted({d for d, _ in tasks} | set(_domain_shas(doc)))
    return ", ".join(names) or "none"


def compare(base: RunDoc, new: RunDoc, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """``new`` against ``base`` (see the module docstring). Raises :class:`CompareError`
    when the runs have no domain in common, or no task of a common domain."""
    bt, nt = _tasks_of(base.doc), _tasks_of(new.doc)
    common_domains = {d for d, _ in bt} & {d for d, _ in nt}
    if not common_domains:
        raise CompareError(f"{base.path} and {new.path} have no domain in common ({base.path}: "
                           f"{_domain_list(base.doc, bt)}; {new.path}: {_domain_list(new.doc, nt)})")
    if not set(bt) & set(nt):
        shown = ", ".join(sorted(common_domains))
        raise CompareError(f"{base.path} and {new.path} have no task in common (domain {shown}: "
                           f"{base.path} ran {_task_list(bt, common_domains)}; {new.path} ran "
                           f"{_task_list(nt, common_domains)})")
    multi = len(common_domains) > 1
    keys = [*bt, *(key for key in nt if key not in bt)]
    changes = [_task_change(key, f"{key[0]}/{key[1]}" if multi else key[1], bt.get(key), nt.get(key), alpha)
               for key in keys if key[0] in common_domains]
    k = max(1, min(int(base.doc["run"]["k"]), int(new.doc["run"]["k"])))
    matched = [c for c in changes if c.base is not None and c.new is not None]
    overall = _scores([(c.base, c.new) for c in matched if c.base and c.new], k)
    by_tag: dict[str, list[tuple[Counts, Counts]]] = {}
    for c in matched:
        info = nt[(c.domain, c.task)]
        for tag in _tag_names(c, info, multi):
            assert c.base is not None and c.new is not None
            by_tag.setdefault(tag, []).append((c.base, c.new))
    tags = {tag: _scores(by_tag[tag], k) for tag in sorted(by_tag)}
    return Comparison(
        base=base, new=new, alpha=alpha, k=k, tasks=changes, overall=overall, tags=tags,
        modes=_modes([bt[(c.domain, c.task)] for c in matched], [nt[(c.domain, c.task)] for c in matched]),
        domains=_domains(base.doc, new.doc, bt, nt),
        spend=(_spend(base.doc), _spend(new.doc)),
        notes=_notes(base, new, bt, nt, common_domains),
    )


def _task_list(tasks: Mapping[_Key, _Task], domains: set[str]) -> str:
    ids = [t for d, t in tasks if d in domains]
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return shown or "no task"


def _modes(base: Sequence[_Task], new: Sequence[_Task]) -> list[ModeChange]:
    """Failure modes over the tasks in both runs: trials each mode hit before and after,
    new ones first, then vanished ones, then the rest by how many trials they hit."""
    counts: dict[tuple[str, str], list[int]] = {}
    examples: dict[tuple[str, str], str] = {}
    for side, tasks in ((0, base), (1, new)):
        for t in tasks:
            for mode, n in t.mode_trials.items():
                counts.setdefault(mode, [0, 0])[side] += n
                if side == 1 or mode not in examples:
                    examples[mode] = t.modes[mode]
    changes = [ModeChange(kind, mid, b, n, examples[(kind, mid)]) for (kind, mid), (b, n) in counts.items()]
    return sorted(changes, key=lambda m: (0 if not m.base else 1 if not m.new else 2, -max(m.base, m.new),
                                          m.kind, m.id))


def _notes(base: RunDoc, new: RunDoc, bt: Mapping[_Key, _Task], nt: Mapping[_Key, _Task],
           common: set[str]) -> list[str]:
    """What a reader must know to trust the figures: domains only one run has, runs that
    stopped early or lost domain files, different k."""
    notes = []
    for run, tasks, other in ((base, bt, nt), (new, nt, bt)):
        only = sorted({d for d, _ in tasks} - {d for d, _ in other})
        if only:
            n = sum(1 for d, _ in tasks if d in only)
            notes.append(f"{run.path} also ran domain {', '.join(only)} ({plural(n, 'task')}), not compared")
        stopped = run.doc["run"].get("stopped_early")
        if stopped:
            notes.append(f"{run.path} stopped early ({stopped}): it covers only the trials that ran")
        broken = run.doc["run"].get("collection_errors") or []
        if broken:
            notes.append(f"{run.path}: {plural(len(broken), 'domain file')} did not load: "
                         f"{', '.join(str(c.get('path')) for c in broken)}")
    kb, kn = int(base.doc["run"]["k"]), int(new.doc["run"]["k"])
    if kb != kn:
        notes.append(f"the runs have different k ({kb} and {kn}): pass^j is compared for j up to {min(kb, kn)}")
    return notes


def compare_all(runs: Sequence[RunDoc], alpha: float = DEFAULT_ALPHA) -> list[Comparison]:
    """Every run after the first against the first (the baseline)."""
    return [compare(runs[0], run, alpha) for run in runs[1:]]


def leaderboard(runs: Sequence[RunDoc]) -> list[LeaderRow]:
    """One row per run, in the order given: pass^1..k (k the largest of the runs) with
    95% intervals (the two-level bootstrap over tasks) over the tasks every run has, so
    that rows are comparable. Raises :class:`CompareError` when no task is in every run."""
    per_run = [_tasks_of(r.doc) for r in runs]
    common = set(per_run[0]).intersection(*per_run[1:])
    if not common:
        raise CompareError(f"no task is in every run ({', '.join(r.path for r in runs)}): "
                           "a leaderboard ranks runs over the same tasks")
    k = max(int(r.doc["run"]["k"]) for r in runs)
    js = list(range(1, k + 1))
    rows = []
    for run, tasks in zip(runs, per_run, strict=True):
        counts = [(tasks[key].passed, tasks[key].graded) for key in tasks if key in common]
        intervals = bootstrap_intervals(counts, js)
        values = {j: (_mean(pass_hat(c, n, j) for c, n in counts), intervals[j]) for j in js}
        spend = _spend(run.doc)
        lat = (run.doc.get("summary") or {}).get("latency") or {}
        p95 = lat.get("p95")
        rows.append(LeaderRow(run.label, run.path, len(counts), sum(tasks[key].graded + tasks[key].errored
                                                                     for key in tasks if key in common),
                              values, spend.cost_per_trial, float(p95) if isinstance(p95, (int, float)) else None))
    return rows


# --------------------------------------------------------------------------- the regression rule


def p_value(p: float) -> str:
    """A p-value with two significant digits (``0.0035``, ``0.5``); ``<0.0001`` below that."""
    return "<0.0001" if p < 0.0001 else f"{p:.2g}"


def parse_alpha(raw: str | float | None, option: str) -> float:
    """The significance level, strictly between 0 and 1 (default 0.05). A value from 1 to
    50 is refused as a likely percentage, with a did-you-mean. Raises :class:`CompareError`
    naming ``option``."""
    if raw is None:
        return DEFAULT_ALPHA
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise CompareError(f"{option}: expected a level between 0 and 1, e.g. 0.05, got {raw!r}") from None
    if math.isfinite(value) and 1 <= value <= 50:
        raise CompareError(f"{option} takes a level between 0 and 1: did you mean {number(value / 100)}?")
    if not math.isfinite(value) or not 0 < value < 1:
        raise CompareError(f"{option}: expected a level between 0 and 1, e.g. 0.05, got {raw!r}")
    return value


def regression_checks(cmp: Comparison, max_drop: float | None = None,
                      max_drop_option: str = "--sandtable-max-drop") -> list[GateCheck]:
    """The gate's checks for this comparison, failures first: each task whose drop is
    beyond chance (one-sided Fisher p below alpha), each critical task with a lower
    success rate at all, and, with ``max_drop`` (points), pass^k over the tasks in both
    runs falling by more than that. One passing check when no task regressed."""
    alpha = number(cmp.alpha)
    checks = []
    for t in cmp.matched:
        if not t.compared:
            continue
        assert t.base is not None and t.new is not None and t.p_drop is not None
        moved = f"from {t.base.passed}/{t.base.graded} to {t.new.passed}/{t.new.graded}"
        if t.regression == BEYOND_CHANCE:
            checks.append(GateCheck(False, f"task {t.name} regressed {moved} (p={p_value(t.p_drop)} < {alpha})"))
        elif t.regression == CRITICAL:
            checks.append(GateCheck(False, f"critical task {t.name} regressed {moved} "
                                           f"(p={p_value(t.p_drop)}; a critical task may not drop at all)"))
    if not checks:
        n = sum(t.compared for t in cmp.matched)
        checks.append(GateCheck(True, f"no regression from the baseline: {plural(n, 'task')} in common, none "
                                      f"dropped beyond chance (one-sided Fisher exact test, p < {alpha}) and no "
                                      "critical task dropped"))
    if max_drop is not None:
        checks.append(_max_drop_check(cmp, max_drop, max_drop_option))
    return [c for c in checks if not c.passed] + [c for c in checks if c.passed]


def _max_drop_check(cmp: Comparison, max_drop: float, option: str) -> GateCheck:
    j = cmp.k
    d = cmp.overall.js[j]
    gate = f"{option} {number(max_drop)}"
    if d.base is None or d.new is None:
        return GateCheck(False, f"pass^{j} is n/a (no task has {j} graded trials in both runs), so {gate} is not met")
    # in points, rounded, so 0.875 - 0.75 is 12.5 and not 12.499999999999998
    drop = round((d.base - d.new) * 100, 9)
    was = f"pass^{j} {pct(d.new)} against the baseline's {pct(d.base)}"
    if drop > max_drop:
        return GateCheck(False, f"pass^{j} dropped {points(drop)} points from the baseline ({pct(d.base)} to "
                                f"{pct(d.new)}), more than {gate}")
    if drop <= 0:
        return GateCheck(True, f"{was} did not drop ({gate})")
    return GateCheck(True, f"{was} dropped {points(drop)} points, within {gate}")


def headline(checks: Sequence[GateCheck]) -> str:
    """The verdict of a comparison in one line: ``regression: <the first failure> (and N
    more)``, or the passing checks (``no regression from the baseline: ...``)."""
    bad = [c for c in checks if not c.passed]
    if bad:
        more = f" (and {plural(len(bad) - 1, 'more regression')})" if len(bad) > 1 else ""
        return f"regression: {bad[0].text}{more}"
    return "; ".join(c.text for c in checks)


# --------------------------------------------------------------------------- rendering


def _signed(x: float | None) -> str:
    """A change in points with its sign: ``+6.2``, ``-12.5``, ``0.0``; ``n/a``."""
    if x is None:
        return "n/a"
    v = x * 100
    return f"{'+' if v > 0.05 else ''}{points(v) if abs(v) >= 0.05 else '0.0'}"


def _interval(i: Interval | None) -> str:
    return "n/a" if i is None else f"[{_signed(i[0])}, {_signed(i[1])}]"


def _delta_cell(d: Delta, arrow: str) -> str:
    return f"{pct(d.base)} {arrow} {pct(d.new)} ({_signed(d.change)} {_interval(d.interval)})"


def _p(x: float | None) -> str:
    return "" if x is None else p_value(x)


def _beyond(t: TaskChange) -> str:
    if t.beyond_chance:
        return t.beyond_chance
    return "" if t.p_drop is None else "no"


def _task_rows(tasks: Sequence[TaskChange], name: Any = str) -> list[list[str]]:
    return [[name(t.name) + (" (critical)" if t.critical else ""),
             t.base.text() if t.base else "-", t.new.text() if t.new else "-",
             t.change, _p(t.p_drop), _p(t.p_rise), _beyond(t), t.regression or ""] for t in tasks]


_TASK_HEADERS = ["task", "before", "after", "change", "p drop", "p rise", "beyond chance", "regression"]


def _score_rows(cmp: Comparison, arrow: str, name: Any = str) -> tuple[list[str], list[list[str]]]:
    js = list(cmp.overall.js)
    headers = ["pass^j (tasks in both runs)", "tasks", *(f"pass^{j}" for j in js)]
    rows = [["all tasks", str(cmp.overall.tasks), *(_delta_cell(cmp.overall.js[j], arrow) for j in js)]]
    rows += [[f"tag {name(tag)}", str(s.tasks), *(_delta_cell(s.js[j], arrow) for j in js)]
             for tag, s in cmp.tags.items()]
    return headers, rows


def _table(rows: list[list[str]], headers: Sequence[str], tablefmt: str = "simple") -> list[str]:
    text: str = tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    return text.splitlines()


def _describe(run: RunDoc) -> str:
    s = run.doc.get("summary") or {}
    return f"{run.path} ({run.label}, {plural(len(run.doc.get('trials') or []), 'trial')}, k={s.get('k', '?')})"


def _domain_lines(cmp: Comparison) -> list[str]:
    lines = []
    for d in cmp.domains:
        if d.changed:
            lines.append(f"domain {d.name} changed between the runs (sha256 {_short(d.base_sha256)} -> "
                         f"{_short(d.new_sha256)}): compared task by task where ids match")
        if d.added:
            lines.append(f"tasks added in {d.name}: {', '.join(d.added)}")
        if d.removed:
            lines.append(f"tasks removed from {d.name}: {', '.join(d.removed)}")
    return lines + cmp.notes


def _short(shas: Sequence[str]) -> str:
    return ", ".join(s[:12] or "(unread)" for s in shas)


def _mode_lines(cmp: Comparison) -> tuple[list[ModeChange], list[ModeChange]]:
    new = [m for m in cmp.modes if m.base == 0 and m.new > 0]
    gone = [m for m in cmp.modes if m.new == 0 and m.base > 0]
    return new, gone


def _spend_rows(cmp: Comparison) -> list[list[str]]:
    b, n = cmp.spend
    rows = []
    for name in ("input", "output", "cache_read", "cache_write"):
        if b.tokens[name] or n.tokens[name]:
            rows.append([f"{name.replace('_', ' ')} tokens", f"{b.tokens[name]:,}", f"{n.tokens[name]:,}",
                         f"{n.tokens[name] - b.tokens[name]:+,}"])
    rows.append(["cost", format_cost(b.cost), format_cost(n.cost), _cost_change(b.cost, n.cost)])
    rows.append(["cost per trial", format_cost(b.cost_per_trial), format_cost(n.cost_per_trial),
                 _cost_change(b.cost_per_trial, n.cost_per_trial)])
    return rows


def _cost_change(b: float | None, n: float | None) -> str:
    if b is None or n is None:
        return "n/a"
    d = n - b
    return ("+" if d > 0 else "-" if d < 0 else "") + format_cost(abs(d))


def summary_lines(cmp: Comparison, checks: Sequence[GateCheck], verdict: bool = True) -> list[str]:
    """A few lines for pytest's terminal summary (``--sandtable-baseline``): what was
    compared, pass^k's change, each task that regressed or improved beyond chance, and
    (``verdict``; not when the gate's lines say it) the comparison's verdict."""
    d = cmp.overall.js[cmp.k]
    lines = [f"sandtable: against the baseline {cmp.base.path} ({plural(len(cmp.matched), 'task')} in common): "
             f"pass^{cmp.k} {_delta_cell(d, '->')}"]
    for t in cmp.matched:
        if t.beyond_chance or t.regression:
            assert t.base is not None and t.new is not None
            p = t.p_rise if t.beyond_chance == IMPROVED else t.p_drop
            said = "regressed (critical task)" if t.regression == CRITICAL else t.beyond_chance
            lines.append(f"  {said}: {t.name} {t.base.text()} -> {t.new.text()} (p={_p(p)})")
    lines += [f"  {line}" for line in _domain_lines(cmp)]
    if verdict:
        lines.append(f"  {headline(checks)}")
    return lines


def terminal_lines(runs: Sequence[RunDoc], comparisons: Sequence[Comparison],
                   checks: Sequence[Sequence[GateCheck]], board: Sequence[LeaderRow] | None) -> list[str]:
    """The comparison for a terminal: with two runs, the verdict, the changed tasks,
    pass^j changes, failure modes, domain changes and spend; with more, the leaderboard
    first and each run's verdict against the baseline."""
    lines: list[str] = []
    if board:
        lines += ["Leaderboard " + _board_scope(board), *_table(*_board_table(board)), ""]
    for cmp, cks in zip(comparisons, checks, strict=True):
        lines += _terminal_one(cmp, cks, brief=board is not None)
    return lines


def _terminal_one(cmp: Comparison, checks: Sequence[GateCheck], brief: bool) -> list[str]:
    lines = [f"{_describe(cmp.new)} against {_describe(cmp.base)}: {plural(len(cmp.matched), 'task')} in common",
             headline(checks)]
    if brief:
        return [*lines, ""]
    changed = [t for t in cmp.tasks if t.noteworthy]
    same = len(cmp.tasks) - len(changed)
    lines += [""]
    if changed:
        lines += _table(_task_rows(changed), _TASK_HEADERS)
    lines += [f"{plural(same, 'task')} unchanged" + (f" ({_unchanged_counts(cmp)})" if same else ""), ""]
    headers, rows = _score_rows(cmp, "->")
    lines += _table(rows, headers)
    new, gone = _mode_lines(cmp)
    if new or gone:
        lines += ["", "Failure modes (failed checks, trials of the tasks in both runs)"]
        lines += _table([[m.kind, m.id, str(m.base), str(m.new), "new" if m in new else "vanished",
                          one_line(m.example, 80)] for m in new + gone],
                        ["kind", "check", "before", "after", "", "example"])
    lines += ["", *_table(_spend_rows(cmp), ["usage (whole runs)", "before", "after", "change"])]
    extra = _domain_lines(cmp)
    if extra:
        lines += ["", *extra]
    return [*lines, ""]


def _unchanged_counts(cmp: Comparison) -> str:
    counts: dict[str, int] = {}
    for t in cmp.tasks:
        if not t.noteworthy:
            counts[t.change] = counts.get(t.change, 0) + 1
    return ", ".join(f"{change} {n}" for change, n in sorted(counts.items()))


def _board_scope(board: Sequence[LeaderRow]) -> str:
    return f"(pass^j over the {plural(board[0].tasks, 'task')} every run has; cost and latency of whole runs)"


def _board_table(board: Sequence[LeaderRow], name: Any = str) -> tuple[list[list[str]], list[str]]:
    js = list(board[0].pass_hat)
    headers = ["run", "trials", *(f"pass^{j}" for j in js), "cost/trial", "p95 latency"]
    rows = [[name(r.label), str(r.trials),
             *(f"{pct(v)} ({pct_range(i)})" for v, i in (r.pass_hat[j] for j in js)),
             format_cost(r.cost_per_trial), secs(r.p95)] for r in board]
    return rows, headers


# --------------------------------------------------------------------------- markdown


def md(text: str) -> str:
    """Text safe in a GitHub markdown table cell: HTML special characters escaped, ``|``
    escaped, on one line (a task id or a check's detail comes from a domain or an agent)."""
    text = " ".join(str(text).split())
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("`", "&#96;").replace("*", "\\*").replace("_", "\\_"))


def _md_table(rows: list[list[str]], headers: Sequence[str]) -> list[str]:
    return _table(rows, headers, tablefmt="github")


def _details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def markdown(runs: Sequence[RunDoc], comparisons: Sequence[Comparison],
             checks: Sequence[Sequence[GateCheck]], board: Sequence[LeaderRow] | None) -> list[str]:
    """The comparison as GitHub markdown, for a pull-request comment or a job summary: a
    headline verdict, a table of the tasks that changed, the rest folded in ``<details>``."""
    lines = ["## sandtable: " + ("regression" if any(not c.passed for cs in checks for c in cs)
                                 else "no regression")]
    lines.append("")
    if board:
        lines += [f"**Leaderboard** {md(_board_scope(board))}", "", *_md_table(*_board_table(board, md)), ""]
    for cmp, cks in zip(comparisons, checks, strict=True):
        body = _markdown_one(cmp, cks)
        if board:
            lines += _details(f"{md(cmp.new.label)} against {md(cmp.base.label)}: {md(headline(cks))}", body)
        else:
            lines += body
    return lines


def _markdown_one(cmp: Comparison, checks: Sequence[GateCheck]) -> list[str]:
    bad = [c for c in checks if not c.passed]
    mark = "❌" if bad else "✅"
    lines = [f"{mark} **{md(headline(checks))}**", ""]
    d = cmp.overall.js[cmp.k]
    lines += [f"`{md(cmp.new.path)}` ({md(cmp.new.label)}) against `{md(cmp.base.path)}` ({md(cmp.base.label)}): "
              f"{plural(len(cmp.matched), 'task')} in common, pass^{cmp.k} {md(_delta_cell(d, '→'))} "
              "(change in points, 95% interval)", ""]
    for c in bad[1:]:
        lines.append(f"- {md(c.text)}")
    if bad[1:]:
        lines.append("")
    changed = [t for t in cmp.tasks if t.noteworthy]
    if changed:
        lines += [*_md_table(_task_rows(changed, md), _TASK_HEADERS), ""]
    else:
        lines += ["No task changed its verdict.", ""]
    notes = _domain_lines(cmp)
    if notes:
        lines += [f"- {md(n)}" for n in notes] + [""]
    headers, rows = _score_rows(cmp, "→", md)
    lines += _details("pass^j overall and by tag", _md_table(rows, headers))
    new, gone = _mode_lines(cmp)
    rows = [[md(m.kind), md(m.id), str(m.base), str(m.new), "new" if m in new else "vanished",
             md(one_line(m.example, 120))] for m in new + gone]
    if rows:
        lines += _details(f"Failure modes: {len(new)} new, {len(gone)} vanished",
                          _md_table(rows, ["kind", "check", "before", "after", "", "example"]))
    lines += _details("Usage and cost (whole runs)",
                      _md_table(_spend_rows(cmp), ["", "before", "after", "change"]))
    lines += _details(f"All {plural(len(cmp.tasks), 'task')}", _md_table(_task_rows(cmp.tasks, md), _TASK_HEADERS))
    return lines


# --------------------------------------------------------------------------- json


def as_json(runs: Sequence[RunDoc], comparisons: Sequence[Comparison], checks: Sequence[Sequence[GateCheck]],
            board: Sequence[LeaderRow] | None, max_drop: float | None) -> dict[str, Any]:
    """The comparison as a JSON document (its fields are described in docs/ci.md)."""
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "alpha": comparisons[0].alpha if comparisons else DEFAULT_ALPHA,
        "max_drop": max_drop,
        "regression": any(not c.passed for cs in checks for c in cs),
        "runs": [_run_json(r) for r in runs],
        "comparisons": [_comparison_json(c, cks) for c, cks in zip(comparisons, checks, strict=True)],
        "leaderboard": [r.to_dict() for r in board] if board else None,
    }


def _run_json(run: RunDoc) -> dict[str, Any]:
    r = run.doc["run"]
    return {"label": run.label, "path": run.path, "schema_version": run.doc.get("schema_version"),
            "agent": r.get("agent"), "user": r.get("user"), "k": r.get("k"),
            "trials": len(run.doc.get("trials") or []), "domains": list(r.get("domains") or [])}


def _comparison_json(cmp: Comparison, checks: Sequence[GateCheck]) -> dict[str, Any]:
    return {
        "base": cmp.base.path,
        "new": cmp.new.path,
        "k": cmp.k,
        "regression": any(not c.passed for c in checks),
        "headline": headline(checks),
        "checks": [c.to_dict() for c in checks],
        "tasks": [t.to_dict() for t in cmp.tasks],
        "overall": cmp.overall.to_dict(),
        "tags": {tag: s.to_dict() for tag, s in cmp.tags.items()},
        "failure_modes": [m.to_dict() for m in cmp.modes],
        "domains": [d.to_dict() for d in cmp.domains],
        "spend": {"base": cmp.spend[0].to_dict(), "new": cmp.spend[1].to_dict()},
        "notes": list(cmp.notes),
    }
