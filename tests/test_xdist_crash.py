"""A pytest-xdist worker that dies mid-trial (the agent calls ``os._exit``): that trial
is errored, never a pass; every other result is aggregated and written."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_sandtable.plugin.artifacts import crashed_trial

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, make_shop, only_results

pytest.importorskip("xdist")


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("SHOP_FAIL", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    make_shop(pytester)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=4", "-n", "2", *args)


def test_a_dying_worker_leaves_its_trial_errored_and_the_rest_written(
    shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_CRASH", "greet:2")
    result = run(shop, "--junitxml=junit.xml")
    assert result.ret == 1  # no gate: the crashed item fails the run, as pytest says
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'sandtable.yaml::greet[[]2-4[]]'*"])
    result.stdout.fnmatch_lines([
        "12 trials of 3 tasks: 11 passed, 0 failed, 1 errored (left out of pass^k)   agent: shop-agent   "
        "user: scripted",
    ])
    result.stdout.fnmatch_lines(["sandtable: results in .sandtable/runs/*-shop/"])
    doc = only_results(shop.path)
    assert len(doc["trials"]) == 12
    crashed = [t for t in doc["trials"] if t["verdict"] != "passed"]
    assert len(crashed) == 1
    (t,) = crashed
    assert (t["task"], t["trial"], t["verdict"], t["ended_by"]) == ("greet", 2, "errored", "worker_crashed")
    assert t["error"].startswith("the pytest-xdist worker running this trial died (worker 'gw")
    assert t["error"].endswith("crashed while running 'sandtable.yaml::greet[2-4]'); the trial was not graded")
    assert (t["agent"], t["user"], t["tags"], t["critical"]) == ("shop-agent", "scripted", ["chat"], False)
    same = next(x for x in doc["trials"] if x["task"] == "greet" and x["trial"] == 1)
    assert t["location"] == same["location"] == "sandtable.yaml:54"
    assert t["seed"] != same["seed"] and isinstance(t["seed"], int)
    s = doc["summary"]
    assert (s["passed"], s["failed"], s["errored"]) == (11, 0, 1)
    assert s["pass_hat"]["4"] == 1.0  # greet has 3 graded trials: left out of pass^4, not counted a pass
    assert s["pass_hat"]["3"] == 1.0
    assert s["pass_hat_tasks"] == {"1": 3, "2": 3, "3": 3, "4": 2}  # and the summary says so
    assert doc["tasks"][1] == {"domain": "shop", "task": "greet", "verdict": "passed", "critical": False,
                               "tags": ["chat"], "trials": 4, "graded": 3, "passed": 3, "errored": 1,
                               "rate_ci": [pytest.approx(0.4385030, abs=1e-6), 1.0]}  # Wilson, 3 of 3
    case = next(c for c in ET.parse(shop.path / "junit.xml").getroot().iter("testcase")
                if c.get("name") == "greet[2-4]")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["sandtable.verdict"] == "errored"


def test_a_dying_worker_fails_a_gate(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_CRASH", "order-status:3")
    result = run(shop, "--sandtable-fail-under=50")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "sandtable gate failed: 1 trial errored and was not graded (errored trials never count as passes): "
        "order-status[3]",
        "  failed: 1 trial errored and was not graded (errored trials never count as passes): order-status[3]",
        "  passed: pass^4 100.0% meets --sandtable-fail-under 50% with 50.0 points to spare",
    ], consecutive=True)


def test_a_dying_worker_on_a_critical_task(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_CRASH", "refund:1")
    result = run(shop)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "sandtable gate failed: critical tasks fail the run even with no gate set: critical task refund errored "
        "in 1 ([1]; errored trials never count as passes)"
    ])
    assert only_results(shop.path)["summary"]["errored_trials"][0]["task"] == "refund"


def test_crashed_trial_of_something_that_is_not_a_trial(tmp_path: Path) -> None:
    assert crashed_trial("tests/test_x.py::test_y", tmp_path, run_seed=0, why="x") is None
    assert crashed_trial("missing.yaml::task[1-2]", tmp_path, run_seed=0, why="x") is None
