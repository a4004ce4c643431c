"""The OpenAPI document of a served world, generated from its tools' schemas."""

from __future__ import annotations

from typing import Any

from ..engine.api import ToolSpec

OPENAPI_VERSION = "3.1.0"  # 3.1: a tool's JSON Schema is a schema object as it is

_ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "integer", "description": "The tool's error code (the HTTP status when 400-599)."},
        "message": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "string"}, "description": "On 404: the tools there are."},
    },
    "required": ["error", "message"],
}


def openapi_document(tools: list[ToolSpec], title: str, base_url: str) -> dict[str, Any]:
    """``POST /tools/<name>`` for each tool, its request body the tool's input schema."""
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": "1"},
        "servers": [{"url": base_url}],
        "paths": {f"/tools/{t.name}": {"post": _operation(t)} for t in tools},
        "components": {"schemas": {"ToolError": _ERROR}},
    }


def _operation(tool: ToolSpec) -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ToolError"}}}}
    return {
        "operationId": tool.name,
        "summary": tool.description,
        "requestBody": {"required": False, "content": {"application/json": {"schema": tool.input_schema}}},
        "responses": {
            "200": {"description": "The tool's result.", "content": {"application/json": {"schema": {}}}},
            "400": {"description": "Invalid arguments or body (not JSON).", **error},
            "404": {"description": "No such tool, or the tool found nothing.", **error},
            "410": {"description": "The trial is over: nothing was changed.", **error},
            "default": {"description": "Another error of the tool.", **error},
        },
    }
