"""--sandtable-judge in a pytest run: each graded trial's criteria judged at the end,
results.json's ``judged`` object, the terminal's section, the cache making a second run
free, and NEVER GATING: judged outcomes flipped leave every verdict, the gate and the
exit status as they were."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _judges import answering, fake_judges, verdict
from _sandtable_shop import PLUGIN_ARGS, only_results, run_dirs

# two tasks: the reference agent passes at-ceiling and breaks the rate cap in past-ceiling
DESK = """\
version: 1
name: desk
policy: |
  Never pay above a load's max rate. Confirm every booking.
world:
  loads:
    key: id
    rows:
      - { id: L-1, max_rate: 2000 }
  bookings:
    key: id
    fields: [load, rate]
    rows: []
tools:
  - name: book
    params: { id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: bookings, row: { load: $id, rate: $rate } }
invariants:
  - { id: rate-cap, kind: limit, tool: book, arg: rate, lte: { table: loads, key: $id, field: max_rate } }
judge:
  confirms: "Did the agent confirm the booking?"
tasks:
  - id: at-ceiling
    tags: [booking]
    user: { opening: "L-1 at 2000?", script: ["Deal."] }
    expect: { called: [book] }
    reference:
      - { call: book, args: { id: L-1, rate: 2000 } }
      - say: "Booked L-1 at 2000."
  - id: past-ceiling
    tags: [booking]
    user: { opening: "L-1 at 2001?", script: ["Deal."] }
    expect: { called: [book] }
    judge:
      states-rate: { question: "Did the agent state the rate?", scope: final }
    reference:
      - { call: book, args: { id: L-1, rate: 2001 } }
      - say: "Booked L-1 at 2001."
"""

YES = {"confirms": verdict("yes", "Booked L-1"), "states-rate": verdict("yes", "at 2001")}
NO = {"confirms": verdict("no", ""), "states-rate": verdict("no", "")}
PANEL = "--sandtable-judge=claude:judge-a,claude:judge-b,openai:judge-c"


def script(answers: dict[str, str], dissent: dict[str, str] | None = None) -> dict[str, Any]:
    return {"judge-a": answering(answers), "judge-b": answering(dissent or answers), "judge-c": answering(answers)}


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    for d in run_dirs(pytester.path):
        shutil.rmtree(d)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=2", *args)
    return result, only_results(pytester.path)


def test_a_judged_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    with fake_judges(monkeypatch, script(YES, {**YES, "confirms": verdict("no", "")})) as fakes:
        result, doc = run(pytester, PANEL)
        # each task's two trials are alike: the second is judged from the cache. at-ceiling: 1 criterion,
        # past-ceiling: 2, each asked of 3 judges
        assert fakes.calls == 9
    result.assert_outcomes(passed=2, failed=2)
    judged = doc["judged"]
    assert judged["judges"] == ["claude:judge-a", "claude:judge-b", "openai:judge-c"]
    assert (judged["calls"], judged["cached"]) == (9, 9)
    [confirms, states] = judged["criteria"]
    assert {k: confirms[k] for k in ("domain", "criterion", "question", "calibrated", "yes", "no", "scored",
                                      "disagreements", "rate")} == {
        "domain": "desk", "criterion": "confirms", "question": "Did the agent confirm the booking?",
        "calibrated": False, "yes": 4, "no": 0, "scored": 4, "disagreements": 4, "rate": 1.0}
    assert confirms["interval"] == [pytest.approx(0.5101, abs=1e-4), 1.0]
    assert (states["criterion"], states["yes"], states["scored"], states["disagreements"]) == ("states-rate", 2, 2, 0)
    assert [(r["task"], r["criterion"], r["yes"]) for r in judged["tasks"]] == [
        ("at-ceiling", "confirms", 2), ("past-ceiling", "confirms", 2), ("past-ceiling", "states-rate", 2)]
    assert [(r["tag"], r["criterion"], r["scored"]) for r in judged["tags"]] == [
        ("booking", "confirms", 4), ("booking", "states-rate", 2)]
    first = judged["trials"][0]
    assert (first["task"], first["trial"], first["verdict"]) == ("at-ceiling", 1, "passed")
    assert first["criteria"][0]["judges"][1] == {"judge": "claude:judge-b", "verdict": "no", "quote": "",
                                                  "at": None, "void": None, "cached": False}
    assert set(judged["usage"]) == {"judge-a", "judge-b", "judge-c"}
    assert set(doc["summary"]["usage"]["agent"]) | set(doc["summary"]["usage"]["user"]) == set()
    lines = result.outlines
    start = lines.index("Judged scores (claude:judge-a, claude:judge-b, openai:judge-c; reported only: never a "
                        "verdict, a gate or the exit status)")
    assert lines[start + 1].split() == ["criterion", "yes", "95%", "CI", "scored", "void", "split", "n/a",
                                        "disagree"]
    assert lines[start + 3].split() == ["confirms", "100.0%", "51-100%", "4", "0", "0", "0", "4", "uncalibrated"]
    assert lines[start + 4].split() == ["states-rate", "100.0%", "34-100%", "2", "0", "0", "0", "0",
                                        "uncalibrated"]
    tag = lines.index("Judged scores by tag")
    assert [lines[tag + n].split() for n in (1, 3, 4)] == [
        ["tag:", "criterion", "yes", "95%", "CI", "scored", "void", "split", "n/a", "disagree"],
        ["booking:", "confirms", "100.0%", "51-100%", "4", "0", "0", "0", "4"],
        ["booking:", "states-rate", "100.0%", "34-100%", "2", "0", "0", "0", "0"]]
    task = lines.index("Judged scores by task")
    assert lines[task + 1].split()[:3] == ["task:", "criterion", "yes"]
    assert lines[task + 3].split() == ["at-ceiling:", "confirms", "100.0%", "34-100%", "2", "0", "0", "0", "2"]
    (judges_line,) = [line for line in lines if line.startswith("Judges: ")]
    assert judges_line.startswith(f"Judges: {judged['calls']} judge calls, ")
    assert "(apart from the agent's and the user's)" in judges_line


def test_a_second_run_with_the_servers_stopped_makes_no_call(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    with fake_judges(monkeypatch, script(YES)):
        _, first = run(pytester, PANEL)
    # a calibration of this panel on confirms (as `judge calibrate` writes it), where a run reads it
    from pytest_sandtable.judge.calibrate import question_hash

    (pytester.path / ".sandtable" / "judge-calibration.json").write_text(json.dumps({
        "format": 1, "judges": ["claude:judge-a", "claude:judge-b", "openai:judge-c"],
        "criteria": {"desk/confirms": {"calibrated": True,
                                       "question": question_hash("Did the agent confirm the booking?")}}}))
    # the servers are gone: any call would be refused and void its verdict
    result, again = run(pytester, PANEL)
    assert again["judged"]["calls"] == 0 and again["judged"]["cached"] == 18
    assert [{**c, "calibrated": None} for c in again["judged"]["criteria"]] == [
        {**c, "calibrated": None} for c in first["judged"]["criteria"]]
    assert [(c["criterion"], c["calibrated"]) for c in again["judged"]["criteria"]] == [
        ("confirms", True), ("states-rate", False)]
    assert [line.split()[0::8] for line in result.outlines if line.startswith(("confirms ", "states-rate "))] == [
        ["confirms", "calibrated"], ["states-rate", "uncalibrated"]]
    assert "Void judge verdicts" not in "\n".join(result.outlines)
    assert [line for line in result.outlines if line.startswith("Judges: ")] == [
        "Judges: 0 judge calls, 0 input and 0 output tokens, $0.00 (apart from the agent's and the user's); "
        f"18 verdicts from the judge cache; {line_secs(result.outlines)}"]


def line_secs(lines: list[str]) -> str:
    (line,) = [ln for ln in lines if ln.startswith("Judges: ")]
    return line.rsplit("; ", 1)[1]


def _outcome(result: pytest.RunResult, doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "ret": result.ret,
        "outcomes": result.parseoutcomes(),
        "verdicts": [(t["task"], t["trial"], t["verdict"], [c["id"] for c in t["checks"] if not c["passed"]])
                     for t in doc["trials"]],
        "tasks": doc["tasks"],
        "gate": doc["gate"],
        "pass_hat": doc["summary"]["pass_hat"],
    }


@pytest.mark.parametrize(("gate", "ret"), [((), 1),
                                           (("--sandtable-fail-under=10",), 0)],
                         ids=["no-gate", "gate-passes"])
def test_never_gating_every_judged_outcome_flipped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gate: tuple[str, ...], ret: int
) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    outcomes = []
    judged = []
    for answers in (YES, NO):
        shutil.rmtree(pytester.path / ".sandtable" / "judge-cache", ignore_errors=True)
        with fake_judges(monkeypatch, script(answers)):
            result, doc = run(pytester, PANEL, *gate)
        outcomes.append(_outcome(result, doc))
        judged.append([(r["criterion"], r["yes"], r["no"]) for r in doc["judged"]["criteria"]])
    assert judged == [[("confirms", 4, 0), ("states-rate", 2, 0)], [("confirms", 0, 4), ("states-rate", 0, 2)]]
    without, doc = run(pytester, *gate)  # and without judges at all
    assert "judged" not in doc
    assert outcomes[0] == outcomes[1] == _outcome(without, doc)
    assert outcomes[0]["ret"] == ret  # the gate decides (pass^2 is 50%), else past-ceiling's failed trials


def test_a_bad_judge_spec_is_a_usage_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-judge=claude")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --sandtable-judge: judge 'claude' names no model; write claude:MODEL" in result.errlines
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-judge-max-cost=1")
    assert "ERROR: --sandtable-judge-max-cost needs --sandtable-judge=SPEC" in result.errlines


def test_judges_that_fail_leave_the_run_as_it_is(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens
    result, doc = run(pytester, "--sandtable-judge=claude:judge-a", "--sandtable-retries=0")
    result.assert_outcomes(passed=2, failed=2)
    assert [c["verdict"] for t in doc["judged"]["trials"] for c in t["criteria"]] == ["void"] * 6
    assert "Void judge verdicts: 6" in result.outlines
    assert "  6x claude:judge-a: claude judge judge-a: connection refused by 127.0.0.1:9" in result.outlines
    json.dumps(doc)


def test_the_judges_budget(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    # 1,000 input and 50 output tokens a call at $100 per million: $0.105 a call
    (pytester.path / "prices.json").write_text(json.dumps({"judge-a": {"input": 100.0, "output": 100.0}}))
    with fake_judges(monkeypatch, script(YES)) as fakes:
        result, doc = run(pytester, "--sandtable-judge=claude:judge-a", "--sandtable-judge-max-cost=0.2",
                          "--sandtable-prices=prices.json")
        assert fakes.calls == 2  # at-ceiling's confirms, past-ceiling's confirms; then the budget is spent
    result.assert_outcomes(passed=2, failed=2)
    verdicts = [(t["task"], c["criterion"], c["verdict"], c["judges"][0]["void"]) for t in doc["judged"]["trials"]
                for c in t["criteria"]]
    assert verdicts == [("at-ceiling", "confirms", "yes", None), ("at-ceiling", "confirms", "yes", None),
                        ("past-ceiling", "confirms", "yes", None),
                        ("past-ceiling", "states-rate", "void", "judge budget reached"),
                        ("past-ceiling", "confirms", "yes", None),
                        ("past-ceiling", "states-rate", "void", "judge budget reached")]
    assert doc["judged"]["budget_reached"] is True and doc["judged"]["cost"]["total"] == pytest.approx(0.21)
    assert "  2x claude:judge-a: judge budget reached" in result.outlines
    assert line_secs(result.outlines) == "budget $0.2000 reached"
    # a budget with a judge that has no price could never be reached: refused at start-up
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-judge=claude:judge-a,openai:judge-c",
                                           "--sandtable-judge-max-cost=1", "--sandtable-prices=prices.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: --sandtable-judge-max-cost: no price for judge openai:judge-c; give one in --sandtable-prices "
            "FILE") in result.errlines


def test_under_xdist_the_controller_judges(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    with fake_judges(monkeypatch, script(YES)) as fakes:
        result, doc = run(pytester, "--sandtable-judge=claude:judge-a", "-p", "xdist", "-n", "2")
        assert fakes.calls == 3  # the controller loads the domain and judges each transcript once
    result.assert_outcomes(passed=2, failed=2)
    assert [(r["criterion"], r["yes"], r["scored"]) for r in doc["judged"]["criteria"]] == [
        ("confirms", 4, 4), ("states-rate", 2, 2)]
