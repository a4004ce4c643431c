"""Calling an agent or a simulated user within a trial's deadline.

Async ones run on the trial's event loop; sync ones in a daemon thread, so that a
hung one times out and the run goes on; those that say they never block (see
:func:`~.api.runs_inline`) run inline. SystemExit and KeyboardInterrupt they raise
come back as :class:`_AgentExit`, and :func:`agent_traceback` keeps only the
agent's own frames of a traceback.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import threading
import time
import traceback
from typing import Any

from .api import runs_inline

# frames of ours and of the machinery that calls agents are not the agent's
_NOT_THE_AGENTS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
    os.path.abspath(threading.__file__),
)


def agent_traceback(e: BaseException) -> str:
    """The traceback of an agent's exception, without this package's own frames."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(_NOT_THE_AGENTS)]
    lines = traceback.format_list(frames[-20:]) + traceback.format_exception_only(type(e), e)
    return "".join(lines).rstrip()


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # an object whose class defines `async def __call__`
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004


async def invoke(fn: Any, arg: Any, timeout: float | None) -> Any:
    """Call an agent or user. Async ones run on the loop; sync ones in a worker thread
    (so a hung one times out and the run goes on), except those that run inline."""
    if runs_inline(fn):
        value = fn(arg)
    elif _is_async(fn):
        value = _exits_guarded(fn, arg)
    else:
        value = await asyncio.wait_for(_in_daemon_thread(fn, arg), timeout)
    if inspect.isawaitable(value):
        return await asyncio.wait_for(_awaited(value), timeout)
    return value


class _AgentExit(Exception):
    """An agent or user raised SystemExit or KeyboardInterrupt. Carried as an ordinary
    exception: asyncio lets those two escape a task and tear down the event loop.
    (Its class name shows in a simulated user's failure message: keep it.)"""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(repr(exc))
        self.exc = exc


def _exits_guarded(fn: Any, arg: Any) -> Any:
    try:
        return fn(arg)
    except (SystemExit, KeyboardInterrupt) as e:
        raise _AgentExit(e) from None


async def _awaited(aw: Any) -> Any:
    try:
        return await aw
    except (SystemExit, KeyboardInterrupt) as e:
        raise _AgentExit(e) from None


def _in_daemon_thread(fn: Any, arg: Any) -> asyncio.Future[Any]:
    """Run a sync call in a daemon thread: a hung agent can be abandoned at its timeout
    without holding the process open at exit (executor threads are joined at exit)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def work() -> None:
        try:
            value = ctx.run(fn, arg)
        except (SystemExit, KeyboardInterrupt) as e:
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, False, _AgentExit(e))
            return
        except BaseException as e:  # carried to the awaiting trial
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, False, e)
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=work, name="sandtable-agent", daemon=True).start()
    return fut


class Deadline:
    """The end of a trial's time (none without a timeout)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds if seconds else None

    def passed(self) -> bool:
        return self.end is not None and time.monotonic() > self.end

    def left(self) -> float | None:
        if self.end is None:
            return None
        return max(0.001, self.end - time.monotonic())
