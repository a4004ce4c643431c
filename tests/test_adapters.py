"""Claude and OpenAI-compatible agents against local fake servers: the wire format, a full
trial with a model user, every fault, and that keys never leak. No key, no internet."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from fakes import (
    OMIT,
    SHOP,
    Blackhole,
    Cut,
    Delay,
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
    claude_tools,
    claude_usage,
    openai_error,
    openai_function_call,
    openai_parts,
    openai_text,
    openai_tools,
    openai_usage,
    runtime_details,
    shop_domain,
)

import pytest_sandtable as st
from pytest_sandtable.adapters import _retry
from pytest_sandtable.adapters._common import anthropic_base_url, openai_base_url
from pytest_sandtable.adapters._retry import backoff, parse_retry_after, should_retry
from pytest_sandtable.adapters.claude import ClaudeAgent
from pytest_sandtable.adapters.model_user import START
from pytest_sandtable.adapters.openai import OpenAIAgent
from pytest_sandtable.adapters.options import AdapterOptions
from pytest_sandtable.adapters.registry import make_agent, make_user

CLAUDE_KEY = "sk-ant-test-4b1d9e"
OPENAI_KEY = "sk-test-user-7c2e51"


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff waits of 0.05 s, 0.1 s, ... (times the jitter) keep the fault tests fast."""
    monkeypatch.setattr(_retry, "BACKOFF_BASE", 0.05)


@pytest.fixture
def domain(tmp_path: Path) -> st.Domain:
    return shop_domain(tmp_path)


@pytest.fixture
def claude() -> Any:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def oai() -> Any:
    with FakeOpenAI() as server:
        yield server


def claude_agent(server: FakeAnthropic, **options: Any) -> ClaudeAgent:
    opts = {"timeout": 5.0, "retries": 2, **options}
    return ClaudeAgent("claude-test", AdapterOptions(**opts), api_key=CLAUDE_KEY, base_url=server.base_url)


def openai_agent(server: FakeOpenAI, api_key: str | None = None, **options: Any) -> OpenAIAgent:
    opts = {"timeout": 5.0, "retries": 2, "agent_base_url": server.base_url, **options}
    return OpenAIAgent("gpt-test", AdapterOptions(**opts), api_key=api_key)


def sent_key(server: FakeAnthropic) -> str:
    """The key the SDK sent (2.x sends it as a bearer token, 0.x as x-api-key)."""
    h = server.requests[0].headers
    return h.get("x-api-key") or h.get("authorization", "").removeprefix("Bearer ")


def trial(domain: st.Domain, agent: Any, task: str = "opening-fixed", user: Any = None, **kw: Any) -> st.TrialResult:
    return st.run_trial(domain, task, agent, user or st.ScriptedUser(), **kw)


# -- a full trial: Claude agent, OpenAI-compatible simulated user -------------------------------


def test_full_trial_claude_agent_and_openai_user(domain: st.Domain, claude: FakeAnthropic, oai: FakeOpenAI,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    # the plain wire format (prompt caching's marks are tested in test_prompt_cache.py)
    options = AdapterOptions(user_base_url=oai.base_url, temperature=0.3, timeout=5.0, retries=1, run_seed=7,
                             prompt_cache=False)
    agent, agent_name = make_agent("claude:claude-test", options)
    user, user_name = make_user("openai:gpt-test", options)
    oai.push(
        openai_text("Hi, I'd like a refund of 42.50 for order O-1001, please.", openai_usage(120, 18, 0)),
        openai_text("Wonderful, thank you!\n###GOAL_MET###", openai_usage(160, 9, 100)),
    )
    claude.push(
        claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"}), text="Let me look that up.",
                     usage=claude_usage(300, 40, 0, 250)),
        claude_tools(("toolu_2", "refund_order", {"order_id": "O-1001", "amount": 42.5}),
                     usage=claude_usage(60, 30, 250, 0)),
        claude_text("Done: 42.50 is refunded to your card.", claude_usage(80, 20, 250, 0)),
        claude_text("You're welcome, Ada. Goodbye!", claude_usage(20, 10, 300, 0)),
    )
    result = st.run_trial(domain, "refund-delivered", agent, user, run_seed=7, agent_name=agent_name,
                          user_name=user_name)

    assert (result.verdict, result.ended_by, result.error) == ("passed", "goal_met", None)
    assert (result.agent, result.user) == ("claude:claude-test", "openai:gpt-test")
    assert [(c["tool"], c["args"], c["ok"]) for c in result.calls] == [
        ("get_order", {"order_id": "O-1001"}, True),
        ("refund_order", {"order_id": "O-1001", "amount": 42.5}, True),
    ]
    assert [(e["role"], e.get("text")) for e in result.transcript if e["role"] != "tool"] == [
        ("user", "Hi, I'd like a refund of 42.50 for order O-1001, please."),
        ("agent", "Let me look that up.\n\nDone: 42.50 is refunded to your card."),
        ("user", "Wonderful, thank you!"),  # the stop signal is parsed out
        ("agent", "You're welcome, Ada. Goodbye!"),  # a closing message with text gets one last turn
    ]
    assert result.usage == {
        "agent": {"claude-test": {"input": 460, "output": 100, "cache_read": 800, "cache_write": 250, "calls": 4}},
        # OpenAI's prompt_tokens include the cached ones; input counts the uncached part
        "user": {"gpt-test": {"input": 180, "output": 27, "cache_read": 100, "cache_write": 0, "calls": 2}},
    }

    # what Claude was sent
    first, second, third, last = claude.bodies
    assert sent_key(claude) == CLAUDE_KEY
    assert first["model"] == "claude-test"
    assert first["system"] == domain.system_prompt()
    assert first["temperature"] == 0.3
    assert first["max_tokens"] == 4096
    assert [t["name"] for t in first["tools"]] == ["get_order", "refund_order", "transfer_to_human"]
    assert first["tools"][0]["input_schema"]["required"] == ["order_id"]
    assert first["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Hi, I'd like a refund of 42.50 for order O-1001, please."}]}]
    assert second["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look that up."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "O-1001"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": json.dumps(
            {"order_id": "O-1001", "customer": "Ada Quill", "total": 42.5, "status": "delivered"})}]},
    ]
    assert third["messages"][-1]["content"][0]["tool_use_id"] == "toolu_2"
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user", "assistant", "user", "assistant",
                                                     "user"]
    assert last["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "Wonderful, thank you!"}]}

    # what the user model was sent: persona and goal, never the policy; roles flipped; the trial's seed
    u1, u2 = oai.bodies
    assert oai.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert (u1["model"], u1["seed"], u1["temperature"], u1["max_tokens"]) == ("gpt-test", result.seed, 0.3, 4096)
    assert "tools" not in u1
    system = u1["messages"][0]
    assert system["role"] == "system"
    assert "Ada Quill, a regular customer." in system["content"]
    assert "You want a refund of 42.50 for order O-1001." in system["content"]
    assert "Refund at most the order total" not in system["content"]
    assert "###GOAL_MET###" in system["content"]
    assert u1["messages"][1:] == [{"role": "user", "content": START}]
    assert u2["messages"][1:] == [
        {"role": "user", "content": START},
        {"role": "assistant", "content": "Hi, I'd like a refund of 42.50 for order O-1001, please."},
        {"role": "user", "content": "Let me look that up.\n\nDone: 42.50 is refunded to your card."},
    ]
    assert u2["seed"] == result.seed

    # keys appear nowhere in the result
    dumped = json.dumps(result.to_dict())
    assert CLAUDE_KEY not in dumped and OPENAI_KEY not in dumped
    assert CLAUDE_KEY not in repr(agent) and OPENAI_KEY not in repr(user)


# -- Claude: the wire format ----------------------------------------------------------------


def test_claude_several_tool_calls_in_one_response_and_tool_errors(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(
        claude_tools(("toolu_a", "get_order", {"order_id": "O-9999"}),
                     ("toolu_b", "get_order", {"order_id": "O-1001"})),
        claude_text("Your order O-1001 was delivered."),
        claude_text("Bye!"),
    )
    result = trial(domain, claude_agent(claude))
    assert result.verdict == "passed"
    assert [(c["args"]["order_id"], c["ok"]) for c in result.calls] == [("O-9999", False), ("O-1001", True)]
    results = claude.bodies[1]["messages"][-1]["content"]
    assert [(r["tool_use_id"], r.get("is_error")) for r in results] == [("toolu_a", True), ("toolu_b", None)]
    assert json.loads(results[0]["content"]) == {"error": 404, "message": "orders O-9999 not found"}
    assert "temperature" not in claude.bodies[0]  # only sent when asked for


def test_claude_history_keeps_thinking_blocks_as_returned(domain: st.Domain, claude: FakeAnthropic) -> None:
    thinking = {"type": "thinking", "thinking": "Look the order up first.", "signature": "sig-abc"}
    claude.push(
        claude_message([thinking, {"type": "tool_use", "id": "toolu_1", "name": "get_order",
                                   "input": {"order_id": "O-1001"}}], "tool_use"),
        claude_text("It was delivered."),
        claude_text("Bye!"),
    )
    assert trial(domain, claude_agent(claude)).verdict == "passed"
    assert claude.bodies[1]["messages"][1]["content"][0] == thinking


@pytest.mark.parametrize(
    ("message", "detail"),
    [
        (claude_message([], "refusal"),
         "claude agent claude-test: the model refused to answer (stop_reason 'refusal')"),
        (claude_tools(("toolu_1", "get_order", {"order_id": "O-1"}), stop_reason="max_tokens"),
         "claude agent claude-test: the response hit max_tokens (4096) in the middle of a tool call"),
        (claude_message([], "max_tokens"),
         "claude agent claude-test: the response hit max_tokens (4096) before any text"),
        (claude_message([], "model_context_window_exceeded"),
         "claude agent claude-test: the conversation no longer fits the model's context window"),
    ],
)
def test_claude_stop_reasons_that_fail_the_trial(domain: st.Domain, claude: FakeAnthropic, message: Reply,
                                                 detail: str) -> None:
    claude.push(message)
    result = trial(domain, claude_agent(claude))
    assert result.verdict == "failed"
    assert result.ended_by == "agent_error"
    assert runtime_details(result) == [detail]


def test_claude_refusal_with_text_is_the_reply(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_text("I can't help with that.", stop_reason="refusal"), claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert result.transcript[1]["text"] == "I can't help with that."


def test_claude_needs_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError) as e:
        make_agent("claude:claude-test", AdapterOptions())
    assert str(e.value) == "claude:<model> needs an API key in the ANTHROPIC_API_KEY environment variable"


# -- Claude: faults ---------------------------------------------------------------------------


def test_claude_500_then_success(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_error(500, "api_error", "internal error"), claude_text("Delivered."), claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert len(claude.requests) == 3
    assert result.usage["agent"]["claude-test"]["calls"] == 2  # the failed attempt used nothing


def test_claude_429_retry_after_is_honoured(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_error(429, "rate_limit_error", "slow down", {"retry-after": "1"}),
                claude_text("Delivered."), claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert 0.95 <= claude.gaps()[0] < 2.5


def test_claude_529_until_retries_run_out(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(*[claude_error(529, "overloaded_error", "Overloaded")] * 3)
    result = trial(domain, claude_agent(claude, retries=2))
    assert result.verdict == "failed"
    assert runtime_details(result) == [
        f"claude agent claude-test: HTTP 529 from {claude.host} after 3 attempts: Overloaded (request-id req_err001)"
    ]
    assert len(claude.requests) == 3


def test_claude_400_is_not_retried(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_error(400, "invalid_request_error", "temperature is deprecated for this model."))
    result = trial(domain, claude_agent(claude, temperature=0.5))
    assert runtime_details(result) == [
        f"claude agent claude-test: HTTP 400 from {claude.host}: temperature is deprecated for this model. "
        "(request-id req_err001)"
    ]
    assert len(claude.requests) == 1


def test_claude_hang_fails_in_about_the_timeout(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(Hang(30))
    started = time.monotonic()
    result = trial(domain, claude_agent(claude, timeout=0.5, retries=0))
    assert time.monotonic() - started < 6.0
    assert runtime_details(result) == [f"claude agent claude-test: no response from {claude.host} within 0.5s"]


def test_claude_hang_then_success_is_retried(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(Hang(30), claude_text("Delivered."), claude_text("Bye."))
    result = trial(domain, claude_agent(claude, timeout=0.5, retries=1))
    assert runtime_details(result) == []
    assert len(claude.requests) == 3


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (RawBody(b"{not json"), "bad response from {host}: body is not JSON: '{{not json'"),
        (RawBody(b"<html>gateway</html>", content_type="text/html"),
         "bad response from {host}: body is not JSON: HTML page 'gateway'"),
        (Reply({"id": "msg_1", "type": "message"}), "bad response from {host}: 'content' must be an array, got null"),
        (Reply({"id": "msg_1", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "input": "x"}],
                "stop_reason": "tool_use", "usage": claude_usage()}),
         "bad response from {host}: content[0].input must be an object"),
    ],
)
def test_claude_garbage_body(domain: st.Domain, claude: FakeAnthropic, body: Reply | RawBody, detail: str) -> None:
    claude.push(body)
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == ["claude agent claude-test: " + detail.format(host=claude.host)]
    assert len(claude.requests) == 1


def test_claude_dropped_connection(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(Drop(), Drop())
    result = trial(domain, claude_agent(claude, retries=1))
    assert runtime_details(result) == [
        f"claude agent claude-test: connection to {claude.host} closed without a response after 2 attempts"
    ]


def test_claude_dropped_connection_then_success(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(Drop(), claude_text("Delivered."), claude_text("Bye."))
    assert runtime_details(trial(domain, claude_agent(claude, retries=1))) == []


def test_claude_connection_refused(domain: st.Domain) -> None:
    with FakeAnthropic() as server:
        url, host = server.base_url, server.host
    agent = ClaudeAgent("claude-test", AdapterOptions(timeout=2.0, retries=0), api_key=CLAUDE_KEY, base_url=url)
    assert runtime_details(trial(domain, agent)) == [f"claude agent claude-test: connection refused by {host}"]


def test_claude_key_never_in_messages_even_when_echoed(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_error(401, "authentication_error", f"invalid x-api-key {CLAUDE_KEY}"))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == [
        f"claude agent claude-test: HTTP 401 from {claude.host}: invalid x-api-key *** (request-id req_err001)"
    ]
    assert CLAUDE_KEY not in json.dumps(result.to_dict())


# -- OpenAI-compatible agent --------------------------------------------------------------------


def test_openai_agent_tool_calls_seed_and_history(domain: st.Domain, oai: FakeOpenAI,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    oai.push(
        openai_tools(("call_1", "get_order", {"order_id": "O-1001"}), ("call_2", "get_order", "{order_id: O-1001")),
        openai_text("It was delivered.", openai_usage(50, 10, 30)),
        openai_text("Goodbye!"),
    )
    agent = openai_agent(oai)
    result = trial(domain, agent, run_seed=3)
    assert result.verdict == "passed"
    assert [(c["ok"], c["error"]) for c in result.calls] == [
        (True, None),
        (False, {"code": 400, "message": "invalid arguments for get_order: arguments are not valid JSON: "
                                         "Expecting property name enclosed in double quotes"}),
    ]
    assert result.calls[1]["args"] == {"_raw": "{order_id: O-1001"}
    assert "authorization" not in oai.requests[0].headers  # no key: a local server
    first, second, _ = oai.bodies
    assert first["seed"] == result.seed
    assert first["max_tokens"] == 4096 and "temperature" not in first
    assert first["messages"] == [{"role": "system", "content": domain.system_prompt()},
                                 {"role": "user", "content": "Hi, where is my order O-1001?"}]
    assert first["tools"][0] == {"type": "function", "function": {
        "name": "get_order", "description": "Look up an order by id.",
        "parameters": domain.tools["get_order"].input_schema()}}
    assert second["messages"][2]["tool_calls"][1]["function"] == {"name": "get_order",
                                                                  "arguments": "{order_id: O-1001"}
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_1", "call_2"]
    assert json.loads(tool_msgs[1]["content"])["error"] == 400
    assert result.usage["agent"]["gpt-test"] == {"input": 60, "output": 26, "cache_read": 30, "cache_write": 0,
                                                 "calls": 3}


def test_openai_agent_sends_the_key_and_temperature(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_text("Delivered."), openai_text("Bye."))
    trial(domain, openai_agent(oai, api_key=OPENAI_KEY, temperature=0.0))
    assert oai.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert oai.bodies[0]["temperature"] == 0.0


def test_openai_base_url_from_environment(oai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url + "/")
    agent, name = make_agent("openai:gpt-test", AdapterOptions())
    assert name == "openai:gpt-test"
    assert repr(agent) == f"OpenAIAgent(model='gpt-test', base_url='{oai.base_url}')"
    monkeypatch.delenv("OPENAI_BASE_URL")
    agent, _ = make_agent("openai:gpt-test", AdapterOptions())
    assert repr(agent) == "OpenAIAgent(model='gpt-test', base_url='https://api.openai.com/v1')"
    assert agent._api.max_tokens_field == "max_completion_tokens"  # type: ignore[attr-defined]


def test_openai_500_until_retries_run_out(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(*[openai_error(500, "internal error")] * 3)
    result = trial(domain, openai_agent(oai, retries=2))
    assert runtime_details(result) == [
        f"openai agent gpt-test: HTTP 500 from {oai.host} after 3 attempts: internal error"]


def test_openai_500_then_success(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(500, "internal error"), openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai))) == []
    assert len(oai.requests) == 3


def test_openai_429_retry_after_is_honoured(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(429, "Rate limit reached", "rate_limit_error", {"retry-after": "1"}),
             openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai))) == []
    assert 0.95 <= oai.gaps()[0] < 2.5


def test_openai_hang(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Hang(30))
    started = time.monotonic()
    result = trial(domain, openai_agent(oai, timeout=0.5, retries=0))
    assert time.monotonic() - started < 6.0
    assert runtime_details(result) == [f"openai agent gpt-test: no response from {oai.host} within 0.5s"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (RawBody(b"<html>bad gateway</html>", content_type="text/html"),
         "bad response from {host} (HTTP 200): body is not JSON: HTML page 'bad gateway'"),
        (Reply({"id": "x", "object": "chat.completion"}), "bad response from {host}: 'choices' is missing"),
        (Reply({"choices": []}), "bad response from {host}: 'choices' must be a non-empty array"),
        (Reply({"choices": [{"message": {"content": 5}}]}),
         "bad response from {host}: choices[0].message.content must be a string, got number"),
        (Reply({"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]}),
         "bad response from {host}: choices[0].message.tool_calls[0].function.name must be a string"),
        (Reply({"choices": [{"delta": {"content": "hi"}}]}), "bad response from {host}: choices[0].message must be "
                                                             "an object"),
        (RawBody(b""), "bad response from {host} (HTTP 200): body is not JSON: (empty)"),
        (RawBody(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n',
                 content_type="text/event-stream"),
         "bad response from {host} (HTTP 200): the server streamed its answer (text/event-stream) although the "
         "request said stream: false"),
    ],
)
def test_openai_garbage_body(domain: st.Domain, oai: FakeOpenAI, body: Reply | RawBody, detail: str) -> None:
    oai.push(body)
    result = trial(domain, openai_agent(oai))
    assert runtime_details(result) == ["openai agent gpt-test: " + detail.format(host=oai.host)]
    assert len(oai.requests) == 1


def test_openai_dropped_connection(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Drop(), Drop(), Drop())
    result = trial(domain, openai_agent(oai, retries=2))
    assert runtime_details(result) == [
        f"openai agent gpt-test: connection to {oai.host} closed without a response after 3 attempts"
    ]


def test_openai_key_never_in_messages(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(401, f"Incorrect API key provided: {OPENAI_KEY}", "invalid_request_error"))
    result = trial(domain, openai_agent(oai, api_key=OPENAI_KEY))
    assert runtime_details(result) == [f"openai agent gpt-test: HTTP 401 from {oai.host}: "
                                       "Incorrect API key provided: ***"]
    assert OPENAI_KEY not in json.dumps(result.to_dict())


def test_openai_length_and_content_filter(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools(("c1", "get_order", '{"order_id": "O-1'), finish_reason="length"))
    assert runtime_details(trial(domain, openai_agent(oai))) == [
        "openai agent gpt-test: the response hit max_tokens (4096) in the middle of a tool call"]
    oai.push(openai_text("", finish_reason="content_filter"))
    assert runtime_details(trial(domain, openai_agent(oai))) == [
        "openai agent gpt-test: the response was withheld by the server's content filter"]


# -- the retry policy -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Sun, 29 Nov 2026 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Sun, 29 Nov 2026 11:59:00 GMT"}, 0.0),  # in the past
        ({"retry-after": "3600"}, 60.0),  # capped
        ({"retry-after": "soon"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    now = email.utils.mktime_tz(email.utils.parsedate_tz("Sun, 29 Nov 2026 12:00:00 GMT"))  # type: ignore[arg-type]
    assert parse_retry_after(headers, now=float(now)) == seconds


def test_backoff_grows_with_jitter_and_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_retry, "BACKOFF_BASE", 0.5)
    for retry, low, high in [(1, 0.25, 0.5), (2, 0.5, 1.0), (3, 1.0, 2.0), (5, 4.0, 8.0), (9, 4.0, 8.0)]:
        waits = [backoff(retry) for _ in range(200)]
        assert low <= min(waits) and max(waits) <= high
        assert len(set(waits)) > 1


# -- specs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("claud:x", "cannot import module 'claud' for agent 'claud:x': No module named 'claud'"
                    " (looked on sys.path; put it beside the domain file or in the rootdir, or set"
                    " `pythonpath` in pytest's configuration)"),
        ("gpt-4", "unknown agent 'gpt-4'; expected 'reference', 'claude:<model>', 'openai:<model>', "
                  "'http(s)://<url>' or 'module:attr'"),
        ("claude:", "'claude:' names no model; expected claude:<model>, e.g. claude:claude-sonnet-4-5"),
        ("openai: ", "'openai:' names no model; expected openai:<model>, e.g. openai:gpt-4.1"),
        ("http://", "agent URL 'http://' has no host"),
    ],
)
def test_agent_specs_rejected(spec: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    with pytest.raises(ValueError) as e:
        make_agent(spec, AdapterOptions())
    assert str(e.value) == message


def test_agent_specs_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    assert make_agent("reference")[1] == "reference"
    assert make_agent("claude:claude-haiku-4-5")[1] == "claude:claude-haiku-4-5"
    assert make_agent("openai:qwen2.5:7b")[1] == "openai:qwen2.5:7b"
    assert make_agent("http://127.0.0.1:9/step?token=abc")[1] == "http://127.0.0.1:9/step"
    assert make_agent("https://bot:pw@agents.example.com/step")[1] == "https://agents.example.com/step"
    agent, name = make_agent("fakes:runtime_details")
    assert name == "fakes:runtime_details" and cast(Any, agent) is runtime_details


def test_missing_client_library_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "pytest_sandtable.adapters.claude")
    for make in (make_agent, make_user):
        with pytest.raises(ValueError) as e:
            make("claude:claude-test")
        assert str(e.value) == ("'claude:claude-test' needs the anthropic package: "
                                "pip install 'pytest-sandtable[claude]'")


# -- the plugin path ----------------------------------------------------------------------------


def test_plugin_runs_a_claude_agent_from_the_command_line(pytester: pytest.Pytester, claude: FakeAnthropic,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
    only_fixed_opening = SHOP[: SHOP.index("tasks:")] + "tasks:\n" + SHOP[SHOP.index("  - id: opening-fixed"):]
    pytester.makefile(".sandtable.yaml", shop=only_fixed_opening)
    claude.push(
        claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"})),
        claude_text("Your order O-1001 was delivered."),
        claude_text("Glad to help!"),
    )
    result = pytester.runpytest("--sandtable-agent=claude:claude-test", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*agent=claude:claude-test*"])
    assert len(claude.requests) == 3
    assert sent_key(claude) == CLAUDE_KEY
    assert CLAUDE_KEY not in result.stdout.str()


def _claude_desk(req: Any) -> Reply:
    """Answers any request of a shop trial from its content (trials interleave)."""
    last = req.json["messages"][-1]["content"]
    if last[0]["type"] == "tool_result":
        return claude_text("Your order O-1001 was delivered.")
    if last[0]["text"].startswith("Hi, where is my order"):
        return claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"}))
    return claude_text("Glad to help!")


def test_plugin_with_trials_in_flight(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    only_fixed_opening = SHOP[: SHOP.index("tasks:")] + "tasks:\n" + SHOP[SHOP.index("  - id: opening-fixed"):]
    pytester.makefile(".sandtable.yaml", shop=only_fixed_opening)
    with FakeAnthropic(responder=_claude_desk) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = pytester.runpytest("--sandtable-agent=claude:claude-test", "--sandtable-k=6",
                                    "--sandtable-concurrency=3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert len(server.requests) == 18


# -- OpenAI-compatible servers: the variations of the wire format they really produce -------------


def test_openai_content_null_with_tool_calls(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools(("call_1", "get_order", {"order_id": "O-1001"}), text=None),
             openai_text("It was delivered."), openai_text("Bye."))
    result = trial(domain, openai_agent(oai))
    assert (result.verdict, [c["ok"] for c in result.calls]) == ("passed", [True])
    assert result.transcript[2]["text"] == "It was delivered."
    assert oai.bodies[1]["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "O-1001"}'}}]}


def test_openai_content_as_a_list_of_parts(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools(("call_1", "get_order", {"order_id": "O-1001"}), text=openai_parts("Checking.")),
             openai_text([{"type": "text", "text": "It was "}, {"type": "output_text", "text": "delivered."},
                          {"type": "reasoning", "text": "(hidden)"}]),
             openai_text(openai_parts("Bye.")))
    result = trial(domain, openai_agent(oai))
    assert [e.get("text") for e in result.transcript if e["role"] == "agent"] == [
        "Checking.\n\nIt was delivered.", "Bye."]
    assert oai.bodies[1]["messages"][2]["content"] == "Checking."  # sent back as plain text
    assert oai.bodies[2]["messages"][4] == {"role": "assistant", "content": "It was delivered."}


def test_openai_arguments_as_an_object(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools(("call_1", "get_order", {"order_id": "O-1001"}), objects=True, finish_reason="stop"),
             openai_text("Delivered."), openai_text("Bye."))
    result = trial(domain, openai_agent(oai))
    assert [(c["args"], c["ok"]) for c in result.calls] == [({"order_id": "O-1001"}, True)]
    # sent back as JSON text, as the API has it
    assert oai.bodies[1]["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"order_id": "O-1001"}'


def test_openai_empty_null_or_missing_arguments(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools(("c1", "get_order", ""), ("c2", "get_order", None), ("c3", "get_order", OMIT),
                          ("c4", "get_order", "  ")),
             openai_text("Which order?"), openai_text("Bye."))
    result = trial(domain, openai_agent(oai))
    assert [(c["args"], c["ok"]) for c in result.calls] == [({}, False)] * 4  # get_order needs an order_id
    assert [c["function"]["arguments"] for c in oai.bodies[1]["messages"][2]["tool_calls"]] == ["{}"] * 4
    assert runtime_details(result) == []


def test_openai_arguments_encoded_twice(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools(("c1", "get_order", json.dumps(json.dumps({"order_id": "O-1001"})))),
             openai_text("Delivered."), openai_text("Bye."))
    result = trial(domain, openai_agent(oai))
    assert [(c["args"], c["ok"]) for c in result.calls] == [({"order_id": "O-1001"}, True)]


def test_unexpected_client_errors_are_one_masked_line() -> None:
    async def attempt() -> None:
        raise KeyError(f"header Authorization: Bearer {OPENAI_KEY}")

    caller = _retry.Caller("openai agent gpt-test", "127.0.0.1:9", st.AgentError, 3, 1.0, (OPENAI_KEY,))
    with pytest.raises(st.AgentError) as e:
        asyncio.run(caller.call(attempt))
    assert str(e.value) == ("openai agent gpt-test: unexpected error talking to 127.0.0.1:9: KeyError: "
                            "'header Authorization: Bearer ***'")
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_openai_missing_empty_or_repeated_tool_call_ids(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_tools((OMIT, "get_order", {"order_id": "O-1001"}), ("", "get_order", {"order_id": "O-1"}),
                          (None, "get_order", {"order_id": "O-2"}), finish_reason=OMIT),
             openai_tools(("call_0", "get_order", {"order_id": "O-3"}), ("call_0", "get_order", {"order_id": "O-4"})),
             openai_text("Delivered."), openai_text("Bye."))
    result = trial(domain, openai_agent(oai))
    assert len(result.calls) == 5
    second, third = oai.bodies[1]["messages"], oai.bodies[2]["messages"]
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call00001", "call00002", "call00003"]
    assert [m["tool_call_id"] for m in second[3:]] == ["call00001", "call00002", "call00003"]
    assert [c["id"] for c in third[6]["tool_calls"]] == ["call_0", "call00004"]  # a server's own id is kept
    assert [m["tool_call_id"] for m in third[7:]] == ["call_0", "call00004"]


def test_openai_legacy_function_call(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_function_call("get_order", {"order_id": "O-1001"}), openai_text("Delivered."),
             openai_text("Bye."))
    result = trial(domain, openai_agent(oai))
    assert [(c["tool"], c["ok"]) for c in result.calls] == [("get_order", True)]
    assert oai.bodies[1]["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call00001", "type": "function",
             "function": {"name": "get_order", "arguments": '{"order_id": "O-1001"}'}}]},
        {"role": "tool", "tool_call_id": "call00001", "content": json.dumps(
            {"order_id": "O-1001", "customer": "Ada Quill", "total": 42.5, "status": "delivered"})},
    ]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (OMIT, {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}),  # Ollama, llama.cpp
        (None, {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}),
        ({"total_tokens": 30}, {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}),
        ({"prompt_tokens": 12.0, "completion_tokens": 3, "prompt_tokens_details": None},
         {"input": 12, "output": 3, "cache_read": 0, "cache_write": 0}),
        ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 60},
          "cache_creation_input_tokens": 30}, {"input": 10, "output": 5, "cache_read": 60, "cache_write": 30}),
        ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 40, "prompt_cache_miss_tokens": 60},
         {"input": 60, "output": 5, "cache_read": 40, "cache_write": 0}),  # DeepSeek
        ({"prompt_tokens": -4, "completion_tokens": "7", "prompt_tokens_details": {"cached_tokens": None}},
         {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}),
    ],
)
def test_openai_usage_missing_null_or_partial(domain: st.Domain, oai: FakeOpenAI, usage: Any,
                                              expected: dict[str, int]) -> None:
    oai.push(openai_text("Delivered.", usage), openai_text("Bye.", usage))
    result = trial(domain, openai_agent(oai))
    assert runtime_details(result) == []
    assert result.usage["agent"] == {"gpt-test": {k: 2 * v for k, v in expected.items()} | {"calls": 2}}


def test_openai_reasoning_and_refusal(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_text("<think>\nThe user wants order O-1001.\n</think>\n\nIt was delivered.",
                         reasoning_content="(split off by vLLM)"),
             openai_text(None, refusal="I can't help with that."))
    result = trial(domain, openai_agent(oai))
    assert [e.get("text") for e in result.transcript if e["role"] == "agent"] == [
        "It was delivered.", "I can't help with that."]
    assert oai.bodies[1]["messages"][2] == {"role": "assistant", "content": "It was delivered."}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (Reply({"error": {"message": "Invalid model name", "code": 400}}),
         "error from {host} (HTTP 200, code 400): Invalid model name"),
        (Reply({"error": "litellm.BadRequestError: unknown provider"}),
         "error from {host} (HTTP 200): litellm.BadRequestError: unknown provider"),
        (Reply({"error": {"code": "context_length_exceeded"}, "choices": []}),
         "error from {host} (HTTP 200): context_length_exceeded"),
    ],
)
def test_openai_200_with_an_error_body_that_is_final(domain: st.Domain, oai: FakeOpenAI, body: Reply,
                                                     detail: str) -> None:
    oai.push(body)
    result = trial(domain, openai_agent(oai))
    assert runtime_details(result) == ["openai agent gpt-test: " + detail.format(host=oai.host)]
    assert len(oai.requests) == 1


def test_openai_200_with_a_transient_error_body_is_retried(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Reply({"error": {"message": "Upstream provider overloaded", "code": 502}}),
             Reply({"choices": [{"index": 0, "message": {"role": "assistant", "content": "partial"},
                                 "finish_reason": "error", "error": {"message": "provider disconnected"}}]}),
             openai_text("Delivered."), openai_text("Bye."))
    result = trial(domain, openai_agent(oai, retries=2))
    assert runtime_details(result) == []
    assert len(oai.requests) == 4
    assert result.usage["agent"]["gpt-test"]["calls"] == 2  # failed attempts are not counted
    oai.push(*[Reply({"error": {"message": "Upstream provider overloaded", "code": "503"}})] * 2)
    result = trial(domain, openai_agent(oai, retries=1))
    assert runtime_details(result) == [f"openai agent gpt-test: error from {oai.host} (HTTP 200, code 503) "
                                       "after 2 attempts: Upstream provider overloaded"]


NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             b"</center>\r\n<hr><center>nginx/1.27.0</center>\r\n</body>\r\n</html>\r\n")
CLOUDFLARE_524 = (b"<!DOCTYPE html>\n<!--[if lt IE 7]> <html class=\"no-js ie6 oldie\" lang=\"en-US\"> <![endif]-->\n"
                  b"<head><style>body{margin:0}</style><title>example.com | 524: A timeout occurred</title>"
                  b"<script>var x = 1;</script></head><body><h1>A timeout occurred</h1></body></html>")


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (RawBody(b"Bad Gateway", 502, "text/plain"), "'Bad Gateway'"),
        (RawBody(b"upstream connect error or disconnect/reset before headers. reset reason: overflow", 503,
                 "text/plain"), "'upstream connect error or disconnect/reset before headers. reset reason: overflow'"),
        (RawBody(NGINX_502, 502, "text/html"), "HTML page '502 Bad Gateway'"),
        (RawBody(CLOUDFLARE_524, 524, "text/html; charset=UTF-8"), "HTML page 'example.com | 524: A timeout occurred'"),
        (RawBody(b"<html><body><p>Service <b>Unavailable</b></p></body></html>", 503, "text/html"),
         "HTML page 'Service Unavailable'"),
        (RawBody(b"", 504, "text/plain"), ""),
    ],
)
def test_openai_proxy_error_pages(domain: st.Domain, oai: FakeOpenAI, body: RawBody, detail: str) -> None:
    oai.push(body, body)
    result = trial(domain, openai_agent(oai, retries=1))
    tail = f": {detail}" if detail else ""
    assert runtime_details(result) == [
        f"openai agent gpt-test: HTTP {body.status} from {oai.host} after 2 attempts{tail}"]


def test_openai_proxy_502_then_success(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(RawBody(NGINX_502, 502, "text/html"), RawBody(b"Bad Gateway", 502, "text/plain"),
             openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai))) == []
    assert len(oai.requests) == 4


def test_openai_x_should_retry_overrides_the_status(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(409, "conflict", headers={"x-should-retry": "true"}), openai_text("Delivered."),
             openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai))) == []
    assert len(oai.requests) == 3
    oai.push(openai_error(503, "quota exhausted", headers={"x-should-retry": "false"}))
    assert runtime_details(trial(domain, openai_agent(oai))) == [
        f"openai agent gpt-test: HTTP 503 from {oai.host}: quota exhausted"]
    assert len(oai.requests) == 4


def test_openai_redirect_is_explained(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(RawBody(b"", 308, "text/plain", {"location": "https://user:pw@llm.example.com/v1/chat/completions"}))
    assert runtime_details(trial(domain, openai_agent(oai))) == [
        f"openai agent gpt-test: HTTP 308 from {oai.host}: redirected to "
        "https://llm.example.com/v1/chat/completions; give that address as the base URL"]


# -- OpenAI-compatible servers that reject a parameter the run added ----------------------------


def test_openai_rejected_seed_is_dropped_for_the_endpoint(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Reply({"error": {"message": "Unrecognized request argument supplied: seed",
                              "type": "invalid_request_error", "param": None, "code": None}}, 400),
             openai_text("Delivered."), openai_text("Bye."))
    result = trial(domain, openai_agent(oai, retries=0))
    assert runtime_details(result) == []
    assert ["seed" in b for b in oai.bodies] == [True, False, False]  # dropped once, for later calls too


def test_openai_rejected_seed_in_a_fastapi_422(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(Reply({"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not "
                                "permitted", "input": 1}]}, 422),
             openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai, retries=0))) == []
    assert ["seed" in b for b in oai.bodies] == [True, False, False]


def test_openai_max_tokens_renamed_when_the_server_asks(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                               "Use 'max_completion_tokens' instead.", "invalid_request_error"),
             openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai, retries=0))) == []
    assert [(b.get("max_tokens"), b.get("max_completion_tokens")) for b in oai.bodies] == [
        (4096, None), (None, 4096), (None, 4096)]


def test_openai_max_tokens_dropped_when_too_large_for_the_context(domain: st.Domain, oai: FakeOpenAI) -> None:
    # vLLM, with a small --max-model-len: without the limit the output is bounded by the context left anyway
    oai.push(Reply({"object": "error", "message": "'max_tokens' or 'max_completion_tokens' is too large: 4096. This "
                    "model's maximum context length is 2048 tokens and your request has 612 input tokens "
                    "(4096 > 2048 - 612).", "type": "BadRequestError", "param": None, "code": 400}, 400),
             openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai, retries=0))) == []
    assert [("max_tokens" in b, "max_completion_tokens" in b) for b in oai.bodies] == [(True, False), (False, False),
                                                                                       (False, False)]


def test_openai_null_content_refused_becomes_an_empty_string(domain: st.Domain, oai: FakeOpenAI) -> None:
    # Ollama's OpenAI endpoint answers this to an assistant message with tool calls and content null
    oai.push(openai_tools(("call_1", "get_order", {"order_id": "O-1001"})),
             Reply({"error": {"message": "invalid message content type: <nil>", "type": "invalid_request_error",
                              "param": None, "code": None}}, 400),
             openai_text("Delivered."), openai_text("Bye."))
    assert runtime_details(trial(domain, openai_agent(oai, retries=0))) == []
    assert [b["messages"][2]["content"] for b in oai.bodies[1:]] == [None, "", ""]


def test_openai_rejected_temperature_is_not_dropped(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(400, "Unsupported value: 'temperature' does not support 0.2 with this model. Only the "
                               "default (1) value is supported.", "invalid_request_error"))
    result = trial(domain, openai_agent(oai, temperature=0.2))
    assert runtime_details(result) == [
        f"openai agent gpt-test: HTTP 400 from {oai.host}: Unsupported value: 'temperature' does not support 0.2 "
        "with this model. Only the default (1) value is supported."]
    assert len(oai.requests) == 1


def test_openai_a_400_that_keeps_coming_is_reported_once_adjusted(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(*[openai_error(400, "seed: extra fields not permitted")] * 3)
    result = trial(domain, openai_agent(oai))
    assert runtime_details(result) == [f"openai agent gpt-test: HTTP 400 from {oai.host}: "
                                       "seed: extra fields not permitted"]
    assert len(oai.requests) == 2  # the first, and one without the seed


# -- base URLs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
        (" http://127.0.0.1:8000/v1/chat/completions ", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("http://127.0.0.1:4000/", "http://127.0.0.1:4000/v1"),
        ("localhost:11434", "http://localhost:11434/v1"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"),
        ("https://gw.example.com/openai?api-version=2024-10-21", "https://gw.example.com/openai?api-version=2024-10-21"),
    ],
)
def test_openai_base_url_normalised(given: str, base: str) -> None:
    assert openai_base_url(given) == base


@pytest.mark.parametrize(
    ("given", "base"),
    [
        (None, None),
        ("", None),
        ("  ", None),
        ("https://api.anthropic.com", "https://api.anthropic.com"),
        ("http://127.0.0.1:4000/anthropic/", "http://127.0.0.1:4000/anthropic"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/v1/messages", "http://127.0.0.1:8080"),
        ("127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ],
)
def test_anthropic_base_url_normalised(given: str | None, base: str | None) -> None:
    assert anthropic_base_url(given) == base


@pytest.mark.parametrize("tail", ["", "/", "/v1", "/v1/", "/v1/chat/completions"])
def test_openai_requests_go_to_v1_chat_completions(domain: st.Domain, oai: FakeOpenAI, tail: str) -> None:
    oai.push(openai_text("Delivered."), openai_text("Bye."))
    agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, agent_base_url=f"http://{oai.host}{tail}"))
    assert runtime_details(trial(domain, agent)) == []
    assert [r.path for r in oai.requests] == ["/v1/chat/completions"] * 2


class RootOpenAI(FakeOpenAI):
    """A server with the API at /chat/completions only (no /v1)."""

    path = "/chat/completions"


def test_openai_bare_base_url_falls_back_to_the_root(domain: st.Domain) -> None:
    with RootOpenAI([openai_text("Delivered."), openai_text("Bye.")]) as server:
        agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, retries=0, agent_base_url=f"http://{server.host}"))
        assert runtime_details(trial(domain, agent)) == []
        # the 404 at /v1 is not counted as an answer; later calls go straight to the root
        assert [r.path for r in server.requests] == ["/v1/chat/completions", "/chat/completions",
                                                     "/chat/completions"]


def test_openai_404_for_a_model_is_reported_as_such(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_error(404, 'model "qwen9:1b" not found, try pulling it first', "api_error"))
    agent = OpenAIAgent("qwen9:1b", AdapterOptions(timeout=5.0, agent_base_url=f"http://{oai.host}"))
    result = trial(domain, agent)
    assert runtime_details(result) == [f"openai agent qwen9:1b: HTTP 404 from {oai.host}: "
                                       'model "qwen9:1b" not found, try pulling it first']
    assert [r.path for r in oai.requests] == ["/v1/chat/completions", "/chat/completions"]


def test_openai_base_url_keeps_its_query(domain: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(openai_text("Delivered."), openai_text("Bye."))
    agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, agent_base_url=f"{oai.base_url}?api-version=2024"))
    assert runtime_details(trial(domain, agent)) == []
    assert oai.requests[0].path == "/v1/chat/completions?api-version=2024"


def test_anthropic_base_url_with_v1_and_blank_environment(domain: st.Domain, claude: FakeAnthropic,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url + "/v1/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    claude.push(claude_text("Delivered."), claude_text("Bye."))
    agent, _ = make_agent("claude:claude-test", AdapterOptions(timeout=5.0))
    assert runtime_details(trial(domain, agent)) == []
    assert [r.path for r in claude.requests] == ["/v1/messages"] * 2
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")  # blank: the public API, not an empty URL
    agent, _ = make_agent("claude:claude-test", AdapterOptions(timeout=5.0))
    assert agent._api.base_url == "https://api.anthropic.com"  # type: ignore[attr-defined]


# -- Claude (and Anthropic-compatible servers): variations --------------------------------------------


def test_claude_pause_turn_sends_the_response_back(domain: st.Domain, claude: FakeAnthropic) -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "O-1001"}}
    claude.push(claude_message([{"type": "text", "text": "Let me search."}, search], "pause_turn"),
                claude_text("It was delivered."), claude_text("Bye."))
    result = trial(domain, claude_agent(claude, prompt_cache=False))  # the history as sent, without cache marks
    assert runtime_details(result) == []
    assert result.transcript[1]["text"] == "Let me search.\n\nIt was delivered."
    assert claude.bodies[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi, where is my order O-1001?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me search."}, search]},
    ]


def test_claude_refusal_after_text_keeps_what_was_said(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"}), text="Let me check."),
                claude_message([], "refusal"), claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert result.transcript[2]["text"] == "Let me check."
    # the refused response is not in the history; the next user message follows the tool results
    assert [m["role"] for m in claude.bodies[2]["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in claude.bodies[2]["messages"][2]["content"]] == ["tool_result", "text"]


def test_claude_thinking_redacted_and_server_tool_blocks_kept_in_history(domain: st.Domain,
                                                                          claude: FakeAnthropic) -> None:
    blocks = [
        claude_thinking("The customer wants the status."),
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "carrier"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Checking.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "O-1001"}},
        {"type": "some_future_block", "payload": {"x": 1}},
    ]
    claude.push(claude_message(blocks, "tool_use"), claude_text("Delivered."), claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert claude.bodies[1]["messages"][1] == {"role": "assistant", "content": blocks}


def test_claude_tool_use_without_id_or_input(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_message([{"type": "tool_use", "name": "get_order", "input": '{"order_id": "O-1001"}'},
                                {"type": "tool_use", "id": "", "name": "get_order", "input": None}], "end_turn"),
                claude_text("Delivered."), claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert [(c["args"], c["ok"]) for c in result.calls] == [({"order_id": "O-1001"}, True), ({}, False)]
    sent = claude.bodies[1]["messages"]
    assert [(b["id"], b["input"]) for b in sent[1]["content"]] == [
        ("toolu_sandtable_0001", {"order_id": "O-1001"}), ("toolu_sandtable_0002", {})]
    assert [r["tool_use_id"] for r in sent[2]["content"]] == ["toolu_sandtable_0001", "toolu_sandtable_0002"]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (OMIT, {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}),
        (None, {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}),
        ({"input_tokens": 7, "output_tokens": None}, {"input": 7, "output": 0, "cache_read": 0, "cache_write": 0}),
        ({"input_tokens": 7, "output_tokens": 2, "cache_read_input_tokens": 50, "cache_creation_input_tokens": None,
          "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 10}},
         {"input": 7, "output": 2, "cache_read": 50, "cache_write": 30}),
    ],
)
def test_claude_usage_missing_null_or_partial(domain: st.Domain, claude: FakeAnthropic, usage: Any,
                                              expected: dict[str, int]) -> None:
    claude.push(claude_text("Delivered.", usage), claude_text("Bye.", usage))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert result.usage["agent"] == {"claude-test": {k: 2 * v for k, v in expected.items()} | {"calls": 2}}


def test_claude_529_overloaded_then_success(domain: st.Domain, claude: FakeAnthropic) -> None:
    overloaded = claude_error(529, "overloaded_error", "Overloaded")
    claude.push(overloaded, overloaded,
                claude_text("Delivered.", claude_usage(30, 6)), claude_text("Bye.", claude_usage(40, 2)))
    result = trial(domain, claude_agent(claude, retries=2))
    assert runtime_details(result) == []
    assert len(claude.requests) == 4
    assert result.usage["agent"] == {"claude-test": {"input": 70, "output": 8, "cache_read": 0, "cache_write": 0,
                                                     "calls": 2}}


def test_claude_error_in_a_200_body(domain: st.Domain, claude: FakeAnthropic) -> None:
    overloaded = Reply({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    claude.push(overloaded, claude_text("Delivered."), claude_text("Bye."))
    assert runtime_details(trial(domain, claude_agent(claude))) == []
    assert len(claude.requests) == 3
    claude.push(Reply({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}}))
    assert runtime_details(trial(domain, claude_agent(claude))) == [
        f"claude agent claude-test: error from {claude.host} (HTTP 200, invalid_request_error): prompt is too long"]
    assert len(claude.requests) == 4


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (RawBody(b"Bad Gateway", 502, "text/plain"), "'Bad Gateway'"),
        (RawBody(NGINX_502, 502, "text/html"), "HTML page '502 Bad Gateway'"),
    ],
)
def test_claude_proxy_error_pages(domain: st.Domain, claude: FakeAnthropic, body: RawBody, detail: str) -> None:
    claude.push(body, body)
    assert runtime_details(trial(domain, claude_agent(claude, retries=1))) == [
        f"claude agent claude-test: HTTP 502 from {claude.host} after 2 attempts: {detail}"]
    claude.push(body, claude_text("Delivered."), claude_text("Bye."))
    assert runtime_details(trial(domain, claude_agent(claude, retries=1))) == []


def test_claude_context_window_exceeded_with_text_ends_the_turn(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_text("Your order O-1001 was deliv", stop_reason="model_context_window_exceeded"),
                claude_text("Bye."))
    result = trial(domain, claude_agent(claude))
    assert runtime_details(result) == []
    assert result.transcript[1]["text"] == "Your order O-1001 was deliv"


def test_should_retry() -> None:
    assert [should_retry(s, {}) for s in (400, 401, 404, 408, 409, 429, 500, 529)] == [
        False, False, False, True, False, True, True, True]
    assert should_retry(409, {"x-should-retry": "true"}) and not should_retry(529, {"x-should-retry": "false"})
    assert should_retry(500, {"x-should-retry": "maybe"})


# -- faults: resets, slow servers, and nothing hangs ---------------------------------------------------


def _agent_for(kind: str, server: Any, **options: Any) -> Any:
    return claude_agent(server, **options) if kind == "claude" else openai_agent(server, **options)


def _fake(kind: str) -> Any:
    return FakeAnthropic() if kind == "claude" else FakeOpenAI()


def _texts_for(kind: str, *texts: str) -> list[Reply]:
    return [claude_text(t) if kind == "claude" else openai_text(t) for t in texts]


@pytest.mark.parametrize("kind", ["claude", "openai"])
@pytest.mark.parametrize("reset", [False, True])
def test_connection_reset_mid_body(domain: st.Domain, kind: str, reset: bool) -> None:
    with _fake(kind) as server:
        whole = _texts_for(kind, "Delivered.")[0].body
        server.push(Cut(whole, keep=25, reset=reset), *_texts_for(kind, "Delivered.", "Bye."))
        assert runtime_details(trial(domain, _agent_for(kind, server, retries=1))) == []
        assert len(server.requests) == 3
        server.push(Cut(whole, keep=25, reset=reset), Cut(whole, keep=25, reset=reset))
        what = "dropped" if reset else "dropped in the middle of the response"
        assert runtime_details(trial(domain, _agent_for(kind, server, retries=1))) == [
            f"{kind} agent {'claude-test' if kind == 'claude' else 'gpt-test'}: connection to {server.host} {what} "
            "after 2 attempts"]


@pytest.mark.parametrize("kind", ["claude", "openai"])
def test_slow_server_within_the_timeout_is_not_a_hang(domain: st.Domain, kind: str) -> None:
    with _fake(kind) as server:
        first, second = _texts_for(kind, "Delivered.", "Bye.")
        # slow answers, well within the timeout: on a loaded machine (-n 2 on 2 cores) a
        # margin of 0.15 s was once not enough for the client to read a 0.35 s answer
        server.push(Delay(0.35, first), Delay(0.35, second))
        result = trial(domain, _agent_for(kind, server, timeout=2.0, retries=0))
        assert runtime_details(result) == []
        assert len(server.requests) == 2


@pytest.mark.parametrize("kind", ["claude", "openai"])
@pytest.mark.parametrize("headers", [False, True])
def test_trickling_server_is_bounded_per_attempt(domain: st.Domain, kind: str, headers: bool) -> None:
    with _fake(kind) as server:
        server.push(Trickle(0.05, headers=headers), Trickle(0.05, headers=headers))
        started = time.monotonic()
        result = trial(domain, _agent_for(kind, server, timeout=0.3, retries=1))
        elapsed = time.monotonic() - started
        model = "claude-test" if kind == "claude" else "gpt-test"
        assert runtime_details(result) == [
            f"{kind} agent {model}: no response from {server.host} within 0.3s after 2 attempts"]
        # both attempts reached the server: on a loaded machine its thread may take up the
        # second connection only after the client gave up on it (and then find it reset
        # before the request could be read), so count connections, waiting a little for them
        deadline = time.monotonic() + 3.0
        while server.connections < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.connections == 2 and 1 <= len(server.requests) <= 2
        assert 0.6 <= elapsed < 5.0  # two attempts of 0.3 s and a short backoff; a hang would be endless


@pytest.mark.parametrize("kind", ["claude", "openai"])
def test_server_that_accepts_and_never_reads(domain: st.Domain, kind: str) -> None:
    with Blackhole() as hole:
        if kind == "claude":
            agent: Any = ClaudeAgent("claude-test", AdapterOptions(timeout=0.3, retries=1), api_key=CLAUDE_KEY,
                                     base_url=f"http://{hole.host}")
        else:
            agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=0.3, retries=1,
                                                           agent_base_url=f"http://{hole.host}/v1"))
        started = time.monotonic()
        result = trial(domain, agent)
        assert time.monotonic() - started < 5.0
        model = "claude-test" if kind == "claude" else "gpt-test"
        assert runtime_details(result) == [f"{kind} agent {model}: no response from {hole.host} within 0.3s "
                                           "after 2 attempts"]


def test_within_abandons_an_attempt_that_ignores_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_retry, "GRACE", 0.1)

    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # e.g. closing a stalled connection, shielded
        return "never used"

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(_retry.TimedOut):
            await _retry.within(stubborn(), 0.2)
        return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert 0.25 <= elapsed < 3.0  # not the 10 s the attempt would take


# -- secrets ------------------------------------------------------------------------------------------


def _echo_auth(make: Any) -> Any:
    def step(req: Any) -> Any:
        return make(f"bad credentials in header Authorization: {req.headers.get('authorization')}")
    return step


@pytest.mark.parametrize("kind", ["claude", "openai"])
def test_key_never_leaks_when_the_server_echoes_the_authorization_header(
        domain: st.Domain, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = CLAUDE_KEY if kind == "claude" else OPENAI_KEY
    with _fake(kind) as server:
        if kind == "claude":
            server.push(_echo_auth(lambda m: claude_error(401, "authentication_error", m)))
            agent: Any = claude_agent(server)
        else:
            server.push(_echo_auth(lambda m: RawBody(m.encode(), 401, "text/plain")))
            agent = openai_agent(server, api_key=key)
        result = trial(domain, agent)
    [detail] = runtime_details(result)
    assert "Authorization: Bearer ***" in detail
    assert key not in json.dumps(result.to_dict())
    assert key not in caplog.text
    assert key not in repr(agent) and key not in repr(agent._api)
    assert key not in repr(vars(agent)) and key not in str(vars(agent._api).get("_clients"))


def test_credentials_in_the_base_url_are_never_shown(domain: st.Domain, oai: FakeOpenAI) -> None:
    url = f"http://bob:hunter22@{oai.host}/v1?api_key=qs-secret-99&api-version=2024"
    oai.push(lambda req: openai_error(500, f"cannot use {req.headers['authorization']} with {req.path}"))
    agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, retries=0, agent_base_url=url))
    result = trial(domain, agent)
    # httpx sends the URL's user and password as basic auth; the server quotes it and the URL back
    assert oai.requests[0].headers["authorization"] == "Basic Ym9iOmh1bnRlcjIy"
    assert runtime_details(result) == [f"openai agent gpt-test: HTTP 500 from {oai.host}: cannot use Basic *** with "
                                       "/v1/chat/completions?api_key=***&api-version=2024"]
    shown = repr(agent) + repr(agent._api) + json.dumps(result.to_dict())
    assert "hunter22" not in shown and "qs-secret-99" not in shown and "Ym9iOmh1bnRlcjIy" not in shown
