"""The trial's world served to agents that call their tools themselves (``--sandtable-serve``).

Each trial gets a server of its own on 127.0.0.1: a REST route per tool with an
OpenAPI document generated from the tools' schemas, and MCP over streamable HTTP
(JSON-RPC on starlette, :mod:`.mcp_http`: any ``mcp`` client version, and no ``mcp``
package needed). Every call goes to the function the engine hands over
(:meth:`engine.trial._Trial.served_call`), which is ``turn.call_tool``'s own path:
argument checks, rules, the call log and the transcript, graded the same way.

The engine knows nothing of this package: the plugin passes :func:`serve_world` to
``arun_trial(serve=...)``. Importing this package loads starlette (uvicorn when the
first server starts), never mcp, so only the plugin's code path for
``--sandtable-serve`` imports it.
"""

from __future__ import annotations

from .server import ServeError, serve_world

__all__ = ["ServeError", "serve_world"]
