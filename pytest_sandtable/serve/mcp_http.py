"""MCP over streamable HTTP for one served trial, on starlette alone: the JSON-RPC of
``initialize``, ``ping``, ``tools/list``, ``tools/call`` and notifications (the
2025-06-18 revision, which the 2024-11-05, 2025-03-26 and 2025-11-25 handshakes read
the same way for these methods), without the ``mcp`` package.

So serving does not depend on the installed ``mcp`` version: clients of the 1.x line
(LangChain's and smolagents' adapters pin it) and of 2.x connect alike, and REST
never imports mcp. The server is stateless: it hands out no ``Mcp-Session-Id``, so a
client opens no ``GET`` stream (``GET`` and ``DELETE`` get ``405``), and every request
is answered with one JSON body (``application/json``), or an SSE event for a client
that accepts only ``text/event-stream``. A 2.x client's ``server/discover`` probe gets
"method not found", its signal to fall back to the ``initialize`` handshake.

A tool's result is its JSON text (and ``structuredContent`` when it is an object); a
tool's error is ``isError: true`` with the error said once, as text (``error 404: no
load L-9999``), its code and message also as ``structuredContent``: never a JSON
document inside the text for a client to decode again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..engine.api import ToolResult, ToolSpec

ToolCall = Callable[[str, Any], ToolResult]

PROTOCOL_VERSION = "2025-06-18"
"""The revision this server answers with when a client asks for one it does not know."""
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The handshake revisions a client may ask for and get: for tools, what this server
does is the same in each (fields a revision lacks are ignored by its clients)."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


class McpEndpoint:
    """The ``/mcp`` route of one served trial: every ``tools/call`` through ``call``."""

    def __init__(self, tools: list[ToolSpec], call: ToolCall, title: str, version: str,
                 read_body: Callable[[Request], Any], dumped: Callable[[Any], str]) -> None:
        self.tools = tools
        self.call = call
        self.listed = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in tools]
        self.info = {"name": f"sandtable {title}", "version": version}
        self.read_body = read_body  # the REST routes' own: 413 past the limit, 415 for a body not sent as JSON
        self.dumped = dumped

    async def endpoint(self, request: Request) -> Response:
        if request.method != "POST":
            # stateless: no stream of server messages to GET, no session to DELETE
            return Response(status_code=405, headers={"allow": "POST"})
        body = await self.read_body(request)
        if isinstance(body, Response):
            return body
        try:
            message = json.loads(body)
        except ValueError as e:  # (UnicodeDecodeError too)
            return self._answer(request, _error(None, PARSE_ERROR, f"Parse error: {e}"), 400)
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            return self._answer(request, _error(None, INVALID_REQUEST, f"Unsupported protocol version: {version} "
                                                f"(this server speaks {', '.join(PROTOCOL_VERSIONS)})"), 400)
        if isinstance(message, list):  # a batch (2025-03-26): answered as one
            answers = [a for a in (self._handle(m) for m in message) if a is not None]
            if not message:
                return self._answer(request, _error(None, INVALID_REQUEST, "Invalid Request: an empty batch"), 400)
            return self._answer(request, answers, 200) if answers else Response(status_code=202)
        answer = self._handle(message)
        if answer is None:  # a notification, or a client's response: accepted, nothing to say
            return Response(status_code=202)
        return self._answer(request, answer, 200)

    def _handle(self, message: Any) -> dict[str, Any] | None:
        """The JSON-RPC answer to one message, or None for one that gets none."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 message")
        method = message.get("method")
        if "id" not in message:
            if method is None and ("result" in message or "error" in message):
                return None  # a response to a request of ours: there are none
            return None if isinstance(method, str) else _error(None, INVALID_REQUEST, "Invalid Request: no method")
        rid = message["id"]
        if not isinstance(method, str):
            return _error(rid, INVALID_REQUEST, "Invalid Request: no method")
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return _error(rid, INVALID_PARAMS, "Invalid params: expected an object")
        params = params or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            return _result(rid, {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": self.info,
            })
        if method == "ping":
            return _result(rid, {})
        if method == "tools/list":
            return _result(rid, {"tools": self.listed})
        if method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str):
                return _error(rid, INVALID_PARAMS, "Invalid params: tools/call needs the tool's name")
            arguments = params.get("arguments")
            return _result(rid, self._tool_result(self.call(name, arguments if arguments is not None else {})))
        return _error(rid, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _tool_result(self, result: ToolResult) -> dict[str, Any]:
        if result.ok:
            # the same JSON values as the text (a domain's dates and decimals as strings)
            text = self.dumped(json.loads(result.to_json()))
            out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
            if isinstance(result.value, dict):
                out["structuredContent"] = json.loads(text)
            return out
        structured: dict[str, Any] = {"error": result.error, "message": result.message}
        if result.error == 404 and (result.message or "").startswith("unknown tool "):
            structured["tools"] = [t.name for t in self.tools]
        return {"content": [{"type": "text", "text": f"error {result.error}: {result.message}"}],
                "structuredContent": structured, "isError": True}

    def _answer(self, request: Request, answer: Any, status: int) -> Response:
        text = self.dumped(answer)
        accept = request.headers.get("accept", "")
        if "text/event-stream" in accept and "application/json" not in accept and "*/*" not in accept:
            return Response(f"event: message\ndata: {text}\n\n", status_code=status, media_type="text/event-stream")
        return Response(text, status_code=status, media_type="application/json")


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
