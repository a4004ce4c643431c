"""One task's sequential test: graded outcomes in, in trial order; a verdict out once settled."""

from __future__ import annotations

import math
from typing import Literal

from .design import Design

Verdict = Literal["reliable", "unreliable", "inconclusive"]


class TaskSequence:
    """A truncated SPRT on one task's graded trials (errored trials are never observed).

    ``observe`` takes outcomes in trial order and returns the verdict once the task is
    settled (then it takes no more); at ``design.cap`` observations an open task is
    "inconclusive". A boundary reached on the cap's trial itself is a verdict, not
    "inconclusive".

    What it guarantees, if the task's trials are independent given the task and the agent
    build and the design was fixed before the first trial: a task whose pass rate is p0
    or below ends "reliable" with probability at most ``alpha``; one whose rate is p1 or
    above ends "unreliable" with probability at most ``beta``; both whatever made the run
    stop (the cap, a budget, the scheduler's order). Between p0 and p1 either verdict is
    right ("reliable" says p >= p0, "unreliable" says p < p1)."""

    __slots__ = ("design", "llr", "n", "passes", "verdict")

    def __init__(self, design: Design) -> None:
        self.design = design
        self.n = 0
        self.passes = 0
        self.llr = 0.0
        self.verdict: Verdict | None = None

    def observe(self, passed: bool) -> Verdict | None:
        if self.verdict is not None:
            raise ValueError("the task is settled: it takes no more trials")
        d = self.design
        self.n += 1
        if passed:
            self.passes += 1
        # from the counts, not a running sum: the same outcomes give the same figure
        self.llr = d.llr(self.passes, self.n - self.passes)
        if d.reliable_at(self.llr):
            self.verdict = "reliable"
        elif d.unreliable_at(self.llr):
            self.verdict = "unreliable"
        elif self.n >= d.cap:
            self.verdict = "inconclusive"
        return self.verdict

    @property
    def open(self) -> bool:
        return self.verdict is None

    @property
    def fails(self) -> int:
        return self.n - self.passes

    @property
    def e_value(self) -> float:
        """The likelihood ratio of p1 against p0 at the stop: an e-value against "p <= p0"
        (its mean is at most 1 there at any stopping time), for e-BH across tasks."""
        return math.exp(self.llr)

    def distance(self) -> float:
        """How far, in passed trials' steps of the log likelihood ratio, the task is from
        its nearer boundary: the scheduler gives trials to the open tasks nearest one first
        (``math.inf`` once settled: a settled task takes no trials)."""
        if self.verdict is not None:
            return math.inf
        d = self.design
        return max(0.0, min(d.upper - self.llr, self.llr - d.lower) / d.step_pass)

    def can_settle(self) -> bool:
        """Whether the trials left under the cap can still reach a boundary; when not, the
        task can only end "inconclusive" (a scheduler short of budget may skip it)."""
        if self.verdict is not None:
            return False
        d = self.design
        left = d.cap - self.n
        return (d.reliable_at(d.llr(self.passes + left, self.fails))
                or d.unreliable_at(d.llr(self.passes, self.fails + left)))
