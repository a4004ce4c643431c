"""smolagents on sandtable (docs/frameworks.md).

    pytest --sandtable-agent=smolagents_agent:agent --sandtable-record=once
    pytest --sandtable-agent=smolagents_agent:mcp_agent --sandtable-serve --sandtable-record=once

A sync agent: OpenAIServerModel points at the trial's route through the model proxy;
the agent's memory steps are kept in ``turn.state`` from one turn to the next.
"""

from __future__ import annotations

from typing import Any

from smolagents import MCPClient, OpenAIServerModel, Tool, ToolCallingAgent

MODEL = "gpt-4.1-mini"


class DeskTool(Tool):  # type: ignore[misc]
    """A domain tool: smolagents' inputs from its JSON Schema, calling back into ``turn.call_tool``."""

    output_type = "string"
    skip_forward_signature_validation = True  # forward takes the arguments as **kwargs

    def __init__(self, turn: Any, spec: Any) -> None:
        self.turn, self.name, self.description = turn, spec.name, spec.description
        required = spec.input_schema.get("required", [])
        self.inputs = {name: {"type": p.get("type", "any"), "description": p.get("description", name),
                              **({} if name in required else {"nullable": True})}
                       for name, p in spec.input_schema.get("properties", {}).items()}
        super().__init__()

    def forward(self, **arguments: Any) -> str:
        return str(self.turn.call_tool(self.name, arguments).to_json())


def _run(turn: Any, tools: list[Any]) -> str:
    model = OpenAIServerModel(model_id=MODEL, api_base=turn.model_base_url("openai"))
    desk = ToolCallingAgent(tools=tools, model=model, instructions=turn.system_prompt, verbosity_level=0)
    desk.memory.steps = turn.state.get("steps", [])  # memory across turns
    answer = desk.run(turn.last_user_message, reset=False)
    turn.state["steps"] = desk.memory.steps
    return str(answer)


def agent(turn: Any) -> str:
    """Tools from ``turn.tools``."""
    return _run(turn, [DeskTool(turn, spec) for spec in turn.tools])


def mcp_agent(turn: Any) -> str:
    """The trial's tools over MCP (``--sandtable-serve``)."""
    with MCPClient({"url": turn.mcp_url, "transport": "streamable-http"}) as tools:
        return _run(turn, list(tools))
