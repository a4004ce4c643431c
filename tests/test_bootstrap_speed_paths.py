"""The bootstrap's sparse path (report/stats.py, ``_sparse_means``) against the plain
computation it replaced, written out here: draw each resample task by task, then for
every row (pass^j or pass@j at one j) ``sum`` count times value over the combinations
it drew, in their order, and divide by the tasks the row counts. The fast path keeps
scaled columns, skips all-zero ones and reuses a repeated resample's means; the
intervals in results.json must not move by a bit for it, also where a j counts only
the tasks with enough trials (uneven trials per task) and for paired differences."""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from operator import mul

import pytest

from pytest_sandtable.report import stats

Row = tuple[str, int, list[float]]


def reference_resample(mix: stats._Mixture, rng: random.Random) -> tuple[list[int], list[int]]:
    """One resample drawn task by task: m uniforms, sorted, each the combination whose
    cumulative probability it first reaches (the last one takes what is left)."""
    last = len(mix.cdf) - 1
    drawn = Counter(min(bisect_left(mix.cdf, u), last) for u in sorted(rng.random() for _ in range(mix.size)))
    idx = sorted(drawn)
    return idx, [drawn[i] for i in idx]


def reference_means(mix: stats._Mixture, rows: Sequence[Row], masks: dict[int, list[int]],
                    resamples: int, seed: int) -> list[list[float]]:
    """Each row's resampled means, one ``sum`` per row and resample (the formula before
    the sparse path was made fast); a resample that drew no task a row counts is left out."""
    rng = random.Random(seed)
    means: list[list[float]] = [[] for _ in rows]
    for _ in range(resamples):
        idx, counts = reference_resample(mix, rng)
        for out, (_, j, row) in zip(means, rows):
            total = sum(map(mul, counts, [row[i] for i in idx]))
            if all(masks[j]):
                out.append(total / mix.size)
            elif counted := sum(map(mul, counts, [masks[j][i] for i in idx])):
                out.append(total / counted)
    return means


def reference_table(tasks: Sequence[stats.Counts], js: Sequence[int],
                    resamples: int) -> dict[str, dict[int, stats.Interval]]:
    kept = [(c, n) for c, n in tasks if n >= 1]
    mix = stats._Mixture.of_tasks(kept)
    j_max = max(js)
    rows = [(me, j, [stats._estimate(n, x, j, j_max, me) for n, x in mix.combos])
            for me in ("pass_hat", "pass_at") for j in js]
    masks = {j: [1 if n >= j else 0 for n, _ in mix.combos] for j in js}
    out: dict[str, dict[int, stats.Interval]] = {"pass_hat": {}, "pass_at": {}}
    for (me, j, _), mean in zip(rows, reference_means(mix, rows, masks, resamples, stats.BOOTSTRAP_SEED)):
        out[me][j] = stats._centred(mean, stats._mean_estimate(kept, j, me), 0.0, 1.0)
    return out


def reference_differences(base: Sequence[stats.Counts], new: Sequence[stats.Counts], js: Sequence[int],
                          resamples: int) -> dict[int, stats.Interval]:
    pairs = list(zip(base, new, strict=True))
    mix = stats._Mixture.of_pairs(pairs)
    j_max = max(js)
    def diff(nb: int, xb: int, nn: int, xn: int, j: int) -> float:
        return stats._estimate(nn, xn, j, j_max, "pass_hat") - stats._estimate(nb, xb, j, j_max, "pass_hat")

    rows = [("pass_hat", j, [diff(nb, xb, nn, xn, j) for nb, xb, nn, xn in mix.combos]) for j in js]
    masks = {j: [1 if min(key[0], key[2]) >= j else 0 for key in mix.combos] for j in js}
    means = reference_means(mix, rows, masks, resamples, stats.BOOTSTRAP_SEED)
    return {j: stats._centred(mean, stats._mean_difference(pairs, j), -1.0, 1.0)
            for (_, j, _), mean in zip(rows, means)}


def takes_the_sparse_path(mix: stats._Mixture) -> bool:
    few_combos = len(mix.combos) <= stats._DENSE
    binomial = mix.size > stats._BINOMIAL_FROM and len(mix.combos) <= stats._BINOMIAL_COMBOS
    return not few_combos and not binomial


def mixed(seed: int, tasks: int, trials: Callable[[random.Random], int]) -> list[stats.Counts]:
    """Tasks as a real suite has them: half always pass, a sixth always fail, the rest
    flaky at a rate of their own; ``trials`` gives each task its graded trials."""
    rng = random.Random(seed)
    out = []
    for _ in range(tasks):
        n, u = trials(rng), rng.random()
        rate = 1.0 if u < 0.5 else 0.0 if u < 0.65 else rng.random()
        out.append((sum(rng.random() < rate for _ in range(n)), n))
    return out


SUITES = {
    # the freight example at k = 88 with the reference agent: resamples repeat often
    "17 tasks all 88 of 88": [(88, 88)] * 17,
    "40 mixed tasks, 30 trials each": mixed(1, 40, lambda rng: 30),
    # uneven trials (errored trials are not graded): a j counts only the tasks with n >= j
    "25 tasks, 1 to 12 trials": mixed(2, 25, lambda rng: rng.randint(1, 12)),
    # one task reaches j = 9..20: the resamples that do not draw it have no mean there
    "many short tasks, one long": [(2, 3), (3, 3), (0, 3), (1, 3)] * 4 + [(15, 20)] + [(4, 8), (8, 8)] * 2,
}


@pytest.mark.parametrize("name", list(SUITES))
def test_the_sparse_path_gives_the_intervals_of_one_sum_per_row(name: str) -> None:
    tasks = SUITES[name]
    k = max(n for _, n in tasks)
    js = list(range(1, k + 1))
    assert takes_the_sparse_path(stats._Mixture.of_tasks(tasks))
    fast = stats.bootstrap_table(tasks, js, resamples=600)
    assert fast == reference_table(tasks, js, resamples=600)
    # a real interval at every j, not a table of Nones that would compare equal anyway
    assert all(interval is not None for by_j in fast.values() for interval in by_j.values())


def test_repeated_resamples_are_counted_as_often_as_they_are_drawn() -> None:
    """17 tasks that passed 88 of 88 draw far fewer different histograms than resamples:
    the means of a repeated one are reused, and each resample still counts once."""
    tasks = SUITES["17 tasks all 88 of 88"]
    mix = stats._Mixture.of_tasks(tasks)
    rng = random.Random(stats.BOOTSTRAP_SEED)
    histograms = [reference_resample(mix, rng) for _ in range(2000)]
    distinct = {(tuple(idx), tuple(counts)) for idx, counts in histograms}
    assert 100 < len(distinct) < 1000
    js = list(range(1, 89))
    table = stats.bootstrap_table(tasks, js)
    assert table == reference_table(tasks, js, resamples=2000)
    lo, hi = table["pass_hat"][88] or (0.0, 0.0)
    assert hi == 1.0 and 0.0 < lo < 1.0


def test_paired_differences_with_uneven_trials_take_the_same_sums() -> None:
    base = mixed(3, 15, lambda rng: rng.choice([6, 8]))
    new = mixed(4, 15, lambda rng: rng.choice([5, 8]))
    js = list(range(1, 9))
    assert takes_the_sparse_path(stats._Mixture.of_pairs(list(zip(base, new, strict=True))))
    fast = stats.bootstrap_differences(base, new, js, resamples=500)
    assert fast == reference_differences(base, new, js, resamples=500)
    assert all(interval is not None for interval in fast.values())


def test_columns_past_the_memory_kept_are_scaled_anew_to_the_same_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no room to keep scaled columns, each drawn count scales its column again."""
    tasks = SUITES["40 mixed tasks, 30 trials each"]
    js = list(range(1, 31))
    kept = stats.bootstrap_table(tasks, js, resamples=300)
    monkeypatch.setattr(stats, "_SCALED_KEPT", 0)
    assert stats.bootstrap_table(tasks, js, resamples=300) == kept == reference_table(tasks, js, resamples=300)
