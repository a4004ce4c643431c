"""The statistics behind the scores (report/stats.py), against values computed by hand
or published: a wrong interval or p-value would silently mislead every reader."""

from __future__ import annotations

from math import comb

import pytest

from pytest_sandtable.report import stats


def test_pass_hat_and_pass_at_are_the_unbiased_estimators() -> None:
    # 3 of 4 passed: pass^2 = C(3,2)/C(4,2) = 3/6; pass@2 = 1 - C(1,2)/C(4,2) = 1
    assert stats.pass_hat(3, 4, 2) == 0.5
    assert stats.pass_at(3, 4, 2) == 1.0
    assert stats.pass_at(1, 4, 2) == 0.5  # 1 - C(3,2)/C(4,2)
    assert stats.pass_hat(3, 4, 5) is None and stats.pass_at(3, 4, 0) is None


def test_wilson_matches_the_published_formula() -> None:
    # Wilson 95% for 4/8: 0.5 +- ... = (0.2152, 0.7848) (symmetric around 0.5)
    lo, hi = stats.wilson(4, 8) or (0, 0)
    assert (round(lo, 4), round(hi, 4)) == (0.2152, 0.7848)
    # the ends are exact at 0/n and n/n
    assert stats.wilson(0, 8) == (0.0, pytest.approx(0.3244, abs=1e-4))
    assert stats.wilson(8, 8) == (pytest.approx(0.6756, abs=1e-4), 1.0)
    assert stats.wilson(0, 0) is None


def test_task_intervals_are_the_rate_interval_to_the_power_j() -> None:
    lo, hi = stats.wilson(6, 8) or (0, 0)
    assert stats.pass_hat_interval(6, 8, 3) == (lo**3, hi**3)
    assert stats.pass_at_interval(6, 8, 3) == (1 - (1 - lo) ** 3, 1 - (1 - hi) ** 3)
    assert stats.pass_hat_interval(6, 8, 9) is None


def _hypergeom_tail(c_base: int, n_base: int, c_new: int, n_new: int) -> float:
    total, succ = n_base + n_new, c_base + c_new
    return sum(comb(succ, x) * comb(total - succ, n_new - x) for x in range(0, c_new + 1)) / comb(total, n_new)


def test_fisher_flags_8_of_8_to_2_of_8_and_not_4_of_8_to_3_of_8() -> None:
    assert stats.fisher_less(8, 8, 2, 8) == pytest.approx(45 / 12870)  # C(10,2)*C(6,6)/C(16,8)
    assert stats.fisher_less(8, 8, 2, 8) < 0.05
    assert stats.fisher_less(4, 8, 3, 8) == pytest.approx(0.5)
    assert stats.fisher_less(4, 8, 3, 8) > 0.05
    # a rise is the same test the other way round
    assert stats.fisher_greater(2, 8, 8, 8) == pytest.approx(45 / 12870)
    assert stats.fisher_less(2, 8, 8, 8) == pytest.approx(1.0)
    for args in [(5, 7, 1, 6), (0, 3, 0, 4), (3, 3, 3, 3), (10, 20, 4, 20)]:
        assert stats.fisher_less(*args) == pytest.approx(min(1.0, _hypergeom_tail(*args)))
    assert stats.fisher_less(3, 3, 0, 0) == 1.0  # a run without trials says nothing


def test_bootstrap_is_fixed_by_its_seed_and_covers_the_estimate() -> None:
    tasks = [(3, 4), (4, 4), (0, 4), (2, 4)] * 5
    first = stats.bootstrap_intervals(tasks, [1, 2, 3, 4])
    assert first == stats.bootstrap_intervals(tasks, [1, 2, 3, 4])
    for j, interval in first.items():
        assert interval is not None
        lo, hi = interval
        estimate = stats.mean_pass_hat(tasks, j)
        assert estimate is not None and lo <= estimate <= hi
        assert 0.0 <= lo < hi <= 1.0
    # pass^j falls with j, and so do the interval's ends
    assert first[4][1] < first[1][1]  # type: ignore[index]
    # a j no task reaches has no interval
    assert stats.bootstrap_intervals([(1, 2)], [3]) == {3: None}
    assert stats.bootstrap_intervals([], [1]) == {1: None}


def test_bootstrap_of_an_all_pass_suite_is_not_a_point() -> None:
    # every task passed every trial: the trials drawn from each task's Jeffreys posterior
    # may still fail, so the interval is not 100-100% (more certain than one task's own);
    # centred on the estimate, it ends at the estimate's 100%
    lo, hi = stats.bootstrap_interval([(4, 4)] * 10, 2) or (0, 0)
    assert hi == 1.0 and 0.75 < lo < 0.85


def test_paired_difference_sees_a_drop_and_none_between_equal_runs() -> None:
    base, new = [(4, 4)] * 20, [(1, 4)] * 10 + [(4, 4)] * 10
    (lo, hi) = stats.bootstrap_differences(base, new, [1])[1] or (0, 0)
    assert hi < 0  # a drop of 0.375 in pass^1 is beyond the interval's reach of 0
    assert lo <= -0.375 <= hi
    assert (lo + hi) / 2 == pytest.approx(-0.375, abs=0.01)  # centred on the observed drop
    # two runs alike: an interval around no change, as wide on either side
    same = stats.bootstrap_differences(base, base, [1, 4])
    assert same[1] == (pytest.approx(-0.112, abs=1e-3), pytest.approx(0.113, abs=1e-3))
    assert same[4] == (pytest.approx(-0.3, abs=1e-3), pytest.approx(0.3, abs=1e-3))
    with pytest.raises(ValueError):
        stats.bootstrap_differences(base, new[:3], [1])


def test_the_dense_bootstrap_counts_every_resample_at_once_as_one_after_another_would() -> None:
    """A few (trials, count) combinations take the column-wise path: every resample's
    histogram from one block of draws. It must be the very histograms, and the very
    sums, that drawing and counting resample by resample gives with the same seed (the
    intervals in results.json do not depend on which path computed them)."""
    import functools
    import operator
    import random
    from bisect import bisect_right
    from itertools import repeat

    mix = stats._Mixture.of_tasks([(4, 4), (3, 4), (1, 4), (0, 4), (2, 4)] * 3)
    assert len(mix.combos) <= stats._DENSE
    rng = random.Random(5)
    by_one = []
    for _ in range(300):
        draws = sorted([rng.random() for _ in repeat(None, mix.size)])
        upto = [bisect_right(draws, c) for c in mix.cdf[:-1]] + [mix.size]
        by_one.append([b - a for a, b in zip([0, *upto], upto)])
    columns = mix.columns(300, random.Random(5))
    assert [list(row) for row in zip(*columns)] == by_one
    values = [0.1 * (i + 1) / 3 for i in range(len(mix.combos))]
    # added in order, combination by combination (Python's sum adds floats with
    # compensation from 3.12: the in-order sums are what the column-wise path makes)
    assert stats._column_sums(columns, values, 300) == [
        functools.reduce(operator.add, (c * v for c, v in zip(row, values)), 0.0) for row in by_one]


def test_many_tasks_draw_each_resample_as_binomials_and_land_where_drawing_tasks_does() -> None:
    """Past _BINOMIAL_FROM tasks a resample's histogram is drawn one binomial per (trials,
    count) combination instead of one draw per task: the same multinomial, so the same
    intervals within resampling noise, for a fraction of the draws."""
    from math import comb as choose

    low, cdf = stats._binomial_table(10, 0.3)
    exact = [sum(choose(10, x) * 0.3**x * 0.7 ** (10 - x) for x in range(low + i + 1)) for i in range(len(cdf))]
    assert low == 0 and cdf == pytest.approx(exact, abs=1e-12) and cdf[-1] == 1.0
    assert stats._binomial_table(0, 0.5) == (0, [1.0]) and stats._binomial_table(7, 1.0) == (7, [1.0])
    low, cdf = stats._binomial_table(100_000, 0.5)  # only the counts that can be drawn
    assert 48_000 < low < 50_000 and len(cdf) < 3_000  # 7.4 standard deviations (158) each side
    tasks = [(4, 4)] * 200 + [(3, 4)] * 150 + [(0, 4)] * 100 + [(1, 4)] * 50
    assert len(tasks) > stats._BINOMIAL_FROM
    binomial = stats.bootstrap_intervals(tasks, [1, 4])
    mix = stats._Mixture.of_tasks(tasks)
    import random

    columns = mix.binomial_columns(50, random.Random(1))
    assert len(columns) == len(mix.combos) and all(sum(row) == len(tasks) for row in zip(*columns))
    threshold = stats._BINOMIAL_FROM
    try:
        stats._BINOMIAL_FROM = 10**9  # task by task
        by_task = stats.bootstrap_intervals(tasks, [1, 4])
    finally:
        stats._BINOMIAL_FROM = threshold
    assert binomial != by_task  # other draws ...
    for j in (1, 4):  # ... the same interval, within resampling noise
        assert binomial[j] == (pytest.approx(by_task[j][0], abs=0.01), pytest.approx(by_task[j][1], abs=0.01))  # type: ignore[index]
