"""Which trials a run still needs: ``--sandtable-adaptive`` (per task a sequential test
that says when its verdict is settled) and the run's budgets (``--sandtable-max-trials``,
``--sandtable-max-cost``).

Items stay one per (task, trial): :meth:`Needs.arrange` orders them in rounds (trial 1
of every task, then trial 2, ...), and an item whose task is settled, or whose budget
ran out, is skipped with a one-line reason when pytest reaches it (never run, never
failed). Each task's graded outcomes reach its ``TaskSequence`` in trial order whatever
order the trials ended in (one that ends early waits in a buffer), and errored trials
are never observed: the verdicts are the same at any ``--sandtable-concurrency`` for the
same seed. A trial already started when its task settled (a prefetched one) still runs
and is recorded; the report leaves it out of the verdict (``report.adaptive``).

With a stored baseline (``--sandtable-baseline``), each task the baseline has also runs
a ``sequential.StoredRegression`` on the same outcomes, taken from the same buffer in the
same order; the task is settled once both its verdict and its regression test are
(``report.adaptive.task_settled``), so the decisions stay the same at any concurrency.
With ``--sandtable-paired`` the test is a ``sequential.PairedRegression`` instead, fed each
outcome with the stored baseline's outcome of the same trial seed (``report.adaptive.feed``).

Under pytest-xdist the controller decides (:class:`Decider`): the outcomes reach its
:class:`Needs` as the workers' reports arrive, and what it decides (a task settled, a
budget spent) it appends to a file of decisions, one JSON line each, which each worker
reads before it runs, or starts early, an item. A worker decides nothing itself: it
sees only its own share of a task's trials.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..report.fmt import format_cost
from ..sequential.design import Design
from ..sequential.regression import PairedRegression, StoredRegression
from ..sequential.sprt import TaskSequence
from .config import RunConfig, is_xdist_worker

if TYPE_CHECKING:
    from ..engine.results import TrialResult

TaskKey = tuple[str, str]  # (the domain file, relative to the rootdir, as node ids and locations give it; task id)

DECISIONS = "sandtable_decisions"  # the key of the decisions file in an xdist worker's workerinput
DECIDER = "sandtable-decider"  # the controller's plugin
# a trial item's node id, as artifacts reads one
_TRIAL_NODEID = re.compile(r"^(?P<path>.+?)::(?P<task>[^:\[]+)\[(?P<trial>\d+)-(?P<k>\d+)\]$")


def task_key(item: Any) -> TaskKey:
    return (str(item.location[0]), str(item.task.id))


# how the skip reasons of trial items this module skips begin (the terminal counts them by these)
NOT_NEEDED = "not needed: task settled"
BUDGET_SPENT = "not run: the run's"


def settled_reason(seq: TaskSequence, reg: StoredRegression | PairedRegression | None = None) -> str:
    reason = f"{NOT_NEEDED} {seq.verdict} after {seq.n} graded trial{'s' * (seq.n != 1)}"
    if isinstance(reg, PairedRegression):
        reason += f", {reg.verdict} against the baseline after {reg.n} pair{'s' * (reg.n != 1)}"
    elif reg is not None:
        reason += f", {reg.verdict} against the baseline after {reg.n}"
    return reason


def regression_alpha(run: RunConfig) -> float:
    """The level of an adaptive run's regression tests: --sandtable-regression-alpha if
    given, else the design's alpha."""
    base, a = run.baseline, run.adaptive
    if base is not None and (base.alpha_given or a is None):
        return base.alpha
    return a.alpha if a is not None else 0.05


@dataclass
class _Task:
    seq: TaskSequence | None  # None without --sandtable-adaptive (budgets only)
    order: list[int] = field(default_factory=list)  # the task's collected trials, in trial order
    # outcomes that ended before an earlier trial of the task: True / False graded, None errored
    waiting: dict[int, bool | None] = field(default_factory=dict)
    next: int = 0  # position in ``order`` of the next outcome the sequence takes
    # with a stored baseline that has the task: its regression test, made once the
    # task's domain name is known (``made``)
    reg: StoredRegression | PairedRegression | None = None
    made: bool = False
    # with --sandtable-paired: the stored baseline's outcome per trial number (report.adaptive.paired_outcomes)
    pairs: Mapping[int, bool | None] | None = None
    last: int | None = None  # the last trial a stored baseline pairs (None: the baseline agent's, every trial)

    @property
    def settled(self) -> bool:
        from ..report.adaptive import task_settled

        return self.seq is not None and task_settled(self.seq, self.reg)

    def distance(self) -> float:
        """The nearer of its open tests' distances to a boundary (``TaskSequence.distance``)."""
        reg = self.reg if isinstance(self.reg, StoredRegression) and self.reg.open else None
        seqs = [s for s in (self.seq, reg.sequence if reg is not None else None)
                if s is not None and s.verdict is None]
        return min(s.distance() for s in seqs) if seqs else math.inf


class Needs:
    """The run's decisions of which trials to run: in the only process, on the xdist
    controller (``decisions``: the file it tells the workers in), or on a worker
    (``told``: the file it reads them from; it then decides nothing itself)."""

    def __init__(self, run: RunConfig, *, decisions: Path | None = None, told: Path | None = None) -> None:
        self.run = run
        a = run.adaptive
        self.design = Design(p0=a.p0, p1=a.p1, alpha=a.alpha, beta=a.beta, cap=a.cap) if a is not None else None
        self.max_trials = a.max_trials if a is not None else None
        self.max_cost = run.max_cost
        # with --sandtable-baseline (not on a worker: it has no baseline, and decides nothing)
        self.baseline: dict[tuple[str, str], tuple[int, int]] | None = None
        self.pairs: dict[tuple[str, str], dict[int, bool | None]] | None = None  # with --sandtable-paired
        if self.design is not None and run.baseline is not None and run.baseline.doc is not None and told is None:
            from ..report.adaptive import baseline_counts, paired_outcomes

            if run.baseline.paired:
                self.pairs = paired_outcomes(run.baseline.doc, run.seed, self.design.cap)
            else:
                self.baseline = baseline_counts(run.baseline.doc)
        # --sandtable-baseline-agent: the baseline agent's outcomes, filled as its trials end
        self.in_job = (self.design is not None and told is None and run.baseline is not None
                       and run.baseline.agent is not None)
        if self.in_job:
            self.pairs = {}
        self.regression_alpha = regression_alpha(run)
        self.tasks: dict[TaskKey, _Task] = {}
        self.names: dict[TaskKey, tuple[str, str]] = {}  # (domain name, task id), as results name them
        self.handed = 0  # trials handed out (started because they were needed)
        self.cost = 0.0  # USD, of the trials recorded so far
        self.stopped: str | None = None  # why the run stopped handing out trials, once it did
        self._prices: Mapping[str, Mapping[str, float]] | None = None
        self._decisions = decisions
        self._told = _Told(told) if told is not None else None
        # one process, adaptive: each round's slots in session.items, the last item of each
        # (by id) and the order domain files came in (see reached)
        self._rounds: list[list[int]] = []
        self._last: dict[int, int] = {}
        self._files: dict[str, int] = {}

    # -- at collection -------------------------------------------------------------

    def _task(self, key: TaskKey) -> _Task:
        task = self.tasks.get(key)
        if task is None:
            task = self.tasks[key] = _Task(TaskSequence(self.design) if self.design else None)
        return task

    def arrange(self, items: list[Any]) -> None:
        """Order the trial items in rounds (adaptive only: trial 1 of every task, then
        trial 2, ...), each in the slots trial items held; other items keep theirs. A
        trial skipped at collection (``TrialItem.skip_reason``) counts as errored."""
        slots = [i for i, it in enumerate(items) if getattr(it, "is_sandtable_trial", False)]
        trials = [items[i] for i in slots]
        for it in trials:
            self._task(task_key(it)).order.append(it.trial)
            self.names[task_key(it)] = (str(it.domain.name), str(it.task.id))
        for task in self.tasks.values():
            task.order.sort()
        for it in trials:
            if it.skip_reason:
                self._take(task_key(it), it.trial, None)
        if self.design is None:
            return
        rounds = sorted(range(len(trials)), key=lambda n: (trials[n].trial, n))
        for slot, n in zip(slots, rounds):
            items[slot] = trials[n]
        if self._told is None:  # one process: each round in the order its open tasks need it
            self._files = {}
            for it in trials:
                self._files.setdefault(task_key(it)[0], len(self._files))
            by_round: dict[int, list[int]] = {}
            for slot, n in zip(slots, rounds):
                by_round.setdefault(trials[n].trial, []).append(slot)
            self._rounds = [by_round[r] for r in sorted(by_round)]
            self._last = {id(items[slots[-1]]): i for i, slots in enumerate(self._rounds)}

    def reached(self, item: Any) -> None:
        """pytest is done with ``item``'s trial (run, or skipped). After the last item of a
        round (every outcome of the rounds so far known: items end in order), the next
        round's items are reordered: the open tasks nearest a boundary first (the fewest
        passed trials' steps from one, ``TaskSequence.distance``), settled ones last, each
        domain file's trials kept together in the order the files came (pytest tears a
        file down when its items are done). Outside xdist only: a worker keeps its
        collection's order, which the controller's scheduler hands out by."""
        r = self._last.get(id(item)) if self._last else None
        if r is None or r + 1 >= len(self._rounds):
            return
        items = item.session.items
        slots = self._rounds[r + 1]
        if any(s >= len(items) or not getattr(items[s], "is_sandtable_trial", False) for s in slots):
            return  # another plugin moved the items since: leave them be

        def nearest(n: int) -> tuple[int, bool, float, int]:
            key = task_key(items[slots[n]])
            task = self.tasks[key]
            if task.seq is None or task.settled:
                return (self._files.get(key[0], 0), True, 0.0, n)
            return (self._files.get(key[0], 0), False, task.distance(), n)

        moved = [items[slots[n]] for n in sorted(range(len(slots)), key=nearest)]
        for k in [k for k, v in self._last.items() if v == r + 1]:
            del self._last[k]
        for slot, it in zip(slots, moved):
            items[slot] = it
        self._last[id(items[slots[-1]])] = r + 1
        from .pool import items_moved

        items_moved()

    def collected_ids(self, ids: Iterable[str]) -> None:
        """The xdist controller's collection: the trials' node ids (``path::task[i-k]``)."""
        for nodeid in ids:
            m = _TRIAL_NODEID.match(nodeid)
            if m is not None:
                self._task((m.group("path"), m.group("task"))).order.append(int(m.group("trial")))
        for t in self.tasks.values():
            t.order.sort()

    # -- while the run goes on ----------------------------------------------------

    def why_not(self, item: Any, *, now: bool = True) -> str | None:
        """Why ``item``'s trial is not needed (the skip reason pytest shows), or None.
        ``now``: pytest has reached the item (a budget found spent then stops the run's
        handing out; asked ahead of that, by the prefetch, nothing changes)."""
        if self._told is not None:
            return self._told.why_not(task_key(item))
        task = self.tasks.get(task_key(item))
        if task is not None and task.seq is not None and task.settled:
            return settled_reason(task.seq, task.reg)
        budget = self._budget_spent()
        if budget is not None and now:
            self.stopped = self.stopped or budget[0]
        return budget[1] if budget is not None else None

    def _budget_spent(self) -> tuple[str, str] | None:
        if self.max_trials is not None and self.handed >= self.max_trials:
            return "max_trials", (f"{BUDGET_SPENT} budget of {self.max_trials:,} trials is spent "
                                  f"(--sandtable-max-trials)")
        if self.max_cost is not None and self.cost >= self.max_cost:
            return "max_cost", (f"{BUDGET_SPENT} cost budget of {format_cost(self.max_cost)} is spent "
                                f"({format_cost(self.cost)} recorded; --sandtable-max-cost)")
        return None

    def may_start_early(self, item: Any, pending: int) -> bool:
        """Whether the pool may start ``item``'s trial before pytest reaches it, with
        ``pending`` trials started ahead: only a trial of an open task, within the budgets."""
        if getattr(item, "skip_reason", "") or self.why_not(item, now=False) is not None:
            return False
        return self._told is not None or self.max_trials is None or self.handed + pending < self.max_trials

    def hand_out(self, item: Any) -> None:
        """``item``'s trial runs because it is needed."""
        self.handed += 1

    def ended(self, item: Any, result: TrialResult) -> None:
        """``item``'s trial came to ``result``: its cost counts, its outcome reaches the
        task's sequence in trial order. (On a worker: the controller's to count.)"""
        if self._told is not None:
            return
        self.cost += self._cost_of(result.usage, result.replayed)
        self._baseline_ended(task_key(item), item.trial, getattr(item, "sandtable_baseline", None))
        self._take(task_key(item), item.trial, None if result.verdict == "errored" else result.passed)

    def _baseline_ended(self, key: TaskKey, trial: int, base: Mapping[str, Any] | None) -> None:
        """--sandtable-baseline-agent: the baseline agent's trial of the same seed (its
        ``verdict``, ``usage``, ``replayed``, as :func:`baseline_side` makes them) came with
        the candidate's: its outcome waits for the pair, its cost counts."""
        if not self.in_job or base is None or self.pairs is None:
            return
        self.cost += self._cost_of(base.get("usage"), bool(base.get("replayed")))
        name = self.names.get(key)
        if name is not None:
            verdict = str(base.get("verdict"))
            self.pairs.setdefault(name, {})[trial] = None if verdict == "errored" else verdict == "passed"

    def ended_stored(self, data: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> None:
        """On the xdist controller: a worker's trial (as results.json stores it) arrived,
        with ``base``, its baseline agent's side (--sandtable-baseline-agent).
        Its outcome and cost count as in :meth:`ended`; what that settles, the workers are told."""
        location = str(data.get("location") or "")
        key = (location.rpartition(":")[0] if ":" in location else location, str(data.get("task")))
        self.names[key] = (str(data.get("domain")), key[1])
        task = self.tasks.get(key)
        counted = task is None or task.seq is None or not task.settled
        if counted:
            self.handed += 1
        self.cost += self._cost_of(data.get("usage"), bool(data.get("replayed")))
        self._baseline_ended(key, int(data.get("trial") or 0), base)
        verdict = str(data.get("verdict"))
        self._take(key, int(data.get("trial") or 0), None if verdict == "errored" else verdict == "passed")
        if self.stopped is None:
            budget = self._budget_spent()
            if budget is not None:
                self.stopped = budget[0]
                self._tell({"all": budget[1]})

    def _take(self, key: TaskKey, trial: int, outcome: bool | None) -> None:
        task = self._task(key)
        if trial not in task.order:  # not collected here (the controller's view of a worker's): in its place
            task.order.append(trial)
            task.order.sort()
        task.waiting[trial] = outcome
        if not task.made and task.seq is not None and key in self.names:
            task.made = True
            found = self.baseline.get(self.names[key]) if self.baseline is not None else None
            if found is not None:
                from ..report.adaptive import stored_regression

                task.reg = stored_regression(found, task.seq.design, self.regression_alpha,
                                             len(self.baseline or {}))
            if self.in_job and self.pairs is not None:
                task.pairs = self.pairs.setdefault(self.names[key], {})
            else:
                task.pairs = self.pairs.get(self.names[key]) if self.pairs is not None else None
                task.last = max(task.pairs) if task.pairs else None
            if task.pairs is not None:
                from ..report.adaptive import paired_alpha, paired_regression

                m = len(self.tasks) if self.in_job else len(self.pairs or {})
                task.reg = paired_regression(task.seq.design, paired_alpha(self.regression_alpha, m))
        while task.next < len(task.order) and task.order[task.next] in task.waiting:
            number = task.order[task.next]
            got = task.waiting.pop(number)
            task.next += 1
            if got is None or task.seq is None or task.settled:
                continue
            from ..report.adaptive import feed

            feed(task.seq, task.reg, number, got, task.pairs, task.last)
            if task.settled:
                self._tell({"file": key[0], "task": key[1], "reason": settled_reason(task.seq, task.reg)})

    def _tell(self, decision: dict[str, str]) -> None:
        """The controller's decision, one JSON line appended to the file the workers read."""
        if self._decisions is None:
            return
        with self._decisions.open("a", encoding="utf-8") as f:
            f.write(json.dumps(decision) + "\n")

    def _cost_of(self, usage: Any, replayed: bool) -> float:
        if self.max_cost is None or replayed or not isinstance(usage, Mapping):
            return 0.0
        if self._prices is None:
            from ..report.prices import builtin_prices

            self._prices = self.run.prices if self.run.prices is not None else builtin_prices()
        from ..report.prices import estimate_cost

        total = 0.0
        for side in ("agent", "user"):
            models = usage.get(side) or {}
            if isinstance(models, Mapping):
                total += sum(c for c in estimate_cost(models, self._prices).values() if c is not None)
        return total

    def collected_names(self) -> list[tuple[str, str]]:
        """(domain name, task id) of every collected task (on the controller: of those
        whose domain a trial named)."""
        by_file = {file: name for (file, _), (name, _) in self.names.items()}
        return [self.names.get(key) or (by_file[key[0]], key[1]) for key in self.tasks
                if key in self.names or key[0] in by_file]


def baseline_side(result: TrialResult) -> dict[str, Any]:
    """What the plugin keeps of the baseline agent's trial (--sandtable-baseline-agent):
    its verdict, usage and whether it was replayed."""
    return {"verdict": str(result.verdict), "usage": result.usage, "replayed": bool(result.replayed)}


class _Told:
    """A worker's view of the controller's decisions: the file read on from where it was
    last read, whenever it has grown."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.rest = b""
        self.settled: dict[TaskKey, str] = {}
        self.all: str | None = None

    def why_not(self, key: TaskKey) -> str | None:
        self._read()
        return self.all or self.settled.get(key)

    def _read(self) -> None:
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return
        if size <= self.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = self.rest + f.read(size - self.offset)
        self.offset = size
        *lines, self.rest = data.split(b"\n")
        for line in lines:
            d = json.loads(line)
            if "all" in d:
                self.all = self.all or str(d["all"])
            else:
                self.settled[(str(d["file"]), str(d["task"]))] = str(d["reason"])


class Decider:
    """On the xdist controller of a run with --sandtable-adaptive or a budget: the run's
    :class:`Needs`, fed by the recorder as the workers' trials arrive, and the file its
    decisions go to, which each worker is given (``workerinput``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="sandtable-decisions-"))
        self.path = self.folder / "decisions.jsonl"
        self.path.touch()
        self.needs = Needs(RunConfig.of(config), decisions=self.path)
        self._collected = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[DECISIONS] = str(self.path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self._collected:  # every worker collects the same items
            self._collected = True
            self.needs.collected_ids(ids)

    def pytest_unconfigure(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def worker_needs(config: pytest.Config, run: RunConfig) -> Needs:
    """The Needs of this process: on an xdist worker, one that reads the controller's decisions."""
    told = getattr(config, "workerinput", {}).get(DECISIONS) if is_xdist_worker(config) else None
    return Needs(run, told=Path(told) if told else None)
