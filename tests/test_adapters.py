"""Claude and OpenAI-compatible agents against local fake servers: the wire format, a full
trial with a model user, every fault, and that keys never leak. No key, no internet."""

from __future__ import annotations

import email.utils
import json
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from fakes import (
    SHOP,
    Drop,
    FakeAnthropic,
    FakeOpenAI,
    Hang,
    RawBody,
    Reply,
    claude_error,
    claude_message,
    claude_text,
    claude_tools,
    claude_usage,
    openai_error,
    openai_text,
    openai_tools,
    openai_usage,
    runtime_details,
    shop_domain,
)

import pytest_sandtable as st
from pytest_sandtable._agents import make_agent
from pytest_sandtable._options import AdapterOptions
from pytest_sandtable._users import make_user
from pytest_sandtable.adapters._retry import backoff, parse_retry_after
from pytest_sandtable.adapters.claude import ClaudeAgent
from pytest_sandtable.adapters.model_user import START
from pytest_sandtable.adapters.openai import OpenAIAgent

CLAUDE_KEY = "sk-ant-test-4b1d9e"
OPENAI_KEY = "sk-test-user-7c2e51"


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
    options = AdapterOptions(user_base_url=oai.base_url, temperature=0.3, timeout=5.0, retries=1, run_seed=7)
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
    assert time.monotonic() - started < 3.0
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
         "bad response from {host}: body is not JSON: '<html>gateway</html>'"),
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
    assert time.monotonic() - started < 3.0
    assert runtime_details(result) == [f"openai agent gpt-test: no response from {oai.host} within 0.5s"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (RawBody(b"<html>bad gateway</html>", content_type="text/html"),
         "bad response from {host} (HTTP 200): body is not JSON: '<html>bad gateway</html>'"),
        (Reply({"id": "x", "object": "chat.completion"}), "bad response from {host}: 'choices' is missing"),
        (Reply({"choices": []}), "bad response from {host}: 'choices' must be a non-empty array"),
        (Reply({"choices": [{"message": {"content": 5}}]}),
         "bad response from {host}: choices[0].message.content must be a string, got number"),
        (Reply({"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]}),
         "bad response from {host}: choices[0].message.tool_calls[0].function.name must be a string"),
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


def test_backoff_grows_with_jitter_and_a_cap() -> None:
    for retry, low, high in [(1, 0.25, 0.5), (2, 0.5, 1.0), (3, 1.0, 2.0), (5, 4.0, 8.0), (9, 4.0, 8.0)]:
        waits = [backoff(retry) for _ in range(200)]
        assert low <= min(waits) and max(waits) <= high
        assert len(set(waits)) > 1


# -- specs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("claud:x", "cannot import module 'claud' for agent 'claud:x': No module named 'claud'"),
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
