"""Simulated users played by a model (Claude, OpenAI-compatible) against local fake servers:
the prompt, flipped roles, parsed stop signals, and failures that make a trial errored."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import (
    OMIT,
    Cut,
    Drop,
    FakeAnthropic,
    FakeOpenAI,
    Hang,
    RawBody,
    Reply,
    Trickle,
    claude_error,
    claude_message,
    claude_text,
    claude_thinking,
    claude_usage,
    openai_error,
    openai_parts,
    openai_text,
    openai_usage,
    shop_domain,
)

import pytest_sandtable as st
from pytest_sandtable.adapters import _retry
from pytest_sandtable.adapters.model_user import (
    START,
    TRANSFERRED,
    ClaudeUser,
    OpenAIUser,
    parse_reply,
    user_messages,
    user_system_prompt,
)
from pytest_sandtable.adapters.options import AdapterOptions
from pytest_sandtable.adapters.registry import make_user

KEY = "sk-test-sim-user-93af"


class Lines:
    """An agent that says its lines in order, calling get_order first."""

    name = "lines"

    def __init__(self, *lines: str) -> None:
        self.lines = lines

    def __call__(self, turn: st.Turn) -> str:
        i = turn.state.get("i", 0)
        turn.state["i"] = i + 1
        if i == 0:
            turn.call_tool("get_order", {"order_id": "O-1001"})
        return self.lines[i] if i < len(self.lines) else ""


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_retry, "BACKOFF_BASE", 0.05)


@pytest.fixture
def domain(tmp_path: Path) -> st.Domain:
    return shop_domain(tmp_path)


@pytest.fixture
def oai() -> Any:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def claude() -> Any:
    with FakeAnthropic() as server:
        yield server


def openai_user(server: FakeOpenAI, **options: Any) -> OpenAIUser:
    opts = {"timeout": 5.0, "retries": 1, "user_base_url": server.base_url, **options}
    return OpenAIUser("gpt-test", AdapterOptions(**opts), api_key=KEY)


def claude_user(server: FakeAnthropic, **options: Any) -> ClaudeUser:
    opts = {"timeout": 5.0, "retries": 1, **options}
    return ClaudeUser("claude-test", AdapterOptions(**opts), api_key=KEY, base_url=server.base_url)


def user_turn(messages: list[dict[str, str]], handed_off: bool = False) -> st.UserTurn:
    return st.UserTurn(messages=messages, persona="Ada Quill, a regular customer.",
                       instructions="You want a refund of 42.50 for order O-1001.", opening=None, script=[],
                       trial=st.TrialInfo("shop", "refund-delivered", 1, 1, 12345), state={}, handed_off=handed_off)


# -- prompt, roles and signals -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply", "stop"),
    [
        ("Thanks, that's everything.\n###GOAL_MET###", "Thanks, that's everything.", "goal_met"),
        ("OK, I'll try elsewhere. ###IMPOSSIBLE###", "OK, I'll try elsewhere.", "impossible"),
        ("Sure, I'll hold.\n\n### HANDED OFF ###\n", "Sure, I'll hold.", "handed_off"),
        ("###goal-met###", "", "goal_met"),
        ("Can you check again?", "Can you check again?", None),
        ("Hmm.\n###IMPOSSIBLE###\n###GOAL_MET###", "Hmm.", "goal_met"),  # the last signal wins
        ("I said #GOAL_MET# once", "I said #GOAL_MET# once", None),
    ],
)
def test_parse_reply(text: str, reply: str, stop: str | None) -> None:
    assert parse_reply(text) == st.UserReply(reply, stop)


def test_user_messages_flip_roles_and_start_the_call() -> None:
    turn = user_turn([
        {"role": "user", "content": "Hi, I need a refund."},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "O-1001."},
        {"role": "assistant", "content": ""},
    ])
    assert user_messages(turn) == [
        {"role": "user", "content": START},
        {"role": "assistant", "content": "Hi, I need a refund."},
        {"role": "user", "content": "Which order?"},
        {"role": "assistant", "content": "O-1001."},
        {"role": "user", "content": "[The agent said nothing.]"},
    ]
    assert user_messages(user_turn([])) == [{"role": "user", "content": START}]


def test_user_messages_announce_a_transfer() -> None:
    turn = user_turn([{"role": "user", "content": "Get me a manager."},
                      {"role": "assistant", "content": "Transferring you now."}], handed_off=True)
    assert user_messages(turn)[-1] == {"role": "user", "content": "Transferring you now.\n\n" + TRANSFERRED}


def test_user_system_prompt_has_persona_goal_and_rules_only() -> None:
    prompt = user_system_prompt(user_turn([]))
    assert "Who you are:\nAda Quill, a regular customer." in prompt
    assert "You want a refund of 42.50 for order O-1001." in prompt
    assert "say you don't know or don't have it. Never invent" in prompt
    for signal in ("###GOAL_MET###", "###IMPOSSIBLE###", "###HANDED_OFF###"):
        assert signal in prompt


# -- OpenAI-compatible user in a trial --------------------------------------------------------------


def test_openai_user_speaks_first_and_ends_with_impossible(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(
        openai_text("Hi, I want a refund of 42.50 for order O-1001.", openai_usage(90, 15)),
        openai_text("That's a shame. ###IMPOSSIBLE###", openai_usage(120, 7)),
    )
    agent = Lines("I'm sorry, refunds are not possible today.", "Sorry again. Goodbye.")
    result = st.run_trial(domain, "refund-delivered", agent, openai_user(oai, temperature=0.9), run_seed=11)
    assert result.ended_by == "impossible"
    assert [e.get("text") for e in result.transcript if e["role"] == "user"] == [
        "Hi, I want a refund of 42.50 for order O-1001.", "That's a shame."]
    assert result.transcript[-1] == {"role": "agent", "text": "Sorry again. Goodbye.", "turn": 2}
    assert [b["seed"] for b in oai.bodies] == [result.seed, result.seed]
    assert oai.bodies[0]["temperature"] == 0.9
    assert result.usage["user"] == {"gpt-test": {"input": 210, "output": 22, "cache_read": 0, "cache_write": 0,
                                                 "calls": 2}}
    assert result.usage["agent"] == {}


def test_openai_user_not_asked_when_the_task_fixes_the_opening(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_text("Great, thanks!\n###GOAL_MET###"))
    result = st.run_trial(domain, "opening-fixed", Lines("It was delivered on Monday.", "Bye!"), openai_user(oai))
    assert (result.verdict, result.ended_by) == ("passed", "goal_met")
    assert len(oai.requests) == 1
    assert oai.bodies[0]["messages"][1:] == [
        {"role": "user", "content": START},
        {"role": "assistant", "content": "Hi, where is my order O-1001?"},
        {"role": "user", "content": "It was delivered on Monday."},
    ]


def test_user_from_spec_uses_the_user_base_url(oai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    user, name = make_user("openai:gpt-test", AdapterOptions(user_base_url=oai.base_url))
    assert name == "openai:gpt-test"
    assert repr(user) == f"OpenAIUser(model='gpt-test', base_url='{oai.base_url}')"


# -- Claude user ----------------------------------------------------------------------------------


def test_claude_user_request_and_usage(claude: FakeAnthropic) -> None:
    claude.push(claude_text("I'll wait for them.\n###HANDED_OFF###", claude_usage(70, 12, 40, 5)))
    user = claude_user(claude, temperature=0.2, prompt_cache=False)  # the plain wire format; see test_prompt_cache.py
    turn = user_turn([{"role": "user", "content": "Get me a manager."},
                      {"role": "assistant", "content": "Transferring you now."}], handed_off=True)
    reply = asyncio.run(user(turn))
    assert reply == st.UserReply("I'll wait for them.", "handed_off")
    body = claude.bodies[0]
    assert body["system"] == user_system_prompt(turn)
    assert body["temperature"] == 0.2
    assert "tools" not in body
    assert body["messages"] == [
        {"role": "user", "content": START},
        {"role": "assistant", "content": "Get me a manager."},
        {"role": "user", "content": "Transferring you now.\n\n" + TRANSFERRED},
    ]
    assert turn.usage.to_dict() == {"claude-test": {"input": 70, "output": 12, "cache_read": 40, "cache_write": 5,
                                                    "calls": 1}}


def test_claude_user_from_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    user, name = make_user("claude:claude-haiku-4-5")
    assert (name, repr(user)) == ("claude:claude-haiku-4-5", "ClaudeUser(model='claude-haiku-4-5')")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ValueError) as e:
        make_user("claude:claude-haiku-4-5")
    assert str(e.value) == "claude:<model> needs an API key in the ANTHROPIC_API_KEY environment variable"


# -- failures: the trial is errored -----------------------------------------------------------------


def errored(result: st.TrialResult) -> str:
    assert result.verdict == "errored"
    assert result.checks == [] or all(c.kind != "runtime" for c in result.checks)
    return result.error or ""


def test_openai_user_500_until_retries_run_out(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(500, "internal error"), openai_error(500, "internal error"))
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai, retries=1))
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: HTTP 500 from {oai.host} "
                               "after 2 attempts: internal error")


def test_openai_user_500_then_success(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(503, "try later"), openai_text("Refund O-1001 please."), openai_text("###GOAL_MET###"))
    result = st.run_trial(domain, "refund-delivered", Lines("Done."), openai_user(oai))
    assert (result.error, result.ended_by) == (None, "goal_met")


def test_openai_user_429_retry_after(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(429, "slow down", "rate_limit_error", {"retry-after": "1"}),
             openai_text("Refund O-1001 please."), openai_text("###GOAL_MET###"))
    result = st.run_trial(domain, "refund-delivered", Lines("Done."), openai_user(oai))
    assert result.error is None
    assert 0.95 <= oai.gaps()[0] < 2.5


def test_openai_user_hang(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Hang(30))
    started = time.monotonic()
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai, timeout=0.5, retries=0))
    assert time.monotonic() - started < 6.0
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: no response from {oai.host} "
                               "within 0.5s")


def test_openai_user_garbage_and_dropped(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(RawBody(b"not json at all", content_type="text/plain"))
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai))
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: bad response from "
                               f"{oai.host} (HTTP 200): body is not JSON: 'not json at all'")
    oai.push(Drop(), Drop())
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai))
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: connection to {oai.host} "
                               "closed without a response after 2 attempts")


def test_user_empty_message_is_an_error(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_text("   "))
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai))
    assert errored(result) == ("simulated user failed: UserError: openai user gpt-test: "
                               "the model returned an empty message")
    # a reasoning model that spent the whole limit thinking
    oai.push(openai_text(None, finish_reason="length", reasoning_content="Let me think... " * 50))
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai))
    assert errored(result) == ("simulated user failed: UserError: openai user gpt-test: "
                               "the response hit max_tokens (4096) before any text")


def test_claude_user_failures(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_message([], "refusal"))
    result = st.run_trial(domain, "refund-delivered", Lines(), claude_user(claude))
    assert errored(result) == ("simulated user failed: UserError: claude user claude-test: the model refused to play "
                               "the user (stop_reason 'refusal')")
    claude.push(RawBody(b"{oops"))
    result = st.run_trial(domain, "refund-delivered", Lines(), claude_user(claude))
    assert errored(result) == (f"simulated user failed: UserError: claude user claude-test: bad response from "
                               f"{claude.host}: body is not JSON: '{{oops'")


def test_user_key_never_in_results(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(401, f"bad key {KEY}", "invalid_request_error"))
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai))
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: HTTP 401 from {oai.host}: "
                               "bad key ***")
    assert KEY not in json.dumps(result.to_dict())


# -- specs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4", "unknown simulated user 'gpt-4'; expected 'scripted', 'claude:<model>', 'openai:<model>' or "
                  "'module:attr'"),
        ("openai:", "'openai:' names no model; expected openai:<model>, e.g. openai:gpt-4.1-mini"),
        ("nosuchmod:User", "cannot import module 'nosuchmod' for simulated user 'nosuchmod:User': "
                           "No module named 'nosuchmod' (looked on sys.path; put it beside the domain file or "
                           "in the rootdir, or set `pythonpath` in pytest's configuration)"),
    ],
)
def test_user_specs_rejected(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        make_user(spec)
    assert str(e.value) == message


def test_user_module_spec() -> None:
    user, name = make_user("test_model_user:Lines")
    assert name == "test_model_user:Lines" and isinstance(user, Lines)


# -- variations of the wire format and faults, for users too ----------------------------------------


def test_openai_user_reasoning_is_not_the_message(domain: st.Domain, oai: FakeOpenAI) -> None:
    # a reasoning model on a server that does not split the reasoning off: a signal in it must not count
    oai.push(openai_text("<think>\nIf they refund it I'd write ###GOAL_MET###.\n</think>\n\nRefund O-1001, please.",
                         usage=None),
             openai_text(openai_parts("Thanks!", "\n###GOAL_MET###"), usage=OMIT))
    result = st.run_trial(domain, "refund-delivered", Lines("Done."), openai_user(oai))
    assert (result.error, result.ended_by) == (None, "goal_met")
    assert [e.get("text") for e in result.transcript if e["role"] == "user"] == ["Refund O-1001, please.", "Thanks!"]
    assert result.usage["user"] == {"gpt-test": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0,
                                                 "calls": 2}}


def test_openai_user_error_in_a_200_body(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Reply({"error": {"message": "Provider returned error", "code": 429}}), openai_text("Refund O-1001."),
             openai_text("###GOAL_MET###"))
    result = st.run_trial(domain, "refund-delivered", Lines("Done."), openai_user(oai))
    assert (result.error, result.ended_by) == (None, "goal_met")
    oai.push(Reply({"error": {"message": "No endpoints found for gpt-test.", "code": 404}}))
    result = st.run_trial(domain, "refund-delivered", Lines("Done."), openai_user(oai))
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: error from {oai.host} "
                               "(HTTP 200, code 404): No endpoints found for gpt-test.")


def test_claude_user_529_then_success_and_thinking(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_error(529, "overloaded_error", "Overloaded"),
                claude_message([claude_thinking("Ask for the refund."), {"type": "text", "text": "Refund O-1001."}],
                               "end_turn", usage=OMIT),
                claude_text("###GOAL_MET###"))
    result = st.run_trial(domain, "refund-delivered", Lines("Done."), claude_user(claude))
    assert (result.error, result.ended_by) == (None, "goal_met")
    assert result.transcript[0]["text"] == "Refund O-1001."
    assert len(claude.requests) == 3


def test_user_model_trickle_and_reset_are_bounded(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Trickle(0.05), Cut(openai_text("Refund O-1001.").body, keep=30, reset=True))
    started = time.monotonic()
    result = st.run_trial(domain, "refund-delivered", Lines(), openai_user(oai, timeout=0.3, retries=1))
    assert time.monotonic() - started < 5.0
    assert errored(result) == (f"simulated user failed: UserError: openai user gpt-test: connection to {oai.host} "
                               "dropped after 2 attempts")
