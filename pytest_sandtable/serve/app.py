"""The ASGI app of one served trial: REST routes per tool, the OpenAPI document, and
MCP over streamable HTTP at ``/mcp`` (:mod:`.mcp_http`, on starlette: no ``mcp``
package), all under the trial's secret path prefix.

Both protocols hand every call to the same ``call`` function (the trial's
``served_call``), which runs synchronously: a call is never interrupted half-way (a
client that disconnects mid-call leaves it done or not done, never half done).

Only the agent should reach a trial's tools, not a web page in a browser on the same
machine: :class:`_Guard` answers every request whose Host is not this server (DNS
rebinding) with ``421``, one from a foreign Origin (a cross-origin page) with
``403``, and one outside ``/t/<token>`` (the URLs handed to the agent) with ``404``;
a REST call with a body must say ``Content-Type: application/json`` (``415``: a page
can send ``text/plain`` without asking), and a body over :data:`MAX_BODY` bytes is
refused with ``413`` before it is read whole. None of these reach the trial: its call
log never holds them.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ..engine.api import ToolResult, ToolSpec
from .mcp_http import McpEndpoint
from .openapi import openapi_document

ToolCall = Callable[[str, Any], ToolResult]
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 8 * 1024 * 1024
"""The largest request body a served world reads, in bytes (8 MiB), over REST and MCP alike:
a larger one gets ``413``."""


def build_app(tools: list[ToolSpec], call: ToolCall, title: str, base_url: str, *, prefix: str,
              port: int) -> _Guard:
    """The app serving ``tools`` through ``call``, with ``title`` naming it (the trial),
    reached at ``base_url`` (``http://127.0.0.1:<port><prefix>``): every route under
    ``prefix`` (``/t/<token>``), and only for requests to this server from no foreign origin."""
    from .. import __version__

    mcp = McpEndpoint(tools, call, title, __version__, _read_body, _dumped)
    routes = [
        Route("/tools/{name:path}", _rest_call(tools, call), methods=["POST"]),
        Route("/tools", _tool_list(tools), methods=["GET"]),
        Route("/openapi.json", _openapi(tools, title, base_url), methods=["GET"]),
        Route("/mcp", mcp.endpoint, methods=["POST", "GET", "DELETE"]),
    ]
    return _Guard(Starlette(routes=routes), prefix, port)


class _Guard:
    """In front of every route: the Host must be this server, the Origin absent or this
    server, and the path under the trial's secret prefix, which is taken off before the
    routes see it. The lifespan passes through."""

    def __init__(self, app: Any, prefix: str, port: int) -> None:
        self.app = app
        self.prefix = prefix
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{host}" for host in self.hosts}
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers") or ()}
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin")
        if host not in self.hosts:
            await _refuse(send, 421, f"the Host header {host!r} is not this server (127.0.0.1:{self.port})")
            return
        if origin is not None and origin.decode("latin-1") not in self.origins:
            await _refuse(send, 403, f"requests from the origin {origin.decode('latin-1')!r} are refused: "
                                     "only the agent may call a trial's tools")
            return
        path: str = scope["path"]
        inside = path[len(self.prefix):]
        if not (hmac.compare_digest(path[:len(self.prefix)], self.prefix) and (inside == "" or inside[0] == "/")):
            await _refuse(send, 404, "not found: a trial's tools are at the URLs handed to its agent")
            return
        scope = dict(scope, path=inside or "/", raw_path=(inside or "/").encode("latin-1", "replace"))
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    """Answer a request with the error body every route uses, before the routes see it."""
    body = _dumped({"error": status, "message": message}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def status_of(result: ToolResult) -> int:
    """The HTTP status of a tool's result: its error code when that is an HTTP error
    status, else 400 (a domain may give a check any code)."""
    if result.ok:
        return 200
    code = result.error
    return code if isinstance(code, int) and 400 <= code <= 599 else 400


def error_body(result: ToolResult, tools: list[ToolSpec]) -> dict[str, Any]:
    body: dict[str, Any] = {"error": result.error, "message": result.message}
    if result.error == 404 and (result.message or "").startswith("unknown tool "):
        body["tools"] = [t.name for t in tools]
    return body


def _rest_call(tools: list[ToolSpec], call: ToolCall) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        refused = await _read_body(request)
        if isinstance(refused, Response):
            return refused
        # the body goes to the engine as JSON text: it parses and checks it like any
        # call's arguments, so bad JSON is the engine's 400, in the call log as well
        text = refused.decode("utf-8", errors="replace")
        result = call(request.path_params["name"], text)
        if result.ok:
            return _json(result.value, 200)
        return _json(error_body(result, tools), status_of(result))

    return endpoint


async def _read_body(request: Request) -> bytes | Response:
    """The body of a REST call, or the answer refusing it: ``413`` when it is over
    :data:`MAX_BODY` bytes (by its Content-Length at once, else counted as it streams in),
    ``415`` when a body comes without ``Content-Type: application/json``."""
    declared = request.headers.get("content-length")
    too_big = _json({"error": 413, "message": f"the request body is over {MAX_BODY:,} bytes"}, 413)
    if declared is not None and declared.strip().isdigit() and int(declared) > MAX_BODY:
        return too_big
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                return too_big
            chunks.append(chunk)
    except ClientDisconnect:  # the client went before its body came: no call runs, nobody reads the answer
        return Response(status_code=400)
    body = b"".join(chunks)
    kind = request.headers.get("content-type", "")
    if (body or kind) and kind.split(";")[0].strip().lower() != "application/json":
        return _json({"error": 415, "message": f"the request body must be JSON sent as Content-Type: "
                      f"application/json, not {kind or 'no Content-Type'}"}, 415)
    return body


def _tool_list(tools: list[ToolSpec]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        return _json([{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                      for t in tools], 200)

    return endpoint


def _openapi(tools: list[ToolSpec], title: str, base_url: str) -> Callable[[Request], Any]:
    doc = openapi_document(tools, title, base_url)

    async def endpoint(request: Request) -> Response:
        return _json(doc, 200)

    return endpoint


def _json(value: Any, status: int) -> Response:
    return Response(_dumped(value), status_code=status, media_type="application/json")


def _dumped(value: Any) -> str:
    """``value`` as JSON text that UTF-8 can carry. default=str as ToolResult.to_json: a
    domain's values may be dates or decimals. A lone surrogate (an agent sent
    ``"\\ud800"``, and a message or value repeats it) is written as its ``\\u`` escape,
    so the agent reads back the string ``turn.call_tool`` would have given it."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if _encodable(text) else json.dumps(value, default=str)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
