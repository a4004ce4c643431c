"""``run_trial``, the synchronous entry point (docs/agents.md, "A Python agent"): every call
in a thread runs on that thread's one event loop, so an async agent may keep what is bound
to the loop (a client's connection pool, a future, a queue) from one call to the next; a
trial of inline agents is driven straight through, its faults' latency still waited; and
from a running event loop it says what to do instead."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.loader import load_domain_text

DESK = """\
version: 1
name: desk
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, status: available }
tools:
  - name: book_load
    params: { load_id: { type: string } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
tasks:
  - id: book
    user: { opening: "Book L-1." }
    expect:
      state: [{ table: loads, key: L-1, fields: { status: booked } }]
    reference:
      - call: book_load
        args: { load_id: L-1 }
      - say: "Booked."
  - id: slow
    user: { opening: "Book L-1." }
    faults:
      - { tool: book_load, latency_ms: 150 }
    expect:
      state: [{ table: loads, key: L-1, fields: { status: booked } }]
    reference:
      - call: book_load
        args: { load_id: L-1 }
      - say: "Booked."
"""


@pytest.fixture
def desk() -> st.Domain:
    return load_domain_text(DESK, "desk.yaml")


class KeepsALoopBoundClient:
    """An async agent that keeps, from its first trial on, a client bound to the loop it
    was made on, as an ``httpx.AsyncClient``'s connections are: each answer arrives
    through that loop (a callback it runs resolves a future of its own)."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.client_loop: asyncio.AbstractEventLoop | None = None

    async def lookup(self) -> str:
        assert self.client_loop is not None
        answer: asyncio.Future[str] = self.client_loop.create_future()
        self.client_loop.call_later(0.005, answer.set_result, "L-1")
        return await answer

    async def __call__(self, turn: st.Turn) -> str:
        self.loops.append(asyncio.get_running_loop())
        if self.client_loop is None:
            self.client_loop = asyncio.get_running_loop()
        turn.call_tool("book_load", {"load_id": await self.lookup()})
        return "Booked."


def test_an_async_agent_keeps_its_loop_bound_clients_from_one_call_to_the_next(desk: st.Domain) -> None:
    agent = KeepsALoopBoundClient()
    results = [st.run_trial(desk, "book", agent, st.ScriptedUser()) for _ in range(3)]
    assert [(r.verdict, r.error) for r in results] == [("passed", None)] * 3
    assert len(agent.loops) == 3 and len(set(map(id, agent.loops))) == 1
    assert not agent.loops[0].is_closed() and not agent.loops[0].is_running()


def test_each_thread_has_its_own_loop_closed_when_the_thread_ends(desk: st.Domain) -> None:
    agents = [KeepsALoopBoundClient() for _ in range(2)]
    verdicts: list[str] = []

    def run(agent: KeepsALoopBoundClient) -> None:
        verdicts.extend(st.run_trial(desk, "book", agent, st.ScriptedUser()).verdict for _ in range(2))

    threads = [threading.Thread(target=run, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert verdicts == ["passed"] * 4
    first, second = (a.loops for a in agents)
    assert first[0] is first[1] and second[0] is second[1] and first[0] is not second[0]
    assert first[0].is_closed() and second[0].is_closed()


def test_from_a_running_event_loop_it_says_to_await_arun_trial(desk: st.Domain) -> None:
    async def inside() -> None:
        st.run_trial(desk, "book", st.ReferenceAgent(), st.ScriptedUser())

    with pytest.raises(RuntimeError) as e:
        asyncio.run(inside())
    assert str(e.value) == (
        "run_trial() cannot be called from a running event loop; await arun_trial(...) with the same arguments")


def _plain(r: st.TrialResult) -> dict[str, Any]:
    d = r.to_dict()
    for timing in ("duration", "latency", "started_at", "finished_at"):
        d.pop(timing, None)
    return d


@pytest.mark.parametrize("task", ["book", "slow"])
def test_an_inline_trial_gives_what_arun_trial_gives_and_waits_its_latency(desk: st.Domain, task: str) -> None:
    t0 = time.monotonic()
    result = st.run_trial(desk, task, st.ReferenceAgent(), st.ScriptedUser(), trial=2, k=3, run_seed=5)
    took = time.monotonic() - t0
    expected = asyncio.run(st.arun_trial(desk, task, st.ReferenceAgent(), st.ScriptedUser(), trial=2, k=3, run_seed=5))
    assert (result.verdict, result.error) == ("passed", None)
    assert _plain(result) == _plain(expected)
    if task == "slow":
        assert took >= 0.15  # the fault's latency_ms, waited on the thread's loop
