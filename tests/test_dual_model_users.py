"""Dual control (issue 22, part A): the Claude and OpenAI-compatible simulated users get
the domain's user tools, act one call at a time, at most 8 calls a turn, then write their
message. Against the fake servers of tests/fakes.py, through the real SDKs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes import FakeAnthropic, FakeOpenAI, claude_text, claude_tools, openai_text, openai_tools
from test_dual_control import DESK

import pytest_sandtable as st
from conftest import Playbook
from pytest_sandtable.adapters.model_user import NO_MORE_ACTIONS, ONE_AT_A_TIME, ClaudeUser, OpenAIUser
from pytest_sandtable.adapters.options import AdapterOptions

KEY = "sk-test-dual-user-51c"
AGENT = Playbook("Please turn airplane mode off, then check the status bar.")


@pytest.fixture
def desk(make_domain: Callable[[str], st.Domain]) -> st.Domain:
    return make_domain(DESK)


@pytest.fixture
def oai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def claude() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def test_an_openai_user_calls_its_tools_one_at_a_time(desk: st.Domain, oai: FakeOpenAI) -> None:
    oai.push(
        openai_tools(("c1", "toggle_airplane_mode", {"on": False}), ("c2", "check_status_bar", {})),
        openai_tools(("c3", "check_status_bar", {})),
        openai_text("Done, the plane is gone. ###GOAL_MET###"),
    )
    user = OpenAIUser("gpt-test", AdapterOptions(timeout=5.0, retries=1, user_base_url=oai.base_url), api_key=KEY)
    r = st.run_trial(desk, "airplane", AGENT, user)
    assert (r.verdict, r.ended_by) == ("passed", "goal_met")
    assert [(c["tool"], c["args"], c.get("by")) for c in r.calls] == [
        ("toggle_airplane_mode", {"on": False}, "user"), ("check_status_bar", {}, "user")]
    assert [t["function"]["name"] for t in oai.bodies[0]["tools"]] == ["check_status_bar", "toggle_airplane_mode"]
    phone = '{"id": "phone", "airplane_mode": false, "mobile_data": true}'
    assert [m for m in oai.bodies[2]["messages"] if m["role"] == "tool"] == [
        {"role": "tool", "tool_call_id": "c1", "content": phone},
        {"role": "tool", "tool_call_id": "c2", "content": ONE_AT_A_TIME},
        {"role": "tool", "tool_call_id": "c3", "content": phone},
    ]
    assert r.transcript[-2:] == [{"role": "user", "text": "Done, the plane is gone.", "turn": 1},
                                 {"role": "agent", "text": "", "turn": 2}]


def test_a_claude_user_stops_acting_after_8_calls_and_writes_its_message(desk: st.Domain,
                                                                        claude: FakeAnthropic) -> None:
    claude.push(*[claude_tools((f"t{i}", "check_status_bar", {})) for i in range(9)],
                claude_text("I looked nine times. ###GOAL_MET###"))
    user = ClaudeUser("claude-test", AdapterOptions(timeout=5.0, retries=1, prompt_cache=False), api_key=KEY,
                      base_url=claude.base_url)
    r = st.run_trial(desk, "airplane", AGENT, user)
    assert (r.verdict, r.ended_by) == ("failed", "goal_met")  # the plane is still on
    assert [(c["tool"], c.get("by")) for c in r.calls] == [("check_status_bar", "user")] * 8
    assert [t["name"] for t in claude.bodies[0]["tools"]] == ["check_status_bar", "toggle_airplane_mode"]
    last: list[dict[str, Any]] = claude.bodies[-1]["messages"][-1]["content"]
    assert last == [{"type": "tool_result", "tool_use_id": "t8", "content": NO_MORE_ACTIONS, "is_error": True}]
    first = claude.bodies[1]["messages"][-1]["content"][0]
    assert json.loads(first["content"]) == {"id": "phone", "airplane_mode": True, "mobile_data": True}


def test_an_openai_user_is_told_of_its_device_and_what_it_did_in_earlier_turns(desk: st.Domain,
                                                                               oai: FakeOpenAI) -> None:
    oai.push(
        openai_tools(("c1", "toggle_airplane_mode", {"on": False})),
        openai_text("I turned it off. What now?"),
        openai_text("It works. ###GOAL_MET###"),
    )
    user = OpenAIUser("gpt-test", AdapterOptions(timeout=5.0, retries=1, user_base_url=oai.base_url), api_key=KEY)
    r = st.run_trial(desk, "airplane", Playbook("Turn airplane mode off.", "Now try a web page."), user)
    assert (r.verdict, r.ended_by) == ("passed", "goal_met")
    first, last = oai.bodies[0]["messages"][0]["content"], oai.bodies[2]["messages"][0]["content"]
    assert first.endswith("Do not act unless it helps your goal.")
    assert last.endswith('What you did on it so far, oldest first:\n- toggle_airplane_mode({"on": false}) -> '
                         '{"id": "phone", "airplane_mode": false, "mobile_data": true}')
