"""Adaptive trials' guarantees, measured (issue 25): seeded simulations of 10,000 runs of
the decision code alone (no pytest, no engine), each looked at after every trial as a
user watching a run, or an early-stopping rule, would.

Each check runs our test and a naive rule through the same harness: ours must stay
within its error bound, the naive one must break it, so the harness can tell them apart
(were the code changed to a naive rule, the first assertion would fail).

Monte-Carlo slack: a rate measured over N = 10,000 runs has a standard error of at most
sqrt(0.05 * 0.95 / N) = 0.0022 where the true rate is 0.05; a bound is "kept" when the
measured rate is at most alpha + 0.0065 (3 standard errors) and "broken" when it is
above alpha + 0.0065. The seeds are fixed, so the figures are the same on every run.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from math import sqrt

from pytest_sandtable.report.stats import fisher_less
from pytest_sandtable.sequential import Design, PairedRegression, StoredRegression, TaskSequence
from pytest_sandtable.sequential.regression import binomial_tail

RUNS = 10_000
ALPHA = 0.05
SLACK = 0.0065  # 3 standard errors at N = 10,000 (above)
CAP = 32


# --- reliability: a wrong "reliable" at p = p0 -------------------------------------------


class NaiveReliability:
    """The naive rule: "reliable" once a one-sided 95% Wilson lower bound of the pass rate
    is above p0, checked after every trial (each look alone is a valid 5% test)."""

    def __init__(self, p0: float = 0.8, cap: int = CAP, z: float = 1.6449) -> None:
        self.p0, self.cap, self.z = p0, cap, z
        self.n = self.passes = 0
        self.verdict: str | None = None

    def observe(self, passed: bool) -> str | None:
        self.n += 1
        self.passes += passed
        n, p, z2 = self.n, self.passes / self.n, self.z * self.z
        low = (p + z2 / (2 * n) - self.z * sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n)
        if low > self.p0:
            self.verdict = "reliable"
        elif self.n >= self.cap:
            self.verdict = "inconclusive"
        return self.verdict


def wrong_reliable_rate(make: Callable[[], TaskSequence | NaiveReliability], p: float, seed: int) -> float:
    """The share of RUNS tasks with pass rate ``p`` that end "reliable"."""
    rng = random.Random(seed)
    draw = rng.random
    wrong = 0
    for _ in range(RUNS):
        seq = make()
        while seq.observe(draw() < p) is None:
            pass
        wrong += seq.verdict == "reliable"
    return wrong / RUNS


def test_wrong_reliable_at_p0_is_at_most_alpha_and_a_naive_rule_breaks_it() -> None:
    ours = wrong_reliable_rate(lambda: TaskSequence(Design()), 0.8, seed=25)
    naive = wrong_reliable_rate(NaiveReliability, 0.8, seed=25)
    assert ours <= ALPHA + SLACK, ours
    assert naive > ALPHA + SLACK, naive
    assert (round(ours, 4), round(naive, 4)) == (0.0387, 0.1379)


def test_below_p0_the_bound_holds_too_and_a_good_task_is_rarely_unreliable() -> None:
    # below p0 the likelihood ratio is a supermartingale: fewer wrong "reliable" still
    assert wrong_reliable_rate(lambda: TaskSequence(Design()), 0.7, seed=26) <= ALPHA + SLACK
    # a task at p1 ends "unreliable" with probability at most beta
    rng = random.Random(27)
    unreliable = 0
    for _ in range(RUNS):
        seq = TaskSequence(Design())
        while seq.observe(rng.random() < 0.97) is None:
            pass
        unreliable += seq.verdict == "unreliable"
    assert unreliable / RUNS <= 0.05 + SLACK


# --- regression, paired: a false "regressed" when the candidate did not drop ---------------


@cache
def _fisher_drop(c_base: int, c_new: int, n: int) -> bool:
    return fisher_less(c_base, n, c_new, n) <= ALPHA


class NaiveFisher:
    """The regression gate's one-sided Fisher test of the two builds' counts (valid when
    looked at once), checked after every pair."""

    def __init__(self, cap: int = CAP) -> None:
        self.cap = cap
        self.n = self.c_base = self.c_new = 0
        self.verdict: str | None = None

    def observe(self, base_passed: bool, new_passed: bool) -> str | None:
        self.n += 1
        self.c_base += base_passed
        self.c_new += new_passed
        if _fisher_drop(self.c_base, self.c_new, self.n):
            self.verdict = "regressed"
        elif self.n >= self.cap:
            self.verdict = "inconclusive"
        return self.verdict


def false_paired_rate(make: Callable[[], PairedRegression | NaiveFisher], rate: float, shared: float,
                      seed: int) -> float:
    """Both builds pass at ``rate`` (no drop); a pair shares its seed's draw with
    probability ``shared`` (correlated within a pair), else the two draws are independent."""
    rng = random.Random(seed)
    draw = rng.random
    wrong = 0
    for _ in range(RUNS):
        test = make()
        while True:
            u = draw()
            v = u if draw() < shared else draw()
            if test.observe(u < rate, v < rate) is not None:
                break
        wrong += test.verdict == "regressed"
    return wrong / RUNS


def test_false_paired_regression_under_peeking_and_fisher_breaks_it() -> None:
    ours = false_paired_rate(PairedRegression, 0.7, shared=0.0, seed=31)
    ours_correlated = false_paired_rate(PairedRegression, 0.7, shared=0.6, seed=32)
    naive = false_paired_rate(NaiveFisher, 0.7, shared=0.0, seed=31)
    assert ours <= ALPHA + SLACK, ours
    assert ours_correlated <= ALPHA + SLACK, ours_correlated
    assert naive > ALPHA + SLACK, naive
    assert (round(ours, 4), round(ours_correlated, 4), round(naive, 4)) == (0.0369, 0.021, 0.1004)
    # the same Fisher test looked at once, after all 32 pairs, keeps its level
    rng = random.Random(33)
    once = sum(_fisher_drop(sum(rng.random() < 0.7 for _ in range(CAP)), sum(rng.random() < 0.7 for _ in range(CAP)),
                            CAP) for _ in range(RUNS)) / RUNS
    assert once <= ALPHA + SLACK
    assert round(once, 4) == 0.0287  # against 0.1004 checked after every pair


# --- regression, stored baseline ---------------------------------------------------------


class NaiveKnownBaseline:
    """The naive rule: the stored baseline's observed rate taken as the known rate (its
    uncertainty ignored, as the one agent-testing tool with SPRT early stopping does),
    then the same SPRT at the full alpha, between that rate and ``drop`` below it."""

    def __init__(self, base_passes: int, base_n: int, drop: float = 0.3, cap: int = CAP) -> None:
        rate = min(base_passes / base_n, 0.999)
        target = max(rate - drop, rate / 2.0)
        self.sequence = TaskSequence(Design(p0=target, p1=rate, alpha=0.05, beta=ALPHA, cap=cap))
        self.verdict: str | None = None

    def observe(self, new_passed: bool) -> str | None:
        verdict = self.sequence.observe(new_passed)
        if verdict is not None:
            self.verdict = {"unreliable": "regressed", "reliable": "no-regression"}.get(verdict, verdict)
        return self.verdict


def false_stored_rate(make: Callable[[int, int], StoredRegression | NaiveKnownBaseline], rate: float,
                      base_n: int, seed: int) -> float:
    """A stored baseline of ``base_n`` trials and a candidate, both at ``rate``."""
    rng = random.Random(seed)
    draw = rng.random
    wrong = 0
    for _ in range(RUNS):
        base_passes = sum(draw() < rate for _ in range(base_n))
        test = make(base_passes, base_n)
        while test.verdict is None and test.observe(draw() < rate) is None:
            pass
        wrong += test.verdict == "regressed"
    return wrong / RUNS


def test_false_stored_regression_under_peeking_and_a_known_baseline_breaks_it() -> None:
    ours = false_stored_rate(StoredRegression, 0.8, 16, seed=41)
    naive = false_stored_rate(NaiveKnownBaseline, 0.8, 16, seed=41)
    assert ours <= ALPHA + SLACK, ours
    assert naive > ALPHA + SLACK, naive
    # the union bound is conservative: the floor sits well below the true 0.8 mostly
    assert (round(ours, 4), round(naive, 4)) == (0.0005, 0.131)


def test_the_binomial_tail_the_floor_rests_on() -> None:
    # P(X >= 14 | 16, 0.8) = C(16,14) 0.8^14 0.2^2 + C(16,15) 0.8^15 0.2 + 0.8^16
    #                      = 0.211106 + 0.112590 + 0.028147 = 0.351843
    assert abs(binomial_tail(14, 16, 0.8) - 0.351843) < 1e-5
