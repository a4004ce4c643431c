"""--sandtable-adaptive against a stored baseline (--sandtable-baseline): per task the
baseline has, a sequential regression test on the same graded outcomes as the task's
verdict; a task runs until both are settled; e-BH across tasks flags the regressed ones,
in the terminal, results.json and the gate (--sandtable-fail-on-regression)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _planted import planted_domain

from pytest_sandtable.report.results_json import validate_results

pytest_plugins = ["pytester"]

DOMAIN = planted_domain("drops", "steady", "fresh")

# pass or fail planted by (task, trial): every task always passes, except that with the
# file "mode" saying "drop", task drops passes only its even trials (from 1.0 to 0.5)
AGENT = """\
from pathlib import Path


def passes(task, trial):
    mode = Path(__file__).with_name("mode")
    if task == "drops" and mode.exists() and mode.read_text() == "drop":
        return trial % 2 == 0
    return True


def agent(turn):
    if len(turn.messages) == 1 and passes(turn.trial.task_id, turn.trial.trial):
        turn.call_tool("read_note", {"id": "n-1"})
    return "Done."


agent.inline = True


async def slow(turn):
    import asyncio

    # later trials end first: outcomes reach the sequences out of order
    await asyncio.sleep(0.002 * (40 - turn.trial.trial))
    return agent(turn)
"""

ADAPTIVE = ["--sandtable-adaptive", "--sandtable-k=32", "--sandtable-baseline=base", "--sandtable-out=out",
            "-p", "no:randomly"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A baseline of 32 fixed trials of drops and steady, all passing (fresh is not in it)."""
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("planted.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(pytester.path))
    base = pytester.runpytest("--sandtable-agent=planted:agent", "--sandtable-k=32", "--sandtable-out=base",
                              "-p", "no:randomly", "-k", "drops or steady")
    assert base.ret == 0, base.stdout.str()
    return pytester


def _results(p: pytest.Pytester) -> dict:
    doc = json.loads(Path(p.path, "out", "results.json").read_text(encoding="utf-8"))
    validate_results(doc)
    return doc


def _decided(doc: dict) -> list[tuple]:
    return [(e["task"], e["verdict"], e["graded"], e["passes"], e["stopped_at"],
             e["regression"]["verdict"] if "regression" in e else None,
             e["regression"]["graded"] if "regression" in e else None,
             round(e["regression"]["e_value"], 9) if "regression" in e else None)
            for e in doc["adaptive"]["tasks"]]


def test_a_task_that_dropped_is_flagged_and_fails_the_gate(project: pytest.Pytester) -> None:
    project.path.joinpath("mode").write_text("drop", encoding="utf-8")
    result = project.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE, "--sandtable-fail-on-regression", "-rs")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # drops settles unreliable at its 3rd trial and keeps running until its regression
    # test, at 0.05 over the baseline's 2 tasks, says regressed: at its 11th (6 failures,
    # an e-value of 170 past 2 / 0.025 = 80; at the 9th it was 77); steady is reliable at 16
    # (no-regression at 8, its ratio 0.656^8 = 0.034 below beta)
    result.stdout.fnmatch_lines([
        "task            adaptive verdict    graded trials    passed    anytime 95% CI    e-value    "
        "against the baseline",
        "planted/drops   unreliable          3                1/3       0-93%             0.0273     "
        "regressed after 11 (32/32 before, e-value 170)",
        "planted/fresh   reliable            16               16/16     69-100%           21.8       "
        "not in the baseline",
        "planted/steady  reliable            16               16/16     69-100%           21.8       "
        "no-regression after 8 (32/32 before, e-value 0.0343)",
    ])
    result.stdout.fnmatch_lines([
        "sandtable: regressed (sequential, e-BH at alpha 0.05): drops",
        "sandtable gate failed: task drops regressed from 32/32 in the baseline (sequential, e-BH at alpha 0.05: "
        "e-value 170 after 11 graded trials)",
    ])
    result.stdout.fnmatch_lines([
        "SKIPPED [21] sandtable.yaml:14: not needed: task settled unreliable after 3 graded trials, regressed "
        "against the baseline after 11",
        "SKIPPED [16] sandtable.yaml:17: not needed: task settled reliable after 16 graded trials, no-regression "
        "against the baseline after 8",
        "SKIPPED [16] sandtable.yaml:20: not needed: task settled reliable after 16 graded trials",
    ], consecutive=False)
    assert "Fisher" not in result.stdout.str()
    doc = _results(project)
    assert _decided(doc) == [
        ("drops", "unreliable", 3, 1, 3, "regressed", 11, 169.892562762),
        ("fresh", "reliable", 16, 16, 16, None, None, None),
        ("steady", "reliable", 16, 16, 16, "no-regression", 8, 0.034283607),
    ]
    drops = doc["adaptive"]["tasks"][0]
    assert drops["regression"]["baseline"] == [32, 32] and drops["trials"] == 11 and drops["uncounted"] == []
    assert doc["adaptive"]["regression"] == {"design": "stored", "alpha": 0.05, "method": "e-BH", "tasks": 2,
                                             "flagged": ["drops"], "task_alpha": 0.025}
    assert doc["gate"]["passed"] is False
    assert [c["text"] for c in doc["gate"]["checks"] if not c["passed"]] == [
        "task drops regressed from 32/32 in the baseline (sequential, e-BH at alpha 0.05: e-value 170 after 11 "
        "graded trials)"]
    html = project.path.joinpath("out", "report.html").read_text(encoding="utf-8")
    assert "regressed (sequential, e-BH at alpha 0.05): drops" in html


def test_an_unchanged_run_is_not_flagged_and_passes_the_gate(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE, "--sandtable-fail-on-regression",
                               "--sandtable-regression-alpha=0.01")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["sandtable: no task regressed (sequential, e-BH at alpha 0.01; 2 tasks in the "
                                 "baseline)"])
    doc = _results(project)
    assert doc["adaptive"]["regression"] == {"design": "stored", "alpha": 0.01, "method": "e-BH", "tasks": 2,
                                             "flagged": [], "task_alpha": 0.005}
    assert [(e["task"], e["regression"]["verdict"]) for e in doc["adaptive"]["tasks"] if "regression" in e] == [
        ("drops", "no-regression"), ("steady", "no-regression")]
    assert [c["text"] for c in doc["gate"]["checks"]] == [
        "no regression from the baseline: 2 tasks tested sequentially, none flagged (sequential, e-BH at alpha "
        "0.01) and no critical task dropped"]


def test_the_decisions_are_the_same_at_any_concurrency_and_under_xdist(project: pytest.Pytester) -> None:
    project.path.joinpath("mode").write_text("drop", encoding="utf-8")
    project.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE)
    alone = _results(project)
    project.runpytest("--sandtable-agent=planted:slow", *ADAPTIVE, "--sandtable-concurrency=6")
    many = _results(project)
    project.runpytest_subprocess("--sandtable-agent=planted:slow", *ADAPTIVE, "-p", "xdist", "-n", "2",
                                 "--sandtable-concurrency=3")
    shared = _results(project)
    assert _decided(many) == _decided(shared) == _decided(alone)
    assert many["adaptive"]["regression"] == shared["adaptive"]["regression"] == alone["adaptive"]["regression"]
    assert alone["adaptive"]["regression"]["flagged"] == ["drops"]
    for doc in (many, shared):  # a trial started before its task settled is recorded, and left out
        drops = doc["adaptive"]["tasks"][0]
        assert all(t > 11 for t in drops["uncounted"])


def test_a_regression_level_a_sequential_test_cannot_take_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE, "--sandtable-regression-alpha=0.6")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sandtable-regression-alpha: an adaptive run's regression test takes a "
                                 "level below 0.5, got 0.6"])
    assert not project.path.joinpath("out").exists()


def test_one_task_that_dropped_in_a_baseline_of_four_is_flagged(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task's test runs at alpha over the baseline's 4 tasks, so it stops at an e-value
    e-BH across the 4 can flag alone (4 / 0.05 = 80); at alpha itself drops stopped at 58
    after 7 trials and nothing was flagged."""
    four = planted_domain("drops", "steady", "calm", "still")
    pytester.path.joinpath("sandtable.yaml").write_text(four, encoding="utf-8")
    pytester.path.joinpath("planted.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(pytester.path))
    base = pytester.runpytest("--sandtable-agent=planted:agent", "--sandtable-k=32", "--sandtable-out=base",
                              "-p", "no:randomly")
    assert base.ret == 0, base.stdout.str()
    pytester.path.joinpath("mode").write_text("drop", encoding="utf-8")
    result = pytester.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE, "--sandtable-fail-on-regression")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # at 0.05 / 4: the floor of 32/32 is 0.853, the drop aimed at 0.553; drops says
    # regressed at its 13th trial (7 failures, e-value 181 past 2 / 0.0125 = 160; 91.5 at
    # the 11th), the others no-regression at their 7th (0.649^7 = 0.048 below beta)
    result.stdout.fnmatch_lines([
        "planted/calm    reliable            16               16/16     69-100%           21.8       "
        "no-regression after 7 (32/32 before, e-value 0.0482)",
        "planted/drops   unreliable          3                1/3       0-93%             0.0273     "
        "regressed after 13 (32/32 before, e-value 181)",
        "planted/steady  reliable            16               16/16     69-100%           21.8       "
        "no-regression after 7 (32/32 before, e-value 0.0482)",
        "planted/still   reliable            16               16/16     69-100%           21.8       "
        "no-regression after 7 (32/32 before, e-value 0.0482)",
    ])
    result.stdout.fnmatch_lines([
        "sandtable: regressed (sequential, e-BH at alpha 0.05): drops",
        "sandtable gate failed: task drops regressed from 32/32 in the baseline (sequential, e-BH at alpha 0.05: "
        "e-value 181 after 13 graded trials)",
    ])
    doc = _results(pytester)
    assert doc["adaptive"]["regression"] == {"design": "stored", "alpha": 0.05, "method": "e-BH", "tasks": 4,
                                             "flagged": ["drops"], "task_alpha": 0.0125}
    assert [(e["task"], e["regression"]["verdict"], e["regression"]["graded"], round(e["regression"]["floor"], 6))
            for e in doc["adaptive"]["tasks"]] == [
        ("calm", "no-regression", 7, 0.853338), ("drops", "regressed", 13, 0.853338),
        ("steady", "no-regression", 7, 0.853338), ("still", "no-regression", 7, 0.853338)]
    assert [c["text"] for c in doc["gate"]["checks"] if not c["passed"]] == [
        "task drops regressed from 32/32 in the baseline (sequential, e-BH at alpha 0.05: e-value 181 after 13 "
        "graded trials)"]


def test_a_cap_no_task_can_regress_within_at_alpha_over_m_is_a_usage_error(pytester: pytest.Pytester,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline of 4 trials a task: at 0.05 / 2, the floor of 4/4 is 0.334 and 20
    failures are the least that say "regressed", more than the cap of 16 (at 0.05 itself
    13 would do)."""
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("planted.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(pytester.path))
    base = pytester.runpytest("--sandtable-agent=planted:agent", "--sandtable-k=4", "--sandtable-out=base",
                              "-p", "no:randomly", "-k", "drops or steady")
    assert base.ret == 0, base.stdout.str()
    result = pytester.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE, "--sandtable-k=16")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --sandtable-baseline: detecting a drop from base's 4/4 of task drops, its strongest, at alpha = "
        "0.025 needs at least 20 graded trials; the cap is 16 (alpha 0.05 over the baseline's 2 tasks), so no task "
        "could say \"regressed\": give a larger --sandtable-k or a baseline of more trials"])
    assert not pytester.path.joinpath("out").exists()
    assert pytester.runpytest("--sandtable-agent=planted:agent", *ADAPTIVE, "--sandtable-k=20").ret == 0


@pytest.mark.parametrize(("m", "floor", "least", "stopped"), [
    (2, 0.872024, 4, 11), (3, 0.861044, 5, 13), (20, 0.811481, 8, 25), (165, 0.759695, 11, None)])
def test_each_task_runs_at_alpha_over_the_baselines_tasks_so_e_bh_flags_one_alone(
        m: int, floor: float, least: int, stopped: int | None) -> None:
    """A fall from 32/32 to passing every other trial, among m - 1 tasks that always pass:
    the fallen task's test stops at an e-value e-BH across the m flags (at 165 tasks the
    floor, 0.760, leaves the fall too near the drop aimed at to show within 32)."""
    from pytest_sandtable.report.adaptive import stored_regression
    from pytest_sandtable.sequential import Design, e_bh

    design = Design(cap=32)
    fell, steady = stored_regression((32, 32), design, 0.05, m), stored_regression((32, 32), design, 0.05, m)
    assert (round(fell.floor, 6), fell.least_trials(), fell.alpha) == (floor, least, 0.05 / m)
    trial = 0
    while fell.open:
        trial += 1
        fell.observe(trial % 2 == 0)
    while steady.open:
        steady.observe(True)
    assert steady.verdict == "no-regression"
    e_values = {"fell": fell.e_value, **{f"t{j}": steady.e_value for j in range(m - 1)}}
    if stopped is None:
        assert fell.verdict == "inconclusive" and e_bh(e_values, 0.05) == []
    else:
        assert (fell.verdict, fell.n) == ("regressed", stopped) and fell.e_value >= 2 * m / 0.05
        assert e_bh(e_values, 0.05) == ["fell"]
