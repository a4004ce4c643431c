"""--sandtable-adaptive --sandtable-baseline-agent=SPEC: each trial item runs the
candidate's trial and then the baseline agent's trial of the same task and trial seed;
the pairs feed each task's sequential McNemar test (sequential.PairedRegression), e-BH
across tasks flags the regressed ones, and the gate fails on them; the same decisions at
any concurrency and under xdist; the usage errors before any trial runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _planted import planted_domain

from pytest_sandtable.report.results_json import validate_results

pytest_plugins = ["pytester"]

DOMAIN = planted_domain("drops", "steady")

# the baseline build passes every trial; the candidate too, except task drops, which it
# passes only where the trial seed is even (1.0 to about 0.5): a pair's two trials share
# the seed. Each build notes the (task, trial, seed) it played, to check the pairing.
AGENTS = """\
from pathlib import Path


def _note(build, turn):
    if len(turn.messages) == 1:
        with Path(__file__).with_name("played-" + build).open("a") as f:
            f.write(f"{turn.trial.task_id} {turn.trial.trial} {turn.trial.seed}\\n")


def baseline(turn):
    _note("baseline", turn)
    if len(turn.messages) == 1:
        turn.call_tool("read_note", {"id": "n-1"})
    return "Done."


def candidate(turn):
    _note("candidate", turn)
    if len(turn.messages) == 1 and (turn.trial.task_id != "drops" or turn.trial.seed % 2 == 0):
        turn.call_tool("read_note", {"id": "n-1"})
    return "Done."


def costly(turn):  # the baseline build, recording $1.00 of usage a trial (200,000 input tokens)
    if len(turn.messages) == 1:
        turn.usage.add("claude-opus-4-5", input_tokens=200_000)
    return baseline(turn)


baseline.inline = candidate.inline = costly.inline = True


async def slow(turn):
    import asyncio

    await asyncio.sleep(0.002 * (40 - turn.trial.trial))  # later trials end first
    return candidate(turn)
"""

RUN = ["--sandtable-adaptive", "--sandtable-k=32", "--sandtable-baseline-agent=planted:baseline",
       "--sandtable-out=out", "-p", "no:randomly"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("planted.py").write_text(AGENTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(pytester.path))
    return pytester


def _results(p: pytest.Pytester) -> dict:
    doc = json.loads(Path(p.path, "out", "results.json").read_text(encoding="utf-8"))
    validate_results(doc)
    return doc


def _decided(doc: dict) -> list[tuple]:
    return [(e["task"], e["verdict"], e["graded"], e["passes"], e["regression"]["verdict"],
             e["regression"]["graded"], e["regression"]["pairs"], round(e["regression"]["e_value"], 6))
            for e in doc["adaptive"]["tasks"]]


def test_a_candidate_that_dropped_against_the_baseline_agent_is_flagged(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-agent=planted:candidate", *RUN, "--sandtable-fail-on-regression")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "task            adaptive verdict    graded trials    passed    anytime 95% CI    e-value    "
        "against the baseline",
        "planted/drops   unreliable          3                1/3       0-93%             0.0273     "
        "regressed after 13 pairs (7 drops, 0 gains; e-value 74.9)",
        "planted/steady  reliable            16               16/16     69-100%           21.8       "
        "inconclusive after 16 pairs (0 drops, 0 gains; e-value 1)",
    ])
    result.stdout.fnmatch_lines([
        "sandtable: regressed (paired sequential, e-BH at alpha 0.05): drops",
        "sandtable: the baseline agent's 29 trials: 29 passed, 0 failed, 0 errored; cost not priced (not in the "
        "run's)",
        "sandtable gate failed: task drops regressed against the baseline's trials of the same seeds (paired "
        "sequential, e-BH at alpha 0.05: e-value 74.9 after 13 pairs, 7 drops and 0 gains)",
    ])
    assert "Fisher" not in out
    doc = _results(project)
    assert _decided(doc) == [("drops", "unreliable", 3, 1, "regressed", 13, [7, 0], 74.926927),
                             ("steady", "reliable", 16, 16, "inconclusive", 16, [0, 0], 1.0)]
    assert doc["adaptive"]["regression"] == {"design": "paired", "alpha": 0.05, "method": "e-BH", "tasks": 2,
                                             "flagged": ["drops"], "task_alpha": 0.025,
                                             "baseline_agent": "planted:baseline"}
    assert doc["gate"]["passed"] is False
    # results.json's trials are the candidate's alone; each baseline trial had its candidate's seed
    assert {t["agent"] for t in doc["trials"]} == {"planted:candidate"} and len(doc["trials"]) == 29
    played = {b: Path(project.path, f"played-{b}").read_text().splitlines() for b in ("baseline", "candidate")}
    assert played["baseline"] == played["candidate"] and len(played["baseline"]) == 29


def test_a_critical_task_may_not_drop_at_all_a_separate_rule(project: pytest.Pytester) -> None:
    text = DOMAIN.replace("  - id: drops\n", "  - id: drops\n    critical: true\n")
    project.path.joinpath("sandtable.yaml").write_text(text, encoding="utf-8")
    result = project.runpytest("--sandtable-agent=planted:candidate", *RUN, "--sandtable-fail-on-regression")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    failed = [c["text"] for c in _results(project)["gate"]["checks"] if not c["passed"]]
    assert sorted(failed) == [
        "critical task drops failed 7 of 13 trials ([1], [3], [6], [8], [9], [10], [13])",  # the run's own rule
        "critical task drops regressed against the baseline agent: 7 drops and 0 gains in 13 pairs (a critical "
        "task may not drop at all)",
        "task drops regressed against the baseline's trials of the same seeds (paired sequential, e-BH at alpha "
        "0.05: e-value 74.9 after 13 pairs, 7 drops and 0 gains)",
    ]


def test_an_unchanged_build_against_itself_is_not_flagged(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-agent=planted:baseline", *RUN, "--sandtable-fail-on-regression")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([
        "sandtable: no task regressed (paired sequential, e-BH at alpha 0.05; 2 tasks in the baseline)",
        "sandtable: the baseline agent's 32 trials: 32 passed, 0 failed, 0 errored; cost not priced (not in the "
        "run's)",
    ])
    assert [t[:5] for t in _decided(_results(project))] == [("drops", "reliable", 16, 16, "inconclusive"),
                                                             ("steady", "reliable", 16, 16, "inconclusive")]


def test_the_decisions_are_the_same_at_any_concurrency_and_under_xdist(project: pytest.Pytester) -> None:
    project.runpytest("--sandtable-agent=planted:candidate", *RUN)
    alone = _results(project)
    project.runpytest("--sandtable-agent=planted:slow", *RUN, "--sandtable-concurrency=6")
    many = _results(project)
    project.runpytest_subprocess("--sandtable-agent=planted:slow", *RUN, "-p", "xdist", "-n", "2",
                                 "--sandtable-concurrency=3")
    shared = _results(project)
    assert _decided(many) == _decided(shared) == _decided(alone)
    assert _decided(alone)[0] == ("drops", "unreliable", 3, 1, "regressed", 13, [7, 0], 74.926927)
    assert many["adaptive"]["regression"] == shared["adaptive"]["regression"] == alone["adaptive"]["regression"]


def test_the_baseline_sides_cost_counts_toward_the_budget_and_is_shown_apart(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-agent=planted:candidate", *RUN, "--sandtable-baseline-agent=planted:costly",
                               "--sandtable-max-cost=2.50", "-rs")
    spent = "not run: the run's cost budget of $2.50 is spent ($3.00 recorded; --sandtable-max-cost)"
    result.stdout.fnmatch_lines([f"SKIPPED [31] sandtable.yaml:17: {spent}",
                                 f"SKIPPED [30] sandtable.yaml:14: {spent}"])
    result.stdout.fnmatch_lines(["sandtable: the baseline agent's 3 trials: 3 passed, 0 failed, 0 errored; "
                                 "cost $3.00 (not in the run's)"])
    doc = _results(project)
    assert (doc["adaptive"]["stopped"], doc["adaptive"]["spent"]) == ("max_cost", 3)
    assert doc["adaptive"]["regression"]["baseline_agent"] == "planted:costly"


def _usage_error(p: pytest.Pytester, *args: str) -> str:
    result = p.runpytest(*args, "--sandtable-out=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not Path(p.path, "out").exists() and not Path(p.path, "played-candidate").exists()
    lines = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR: ")]
    assert len(lines) == 1, result.stderr.str()
    return lines[0]


def test_usage_errors_before_any_trial(project: pytest.Pytester) -> None:
    agent = "--sandtable-agent=planted:candidate"
    assert _usage_error(project, agent, "--sandtable-baseline-agent=planted:baseline") == (
        "ERROR: --sandtable-baseline-agent needs --sandtable-adaptive: each task's regression is tested "
        "sequentially on the pairs, and its trials stop once it is settled")
    assert _usage_error(project, agent, "--sandtable-adaptive", "--sandtable-baseline-agent=planted:baseline",
                        "--sandtable-baseline=base") == (
        "ERROR: --sandtable-baseline-agent and --sandtable-baseline: give one: the baseline agent runs in this "
        "job, a baseline file is a run stored before")
    assert _usage_error(project, agent, "--sandtable-adaptive", "--sandtable-baseline-agent=planted:nope").startswith(
        "ERROR: --sandtable-baseline-agent: ")
