"""The judge panel (judge/): the prompt, the verdict format, quotes checked against the
transcript, majority and disagreement, retries of a prose answer, a judge that times out,
and the spec. Against fake Anthropic and OpenAI servers with scripted judge answers."""

from __future__ import annotations

import pytest
from _judges import CRITERIA, FEE, POLICY, SORRY, answering, fake_judges, trial, verdict
from fakes import Hang

from pytest_sandtable.domain.model import Criterion
from pytest_sandtable.judge.panel import Panel, PanelOptions, judge_trial_sync, majority
from pytest_sandtable.judge.spec import JudgeSpecError, parse_panel

THREE = "claude:judge-a,claude:judge-b,openai:judge-c"


def panel(spec: str = THREE, **options: object) -> Panel:
    return Panel(parse_panel(spec), PanelOptions(**options))  # type: ignore[arg-type]


def by_judge(judged: dict[str, object]) -> list[tuple[object, ...]]:
    return [(j["judge"], j["verdict"], j["void"]) for j in judged["judges"]]  # type: ignore[attr-defined]


def test_a_panel_of_three_with_a_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    fee_yes = verdict("yes", "The $35 late fee is refunded")
    script = {
        "judge-a": answering({"explains-fee": fee_yes, "apologises": verdict("yes", "I am sorry")}),
        "judge-b": answering({"explains-fee": fee_yes, "apologises": verdict("no", "")}),
        "judge-c": answering({"explains-fee": fee_yes, "apologises": verdict("yes", "sorry about the delay")}),
    }
    with fake_judges(monkeypatch, script) as fakes:
        p = panel()
        judged, usage = judge_trial_sync(p, POLICY, CRITERIA, trial())
    fee, apology = judged
    assert fee["criterion"] == "explains-fee" and fee["verdict"] == "yes" and fee["disagreement"] is False
    assert by_judge(fee) == [("claude:judge-a", "yes", None), ("claude:judge-b", "yes", None),
                             ("openai:judge-c", "yes", None)]
    assert [j["quote"] for j in fee["judges"]] == ["The $35 late fee is refunded"] * 3
    assert [j["at"] for j in fee["judges"]] == [2, 2, 2]  # the agent's message, transcript entry 2
    assert apology["verdict"] == "yes" and apology["disagreement"] is True
    assert by_judge(apology) == [("claude:judge-a", "yes", None), ("claude:judge-b", "no", None),
                                 ("openai:judge-c", "yes", None)]
    assert fakes.calls == 6 == p.calls
    assert usage == {
        "judge-a": {"input": 2000, "output": 100, "cache_read": 0, "cache_write": 0, "calls": 2},
        "judge-b": {"input": 2000, "output": 100, "cache_read": 0, "cache_write": 0, "calls": 2},
        "judge-c": {"input": 2000, "output": 100, "cache_read": 0, "cache_write": 0, "calls": 2},
    }
    # temperature 0, the verdict format in the system prompt, the policy, criterion and transcript shown
    claude_body = fakes.claude.requests[0].json
    assert claude_body["temperature"] == 0.0 and "Answer with one JSON object" in claude_body["system"]
    openai_body = fakes.openai.requests[0].json
    assert openai_body["temperature"] == 0.0 and openai_body["messages"][0]["role"] == "system"
    (fee_message,) = [m[0]["content"] for m in fakes.messages("judge-a") if "(explains-fee)" in m[0]["content"]]
    assert fee_message == (
        f"Policy the agent follows:\n{POLICY}\n\n"
        "Criterion (explains-fee): Did the agent state the $35 fee and why it applies?\n"
        "Read: the whole conversation.\n\n"
        "Transcript:\n"
        "[1] user: My load L-1001 came late.\n"
        '[1] agent -> lookup_order: lookup_order({"load_id": "L-1001"}) = {"days": 2, "status": "late"}\n'
        f"[1] agent: {SORRY} {FEE}"
    )
    (final_message,) = [m[0]["content"] for m in fakes.messages("judge-a") if "(apologises)" in m[0]["content"]]
    assert final_message.endswith("Read: the agent's last message only.\n\n"
                                  f"Transcript:\n[1] agent: {SORRY} {FEE}")


def test_a_quote_not_in_the_transcript_voids_that_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    made_up = verdict("yes", "We waive every fee forever")
    script = {
        "judge-a": answering({"explains-fee": made_up}),
        "judge-b": answering({"explains-fee": verdict("no", "")}),
        "judge-c": answering({"explains-fee": verdict("no", "I am sorry about the delay.")}),
    }
    with fake_judges(monkeypatch, script):
        (fee,), _ = judge_trial_sync(panel(), POLICY, CRITERIA[:1], trial())
    assert by_judge(fee) == [
        ("claude:judge-a", "void", "quote not in the transcript: 'We waive every fee forever'"),
        ("claude:judge-b", "no", None),
        ("openai:judge-c", "no", None),
    ]
    assert fee["verdict"] == "no" and fee["disagreement"] is False
    assert fee["judges"][0]["quote"] == "We waive every fee forever"


def test_a_yes_without_a_quote_is_void(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_judges(monkeypatch, {"judge-a": answering({"explains-fee": verdict("yes", "")})}):
        (fee,), _ = judge_trial_sync(panel("claude:judge-a"), POLICY, CRITERIA[:1], trial())
    assert by_judge(fee) == [("claude:judge-a", "void", "a yes without a quote")]
    assert fee["verdict"] == "void"


def test_a_prose_answer_is_asked_again_once_then_void(monkeypatch: pytest.MonkeyPatch) -> None:
    prose = "Yes, the agent clearly explained the fee."

    def once_prose(message: str) -> str:
        return verdict("yes", "The $35 late fee") if message.endswith("RETRY") else prose

    script = {"judge-a": lambda _: prose, "judge-c": once_prose}
    with fake_judges(monkeypatch, script) as fakes:
        (fee,), _ = judge_trial_sync(panel("claude:judge-a,openai:judge-c"), POLICY, CRITERIA[:1], trial())
    assert by_judge(fee) == [
        ("claude:judge-a", "void", "answer not in the verdict format, twice: no JSON verdict in the answer "
                                   "'Yes, the agent clearly explained the fee.'"),
        ("openai:judge-c", "yes", None),
    ]
    assert fakes.calls == 4  # each judge asked twice
    retry = fakes.claude.requests[1].json["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == prose and retry[2]["content"].startswith("Your answer was not in the required format")


def test_a_verdict_that_is_not_yes_or_no(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_judges(monkeypatch, {"judge-a": lambda _: verdict("maybe", "")}):
        (fee,), _ = judge_trial_sync(panel("claude:judge-a"), POLICY, CRITERIA[:1], trial())
    assert by_judge(fee) == [("claude:judge-a", "void", "answer not in the verdict format, twice: "
                                                        "verdict '\"maybe\"' is not yes or no")]


def test_a_judge_that_times_out_is_void_and_the_others_stand(monkeypatch: pytest.MonkeyPatch) -> None:
    script = {"judge-a": lambda _: Hang(5.0), "judge-c": lambda _: verdict("yes", "$35 late fee")}
    with fake_judges(monkeypatch, script) as fakes:
        p = panel("claude:judge-a,openai:judge-c", timeout=0.3, retries=0)
        (fee,), _ = judge_trial_sync(p, POLICY, CRITERIA[:1], trial())
    assert by_judge(fee) == [
        ("claude:judge-a", "void", f"claude judge judge-a: no response from {fakes.claude.host} within 0.3s"),
        ("openai:judge-c", "yes", None),
    ]
    assert fee["verdict"] == "yes"


def test_a_judge_without_a_key_is_void_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_judges(monkeypatch, {}):
        monkeypatch.delenv("ANTHROPIC_API_KEY")
        (fee,), _ = judge_trial_sync(panel("claude:judge-a"), POLICY, CRITERIA[:1], trial())
    (j,) = fee["judges"]
    assert j["verdict"] == "void" and j["void"].startswith("claude judge judge-a: ")
    assert "ANTHROPIC_API_KEY" in j["void"]


def test_what_a_criterion_reads() -> None:
    from pytest_sandtable.judge.prompt import render, scoped_lines

    t = trial("Hello.", "Looked it up.", "Bye.")
    turns = Criterion(id="t", question="Q?", turns=(2, 3))
    assert render(scoped_lines(t, turns) or []) == "[2] user: And?\n[2] agent: Looked it up.\n[3] user: And?\n" \
                                                   "[3] agent: Bye."
    after = Criterion(id="a", question="Q?", after_tool="lookup_order")
    assert render(scoped_lines(t, after) or []).startswith("[1] agent -> lookup_order: ")
    assert scoped_lines(t, Criterion(id="n", question="Q?", after_tool="refund")) is None
    assert scoped_lines(t, Criterion(id="n", question="Q?", turns=(4, 5))) is None


def test_a_criterion_that_does_not_apply_makes_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    never = Criterion(id="after-refund", question="Q?", after_tool="refund")
    with fake_judges(monkeypatch, {}) as fakes:
        judged, _ = judge_trial_sync(panel(), POLICY, (never,), trial())
    assert judged == [{"criterion": "after-refund", "verdict": "n/a", "disagreement": False, "judges": []}]
    assert fakes.calls == 0


def test_majority() -> None:
    assert majority(["yes", "yes", "no"]) == ("yes", True)
    assert majority(["no", "void", "no"]) == ("no", False)
    assert majority(["yes", "no", "void"]) == ("split", True)
    assert majority(["void", "void"]) == ("void", False)


@pytest.mark.parametrize(("spec", "message"), [
    ("", "names no judge; give at least one, e.g. claude:claude-haiku-4-5"),
    ("claude", "judge 'claude' names no model; write claude:MODEL"),
    ("claude:m,openai:", "judge 'openai:' names no model; write openai:MODEL"),
    ("gemini:g", "unknown judge provider 'gemini' in 'gemini:g'; expected claude or openai, as in claude:MODEL"),
    ("claude:m,,openai:n", "an empty entry in 'claude:m,,openai:n'; separate judges by one comma"),
    ("claude:m,claude:m", "judge 'claude:m' is named twice; each judge of a panel once"),
])
def test_a_bad_spec(spec: str, message: str) -> None:
    with pytest.raises(JudgeSpecError) as info:
        parse_panel(spec)
    assert str(info.value) == message


def test_a_good_spec() -> None:
    assert [j.name for j in parse_panel(" claude:m1 , openai:gpt-x")] == ["claude:m1", "openai:gpt-x"]
