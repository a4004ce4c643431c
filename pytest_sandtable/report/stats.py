"""The statistics behind every score: pass^j and pass@j, their 95% intervals, and the
test that says whether a task's change between two runs is beyond chance.

Pure functions over counts (a task's ``c`` passed of ``n`` graded trials); no I/O, no
third-party code. The methods, and why each was chosen, are in docs/results.md
("Intervals") and docs/ci.md ("Is it beyond chance?"):

- one task's success rate: the **Wilson score interval** (good coverage at small n, never
  outside [0, 1], not degenerate at 0/n or n/n);
- one task's pass^j: that interval's ends raised to the power j (pass^j estimates p^j,
  which is monotone in p);
- pass^j over many tasks (overall, per tag, per domain): a **two-level bootstrap** with a
  fixed seed: resample the tasks, then each resampled task's trials (its count drawn
  from a binomial at its observed rate), and take the 2.5th and 97.5th percentiles of
  the mean. Resampling both levels counts both sources of chance: which tasks the suite
  has, and which trials each task happened to get;
- a task's change between two runs: **Fisher's exact test**, one-sided (the p-value of
  seeing this few passes in the new run, or fewer, if both runs had the same rate).
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Sequence
from math import comb, sqrt

# two-sided 95%: the 97.5th percentile of the standard normal
Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0

Counts = tuple[int, int]  # (c passed, n graded) of one task
Interval = tuple[float, float]


def pass_hat(c: int, n: int, j: int) -> float | None:
    """The unbiased estimator of pass^j (all of j trials pass) for one task:
    C(c, j) / C(n, j). None when the task has fewer than j graded trials."""
    if n < j or j < 1:
        return None
    return comb(c, j) / comb(n, j)


def pass_at(c: int, n: int, j: int) -> float | None:
    """The unbiased estimator of pass@j (at least one of j trials passes) for one task:
    1 - C(n - c, j) / C(n, j). None when the task has fewer than j graded trials."""
    if n < j or j < 1:
        return None
    return 1.0 - comb(n - c, j) / comb(n, j)


def wilson(c: int, n: int, z: float = Z95) -> Interval | None:
    """The Wilson score interval of a success rate c/n; None without trials."""
    if n <= 0:
        return None
    p = c / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # the exact ends at 0/n and n/n (rounding would otherwise leave 1e-17 off)
    lo = 0.0 if c == 0 else max(0.0, centre - half)
    hi = 1.0 if c == n else min(1.0, centre + half)
    return (lo, hi)


def pass_hat_interval(c: int, n: int, j: int) -> Interval | None:
    """95% interval of one task's pass^j: the Wilson interval of its rate, to the power j."""
    if n < j or j < 1:
        return None
    w = wilson(c, n)
    assert w is not None
    return (w[0] ** j, w[1] ** j)


def pass_at_interval(c: int, n: int, j: int) -> Interval | None:
    """95% interval of one task's pass@j: 1 - (1 - p)^j at the Wilson interval's ends."""
    if n < j or j < 1:
        return None
    w = wilson(c, n)
    assert w is not None
    return (1.0 - (1.0 - w[0]) ** j, 1.0 - (1.0 - w[1]) ** j)


def mean_pass_hat(tasks: Sequence[Counts], j: int) -> float | None:
    """pass^j over tasks: the mean of each task's estimate, over the tasks with at
    least j graded trials; None when no task has."""
    vals = [v for c, n in tasks if (v := pass_hat(c, n, j)) is not None]
    return sum(vals) / len(vals) if vals else None


class _Task:
    """One task's resampling table: the cumulative binomial distribution of its count
    at its observed rate (the count is drawn once per resample and serves every j)."""

    __slots__ = ("cdf", "n")

    def __init__(self, c: int, n: int) -> None:
        p = c / n
        acc, cdf = 0.0, []
        for x in range(n + 1):
            acc += comb(n, x) * p**x * (1 - p) ** (n - x)
            cdf.append(acc)
        cdf[-1] = 1.0
        self.n = n
        self.cdf = cdf

    def draw(self, rng: random.Random) -> int:
        return min(bisect_right(self.cdf, rng.random()), self.n)


def _estimates(n: int, js: Sequence[int], measure: str) -> dict[int, list[float]]:
    """For each j, the estimate at every count 0..n (0.0 where j > n: never read)."""
    estimate = pass_hat if measure == "pass_hat" else pass_at
    return {j: [estimate(x, n, j) or 0.0 for x in range(n + 1)] for j in js}


def _percentiles(samples: list[float]) -> Interval:
    samples.sort()
    last = len(samples) - 1
    return (samples[round(0.025 * last)], samples[round(0.975 * last)])


def bootstrap_intervals(
    tasks: Sequence[Counts],
    js: Sequence[int],
    measure: str = "pass_hat",
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[int, Interval | None]:
    """95% intervals of pass^j (or pass@j, ``measure="pass_at"``) over tasks for every j
    in ``js``, by the two-level bootstrap described in the module docstring, in one pass
    (each resample draws a task's count once and reads every j from it). For a j, only
    the tasks with at least j graded trials count, as in :func:`mean_pass_hat`. The same
    counts always give the same intervals (fixed seed); None for a j no task reaches."""
    kept = [(c, n) for c, n in tasks if n >= 1]
    if not kept:
        return {j: None for j in js}
    tables = [_Task(c, n) for c, n in kept]
    by_n = {n: _estimates(n, js, measure) for n in {n for _, n in kept}}
    rng = random.Random(seed)
    m = len(tables)
    sums = {j: [0.0] * resamples for j in js}
    counts = {j: [0] * resamples for j in js}
    for r in range(resamples):
        for _ in range(m):
            t = tables[int(rng.random() * m)]
            x = t.draw(rng)
            values = by_n[t.n]
            for j in js:
                if t.n >= j:
                    sums[j][r] += values[j][x]
                    counts[j][r] += 1
    out: dict[int, Interval | None] = {}
    for j in js:
        if not any(n >= j for _, n in kept):
            out[j] = None
            continue
        # a resample that drew no task with j trials has no mean; it is left out
        means = [s / c for s, c in zip(sums[j], counts[j]) if c]
        out[j] = _percentiles(means)
    return out


def bootstrap_interval(
    tasks: Sequence[Counts], j: int, measure: str = "pass_hat",
    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """:func:`bootstrap_intervals` for one j."""
    return bootstrap_intervals(tasks, [j], measure, resamples, seed)[j]


def bootstrap_differences(
    base: Sequence[Counts],
    new: Sequence[Counts],
    js: Sequence[int],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[int, Interval | None]:
    """95% intervals of (new pass^j - base pass^j) over the same tasks (``base[i]`` and
    ``new[i]`` are one task's counts in each run), for every j in ``js``: tasks are
    resampled together (paired), each run's trials apart. For a j, tasks with fewer than
    j graded trials in either run are left out; None for a j where none is left."""
    pairs = [(b, w) for b, w in zip(base, new, strict=True) if b[1] >= 1 and w[1] >= 1]
    if not pairs:
        return {j: None for j in js}
    tb = [_Task(c, n) for (c, n), _ in pairs]
    tn = [_Task(c, n) for _, (c, n) in pairs]
    ns = {n for (_, n), _ in pairs} | {n for _, (_, n) in pairs}
    by_n = {n: _estimates(n, js, "pass_hat") for n in ns}
    rng = random.Random(seed)
    m = len(pairs)
    sums = {j: [0.0] * resamples for j in js}
    counts = {j: [0] * resamples for j in js}
    for r in range(resamples):
        for _ in range(m):
            i = int(rng.random() * m)
            b, w = tb[i], tn[i]
            xb, xw = b.draw(rng), w.draw(rng)
            vb, vw = by_n[b.n], by_n[w.n]
            for j in js:
                if b.n >= j and w.n >= j:
                    sums[j][r] += vw[j][xw] - vb[j][xb]
                    counts[j][r] += 1
    out: dict[int, Interval | None] = {}
    for j in js:
        if not any(b[1] >= j and w[1] >= j for b, w in pairs):
            out[j] = None
            continue
        out[j] = _percentiles([s / c for s, c in zip(sums[j], counts[j]) if c])
    return out


def _hypergeom_pmf(x: int, total: int, successes: int, draws: int) -> float:
    return comb(successes, x) * comb(total - successes, draws - x) / comb(total, draws)


def fisher_less(c_base: int, n_base: int, c_new: int, n_new: int) -> float:
    """One-sided Fisher's exact test: the probability, if both runs share one success
    rate, of the new run having ``c_new`` passes or fewer given the passes of both runs
    together. A small value says the drop is beyond chance. 1.0 when a run has no trials."""
    if n_base <= 0 or n_new <= 0:
        return 1.0
    total, successes = n_base + n_new, c_base + c_new
    low = max(0, n_new - (total - successes))
    p = sum(_hypergeom_pmf(x, total, successes, n_new) for x in range(low, c_new + 1))
    return min(1.0, p)


def fisher_greater(c_base: int, n_base: int, c_new: int, n_new: int) -> float:
    """One-sided Fisher's exact test the other way: is the rise beyond chance?"""
    return fisher_less(n_base - c_base, n_base, n_new - c_new, n_new)
