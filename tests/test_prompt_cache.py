"""Prompt caching of Claude agents and users: the ``cache_control`` breakpoints each request
carries (system, last tool, last history block; at most 4; none with the option off), and the
saving the terminal and report.html show from a server that reports cache reads and writes.
Against tests/fakes.py's FakeAnthropic through the real ``anthropic`` SDK."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fakes import (
    SHOP,
    FakeAnthropic,
    claude_message,
    claude_text,
    claude_thinking,
    claude_tools,
    claude_usage,
    shop_domain,
)

import pytest_sandtable as st
from pytest_sandtable.adapters.claude import MAX_CACHE_BREAKPOINTS, ClaudeAgent, cache_marked
from pytest_sandtable.adapters.model_user import START, ClaudeUser, user_system_prompt
from pytest_sandtable.adapters.options import AdapterOptions
from pytest_sandtable.report.usage import cache_saving, cache_saving_text

KEY = "sk-ant-test-c4c4e1"
MARK = {"type": "ephemeral"}
OPENING = "Hi, where is my order O-1001?"
ONLY_FIXED_OPENING = SHOP[: SHOP.index("tasks:")] + "tasks:\n" + SHOP[SHOP.index("  - id: opening-fixed"):]


@pytest.fixture
def claude() -> Any:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def domain(tmp_path: Path) -> st.Domain:
    return shop_domain(tmp_path)


def agent(server: FakeAnthropic, **options: Any) -> ClaudeAgent:
    return ClaudeAgent("claude-test", AdapterOptions(timeout=5.0, retries=1, **options), api_key=KEY,
                       base_url=server.base_url)


def marks(body: Any) -> list[str]:
    """Where a request body carries ``cache_control``, as paths (``tools[2]``,
    ``messages[1].content[0]``), in the order the prompt renders (tools, system, messages)."""
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            if "cache_control" in value:
                assert value["cache_control"] == MARK, path
                found.append(path)
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    for part in ("tools", "system", "messages"):
        walk(body.get(part), part)
    return found


def text(t: str, cached: bool = False) -> dict[str, Any]:
    return {"type": "text", "text": t, **({"cache_control": MARK} if cached else {})}


# -- the breakpoints a Claude agent's requests carry -----------------------------------------------


def test_agent_marks_the_tools_the_system_prompt_and_the_last_history_block(domain: st.Domain,
                                                                             claude: FakeAnthropic) -> None:
    claude.push(claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"})),
                claude_text("Your order O-1001 was delivered."), claude_text("Glad to help!"))
    result = st.run_trial(domain, "opening-fixed", agent(claude), st.ScriptedUser())
    assert result.verdict == "passed"
    first, second, third = claude.bodies
    # the system prompt as one text block with the breakpoint; the tools unchanged but the last
    assert first["system"] == [text(domain.system_prompt(), cached=True)]
    assert [t["name"] for t in first["tools"]] == ["get_order", "refund_order", "transfer_to_human"]
    assert first["tools"][-1]["cache_control"] == MARK
    assert first["messages"] == [{"role": "user", "content": [text(OPENING, cached=True)]}]
    # each call moves the history's breakpoint to its newest block; the earlier one is not kept
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "O-1001"}}
    assert second["messages"][:2] == [{"role": "user", "content": [text(OPENING)]},
                                      {"role": "assistant", "content": [tool_use]}]
    assert second["messages"][2]["content"][0]["cache_control"] == MARK
    assert third["messages"][-1] == {"role": "user", "content": [text("Thanks, that's all.", cached=True)]}
    expected = ["tools[2]", "system[0]"]
    assert [marks(b) for b in claude.bodies] == [
        [*expected, "messages[0].content[0]"],
        [*expected, "messages[2].content[0]"],
        [*expected, "messages[4].content[0]"],
    ]


def test_prompt_cache_off_sends_no_cache_control(domain: st.Domain, claude: FakeAnthropic) -> None:
    claude.push(claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"})),
                claude_text("Your order O-1001 was delivered."), claude_text("Glad to help!"))
    st.run_trial(domain, "opening-fixed", agent(claude, prompt_cache=False), st.ScriptedUser())
    assert len(claude.requests) == 3
    assert all("cache_control" not in r.body.decode() for r in claude.requests)
    assert claude.bodies[0]["system"] == domain.system_prompt()
    assert claude.bodies[0]["messages"] == [{"role": "user", "content": [text(OPENING)]}]


def test_many_tool_calls_in_one_response_add_a_fourth_breakpoint_on_the_previous_one(
        domain: st.Domain, claude: FakeAnthropic) -> None:
    """Nine calls and their results are 18 blocks: more than the API's lookback finds the
    previous request's cache entry from, so that entry gets a breakpoint of its own."""
    calls = [(f"toolu_{i}", "get_order", {"order_id": "O-1001"}) for i in range(1, 10)]
    claude.push(claude_tools(*calls, text="Checking."), claude_text("Delivered."), claude_text("Bye."))
    st.run_trial(domain, "opening-fixed", agent(claude), st.ScriptedUser())
    second, third = claude.bodies[1], claude.bodies[2]
    assert marks(second) == ["tools[2]", "system[0]", "messages[0].content[0]", "messages[2].content[8]"]
    assert second["messages"][0]["content"] == [text(OPENING, cached=True)]
    # the next call is close to the one before it again: three breakpoints
    assert marks(third) == ["tools[2]", "system[0]", "messages[4].content[0]"]
    assert max(len(marks(b)) for b in claude.bodies) == MAX_CACHE_BREAKPOINTS == 4


def test_the_history_breakpoint_skips_thinking_and_empty_text(domain: st.Domain, claude: FakeAnthropic) -> None:
    """A paused turn goes back as it came (the history ends with the model's own blocks):
    the breakpoint lands on its last block that may carry one, never on thinking."""
    claude.push(claude_message([text("Let me see."), claude_thinking("hmm"), text("")], "pause_turn"),
                claude_text("Delivered."), claude_text("Bye."))
    st.run_trial(domain, "opening-fixed", agent(claude), st.ScriptedUser())
    assert claude.bodies[1]["messages"][1]["content"] == [text("Let me see.", cached=True), claude_thinking("hmm"),
                                                          text("")]
    assert marks(claude.bodies[1])[2:] == ["messages[1].content[0]"]


def test_cache_marked_leaves_what_it_is_given_alone() -> None:
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": [claude_thinking("x")]}]
    params = {"system": "be kind", "tools": [{"name": "a"}, {"name": "b"}], "messages": history}
    before = json.dumps(params)
    out = cache_marked(params)
    assert json.dumps(params) == before
    assert out == {"system": [text("be kind", cached=True)],
                   "tools": [{"name": "a"}, {"name": "b", "cache_control": MARK}],
                   "messages": [{"role": "user", "content": [text("hello", cached=True)]}, history[1]]}
    # nothing to mark: no system, no tools, only thinking
    assert cache_marked({"messages": [history[1]]}) == {"messages": [history[1]]}


# -- the simulated user -----------------------------------------------------------------------------


def user_turn(messages: list[dict[str, str]]) -> st.UserTurn:
    return st.UserTurn(messages=messages, persona="Ada Quill.", instructions="You want a refund.", opening=None,
                       script=[], trial=st.TrialInfo("shop", "refund-delivered", 1, 1, 1), state={}, handed_off=False)


@pytest.mark.parametrize("on", [True, False])
def test_claude_user_marks_its_system_prompt_and_last_message(claude: FakeAnthropic, on: bool) -> None:
    claude.push(claude_text("Thanks!\n###GOAL_MET###"))
    user = ClaudeUser("claude-test", AdapterOptions(timeout=5.0, retries=1, prompt_cache=on), api_key=KEY,
                      base_url=claude.base_url)
    turn = user_turn([{"role": "user", "content": "I want a refund."},
                      {"role": "assistant", "content": "Done: 42.50 is refunded."}])
    asyncio.run(user(turn))
    body = claude.bodies[0]
    if not on:
        assert "cache_control" not in claude.requests[0].body.decode()
        assert body["system"] == user_system_prompt(turn)
        return
    assert body["system"] == [text(user_system_prompt(turn), cached=True)]
    assert body["messages"] == [
        {"role": "user", "content": START},
        {"role": "assistant", "content": "I want a refund."},
        {"role": "user", "content": [text("Done: 42.50 is refunded.", cached=True)]},
    ]
    assert marks(body) == ["system[0]", "messages[2].content[0]"]


# -- the option -------------------------------------------------------------------------------------


def test_a_bad_prompt_cache_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", shop=ONLY_FIXED_OPENING)
    result = pytester.runpytest("--sandtable-prompt-cache=maybe", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sandtable-prompt-cache / sandtable_prompt_cache: "
                                 "expected on or off, got 'maybe'"])


PRICES = "claude-test: {input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75}\n"


def push_cached_conversation(server: FakeAnthropic) -> None:
    """Three calls of one trial, as a server with a warm prompt cache reports them."""
    server.push(
        claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"}), usage=claude_usage(2000, 50, 0, 10000)),
        claude_text("Your order O-1001 was delivered.", claude_usage(100, 20, 10000, 150)),
        claude_text("Glad to help!", claude_usage(50, 10, 10150, 80)),
    )


SAVING = "prompt cache: 20,150 input tokens read from cache, 10,230 written to it, saving $0.0467 (47.9% of input cost)"


def test_cache_reads_and_writes_show_in_results_and_the_saving_in_the_terminal(
        pytester: pytest.Pytester, claude: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
    pytester.makefile(".sandtable.yaml", shop=ONLY_FIXED_OPENING)
    pytester.makefile(".yaml", prices=PRICES)
    push_cached_conversation(claude)
    result = pytester.runpytest("--sandtable-agent=claude:claude-test", "--sandtable-prices=prices.yaml",
                                "--sandtable-out=out", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # read 20,150 x (3.00 - 0.30) - written 10,230 x (3.75 - 3.00) = $0.0467325 saved, of
    # (2,150 + 20,150 + 10,230) x 3.00 = $0.09759 of input at the plain price: 47.9%
    result.stdout.fnmatch_lines([
        "Usage (cost estimated at list prices)",
        "side    model          input    output    cache read    cache write     cost",
        "------  -----------  -------  --------  ------------  -------------  -------",
        "agent   claude-test    2,150        80        20,150         10,230  $0.0521",
        SAVING,
    ])
    assert [len(marks(b)) for b in claude.bodies] == [3, 3, 3]
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    assert doc["trials"][0]["usage"]["agent"] == {
        "claude-test": {"input": 2150, "output": 80, "cache_read": 20150, "cache_write": 10230, "calls": 3}}
    saving = doc["summary"]["cost"]["cache_saving"]
    assert saving == {"cache_read": 20150, "cache_write": 10230, "saved": pytest.approx(0.0467325),
                      "input_share": pytest.approx(46732.5 / 97590)}
    html = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert ("<dt>prompt cache</dt><dd>20,150 input tokens read from cache, 10,230 written to it, "
            "saving $0.0467 (47.9% of input cost)</dd>") in html


def test_prompt_cache_off_from_the_ini_sends_no_marks_and_shows_no_saving(
        pytester: pytest.Pytester, claude: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
    pytester.makefile(".sandtable.yaml", shop=ONLY_FIXED_OPENING)
    pytester.makeini("[pytest]\nsandtable_prompt_cache = off\n")
    claude.push(claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"})),
                claude_text("Your order O-1001 was delivered."), claude_text("Glad to help!"))
    result = pytester.runpytest("--sandtable-agent=claude:claude-test", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert len(claude.requests) == 3
    assert all("cache_control" not in r.body.decode() for r in claude.requests)
    assert "prompt cache:" not in result.stdout.str()


# -- the saving, worked out -------------------------------------------------------------------------

PRICED = {"claude-test": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}


def usage(**counts: int) -> dict[str, Any]:
    return {"agent": {"claude-test": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "calls": 1,
                                      **counts}}, "user": {}}


def test_no_cache_use_no_saving() -> None:
    assert cache_saving(usage(input=1000), PRICED) is None
    assert cache_saving_text({"currency": "USD"}) is None


def test_writes_without_reads_cost_more() -> None:
    saving = cache_saving(usage(input=1000, cache_write=4000), PRICED)
    assert saving == {"cache_read": 0, "cache_write": 4000, "saved": pytest.approx(-0.003),
                      "input_share": pytest.approx(-0.2)}
    assert cache_saving_text({"cache_saving": saving}) == (
        "0 input tokens read from cache, 4,000 written to it, costing $0.0030 more than without it "
        "(20.0% more input cost)")


def test_a_model_without_a_price_has_no_saving_in_money() -> None:
    saving = cache_saving(usage(cache_read=5000), {})
    assert saving == {"cache_read": 5000, "cache_write": 0, "saved": None, "input_share": None}
    assert cache_saving_text({"cache_saving": saving}) == (
        "5,000 input tokens read from cache, saving n/a (no price for the models that used it)")


@pytest.mark.parametrize("cost", [None, "n/a", [], {"cache_saving": "lots"}, {"cache_saving": {"cache_read": -1}},
                                  {"cache_saving": {"cache_read": True, "cache_write": 0}}])
def test_a_malformed_saving_in_results_shows_nothing(cost: Any) -> None:
    assert cache_saving_text(cost) is None
