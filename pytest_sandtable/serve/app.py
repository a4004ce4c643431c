"""The ASGI app of one served trial: REST routes per tool, the OpenAPI document, and
MCP over streamable HTTP at ``/mcp``.

Both protocols hand every call to the same ``call`` function (the trial's
``served_call``), which runs synchronously: a call is never interrupted half-way (a
client that disconnects mid-call leaves it done or not done, never half done).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as mt
from mcp.server.lowlevel import Server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..engine.api import ToolResult, ToolSpec
from .openapi import openapi_document

ToolCall = Callable[[str, Any], ToolResult]


def build_app(tools: list[ToolSpec], call: ToolCall, title: str, base_url: str) -> Starlette:
    """The app serving ``tools`` through ``call``, with ``title`` naming it (the trial),
    reached at ``base_url``."""
    server = _mcp_server(tools, call, title)
    routes = [
        Route("/tools/{name:path}", _rest_call(tools, call), methods=["POST"]),
        Route("/tools", _tool_list(tools), methods=["GET"]),
        Route("/openapi.json", _openapi(tools, title, base_url), methods=["GET"]),
    ]
    return server.streamable_http_app(custom_starlette_routes=routes, json_response=False)


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
        # the body goes to the engine as JSON text: it parses and checks it like any
        # call's arguments, so bad JSON is the engine's 400, in the call log as well
        text = (await request.body()).decode("utf-8", errors="replace")
        result = call(request.path_params["name"], text)
        if result.ok:
            return _json(result.value, 200)
        return _json(error_body(result, tools), status_of(result))

    return endpoint


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
    # default=str as ToolResult.to_json: a domain's values may be dates or decimals
    body = json.dumps(value, ensure_ascii=False, default=str)
    return Response(body, status_code=status, media_type="application/json")


def _mcp_server(tools: list[ToolSpec], call: ToolCall, title: str) -> Server[Any]:
    listed = [mt.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in tools]

    async def list_tools(ctx: Any, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        arguments = params.arguments
        result = call(params.name, arguments if arguments is not None else {})
        if result.ok:
            # the same JSON values as the text (a domain's dates and decimals as strings)
            structured = json.loads(result.to_json()) if isinstance(result.value, dict) else None
            return mt.CallToolResult(content=[mt.TextContent(type="text", text=result.to_json())],
                                     structured_content=structured, is_error=False)
        text = json.dumps(error_body(result, tools), ensure_ascii=False)
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=True)

    return Server(f"sandtable {title}", on_list_tools=list_tools, on_call_tool=call_tool)


