"""Local fake servers for the adapter tests: no key, no internet.

Each server listens on 127.0.0.1 on an ephemeral port (a ThreadingHTTPServer in a
daemon thread), answers POSTs to its one path from a *script* given by the test, and
records every request it got. They speak the real wire formats, so the real
``anthropic`` SDK and ``httpx`` talk to them unchanged:

- :class:`FakeAnthropic`: ``POST /v1/messages`` (content blocks ``text`` / ``tool_use``,
  ``stop_reason``, ``usage`` with the cache fields, ``request-id`` headers, error bodies
  ``{"type": "error", "error": {...}}``); point the SDK at ``server.base_url``.
- :class:`FakeOpenAI`: ``POST /v1/chat/completions`` (``tool_calls`` with JSON-string
  arguments, ``usage`` with ``prompt_tokens_details.cached_tokens``, error bodies
  ``{"error": {...}}``); ``server.base_url`` ends in ``/v1``.
- :class:`FakeStepService`: ``POST /step`` for the HTTP step agent.

A script is a list of actions (or callables taking the :class:`Request` and returning
one), used in order:

- :class:`Reply` (JSON) and :class:`RawBody` (any bytes, any content type);
- :class:`Delay` (wait, then do another action: a slow server);
- :class:`Hang` (hold the request, then close without answering) and :class:`Drop`
  (close the connection without answering);
- :class:`Cut` (send the headers and part of the body, then close or reset the
  connection);
- :class:`Trickle` (send a byte now and then, for ever: the status line and headers,
  or a body that never ends).

With ``keep_alive=True`` a server speaks HTTP/1.1 and keeps each connection open
for the next request, as the real APIs do (a client's connection pool reuses it).

Past the end of the script the server answers from its ``responder`` if it has one
(a function of the request, for trials running at once), else 500 ``fake server:
script exhausted``. :class:`Blackhole` is a port that accepts connections and never
reads from them.

The helpers below build the variations real servers produce (``content`` null or a
list of parts, ``arguments`` as an object or empty, tool calls without ids, the legacy
``function_call``, ``usage`` missing or null, thinking blocks, ...); pass :data:`OMIT`
to leave a field out and ``None`` to send it as null.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pytest_sandtable as st


@dataclass
class Request:
    """A request the fake got."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """Answer with a JSON body."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RawBody:
    """Answer with these bytes as they are."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Hold the request for ``seconds`` (or until the server stops), then close without answering."""

    seconds: float = 30.0


@dataclass
class Drop:
    """Close the connection without answering."""


@dataclass
class Cut:
    """Send the status, the headers (with the whole body's length) and the first ``keep``
    bytes of ``body`` (JSON unless bytes), then close the connection, with a reset
    (RST) when ``reset``."""

    body: Any
    keep: int = 10
    status: int = 200
    reset: bool = False
    content_type: str = "application/json"


@dataclass
class Trickle:
    """Send a byte every ``interval`` seconds until the client gives up or the server
    stops: the status line and endless headers when ``headers``, else the headers of
    a 1 MB JSON body and then that body, a space at a time; with ``stream``, an event
    stream that sends those bytes every ``interval`` seconds and never ends."""

    interval: float = 0.05
    headers: bool = False
    stream: bytes | None = None  # else: an event stream (text/event-stream) of these bytes, sent again and again


@dataclass
class Delay:
    """Wait ``seconds``, then do ``then``."""

    seconds: float
    then: Any  # an Action


S = TypeVar("S", bound="FakeServer")
Action = Reply | RawBody | Hang | Drop | Cut | Trickle | Delay
Step = Action | Callable[[Request], Action]


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()
"""Leave a field out of a body built by the helpers below (``None`` sends null)."""
DEFAULT: Any = object()
"""The helpers' default for ``usage``: a plausible usage object."""


def _put(body: dict[str, Any], key: str, value: Any) -> None:
    if value is not OMIT:
        body[key] = value


class Blackhole:
    """A port on 127.0.0.1 that accepts TCP connections (the kernel completes the
    handshake) and never reads or answers; use as a context manager."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._sock.close()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._sock.getsockname()[1]}"


class FakeServer:
    """A scripted HTTP server on 127.0.0.1; use as a context manager."""

    path = "/"

    def __init__(self, script: Iterable[Step] = (), responder: Callable[[Request], Action] | None = None,
                 *, keep_alive: bool = False) -> None:
        self.script: list[Step] = list(script)
        # HTTP/1.1 with connections kept open between requests, as the real APIs do (a
        # client's pool then reuses them: what breaks a client used from two event loops)
        self.keep_alive = keep_alive
        self.responder = responder  # answers once the script is used up (for trials in flight at once)
        self.requests: list[Request] = []
        self.connections = 0  # TCP connections accepted (fewer than requests with keep_alive)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.socket.listen(128)  # a proxy's 32 trials in flight connect at once (the default backlog: 5)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-server", daemon=True)

    # -- life ------------------------------------------------------------------------

    def __enter__(self: S) -> S:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``, as the adapters name the endpoint in messages."""
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}"

    def push(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self.script.extend(steps)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests, in order."""
        return [r.json for r in self.requests]

    def gaps(self) -> list[float]:
        """Seconds between consecutive requests."""
        return [b.at - a.at for a, b in itertools.pairwise(self.requests)]

    # -- answers -----------------------------------------------------------------------

    def error_body(self, status: int, message: str) -> Reply:
        return Reply({"error": message}, status)

    def next_id(self) -> int:
        return next(self._ids)

    def _next(self, req: Request) -> Action:
        with self._lock:
            self.requests.append(req)
            step = self.script.pop(0) if self.script else None
        if step is None:
            if self.responder is not None:
                return self.responder(req)
            return self.error_body(500, "fake server: script exhausted")
        return step(req) if callable(step) else step

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if fake.keep_alive else "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with fake._lock:
                    fake.connections += 1

            def handle(self) -> None:
                try:
                    super().handle()
                except (ConnectionResetError, BrokenPipeError):  # a kept connection the client dropped
                    pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                              time.monotonic())
                if self.path.split("?")[0] != fake.path:
                    with fake._lock:
                        fake.requests.append(req)  # recorded too, so a test sees where a client went
                    self._send(fake.error_body(404, f"fake server: no route {self.path}"))
                    return
                self._send(fake._next(req))

            do_GET = do_POST

            def _send(self, action: Action) -> None:
                if isinstance(action, Delay):
                    if fake._stop.wait(action.seconds):
                        self.close_connection = True
                        return
                    self._send(action.then)
                    return
                if isinstance(action, Drop):
                    self.close_connection = True
                    return
                if isinstance(action, Hang):
                    fake._stop.wait(action.seconds)
                    self.close_connection = True
                    return
                if isinstance(action, Cut):
                    self._cut(action)
                    return
                if isinstance(action, Trickle):
                    self._trickle(action)
                    return
                if isinstance(action, RawBody):
                    data, status, ctype, headers = action.body, action.status, action.content_type, action.headers
                else:
                    data = json.dumps(action.body).encode()
                    status, ctype, headers = action.status, "application/json", action.headers
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _cut(self, action: Cut) -> None:
                data = action.body if isinstance(action.body, bytes) else json.dumps(action.body).encode()
                self.close_connection = True
                try:
                    self.send_response(action.status)
                    self.send_header("content-type", action.content_type)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: action.keep])
                    self.wfile.flush()
                    time.sleep(0.05)
                    if action.reset:
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                except OSError:
                    pass

            def _trickle(self, action: Trickle) -> None:
                self.close_connection = True
                try:
                    if action.stream is not None:
                        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                         b"connection: close\r\n\r\n")
                        chunk = action.stream
                    elif action.headers:
                        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                        chunk = b"x-pad: a\r\n"
                    else:
                        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                         b"content-length: 1000000\r\n\r\n{")
                        chunk = b" "
                    self.wfile.flush()
                    while not fake._stop.wait(action.interval):
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError:
                    pass

        return Handler


# -- Anthropic Messages -----------------------------------------------------------------


class FakeAnthropic(FakeServer):
    """``POST /v1/messages`` in the Anthropic wire format."""

    path = "/v1/messages"

    def error_body(self, status: int, message: str) -> Reply:
        etype = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                 429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return claude_error(status, etype, message)


def claude_usage(input_tokens: int = 10, output_tokens: int = 5, cache_read: int = 0,
                 cache_write: int = 0) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read}


_msg_ids = itertools.count(1)


def claude_message(content: list[dict[str, Any]], stop_reason: str | None, usage: Any = DEFAULT,
                   model: str = "claude-test") -> Reply:
    """A Messages response; ``usage`` defaults to :func:`claude_usage` (None sends null, ``OMIT``
    leaves it out)."""
    n = next(_msg_ids)
    body: dict[str, Any] = {"id": f"msg_fake{n:04d}", "type": "message", "role": "assistant", "model": model,
                            "content": content, "stop_reason": stop_reason, "stop_sequence": None}
    _put(body, "usage", claude_usage() if usage is DEFAULT else usage)
    return Reply(body, 200, {"request-id": f"req_fake{n:04d}"})


def claude_text(text: str, usage: Any = DEFAULT, stop_reason: str = "end_turn") -> Reply:
    """A message with one text block."""
    return claude_message([{"type": "text", "text": text}] if text else [], stop_reason, usage)


def claude_tools(*calls: tuple[str, str, dict[str, Any]], text: str = "",
                 usage: Any = DEFAULT, stop_reason: str = "tool_use") -> Reply:
    """A message asking for tool calls ``(id, name, input)``, with optional text first."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return claude_message(blocks, stop_reason, usage)


def sse(*events: tuple[str | None, Any]) -> bytes:
    """A server-sent events body: ``(event name or None, data)`` each, data as JSON unless a str."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def claude_stream(text: str, usage: Any = DEFAULT, model: str = "claude-test") -> RawBody:
    """A streamed Messages answer of one text block, as the API sends it: ``message_start``
    with the input side of ``usage``, deltas, ``message_delta`` with the output tokens."""
    u = claude_usage() if usage is DEFAULT else usage
    n = next(_msg_ids)
    start = {"id": f"msg_fake{n:04d}", "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": {**u, "output_tokens": 1}}
    half = len(text) // 2
    body = sse(("message_start", {"type": "message_start", "message": start}),
               ("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
               *(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": part}})
                 for part in (text[:half], text[half:])),
               ("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": u["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"}))
    return RawBody(body, content_type="text/event-stream", headers={"request-id": f"req_fake{n:04d}"})


def claude_thinking(thinking: str, signature: str = "sig-fake") -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def claude_error(status: int, etype: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An error in the Anthropic format, with a request id."""
    return Reply({"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_err001"},
                 status, {"request-id": "req_err001", **(headers or {})})


# -- OpenAI chat completions ------------------------------------------------------------


class FakeOpenAI(FakeServer):
    """``POST /v1/chat/completions`` in the OpenAI wire format; ``base_url`` ends in ``/v1``."""

    path = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}/v1"

    def error_body(self, status: int, message: str) -> Reply:
        return openai_error(status, message)


def openai_usage(prompt: int = 20, completion: int = 8, cached: int = 0) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def openai_message(message: dict[str, Any], finish_reason: Any, usage: Any = DEFAULT,
                   model: str = "gpt-test") -> Reply:
    """A chat completion; ``usage`` defaults to :func:`openai_usage` (None sends null, ``OMIT``
    leaves it out; likewise ``finish_reason``)."""
    n = next(_msg_ids)
    choice: dict[str, Any] = {"index": 0, "message": message}
    _put(choice, "finish_reason", finish_reason)
    body: dict[str, Any] = {"id": f"chatcmpl-fake{n:04d}", "object": "chat.completion", "created": 1_790_000_000,
                            "model": model, "choices": [choice]}
    _put(body, "usage", openai_usage() if usage is DEFAULT else usage)
    return Reply(body, 200, {"x-request-id": f"req_fake{n:04d}"})


def openai_text(text: Any, usage: Any = DEFAULT, finish_reason: Any = "stop", **message: Any) -> Reply:
    """A message with ``content`` (a string, None, or a list of parts) and any other fields."""
    return openai_message({"role": "assistant", "content": text, **message}, finish_reason, usage)


def openai_parts(*texts: str) -> list[dict[str, Any]]:
    """``content`` as a list of text parts."""
    return [{"type": "text", "text": t} for t in texts]


def openai_tools(*calls: tuple[Any, str, Any], text: Any = None, usage: Any = DEFAULT,
                 finish_reason: Any = "tool_calls", objects: bool = False) -> Reply:
    """A message asking for tool calls ``(id, name, arguments)``. A dict is sent as JSON
    text (as an object when ``objects``, as some servers do), anything else as it is
    (malformed text, ``""``, None); an id or arguments of ``OMIT`` is left out."""
    tool_calls = []
    for i, n, a in calls:
        fn: dict[str, Any] = {"name": n}
        _put(fn, "arguments", json.dumps(a) if isinstance(a, dict) and not objects else a)
        call: dict[str, Any] = {"type": "function", "function": fn}
        _put(call, "id", i)
        tool_calls.append(call)
    return openai_message({"role": "assistant", "content": text, "tool_calls": tool_calls}, finish_reason, usage)


def openai_function_call(name: str, arguments: dict[str, Any], usage: Any = DEFAULT) -> Reply:
    """The legacy ``function_call`` form of a call (``finish_reason: function_call``)."""
    return openai_message({"role": "assistant", "content": None,
                           "function_call": {"name": name, "arguments": json.dumps(arguments)}},
                          "function_call", usage)


def openai_stream(text: str, usage: Any = DEFAULT, model: str = "gpt-test") -> RawBody:
    """A streamed chat completion, as the API sends it: chunks of ``text``, then the finish,
    then (as with ``stream_options.include_usage``) a last chunk with ``usage``, then ``[DONE]``;
    ``usage=None`` leaves the usage chunk out."""
    n = next(_msg_ids)
    head = {"id": f"chatcmpl-fake{n:04d}", "object": "chat.completion.chunk", "created": 1_790_000_000, "model": model}
    half = len(text) // 2
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [{**head, "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
               for part in (text[:half], text[half:])]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        chunks.append({**head, "choices": [], "usage": openai_usage() if usage is DEFAULT else usage})
    return RawBody(sse(*((None, c) for c in chunks), (None, "[DONE]")), content_type="text/event-stream")


def openai_error(status: int, message: str, etype: str = "server_error",
                 headers: dict[str, str] | None = None) -> Reply:
    return Reply({"error": {"message": message, "type": etype, "param": None, "code": None}}, status,
                 dict(headers or {}))


# -- the HTTP step protocol ---------------------------------------------------------------


class FakeStepService(FakeServer):
    """``POST /step``; answers as scripted (see docs/http-protocol.md)."""

    path = "/step"

    @property
    def url(self) -> str:
        return f"http://{self.host}/step"


def step_calls(*calls: tuple[str, str, Any], **extra: Any) -> Reply:
    return Reply({"protocol": "sandtable-step/1",
                  "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls], **extra})


def step_reply(text: str, **extra: Any) -> Reply:
    return Reply({"protocol": "sandtable-step/1", "reply": text, **extra})


# -- a small domain -----------------------------------------------------------------------

SHOP = """\
version: 1
name: shop
description: Order desk of Juniper Lane Books, a fictional bookshop.
policy: |
  Look up an order before refunding it. Refund at most the order total.
world:
  orders:
    key: order_id
    rows:
      - { order_id: O-1001, customer: Ada Quill, total: 42.5, status: delivered }
  refunds:
    key: refund_id
    key_format: "R-{n}"
    fields: [order_id, amount]
tools:
  - name: get_order
    description: Look up an order by id.
    params:
      order_id: { type: string, description: The order id. }
    ops:
      - get: { table: orders, key: $order_id }
  - name: refund_order
    description: Refund an order.
    params:
      order_id: { type: string }
      amount: { type: number }
    checks:
      - { require: { table: orders, key: $order_id }, error: 404, message: "no order {order_id}" }
    ops:
      - create: { table: refunds, row: { order_id: $order_id, amount: $amount } }
      - update: { table: orders, key: $order_id, set: { status: refunded } }
  - name: transfer_to_human
    description: Hand the customer over to a person.
    params:
      reason: { type: string }
    handoff: true
    ops:
      - respond: { transferred: true }
invariants:
  - { id: lookup-before-refund, kind: before, first: get_order, then: refund_order, same: [order_id] }
tasks:
  - id: refund-delivered
    user:
      persona: Ada Quill, a regular customer.
      instructions: You want a refund of 42.50 for order O-1001.
    expect:
      state:
        - { table: refunds, where: { order_id: O-1001, amount: 42.5 }, count: 1 }
      called: [get_order]
  - id: opening-fixed
    max_turns: 3
    user:
      persona: Ada Quill, a regular customer.
      instructions: You want to know the status of order O-1001.
      opening: "Hi, where is my order O-1001?"
      script: ["Thanks, that's all."]
    expect:
      called: [get_order]
"""


def shop_domain(folder: Path, text: str = SHOP) -> st.Domain:
    """Write the shop domain to ``folder`` and load it."""
    from pytest_sandtable import load_domain

    path = folder / "shop.sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    return load_domain(path)


def runtime_details(result: Any) -> list[str]:
    """The details of a trial's failed ``runtime`` checks."""
    return [c.detail for c in result.checks if c.kind == "runtime" and not c.passed]


def roles(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]
