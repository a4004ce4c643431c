"""The model proxy: a local endpoint on 127.0.0.1, OpenAI- and Anthropic-compatible,
that forwards each request to a target base URL and counts, per trial, what passed.

A trial gets URLs of its own, ``http://127.0.0.1:<port>/t/<token>/<kind>`` (``kind``
one of the proxy's targets, e.g. ``openai`` and ``anthropic``), made new for it: the
token attributes every request to its trial, whatever thread, process or event loop
sends it, at any concurrency. The rest of the path and the query go to the target as
they came (``/t/<token>/openai/chat/completions`` → ``<openai target>/chat/completions``).
Headers pass as they are (the agent's API key included) but for the hop-by-hop ones
and ``Accept-Encoding`` (the answer is read as it passes: asked for uncompressed).

An answer is passed on as it arrives: a streamed one (``text/event-stream``) chunk by
chunk, so the agent's stream stays a stream. Its tokens (:mod:`.usage`) and the time
from the request to the answer's end are added to the trial's :class:`ProxiedTrial`.
A target that refuses or times out gets ``502`` / ``504`` in the target's own error
format, naming the target; a target that cuts its answer short is cut short to the
agent as well (the connection closed mid-answer), and counted as an error.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import httpx

from ..engine.api import Usage
from .usage import Counted, StreamCounter, count_body

if TYPE_CHECKING:
    from ..adapters.recording import Tape

HOST = "127.0.0.1"
MAX_BODY = 32 * 1024 * 1024
"""The largest request body the proxy forwards, in bytes (32 MiB): a larger one gets ``413``."""

# not forwarded either way (RFC 9110 hop-by-hop fields, and what the proxy sets itself)
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
                  "host", "content-length", "accept-encoding", "content-encoding"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # trials in flight connect at once: the default backlog of 5 resets them


class ProxiedTrial:
    """One trial's share of the proxy: its URLs, and what its requests used. ``usage``
    is a :class:`~pytest_sandtable.Usage` (tokens per model, calls); ``latency`` the
    seconds of each answered request; ``errors`` what went wrong on the way (a target
    that refused, an answer cut short)."""

    def __init__(self, proxy: ModelProxy, trial_id: str, token: str, tape: Tape | None = None) -> None:
        self.proxy = proxy
        self.trial_id = trial_id
        self.token = token
        # --sandtable-record's tape of this trial (adapters.recording): its requests replayed
        # from the task's recording file, or sent and kept, as the adapters' are
        self.tape = tape
        self.tape_lock = threading.Lock()
        self.usage = Usage()
        self.latency: list[float] = []
        self.errors: list[str] = []
        self.requests = 0
        self.refused: str | None = None  # why the proxy refused a request of this trial (ModelProxy.refuse)
        self.closed = False  # the trial ended: an answer still coming is cut off
        self._lock = threading.Lock()

    def base_url(self, kind: str) -> str:
        """The base URL this trial's agent is given for the target ``kind``."""
        if kind not in self.proxy.targets:
            raise KeyError(f"the model proxy has no target {kind!r} (it has {', '.join(self.proxy.targets)})")
        return f"{self.proxy.url}/t/{self.token}/{kind}"

    def env(self) -> dict[str, str]:
        """The environment variables the SDKs read, pointed at this trial's URLs:
        ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` for the targets of those names."""
        names = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
        return {names[k]: self.base_url(k) for k in self.proxy.targets if k in names}

    def transport(self, kind: str, sync: bool = False, lib: Any = None) -> Any:
        """An HTTP transport (``httpx2``'s when installed, else ``httpx``'s; ``lib`` names
        the module) that sends each request to this trial's route for ``kind``, whatever
        URL its client asked for (:func:`route_transport`)."""
        return route_transport(self.base_url(kind), self.proxy.targets[kind], sync, lib)

    def cost(self, prices: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float | None]:
        """Estimated USD per model (the shipped price table unless ``prices``); None for a
        model the table lacks (the reports show ``n/a``)."""
        from ..report.prices import all_prices, estimate_cost

        return estimate_cost(self.usage.to_dict(), prices if prices is not None else all_prices())

    def close(self) -> None:
        """The trial's URLs answer ``404`` from now on, and an answer still coming to one
        of its requests is cut off at its next chunk."""
        self.closed = True
        self.proxy._forget(self.token)

    def _counted(self, counted: Counted, seconds: float, error: str | None, refused: bool = False) -> None:
        with self._lock:
            self.requests += 1
            if refused and self.refused is None:
                self.refused = error
            if counted.tokens is not None:
                self.usage.add(counted.model, *counted.tokens)
            if error is None:
                self.latency.append(round(seconds, 6))
            else:
                self.errors.append(error)


class ModelProxy:
    """The proxy: ``targets`` maps a kind (``openai``, ``anthropic``, any name) to the
    base URL it forwards to. Use as a context manager, or :meth:`start` and :meth:`close`;
    :meth:`open_trial` gives each trial its URLs and counts."""

    def __init__(self, targets: Mapping[str, str], *, timeout: float = 600.0, connect_timeout: float = 10.0,
                 refuse: Callable[[], str | None] | None = None) -> None:
        if not targets:
            raise ValueError("the model proxy needs at least one target")
        self.targets = {k: v.rstrip("/") for k, v in targets.items()}
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        # a whole answer's deadline too: a target that trickles a byte now and then never
        # trips a read's timeout, but is cut off ``timeout`` seconds after the request came
        self.deadline = timeout
        # asked before each request is sent: why it may not be (a budget spent), or None;
        # a refused request gets 402 in the target's format and is never sent
        self.refuse = refuse
        self._trials: dict[str, ProxiedTrial] = {}
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=self.timeout, follow_redirects=False,
                                    limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
        self._server = _Server((HOST, 0), _handler(self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> ModelProxy:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="sandtable-model-proxy", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def __enter__(self) -> ModelProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open_trial(self, trial_id: str, tape: Tape | None = None) -> ProxiedTrial:
        """URLs of their own for the trial ``trial_id``, and its counts. With ``tape`` (a
        trial's :class:`~pytest_sandtable.adapters.recording.Tape`), its requests are
        replayed and recorded through it, as the adapters' are; a request the recording
        lacks in a mode that only replays gets the tape's ``412`` and its message
        (``tape.miss``). A recorded exchange is passed on whole (a stream too)."""
        token = secrets.token_urlsafe(16)
        trial = ProxiedTrial(self, trial_id, token, tape)
        with self._lock:
            self._trials[token] = trial
        return trial

    def _forget(self, token: str) -> None:
        with self._lock:
            self._trials.pop(token, None)

    def _route(self, target: str) -> tuple[ProxiedTrial | None, str, str]:
        """The trial, the target kind and the upstream URL of a request's target
        (``/t/<token>/<kind>/<rest>?<query>``); no trial for a path that names none open."""
        path, _, query = target.partition("?")
        parts = path.split("/", 4)  # "", "t", token, kind, rest
        kind = parts[3] if len(parts) > 3 else ""
        if len(parts) < 4 or parts[0] or parts[1] != "t" or kind not in self.targets:
            return None, kind, ""
        with self._lock:
            trial = self._trials.get(parts[2])
        rest = parts[4] if len(parts) > 4 else ""
        upstream = self.targets[kind] + (f"/{rest}" if rest else "") + (f"?{query}" if query else "")
        return trial, kind, upstream


class _Late(Exception):
    """An answer that was not whole by the proxy's deadline, or whose trial ended first."""


class _Deadline:
    """When a request's answer must be whole: ``seconds`` after the request came, and
    before its trial ends (an abandoned agent's call is not read on for ever)."""

    def __init__(self, trial: ProxiedTrial, upstream: str, t0: float, seconds: float) -> None:
        self.trial = trial
        self.where = _where(upstream)
        self.at = t0 + seconds
        self.seconds = seconds

    def paced(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """``chunks`` as they come, until the deadline or the trial's end (then :class:`_Late`)."""
        for chunk in chunks:
            if self.trial.closed:
                raise _Late(f"{self.where} was still answering when the trial ended: the answer was cut off")
            if time.perf_counter() > self.at:
                raise _Late(f"{self.where} did not finish its answer in {self.seconds:g} s "
                            "(the model proxy's deadline): the answer was cut off")
            yield chunk


def error_body(kind: str, status: int, message: str) -> bytes:
    """An error in the wire format of the target ``kind`` (Anthropic's for ``anthropic``,
    else OpenAI's), so the agent's SDK raises its own error type with this message."""
    if kind == "anthropic":
        etype = {400: "invalid_request_error", 402: "billing_error", 403: "permission_error", 404: "not_found_error",
                 413: "request_too_large", 421: "invalid_request_error"}.get(status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": etype, "message": message}}
    else:
        body = {"error": {"message": message, "type": "proxy_error", "param": None, "code": None}}
    return json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    """One request to the proxy: refused, answered with an error, or forwarded to its
    target and the answer passed on as it comes. :func:`_handler` makes a subclass
    bound to one :class:`ModelProxy`."""

    proxy: ModelProxy
    protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._forward()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def _send_error(self, kind: str, status: int, message: str) -> None:
        data = error_body(kind, status, f"sandtable model proxy: {message}")
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            if self.close_connection:  # its body was not read: the client must not send another on it
                self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _forward(self) -> None:
        t0 = time.perf_counter()
        trial, kind, upstream = self.proxy._route(self.path)
        refused = _refused_caller(self.headers, self.proxy.port)
        if refused is not None:
            self.close_connection = True  # the body is not read: the connection cannot carry on
            self._send_error(kind, *refused)
            return
        body = self._body(kind)
        if body is None:
            return
        if trial is None:
            self._send_error(kind, 404, "no trial at this URL (its trial ended, or it is not a URL "
                                        "the run handed out)")
            return
        counted = Counted()
        why = self.proxy.refuse() if self.proxy.refuse is not None else None
        if why is not None:
            trial._counted(counted, 0.0, why, refused=True)
            self._send_error(kind, 402, why)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["accept-encoding"] = "identity"
        try:
            request = self.proxy._client.build_request(self.command, upstream, headers=headers, content=body)
            if trial.tape is None:
                response = self.proxy._client.send(request, stream=True)
            else:
                with trial.tape_lock:  # a tape takes one exchange at a time, in order
                    response = asyncio.run(_taped(trial.tape, request, self.proxy.timeout))
        except httpx.TimeoutException:
            trial._counted(counted, 0.0, f"{_where(upstream)} timed out")
            self._send_error(kind, 504, f"{_where(upstream)} did not answer in time")
            return
        except httpx.HTTPError as e:
            trial._counted(counted, 0.0, f"{_where(upstream)} refused: {type(e).__name__}")
            self._send_error(kind, 502, f"could not reach {_where(upstream)}: {type(e).__name__}: {e}")
            return
        counted_once: list[bool] = []

        def count(error: str | None) -> None:
            # before the answer's last bytes go out: the agent, answered, may end its trial
            # at once, and the trial's counts are read then
            if not counted_once:
                counted_once.append(True)
                trial._counted(counted, time.perf_counter() - t0, error)

        try:
            count(self._relay(response, counted, count, kind, _Deadline(trial, upstream, t0, self.proxy.deadline)))
        finally:
            response.close()

    def _body(self, kind: str) -> bytes | None:
        """The request's body, by its Content-Length or its chunks; None once the
        request is answered: ``400`` for a length that is not a number of bytes (``-1``,
        ``abc``, two lengths that differ, a length beside chunks), ``413`` past
        :data:`MAX_BODY`. The connection is closed after either: its body is not read."""
        lengths = self.headers.get_all("content-length") or []
        chunked = "chunked" in (self.headers.get("transfer-encoding") or "").lower()
        problem: tuple[int, str] | None = None
        data = b""
        if chunked and lengths:
            problem = (400, "the request has both a Content-Length and chunks (Transfer-Encoding: chunked)")
        elif chunked:
            data, problem = _read_chunks(self.rfile)
        elif lengths:
            declared = {v.strip() for v in lengths}
            text = lengths[0].strip()
            if len(declared) > 1 or not (text.isascii() and text.isdigit()):
                shown = ", ".join(repr(v) for v in lengths)
                problem = (400, f"the Content-Length header {shown[:80]} is not a number of bytes")
            elif int(text) > MAX_BODY:
                problem = (413, f"the request body is over {MAX_BODY:,} bytes")
            elif int(text):
                data = self.rfile.read(int(text))
        if problem is not None:
            self.close_connection = True
            self._send_error(kind, *problem)
            return None
        return data

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _relay(self, response: httpx.Response, counted: Counted, count: Callable[[str | None], None],
               kind: str, late: _Deadline) -> str | None:
        """Pass the answer on, counting it (``count`` called before its last bytes are
        written, when it went through whole); what went wrong, or None. An answer not
        whole by ``late``'s deadline, or whose trial ended meanwhile, is cut off there."""
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        # (a replayed or recorded answer is whole in memory already)
        chunks = [response.content] if response.is_stream_consumed else response.iter_raw()
        try:
            if not streamed:
                try:
                    data = b"".join(late.paced(chunks))
                except _Late as e:
                    self.close_connection = True
                    self._send_error(kind, 504, str(e))
                    return str(e)
                found = count_body(data)
                counted.model, counted.tokens = found.model, found.tokens
                count(None)
                self._head(response)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            self._head(response)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            return self._stream(late.paced(chunks), counted, count)
        except httpx.HTTPError as e:  # cut before its body was whole
            self.close_connection = True
            return f"the answer was cut short: {type(e).__name__}"
        except OSError:  # the agent went away
            self.close_connection = True
            return "the agent closed the connection"

    def _head(self, response: httpx.Response) -> None:
        # the target's Server and Date go on as they came: the proxy adds its own only
        # where the target sent none (send_response would add them beside the target's)
        self.send_response_only(response.status_code)
        for k, v in response.headers.multi_items():
            if k.lower() not in _HOP:
                self.send_header(k, v)
        if "server" not in response.headers:
            self.send_header("server", self.version_string())
        if "date" not in response.headers:
            self.send_header("date", self.date_time_string())

    def _stream(self, chunks: Iterator[bytes], counted: Counted, count: Callable[[str | None], None]) -> str | None:
        counter = StreamCounter()
        # each chunk goes on when the next arrives: the last one (with the stream's
        # end, after which the agent may end its trial) only once the answer is counted
        held = b""
        try:
            for chunk in chunks:
                counter.feed(chunk)
                if held:
                    self._chunk(held)
                held = chunk
        except (httpx.HTTPError, _Late) as e:  # the target cut its answer, or was too slow: so is the agent's
            found = counter.finish()
            counted.model, counted.tokens = found.model, found.tokens
            if held:
                self._chunk(held)
            self.close_connection = True
            return str(e) if isinstance(e, _Late) else f"the answer was cut short: {type(e).__name__}"
        found = counter.finish()
        counted.model, counted.tokens = found.model, found.tokens
        count(None)
        if held:
            self._chunk(held)
        self.wfile.write(b"0\r\n\r\n")
        return None


def _handler(proxy: ModelProxy) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"proxy": proxy})


async def _taped(tape: Tape, request: httpx.Request, timeout: httpx.Timeout) -> httpx.Response:
    """The answer to ``request`` through the trial's tape: replayed, or sent and kept."""
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:

        async def send() -> httpx.Response:
            return await client.send(request)

        def respond(status: int, headers: dict[str, str], raw: bytes) -> httpx.Response:
            return httpx.Response(status, headers=headers, content=raw, request=request)

        return await tape.exchange(request, send, respond)


def route_transport(route: str, target: str, sync: bool = False, lib: Any = None) -> Any:
    """A transport of ``lib`` (an httpx-like module: ``httpx2`` when installed, else
    ``httpx``) that sends every request to ``route`` (a trial's URL for a target on the
    proxy): the scheme, host and port become the route's, and the path the route's
    followed by the request's path less the target's own path (``/v1`` of
    ``https://api.openai.com/v1``), so a client left at the SDK's default URL, or at the
    target's, reaches the target through the proxy. The query stays as it was."""
    if lib is None:
        try:
            import httpx2 as lib
        except ImportError:
            lib = httpx
    to = lib.URL(route)
    base = to.path.rstrip("/")
    prefix = httpx.URL(target).path.rstrip("/")
    host = f"{to.host}:{to.port}" if to.port else to.host

    def rerouted(request: Any) -> Any:
        path = request.url.path
        if prefix and (path == prefix or path.startswith(prefix + "/")):
            path = path[len(prefix):]
        request.url = request.url.copy_with(scheme=to.scheme, host=to.host, port=to.port, path=base + path)
        request.headers["host"] = host
        return request

    if sync:
        class _Routed(lib.BaseTransport):  # type: ignore[name-defined,misc]
            def __init__(self) -> None:
                self._inner = lib.HTTPTransport()

            def handle_request(self, request: Any) -> Any:
                return self._inner.handle_request(rerouted(request))

            def close(self) -> None:
                self._inner.close()

        return _Routed()

    class _AsyncRouted(lib.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self._inner = lib.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            return await self._inner.handle_async_request(rerouted(request))

        async def aclose(self) -> None:
            await self._inner.aclose()

    return _AsyncRouted()


def _where(url: str) -> str:
    """The target's scheme, host and port, without a path or credentials."""
    u = httpx.URL(url)
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme}://{u.host}{port}"


def _refused_caller(headers: Any, port: int) -> tuple[int, str] | None:
    """Why a request may not reach the proxy, as the served world refuses one (serve/app.py's
    guard): ``421`` when its Host is not this proxy (a page's DNS rebinding), ``403`` when
    it comes from a foreign Origin (a page in a browser on the machine); None when it may."""
    hosts = {f"{HOST}:{port}", f"localhost:{port}"}
    host = headers.get("host") or ""
    if host not in hosts:
        return 421, f"the Host header {host[:80]!r} is not this proxy ({HOST}:{port})"
    origin = headers.get("origin")
    if origin is not None and origin not in {f"http://{h}" for h in hosts}:
        return 403, f"requests from the origin {origin[:80]!r} are refused: only the run's agents may use the proxy"
    return None


def _read_chunks(rfile: Any) -> tuple[bytes, tuple[int, str] | None]:
    """A chunked request body (RFC 9112 7.1) read from ``rfile``, and what is wrong with it:
    ``413`` once it is past :data:`MAX_BODY` (read no further), ``400`` for a chunk size
    that is not hexadecimal or a body that ends early."""
    parts: list[bytes] = []
    size = 0
    while True:
        line = rfile.readline(1026)
        text = line.split(b";", 1)[0].strip()
        if not line.endswith(b"\n") or not text or any(c not in b"0123456789abcdefABCDEF" for c in text):
            return b"", (400, "the request's chunked body is malformed")
        n = int(text, 16)
        if n == 0:
            break
        size += n
        if size > MAX_BODY:
            return b"", (413, f"the request body is over {MAX_BODY:,} bytes")
        data = rfile.read(n)
        if len(data) < n or rfile.readline(3) not in (b"\r\n", b"\n"):
            return b"", (400, "the request's chunked body is malformed")
        parts.append(data)
    for _ in range(100):  # the trailer fields, up to the empty line
        if rfile.readline(8194).strip() == b"":
            return b"".join(parts), None
    return b"", (400, "the request's chunked body is malformed")
