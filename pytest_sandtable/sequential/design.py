"""The parameters of an adaptive run, fixed before its first trial, and their checks.

The test per task is Wald's sequential probability ratio test of p1 against p0 with
Ville's thresholds instead of Wald's approximate ones: the log likelihood ratio after S
passes and F failures is ``S * step_pass + F * step_fail``; "reliable" once it reaches
``upper = log(1/alpha)``, "unreliable" once it falls to ``lower = log(beta)``, and
"inconclusive" at the cap. At p = p0 the likelihood ratio is a nonnegative martingale
with mean 1 (below p0 a supermartingale), so by Ville's inequality it ever reaches
1/alpha with probability at most alpha: the bound holds at every trial at once, however
often the running figures are looked at and whenever the run stops (the cap, a budget,
Ctrl-C). The same argument for the inverse ratio at p = p1 bounds a wrong "unreliable"
by beta. Wald's thresholds log((1 - beta) / alpha) hold the errors only approximately.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

# A boundary counts as reached within this much of the log likelihood ratio: the sums
# are of a few dozen floats, so an exact crossing (e.g. p1/p0 = 2 and alpha = 1/8) is
# not missed by a rounding error; it raises the error bound by a factor 1 + 1e-9.
TOLERANCE = 1e-9


class DesignError(ValueError):
    """A design that cannot work: the message is the one line a user sees."""


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Design:
    """A truncated SPRT per task between ``p0`` (the bar: "reliable" means p >= p0) and
    ``p1`` (a good task's pass rate), with errors ``alpha`` (wrongly "reliable" at p = p0,
    or any p below it) and ``beta`` (wrongly "unreliable" at p = p1, or any p above it),
    at most ``cap`` graded trials a task."""

    p0: float = 0.8
    p1: float = 0.97
    alpha: float = 0.05
    beta: float = 0.05
    cap: int = 32

    def check(self) -> None:
        """Raise `DesignError` for a design no run should start with: its message names
        the parameter to change and, for a cap too small, the least cap that works."""
        self._check_rates()
        if not isinstance(self.cap, int) or isinstance(self.cap, bool):
            raise DesignError(f"the cap must be a whole number of trials, not {self.cap!r}")
        least = self.least_trials()
        if self.cap < least:
            raise DesignError(
                f"certifying {self.p0:g} at alpha = {_shown(self.alpha)} needs at least {least} trials; "
                f"the cap is {self.cap}")
        fails = self.least_failures()
        if self.cap < fails:
            raise DesignError(
                f"ruling out {self.p1:g} at beta = {_shown(self.beta)} needs at least {fails} trials; "
                f"the cap is {self.cap}")

    def _check_rates(self) -> None:
        for name, value in (("alpha", self.alpha), ("beta", self.beta)):
            if not _number(value) or not 0.0 < value < 0.5:
                raise DesignError(f"{name} must be between 0 and 0.5 (exclusive), not {_shown(value)}")
        if not _number(self.p0) or not 0.0 < self.p0 < 1.0:
            raise DesignError(f"the reliability bar p0 must be between 0 and 1 (exclusive), not {_shown(self.p0)}")
        if not _number(self.p1) or not 0.0 < self.p1 < 1.0:
            raise DesignError(f"the good-task rate p1 must be between 0 and 1 (exclusive), not {_shown(self.p1)}")
        if self.p0 >= self.p1:
            raise DesignError(
                f"the reliability bar p0 ({self.p0:g}) must be below the good-task rate p1 ({self.p1:g})")

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
        return -math.log(self.alpha)

    @property
    def lower(self) -> float:
        """"unreliable" once it falls to log(beta) (the same bound for the inverse ratio at p = p1)."""
        return math.log(self.beta)

    def llr(self, passes: int, fails: int) -> float:
        """The log likelihood ratio of p1 against p0 after ``passes`` and ``fails``, from the
        counts (so it does not drift with the order of the outcomes)."""
        return passes * self.step_pass + fails * self.step_fail

    def reliable_at(self, llr: float) -> bool:
        return llr >= self.upper - TOLERANCE

    def unreliable_at(self, llr: float) -> bool:
        return llr <= self.lower + TOLERANCE

    def least_trials(self) -> int:
        """The fewest graded trials, all passing, that reach "reliable" (`DesignError` for
        rates or errors out of range)."""
        self._check_rates()
        n = max(1, math.ceil(self.upper / self.step_pass) - 1)
        while n > 1 and self.reliable_at(self.llr(n - 1, 0)):
            n -= 1
        while not self.reliable_at(self.llr(n, 0)):
            n += 1
        return n

    def least_failures(self) -> int:
        """The fewest graded trials, all failing, that reach "unreliable"."""
        self._check_rates()
        n = max(1, math.ceil(self.lower / self.step_fail) - 1)
        while n > 1 and self.unreliable_at(self.llr(0, n - 1)):
            n -= 1
        while not self.unreliable_at(self.llr(0, n)):
            n += 1
        return n


def _shown(value: object) -> str:
    """A parameter as a message shows it: ``0.05``; a subnormal float as given (``1e-320``,
    which ``:g`` would print as ``9.99989e-321``); anything else by its repr."""
    if not _number(value):
        return repr(value)
    assert isinstance(value, (int, float))
    return repr(value) if value and abs(value) < sys.float_info.min else f"{value:g}"
