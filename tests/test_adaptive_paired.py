"""--sandtable-adaptive --sandtable-baseline=PATH --sandtable-paired: each trial paired
with the stored baseline's trial of the same task and trial seed, a sequential McNemar
test per task (sequential.PairedRegression) on the discordant pairs, e-BH across tasks;
and the usage errors of a baseline that cannot be paired, before any trial runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _planted import planted_domain

from pytest_sandtable.report.results_json import validate_results

pytest_plugins = ["pytester"]

DOMAIN = planted_domain("drops", "steady", "fresh")

# pass or fail planted by (task, trial seed): every task always passes, except that with
# the file "mode" saying "drop", task drops passes only where its trial seed is even
# (from 1.0 to about 0.5; a pair's outcome depends on the seed the two sides share)
AGENT = """\
from pathlib import Path


def passes(task, seed):
    mode = Path(__file__).with_name("mode")
    if task == "drops" and mode.exists() and mode.read_text() == "drop":
        return seed % 2 == 0
    return True


def agent(turn):
    if len(turn.messages) == 1 and passes(turn.trial.task_id, turn.trial.seed):
        turn.call_tool("read_note", {"id": "n-1"})
    return "Done."


agent.inline = True


async def slow(turn):
    import asyncio

    # later trials end first: outcomes reach the sequences out of order
    await asyncio.sleep(0.002 * (40 - turn.trial.trial))
    return agent(turn)
"""

PAIRED = ["--sandtable-adaptive", "--sandtable-k=32", "--sandtable-baseline=base", "--sandtable-paired",
          "--sandtable-out=out", "-p", "no:randomly"]


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
    return [(e["task"], e["verdict"], e["graded"], e["passes"], e["trials"],
             e["regression"]["verdict"] if "regression" in e else None,
             e["regression"]["graded"] if "regression" in e else None,
             e["regression"]["pairs"] if "regression" in e else None,
             round(e["regression"]["e_value"], 9) if "regression" in e else None)
            for e in doc["adaptive"]["tasks"]]


def test_a_task_that_dropped_is_flagged_within_the_cap_and_fails_the_gate(project: pytest.Pytester) -> None:
    project.path.joinpath("mode").write_text("drop", encoding="utf-8")
    result = project.runpytest("--sandtable-agent=planted:agent", *PAIRED, "--sandtable-fail-on-regression", "-rs")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # drops settles unreliable at its 3rd trial and runs on until its paired test, at
    # alpha 0.05 over the baseline's 2 tasks, says regressed: 7 drops, no gain, in 13
    # pairs; steady stops with its verdict, no drop in 16 pairs (ties say nothing)
    result.stdout.fnmatch_lines([
        "task            adaptive verdict    graded trials    passed    anytime 95% CI    e-value    "
        "against the baseline",
        "planted/drops   unreliable          3                1/3       0-93%             0.0273     "
        "regressed after 13 pairs (7 drops, 0 gains; e-value 74.9)",
        "planted/fresh   reliable            16               16/16     69-100%           21.8       "
        "not in the baseline",
        "planted/steady  reliable            16               16/16     69-100%           21.8       "
        "inconclusive after 16 pairs (0 drops, 0 gains; e-value 1)",
    ])
    result.stdout.fnmatch_lines([
        "sandtable: regressed (paired sequential, e-BH at alpha 0.05): drops",
        "sandtable gate failed: task drops regressed against the baseline's trials of the same seeds (paired "
        "sequential, e-BH at alpha 0.05: e-value 74.9 after 13 pairs, 7 drops and 0 gains)",
    ])
    result.stdout.fnmatch_lines([
        "SKIPPED [19] sandtable.yaml:14: not needed: task settled unreliable after 3 graded trials, regressed "
        "against the baseline after 13 pairs",
        "SKIPPED [16] sandtable.yaml:17: not needed: task settled reliable after 16 graded trials, inconclusive "
        "against the baseline after 16 pairs",
    ], consecutive=False)
    assert "Fisher" not in result.stdout.str()
    doc = _results(project)
    assert _decided(doc) == [
        ("drops", "unreliable", 3, 1, 13, "regressed", 13, [7, 0], 74.92692662),
        ("fresh", "reliable", 16, 16, 16, None, None, None, None),
        ("steady", "reliable", 16, 16, 16, "inconclusive", 16, [0, 0], 1.0),
    ]
    assert doc["adaptive"]["regression"] == {"design": "paired", "alpha": 0.05, "method": "e-BH", "tasks": 2,
                                             "flagged": ["drops"], "task_alpha": 0.025}
    assert doc["gate"]["passed"] is False
    html = Path(project.path, "out", "report.html").read_text(encoding="utf-8")
    assert "regressed after 13 pairs (7 drops, 0 gains; e-value 74.9)" in html
    assert "paired with the baseline&#x27;s of the same seeds" in html or "paired with the baseline's of the" in html


def test_an_unchanged_build_is_not_flagged_and_passes_the_gate(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-agent=planted:agent", *PAIRED, "--sandtable-fail-on-regression")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "sandtable: no task regressed (paired sequential, e-BH at alpha 0.05; 2 tasks in the baseline)",
        "sandtable gate passed: no regression from the baseline: 2 tasks tested sequentially, none flagged "
        "(paired sequential, e-BH at alpha 0.05) and no critical task dropped",
    ])
    tasks = _results(project)["adaptive"]["tasks"]
    assert [(e["task"], e["graded"], e.get("regression", {}).get("verdict")) for e in tasks] == [
        ("drops", 16, "inconclusive"), ("fresh", 16, None), ("steady", 16, "inconclusive")]


def test_the_decisions_are_the_same_at_any_concurrency_and_under_xdist(project: pytest.Pytester) -> None:
    project.path.joinpath("mode").write_text("drop", encoding="utf-8")
    project.runpytest("--sandtable-agent=planted:agent", *PAIRED)
    alone = _results(project)
    project.runpytest("--sandtable-agent=planted:slow", *PAIRED, "--sandtable-concurrency=6")
    many = _results(project)
    project.runpytest_subprocess("--sandtable-agent=planted:slow", *PAIRED, "-p", "xdist", "-n", "2",
                                 "--sandtable-concurrency=3")
    shared = _results(project)

    def counted(doc: dict) -> list[tuple]:  # what the verdicts counted (trials recorded may differ: uncounted)
        return [t[:4] + t[5:] for t in _decided(doc)]

    assert counted(many) == counted(shared) == counted(alone)
    assert counted(alone)[0] == ("drops", "unreliable", 3, 1, "regressed", 13, [7, 0], 74.92692662)
    assert many["adaptive"]["regression"] == shared["adaptive"]["regression"] == alone["adaptive"]["regression"]
    assert alone["adaptive"]["regression"]["flagged"] == ["drops"]
    for doc in (many, shared):  # a trial started before its task settled is recorded, and left out
        assert all(t > 13 for t in doc["adaptive"]["tasks"][0]["uncounted"])


def _usage_error(p: pytest.Pytester, *args: str) -> str:
    result = p.runpytest("--sandtable-agent=planted:agent", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not Path(p.path, "out").exists()  # before any trial ran
    lines = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR: ")]
    assert len(lines) == 1, result.stderr.str()
    return lines[0]


def test_a_baseline_without_trial_seeds_is_one_usage_error_before_any_trial(project: pytest.Pytester) -> None:
    doc = json.loads(Path(project.path, "base", "results.json").read_text(encoding="utf-8"))
    doc["trials"] = []  # a results.json that kept its tasks' counts and not its trials
    Path(project.path, "counts").mkdir()
    Path(project.path, "counts", "results.json").write_text(json.dumps(doc), encoding="utf-8")
    args = [a if a != "--sandtable-baseline=base" else "--sandtable-baseline=counts" for a in PAIRED]
    assert _usage_error(project, *args) == (
        "ERROR: --sandtable-paired: counts has no trials with their seeds to pair with (its results.json lists "
        "none); give a baseline whose results.json keeps its trials, or leave out --sandtable-paired to test "
        "against its counts")


def test_a_baseline_of_another_run_seed_never_lines_up_and_says_which(project: pytest.Pytester) -> None:
    assert _usage_error(project, *PAIRED, "--sandtable-seed=7") == (
        "ERROR: --sandtable-paired: no trial of base has the seed of this run's trial of its task: it ran with "
        "--sandtable-seed=0, this run with 7; give --sandtable-seed=0")


def test_paired_needs_adaptive_and_a_baseline(project: pytest.Pytester) -> None:
    assert _usage_error(project, "--sandtable-baseline=base", "--sandtable-paired", "--sandtable-out=out") == (
        "ERROR: --sandtable-paired needs --sandtable-adaptive: the paired design is a sequential test that runs "
        "each task until its regression is settled (docs/adaptive.md)")
    assert _usage_error(project, "--sandtable-adaptive", "--sandtable-paired", "--sandtable-out=out") == (
        "ERROR: --sandtable-paired needs --sandtable-baseline=PATH: the results to compare with")


def test_a_cap_the_paired_test_at_alpha_over_m_cannot_use_is_a_usage_error(project: pytest.Pytester) -> None:
    args = [a for a in PAIRED if a != "--sandtable-k=32"]
    assert _usage_error(project, *args, "--sandtable-k=6", "--sandtable-reliability=0.5") == (
        "ERROR: --sandtable-paired: detecting a drop at alpha = 0.025 needs at least 7 paired trials; the cap is 6 "
        "(alpha 0.05 over the baseline's 2 tasks with pairs)")
