"""Recording model calls and replaying them (``--sandtable-record``, docs/recording.md).

Every HTTP request the adapters send (the anthropic SDK's, the OpenAI-compatible
adapter's and the HTTP step agent's) goes through a :class:`RecordingTransport` when
recording is switched on. Inside a trial, the transport asks the trial's
:class:`Tape` for the answer: replayed from the task's recording file, or sent to the
server and kept. Outside a trial (no tape), a request simply goes out.

Why a transport of our own rather than vcrpy: the key must be the request's JSON body
made canonical (and nothing else), answers must be stored per trial so that k trials
of one task replay as they ran, files must merge safely when xdist workers finish
trials of one task at once, and the anthropic SDK talks through ``httpx2``, which
vcrpy does not patch. An ``httpx`` transport is the one documented seam of both
clients; it needs no patching of any library.

A recording file holds one task of one domain::

    {"domain": "freight", "format": 1, "task": "book-by-lane",
     "trials": {"1": [{"request": {...}, "response": {...}}, ...], "2": [...]}}

A request is kept as ``{"method", "path", "body"}``: the URL's path and its query
without credentials or values named like secrets, never the host or a header, and
the body as parsed JSON; keys are written sorted, so a file changes only where a
conversation changed. A response is ``{"status", "content_type", "body"}``.

A request matches a recorded one when both are equal once their volatile parts are
left out (:class:`Volatile`): the fields a client fills anew on every run (the
Anthropic Messages ``metadata.user_id`` the Claude Code CLI sends with its session id)
and the lines it writes about the machine and the day. The recording keeps the request
as it was sent; only the comparison leaves those parts out. :data:`VOLATILE` is the
built-in set, and a run adds its own (the ini's ``sandtable_record_ignore``).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..domain.files import FileRefused, read_regular, write_atomic

MODES = ("none", "once", "new_episodes", "all")
"""The values of ``--sandtable-record``, as vcrpy and pytest-recording name them."""
FORMAT = 1
"""The version of the recording file format this module reads and writes."""
SECRET_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization")
"""Request headers whose values never reach a recording, wherever else they appear."""
_SECRET_PARAM = ("key", "token", "secret", "sig", "auth", "pass")
_DROPPED_RESPONSE_HEADERS = ("content-encoding", "content-length", "transfer-encoding")
MAX_FILE_BYTES = 512 * 2**20
"""The largest recording file read: one task's trials, every request and answer of
each (a few hundred KB a trial). Nothing is read of a bigger one, nor of one that is
not a regular file (a named pipe, ``/dev/zero``)."""
MISS_STATUS = 412
"""The status of the answer to a request with no recording: a 4xx that no adapter retries
or answers by changing the request (as it may for 400, 404 and 422)."""

Scrub = Callable[[Any], Any]
"""Replaces secrets in a JSON value (the plugin passes report.safe's secret handling)."""

_DROPPED: Any = object()


@dataclass(frozen=True)
class Volatile:
    """A part of a request body that request matching leaves out.

    ``path``: the place in the body, keys joined by dots (``metadata.user_id``), where
    ``*`` is any one key or list index and ``**`` any number of them (``**.text``: every
    ``text`` field, however deep). Without ``pattern`` the value there is left out
    whole; with one, each match of it in the strings there is (replaced by ``~``).
    ``endpoint``: applies only to requests whose URL path ends so (``/messages``); ``""``
    to every request. ``why``: what the rule is for, for the docs and messages."""

    path: str
    pattern: re.Pattern[str] | None = None
    endpoint: str = ""
    why: str = ""

    @classmethod
    def parse(cls, line: str) -> Volatile:
        """A rule as the ini's ``sandtable_record_ignore`` gives it: ``PATH`` or
        ``PATH ~ REGEX``. Raises ValueError with what is wrong."""
        path, sep, regex = (part.strip() for part in line.partition("~"))
        if not path:
            raise ValueError(f"{line.strip()!r}: expected PATH or PATH ~ REGEX (e.g. metadata.user_id)")
        if any(not seg for seg in path.split(".")):
            raise ValueError(f"{path!r}: an empty key in the path (keys are joined by single dots)")
        if sep and not regex:
            raise ValueError(f"{line.strip()!r}: nothing after '~' (expected a regular expression)")
        try:
            pattern = re.compile(regex) if sep else None
        except re.error as e:
            raise ValueError(f"{regex!r}: not a regular expression ({e})") from None
        return cls(path, pattern)

    def applies(self, path: str) -> bool:
        return not self.endpoint or path.split("?", 1)[0].endswith(self.endpoint)

    def apply(self, body: Any) -> Any:
        """``body`` without this part (a copy where it changed; ``body`` itself elsewhere)."""
        out = _leave_out(body, self.path.split("."), self.pattern)
        return None if out is _DROPPED else out


def _leave_out(value: Any, segs: list[str], pattern: re.Pattern[str] | None) -> Any:
    if not segs:
        if pattern is None:
            return _DROPPED
        return _blank(value, pattern)
    head, rest = segs[0], segs[1:]
    if head == "**":
        value = _leave_out(value, rest, pattern)  # zero keys
        if value is _DROPPED:
            return value
        return _each(value, lambda v: _leave_out(v, segs, pattern), None)
    return _each(value, lambda v: _leave_out(v, rest, pattern), head)


def _each(value: Any, inner: Callable[[Any], Any], key: str | None) -> Any:
    """``inner`` applied to the children of ``value`` named ``key`` (``*`` or None: all)."""
    every = key is None or key == "*"
    if isinstance(value, dict):
        out: dict[str, Any] | None = None
        for k, v in value.items():
            if every or k == key:
                got = inner(v)
                if got is not v:
                    out = dict(value) if out is None else out
                    if got is _DROPPED:
                        del out[k]
                    else:
                        out[k] = got
        return value if out is None else out
    if isinstance(value, list):
        items: list[Any] | None = None
        for i, v in enumerate(value):
            if every or key == str(i):
                got = inner(v)
                if got is not v:
                    items = list(value) if items is None else items
                    items[i] = None if got is _DROPPED else got
        return value if items is None else items
    return value


def _blank(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        out = pattern.sub("~", value)
        return value if out == value else out
    return value


VOLATILE = (
    Volatile("metadata.user_id", endpoint="/messages",
             why="the Anthropic Messages request's opaque user id: the Claude Code CLI (and so the Claude Agent "
                 "SDK) sends its device and session ids there, new on every run"),
    Volatile("**.text", re.compile(r"<system-reminder>\n# Environment\n.*?</system-reminder>", re.DOTALL),
             endpoint="/messages",
             why="the Claude Code CLI's environment note: the working directory, platform, shell and OS version "
                 "of the machine it runs on"),
    Volatile("**.text", re.compile(r"Today's date is \d{4}-\d{2}-\d{2}\."), endpoint="/messages",
             why="the Claude Code CLI's note of the day's date"),
)
"""What request matching leaves out of every request, whatever the run adds."""


def matching_key(request: Mapping[str, Any], rules: tuple[Volatile, ...]) -> str:
    """The key two requests match by: the stored request (``method``, ``path``, ``body``)
    without the parts ``rules`` leave out, as canonical JSON."""
    return _canonical(_matched(request, rules))


def _matched(request: Mapping[str, Any], rules: tuple[Volatile, ...]) -> Any:
    body = request.get("body")
    path = str(request.get("path", ""))
    for rule in rules:
        if rule.applies(path):
            body = rule.apply(body)
    return {**request, "body": body}


class RecordingError(Exception):
    """A recording file that cannot be used (unreadable, not JSON, the wrong shape, of
    another domain or task, or of a newer format), or a request with no recording in a
    mode that replays only. The message names the file and what to do."""


@dataclass(frozen=True)
class Settings:
    """How this run records: ``mode`` (one of :data:`MODES`), ``folder`` (None: a
    ``cassettes`` folder beside each domain file), ``shown_from`` (paths in messages are
    relative to it), ``scrub`` (secrets out of everything stored), ``volatile`` (what
    request matching leaves out: :data:`VOLATILE` and the run's own rules)."""

    mode: str
    folder: Path | None = None
    shown_from: Path | None = None
    scrub: Scrub = field(default=lambda v: v, repr=False, compare=False)
    volatile: tuple[Volatile, ...] = VOLATILE

    def file_for(self, domain: str, domain_file: Path, task: str) -> Path:
        """``<folder>/<domain>/<task>.json``."""
        root = self.folder if self.folder is not None else domain_file.parent / "cassettes"
        return root / _safe_name(domain) / f"{_safe_name(task)}.json"

    def shown(self, path: Path) -> str:
        """A path as messages show it: relative to where pytest started, when inside it."""
        if self.shown_from is not None:
            with contextlib.suppress(ValueError):
                return path.relative_to(self.shown_from).as_posix()
        return path.as_posix()

    def open(self, domain: str, domain_file: Path, task: str, trial: int) -> Tape:
        """The tape of one trial, with what its task's file holds for it. Raises
        :class:`RecordingError` for a file that cannot be used."""
        path = self.file_for(domain, domain_file, task)
        doc = _read_cached(path, self.shown(path), domain, task)
        old = doc["trials"].get(str(trial)) if doc is not None else None
        return Tape(self, path, domain, task, trial, old)


_SETTINGS: Settings | None = None
_CURRENT: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("sandtable_tape", default=None)
_READ: dict[Path, tuple[tuple[int, int, int], dict[str, Any] | None]] = {}
_READ_LOCK = threading.Lock()


def configure(settings: Settings | None) -> None:
    """Switch recording on for this process (the plugin does, once per run), or off."""
    global _SETTINGS
    _SETTINGS = settings
    with _READ_LOCK:
        _READ.clear()  # a new run reads the files afresh


def settings() -> Settings | None:
    """This process's recording settings; None when recording is off (the default)."""
    return _SETTINGS


@contextlib.contextmanager
def playing(tape: Tape) -> Iterator[Tape]:
    """Route the model calls made in this context (the trial's tasks copy it) through ``tape``."""
    token = _CURRENT.set(tape)
    try:
        yield tape
    finally:
        _CURRENT.reset(token)


# --------------------------------------------------------------------------- the key


def _safe_name(name: str) -> str:
    """A domain or task id as a file name: path separators and dots at the start cannot
    lead outside the folder."""
    cleaned = "".join("_" if c in '/\\:*?"<>|' or ord(c) < 32 else c for c in name).strip()
    return cleaned.lstrip(".") or "_"


def _public_path(url: Any) -> str:
    """The URL's path and query, without the values of parameters named like secrets."""
    parts = urlsplit(str(url))
    query = [(k, "***" if any(s in k.lower() for s in _SECRET_PARAM) else v)
             for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return parts.path + ("?" + urlencode(sorted(query)) if query else "")


def _body(raw: bytes) -> Any:
    """A body as stored: parsed JSON, else its text."""
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class _Request(Protocol):
    method: str

    @property
    def url(self) -> Any: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    async def aread(self) -> bytes: ...


class _Response(Protocol):
    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    async def aread(self) -> bytes: ...

    async def aclose(self) -> None: ...


_R = TypeVar("_R", bound=_Response)


def _secrets_of(request: _Request) -> list[str]:
    """The credentials a request carries in its headers (bearer tokens, API keys)."""
    found = []
    for name in SECRET_HEADERS:
        value = request.headers.get(name)
        if value:
            found.append(value.strip())
            token = value.strip().partition(" ")[2].strip()
            if token:
                found.append(token)
    return sorted({v for v in found if len(v) >= 4}, key=lambda v: (-len(v), v))


def _without(value: Any, secrets: list[str]) -> Any:
    if not secrets:
        return value
    text = _canonical(value)
    if not any(s in text for s in secrets):
        return value
    for s in secrets:
        text = text.replace(json.dumps(s)[1:-1], "[redacted]")
    return json.loads(text)


# --------------------------------------------------------------------------- one trial


class Tape:
    """What one trial replays and records. ``old`` is what its task's file held for
    this trial (None: nothing).

    Replay takes, for each request, the first recorded exchange with the same key that
    this trial has not used yet, so a trial that asks the same thing twice gets both
    answers in order. Only successful (2xx) answers are recorded: a retried failure
    replays as the answer that finally came.
    """

    def __init__(self, settings: Settings, path: Path, domain: str, task: str, trial: int,
                 old: list[dict[str, Any]] | None) -> None:
        self.settings = settings
        self.path = path
        self.domain = domain
        self.task = task
        self.trial = trial
        self.old = old
        self._unused = list(old or [])
        self._keys: list[str | None] = [None] * len(self._unused)  # each unused one's matching key, when made
        self.new: list[dict[str, Any]] = []
        self.replayed = 0
        self.live = 0
        self.failed = False  # a request went out and did not bring a 2xx answer
        self.miss: str | None = None  # why a request had no recording (modes that replay only)

    @property
    def replay_only(self) -> bool:
        mode = self.settings.mode
        return mode == "none" or (mode == "once" and self.old is not None)

    @property
    def all_replayed(self) -> bool:
        """Whether the trial made model calls and every one was replayed (none missed)."""
        return self.replayed > 0 and self.live == 0 and self.miss is None

    def _take(self, key: str) -> dict[str, Any] | None:
        for i, entry in enumerate(self._unused):
            have = self._keys[i]
            if have is None:
                have = self._keys[i] = matching_key(entry["request"], self.settings.volatile)
            if have == key:
                self._keys.pop(i)
                return self._unused.pop(i)
        return None

    async def exchange(self, request: _Request, send: Callable[[], Awaitable[_R]],
                       respond: Callable[[int, dict[str, str], bytes], _R]) -> _R:
        """The answer to ``request``: replayed, or from ``send()`` (and kept)."""
        secrets = _secrets_of(request)
        stored_request = self.settings.scrub(_without(
            {"method": request.method, "path": _public_path(request.url), "body": _body(await request.aread())},
            secrets))
        key = matching_key(stored_request, self.settings.volatile)
        hit = self._take(key) if self.settings.mode != "all" else None
        if hit is not None:
            self.replayed += 1
            got = hit["response"]
            body = got["body"]
            raw = body.encode() if isinstance(body, str) else json.dumps(body, ensure_ascii=False).encode()
            return respond(got["status"], {"content-type": got["content_type"]}, raw)
        if self.replay_only:
            # an answer no adapter retries (every adapter fails the call at once on it); the
            # plugin then makes the trial errored with this message
            self.miss = self._miss_message(stored_request)
            error = {"type": "error", "error": {"type": "no_recording", "message": self.miss}}
            return respond(MISS_STATUS, {"content-type": "application/json", "x-should-retry": "false"},
                           json.dumps(error).encode())
        self.live += 1
        response = await send()
        raw = await response.aread()
        await response.aclose()
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _DROPPED_RESPONSE_HEADERS}
        if 200 <= response.status_code < 300:
            stored = {"status": response.status_code,
                      "content_type": response.headers.get("content-type", "application/json"),
                      "body": _body(raw)}
            self.new.append({"request": stored_request, "response": self.settings.scrub(_without(stored, secrets))})
        else:
            self.failed = True
        return respond(response.status_code, headers, raw)

    def _miss_message(self, request: dict[str, Any]) -> str:
        mode = self.settings.mode
        where = self.settings.shown(self.path)
        head = f"task '{self.task}' trial {self.trial}: no recording for this request in {where}"
        if self.old is None:
            return f"{head} (--sandtable-record={mode}); record it with --sandtable-record=once"
        n = self.replayed + 1
        why = f"model call {n} differs from the recording"
        if n <= len(self.old):
            rules = self.settings.volatile
            parts = _differing_parts(_matched(self.old[n - 1]["request"], rules), _matched(request, rules))
            if parts:
                why += " in " + ", ".join(repr(p) for p in parts)
        else:
            why = f"the recording of trial {self.trial} has {len(self.old)} model calls, this is call {n}"
        return f"{head} (--sandtable-record={mode}; {why}); record it again with --sandtable-record=all"

    def to_store(self) -> list[dict[str, Any]] | None:
        """The exchanges to write for this trial, or None when its entry stays as it is:
        nothing new was recorded, or a request failed in a trial that then errored (its
        next run should record it afresh; see :meth:`write`)."""
        if self.replay_only or not self.new:
            return None
        if self.settings.mode == "new_episodes":
            return [*(self.old or []), *self.new]
        return list(self.new)

    def write(self, trial_errored: bool) -> None:
        """Write this trial's exchanges into its task's file (merged with the other
        trials', under a lock, atomically). A trial that errored after a failed request
        is not written: half a conversation would replay as a miss."""
        entries = self.to_store()
        if entries is None or (trial_errored and self.failed):
            return
        update_file(self.path, self.settings.shown(self.path), self.domain, self.task, self.trial, entries)


def _differing_parts(recorded: Any, request: dict[str, Any]) -> list[str]:
    """The top-level parts of two requests that differ (``path``, then the body's keys:
    ``system``, ``messages``, ``tools``...), for a message."""
    if not isinstance(recorded, dict):
        return []
    parts = [k for k in ("method", "path") if recorded.get(k) != request.get(k)]
    a, b = recorded.get("body"), request.get("body")
    if isinstance(a, dict) and isinstance(b, dict):
        parts += sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    elif a != b:
        parts.append("body")
    return parts


# --------------------------------------------------------------------------- the transport


class RecordingTransport:
    """The part shared by the ``httpx`` and ``httpx2`` transports below: replay or record
    inside a trial, send as is outside one."""

    def __init__(self, inner: Any, response_class: Callable[..., Any]) -> None:
        self._inner = inner
        self._response_class = response_class

    async def _handle(self, request: Any) -> Any:
        tape = _CURRENT.get()
        if tape is None:
            return await self._inner.handle_async_request(request)

        def respond(status: int, headers: dict[str, str], raw: bytes) -> Any:
            return self._response_class(status, headers=headers, content=raw, request=request)

        return await tape.exchange(request, lambda: self._inner.handle_async_request(request), respond)


def httpx_client(timeout: float, limits: Any) -> Any:
    """An ``httpx.AsyncClient`` for the OpenAI-compatible and HTTP step adapters: through a
    recording transport when recording is on, else the plain client they always used."""
    import httpx

    if _SETTINGS is None:
        return httpx.AsyncClient(timeout=timeout, limits=limits)

    class _Transport(httpx.AsyncBaseTransport, RecordingTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response: httpx.Response = await self._handle(request)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx.AsyncClient(timeout=timeout, transport=_Transport(httpx.AsyncHTTPTransport(limits=limits),
                                                                  httpx.Response))


def anthropic_http_client() -> Any:
    """The ``http_client`` for ``anthropic.AsyncAnthropic``: None (the SDK's own) when
    recording is off, else the SDK's default client over a recording transport (the SDK
    talks through ``httpx2``)."""
    if _SETTINGS is None:
        return None
    import anthropic
    import httpx2
    from anthropic._constants import DEFAULT_CONNECTION_LIMITS

    class _Transport(httpx2.AsyncBaseTransport, RecordingTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response: httpx2.Response = await self._handle(request)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    inner = httpx2.AsyncHTTPTransport(limits=DEFAULT_CONNECTION_LIMITS)
    return anthropic.DefaultAsyncHttpxClient(transport=_Transport(inner, httpx2.Response))


# --------------------------------------------------------------------------- the files


def _read_cached(path: Path, shown: str, domain: str, task: str) -> dict[str, Any] | None:
    """:func:`read_file`, parsed once per version of the file (its size and modification
    time): the k trials of a task read the same file, which holds every trial's
    conversations. Readers never change what it returns."""
    try:
        st = path.stat()
    except OSError:
        return read_file(path, shown, domain, task)
    version = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _READ_LOCK:
        hit = _READ.get(path)
    if hit is not None and hit[0] == version:
        return hit[1]
    doc = read_file(path, shown, domain, task)
    with _READ_LOCK:
        _READ[path] = (version, doc)
    return doc


def _remember(path: Path, doc: dict[str, Any]) -> None:
    """Cache what was just written (the next trial of the task need not parse it again)."""
    st = path.stat()
    with _READ_LOCK:
        _READ[path] = ((st.st_mtime_ns, st.st_size, st.st_ino), doc)


def read_file(path: Path, shown: str, domain: str, task: str) -> dict[str, Any] | None:
    """A task's recording file, checked; None when there is none. Only a regular file of
    at most :data:`MAX_FILE_BYTES` is read."""
    again = "delete it, or record it again with --sandtable-record=all"
    try:
        text = read_regular(path, MAX_FILE_BYTES, "a recording").decode("utf-8")
    except FileNotFoundError:
        return None
    except FileRefused as e:
        raise RecordingError(f"{shown}: cannot read the recording: {e}; {again}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RecordingError(f"{shown}: cannot read the recording: {e}") from None
    try:
        doc = json.loads(text)
    except ValueError as e:  # also an integer of more digits than Python reads
        raise RecordingError(f"{shown}: not a recording: invalid JSON ({e}); {again}") from None
    except RecursionError:
        raise RecordingError(f"{shown}: not a recording: nested too deeply to read; {again}") from None
    problem = _shape_problem(doc, domain, task)
    if problem:
        raise RecordingError(f"{shown}: {problem}")
    checked: dict[str, Any] = doc
    return checked


def _shape_problem(doc: Any, domain: str, task: str) -> str:
    """What is wrong with a recording file's content, or ''."""
    again = "; record it again with --sandtable-record=all"
    if not isinstance(doc, dict):
        return f"not a recording: expected a JSON object{again}"
    fmt = doc.get("format")
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT:
        return f"recording format {fmt}; this pytest-sandtable reads format {FORMAT}: upgrade it"
    if fmt != FORMAT:
        return f"'format' must be {FORMAT}, got {json.dumps(fmt)}{again}"
    if doc.get("domain") != domain or doc.get("task") != task:
        return (f"recorded for domain {json.dumps(doc.get('domain'))} task {json.dumps(doc.get('task'))}, "
                f"not domain {json.dumps(domain)} task {json.dumps(task)}{again}")
    trials = doc.get("trials")
    if not isinstance(trials, dict):
        return f"'trials' must be an object of trial number -> exchanges{again}"
    for n, entries in trials.items():
        if not n.isdigit() or not isinstance(entries, list):
            return f"trials.{n}: expected a trial number with an array of exchanges{again}"
        for i, e in enumerate(entries):
            problem = _exchange_problem(e)
            if problem:
                return f"trials.{n}[{i}]: {problem}{again}"
    return ""


def _exchange_problem(e: Any) -> str:
    if not isinstance(e, dict) or not isinstance(e.get("request"), dict) or not isinstance(e.get("response"), dict):
        return "expected an object with 'request' and 'response' objects"
    req, resp = e["request"], e["response"]
    if not isinstance(req.get("method"), str) or not isinstance(req.get("path"), str) or "body" not in req:
        return "request must have 'method', 'path' and 'body'"
    status = resp.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        return "response.status must be an HTTP status"
    if not isinstance(resp.get("content_type"), str) or "body" not in resp:
        return "response must have 'content_type' and 'body'"
    return ""


_IN_PROCESS = threading.Lock()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold the folder's lock: trials of one process (threads) and of other processes
    (xdist workers) update a task's file one at a time."""
    with _IN_PROCESS:
        if sys.platform == "win32":  # a lock file beside the recordings
            import msvcrt

            with open(folder / ".sandtable-recording.lock", "a+b") as f:
                msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                try:
                    yield
                finally:
                    f.seek(0)
                    msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        else:  # flock on the folder itself: nothing extra lies beside the recordings
            import fcntl

            fd = os.open(folder, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock


def render(doc: Mapping[str, Any]) -> str:
    """A recording file's text: keys sorted, two-space indents, one final newline."""
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def update_file(path: Path, shown: str, domain: str, task: str, trial: int, entries: list[dict[str, Any]]) -> None:
    """Set one trial's exchanges in its task's file: read again under the lock (another
    worker may have added its trials meanwhile), changed, written to a temporary file
    in the same folder and renamed over the old one, so a reader never sees half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.parent):
            old = _read_cached(path, shown, domain, task) or {"format": FORMAT, "domain": domain, "task": task,
                                                               "trials": {}}
            doc = {**old, "trials": {**old["trials"], str(trial): entries}}  # the cached one stays as it is
            write_atomic(path, render(doc).encode("utf-8"))
            _remember(path, doc)
    except OSError as e:
        raise RecordingError(f"{shown}: cannot write the recording: {e}") from None
