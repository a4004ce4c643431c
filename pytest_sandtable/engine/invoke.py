"""Calling an agent or a simulated user within a trial's deadline.

Async ones run on the trial's event loop, in a task of their own; sync ones in a
daemon thread, so that a hung one times out and the run goes on; those that say they
never block (see :func:`~.api.runs_inline`) run inline. The daemon threads are kept
and reused, each with one event loop of its own set as its current loop for the whole
run (see :class:`_AgentThread`): a sync agent's asyncio client, made at import or in a
session fixture and used through ``asyncio.get_event_loop()``, keeps working turn after
turn. An asyncio client used on a loop other than its own is reported as a harness
wiring problem (:class:`CrossLoopError`), not as the agent's failure. Whatever they raise reaches
the trial as an ordinary exception (see :func:`_carried`), never as a cancellation
or an exit of the trial itself; :func:`agent_traceback` keeps only the agent's own
frames of a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, ClassVar

from .api import UserReply, runs_inline

# frames of ours and of the machinery that calls agents are not the agent's
_NOT_THE_AGENTS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
    os.path.abspath(threading.__file__),
)


def agent_traceback(e: BaseException, also_not_the_agents: tuple[str, ...] = ()) -> str:
    """The traceback of an agent's exception, without the engine's own frames (nor those
    of files under the path prefixes ``also_not_the_agents``, for a caller that only
    carried the exception)."""
    skip = _NOT_THE_AGENTS + also_not_the_agents
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(skip)]
    lines = traceback.format_list(frames[-20:]) + traceback.format_exception_only(type(e), e)
    return "".join(lines).rstrip()


def exception_text(e: BaseException) -> str:
    """``Name: message``, or the name alone when the message is empty. Never raises: an
    agent's exception may carry a message that cannot be made into text."""
    try:
        message = str(e)
    except Exception:
        message = "(its message could not be read)"
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


class EngineStop(BaseException):
    """Raised by the engine out of ``call_tool``, through the agent's own code, to end its
    turn (a bug of the domain, a tool loop). A BaseException so that an agent's ``except
    Exception`` does not swallow it; the one kind of BaseException that reaches the trial
    as itself."""


class _AgentExit(Exception):
    """What an agent or user raised that cannot reach the trial as itself, carried as an
    ordinary exception (see :func:`_carried`). (Its class name shows in a simulated
    user's failure message: keep it.)"""

    def __init__(self, exc: BaseException) -> None:
        try:
            text = repr(exc)
        except Exception:
            text = f"{type(exc).__name__}()"
        super().__init__(text)
        self.exc = exc


# what asyncio (and anyio, httpx, the SDKs over them) say when an object made on one event
# loop is used on another, or after its loop was closed
_CROSS_LOOP = ("is bound to a different event loop", "attached to a different loop", "Event loop is closed")


class CrossLoopError(Exception):
    """An agent's or user's asyncio client used on an event loop other than the one it was
    made on (a ``RuntimeError`` of asyncio's, possibly wrapped by the client library):
    a harness wiring problem, not the agent's failure. The trial is errored with this
    text, which says how to fix it."""

    def __init__(self, found: str) -> None:
        super().__init__(
            f"an asyncio client was made on another event loop than the one it is used on "
            f"(RuntimeError: ... {found}). Make the client on the loop that calls it: once per "
            f"trial, kept in turn.state, or at import for a sync agent that reaches its thread's "
            f"loop with asyncio.get_event_loop() (each agent thread keeps one event loop for the "
            f"whole run; asyncio.run() makes a new one every call). An async agent runs on the "
            f"run's loop: not a client warmed up in an async fixture on pytest-asyncio's loop "
            f"(docs/agents.md, \"Event loops\")"
        )
        self.found = found


def cross_loop(e: BaseException) -> str | None:
    """Which of asyncio's cross-loop messages ``e`` (or an exception it was raised from,
    as an SDK's connection error carries it) says, or None."""
    seen: BaseException | None = e
    for _ in range(8):  # a chain is short; a cycle of causes is not followed for ever
        if seen is None:
            return None
        if isinstance(seen, RuntimeError):
            try:
                message = str(seen)
            except Exception:
                message = ""
            for found in _CROSS_LOOP:
                if found in message:
                    return found
        seen = seen.__cause__ or seen.__context__
    return None


def _carried(e: BaseException) -> BaseException:
    """What an agent's or user's exception reaches the trial as: itself when it is an
    ordinary exception (or the engine's own stop), else wrapped in :class:`_AgentExit`.
    Wrapped are every other BaseException, because asyncio lets SystemExit and
    KeyboardInterrupt tear down the event loop, a CancelledError would pass for the
    cancellation of the trial, and the others (GeneratorExit, an agent's own subclass)
    would escape ``arun_trial``; and StopIteration, which a future refuses to hold (the
    trial would wait for its whole timeout). An asyncio client used across event loops
    reaches it as a :class:`CrossLoopError`, the harness's problem rather than the agent's."""
    if isinstance(e, EngineStop) or (isinstance(e, Exception) and not isinstance(e, StopIteration)):
        found = cross_loop(e) if isinstance(e, Exception) and not isinstance(e, CrossLoopError) else None
        if found is not None:
            return CrossLoopError(found)
        return e
    return _AgentExit(e)


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # an object whose class defines `async def __call__`
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004


async def invoke(fn: Any, arg: Any, timeout: float | None, answered: list[float] | None = None) -> Any:
    """Call an agent or user. Async ones run on the loop; sync ones in a worker thread
    (so a hung one times out and the run goes on), except those that run inline.

    ``answered``, when given, gets the ``time.perf_counter()`` of the moment the answer
    was there (the call returned, in its thread or task): with many trials on one loop,
    the trial itself resumes later, behind the others' work, and that wait is not the
    agent's latency."""
    stamps = answered
    if runs_inline(fn) or _is_async(fn):
        value = call_inline(fn, arg)
    else:
        value = await _settled_within(_in_daemon_thread(fn, arg, answered), timeout)
        stamps = None  # stamped by the thread, when it returned
    if is_pending(value):
        # (a sync call that gave an awaitable: answered once that is done, stamped last)
        return await awaited_within(value, timeout, answered)
    if stamps is not None:
        stamps.append(time.perf_counter())
    return value


# what an agent or user answers, when it is no awaitable
_ANSWERS = frozenset({str, UserReply})


def is_pending(value: Any) -> bool:
    """Whether what a call returned is an awaitable still to be awaited (with
    :func:`awaited_within`) rather than its answer. isawaitable's ABC check is a good part
    of an inline call: a plain answer (a str, a UserReply, None) skips it."""
    return value is not None and type(value) not in _ANSWERS and inspect.isawaitable(value)


def call_inline(fn: Any, arg: Any) -> Any:
    """``fn(arg)`` on the loop (an inline call, or the start of an async one): what
    :func:`invoke` does first for those, for a caller that knows, once per trial, that
    ``fn`` runs inline, and so skips the coroutine of ``invoke`` on every turn. What it
    raises is its own: a synchronous call cannot be cancelled from outside."""
    try:
        return fn(arg)
    except BaseException as e:
        carried = _carried(e)
        if carried is e:
            raise
        raise carried from None


# Waiting costs loop iterations ("hops"), and with many trials on one loop every hop
# waits behind the other trials' work of that iteration: with 32 in flight, each hop
# adds to every agent turn. So an answer is handed to the trial by the code that has
# it, in one hop (the trial's wake-up): the agent's task or the agent's thread sets the
# trial's future itself, rather than through asyncio.wait / wait_for, which take two
# more (a done callback, then a waiter). The timeout is a timer on the same future.


async def awaited_within(aw: Any, timeout: float | None, answered: list[float] | None = None) -> Any:
    """Await an agent's or user's awaitable in a task of its own, for at most
    ``timeout`` seconds. Its own task tells a CancelledError it raised itself (its
    failure) from the trial's cancellation (pytest -x, Ctrl-C, xdist taking the trial
    away), which still cancels. At its timeout it is cancelled and left to finish on
    its own: an agent that ignores cancellation cannot hold the trial past its time."""
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(_answered(aw, answer, answered))
    try:
        return await _settled_within(answer, timeout)
    except BaseException:  # timed out, or the trial is cancelled: the call goes with it
        if not task.done():
            _abandon(task)
        raise


async def _answered(aw: Any, answer: asyncio.Future[Any], answered: list[float] | None = None) -> None:
    """Await ``aw`` and settle ``answer`` with what it ends with (unless the trial
    stopped waiting), stamping ``answered`` when it returns. A cancellation from outside
    cancels ``answer`` too."""
    try:
        value = await aw
        if answered is not None:
            answered.append(time.perf_counter())
    except asyncio.CancelledError as e:
        if _being_cancelled():  # its task was cancelled from outside: a real cancellation
            _settle(answer, None, cancel=True)
            raise
        _settle(answer, _AgentExit(e))
        return
    except BaseException as e:
        _settle(answer, _carried(e))
        return
    _settle(answer, value, ok=True)


def _settle(answer: asyncio.Future[Any], value: Any, *, ok: bool = False, cancel: bool = False) -> None:
    """Give ``answer`` its outcome once; a later one (after a timeout) is dropped."""
    if answer.done():
        return
    if cancel:
        answer.cancel()
    elif ok:
        answer.set_result(value)
    else:
        answer.set_exception(value)


async def _settled_within(answer: asyncio.Future[Any], timeout: float | None) -> Any:
    """``answer``'s outcome, or TimeoutError after ``timeout`` seconds. A cancellation
    of the trial cancels ``answer`` (whoever settles it later finds it done)."""
    timer = None
    if timeout is not None:
        timer = asyncio.get_running_loop().call_later(timeout, _time_out, answer)
    try:
        return await answer
    finally:
        if timer is not None:
            timer.cancel()


def _time_out(answer: asyncio.Future[Any]) -> None:
    _settle(answer, asyncio.TimeoutError())


def _being_cancelled() -> bool:
    """Whether the current task has been asked to cancel (Python 3.11+). On 3.10, which
    cannot tell, no: there an agent's task is only cancelled once the trial has stopped
    waiting for it, so what it then raises is never read."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return cancelling is not None and cancelling() > 0


def _abandon(task: asyncio.Future[Any]) -> None:
    """Cancel a call the trial no longer waits for; what it ends with is never read."""
    task.cancel()
    task.add_done_callback(_consume)


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _in_daemon_thread(fn: Any, arg: Any, answered: list[float] | None = None) -> asyncio.Future[Any]:
    """Run a sync call in one of the kept agent threads (a daemon thread: a hung agent
    can be abandoned at its timeout without holding the process open at exit, where an
    executor's threads are joined)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def work() -> Callable[[], None]:
        try:
            outcome: tuple[Any, bool] = (ctx.run(fn, arg), True)
            if answered is not None:
                answered.append(time.perf_counter())
        except BaseException as e:  # carried to the awaiting trial
            outcome = (_carried(e), False)

        def deliver() -> None:
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                    loop.call_soon_threadsafe(lambda: _settle(fut, outcome[0], ok=outcome[1]))

        return deliver

    _AgentThread.take().jobs.put(work)
    return fut


class _AgentThread:
    """A daemon thread that runs sync agents' and users' calls one at a time, with an
    event loop of its own that is its current loop (``asyncio.get_event_loop()``) on
    every call, for the whole run: an asyncio client made at import or in a session
    fixture and used with ``get_event_loop().run_until_complete`` (as ``Runner.run_sync``
    of the OpenAI Agents SDK does) finds the loop its connections belong to on the next
    turn. An idle thread is taken again before a new one starts, the one that finished
    last first, so one trial at a time keeps to one thread and one loop; a thread whose
    call hangs is left to it, and another takes the next call."""

    _idle: ClassVar[list[_AgentThread]] = []
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._serve, name="sandtable-agent", daemon=True).start()

    @classmethod
    def take(cls) -> _AgentThread:
        with cls._lock:
            if cls._idle:
                return cls._idle.pop()
        return cls()

    def _serve(self) -> None:
        while True:
            job = self.jobs.get()
            loop = self.loop
            if loop is None or loop.is_closed():  # (an agent may close it: then a new one)
                loop = self.loop = asyncio.new_event_loop()
            # set on every call: asyncio.run() in the agent unsets it when it returns
            asyncio.set_event_loop(loop)
            deliver = job()
            # idle again before the answer is delivered: the trial's next call, which may
            # follow at once, finds this thread (and its loop) rather than starting another
            with self._lock:
                self._idle.append(self)
            deliver()


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
