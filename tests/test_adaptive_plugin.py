"""--sandtable-adaptive in one process: its options, trials in rounds, tasks that stop
once settled (their remaining items skipped, never failed), budgets, the same verdicts
at any --sandtable-concurrency, and what the terminal and results.json say."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _planted import planted_domain

from pytest_sandtable.sequential.design import Design, DesignError

pytest_plugins = ["pytester"]

DOMAIN = planted_domain("good", "bad", "flaky", "steady")

# pass or fail planted by (task, trial): good always passes, bad never, flaky fails every
# third trial, steady every tenth. Each trial records $1.00 of usage (200,000 input tokens
# of claude-opus-4-5 at its $5 per million) for the cost budget.
AGENT = """\
def passes(task, trial):
    if task == "good":
        return True
    if task == "bad":
        return False
    if task == "flaky":
        return trial % 3 != 0
    return trial % 10 != 0


def agent(turn):
    if len(turn.messages) == 1:
        turn.usage.add("claude-opus-4-5", input_tokens=200_000)
        if passes(turn.trial.task_id, turn.trial.trial):
            turn.call_tool("read_note", {"id": "n-1"})
    return "Done."


agent.inline = True


async def slow(turn):
    import asyncio

    # later trials end first: outcomes reach the sequences out of order
    await asyncio.sleep(0.002 * (40 - turn.trial.trial))
    return agent(turn)
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("planted.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(pytester.path))
    return pytester


def _results(p: pytest.Pytester) -> dict:
    return json.loads(Path(p.path, "out", "results.json").read_text(encoding="utf-8"))


def _verdicts(doc: dict) -> list[tuple[str, str, int, int, int | None]]:
    return [(e["task"], e["verdict"], e["graded"], e["passes"], e["stopped_at"]) for e in doc["adaptive"]["tasks"]]


@pytest.mark.parametrize(("args", "message"), [
    (["--sandtable-reliability=0.9"],
     "--sandtable-reliability needs --sandtable-adaptive: it is a parameter of the sequential test that decides "
     "when a task has had enough trials"),
    (["--sandtable-max-trials=10"], "--sandtable-max-trials needs --sandtable-adaptive: *"),
    (["--sandtable-adaptive", "--sandtable-k=1"],
     "--sandtable-adaptive: --sandtable-k is the most trials a task may get, and one trial settles nothing; give "
     "--sandtable-k=N with N of at least 2, or leave it out for 32"),
    # the design's own message (sequential.design words it), after the option's name
    (["--sandtable-adaptive", "--sandtable-k=8"], Design(cap=8)),
    (["--sandtable-adaptive", "--sandtable-reliability=0.98"], Design(p0=0.98)),
    (["--sandtable-adaptive", "--sandtable-alpha=0.5"], Design(alpha=0.5)),
    (["--sandtable-adaptive", "--sandtable-beta=0"], Design(beta=0.0)),
    (["--sandtable-adaptive", "--sandtable-beta=often"], "--sandtable-beta: expected a number, got 'often'"),
    (["--sandtable-adaptive", "--sandtable-max-trials=0"], "--sandtable-max-trials: expected at least 1, got 0"),
    (["--sandtable-max-cost=lots"], "--sandtable-max-cost: expected an amount in USD such as 5 or 2.50, got 'lots'"),
    (["--sandtable-max-cost=0"], "--sandtable-max-cost: expected an amount above 0, got '0'"),
])
def test_a_bad_design_is_one_usage_error_before_any_trial(project: pytest.Pytester, args: list[str],
                                                          message: str | Design) -> None:
    if isinstance(message, Design):
        with pytest.raises(DesignError) as raised:
            message.check()
        message = f"--sandtable-adaptive: {raised.value}"
    result = project.runpytest("--sandtable-agent=planted:agent", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert not project.path.joinpath("out").exists()


def test_each_task_stops_once_settled_and_its_other_items_are_skipped(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:agent",
                                          "--sandtable-out=out", "-rs", "-p", "no:randomly")
    # 16 + 2 + 6 + 32 trials ran of 4 x 32 items; the rest never ran
    result.assert_outcomes(passed=49, failed=7, skipped=72)
    result.stdout.fnmatch_lines(["sandtable: adaptive, at most k=32 trials a task (p0=0.8, p1=0.97, alpha=0.05, "
                                 "beta=0.05), run seed=0"])
    result.stdout.fnmatch_lines([
        "Adaptive trials: reliable means a pass rate of at least 0.8 (alpha 0.05), unreliable below 0.97 "
        "(beta 0.05); at most 32 trials a task",
        "task            adaptive verdict    graded trials    passed    anytime 95% CI    e-value",
        "planted/bad     unreliable          2                0/2       0-87%             0.0225",
        "planted/flaky   unreliable          6                4/6       16-98%            0.0486",
        "planted/good    reliable            16               16/16     69-100%           21.8",
        "planted/steady  inconclusive        32               29/32     67-99%            0.902",
        "spent 56 trials where k=32 would take 128 (2.3x fewer); 1 task inconclusive at the cap",
    ])
    result.stdout.fnmatch_lines([
        "SKIPPED [30] sandtable.yaml:17: not needed: task settled unreliable after 2 graded trials",
        "SKIPPED [26] sandtable.yaml:20: not needed: task settled unreliable after 6 graded trials",
        "SKIPPED [16] sandtable.yaml:14: not needed: task settled reliable after 16 graded trials",
    ], consecutive=False)
    doc = _results(project)
    assert _verdicts(doc) == [("bad", "unreliable", 2, 0, 2), ("flaky", "unreliable", 6, 4, 6),
                              ("good", "reliable", 16, 16, 16), ("steady", "inconclusive", 32, 29, 32)]
    assert doc["adaptive"]["design"] == {"p0": 0.8, "p1": 0.97, "alpha": 0.05, "beta": 0.05, "cap": 32,
                                         "max_trials": None, "max_cost": None}
    assert (doc["adaptive"]["spent"], doc["adaptive"]["fixed_k_trials"]) == (56, 128)
    assert doc["run"]["k"] == 32 and len(doc["trials"]) == 56
    # the task table's interval is the anytime one, not Wilson's (which gives 30-90% for 4/6)
    flaky = next(e for e in doc["summary"]["tasks"] if e["task"] == "flaky")
    assert flaky["rate_ci"] == doc["adaptive"]["tasks"][1]["interval"]


def test_trials_run_in_rounds_and_keep_their_node_ids(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-adaptive", "--sandtable-k=16", "--sandtable-agent=planted:agent",
                               "--collect-only", "-q", "-p", "no:randomly", "-k", "good or bad")
    ids = [line for line in result.outlines if line.startswith("sandtable.yaml::")]
    assert ids[:5] == ["sandtable.yaml::good[1-16]", "sandtable.yaml::bad[1-16]", "sandtable.yaml::good[2-16]",
                       "sandtable.yaml::bad[2-16]", "sandtable.yaml::good[3-16]"]
    assert len(ids) == 32


def test_verdicts_are_the_same_at_any_concurrency(project: pytest.Pytester) -> None:
    one = project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:slow",
                                       "--sandtable-out=out", "-p", "no:randomly")
    first = _results(project)
    many = project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:slow",
                                        "--sandtable-out=out", "--sandtable-concurrency=6", "-p", "no:randomly")
    again = _results(project)
    assert one.ret == many.ret == pytest.ExitCode.TESTS_FAILED
    assert _verdicts(again) == _verdicts(first)
    # a trial started before its task settled is recorded, and left out of the verdict
    for e in again["adaptive"]["tasks"]:
        assert all(t > e["stopped_at"] for t in e["uncounted"])
        assert e["trials"] == e["graded"] + len(e["uncounted"])


def test_under_xdist_the_controller_decides_and_the_verdicts_are_the_same(project: pytest.Pytester) -> None:
    project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:agent", "--sandtable-out=out",
                                 "-p", "no:randomly")
    alone = _results(project)
    result = project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:slow",
                                          "--sandtable-out=out", "-p", "no:randomly", "-p", "xdist", "-n", "2",
                                          "--sandtable-concurrency=3", "-rs")
    shared = _results(project)
    assert _verdicts(shared) == _verdicts(alone)
    # the workers skipped what the controller found settled; a trial already running then is uncounted
    result.stdout.fnmatch_lines(["SKIPPED * not needed: task settled reliable after 16 graded trials"],
                                consecutive=False)
    for e in shared["adaptive"]["tasks"]:
        assert all(t > e["stopped_at"] for t in e["uncounted"])
    assert shared["adaptive"]["spent"] < shared["adaptive"]["fixed_k_trials"]


def test_the_trial_budget_ends_the_run_with_what_was_decided(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:agent",
                                          "--sandtable-max-trials=10", "--sandtable-out=out", "-rs",
                                          "-p", "no:randomly")
    result.assert_outcomes(passed=7, failed=3, skipped=118)
    result.stdout.fnmatch_lines([
        "planted/bad     unreliable          2                0/2       0-87%             0.0225",
        "planted/flaky   open (budget)       3                2/3       *",
        "planted/good    open (budget)       3                3/3       *",
        "planted/steady  open (budget)       2                2/2       *",
        "spent 10 trials where k=32 would take 128 (12.8x fewer); 3 tasks left open (the trial budget ran out)",
    ])
    budget = "not run: the run's budget of 10 trials is spent (--sandtable-max-trials)"
    skipped = [line for line in result.outlines if line.startswith("SKIPPED ")]
    assert sorted(skipped) == sorted([
        "SKIPPED [30] sandtable.yaml:17: not needed: task settled unreliable after 2 graded trials",
        f"SKIPPED [30] sandtable.yaml:23: {budget}",
        f"SKIPPED [29] sandtable.yaml:14: {budget}",
        f"SKIPPED [29] sandtable.yaml:20: {budget}",
    ])
    doc = _results(project)
    assert doc["adaptive"]["stopped"] == "max_trials"
    assert doc["adaptive"]["counts"] == {"reliable": 0, "unreliable": 1, "inconclusive": 0, "open": 3}


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_within_a_round_the_task_nearest_a_boundary_goes_first(project: pytest.Pytester, concurrency: str) -> None:
    # after three rounds flaky (pass, pass, fail) is nearer "unreliable" than good and steady
    # (three passes each) are to either boundary: the 12th and last trial of the budget is its
    project.runpytest_subprocess("--sandtable-adaptive", "--sandtable-agent=planted:agent", "--sandtable-out=out",
                                 "--sandtable-max-trials=12", f"--sandtable-concurrency={concurrency}",
                                 "-p", "no:randomly")
    assert [(e["task"], e["graded"]) for e in _results(project)["adaptive"]["tasks"]] == [
        ("bad", 2), ("flaky", 4), ("good", 3), ("steady", 3)]


def test_the_cost_budget_stops_a_fixed_k_run_too(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--sandtable-k=4", "--sandtable-agent=planted:agent",
                                          "--sandtable-max-cost=2.50", "--sandtable-out=out", "-rs",
                                          "-p", "no:randomly")
    result.assert_outcomes(passed=3, skipped=13)
    spent = "not run: the run's cost budget of $2.50 is spent ($3.00 recorded; --sandtable-max-cost)"
    result.stdout.fnmatch_lines([f"SKIPPED [1] sandtable.yaml:14: {spent}", f"SKIPPED [4] sandtable.yaml:17: {spent}",
                                 f"SKIPPED [4] sandtable.yaml:20: {spent}", f"SKIPPED [4] sandtable.yaml:23: {spent}"])
    result.stdout.fnmatch_lines(["sandtable: the cost budget of $2.50 is spent ($3.00 recorded; "
                                 "--sandtable-max-cost): the trials after it were not run"])
    assert "adaptive" not in _results(project)


def test_compare_and_regrade_read_an_adaptive_run(project: pytest.Pytester) -> None:
    project.runpytest("--sandtable-adaptive", "--sandtable-k=16", "--sandtable-agent=planted:agent",
                      "--sandtable-out=out", "-p", "no:randomly", "-k", "good or bad")
    first = _results(project)
    assert _verdicts(first) == [("bad", "unreliable", 2, 0, 2), ("good", "reliable", 16, 16, 16)]
    # the domain edited so that good's trials now fail: regraded, it settles unreliable at
    # its second trial, the 14 after it uncounted
    text = project.path.joinpath("sandtable.yaml").read_text(encoding="utf-8")
    project.path.joinpath("edited.sandtable.yaml").write_text(
        text.replace("  - id: good\n    user: { opening: \"Read note n-1 please.\", script: [\"Thanks.\"] }\n"
                     "    expect: { called: [read_note] }",
                     "  - id: good\n    user: { opening: \"Read note n-1 please.\", script: [\"Thanks.\"] }\n"
                     "    expect: { not_called: [read_note] }"), encoding="utf-8")
    regraded = project.run(sys.executable, "-m", "pytest_sandtable", "regrade", "out", "edited.sandtable.yaml",
                           "-o", "again")
    assert regraded.ret == 1, regraded.stdout.str()
    again = json.loads(project.path.joinpath("again", "results.json").read_text(encoding="utf-8"))
    assert _verdicts(again) == [("bad", "unreliable", 2, 0, 2), ("good", "unreliable", 2, 0, 2)]
    assert again["adaptive"]["tasks"][1]["uncounted"] == list(range(3, 17))
    compared = project.run(sys.executable, "-m", "pytest_sandtable", "compare", "out", "again")
    assert compared.ret == 0, compared.stderr.str()
    compared.stdout.fnmatch_lines(["*good*"])


def test_a_baseline_comparison_of_an_adaptive_run_is_sequential_not_fisher(project: pytest.Pytester) -> None:
    args = ["--sandtable-adaptive", "--sandtable-k=16", "--sandtable-agent=planted:agent", "-p", "no:randomly",
            "-k", "good or bad"]
    project.runpytest(*args, "--sandtable-out=base")
    result = project.runpytest(*args, "--sandtable-out=out", "--sandtable-baseline=base")
    # Fisher's test does not hold after adaptive stopping: the sequential tests say it
    # (tests/test_adaptive_regression.py)
    result.stdout.fnmatch_lines(["sandtable: no task regressed (sequential, e-BH at alpha 0.05; 2 tasks in the "
                                 "baseline)"])
    assert "Fisher" not in result.stdout.str()


def test_a_task_settled_unreliable_counts_as_failing_in_the_headline(project: pytest.Pytester) -> None:
    # bad settles unreliable at 0/2, good reliable at 16/16: before, pass^4 to pass^16 left
    # bad out ("100.0%*") and --sandtable-fail-under passed a suite with a failing task
    result = project.runpytest("--sandtable-adaptive", "--sandtable-k=16", "--sandtable-agent=planted:agent",
                               "--sandtable-out=out", "--sandtable-fail-under=90", "-p", "no:randomly",
                               "-k", "good or bad")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # pass@16 ("at least one of 16 passes") counts good alone, and is marked for it
    result.stdout.fnmatch_lines([
        "pass^k     tasks    pass^1    pass^2    pass^4    pass^8    pass^16    pass@16",
        "---------  -------  --------  --------  --------  --------  ---------  ---------",
        "all tasks  2        50.0%     50.0%     50.0%     50.0%     50.0%      100.0%*",
    ])
    result.stdout.fnmatch_lines([
        "pass^j above, from an adaptive sample (each task stopped once settled): a task settled unreliable counts "
        "as failing at every j past its graded trials, any other task only with at least j; intervals are "
        "anytime-valid, not Wilson",
        "spent 18 trials where k=16 would take 32 (1.8x fewer)",
        "14 trial items not needed: their task's verdict was settled first (pytest counts them as skipped; "
        "-rs says why)",
    ])
    result.stdout.fnmatch_lines(["sandtable gate failed: pass^16 50.0% is below --sandtable-fail-under 90% by "
                                 "40.0 points"])
    summary = _results(project)["summary"]
    assert [summary["pass_hat"][j] for j in ("1", "2", "3", "16")] == [0.5, 0.5, 0.5, 0.5]
    assert summary["pass_hat_tasks"] == {str(j): 2 for j in range(1, 17)}
    assert summary["pass_hat_ci"]["3"][0] < 0.5 < summary["pass_hat_ci"]["3"][1]
    bad = next(e for e in summary["tasks"] if e["task"] == "bad")
    assert (bad["pass_hat"]["3"], bad["pass_hat_ci"]["3"]) == (0.0, [0.0, 0.0])
    # pass@j is "at least one of j passes", which a task settled unreliable may well do: left out
    assert summary["pass_at"]["16"] == 1.0
    assert summary["pass_at_tasks"] == {**{"1": 2, "2": 2}, **{str(j): 1 for j in range(3, 17)}}
    html = project.path.joinpath("out", "report.html").read_text(encoding="utf-8")
    assert '<td><b>all tasks</b></td><td>2</td><td>50.0%<br><span class="ci">0-92%</span></td>' in html
    assert "<td>100.0%*<br>" in html  # pass@16, over good alone, marked
    assert "<td>100.0%*<br>" not in html.split('class="scores pass_at"')[0]


def test_a_subnormal_alpha_is_the_design_s_usage_error(project: pytest.Pytester) -> None:
    # 1 / 1e-320 overflows: it gave INTERNALERROR (exit 3)
    result = project.runpytest("--sandtable-agent=planted:agent", "--sandtable-adaptive", "--sandtable-alpha=1e-320")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sandtable-adaptive: certifying 0.8 at alpha = 1e-320 needs at least 3825 "
                                 "trials; the cap is 32"])


@pytest.mark.parametrize(("edit", "message"), [
    ("over", "tasks[0] (planted/bad): passed 9 is more than its 2 graded trials"),
    ("dup", "trials[4] repeats planted/good trial 1 (trials[0]): a trial's number fixes its seed, so a repeat is "
            "the same trial twice and would be counted twice"),
])
def test_a_baseline_whose_counts_cannot_be_is_one_usage_error(project: pytest.Pytester, edit: str,
                                                              message: str) -> None:
    project.runpytest("--sandtable-agent=planted:agent", "--sandtable-k=2", "--sandtable-out=base",
                      "-p", "no:randomly", "-k", "good or bad")
    doc = json.loads(project.path.joinpath("base", "results.json").read_text())
    bad = next(i for i, t in enumerate(doc["tasks"]) if t["task"] == "bad")
    assert bad == 0
    if edit == "over":
        doc["tasks"][0]["passed"] = 9
    else:
        doc["trials"].append(doc["trials"][0])
    project.path.joinpath("edited.json").write_text(json.dumps(doc), encoding="utf-8")
    for extra in ([], ["--sandtable-adaptive"]):
        result = project.runpytest("--sandtable-agent=planted:agent", "--sandtable-baseline=edited.json", *extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --sandtable-baseline: edited.json: {message}"])
