"""Gates: --sandtable-fail-under, --sandtable-floor, critical tasks and domain files that
did not load; the lines users see (one verdict line first, then one line per check) and
the exit status each gives."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.gates import (
    GateCheck,
    GateError,
    evaluate,
    gate_is_set,
    parse_fail_under,
    parse_floor,
    verdict_lines,
)

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, make_shop, only_results

# --------------------------------------------------------------------------- evaluate()

SUMMARY: dict[str, Any] = {
    "k": 4,
    "pass_hat": {"1": 0.875, "2": 0.75, "3": 0.6875, "4": 0.625},
    "tags": {
        "booking": {"tasks": 2, "pass_hat": {"1": 1.0, "2": 1.0, "3": 1.0, "4": 1.0}},
        "secrecy": {"tasks": 1, "pass_hat": {"1": 0.5, "2": 0.25, "3": 0.0, "4": 0.0}},
    },
}


def trial(task: str, n: int, verdict: str, critical: bool = False, domain: str = "freight") -> TrialResult:
    return TrialResult(domain=domain, task=task, trial=n, k=4, seed=0, verdict=verdict, critical=critical)


def test_fail_under_compares_the_highest_pass_k() -> None:
    out = evaluate(SUMMARY, 85, {}, [])
    assert (out.passed, out.gate_set) == (False, True)
    assert out.lines == ["sandtable gate failed: pass^4 62.5% is below --sandtable-fail-under 85% by 22.5 points"]
    out = evaluate(SUMMARY, 62.5, {}, [])
    assert out.passed and out.lines == [
        "sandtable gate passed: pass^4 62.5% meets --sandtable-fail-under 62.5% exactly"
    ]
    out = evaluate(SUMMARY, 60, {}, [])
    assert out.lines == [
        "sandtable gate passed: pass^4 62.5% meets --sandtable-fail-under 60% with 2.5 points to spare"
    ]


def test_a_margin_under_a_tenth_of_a_point_is_not_shown_as_zero() -> None:
    near = {"k": 1, "pass_hat": {"1": 0.8704}, "tags": {}}
    assert evaluate(near, 87, {}, []).lines == [
        "sandtable gate passed: pass^1 87.0% meets --sandtable-fail-under 87% with 0.04 points to spare"
    ]
    assert evaluate(near, 87.05, {}, []).lines == [
        "sandtable gate failed: pass^1 87.0% is below --sandtable-fail-under 87.05% by 0.01 points"
    ]


def test_fail_under_at_exactly_the_score_passes_despite_float_rounding() -> None:
    out = evaluate({"k": 1, "pass_hat": {"1": 0.29 + 0.58}, "tags": {}}, 87, {}, [])  # 0.8699999999999999
    assert out.passed


def test_floors_per_tag_and_an_unknown_tag() -> None:
    out = evaluate(SUMMARY, None, {"booking": 90, "secrecy": 40, "billing": 50}, [])
    assert not out.passed
    assert out.lines == [
        "sandtable gate failed: tag secrecy pass^4 0.0% is below --sandtable-floor secrecy=40% by 40.0 points "
        "(and 1 more failure)",
        "  failed: tag secrecy pass^4 0.0% is below --sandtable-floor secrecy=40% by 40.0 points",
        "  failed: --sandtable-floor billing=50: no task is tagged 'billing'; the tags are booking, secrecy",
        "  passed: tag booking pass^4 100.0% meets --sandtable-floor booking=90% with 10.0 points to spare",
    ]
    assert [c.passed for c in out.checks] == [False, False, True]
    assert out.to_dict(None, {"booking": 90})["checks"][2] == {
        "passed": True,
        "text": "tag booking pass^4 100.0% meets --sandtable-floor booking=90% with 10.0 points to spare",
    }


def test_a_floor_finds_a_tag_scored_per_domain_or_says_which_to_choose() -> None:
    # a run of several domains scores a tag that is not shared as domain/tag
    scoped = {"k": 4, "pass_hat": {"4": 0.5}, "tags": {
        "freight/booking": {"tasks": 2, "pass_hat": {"4": 0.5}},
        "clinic/handoff": {"tasks": 1, "pass_hat": {"4": 1.0}},
        "freight/handoff": {"tasks": 1, "pass_hat": {"4": 0.0}},
    }}
    out = evaluate(scoped, None, {"booking": 40}, [])
    assert out.lines == [
        "sandtable gate passed: tag freight/booking pass^4 50.0% meets --sandtable-floor booking=40% "
        "with 10.0 points to spare"
    ]
    out = evaluate(scoped, None, {"handoff": 40, "freight/handoff": 10}, [])
    assert out.lines == [
        "sandtable gate failed: --sandtable-floor handoff=40: tag 'handoff' is scored per domain in this run: "
        "give one of clinic/handoff, freight/handoff (and 1 more failure)",
        "  failed: --sandtable-floor handoff=40: tag 'handoff' is scored per domain in this run: "
        "give one of clinic/handoff, freight/handoff",
        "  failed: tag freight/handoff pass^4 0.0% is below --sandtable-floor freight/handoff=10% by 10.0 points",
    ]


def test_the_verdict_comes_first_and_is_never_both_passed_and_failed() -> None:
    # fail-under met while a floor is missed: one verdict, failed; then each gate on its own line
    out = evaluate(SUMMARY, 50, {"secrecy": 40}, [])
    assert out.lines == [
        "sandtable gate failed: tag secrecy pass^4 0.0% is below --sandtable-floor secrecy=40% by 40.0 points",
        "  failed: tag secrecy pass^4 0.0% is below --sandtable-floor secrecy=40% by 40.0 points",
        "  passed: pass^4 62.5% meets --sandtable-fail-under 50% with 12.5 points to spare",
    ]
    assert sum(ln.startswith("sandtable gate") for ln in out.lines) == 1
    out = evaluate(SUMMARY, 50, {"booking": 90}, [])
    assert out.passed and out.lines == [
        "sandtable gate passed: all 2 gates met",
        "  passed: pass^4 62.5% meets --sandtable-fail-under 50% with 12.5 points to spare",
        "  passed: tag booking pass^4 100.0% meets --sandtable-floor booking=90% with 10.0 points to spare",
    ]
    assert verdict_lines([]) == []
    assert verdict_lines([GateCheck(False, "a"), GateCheck(False, "b"), GateCheck(False, "c")])[0] == (
        "sandtable gate failed: a (and 2 more failures)"
    )


def test_a_domain_file_that_did_not_load_fails_the_outcome_gate_or_not() -> None:
    broken = [{"path": "suite/broken.sandtable.yaml", "message": "suite/broken.sandtable.yaml:1:1: missing 'tools'"}]
    line = "domain file suite/broken.sandtable.yaml did not load (a collection error), so none of its tasks ran"
    out = evaluate(SUMMARY, None, {}, [], broken)
    assert (out.passed, out.gate_set, out.lines) == (False, False, [
        f"sandtable gate failed: a domain file that did not load fails the run even with no gate set: {line}"])
    out = evaluate(SUMMARY, 50, {}, [], broken)
    assert (out.passed, out.gate_set) == (False, True)
    assert out.lines == [
        f"sandtable gate failed: {line}",
        f"  failed: {line}",
        "  passed: pass^4 62.5% meets --sandtable-fail-under 50% with 12.5 points to spare",
    ]


def test_a_run_that_stopped_early_fails_the_outcome() -> None:
    out = evaluate(SUMMARY, None, {}, [], stopped_early="stopping after 1 failures")
    assert (out.passed, out.lines) == (False, [
        "sandtable gate failed: a run that stopped early fails even with no gate set: the run stopped early "
        "(stopping after 1 failures), so these results cover only the trials that ran"
    ])


def test_x_records_the_early_stop_in_results_json(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_shop(pytester)
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-x", "--sandtable-k=4", "--sandtable-fail-under=10")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = only_results(pytester.path)
    assert doc["run"]["stopped_early"] == "stopping after 1 failures"
    assert doc["gate"]["passed"] is False
    result.stdout.fnmatch_lines(["sandtable gate failed: the run stopped early (stopping after 1 failures)*"])


def test_a_score_that_cannot_be_computed_fails_the_gate() -> None:
    out = evaluate({"k": 4, "pass_hat": {"1": None, "2": None, "3": None, "4": None}, "tags": {}}, 10, {}, [])
    assert out.lines == [
        "sandtable gate failed: pass^4 is n/a (no task has 4 graded trials), so --sandtable-fail-under 10% is not met"
    ]


def test_any_failing_trial_of_a_critical_task_fails_the_run() -> None:
    trials = [trial("expired-insurance", i, v, critical=True) for i, v in
              enumerate(["passed", "failed", "errored", "failed"], 1)]
    trials.append(trial("book-by-lane", 1, "failed"))
    out = evaluate(SUMMARY, None, {}, trials)
    assert (out.passed, out.gate_set) == (False, False)
    assert out.lines == [
        "sandtable gate failed: critical tasks fail the run even with no gate set: "
        "critical task expired-insurance failed 2 of 4 "
        "trials ([2], [4]) and errored in 1 ([3]; errored trials never count as passes)"
    ]
    assert evaluate(SUMMARY, None, {}, [trial("expired-insurance", 1, "passed", critical=True)]).passed


def test_with_a_gate_set_an_errored_trial_fails_it() -> None:
    trials = [trial("book-by-lane", 1, "passed"), trial("book-by-lane", 2, "errored")]
    assert evaluate(SUMMARY, None, {}, trials).passed  # no gate: pytest's rule decides
    out = evaluate(SUMMARY, 50, {}, trials)
    assert out.lines == [
        "sandtable gate failed: 1 trial errored and was not graded (errored trials never count as passes): "
        "book-by-lane[2]",
        "  failed: 1 trial errored and was not graded (errored trials never count as passes): book-by-lane[2]",
        "  passed: pass^4 62.5% meets --sandtable-fail-under 50% with 12.5 points to spare",
    ]


def test_several_domains_name_tasks_with_their_domain() -> None:
    trials = [trial("intake", 1, "failed", critical=True, domain="clinic"), trial("x", 1, "passed")]
    assert evaluate(SUMMARY, None, {}, trials).lines == [
        "sandtable gate failed: critical tasks fail the run even with no gate set: "
        "critical task clinic/intake failed 1 of 1 trials ([1])"
    ]


@pytest.mark.parametrize(
    ("raw", "parsed"), [("booking=90", ("booking", 90.0)), (" vetting = 87.5% ", ("vetting", 87.5)),
                        ("a=0", ("a", 0.0))]
)
def test_parse_floor(raw: str, parsed: tuple[str, float]) -> None:
    assert parse_floor(raw) == parsed


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("booking", "--sandtable-floor: expected TAG=PCT, e.g. booking=90, got 'booking'"),
        ("=90", "--sandtable-floor: expected TAG=PCT, e.g. booking=90, got '=90'"),
        ("booking=", "--sandtable-floor: expected TAG=PCT, e.g. booking=90, got 'booking='"),
        ("booking=lots", "--sandtable-floor booking: expected a percentage from 0 to 100, got 'lots'"),
        ("booking=120", "--sandtable-floor booking: expected a percentage from 0 to 100, got '120'"),
    ],
)
def test_parse_floor_refuses_bad_values(raw: str, message: str) -> None:
    with pytest.raises(GateError) as info:
        parse_floor(raw)
    assert str(info.value) == message


def test_parse_fail_under() -> None:
    assert parse_fail_under(None) is None
    assert parse_fail_under(85.0) == 85.0
    assert parse_fail_under(0) == 0.0  # 0: no threshold at all, but a gate (exit status from the gate)
    assert parse_fail_under(1.5) == 1.5
    with pytest.raises(GateError, match=r"^--sandtable-fail-under: expected a percentage from 0 to 100, "
                                                r"got '150.0'$"):
        parse_fail_under(150.0)


@pytest.mark.parametrize(("raw", "meant"), [(0.85, "85"), ("0.875", "87.5"), (1, "100"), (1.0, "100"),
                                            (0.001, "0.1")])
def test_a_fraction_for_fail_under_is_a_usage_error_with_a_hint(raw: float | str, meant: str) -> None:
    with pytest.raises(GateError) as info:
        parse_fail_under(raw)
    assert str(info.value) == f"--sandtable-fail-under takes a percentage: did you mean {meant}?"


def test_a_fraction_for_a_floor_is_a_usage_error_with_a_hint() -> None:
    with pytest.raises(GateError) as info:
        parse_floor("chat=0.9")
    assert str(info.value) == "--sandtable-floor takes a percentage: did you mean chat=90?"


# --------------------------------------------------------------------------- exit status of a run

# The shop has three tasks: refund (critical, tag refunds), greet and order-status (tag chat).
# With SHOP_FAIL=greet:2 and k=4: pass^4 = (1 + 0 + 1) / 3 = 66.7%, tag chat 50%, tag refunds 100%.


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    make_shop(pytester)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=4", *args)


def gate_lines(result: pytest.RunResult) -> list[str]:
    """The verdict line and the per-check lines that follow it."""
    lines = result.outlines
    for i, ln in enumerate(lines):
        if ln.startswith("sandtable gate"):
            rest = lines[i + 1:]
            n = next((j for j, x in enumerate(rest) if not x.startswith(("  failed: ", "  passed: "))), len(rest))
            return [ln, *rest[:n]]
    return []


def test_no_gate_pytest_rule_a_failing_trial_fails_the_run(shop: pytest.Pytester) -> None:
    result = run(shop)
    result.assert_outcomes(passed=11, failed=1)
    assert result.ret == 1
    assert gate_lines(result) == []


def test_no_gate_and_every_trial_passes(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "")
    assert run(shop).ret == 0


def test_fail_under_met_passes_the_run_with_a_failing_trial(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-fail-under", "60")
    result.assert_outcomes(passed=11, failed=1)
    assert result.ret == 0
    assert gate_lines(result) == [
        "sandtable gate passed: pass^4 66.7% meets --sandtable-fail-under 60% with 6.7 points to spare"
    ]
    gate = only_results(shop.path)["gate"]
    assert gate == {"set": True, "passed": True, "fail_under": 60.0, "floors": {}, "lines": gate_lines(result),
                    "checks": [{"passed": True, "text": gate_lines(result)[0].removeprefix("sandtable gate passed: ")}]}


def test_a_fraction_given_to_fail_under_is_refused_before_anything_runs(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-fail-under", "0.85")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --sandtable-fail-under takes a percentage: did you mean 85?" in result.stderr.lines
    assert not (shop.path / ".sandtable").exists()
    assert run(shop, "--sandtable-fail-under", "0").ret == 0  # 0 is allowed: every score meets it


def test_fail_under_missed_exits_1_saying_by_how_much(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-fail-under=85")
    assert result.ret == 1
    assert gate_lines(result) == [
        "sandtable gate failed: pass^4 66.7% is below --sandtable-fail-under 85% by 18.3 points"
    ]


def test_floor_met(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-floor", "refunds=100")
    assert result.ret == 0
    assert gate_lines(result) == [
        "sandtable gate passed: tag refunds pass^4 100.0% meets --sandtable-floor refunds=100% exactly"
    ]


def test_floor_missed(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-floor", "refunds=90", "--sandtable-floor", "chat=75")
    assert result.ret == 1
    assert gate_lines(result) == [
        "sandtable gate failed: tag chat pass^4 50.0% is below --sandtable-floor chat=75% by 25.0 points",
        "  failed: tag chat pass^4 50.0% is below --sandtable-floor chat=75% by 25.0 points",
        "  passed: tag refunds pass^4 100.0% meets --sandtable-floor refunds=90% with 10.0 points to spare",
    ]


def test_floor_on_an_unknown_tag_is_a_usage_error_before_any_trial_runs(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-floor", "billing=50", "--sandtable-floor", "chat=10")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: --sandtable-floor billing=50: no collected trial is tagged 'billing'; the tags are chat, refunds"
    )
    assert "PASSED" not in result.stdout.str() and " passed" not in result.stdout.str()
    assert not (shop.path / ".sandtable").exists()


def test_floor_on_a_tag_deselected_by_k_is_a_usage_error(shop: pytest.Pytester) -> None:
    result = run(shop, "-k", "greet", "--sandtable-floor", "refunds=90")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: --sandtable-floor refunds=90: no collected trial is tagged 'refunds'; the tags are chat"
    )


def test_floor_on_an_unknown_tag_under_xdist_is_reported_at_the_end(shop: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = shop.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=4", "-n", "2", "--sandtable-floor", "billing=50")
    assert result.ret == 1
    assert gate_lines(result) == [
        "sandtable gate failed: --sandtable-floor billing=50: no task is tagged 'billing'; the tags are chat, refunds"
    ]


def test_a_malformed_floor_is_a_usage_error(shop: pytest.Pytester) -> None:
    result = run(shop, "--sandtable-floor", "chat")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sandtable-floor: expected TAG=PCT, e.g. booking=90, got 'chat'"])
    assert not (shop.path / ".sandtable").exists()


def test_a_failing_critical_trial_fails_the_run_without_a_gate(
    shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FAIL", "refund:3")
    result = run(shop)
    assert result.ret == 1
    assert gate_lines(result) == [
        "sandtable gate failed: critical tasks fail the run even with no gate set: "
        "critical task refund failed 1 of 4 trials ([3])"
    ]


def test_a_failing_critical_trial_fails_the_run_whatever_the_score(
    shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FAIL", "refund:3")
    result = run(shop, "--sandtable-fail-under=10")
    assert result.ret == 1
    assert gate_lines(result) == [
        "sandtable gate failed: critical task refund failed 1 of 4 trials ([3])",
        "  failed: critical task refund failed 1 of 4 trials ([3])",
        "  passed: pass^4 66.7% meets --sandtable-fail-under 10% with 56.7 points to spare",
    ]


def test_an_errored_trial_never_counts_as_a_pass(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "")
    monkeypatch.setenv("SHOP_USER_FAIL", "greet:2")
    result = run(shop, "--sandtable-fail-under=10")
    result.assert_outcomes(passed=11, errors=1)
    assert result.ret == 1
    assert gate_lines(result) == [
        "sandtable gate failed: 1 trial errored and was not graded (errored trials never count as passes): greet[2]",
        "  failed: 1 trial errored and was not graded (errored trials never count as passes): greet[2]",
        "  passed: pass^4 100.0% meets --sandtable-fail-under 10% with 90.0 points to spare",
    ]


def test_a_failing_plain_test_still_fails_a_gated_run(shop: pytest.Pytester) -> None:
    shop.makepyfile(test_plain="def test_plain():\n    assert 1 == 2\n")
    result = run(shop, "--sandtable-fail-under=10")
    result.assert_outcomes(passed=11, failed=2)
    assert result.ret == 1  # the gate decides about trials only
    assert gate_lines(result) == [
        "sandtable gate passed: pass^4 66.7% meets --sandtable-fail-under 10% with 56.7 points to spare"
    ]


# --------------------------------------------------------------------------- the regression gate (evaluate)


def test_regression_checks_join_the_gate_and_set_it() -> None:
    bad = GateCheck(False, "task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)")
    out = evaluate(SUMMARY, None, {}, [], regression=[bad])
    assert (out.passed, out.gate_set) == (False, True)
    assert out.lines == ["sandtable gate failed: task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)"]
    out = evaluate(SUMMARY, 60, {}, [], regression=[bad, GateCheck(True, "pass^4 did not drop")])
    assert out.lines == [
        "sandtable gate failed: task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)",
        "  failed: task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)",
        "  passed: pass^4 62.5% meets --sandtable-fail-under 60% with 2.5 points to spare",
        "  passed: pass^4 did not drop",
    ]


def test_no_regression_check_leaves_the_gate_unset() -> None:
    assert evaluate(SUMMARY, None, {}, []).gate_set is False
    assert evaluate(SUMMARY, None, {}, [], regression=[]).gate_set is True  # --sandtable-fail-on-regression given
    assert gate_is_set(None, {}, regression=True) and not gate_is_set(None, {})
