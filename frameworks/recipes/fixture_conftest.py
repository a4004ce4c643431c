"""A framework agent built once per session by a fixture (docs/frameworks.md, "An agent
made by a fixture"): copy this file as ``conftest.py`` next to your sandtable.yaml.

    pytest --sandtable-record=once      # the fixture is the agent: no --sandtable-agent
    pytest --sandtable-record=none      # CI: replayed, nothing sent

The OpenAI Agents SDK's agent and its ``AsyncOpenAI`` client are made once, in the
session fixture ``sandtable_agent``. The client cannot be pointed at a trial's URL (it
outlives every trial), so its HTTP transport sends each request on through the
current trial's ``turn.model_transport("openai")``: the model proxy counts, records
and replays it as that trial's. The conversation is kept in ``turn.state``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest
from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

MODEL = "gpt-4.1-mini"
NO_TRACES = RunConfig(tracing_disabled=True)  # the SDK's traces go to OpenAI's servers otherwise
_TURN: contextvars.ContextVar[Any] = contextvars.ContextVar("sandtable_turn")  # the turn being answered


class _ThisTrial(httpx2.AsyncBaseTransport):
    """Each request through the current trial's route on the model proxy (its transport
    made once per trial, kept in ``turn.state``); straight out without the proxy."""

    def __init__(self) -> None:
        self._direct = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        turn = _TURN.get()
        if "transport" not in turn.state:
            turn.state["transport"] = turn.model_transport("openai") or self._direct
        response: httpx2.Response = await turn.state["transport"].handle_async_request(request)
        return response

    async def aclose(self) -> None:
        await self._direct.aclose()


def _tool(turn: Any, spec: Any) -> FunctionTool:
    async def invoke(ctx: Any, arguments: str) -> str:
        return (await turn.acall_tool(spec.name, arguments)).to_json()

    schema = spec.strict_input_schema() if spec.strict_ok else spec.input_schema
    return FunctionTool(name=spec.name, description=spec.description, params_json_schema=schema,
                        on_invoke_tool=invoke, strict_json_schema=spec.strict_ok)


@pytest.fixture(scope="session")
def sandtable_agent() -> Callable[[Any], Awaitable[str]]:
    client = AsyncOpenAI(http_client=DefaultAsyncHttpxClient(transport=_ThisTrial()))
    desk = Agent(name="desk", model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))

    async def agent(turn: Any) -> str:
        token = _TURN.set(turn)  # the SDK's requests of this turn carry it (a context variable)
        try:
            if "desk" not in turn.state:  # the trial's tools and prompt on the session's agent
                turn.state["desk"] = desk.clone(instructions=turn.system_prompt,
                                                tools=[_tool(turn, spec) for spec in turn.tools])
            history = [*turn.state.get("history", []), {"role": "user", "content": turn.last_user_message}]
            result = await Runner.run(turn.state["desk"], history, run_config=NO_TRACES)
            turn.state["history"] = result.to_input_list()  # memory across turns
            return str(result.final_output)
        finally:
            _TURN.reset(token)

    return agent
