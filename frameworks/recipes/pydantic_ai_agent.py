"""Pydantic AI on sandtable (docs/frameworks.md).

    pytest --sandtable-agent=pydantic_ai_agent:agent --sandtable-record=once
    pytest --sandtable-agent=pydantic_ai_agent:mcp_agent --sandtable-serve --sandtable-record=once

The OpenAI provider points at the trial's route through the model proxy; the run's
messages are kept in ``turn.state`` from one turn to the next.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, Tool
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

MODEL = "gpt-4.1-mini"


def _tool(turn: Any, spec: Any) -> Tool[Any]:
    async def invoke(**arguments: Any) -> str:
        return (await turn.acall_tool(spec.name, arguments)).to_json()

    return Tool.from_schema(invoke, name=spec.name, description=spec.description, json_schema=spec.input_schema)


async def _run(turn: Any, **tools: Any) -> str:
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=turn.model_base_url("openai")))
    desk = Agent(model, instructions=turn.system_prompt, **tools)
    result = await desk.run(turn.last_user_message, message_history=turn.state.get("messages"))
    turn.state["messages"] = result.all_messages()  # memory across turns
    return str(result.output)


async def agent(turn: Any) -> str:
    """Tools from ``turn.tools``, each calling back into ``turn.acall_tool``."""
    return await _run(turn, tools=[_tool(turn, spec) for spec in turn.tools])


async def mcp_agent(turn: Any) -> str:
    """The trial's tools over MCP (``--sandtable-serve``)."""
    return await _run(turn, toolsets=[MCPToolset(turn.mcp_url)])
