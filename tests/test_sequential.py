"""Adaptive trials, the statistics (issue 25): the design's checks and thresholds, one
task's truncated SPRT, the anytime-valid interval, the paired and stored regression
tests, e-BH and Bonferroni across tasks. Every figure below is hand-checked in
its comment (natural logs)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from pytest_sandtable.sequential import Design, DesignError, TaskSequence
from pytest_sandtable.sequential.confseq import interval
from pytest_sandtable.sequential.multiple import bonferroni, e_bh
from pytest_sandtable.sequential.regression import (
    PairedRegression,
    StoredRegression,
    binomial_tail,
    clopper_pearson_lower,
    clopper_pearson_upper,
)


def run(design: Design, outcomes: str) -> TaskSequence:
    """Feed 'p' (passed) and 'f' (failed) in order; stop feeding once settled."""
    seq = TaskSequence(design)
    for letter in outcomes:
        if seq.verdict is not None:
            break
        seq.observe(letter == "p")
    return seq


# --- the design --------------------------------------------------------------------


def test_default_thresholds_are_villes_not_walds() -> None:
    d = Design()
    assert (d.p0, d.p1, d.alpha, d.beta, d.cap) == (0.8, 0.97, 0.05, 0.05, 32)
    # upper = log(1/0.05) = log 20 = 2.995732; Wald's would be log(0.95/0.05) = log 19
    assert d.upper == pytest.approx(2.995732, abs=1e-6)
    assert d.lower == pytest.approx(-2.995732, abs=1e-6)
    # step_pass = log(0.97/0.8) = log 1.2125 = 0.192684; step_fail = log(0.03/0.2) = log 0.15
    assert d.step_pass == pytest.approx(0.192684, abs=1e-6)
    assert d.step_fail == pytest.approx(-1.897120, abs=1e-6)


def test_least_trials() -> None:
    # 2.995732 / 0.192684 = 15.547: 16 passes in a row certify 0.8 against 0.97
    assert Design().least_trials() == 16
    # 2.995732 / 1.897120 = 1.579: two failures rule out 0.97
    assert Design().least_failures() == 2
    # p1 = 0.999: log(0.999/0.8) = 0.22218, 2.995732 / 0.22218 = 13.48: 14, the issue's
    # floor with every trial passing (0.8^14 = 0.044 <= 0.05 < 0.8^13 = 0.055)
    assert Design(p1=0.999).least_trials() == 14
    # alpha = 0.01: log 100 = 4.60517 / 0.192684 = 23.9: 24
    assert Design(alpha=0.01).least_trials() == 24


def test_an_exact_crossing_is_not_lost_to_rounding() -> None:
    # p1/p0 = 2 and alpha = 1/8: three passes give log 8 exactly, on paper
    d = Design(p0=0.25, p1=0.5, alpha=0.125, beta=0.125, cap=8)
    d.check()
    assert d.least_trials() == 3
    seq = run(d, "ppp")
    assert (seq.verdict, seq.n) == ("reliable", 3)
    assert seq.e_value == pytest.approx(8.0)


@pytest.mark.parametrize(("changes", "message"), [
    ({"cap": 8}, "certifying 0.8 at alpha = 0.05 needs at least 16 trials; the cap is 8"),
    ({"cap": 1}, "certifying 0.8 at alpha = 0.05 needs at least 16 trials; the cap is 1"),
    ({"cap": 15}, "certifying 0.8 at alpha = 0.05 needs at least 16 trials; the cap is 15"),
    ({"alpha": 0.01, "cap": 20}, "certifying 0.8 at alpha = 0.01 needs at least 24 trials; the cap is 20"),
    # p0 = 0.01 against p1 = 0.5: one pass certifies (log 50 > log 20), but ruling out 0.5
    # takes log 0.05 / log(0.5/0.99) = 4.4: 5 failures
    ({"p0": 0.01, "p1": 0.5, "cap": 3}, "ruling out 0.5 at beta = 0.05 needs at least 5 trials; the cap is 3"),
    ({"p0": 0.97}, "the reliability bar p0 (0.97) must be below the good-task rate p1 (0.97)"),
    ({"p0": 0.99}, "the reliability bar p0 (0.99) must be below the good-task rate p1 (0.97)"),
    ({"p0": 0.0}, "the reliability bar p0 must be between 0 and 1 (exclusive), not 0"),
    ({"p0": 1.2}, "the reliability bar p0 must be between 0 and 1 (exclusive), not 1.2"),
    ({"p1": 1.0}, "the good-task rate p1 must be between 0 and 1 (exclusive), not 1"),
    ({"alpha": 0.5}, "alpha must be between 0 and 0.5 (exclusive), not 0.5"),
    ({"alpha": 0.0}, "alpha must be between 0 and 0.5 (exclusive), not 0"),
    ({"beta": -0.1}, "beta must be between 0 and 0.5 (exclusive), not -0.1"),
    ({"beta": math.nan}, "beta must be between 0 and 0.5 (exclusive), not nan"),
    ({"alpha": "0.05"}, "alpha must be between 0 and 0.5 (exclusive), not '0.05'"),
    ({"cap": 2.5}, "the cap must be a whole number of trials, not 2.5"),
    ({"cap": True}, "the cap must be a whole number of trials, not True"),
])
def test_design_errors_name_what_to_change(changes: dict[str, object], message: str) -> None:
    with pytest.raises(DesignError) as info:
        dataclasses.replace(Design(), **changes).check()  # type: ignore[arg-type]
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_good_designs_pass_the_check() -> None:
    Design().check()
    Design(cap=16).check()  # exactly the least
    Design(p0=0.5, p1=0.9, alpha=0.1, beta=0.2, cap=8).check()


def test_least_trials_of_a_bad_design_is_a_design_error_not_a_loop() -> None:
    with pytest.raises(DesignError, match="must be below"):
        Design(p0=0.9, p1=0.8).least_trials()


# --- one task's SPRT ---------------------------------------------------------------


def test_sixteen_passes_are_reliable() -> None:
    seq = run(Design(), "p" * 40)
    # 16 * 0.192684 = 3.08295 >= 2.995732; after 15: 2.89 < 2.995732
    assert (seq.verdict, seq.n, seq.passes, seq.fails) == ("reliable", 16, 16, 0)
    assert seq.llr == pytest.approx(3.082949, abs=1e-6)
    assert seq.e_value == pytest.approx(1.2125 ** 16)  # 21.82
    assert not seq.open


def test_two_failures_are_unreliable() -> None:
    seq = run(Design(), "ff")
    # 2 * -1.897120 = -3.79424 <= -2.995732
    assert (seq.verdict, seq.n) == ("unreliable", 2)
    assert seq.e_value == pytest.approx(0.15 ** 2)


def test_alternating_outcomes() -> None:
    # p f: 0.192684 - 1.897120 = -1.704436; p f p f: -3.408872 <= -2.995732
    seq = run(Design(), "pfpfpf")
    assert (seq.verdict, seq.n, seq.passes) == ("unreliable", 4, 2)


def test_one_early_failure_costs_ten_passes() -> None:
    # -1.897120 + k * 0.192684 >= 2.995732 first at k = 26 (25.39): 27 trials
    seq = run(Design(), "f" + "p" * 40)
    assert (seq.verdict, seq.n, seq.passes) == ("reliable", 27, 26)


def test_inconclusive_at_the_cap_and_a_verdict_on_the_cap_trial_itself() -> None:
    # cap 16, one failure first: -1.897120 + 15 * 0.192684 = 0.993 at trial 16
    seq = run(Design(cap=16), "f" + "p" * 40)
    assert (seq.verdict, seq.n, seq.passes) == ("inconclusive", 16, 15)
    assert seq.e_value == pytest.approx(math.exp(-1.897120 + 15 * 0.192684), rel=1e-5)
    # cap 16, all passing: the 16th trial reaches the boundary: a verdict, not the cap
    assert run(Design(cap=16), "p" * 16).verdict == "reliable"


def test_a_settled_task_takes_no_more_trials() -> None:
    seq = run(Design(), "ff")
    with pytest.raises(ValueError, match="the task is settled: it takes no more trials"):
        seq.observe(True)


def test_llr_comes_from_the_counts_not_a_running_sum() -> None:
    # the same counts in any order give the same figure, bit for bit
    a = run(Design(), "p" * 10 + "f" + "p" * 10)
    b = run(Design(), "f" + "p" * 20)
    assert (a.n, a.passes) == (b.n, b.passes) == (21, 20)
    assert a.llr == b.llr == Design().llr(20, 1)
    assert a.open and b.open  # 20 * 0.192684 - 1.897120 = 1.957 < 2.995732


def test_distance_and_can_settle() -> None:
    d = Design(cap=16)
    seq = TaskSequence(d)
    # fresh: min(2.995732, 2.995732) / 0.192684 = 15.547
    assert seq.distance() == pytest.approx(15.547357, abs=1e-6)
    for _ in range(10):
        seq.observe(True)
    # 10 passes: (2.995732 - 1.926843) / 0.192684 = 5.547
    assert seq.distance() == pytest.approx(5.547357, abs=1e-6)
    assert seq.can_settle()
    late = run(d, "f" + "p" * 14)
    # after 15 trials (llr 0.8005) one more pass gives 0.993 < 2.996 and one more failure
    # -1.097 > -2.996: only "inconclusive" is left
    assert late.open and late.n == 15 and not late.can_settle()
    done = run(d, "ff")
    assert done.distance() == math.inf and not done.can_settle()


# --- the anytime-valid interval -----------------------------------------------------


def test_interval_exact_ends() -> None:
    # 16 of 16: p^16 > (1/17) / 20, p > 340^(-1/16) = 0.694676
    low, high = interval(16, 16)
    assert (round(low, 6), high) == (0.694676, 1.0)
    # 0 of 5: (1 - p)^5 > (1/6) / 20, p < 1 - 120^(-1/5) = 0.616148
    low, high = interval(0, 5)
    assert (low, round(high, 6)) == (0.0, 0.616148)
    assert interval(0, 0) == (0.0, 1.0)


def test_interval_is_wider_than_wilson_and_contains_the_estimate() -> None:
    from pytest_sandtable.report.stats import wilson

    for passes, n in ((8, 10), (30, 32), (1, 20), (16, 16)):
        low, high = interval(passes, n)
        w = wilson(passes, n)
        assert w is not None
        assert low <= passes / n <= high
        assert low <= w[0] and high >= w[1]


@pytest.mark.parametrize(("args", "message"), [
    ((5, 4), "passes must be between 0 and n, not 5 of 4"),
    ((-1, 4), "passes must be between 0 and n, not -1 of 4"),
])
def test_interval_bad_counts(args: tuple[int, int], message: str) -> None:
    with pytest.raises(ValueError) as info:
        interval(*args)
    assert str(info.value) == message


def test_interval_bad_alpha() -> None:
    with pytest.raises(ValueError, match="alpha must be in"):
        interval(3, 4, alpha=0.0)


# --- regression: paired (sequential McNemar) -----------------------------------------


def test_paired_five_drops_regress() -> None:
    r = PairedRegression()
    assert (r.alpha, r.beta, r.cap, r.q1, r.q2, r.weight) == (0.05, 0.05, 32, 0.95, 0.75, 0.8)
    # E = 0.8 * 1.9^d + 0.2 * 1.5^d: d = 4: 0.8 * 13.0321 + 0.2 * 5.0625 = 11.438 < 20;
    # d = 5: 0.8 * 24.76099 + 0.2 * 7.59375 = 21.3275 >= 20
    assert r.least_pairs() == 5
    verdicts = [r.observe(True, False) for _ in range(5)]
    assert verdicts == [None, None, None, None, "regressed"]
    assert (r.n, r.drops, r.gains) == (5, 5, 0)
    assert r.e_value == pytest.approx(21.327542)
    # all the weight on q1 = 0.95: 1.9^4 = 13.03 < 20 <= 1.9^5: still five
    assert PairedRegression(weight=1.0).least_pairs() == 5


def test_paired_concordant_pairs_move_nothing() -> None:
    r = PairedRegression(cap=6)
    for base, new in ((True, True), (False, False), (True, True), (True, False), (False, False)):
        assert r.observe(base, new) is None
    assert (r.n, r.drops, r.gains) == (5, 1, 0)
    assert r.e_value == pytest.approx(1.82)  # 0.8 * 1.9 + 0.2 * 1.5
    # the cap: the sixth pair, concordant, ends it open
    assert r.observe(True, True) == "inconclusive"
    with pytest.raises(ValueError, match="the comparison is settled: it takes no more pairs"):
        r.observe(True, False)


def test_paired_gains_say_no_regression() -> None:
    r = PairedRegression()
    # "no-regression" once LR at q2 = 0.75 is <= 0.05: gains alone, 0.5^g: 0.0625 at four,
    # 0.03125 at five
    assert [r.observe(False, True) for _ in range(5)] == [None] * 4 + ["no-regression"]
    # E = 0.8 * 0.1^5 + 0.2 * 0.5^5 = 0.000008 + 0.00625
    assert r.e_value == pytest.approx(0.006258)
    # a drop and a gain each: 1.5 * 0.5 = 0.75 a round; 0.75^10 = 0.056, 0.75^11 = 0.042
    r = PairedRegression()
    while r.open:
        r.observe(True, False)
        if r.open:
            r.observe(False, True)
    assert (r.verdict, r.n, r.drops, r.gains) == ("no-regression", 22, 11, 11)


def test_paired_close_ends_an_open_test() -> None:
    r = PairedRegression()
    r.observe(True, False)
    assert r.close() == "inconclusive" and not r.open
    assert r.e_value == pytest.approx(1.82)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cap": 4}, "detecting a drop at alpha = 0.05 needs at least 5 paired trials; the cap is 4"),
    # q1 = 0.9: 0.8 * 1.8^5 + 0.2 * 1.5^5 = 15.12 + 1.52 = 16.6 < 20: six
    ({"cap": 5, "q1": 0.9}, "detecting a drop at alpha = 0.05 needs at least 6 paired trials; the cap is 5"),
    ({"q1": 0.5}, "the drop share q1 must be between 0.5 and 1 (exclusive), not 0.5"),
    ({"q2": 1.0}, "the drop share q2 must be between 0.5 and 1 (exclusive), not 1.0"),
    ({"weight": 0.0}, "the weight of q1 must be above 0 and at most 1, not 0.0"),
    ({"alpha": 0.6}, "alpha must be between 0 and 0.5 (exclusive), not 0.6"),
    ({"cap": 3.0}, "the cap must be a whole number of trials, not 3.0"),
])
def test_paired_bad_designs(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DesignError) as info:
        PairedRegression(**kwargs)
    assert str(info.value) == message


# --- regression: against a stored baseline -------------------------------------------


def test_clopper_pearson_exact_bounds() -> None:
    # 32 of 32: p^32 = 0.025, p = exp(log 0.025 / 32) = 0.891119
    assert clopper_pearson_lower(32, 32, 0.025) == pytest.approx(0.891119, abs=1e-6)
    # the textbook two-sided 95% interval of 5/10 is (0.1871, 0.8129); of 9/10 at 90%, 0.6058
    assert clopper_pearson_lower(5, 10, 0.025) == pytest.approx(0.187086, abs=1e-6)
    assert clopper_pearson_upper(5, 10, 0.025) == pytest.approx(0.812914, abs=1e-6)
    assert clopper_pearson_lower(9, 10, 0.05) == pytest.approx(0.605837, abs=1e-6)
    assert clopper_pearson_lower(0, 10, 0.05) == 0.0
    # at the bound the tail is alpha: P(X >= 9 | n = 10, p = 0.605837) = 0.05
    assert binomial_tail(9, 10, clopper_pearson_lower(9, 10, 0.05)) == pytest.approx(0.05, abs=1e-9)
    # a big n does not overflow: 2000 of 2000 at 0.025 is 0.025^(1/2000)
    assert clopper_pearson_lower(1999, 2000, 0.025) < 0.025 ** (1 / 2000)
    assert binomial_tail(0, 5, 0.3) == 1.0 and binomial_tail(6, 5, 0.3) == 0.0


def test_stored_regression_against_a_perfect_baseline() -> None:
    s = StoredRegression(32, 32)
    # floor 0.891119 (above); the drop it is built for: 0.891119 - 0.3 = 0.591119
    assert s.floor == pytest.approx(0.891119, abs=1e-6) and s.target == pytest.approx(0.591119, abs=1e-6)
    # per failure (0.591119 / 0.891119)... the ratio of the drop against the floor:
    # failure: 0.408881 / 0.108881 = 3.75530; pass: 0.591119 / 0.891119 = 0.663345
    assert [s.observe(x) for x in (False, False, True)] == [None, None, None]
    assert s.e_value == pytest.approx(3.75530 ** 2 * 0.663345, rel=1e-5)  # 9.3547 < 40
    # a third failure: 35.13 < 2 / 0.05 = 40; a fourth: 131.9 >= 40
    assert s.observe(False) is None
    assert s.observe(False) == "regressed"
    assert s.n == 5


def test_stored_regression_passes_say_no_regression() -> None:
    s = StoredRegression(32, 32)
    # each pass multiplies the ratio by 0.663345: 0.663345^k <= 0.05 first at k = 8 (7.3)
    outcomes = [s.observe(True) for _ in range(8)]
    assert outcomes == [None] * 7 + ["no-regression"]


def test_stored_regression_edge_baselines() -> None:
    # a baseline that never passed: nothing to drop from
    s = StoredRegression(0, 10)
    assert (s.verdict, s.n, s.e_value) == ("no-regression", 0, 1.0)
    with pytest.raises(ValueError, match="settled"):
        s.observe(False)
    # a floor below twice the drop: the test aims at half the floor (5/10: 0.187086 / 2);
    # a failure multiplies the ratio by 0.906457 / 0.812914 = 1.11507: log 40 / log 1.11507
    # = 33.8, 34 failures, more than the cap: it runs, but cannot say "regressed"
    weak = StoredRegression(5, 10)
    assert weak.target == pytest.approx(0.093543, abs=1e-6)
    assert (weak.least_trials(), weak.can_regress) == (34, False)
    assert weak.close() == "inconclusive"
    # 32/32 needs three failures (log 40 / log 3.75530 = 2.79)
    assert (StoredRegression(32, 32, cap=2).least_trials(), StoredRegression(32, 32, cap=2).can_regress) == (3, False)
    assert StoredRegression(32, 32, cap=3).can_regress
    assert (StoredRegression(0, 10).least_trials(), StoredRegression(0, 10).can_regress) == (0, False)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((0, 0), {}, "the stored baseline has no graded trials of the task to compare with"),
    ((5, 4), {}, "the stored baseline's passes must be between 0 and 4, not 5"),
    ((32, 32), {"drop": 0.0}, "the drop must be between 0 and 1 (exclusive), not 0.0"),
    ((32, 32), {"beta": 0.5}, "beta must be between 0 and 0.5 (exclusive), not 0.5"),
])
def test_stored_bad_designs(args: tuple[int, int], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DesignError) as info:
        StoredRegression(*args, **kwargs)
    assert str(info.value) == message


# --- across tasks ---------------------------------------------------------------------


def test_e_bh_and_bonferroni_by_hand() -> None:
    e = {"a": 100.0, "b": 30.0, "c": 12.0, "d": 2.0, "e": 0.5}
    # m = 5, alpha = 0.1: e-BH needs e_(k) >= 50 / k: 100 >= 50, 30 >= 25, 12 < 16.7,
    # 2 < 12.5, 0.5 < 10: the first two. Bonferroni needs e >= 50: only a.
    assert e_bh(e, 0.1) == ["a", "b"]
    assert bonferroni(e, 0.1) == ["a"]
    # step-up: m = 3, alpha = 0.1: 50 >= 30; 12 < 15 at k = 2, but 11.2 >= 10 at k = 3
    e = {"c": 11.2, "a": 50.0, "b": 12.0}
    assert e_bh(e, 0.1) == ["a", "b", "c"]
    assert bonferroni(e, 0.1) == ["a"]
    # ties by name; nothing flagged; an empty run
    assert e_bh({"y": 20.0, "x": 20.0}, 0.1) == ["x", "y"]
    assert e_bh({"x": 1.0, "y": 19.9}, 0.1) == [] and bonferroni({}, 0.1) == []


def test_multiple_bad_inputs() -> None:
    with pytest.raises(ValueError, match="the e-value of 'x' must be a nonnegative number, not nan"):
        e_bh({"x": math.nan})
    with pytest.raises(ValueError, match="alpha must be between 0 and 1"):
        bonferroni({"x": 2.0}, 1.0)


def test_the_docs_table_of_least_trials_is_the_codes() -> None:
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "adaptive.md").read_text(encoding="utf-8")
    section = text.split("## The least trials a design needs", 1)[1].split("\n## ", 1)[0]
    rows = [line.replace("*", "").strip("| ").split(" | ") for line in section.splitlines()
            if line.replace("*", "").startswith("| 0.")]
    assert len(rows) == 7
    for row in rows:
        p0, p1 = float(row[0]), float(row[1])
        figures = [int(x) for x in row[2:]]
        a05, a01 = Design(p0=p0, p1=p1), Design(p0=p0, p1=p1, alpha=0.01, beta=0.01)
        assert figures == [a05.least_trials(), a05.least_failures(), a01.least_trials(), a01.least_failures()], row
