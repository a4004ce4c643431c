"""The simulated clock reaches the agent (issue 23): a Python agent reads ``turn.now``,
the very instant its handlers read as ``ctx.now``; an HTTP agent gets it as ``now``
in each step; the Claude and OpenAI agents' system prompt says "Today is ...". Only
when the domain or the task declares a ``clock``: without one the agent is told no
time (the default clock handlers run on is a placeholder, not a date the domain means)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes import SHOP, FakeAnthropic, FakeOpenAI, FakeStepService, claude_text, openai_text, shop_domain, step_reply

import pytest_sandtable as st
from pytest_sandtable.adapters.claude import ClaudeAgent
from pytest_sandtable.adapters.http_agent import HttpStepAgent
from pytest_sandtable.adapters.openai import OpenAIAgent
from pytest_sandtable.adapters.options import AdapterOptions

HANDLERS = '''\
def stamp(args, world, ctx):
    seen = ctx.now.isoformat()
    ctx.advance(3600)
    return {"seen": seen, "after": ctx.now.isoformat()}
'''

CLOCKED = SHOP.replace(
    "description: Order desk", 'clock: { now: "2024-05-15T15:00:00Z" }\ndescription: Order desk'
).replace(
    "  - name: transfer_to_human\n",
    "  - name: stamp\n    description: The time, then an hour later.\n    handler: clock_handlers:stamp\n"
    "  - name: transfer_to_human\n",
).replace(
    "  - id: opening-fixed\n    max_turns: 3\n",
    '  - id: opening-fixed\n    max_turns: 3\n    clock: { now: "2024-06-03T09:30:00-05:00" }\n',
) + """\
  - id: what-time
    max_turns: 1
    user: { opening: "What time is it?" }
"""


@pytest.fixture(scope="module")
def clocked(tmp_path_factory: pytest.TempPathFactory) -> st.Domain:
    folder = tmp_path_factory.mktemp("clocked")  # one folder: its handler module is imported once
    (folder / "clock_handlers.py").write_text(HANDLERS, encoding="utf-8")
    return shop_domain(folder, CLOCKED)


class ClockReader:
    """Reads turn.now, calls `stamp` (whose handler reads ctx.now, then advances it an
    hour), reads turn.now again."""

    def __init__(self) -> None:
        self.seen: list[tuple[datetime | None, Any, datetime | None]] = []

    def __call__(self, turn: st.Turn) -> str:
        before = turn.now
        result = turn.call_tool("stamp", {})
        self.seen.append((before, result.value, turn.now))
        return "Done."


def test_a_python_agent_reads_the_clock_its_handlers_read(clocked: st.Domain) -> None:
    agent = ClockReader()
    st.run_trial(clocked, "what-time", agent, st.ScriptedUser())
    [(before, handler, after)] = agent.seen
    assert before is not None and after is not None
    assert (before.isoformat(), after.isoformat()) == (handler["seen"], handler["after"])
    assert handler == {"seen": "2024-05-15T15:00:00+00:00", "after": "2024-05-15T16:00:00+00:00"}
    assert before.tzinfo is not None


def test_a_task_s_own_clock_wins(clocked: st.Domain) -> None:
    agent = ClockReader()
    st.run_trial(clocked, "opening-fixed", agent, st.ScriptedUser())
    # two turns: the second starts where the first turn's handler left the clock
    assert [(b.isoformat() if b else None, h["seen"]) for b, h, _ in agent.seen] == [
        ("2024-06-03T09:30:00-05:00", "2024-06-03T09:30:00-05:00"),
        ("2024-06-03T10:30:00-05:00", "2024-06-03T10:30:00-05:00"),
    ]


def test_without_a_clock_the_agent_is_told_no_time(tmp_path: Path) -> None:
    seen: list[datetime | None] = []

    def agent(turn: st.Turn) -> str:
        seen.append(turn.now)
        return "Hello."

    st.run_trial(shop_domain(tmp_path), "opening-fixed", agent, st.ScriptedUser())
    assert seen == [None, None]


def test_the_http_agent_s_step_carries_now(clocked: st.Domain) -> None:
    with FakeStepService() as svc:
        svc.push(step_reply("O-1001 was delivered."), step_reply("Bye!"))
        agent = HttpStepAgent(svc.url, AdapterOptions(timeout=5.0, retries=0))
        st.run_trial(clocked, "opening-fixed", agent, st.ScriptedUser())
    assert [b.get("now") for b in svc.bodies] == ["2024-06-03T09:30:00-05:00", "2024-06-03T09:30:00-05:00"]


def test_the_http_agent_s_step_has_no_now_without_a_clock(tmp_path: Path) -> None:
    with FakeStepService() as svc:
        svc.push(step_reply("O-1001 was delivered."), step_reply("Bye!"))
        agent = HttpStepAgent(svc.url, AdapterOptions(timeout=5.0, retries=0))
        st.run_trial(shop_domain(tmp_path), "opening-fixed", agent, st.ScriptedUser())
    assert ["now" in b for b in svc.bodies] == [False, False]


def test_the_claude_agent_s_system_prompt_says_today(clocked: st.Domain, tmp_path: Path) -> None:
    with FakeAnthropic() as server:
        server.push(claude_text("O-1001 was delivered."), claude_text("Bye!"))
        agent = ClaudeAgent("claude-test", AdapterOptions(timeout=5.0, retries=0), api_key="sk-ant-test-0000",
                            base_url=server.base_url)
        st.run_trial(clocked, "opening-fixed", agent, st.ScriptedUser())
    systems = [b["system"][0]["text"] for b in server.bodies]
    assert systems == [clocked.system_prompt() + "\n\nToday is Monday 2024-06-03; the time is 09:30 (UTC-05:00)."] * 2


def test_the_claude_agent_s_system_prompt_is_the_domain_s_without_a_clock(tmp_path: Path) -> None:
    domain = shop_domain(tmp_path)
    with FakeAnthropic() as server:
        server.push(claude_text("O-1001 was delivered."), claude_text("Bye!"))
        agent = ClaudeAgent("claude-test", AdapterOptions(timeout=5.0, retries=0), api_key="sk-ant-test-0000",
                            base_url=server.base_url)
        st.run_trial(domain, "opening-fixed", agent, st.ScriptedUser())
    assert [b["system"][0]["text"] for b in server.bodies] == [domain.system_prompt()] * 2


def test_the_openai_agent_s_system_message_says_today(clocked: st.Domain) -> None:
    with FakeOpenAI() as server:
        server.push(openai_text("It is three o'clock."))
        agent = OpenAIAgent("gpt-test", AdapterOptions(timeout=5.0, retries=0, agent_base_url=server.base_url),
                            api_key="sk-test-0000")
        st.run_trial(clocked, "what-time", agent, st.ScriptedUser())
    first = server.bodies[0]["messages"][0]
    assert first == {"role": "system", "content": clocked.system_prompt() + "\n\nToday is Wednesday 2024-05-15; "
                     "the time is 15:00 (UTC)."}
