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
  from the Jeffreys posterior predictive of its rate, a beta-binomial, so a task that
  passed every trial may still fail one), and take the 2.5th and 97.5th percentiles of
  the mean. Resampling both levels counts both sources of chance: which tasks the suite
  has, and which trials each task happened to get; the differences between two runs
  are resampled the same way, tasks paired;
- a task's change between two runs: **Fisher's exact test**, one-sided (the p-value of
  seeing this few passes in the new run, or fewer, if both runs had the same rate).
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import groupby, repeat, starmap
from math import comb, exp, lgamma, sqrt
from operator import add, itemgetter, mul, sub, truediv
from typing import cast

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


def _percentiles(samples: list[float]) -> Interval:
    samples.sort()
    last = len(samples) - 1
    return (samples[round(0.025 * last)], samples[round(0.975 * last)])


def _centred(samples: list[float], estimate: float, low: float, high: float) -> Interval:
    """The percentile interval of bootstrap samples moved so that their mean is the
    estimate, then kept within [low, high]. Drawing counts from the posterior
    predictive pulls a task that passed every trial below 1 (its predictive mean
    pass^j is under 1), so uncentred samples sit below the estimate: ten tasks that all
    passed would get an interval that ends under their own 100%."""
    shift = estimate - sum(samples) / len(samples)
    # adding a constant keeps the order, so the percentiles of the moved samples are the
    # percentiles moved (to the bit: rounding x + shift never swaps two samples)
    lo, hi = (x + shift for x in _percentiles(samples))
    return (min(max(lo, low), high), min(max(hi, low), high))


def _mean_estimate(tasks: Sequence[Counts], j: int, measure: str) -> float:
    """The point estimate a group's bootstrap is centred on: the mean estimate over the
    tasks with at least j graded trials."""
    vals = [_estimate(n, c, j, n, measure) for c, n in tasks if n >= j]
    return sum(vals) / len(vals)


def _mean_difference(pairs: Sequence[tuple[Counts, Counts]], j: int) -> float:
    """The point estimate a paired bootstrap is centred on: the mean of new minus base
    pass^j over the tasks with at least j graded trials in both runs."""
    diffs = [_estimate(wn, wc, j, wn, "pass_hat") - _estimate(bn, bc, j, bn, "pass_hat")
             for (bc, bn), (wc, wn) in pairs if bn >= j and wn >= j]
    return sum(diffs) / len(diffs)


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
    return bootstrap_table(tasks, js, (measure,), resamples, seed)[measure]


def bootstrap_interval(
    tasks: Sequence[Counts], j: int, measure: str = "pass_hat",
    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """:func:`bootstrap_intervals` for one j."""
    return bootstrap_intervals(tasks, [j], measure, resamples, seed)[j]


# --------------------------------------------------------------------------- the bootstrap, fast
#
# One resampled task of the two-level bootstrap is a task drawn uniformly, then its count
# drawn from a binomial at its observed rate. Its estimate depends on its graded trials n
# and that count x only, so one draw is a draw of (n, x) from the mixture of the tasks'
# binomials: P(n, x) = (1/m) * sum over tasks with n trials of Bin(x; n, c/n). A resample
# of m tasks is then m draws from that one distribution, the same resample in
# distribution, and every j (and pass@j beside pass^j) is read from its histogram, whose
# few distinct (n, x) make each mean a short dot product. That keeps a summary with many
# tags and a large k cheap enough for the end of every run.

_NEGLIGIBLE = 1e-12  # a count this unlikely is left out of the mixture (never drawn in practice)
_DENSE = 12  # up to this many (n, x) combinations, a resample is counted over all of them
_BLOCK_DRAWS = 200_000  # uniform draws held at once by the dense path (a few MB)
# past this many tasks, a resample's histogram is drawn as binomials (one draw per
# combination) rather than task by task (one per task): _Mixture.binomial_columns
_BINOMIAL_FROM = 256
_BINOMIAL_COMBOS = 200  # combinations a column-by-column resample may have (k up to about 200)
_SCALED_KEPT = 1_000_000  # floats of scaled columns _sparse_means keeps (at most about 32 MB)


def _predictive_pmf(c: int, n: int) -> list[float]:
    """P(X = x) for x = 0..n: the count a task that passed c of n would show in n new
    trials, under the Jeffreys posterior of its rate (the beta-binomial with
    a = c + 1/2, b = n - c + 1/2). Computed in logs, so a large n cannot overflow.

    Not the plug-in Binomial(n, c/n): under that a task that passed 4 of 4 can never
    fail, so a group of tasks that all passed would get the interval 100-100%, more
    certain than one task alone (whose Wilson interval is 51-100% at 4 of 4)."""
    a, b = c + 0.5, n - c + 0.5
    base = lgamma(n + 1) + lgamma(a + b) - lgamma(a) - lgamma(b) - lgamma(n + a + b)
    return [
        exp(base - lgamma(x + 1) - lgamma(n - x + 1) + lgamma(x + a) + lgamma(n - x + b))
        for x in range(n + 1)
    ]


@lru_cache(maxsize=512)
def _estimate_rows(n: int, j_max: int) -> tuple[tuple[float, ...], ...]:
    """pass^j at every count 0..n of n trials, for j = 1..min(j_max, n) (row j - 1):
    C(x, j) / C(n, j) as the product of (x - i) / (n - i) over i < j, row by row (floats:
    the table feeds percentiles, and exact big-integer ratios cost far more at large n)."""
    rows: list[tuple[float, ...]] = []
    row = [1.0] * (n + 1)
    for j in range(1, min(j_max, n) + 1):
        d = n - j + 1
        row = [r * (x - j + 1) / d if x >= j else 0.0 for x, r in enumerate(row)]
        rows.append(tuple(row))
    return tuple(rows)


def _estimate(n: int, x: int, j: int, j_max: int, measure: str) -> float:
    """One task's estimate of pass^j (or pass@j) at count x of n trials; 0.0 past n (never counted)."""
    if j > n:
        return 0.0
    rows = _estimate_rows(n, j_max)
    if measure == "pass_hat":
        return rows[j - 1][x]
    return 1.0 - rows[j - 1][n - x]  # pass@j: 1 - C(n - x, j) / C(n, j)


def _estimate_row(by_n: Sequence[tuple[int, list[int]]], j: int, j_max: int, measure: str) -> list[float]:
    """:func:`_estimate` at every combination (``by_n``: each n with its counts x, in the
    combinations' order), read from n's table a run of counts at a time: the same
    floats, without a call per combination (a large k has thousands of them per j)."""
    row: list[float] = []
    for n, xs in by_n:
        if j > n:
            row.extend(repeat(0.0, len(xs)))
            continue
        table = _estimate_rows(n, j_max)[j - 1]
        if measure == "pass_hat":
            row.extend(map(table.__getitem__, xs))
        else:  # pass@j: 1 - C(n - x, j) / C(n, j)
            row.extend(map(sub, repeat(1.0), map(table.__getitem__, map(sub, repeat(n), xs))))
    return row


class _Mixture:
    """A group's resampling distribution over (n, x): the combinations, in order, and
    their cumulative probabilities."""

    def __init__(self, weight: dict[tuple[int, ...], float], size: int) -> None:
        self.combos = sorted(weight)
        total = sum(weight.values())
        acc, cdf = 0.0, []
        for key in self.combos:
            acc += weight[key] / total
            cdf.append(acc)
        cdf[-1] = 1.0
        self.cdf = cdf
        self.probs = [weight[key] / total for key in self.combos]
        self.size = size

    @classmethod
    def of_tasks(cls, kept: Sequence[Counts]) -> _Mixture:
        """Over (n, x): one task drawn uniformly, then its count."""
        weight: dict[tuple[int, ...], float] = {}
        for c, n in kept:
            for x, q in enumerate(_predictive_pmf(c, n)):
                if q > _NEGLIGIBLE:
                    weight[(n, x)] = weight.get((n, x), 0.0) + q
        return cls(weight, len(kept))

    @classmethod
    def of_pairs(cls, pairs: Sequence[tuple[Counts, Counts]]) -> _Mixture:
        """Over (n_base, x_base, n_new, x_new): one task drawn uniformly (both of its
        runs together: paired), then each run's count apart."""
        weight: dict[tuple[int, ...], float] = {}
        for (cb, nb), (cn, nn) in pairs:
            pb, pn = _predictive_pmf(cb, nb), _predictive_pmf(cn, nn)
            for xb, qb in enumerate(pb):
                if qb <= _NEGLIGIBLE:
                    continue
                for xn, qn in enumerate(pn):
                    if qb * qn > _NEGLIGIBLE:
                        key = (nb, xb, nn, xn)
                        weight[key] = weight.get(key, 0.0) + qb * qn
        return cls(weight, len(pairs))

    def draws(self, rng: random.Random) -> list[float]:
        """The m uniform draws of one resample, in order."""
        return sorted(starmap(rng.random, repeat((), self.size)))  # as [rng.random() for ...], looped in C

    def resample(self, rng: random.Random) -> tuple[list[int], list[int]]:
        """One resample as a sparse histogram: the indexes of the combinations drawn and
        how often (for many combinations, of which a resample draws few)."""
        m, cdf, last = self.size, self.cdf, len(self.cdf) - 1
        draws = self.draws(rng)
        idx: list[int] = []
        counts: list[int] = []
        pos = 0
        while pos < m:
            i = bisect_left(cdf, draws[pos])  # the combination of the next draw ...
            end = m if i == last else bisect_right(draws, cdf[i], pos)  # ... and its draws
            idx.append(i)
            counts.append(end - pos)
            pos = end
        return idx, counts

    def columns(self, resamples: int, rng: random.Random) -> list[list[int]]:
        """Every resample at once: per combination, how often each resample drew it (one
        column of ``resamples`` counts per combination). Many tasks (over
        :data:`_BINOMIAL_FROM`) take :meth:`binomial_columns`, a few these draws:

        The same draws as one resample after another (``resamples`` times :meth:`draws`),
        taken in blocks, with the sorting and counting done by ``map`` over whole blocks:
        the usual run's bootstrap (a few trials per task, so a few combinations) costs a
        few passes in C instead of a Python loop per resample."""
        m, cuts = self.size, self.cdf[:-1]
        upto: list[list[int]] = [[] for _ in cuts]  # per cut: the draws below it, per resample
        block = max(1, _BLOCK_DRAWS // m)
        rnd = rng.random
        for start in range(0, resamples, block):
            size = min(block, resamples - start)
            u = list(starmap(rnd, repeat((), m * size)))  # as [rnd() for ...], looped in C
            chunks = list(map(sorted, map(u.__getitem__, map(slice, range(0, m * size, m), range(m, m * size + 1, m)))))
            for below, cut in zip(upto, cuts):
                below.extend(map(bisect_right, chunks, repeat(cut)))
        counts, prev = [], [0] * resamples
        for below in [*upto, [m] * resamples]:
            counts.append(list(map(sub, below, prev)))
            prev = below
        return counts

    def binomial_columns(self, resamples: int, rng: random.Random) -> list[list[int]]:
        """:meth:`columns` for many tasks: a resample's histogram is multinomial over the
        combinations, drawn as one binomial per combination (how many of the draws still
        left it takes, at its share of what is left), each by inverting a table of the
        binomial's distribution. A combination costs one uniform draw per resample, where
        drawing the tasks one by one costs one per task: 2,500 tasks at k = 8 is 8 draws
        per resample instead of 2,500. The same distribution; other draws than
        :meth:`columns` takes for the same seed."""
        left = [self.size] * resamples
        counts: list[list[int]] = []
        rnd = rng.random
        tail = 1.0  # the share of the combinations not yet drawn
        for p in self.probs[:-1]:
            share = min(1.0, p / tail) if tail > 0 else 1.0
            tables = {r: _binomial_table(r, share) for r in set(left)}
            lows = {r: t[0] for r, t in tables.items()}
            cdfs = {r: t[1] for r, t in tables.items()}
            u = list(starmap(rnd, repeat((), resamples)))
            drawn = list(map(add, map(lows.__getitem__, left), map(bisect_left, map(cdfs.__getitem__, left), u)))
            counts.append(drawn)
            left = list(map(sub, left, drawn))
            tail = max(0.0, tail - p)
        counts.append(left)  # the last combination takes the draws left
        return counts


@lru_cache(maxsize=4096)
def _binomial_table(n: int, p: float) -> tuple[int, list[float]]:
    """``(low, cdf)`` of Binomial(n, p) over the counts not negligible: ``cdf[i]`` is
    P(X <= low + i), the last entry 1.0. Built outward from the mode by the ratio of
    neighbouring probabilities (no factorial, no overflow); counts under
    :data:`_NEGLIGIBLE` of the mode's probability are left out (never drawn in practice)."""
    if n == 0 or p <= 0.0:
        return 0, [1.0]
    if p >= 1.0:
        return n, [1.0]
    odds = p / (1.0 - p)
    mode = min(n, int((n + 1) * p))
    below: list[float] = []
    w, x = 1.0, mode
    while x > 0:
        w *= x / ((n - x + 1) * odds)  # P(x - 1) / P(x)
        if w < _NEGLIGIBLE:
            break
        below.append(w)
        x -= 1
    above: list[float] = []
    w, x = 1.0, mode
    while x < n:
        w *= (n - x) / (x + 1) * odds  # P(x + 1) / P(x)
        if w < _NEGLIGIBLE:
            break
        above.append(w)
        x += 1
    weights = [*reversed(below), 1.0, *above]
    total = sum(weights)
    acc, cdf = 0.0, []
    for q in weights:
        acc += q / total
        cdf.append(acc)
    cdf[-1] = 1.0
    return mode - len(below), cdf


def bootstrap_table(
    tasks: Sequence[Counts],
    js: Sequence[int],
    measures: Sequence[str] = ("pass_hat", "pass_at"),
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, dict[int, Interval | None]]:
    """:func:`bootstrap_intervals` for several measures at once (``"pass_hat"``,
    ``"pass_at"``), all read from the same resamples: ``{measure: {j: interval}}``."""
    kept = [(c, n) for c, n in tasks if n >= 1]
    reached = {j: any(n >= j for _, n in kept) for j in js}
    out: dict[str, dict[int, Interval | None]] = {me: {j: None for j in js} for me in measures}
    live = [j for j in js if reached[j]]
    if not live:
        return out
    mix = _Mixture.of_tasks(kept)
    j_max = max(live)
    by_n = [(n, [x for _, x in run]) for n, run in groupby(mix.combos, key=itemgetter(0))]
    rows = [(me, j, _estimate_row(by_n, j, j_max, me)) for me in measures for j in live]
    # the tasks a j counts (those with at least j trials), per resample; all of them when
    # every task has as many trials as the largest j (the usual run)
    ns = [key[0] for key in mix.combos]
    fewest = min(ns)
    masks = {j: [1] * len(ns) if j <= fewest else [1 if n >= j else 0 for n in ns] for j in live}
    for me, j, mean in _resampled_means(mix, rows, masks, resamples, seed):
        out[me][j] = _centred(mean, _mean_estimate(kept, j, me), 0.0, 1.0)
    return out


def _column_sums(columns: Sequence[list[int]], values: Sequence[float], resamples: int) -> list[float]:
    """Per resample, the sum over the combinations of its count times the combination's
    value: one row of :meth:`_Mixture.columns` against the values, added combination by
    combination in order (the same sums, to the bit, as a dot product per resample that
    ``sum`` adds in order, as it does up to Python 3.11; from 3.12 ``sum`` adds floats
    with compensation, so :func:`_sparse_means` may differ from these in the last bits)."""
    acc: list[float] = [0.0] * resamples
    for col, v in zip(columns, values):
        if v:  # adds nothing
            acc = list(map(add, acc, map(v.__mul__, col)))
    return acc


def _dense_sums(mix: _Mixture, rows: Sequence[tuple[str, int, Sequence[float]]], masks: dict[int, list[int]],
                resamples: int, rng: random.Random) -> tuple[list[list[float]], dict[int, list[float]]]:
    """The sums and the counted draws of each resample (see :func:`_resampled_means`),
    column by column over every resample at once."""
    cols = (mix.binomial_columns if mix.size > _BINOMIAL_FROM else mix.columns)(resamples, rng)
    sums = [_column_sums(cols, row, resamples) for _, _, row in rows]
    return sums, {j: _column_sums(cols, [float(x) for x in mask], resamples) for j, mask in masks.items()}


def _dense_means(mix: _Mixture, rows: Sequence[tuple[str, int, Sequence[float]]], masks: dict[int, list[int]],
                 resamples: int, rng: random.Random) -> Iterator[list[float]]:
    """Each row's means (see :func:`_resampled_means`) from :func:`_dense_sums`."""
    sums, dens = _dense_sums(mix, rows, masks, resamples, rng)
    for acc, (_, j, _) in zip(sums, rows):
        den = dens.get(j)
        yield list(map(truediv, acc, repeat(mix.size))) if den is None else [s / d for s, d in zip(acc, den) if d]


def _sparse_means(mix: _Mixture, rows: Sequence[tuple[str, int, Sequence[float]]], masks: dict[int, list[int]],
                  resamples: int, rng: random.Random) -> list[list[float]]:
    """Each row's means (see :func:`_resampled_means`), resample by resample over the
    few combinations each drew.

    A resample's sum for a row is ``sum`` of count times value over the combinations it
    drew, in their order. Rather than one such ``sum`` built per row (products made
    anew each time), the rows are turned into one column per combination (its value
    in every row, then 1.0 or 0.0 in every mask), a drawn column is scaled by its count
    once per (combination, count) and kept (:class:`_ScaledColumns`), and one ``zip``
    of the drawn columns hands ``sum`` each row's products: a few passes in C per
    resample, however many rows. The products, their order and ``sum`` are those of
    the per-row sum, so the sums, and the intervals, are the same to the bit as that
    sum's on every Python (``sum`` adds in order up to 3.11 and with compensation from
    3.12: either way a function of that sequence of floats; checked on 3.10 to 3.13).
    A combination whose column is all 0.0 is left out: adding 0.0 changes no sum,
    compensated or not.

    A resample that draws what an earlier one drew (a few tasks that nearly always pass
    draw the same few counts again and again: 17 such tasks at k = 88 draw 383
    different histograms in 2,000 resamples) has that one's means, computed once."""
    if not rows:
        return []
    columns = list(zip(*[row for _, _, row in rows], *[[float(b) for b in mask] for mask in masks.values()]))
    scaled = _ScaledColumns(columns)
    zeros = [0.0] * len(columns[0])
    # per row: where in a resample's sums the draws its mask counted are (None: no mask)
    at = {j: len(rows) + p for p, j in enumerate(masks)}
    dividers = [at.get(j) for _, j, _ in rows]
    seen: dict[tuple[tuple[int, ...], tuple[int, ...]], list[float | None]] = {}
    per_resample: list[list[float | None]] = []
    for _ in range(resamples):
        idx, counts = mix.resample(rng)
        key = (tuple(idx), tuple(counts))
        means = seen.get(key)
        if means is None:
            drawn = list(filter(None, map(scaled.__getitem__, zip(idx, counts))))  # () left out
            means = seen[key] = _divided(list(map(sum, zip(*drawn))) if drawn else zeros, dividers, float(mix.size))
        per_resample.append(means)
    table = list(map(list, zip(*per_resample)))
    # a row without a mask has a mean in every resample (None only where a mask counted no draw)
    return [cast(list[float], col) if p is None else [x for x in col if x is not None]
            for col, p in zip(table, dividers)]


def _divided(sums: list[float], dividers: list[int | None], size: float) -> list[float | None]:
    """A resample's mean per row: its sum over the resample's size (as a float: the
    same quotient as over the int, a little faster), or, for a row with a mask
    (``dividers``), over the draws the mask counted; None where it counted none (that
    resample has no mean for that j)."""
    if len(sums) == len(dividers):  # no masks: the usual run
        return list(map(truediv, sums, repeat(size)))
    return [s / size if p is None else (s / sums[p] if sums[p] else None) for s, p in zip(sums, dividers)]


class _ScaledColumns(dict[tuple[int, int], tuple[float, ...]]):
    """(combination, count) -> the combination's column times the count (see
    :func:`_sparse_means`), made on first use and kept: the resamples draw a few hundred
    distinct (combination, count) between them, each many times. A column of 0.0 only
    is ``()``, so that a resample leaves it out (adding 0.0 changes no sum). Past
    :data:`_SCALED_KEPT` floats kept, a column is scaled anew each time (the same
    floats, at the old cost)."""

    def __init__(self, columns: Sequence[tuple[float, ...]]) -> None:
        super().__init__()
        self.columns = [col if any(col) else () for col in columns]
        self.room = _SCALED_KEPT

    def __missing__(self, key: tuple[int, int]) -> tuple[float, ...]:
        i, count = key
        col = self.columns[i]
        if count == 1:  # 1 * v is v, to the bit: the column itself, kept at no cost
            self[key] = col
        else:
            # mul(count, v), as the per-row sum multiplied, operands in that order
            col = tuple(map(mul, repeat(count), col))
            if self.room >= len(col):
                self[key] = col
                self.room -= len(col)
        return col


def _resampled_means(
    mix: _Mixture,
    rows: Sequence[tuple[str, int, Sequence[float]]],
    masks: dict[int, list[int]],
    resamples: int,
    seed: int,
) -> Iterator[tuple[str, int, list[float]]]:
    """For each (measure, j, value per combination) row: the mean of each resample over
    the combinations that count for j (``masks[j]``; a resample that drew none has no
    mean and is left out)."""
    # the tasks each j counts are all of them in the usual run: the mean is over m tasks
    counted = {j: mask for j, mask in masks.items() if not all(mask)}
    rng = random.Random(seed)
    # column by column for a few combinations, or for many tasks and not too many combinations
    dense = len(mix.combos) <= _DENSE or (mix.size > _BINOMIAL_FROM and len(mix.combos) <= _BINOMIAL_COMBOS)
    means = (_dense_means if dense else _sparse_means)(mix, rows, counted, resamples, rng)
    for (me, j, _), mean in zip(rows, means):
        yield me, j, mean


def bootstrap_differences(
    base: Sequence[Counts],
    new: Sequence[Counts],
    js: Sequence[int],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[int, Interval | None]:
    """95% intervals of (new pass^j - base pass^j) over the same tasks (``base[i]`` and
    ``new[i]`` are one task's counts in each run), for every j in ``js``: tasks are
    resampled together (paired), each run's trials apart, by the same mixture as
    :func:`bootstrap_table`. For a j, tasks with fewer than j graded trials in either
    run are left out; None for a j where none is left."""
    pairs = [(b, w) for b, w in zip(base, new, strict=True) if b[1] >= 1 and w[1] >= 1]
    out: dict[int, Interval | None] = {j: None for j in js}
    live = [j for j in js if j >= 1 and any(b[1] >= j and w[1] >= j for b, w in pairs)]
    if not live:
        return out
    mix = _Mixture.of_pairs(pairs)
    j_max = max(live)
    rows = [
        ("pass_hat", j, [_estimate(nn, xn, j, j_max, "pass_hat") - _estimate(nb, xb, j, j_max, "pass_hat")
                         for nb, xb, nn, xn in mix.combos])
        for j in live
    ]
    masks = {j: [1 if min(key[0], key[2]) >= j else 0 for key in mix.combos] for j in live}
    for _, j, diffs in _resampled_means(mix, rows, masks, resamples, seed):
        out[j] = _centred(diffs, _mean_difference(pairs, j), -1.0, 1.0)
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
