"""``pytest --sandtable-baseline=PATH [--sandtable-fail-on-regression]``: a run compared with
a baseline results.json; the gate that fails on a regression (a task's drop beyond chance,
any drop of a critical task, pass^k dropping more than --sandtable-max-drop), its lines,
exit status and run.options; the usage errors before any trial runs; xdist."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, make_shop

from pytest_sandtable import __version__
from pytest_sandtable.report.results_json import read_results

BASELINE_OPTIONS = ("--sandtable-baseline=base", "--sandtable-fail-on-regression")


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The shop domain, and a baseline run of it in ``base/`` where every trial passed."""
    for var in ("SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SHOP_FAIL", "")
    make_shop(pytester)
    monkeypatch.chdir(pytester.path)
    assert pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=4", "--sandtable-out=base").ret == 0
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=4", "--sandtable-out=new", *args)


def lines_from(result: pytest.RunResult, prefix: str) -> list[str]:
    """The line starting with ``prefix`` and the indented lines after it."""
    lines = result.outlines
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            rest = lines[i + 1:]
            n = next((j for j, x in enumerate(rest) if not x.startswith("  ")), len(rest))
            return [line, *rest[:n]]
    return []


def test_a_task_whose_drop_is_beyond_chance_fails_the_gate(shop: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:1,greet:2,greet:3,greet:4,order-status:2")
    result = run(shop, *BASELINE_OPTIONS)
    assert result.ret == 1
    # greet 4/4 -> 0/4: p = 1/70; order-status 4/4 -> 3/4: p = 0.5, within chance
    assert lines_from(result, "sandtable gate") == [
        "sandtable gate failed: task greet regressed from 4/4 to 0/4 (p=0.014 < 0.05)",
    ]
    compared = lines_from(result, "sandtable: against the baseline")
    assert compared[0].startswith("sandtable: against the baseline base (3 tasks in common): "
                                  "pass^4 100.0% -> 33.3% (-66.7 [")  # then the interval of the change
    assert compared[1:] == ["  regressed: greet 4/4 -> 0/4 (p=0.014)"]
    doc = read_results(shop.path / "new")
    assert doc["gate"]["set"] is True and doc["gate"]["passed"] is False
    assert doc["gate"]["checks"] == [
        {"passed": False, "text": "task greet regressed from 4/4 to 0/4 (p=0.014 < 0.05)"}]
    assert doc["run"]["options"]["baseline"] == "base"
    assert (doc["run"]["options"]["fail_on_regression"], doc["run"]["options"]["regression_alpha"],
            doc["run"]["options"]["max_drop"]) == (True, 0.05, None)


def test_without_a_regression_the_gate_decides_and_failing_trials_may_pass(
        shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    result = run(shop, *BASELINE_OPTIONS, "--sandtable-max-drop", "40")
    result.assert_outcomes(passed=11, failed=1)
    assert result.ret == 0
    # greet 3/4: its pass^4 is 0, so pass^4 over the three tasks is 2/3
    assert lines_from(result, "sandtable gate") == [
        "sandtable gate passed: all 2 gates met",
        "  passed: no regression from the baseline: 3 tasks in common, none dropped beyond chance "
        "(one-sided Fisher exact test, p < 0.05) and no critical task dropped",
        "  passed: pass^4 66.7% against the baseline's 100.0% dropped 33.3 points, within --sandtable-max-drop 40",
    ]


def test_max_drop_fails_the_gate_by_how_much(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    result = run(shop, *BASELINE_OPTIONS, "--sandtable-max-drop", "10")
    assert result.ret == 1
    assert lines_from(result, "sandtable gate")[0] == (
        "sandtable gate failed: pass^4 dropped 33.3 points from the baseline (100.0% to 66.7%), "
        "more than --sandtable-max-drop 10")


def test_a_critical_task_regresses_on_any_drop(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "refund:3")
    result = run(shop, *BASELINE_OPTIONS)
    assert result.ret == 1
    assert lines_from(result, "sandtable gate") == [
        "sandtable gate failed: critical task refund regressed from 4/4 to 3/4 "
        "(p=0.5; a critical task may not drop at all) (and 1 more failure)",
        "  failed: critical task refund regressed from 4/4 to 3/4 (p=0.5; a critical task may not drop at all)",
        "  failed: critical task refund failed 1 of 4 trials ([3])",
    ]


def test_a_baseline_alone_only_reports(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:1,greet:2,greet:3,greet:4")
    result = run(shop, "--sandtable-baseline=base")
    assert result.ret == 1  # no gate: failing trials fail the run, as always
    compared = lines_from(result, "sandtable: against the baseline")
    assert compared[0].startswith("sandtable: against the baseline base (3 tasks in common): "
                                  "pass^4 100.0% -> 66.7% (-33.3 [")
    assert compared[1:] == [
        "  regressed: greet 4/4 -> 0/4 (p=0.014)",
        "  regression: task greet regressed from 4/4 to 0/4 (p=0.014 < 0.05)",
    ]
    assert lines_from(result, "sandtable gate") == []
    gate = read_results(shop.path / "new")["gate"]
    assert (gate["set"], gate["passed"], gate["checks"]) == (False, True, [])
    options = read_results(shop.path / "new")["run"]["options"]
    assert (options["baseline"], options["fail_on_regression"]) == ("base", False)


def test_options_are_recorded_only_with_a_baseline(shop: pytest.Pytester) -> None:
    assert run(shop).ret == 0
    assert "baseline" not in read_results(shop.path / "new")["run"]["options"]


# --------------------------------------------------------------------------- usage errors, before any trial


def usage_error(shop: pytest.Pytester, *args: str) -> str:
    result = run(shop, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (shop.path / "new").exists()
    assert " passed" not in result.stdout.str()
    return result.stderr.lines[0]


def test_a_missing_baseline(shop: pytest.Pytester) -> None:
    assert usage_error(shop, "--sandtable-baseline=nope", "--sandtable-fail-on-regression") == (
        "ERROR: --sandtable-baseline: nope: no such file")
    (shop.path / "empty-run").mkdir()
    assert usage_error(shop, "--sandtable-baseline=empty-run") == (
        "ERROR: --sandtable-baseline: empty-run/results.json: no such file")


def test_an_unreadable_baseline(shop: pytest.Pytester) -> None:
    (shop.path / "bad.json").write_text("{", encoding="utf-8")
    assert usage_error(shop, "--sandtable-baseline=bad.json") == (
        "ERROR: --sandtable-baseline: bad.json: not valid JSON: Expecting property name enclosed in double quotes "
        "at line 1 column 2")


def test_a_baseline_of_another_schema_major(shop: pytest.Pytester) -> None:
    doc = json.loads((shop.path / "base" / "results.json").read_text(encoding="utf-8"))
    doc["schema_version"], doc["writer"]["version"] = "2.0", "2.1.0"
    (shop.path / "v2.json").write_text(json.dumps(doc), encoding="utf-8")
    assert usage_error(shop, "--sandtable-baseline=v2.json", "--sandtable-fail-on-regression") == (
        f"ERROR: --sandtable-baseline: v2.json: written with results schema 2.0 by pytest-sandtable 2.1.0; this "
        f"pytest-sandtable ({__version__}) reads schema 1.x only: upgrade pytest-sandtable to read it")


def test_a_baseline_with_no_task_in_common(shop: pytest.Pytester) -> None:
    doc = json.loads((shop.path / "base" / "results.json").read_text(encoding="utf-8"))
    for t in doc["trials"]:
        t["task"] = "other-" + t["task"]
    (shop.path / "other.json").write_text(json.dumps(doc), encoding="utf-8")
    assert usage_error(shop, "--sandtable-baseline=other.json", "-k", "greet") == (
        "ERROR: --sandtable-baseline: other.json has no task in common with the collected trials (it has "
        "shop/other-greet, shop/other-order-status, shop/other-refund; collected: shop/greet)")


@pytest.mark.parametrize(("args", "message"), [
    (("--sandtable-fail-on-regression",),
     "--sandtable-fail-on-regression needs --sandtable-baseline=PATH: the results to compare with"),
    (("--sandtable-max-drop", "5"),
     "--sandtable-max-drop needs --sandtable-baseline=PATH: the results to compare with"),
    (("--sandtable-baseline=base", "--sandtable-regression-alpha", "5"),
     "--sandtable-regression-alpha takes a level between 0 and 1: did you mean 0.05?"),
    (("--sandtable-baseline=base", "--sandtable-regression-alpha", "75"),
     "--sandtable-regression-alpha: expected a level between 0 and 1, e.g. 0.05, got '75'"),
    (("--sandtable-baseline=base", "--sandtable-max-drop", "-1"),
     "--sandtable-max-drop: expected a percentage from 0 to 100, got '-1'"),
])
def test_bad_option_values(shop: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    assert usage_error(shop, *args) == f"ERROR: {message}"


def test_a_lower_alpha_passes_the_same_drop(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:1,greet:2,greet:3,greet:4")
    result = run(shop, *BASELINE_OPTIONS, "--sandtable-regression-alpha", "0.01")
    assert result.ret == 0
    assert read_results(shop.path / "new")["run"]["options"]["regression_alpha"] == 0.01


# --------------------------------------------------------------------------- under pytest-xdist


def test_under_xdist_the_controller_compares(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("SHOP_FAIL", "greet:1,greet:2,greet:3,greet:4")
    result = shop.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=4", "-n", "2", "--sandtable-out=new",
                                       *BASELINE_OPTIONS)
    assert result.ret == 1
    assert lines_from(result, "sandtable gate") == [
        "sandtable gate failed: task greet regressed from 4/4 to 0/4 (p=0.014 < 0.05)"]


def test_under_xdist_a_baseline_with_no_task_in_common_fails_the_gate(shop: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    doc = json.loads((shop.path / "base" / "results.json").read_text(encoding="utf-8"))
    for t in doc["trials"]:
        t["task"] = "other-" + t["task"]
    (shop.path / "other.json").write_text(json.dumps(doc), encoding="utf-8")
    result = shop.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=4", "-n", "2", "--sandtable-out=new",
                                       "--sandtable-baseline=other.json", "--sandtable-fail-on-regression")
    assert result.ret == 1
    assert lines_from(result, "sandtable gate")[0] == (
        "sandtable gate failed: --sandtable-baseline: other.json and this run have no task in common "
        "(domain shop: other.json ran other-refund, other-greet, other-order-status; this run ran refund, greet, "
        "order-status)")
