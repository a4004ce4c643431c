"""A sync agent's asyncio client keeps working turn after turn (engine.invoke keeps one
event loop per agent thread for the whole run), against fake model servers that keep
their connections alive as the real APIs do; an asyncio client used on a loop other
than its own errors the trial as a harness wiring problem, with the fix, and never
fails it as the agent's fault."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fakes import SHOP, FakeAnthropic, FakeOpenAI, claude_text, openai_text, shop_domain

from pytest_sandtable import run_trial
from pytest_sandtable.engine.invoke import invoke
from pytest_sandtable.engine.scripted_user import ScriptedUser

pytest_plugins = ["pytester"]

LONG_CHAT = SHOP + """\
  - id: long-chat
    max_turns: 4
    user:
      persona: Ada Quill, a regular customer.
      instructions: You want to know the status of order O-1001.
      opening: "Hi, where is my order O-1001?"
      script: ["When will it come?", "Is it paid?", "Thanks, that's all."]
    expect:
      called: [get_order]
"""

WIRING = (
    "an asyncio client was made on another event loop than the one it is used on (RuntimeError: ... "
    "is bound to a different event loop). Make the client on the loop that calls it: once per trial, kept "
    "in turn.state, or at import for a sync agent that reaches its thread's loop with "
    "asyncio.get_event_loop() (each agent thread keeps one event loop for the whole run; asyncio.run() "
    "makes a new one every call). An async agent runs on the run's loop: not a client warmed up in an "
    "async fixture on pytest-asyncio's loop (docs/agents.md, \"Event loops\")"
)


def _thread_loop() -> asyncio.AbstractEventLoop:
    """The thread's current loop, made when there is none: what ``Runner.run_sync`` of the
    OpenAI Agents SDK does."""
    try:
        return asyncio.get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop


def test_the_fakes_keep_connections_alive_when_asked() -> None:
    with FakeOpenAI(responder=lambda r: openai_text("hi"), keep_alive=True) as srv, httpx.Client() as client:
        for _ in range(3):
            assert client.post(srv.base_url + "/chat/completions", json={}).status_code == 200
    assert (len(srv.requests), srv.connections) == (3, 1)


def test_a_sync_agents_module_level_async_anthropic_client_works_on_every_turn(tmp_path: Path) -> None:
    domain = shop_domain(tmp_path, LONG_CHAT)
    with FakeAnthropic(responder=lambda r: claude_text("It ships on Monday."), keep_alive=True) as srv:
        client = anthropic.AsyncAnthropic(api_key="test-key", base_url=srv.base_url, max_retries=0)

        def agent(turn: Any) -> str:
            turn.call_tool("get_order", {"order_id": "O-1001"})
            message = _thread_loop().run_until_complete(client.messages.create(
                model="claude-test", max_tokens=64, messages=turn.messages))
            return str(message.content[0].text)

        result = run_trial(domain, "long-chat", agent, ScriptedUser(), trial_timeout=20)
    assert (result.verdict, result.error, result.turns) == ("passed", None, 4)
    assert (len(srv.requests), srv.connections) == (4, 1)  # one kept connection, one loop


def test_a_sync_agent_on_get_event_loop_with_a_module_level_async_openai_client(tmp_path: Path) -> None:
    domain = shop_domain(tmp_path, LONG_CHAT)
    with FakeOpenAI(responder=lambda r: openai_text("It ships on Monday."), keep_alive=True) as srv:
        client = openai.AsyncOpenAI(api_key="test-key", base_url=srv.base_url, max_retries=0)

        def agent(turn: Any) -> str:
            turn.call_tool("get_order", {"order_id": "O-1001"})
            completion = asyncio.get_event_loop().run_until_complete(client.chat.completions.create(
                model="gpt-test", messages=turn.messages))
            return str(completion.choices[0].message.content)

        results = [run_trial(domain, "long-chat", agent, ScriptedUser(), trial=i, trial_timeout=20)
                   for i in (1, 2)]
    assert [(r.verdict, r.error, r.turns) for r in results] == [("passed", None, 4)] * 2
    assert (len(srv.requests), srv.connections) == (8, 1)  # the second trial found the same loop


def test_one_thread_and_loop_per_agent_thread_kept_even_after_asyncio_run() -> None:
    seen: list[tuple[str, int, int]] = []

    def agent(turn: Any) -> str:
        loop = _thread_loop()
        seen.append((threading.current_thread().name, threading.get_ident(), id(loop)))
        asyncio.run(asyncio.sleep(0))  # an agent's asyncio.run() unsets the thread's loop when it returns
        return "ok"

    async def turns() -> None:
        for _ in range(3):
            assert await invoke(agent, None, 10.0) == "ok"

    asyncio.run(turns())
    assert len(set(seen)) == 1 and seen[0][0] == "sandtable-agent"


def test_a_hung_sync_agent_holds_its_thread_and_the_next_call_takes_another() -> None:
    release = threading.Event()
    hung_on: list[int] = []

    def hung(turn: Any) -> str:
        hung_on.append(threading.get_ident())
        release.wait(10)
        return "late"

    def quick(turn: Any) -> int:
        return threading.get_ident()

    async def calls() -> int:
        with pytest.raises(asyncio.TimeoutError):
            await invoke(hung, None, 0.05)
        try:
            return int(await invoke(quick, None, 10.0))
        finally:
            release.set()

    assert asyncio.run(calls()) not in {threading.get_ident(), *hung_on}


def test_a_client_warmed_on_another_loop_errors_the_trial_as_a_wiring_problem(tmp_path: Path) -> None:
    domain = shop_domain(tmp_path, LONG_CHAT)
    with FakeAnthropic(responder=lambda r: claude_text("It ships on Monday."), keep_alive=True) as srv:
        client = anthropic.AsyncAnthropic(api_key="test-key", base_url=srv.base_url, max_retries=0)

        async def ask() -> str:
            message = await client.messages.create(model="claude-test", max_tokens=8,
                                                   messages=[{"role": "user", "content": "warm up"}])
            return str(message.content[0].text)

        fixture_loop = asyncio.new_event_loop()  # as an async fixture on pytest-asyncio's loop warms it
        fixture_loop.run_until_complete(ask())

        async def agent(turn: Any) -> str:
            turn.call_tool("get_order", {"order_id": "O-1001"})
            return await ask()

        result = run_trial(domain, "long-chat", agent, ScriptedUser(), trial_timeout=20)
        fixture_loop.close()
    assert (result.verdict, result.ended_by, result.turns) == ("errored", "harness_error", 1)
    assert result.error == f"harness wiring problem, not the agent's failure: {WIRING}"
    assert not [c for c in result.checks if c.kind == "runtime"]  # nothing is held against the agent


def test_a_simulated_users_cross_loop_client_errors_the_trial_as_a_wiring_problem(tmp_path: Path) -> None:
    domain = shop_domain(tmp_path)
    with FakeOpenAI(responder=lambda r: openai_text("Where is O-1001?"), keep_alive=True) as srv:
        client = openai.AsyncOpenAI(api_key="test-key", base_url=srv.base_url, max_retries=0)

        async def ask() -> str:
            completion = await client.chat.completions.create(model="gpt-test",
                                                              messages=[{"role": "user", "content": "hi"}])
            return str(completion.choices[0].message.content)

        other = asyncio.new_event_loop()
        other.run_until_complete(ask())

        async def user(ut: Any) -> str:
            return await ask()

        result = run_trial(domain, "refund-delivered", lambda turn: "ok", user, trial_timeout=20)
        other.close()
    assert (result.verdict, result.error) == (
        "errored", f"harness wiring problem, not the simulated user's failure: {WIRING}")


AGENT_MODULE = '''
import asyncio
import os

import anthropic

# made at import, as a team's agent module does
CLIENT = anthropic.AsyncAnthropic(api_key="test-key", base_url=os.environ["FAKE_ANTHROPIC_URL"], max_retries=0)


def agent(turn):
    turn.call_tool("get_order", {"order_id": "O-1001"})
    message = asyncio.get_event_loop().run_until_complete(CLIENT.messages.create(
        model="claude-test", max_tokens=64, messages=turn.messages))
    return message.content[0].text
'''


def test_a_module_agent_with_a_client_made_at_import_passes_every_trial_of_a_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "shop.sandtable.yaml").write_text(LONG_CHAT, encoding="utf-8")
    pytester.makepyfile(desk_agent=AGENT_MODULE)
    monkeypatch.syspath_prepend(str(pytester.path))
    with FakeAnthropic(responder=lambda r: claude_text("It ships on Monday."), keep_alive=True) as srv:
        monkeypatch.setenv("FAKE_ANTHROPIC_URL", srv.base_url)
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-k", "long-chat",
                                    "--sandtable-agent=desk_agent:agent", "--sandtable-k=3")
    result.assert_outcomes(passed=3)
    assert (len(srv.requests), srv.connections) == (12, 1)


def test_docs_agents_md_shows_the_wiring_message_verbatim() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "agents.md").read_text(encoding="utf-8")
    assert f"harness wiring problem, not the agent's failure: {WIRING}\n" in docs
    assert "### Event loops\n" in docs


WARMED_FIXTURE = '''
import asyncio
import os

import anthropic
import pytest


@pytest.fixture(scope="session")
def sandtable_agent():
    client = anthropic.AsyncAnthropic(api_key="test-key", base_url=os.environ["FAKE_ANTHROPIC_URL"], max_retries=0)
    warm_up = asyncio.new_event_loop()  # as an async fixture on pytest-asyncio's loop would
    warm_up.run_until_complete(client.messages.create(
        model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "warm up"}]))

    async def agent(turn):
        message = await client.messages.create(model="claude-test", max_tokens=64, messages=turn.messages)
        return message.content[0].text

    yield agent
    warm_up.close()
'''


def test_a_fixture_client_warmed_on_another_loop_errors_the_trial_with_the_fix(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "shop.sandtable.yaml").write_text(LONG_CHAT, encoding="utf-8")
    pytester.makeconftest(WARMED_FIXTURE)
    with FakeAnthropic(responder=lambda r: claude_text("It ships on Monday."), keep_alive=True) as srv:
        monkeypatch.setenv("FAKE_ANTHROPIC_URL", srv.base_url)
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-k", "long-chat")
    result.assert_outcomes(errors=1, deselected=2)
    lines = result.stdout.lines
    assert "long-chat trial 1 of 1 errored (seed 2272531136, ended by harness_error after 1 agent turn)" in lines
    assert f"  errored: harness wiring problem, not the agent's failure: {WIRING}" in lines
    assert f"  long-chat[1]: harness wiring problem, not the agent's failure: {WIRING}" in lines
