"""The parameters of an adaptive run, fixed before its first trial, and their checks."""

from __future__ import annotations

import math
from dataclasses import dataclass


class DesignError(ValueError):
    """A design that cannot work: the message is the one line a user sees."""


@dataclass(frozen=True)
class Design:
    """A truncated SPRT per task between ``p0`` (the bar: "reliable" means p >= p0) and
    ``p1`` (a good task's pass rate), with errors ``alpha`` (wrongly "reliable" at p = p0)
    and ``beta`` (wrongly "unreliable" at p = p1), at most ``cap`` graded trials a task."""

    p0: float = 0.8
    p1: float = 0.97
    alpha: float = 0.05
    beta: float = 0.05
    cap: int = 32

    def check(self) -> None:
        """Raise `DesignError` for a design no run should start with."""
        for name, value in (("alpha", self.alpha), ("beta", self.beta)):
            if not 0.0 < value < 0.5:
                raise DesignError(f"{name} must be between 0 and 0.5 (exclusive), not {value:g}")
        if not 0.0 < self.p0 < 1.0:
            raise DesignError(f"the reliability bar p0 must be between 0 and 1 (exclusive), not {self.p0:g}")
        if not 0.0 < self.p1 < 1.0:
            raise DesignError(f"p1 must be between 0 and 1 (exclusive), not {self.p1:g}")
        if self.p0 >= self.p1:
            raise DesignError(f"p0 ({self.p0:g}) must be below p1 ({self.p1:g})")
        least = self.least_trials()
        if self.cap < least:
            raise DesignError(
                f"certifying {self.p0:g} at alpha = {self.alpha:g} needs at least {least} trials; "
                f"the cap is {self.cap}")

    @property
    def step_pass(self) -> float:
        """What one passed trial adds to the log likelihood ratio of p1 against p0."""
        return math.log(self.p1 / self.p0)

    @property
    def step_fail(self) -> float:
        """What one failed trial adds (negative)."""
        return math.log((1.0 - self.p1) / (1.0 - self.p0))

    @property
    def upper(self) -> float:
        """"reliable" once the log likelihood ratio reaches log(1/alpha) (Ville's inequality:
        at p = p0 the ratio is a nonnegative martingale, so it ever reaches 1/alpha with
        probability at most alpha, however often it is looked at)."""
        return math.log(1.0 / self.alpha)

    @property
    def lower(self) -> float:
        """"unreliable" once it falls to log(beta) (the same bound for the inverse ratio at p = p1)."""
        return math.log(self.beta)

    def least_trials(self) -> int:
        """The fewest graded trials, all passing, that reach "reliable"."""
        return max(1, math.ceil(self.upper / self.step_pass - 1e-12))
