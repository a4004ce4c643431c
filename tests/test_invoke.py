"""Calling an agent within its deadline (engine.invoke): what reaches the trial, how many
event-loop iterations an answer costs (each one waits behind every other trial in
flight on the loop), and what happens to a call the trial stops waiting for."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

import pytest

from pytest_sandtable.engine.invoke import _AgentExit, invoke


async def _counting_iterations(call: Awaitable[Any]) -> tuple[Any, int]:
    """Await ``call`` while a ticker counts the loop's iterations: (its value, iterations
    from the call to the caller running again)."""
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)  # the ticker is running
    start = ticks
    try:
        value = await call
    finally:
        done = True
    iterations = ticks - start
    await task
    return value, iterations


def test_an_async_agents_answer_reaches_the_trial_in_two_loop_iterations() -> None:
    # one to start the agent's own task, one to wake the trial: no done-callback or
    # waiter hops in between (asyncio.wait took three)
    async def agent(turn: Any) -> str:
        return f"answer to {turn}"

    value, iterations = asyncio.run(_counting_iterations(invoke(agent, "hello", 10.0)))
    assert value == "answer to hello"
    assert iterations == 2


def test_an_inline_agent_costs_no_loop_iteration() -> None:
    class Inline:
        inline = True

        def __call__(self, turn: Any) -> str:
            return "at once"

    value, iterations = asyncio.run(_counting_iterations(invoke(Inline(), "x", 10.0)))
    assert (value, iterations) == ("at once", 0)


def test_a_sync_agent_answers_from_its_thread() -> None:
    def agent(turn: Any) -> str:
        return f"{threading.current_thread().name}: {turn}"

    assert asyncio.run(invoke(agent, "hi", 10.0)) == "sandtable-agent: hi"


def test_what_an_async_agent_raises_reaches_the_trial_as_itself() -> None:
    async def agent(turn: Any) -> str:
        raise ValueError("no such order")

    with pytest.raises(ValueError, match=r"^no such order$"):
        asyncio.run(invoke(agent, "x", 10.0))


def test_a_cancelled_error_the_agent_raises_itself_is_its_failure_not_a_cancellation() -> None:
    async def agent(turn: Any) -> str:
        raise asyncio.CancelledError()

    with pytest.raises(_AgentExit, match=r"^CancelledError\(\)$"):
        asyncio.run(invoke(agent, "x", 10.0))


def test_an_agent_that_ignores_its_cancellation_does_not_hold_the_trial_past_its_timeout() -> None:
    seen: list[str] = []

    async def main() -> None:
        release = asyncio.Event()

        async def stubborn(turn: Any) -> str:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled")
                await release.wait()  # goes on regardless
            seen.append("finished late")
            return "too late"

        with pytest.raises(asyncio.TimeoutError):
            await invoke(stubborn, "x", 0.05)
        await asyncio.sleep(0)
        assert seen == ["cancelled"]  # told to stop, still running: the trial did not wait for it
        release.set()
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert seen == ["cancelled", "finished late"]  # its late answer was dropped, never raised


def test_a_sync_agent_past_its_timeout_is_left_in_its_thread() -> None:
    release = threading.Event()
    finished = threading.Event()

    def hung(turn: Any) -> str:
        release.wait(30)
        finished.set()
        return "too late"

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await invoke(hung, "x", 0.05)
        assert not finished.is_set()
        release.set()
        assert finished.wait(10)
        await asyncio.sleep(0.01)  # its late answer reaches the loop and is dropped

    asyncio.run(main())


def test_cancelling_the_trial_cancels_the_agents_call() -> None:
    seen: list[str] = []

    async def main() -> None:
        started = asyncio.Event()

        async def slow(turn: Any) -> str:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("agent cancelled")
                raise
            return "never"

        trial = asyncio.ensure_future(invoke(slow, "x", 30.0))
        await started.wait()
        trial.cancel()
        with pytest.raises(asyncio.CancelledError):
            await trial
        await asyncio.sleep(0)

    asyncio.run(main())
    assert seen == ["agent cancelled"]


@pytest.mark.parametrize("kind", ["async", "sync", "inline"])
def test_the_answer_is_stamped_when_it_is_there_not_when_the_trial_resumes(kind: str) -> None:
    # with many trials on one loop, the trial resumes behind the others' work of that
    # iteration: that wait is the loop's, not the agent's latency (results.json's latency)
    import time

    async def async_agent(turn: Any) -> str:
        return "a"

    def sync_agent(turn: Any) -> str:
        return "s"

    class Inline:
        inline = True

        def __call__(self, turn: Any) -> str:
            return "i"

    agent = {"async": async_agent, "sync": sync_agent, "inline": Inline()}[kind]

    async def busy() -> None:
        await asyncio.sleep(0)  # the agent's call has started
        for _ in range(4):  # other trials' work, 0.1 s of it in each of the next iterations
            time.sleep(0.1)
            await asyncio.sleep(0)

    async def go() -> tuple[float, float, float]:
        answered: list[float] = []
        t0 = time.perf_counter()
        call = asyncio.ensure_future(invoke(agent, "x", 10.0, answered))
        other = asyncio.ensure_future(busy())
        await call
        resumed = time.perf_counter()
        await other
        return t0, answered[0], resumed

    t0, answered, resumed = asyncio.run(go())
    assert answered - t0 < 0.05
    assert resumed - t0 >= (0.1 if kind != "inline" else 0)  # an inline call runs in the caller's step


def test_a_sync_call_that_gives_an_awaitable_is_answered_when_that_is_done() -> None:
    # a functools.partial of an async agent, a lambda around one: not recognised as async,
    # so called in a thread, which gives back a coroutine the loop then awaits
    import time

    async def slow(turn: Any) -> str:
        await asyncio.sleep(0.2)
        return "late"

    def agent(turn: Any) -> Any:
        return slow(turn)

    async def go() -> tuple[str, float, float]:
        answered: list[float] = []
        t0 = time.perf_counter()
        value = await invoke(agent, "x", 10.0, answered)
        return value, t0, answered[-1]

    value, t0, answered = asyncio.run(go())
    assert value == "late"
    assert answered - t0 >= 0.2
