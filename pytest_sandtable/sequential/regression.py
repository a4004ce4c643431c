"""Sequential regression tests of one task: has the candidate build dropped against a
baseline? Both are e-processes, so a "regressed" verdict keeps its error bound however
often it is looked at and whenever the task stops (docs/adaptive.md).

- `PairedRegression`: the baseline build runs in the same job, each of its trials paired
  with the candidate's trial of the same task and the same trial seed. A sequential
  McNemar test on the discordant pairs.
- `StoredRegression`: the baseline is a stored run (its passes and graded trials of the
  task): the baseline's exact Clopper-Pearson lower bound at alpha/2, then an SPRT of
  the candidate at alpha/2 against that bound (a union bound over the two).

Neither counts errored trials: a pair with an errored side is never observed.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from .design import TOLERANCE, Design, DesignError
from .sprt import TaskSequence

RegressionVerdict = Literal["regressed", "no-regression", "inconclusive"]


def _check_error(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 0.5:
        raise DesignError(f"{name} must be between 0 and 0.5 (exclusive), not {value!r}")


def _check_cap(cap: int) -> None:
    if isinstance(cap, bool) or not isinstance(cap, int):
        raise DesignError(f"the cap must be a whole number of trials, not {cap!r}")


class PairedRegression:
    """A sequential McNemar test of "the candidate dropped", on pairs of trials of one task
    with the same trial seed: ``observe(base_passed, new_passed)`` in trial order.

    A pair is concordant (both passed or both failed: it says nothing and moves nothing),
    a drop (base passed, candidate failed) or a gain (base failed, candidate passed). For
    a share q of the disagreements being drops, the likelihood ratio against one half is

        LR_q = (2 q) ** drops * (2 (1 - q)) ** gains

    and the e-process is a mixture of two of them: ``weight`` on a one-sided drop
    ``q1`` (0.95: the candidate fails where the baseline passed, as a broken build does)
    and the rest on a milder one ``q2`` (0.75), E_n = weight LR_q1 + (1 - weight) LR_q2.

    What it guarantees: if the candidate has not dropped, meaning that given everything
    before it each pair is a drop no more often than a gain (P(drop) <= P(gain)), each
    LR_q is a nonnegative supermartingale with mean 1 at the start (a pair's factor has
    mean 1 + (2 q - 1) (P(drop) - P(gain)) <= 1), and so is their mixture; by Ville's
    inequality E_n ever reaches 1/alpha with probability at most ``alpha``: a wrong
    "regressed" is at most alpha at any stopping time. This holds whatever the
    correlation between the two trials of a pair (the shared seed may make them agree
    nearly always) and whatever the pass rates; the pairs must be independent of each
    other given the task and the two builds. The stopped E_n is an e-value for "no drop"
    (for e-BH across tasks).

    "no-regression" once LR_q2 falls to ``beta``: if drops are at least a share q2 of the
    disagreements, 1/LR_q2 is a supermartingale, so that verdict is wrong with
    probability at most beta; it says "no drop as one-sided as q2", not "no drop at all"
    (with the defaults, five gains and no drop). At ``cap`` pairs an open test is
    "inconclusive", and `close` ends it so when the task stops taking trials for another
    reason (its own verdict, a budget).

    With the defaults, 5 drops and no gain say "regressed" at alpha = 0.05
    (0.8 * 1.9 ** 5 + 0.2 * 1.5 ** 5 = 21.3 >= 20; four give 11.4), so a fall from always
    passing to passing half the time is caught in about 10 pairs."""

    __slots__ = ("alpha", "beta", "cap", "drops", "gains", "log_e", "n", "q1", "q2", "verdict", "weight")

    def __init__(self, alpha: float = 0.05, beta: float = 0.05, cap: int = 32, q1: float = 0.95,
                 q2: float = 0.75, weight: float = 0.8) -> None:
        _check_error("alpha", alpha)
        _check_error("beta", beta)
        _check_cap(cap)
        for name, q in (("q1", q1), ("q2", q2)):
            if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.5 < q < 1.0:
                raise DesignError(f"the drop share {name} must be between 0.5 and 1 (exclusive), not {q!r}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < weight <= 1.0:
            raise DesignError(f"the weight of q1 must be above 0 and at most 1, not {weight!r}")
        self.alpha, self.beta, self.cap = alpha, beta, cap
        self.q1, self.q2, self.weight = q1, q2, weight
        least = self.least_pairs()
        if cap < least:
            raise DesignError(
                f"detecting a drop at alpha = {alpha:g} needs at least {least} paired trials; the cap is {cap}")
        self.n = self.drops = self.gains = 0
        self.log_e = 0.0
        self.verdict: RegressionVerdict | None = None

    def _log_lr(self, q: float, drops: int, gains: int) -> float:
        return drops * math.log(2.0 * q) + gains * math.log(2.0 * (1.0 - q))

    def _log_mixture(self, drops: int, gains: int) -> float:
        one = math.log(self.weight) + self._log_lr(self.q1, drops, gains)
        if self.weight >= 1.0:
            return one
        two = math.log1p(-self.weight) + self._log_lr(self.q2, drops, gains)
        top = max(one, two)
        return top + math.log(math.exp(one - top) + math.exp(two - top))

    def least_pairs(self) -> int:
        """The fewest pairs, all drops, that say "regressed"."""
        upper = -math.log(self.alpha) - TOLERANCE
        n = 1
        while self._log_mixture(n, 0) < upper:
            n += 1
        return n

    def observe(self, base_passed: bool, new_passed: bool) -> RegressionVerdict | None:
        if self.verdict is not None:
            raise ValueError("the comparison is settled: it takes no more pairs")
        self.n += 1
        if base_passed and not new_passed:
            self.drops += 1
        elif new_passed and not base_passed:
            self.gains += 1
        self.log_e = self._log_mixture(self.drops, self.gains)
        if self.log_e >= -math.log(self.alpha) - TOLERANCE:
            self.verdict = "regressed"
        elif self._log_lr(self.q2, self.drops, self.gains) <= math.log(self.beta) + TOLERANCE:
            self.verdict = "no-regression"
        elif self.n >= self.cap:
            self.verdict = "inconclusive"
        return self.verdict

    def close(self) -> RegressionVerdict:
        """End an open test ("inconclusive"): the task takes no more trials."""
        if self.verdict is None:
            self.verdict = "inconclusive"
        return self.verdict

    @property
    def open(self) -> bool:
        return self.verdict is None

    @property
    def e_value(self) -> float:
        return math.exp(self.log_e)


# --- an exact Clopper-Pearson bound, without scipy ----------------------------------


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space (no overflow at large n)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    logs = [_log_binom_pmf(i, n, p) for i in range(k, n + 1)]
    top = max(logs)
    if top == -math.inf:
        return 0.0
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


@lru_cache(maxsize=4096)
def clopper_pearson_lower(passes: int, n: int, alpha: float) -> float:
    """The exact one-sided lower confidence bound of a pass rate, level 1 - alpha: the p at
    which ``passes`` or more of ``n`` has probability alpha (0 when nothing passed), by
    bisection on the binomial tail, which rises with p. It is at or below the true rate
    with probability at least 1 - alpha, for a fixed n. Kept per (passes, n, alpha): a
    suite's tasks share a few counts."""
    if n <= 0 or not 0 <= passes <= n:
        raise ValueError(f"passes must be between 0 and n (n at least 1), not {passes} of {n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha!r}")
    if passes == 0:
        return 0.0
    if passes == n:
        return float(alpha ** (1.0 / n))  # p^n = alpha, exactly
    lo, hi = 0.0, 1.0
    for _ in range(64):
        mid = (lo + hi) / 2.0
        if binomial_tail(passes, n, mid) < alpha:
            lo = mid
        else:
            hi = mid
    return lo  # the conservative side of the bisection


def clopper_pearson_upper(passes: int, n: int, alpha: float) -> float:
    """The exact one-sided upper bound, level 1 - alpha (1 when everything passed)."""
    return 1.0 - clopper_pearson_lower(n - passes, n, alpha)


class StoredRegression:
    """A sequential test of "the candidate dropped below a stored baseline" on the
    candidate's graded trials of one task, in trial order: ``observe(new_passed)``.

    The stored baseline gave ``base_passes`` of ``base_n`` graded trials. Its pass rate is
    bounded below by ``floor``, the exact Clopper-Pearson lower bound at level alpha/2;
    then the candidate runs the task SPRT at alpha/2 between ``floor`` (no drop) and
    ``target`` = ``floor - drop`` (a drop; half the floor when that is higher): "regressed"
    once the likelihood ratio of the target against the floor reaches 2/alpha.

    What it guarantees: if the candidate's pass rate is at least the baseline's, a wrong
    "regressed" needs the baseline's bound to miss (probability at most alpha/2: the
    stored run's n was fixed, not chosen adaptively) or the SPRT to cross although the
    candidate's rate is at or above the floor (at most alpha/2 by Ville's inequality, at
    any stopping time): at most alpha in all, given the candidate's trials are
    independent given the task and the build. `e_value` is the stopped likelihood ratio,
    an e-value for "the candidate's rate is at least ``floor``" (for "at least the
    baseline's", only outside the baseline's alpha/2 miss). "no-regression" once the
    ratio falls to beta (wrong with probability at most beta if the candidate's rate is
    ``floor - drop`` or below); "inconclusive" at the cap, or by `close`. A baseline that
    never passed leaves nothing to drop from: "no-regression" before any trial. A weak
    baseline (few trials, a low rate) may need more failures than the cap allows:
    `can_regress` says so before any trial (the test still runs; it cannot say
    "regressed")."""

    __slots__ = ("alpha", "base_n", "base_passes", "beta", "cap", "drop", "floor", "sequence", "verdict")

    def __init__(self, base_passes: int, base_n: int, alpha: float = 0.05, beta: float = 0.05,
                 cap: int = 32, drop: float = 0.3) -> None:
        _check_error("alpha", alpha)
        _check_error("beta", beta)
        _check_cap(cap)
        if isinstance(base_n, bool) or not isinstance(base_n, int) or base_n < 1:
            raise DesignError("the stored baseline has no graded trials of the task to compare with")
        if not 0 <= base_passes <= base_n:
            raise DesignError(f"the stored baseline's passes must be between 0 and {base_n}, not {base_passes!r}")
        if isinstance(drop, bool) or not isinstance(drop, (int, float)) or not 0.0 < drop < 1.0:
            raise DesignError(f"the drop must be between 0 and 1 (exclusive), not {drop!r}")
        self.base_passes, self.base_n = base_passes, base_n
        self.alpha, self.beta, self.cap, self.drop = alpha, beta, cap, drop
        half = alpha / 2.0
        self.floor = clopper_pearson_lower(base_passes, base_n, half) if half > 0.0 else 0.0
        self.verdict: RegressionVerdict | None = None
        self.sequence: TaskSequence | None = None
        if base_passes == 0:
            self.verdict = "no-regression"  # nothing to drop from
            return
        target = max(self.floor - drop, self.floor / 2.0)
        # The task SPRT with the roles turned: its "p0" is the drop, its "p1" the floor, its
        # beta (a wrong "unreliable" at p1) our alpha/2, its alpha our beta.
        design = Design(p0=target, p1=self.floor, alpha=beta, beta=half, cap=cap) if self.floor > 0.0 else None
        if design is None or design.step_fail == 0.0 or design.step_pass == 0.0:
            # at so small a level the floor is 0, or a failure tells it from the drop by
            # nothing a float holds: no trial could move the test (`can_regress` is False)
            self.verdict = "inconclusive"
            return
        self.sequence = TaskSequence(design)

    def least_trials(self) -> int:
        """The fewest trials, all failing, that say "regressed" (0 when it never can)."""
        return self.sequence.design.least_failures() if self.sequence is not None else 0

    @property
    def can_regress(self) -> bool:
        return self.sequence is not None and self.least_trials() <= self.cap

    @property
    def target(self) -> float:
        """The candidate's rate the test is built to catch."""
        return self.sequence.design.p0 if self.sequence is not None else 0.0

    def observe(self, new_passed: bool) -> RegressionVerdict | None:
        if self.verdict is not None or self.sequence is None:
            raise ValueError("the comparison is settled: it takes no more trials")
        verdict = self.sequence.observe(new_passed)
        if verdict == "unreliable":
            self.verdict = "regressed"
        elif verdict == "reliable":
            self.verdict = "no-regression"
        elif verdict == "inconclusive":
            self.verdict = "inconclusive"
        return self.verdict

    def close(self) -> RegressionVerdict:
        """End an open test ("inconclusive"): the task takes no more trials."""
        if self.verdict is None:
            self.verdict = "inconclusive"
        return self.verdict

    @property
    def open(self) -> bool:
        return self.verdict is None

    @property
    def n(self) -> int:
        return self.sequence.n if self.sequence is not None else 0

    @property
    def e_value(self) -> float:
        """The likelihood ratio of the drop against the floor at the stop."""
        return 1.0 / self.sequence.e_value if self.sequence is not None else 1.0
