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
    "inconclusive"."""

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
            self.llr += d.step_pass
        else:
            self.llr += d.step_fail
        if self.llr >= d.upper - 1e-12:
            self.verdict = "reliable"
        elif self.llr <= d.lower + 1e-12:
            self.verdict = "unreliable"
        elif self.n >= d.cap:
            self.verdict = "inconclusive"
        return self.verdict

    @property
    def open(self) -> bool:
        return self.verdict is None

    @property
    def e_value(self) -> float:
        """The likelihood ratio of p1 against p0 at the stop (an e-value against p <= p0)."""
        return math.exp(self.llr)

    def distance(self) -> float:
        """How far, in passed trials' steps, the task is from its nearer boundary: the
        scheduler gives trials to the open tasks nearest one first."""
        d = self.design
        return min(d.upper - self.llr, self.llr - d.lower) / d.step_pass
