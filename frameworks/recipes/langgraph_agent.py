"""LangGraph / LangChain on sandtable (docs/frameworks.md).

    pytest --sandtable-agent=langgraph_agent:agent --sandtable-record=once
    pytest --sandtable-agent=langgraph_agent:mcp_agent --sandtable-serve --sandtable-record=once

ChatOpenAI points at the trial's route through the model proxy; the graph's messages
are kept in ``turn.state`` from one turn to the next.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

MODEL = "gpt-4.1-mini"


def _tool(turn: Any, spec: Any) -> BaseTool:
    async def invoke(**arguments: Any) -> str:
        return (await turn.acall_tool(spec.name, arguments)).to_json()

    return StructuredTool.from_function(coroutine=invoke, name=spec.name, description=spec.description,
                                        args_schema=spec.input_schema)


async def _run(turn: Any, tools: list[BaseTool]) -> str:
    model = ChatOpenAI(model=MODEL, base_url=turn.model_base_url("openai"))
    graph = create_react_agent(model, tools, prompt=turn.system_prompt)
    history = [*turn.state.get("messages", []), ("user", turn.last_user_message)]
    result = await graph.ainvoke({"messages": history})
    turn.state["messages"] = result["messages"]  # memory across turns
    return str(result["messages"][-1].content)


async def agent(turn: Any) -> str:
    """Tools from ``turn.tools``, each calling back into ``turn.acall_tool``."""
    return await _run(turn, [_tool(turn, spec) for spec in turn.tools])


async def mcp_agent(turn: Any) -> str:
    """The trial's tools over MCP (``--sandtable-serve``)."""
    from langchain_mcp_adapters.client import MultiServerMCPClient  # only this way needs it

    client = MultiServerMCPClient({"desk": {"url": turn.mcp_url, "transport": "streamable_http"}})
    return await _run(turn, await client.get_tools())
