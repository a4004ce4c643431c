"""Claude Agent SDK on sandtable (docs/frameworks.md).

    pytest --sandtable-agent=claude_agent_sdk_agent:agent --sandtable-record=once
    pytest --sandtable-agent=claude_agent_sdk_agent:mcp_agent --sandtable-serve --sandtable-record=once

The SDK drives the ``claude`` CLI bundled in its wheel, a subprocess: its environment
gets ``turn.model_env()`` (``ANTHROPIC_BASE_URL`` at the trial's route through the
model proxy). The session is resumed from one turn to the next by the ``session_id``
of its ``ResultMessage``, kept in ``turn.state``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    SdkMcpTool,
    create_sdk_mcp_server,
    tool,
)

MODEL = "claude-sonnet-4-6"


def _tool(turn: Any, spec: Any) -> SdkMcpTool[Any]:
    async def invoke(args: dict[str, Any]) -> dict[str, Any]:
        result = await turn.acall_tool(spec.name, args)
        return {"content": [{"type": "text", "text": result.to_json()}], "is_error": not result.ok}

    return tool(spec.name, spec.description, spec.input_schema)(invoke)


def _options(turn: Any, servers: dict[str, Any], tools: list[str]) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        model=MODEL,
        system_prompt=turn.system_prompt,
        mcp_servers=servers,
        tools=[],  # none of the CLI's own tools (Bash, Read, ...): only the desk's
        allowed_tools=tools,  # allowed without asking
        resume=turn.state.get("session_id"),  # memory across turns
        setting_sources=[],  # no user or project settings of the machine it runs on
        env=turn.model_env(),
    )


async def _run(turn: Any, options: ClaudeAgentOptions) -> str:
    async def prompt() -> AsyncIterator[dict[str, Any]]:
        # streaming input: the mode in which the CLI keeps its control channel (and so the
        # in-process tools) open until the answer is complete
        yield {"type": "user", "message": {"role": "user", "content": turn.last_user_message}}

    text = ""
    async with ClaudeSDKClient(options) as client:
        await client.query(prompt())
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                turn.state["session_id"] = message.session_id
                if message.is_error:
                    raise RuntimeError(f"the Claude Agent SDK's run failed: {message.result}")
                text = message.result or ""
    return text


async def agent(turn: Any) -> str:
    """Tools from ``turn.tools`` as an in-process MCP server, each calling back into
    ``turn.acall_tool``."""
    desk = create_sdk_mcp_server("desk", tools=[_tool(turn, spec) for spec in turn.tools])
    names = [f"mcp__desk__{spec.name}" for spec in turn.tools]
    return await _run(turn, _options(turn, {"desk": desk}, names))


async def mcp_agent(turn: Any) -> str:
    """The trial's tools over MCP (``--sandtable-serve``)."""
    names = [f"mcp__desk__{spec.name}" for spec in turn.tools]
    return await _run(turn, _options(turn, {"desk": {"type": "http", "url": turn.mcp_url}}, names))
