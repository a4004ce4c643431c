"""OpenAI Agents SDK on sandtable (docs/frameworks.md).

    pytest --sandtable-agent=openai_agents_agent:agent --sandtable-record=once
    pytest --sandtable-agent=openai_agents_agent:mcp_agent --sandtable-serve --sandtable-record=once

The SDK's model client points at the trial's route through the model proxy; the
conversation is kept in ``turn.state`` from one turn to the next.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, RunConfig, Runner
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

MODEL = "gpt-4.1-mini"
NO_TRACES = RunConfig(tracing_disabled=True)  # the SDK's traces go to OpenAI's servers otherwise


def _model(turn: Any) -> OpenAIChatCompletionsModel:
    if "client" not in turn.state:  # one client per trial: the proxy's URL is the trial's
        turn.state["client"] = AsyncOpenAI(base_url=turn.model_base_url("openai"))
    return OpenAIChatCompletionsModel(model=MODEL, openai_client=turn.state["client"])


def _tool(turn: Any, spec: Any) -> FunctionTool:
    async def invoke(ctx: Any, arguments: str) -> str:
        return (await turn.acall_tool(spec.name, arguments)).to_json()

    schema = spec.strict_input_schema() if spec.strict_ok else spec.input_schema
    return FunctionTool(name=spec.name, description=spec.description, params_json_schema=schema,
                        on_invoke_tool=invoke, strict_json_schema=spec.strict_ok)


async def _run(turn: Any, desk: Agent[Any]) -> str:
    history = [*turn.state.get("history", []), {"role": "user", "content": turn.last_user_message}]
    result = await Runner.run(desk, history, run_config=NO_TRACES)
    turn.state["history"] = result.to_input_list()  # memory across turns
    return str(result.final_output)


async def agent(turn: Any) -> str:
    """Tools from ``turn.tools``, each calling back into ``turn.acall_tool``."""
    desk = Agent(name="desk", instructions=turn.system_prompt, model=_model(turn),
                 tools=[_tool(turn, spec) for spec in turn.tools])
    return await _run(turn, desk)


async def mcp_agent(turn: Any) -> str:
    """The trial's tools over MCP (``--sandtable-serve``)."""
    async with MCPServerStreamableHttp(params={"url": turn.mcp_url}) as server:
        desk = Agent(name="desk", instructions=turn.system_prompt, model=_model(turn), mcp_servers=[server])
        return await _run(turn, desk)
