"""Retrying model and endpoint calls, the same way for every adapter.

The policy (documented in docs/agents.md):

- Each attempt gets ``options.timeout`` seconds as a whole, from sending the request to
  the parsed body, enforced here by :func:`within` on top of the client's own timeouts,
  so a server that trickles bytes cannot stretch it, and an attempt that does not
  give up when cancelled is abandoned after a short grace period.
- Transient failures are retried up to ``options.retries`` times: HTTP 408, 429 and
  every 5xx (529 "overloaded" included), a refused, reset or dropped connection, and a
  timed-out attempt. A server's ``x-should-retry: true|false`` header overrides the
  status (Anthropic and OpenAI send it). Model calls have no side effects, so all of
  these are safe to repeat. The HTTP step agent, whose service may act on a request,
  retries less (see :mod:`pytest_sandtable.adapters.http_agent`).
- A request the adapter changed to suit the server (:class:`Again`) is sent again at
  once and not counted as an attempt.
- Before retry *n* we wait what the server asked for (``retry-after-ms``, or
  ``retry-after`` in seconds or as an HTTP date), capped at :data:`RETRY_AFTER_CAP`;
  without one, exponential backoff ``0.5 s * 2**(n-1)`` capped at 8 s, times a random
  factor in [0.5, 1] so that many trials in flight do not retry in lockstep.
- When retries run out, or a failure is not transient (4xx, a body that is not what
  the protocol says), the adapter raises one exception (``AgentError`` for the agent
  under test, ``UserError`` for the simulated user) with a one-line message naming the
  endpoint's host, what happened and how many attempts were made, e.g.
  ``openai agent gpt-x: HTTP 500 from 127.0.0.1:43121 after 5 attempts: internal error``.
  API keys are never part of it.

The SDKs' own retries are switched off (``max_retries=0``): the Anthropic SDK would
honour any ``retry-after`` uncapped, and one policy keeps messages and waits the same
across Claude, OpenAI-compatible and HTTP agents.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ._common import redact

T = TypeVar("T")

RETRY_AFTER_CAP = 60.0
"""The longest wait honoured from a ``retry-after`` header, in seconds."""
BACKOFF_BASE = 0.5
"""The wait before the first retry when the server gives none, in seconds."""
BACKOFF_CAP = 8.0
"""The longest backoff wait, in seconds."""

RETRY_STATUSES = frozenset({408, 429})
"""Statuses retried besides every 5xx."""

_jitter = random.Random()


def retryable_status(status: int) -> bool:
    """Whether a model endpoint's HTTP status is worth another attempt."""
    return status in RETRY_STATUSES or 500 <= status <= 599


class Transient(Exception):
    """An attempt failed in a way another attempt may fix."""

    def __init__(self, what: str, detail: str = "", retry_after: float | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.detail = detail
        self.retry_after = retry_after


class Fatal(Exception):
    """An attempt failed in a way another attempt will not fix (or must not risk)."""

    def __init__(self, what: str, detail: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.detail = detail


class TimedOut(Exception):
    """The client's own timeout fired (treated like the attempt's deadline)."""


class Again(Exception):
    """The adapter changed the request to suit the server (e.g. dropped a parameter the
    server rejected): send it again at once. Not counted as an attempt; an adapter
    raises it only after a change it makes at most once, so it cannot loop."""


MAX_AGAIN = 8
"""Immediate re-sends (:class:`Again`) allowed in one call, as a safety net."""
GRACE = 1.0
"""Seconds an attempt is given to finish after its deadline cancelled it."""


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def within(aw: Awaitable[T], timeout: float) -> T:
    """Await ``aw`` for at most ``timeout`` seconds, then raise :class:`TimedOut`.

    Unlike :func:`asyncio.wait_for`, this does not wait without end for a cancelled
    attempt to finish (a client closing a stalled connection, say): after
    :data:`GRACE` seconds it is left to finish on its own.
    """
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_consume)
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=min(GRACE, timeout))
        if task.done() and not task.cancelled() and task.exception() is None:
            return task.result()  # it finished just as its time ran out
        if not task.done():
            task.add_done_callback(_consume)
        raise TimedOut()  # however the cancelled attempt ended
    return task.result()


def should_retry(status: int, headers: Mapping[str, str] | Any) -> bool:
    """Whether a model endpoint's answer is worth another attempt: as the server says in
    ``x-should-retry``, else by :func:`retryable_status`."""
    hint = str(headers.get("x-should-retry", "") if headers is not None else "").strip().lower()
    if hint in ("true", "false"):
        return hint == "true"
    return retryable_status(status)


def parse_retry_after(headers: Mapping[str, str] | Any, now: float | None = None) -> float | None:
    """Seconds to wait as the response asks: ``retry-after-ms``, else ``retry-after`` as
    seconds or as an HTTP date. Capped at :data:`RETRY_AFTER_CAP`; None when absent or
    unreadable."""
    if headers is None:
        return None
    seconds: float | None = None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            seconds = float(ms) / 1000.0
        except ValueError:
            seconds = None
    if seconds is None:
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            seconds = float(value)
        except ValueError:
            parsed = email.utils.parsedate_tz(str(value))
            if parsed is None:
                return None
            seconds = float(email.utils.mktime_tz(parsed)) - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def backoff(retry: int) -> float:
    """The wait before retry number ``retry`` (1-based) when the server asked for none."""
    base: float = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** (retry - 1))
    return base * (0.5 + 0.5 * _jitter.random())


@dataclass
class Caller:
    """Runs attempts of one call with the retry policy, and words the final failure.

    ``label`` names the side and model (``claude agent claude-x``), ``host`` the endpoint,
    ``error`` the exception raised at the end (``AgentError`` or ``UserError``).
    """

    label: str
    host: str
    error: type[Exception]
    retries: int
    timeout: float
    secrets: tuple[str, ...] = ()
    retry_timeouts: bool = True

    def failure(self, what: str, detail: str = "", attempts: int = 1) -> Exception:
        """The exception to raise: ``<label>: <what>[ after N attempts][: <detail>]``."""
        after = f" after {attempts} attempts" if attempts > 1 else ""
        text = f"{self.label}: {what}{after}" + (f": {detail}" if detail else "")
        return self.error(redact(" ".join(text.split()), self.secrets))

    def timed_out(self) -> str:
        return f"no response from {self.host} within {self.timeout:g}s"

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Await ``attempt()`` until it succeeds, retrying :class:`Transient` failures and
        timeouts; raise ``self.error`` when that is over."""
        attempts = 0
        again = 0
        while True:
            attempts += 1
            try:
                return await within(attempt(), self.timeout)
            except Again:
                attempts -= 1
                again += 1
                if again <= MAX_AGAIN:
                    continue
                raise self.failure(f"the request to {self.host} kept needing changes", "", attempts) from None
            except (asyncio.TimeoutError, TimedOut):
                if not self.retry_timeouts:
                    raise self.failure(self.timed_out(), "", attempts) from None
                failed = Transient(self.timed_out())
            except Transient as e:
                failed = e
            except Fatal as e:
                raise self.failure(e.what, e.detail, attempts) from None
            except Exception as e:  # a client library's surprise: still one clear line, keys masked
                raise self.failure(f"unexpected error talking to {self.host}", f"{type(e).__name__}: {e}",
                                   attempts) from None
            if attempts > self.retries:
                raise self.failure(failed.what, failed.detail, attempts) from None
            wait = failed.retry_after if failed.retry_after is not None else backoff(attempts)
            await asyncio.sleep(wait)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: set[int] = set()
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def connection_failure(exc: BaseException, host: str) -> str:
    """Words a transport error of httpx (or the SDK's httpx2), looking through its causes."""
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return f"connection refused by {host}"
    if names & {"ConnectError", "ConnectTimeout"}:
        return f"could not connect to {host}"
    if "RemoteProtocolError" in names:
        if any("incomplete" in str(e) or "complete message body" in str(e) for e in chain):
            return f"connection to {host} dropped in the middle of the response"
        return f"connection to {host} closed without a response"
    if names & {"ReadError", "WriteError"} or any(isinstance(e, ConnectionResetError) for e in chain):
        return f"connection to {host} dropped"
    return f"connection to {host} failed ({type(chain[-1]).__name__})"


def is_connect_refused(exc: BaseException) -> bool:
    """Whether a transport error happened while connecting, before the request was sent."""
    return any(type(e).__name__ in ("ConnectError", "ConnectTimeout") or isinstance(e, ConnectionRefusedError)
               for e in _chain(exc))
