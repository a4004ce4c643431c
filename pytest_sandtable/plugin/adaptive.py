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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..report.fmt import format_cost
from ..sequential.design import Design
from ..sequential.sprt import TaskSequence
from .config import RunConfig

if TYPE_CHECKING:
    from ..engine.results import TrialResult

TaskKey = tuple[str, str]  # (the domain file, or its name; the task id)


def task_key(item: Any) -> TaskKey:
    return (str(item.domain.path or item.domain.name), str(item.task.id))


@dataclass
class _Task:
    seq: TaskSequence | None  # None without --sandtable-adaptive (budgets only)
    order: list[int] = field(default_factory=list)  # the task's collected trials, in trial order
    # outcomes that ended before an earlier trial of the task: True / False graded, None errored
    waiting: dict[int, bool | None] = field(default_factory=dict)
    next: int = 0  # position in ``order`` of the next outcome the sequence takes


class Needs:
    """The run's decisions of which trials to run (one process, or the xdist controller)."""

    def __init__(self, run: RunConfig) -> None:
        self.run = run
        a = run.adaptive
        self.design = Design(p0=a.p0, p1=a.p1, alpha=a.alpha, beta=a.beta, cap=a.cap) if a is not None else None
        self.max_trials = a.max_trials if a is not None else None
        self.max_cost = run.max_cost
        self.tasks: dict[TaskKey, _Task] = {}
        self.names: dict[TaskKey, tuple[str, str]] = {}  # (domain name, task id), as results name them
        self.handed = 0  # trials handed out (started because they were needed)
        self.cost = 0.0  # USD, of the trials recorded so far
        self.stopped: str | None = None  # why the run stopped handing out trials, once it did
        self._prices: Mapping[str, Mapping[str, float]] | None = None

    # -- at collection -------------------------------------------------------------

    def arrange(self, items: list[Any]) -> None:
        """Order the trial items in rounds (adaptive only: trial 1 of every task, then
        trial 2, ...), each in the slots trial items held; other items keep theirs. A
        trial skipped at collection (``TrialItem.skip_reason``) counts as errored."""
        slots = [i for i, it in enumerate(items) if getattr(it, "is_sandtable_trial", False)]
        trials = [items[i] for i in slots]
        for it in trials:
            task = self.tasks.get(task_key(it))
            if task is None:
                task = self.tasks[task_key(it)] = _Task(TaskSequence(self.design) if self.design else None)
                self.names[task_key(it)] = (str(it.domain.name), str(it.task.id))
            task.order.append(it.trial)
        for task in self.tasks.values():
            task.order.sort()
        for it in trials:
            if it.skip_reason:
                self._take(self.tasks[task_key(it)], it.trial, None)
        if self.design is None:
            return
        rounds = sorted(range(len(trials)), key=lambda n: (trials[n].trial, n))
        for slot, n in zip(slots, rounds):
            items[slot] = trials[n]

    # -- while the run goes on ----------------------------------------------------

    def why_not(self, item: Any, *, now: bool = True) -> str | None:
        """Why ``item``'s trial is not needed (the skip reason pytest shows), or None.
        ``now``: pytest has reached the item (a budget found spent then stops the run's
        handing out; asked ahead of that, by the prefetch, nothing changes)."""
        task = self.tasks.get(task_key(item))
        seq = task.seq if task is not None else None
        if seq is not None and seq.verdict is not None:
            return f"not needed: task settled {seq.verdict} after {seq.n} graded trial{'s' * (seq.n != 1)}"
        if self.max_trials is not None and self.handed >= self.max_trials:
            if now:
                self.stopped = self.stopped or "max_trials"
            return f"not run: the run's budget of {self.max_trials:,} trials is spent (--sandtable-max-trials)"
        if self.max_cost is not None and self.cost >= self.max_cost:
            if now:
                self.stopped = self.stopped or "max_cost"
            return (f"not run: the run's cost budget of {format_cost(self.max_cost)} is spent "
                    f"({format_cost(self.cost)} recorded; --sandtable-max-cost)")
        return None

    def may_start_early(self, item: Any, pending: int) -> bool:
        """Whether the pool may start ``item``'s trial before pytest reaches it, with
        ``pending`` trials started ahead: only a trial of an open task, within the budgets."""
        if getattr(item, "skip_reason", "") or self.why_not(item, now=False) is not None:
            return False
        return self.max_trials is None or self.handed + pending < self.max_trials

    def hand_out(self, item: Any) -> None:
        """``item``'s trial runs because it is needed."""
        self.handed += 1

    def ended(self, item: Any, result: TrialResult) -> None:
        """``item``'s trial came to ``result``: its cost counts, its outcome reaches the
        task's sequence in trial order."""
        self.cost += self._cost_of(result)
        task = self.tasks.get(task_key(item))
        if task is not None:
            self._take(task, item.trial, None if result.verdict == "errored" else result.passed)

    def _take(self, task: _Task, trial: int, outcome: bool | None) -> None:
        task.waiting[trial] = outcome
        while task.next < len(task.order) and task.order[task.next] in task.waiting:
            got = task.waiting.pop(task.order[task.next])
            task.next += 1
            if got is not None and task.seq is not None and task.seq.verdict is None:
                task.seq.observe(got)

    def _cost_of(self, result: TrialResult) -> float:
        if self.max_cost is None or result.replayed:
            return 0.0
        if self._prices is None:
            from ..report.prices import builtin_prices

            self._prices = self.run.prices if self.run.prices is not None else builtin_prices()
        from ..report.prices import estimate_cost

        total = 0.0
        for side in ("agent", "user"):
            models = (result.usage or {}).get(side) or {}
            if isinstance(models, Mapping):
                total += sum(c for c in estimate_cost(models, self._prices).values() if c is not None)
        return total

    def collected_names(self) -> list[tuple[str, str]]:
        """(domain name, task id) of every collected task."""
        return list(self.names.values())
