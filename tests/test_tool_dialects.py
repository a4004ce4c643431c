"""Tool schemas in the dialects agents need (engine.api): plain JSON Schema in
``turn.tools``, the Anthropic and OpenAI ``tools`` forms, and OpenAI's strict form,
where every property is required and an optional one nullable; the engine reads null
for an optional argument, nested ones included, as leaving it out, so a strict-mode
agent finds what a plain one finds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest
from fakes import FakeOpenAI, openai_text, openai_tools

import pytest_sandtable as st
from pytest_sandtable import run_trial
from pytest_sandtable.engine.api import TOOL_DIALECTS, ToolSpec, tool_schemas
from pytest_sandtable.engine.scripted_user import ScriptedUser

FREIGHT = """\
version: 1
name: freight
description: Load board of Harbor Freight Exchange, a fictional broker.
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, origin: Atlanta GA, equipment: dry_van, status: available }
      - { load_id: L-1002, origin: Dallas TX, equipment: reefer, status: booked }
tools:
  - name: search_loads
    description: Find available loads.
    params:
      origin: { type: string, required: false, description: City and state. }
      equipment: { type: string, required: false, enum: [dry_van, reefer] }
      limit: { type: integer, default: 10 }
    ops:
      - list: { table: loads, where: { origin: $origin, equipment: $equipment, status: available }, limit: $limit }
  - name: quote
    params:
      load_id: { type: string }
      extras:
        type: object
        required: false
        properties:
          liftgate: { type: boolean, required: false }
          note: { type: string }
      stops: { type: array, required: false, items: { type: string } }
    ops:
      - respond: { load: $load_id, extras: $extras }
  - name: tag
    params:
      labels: { type: object, description: Any labels. }
    ops:
      - respond: { ok: true }
tasks:
  - id: find-a-load
    user:
      persona: Dana, a dispatcher.
      instructions: You want any available load.
      opening: "Any loads available?"
    expect:
      reply_includes: [L-1001]
"""


@pytest.fixture
def freight(tmp_path: Path) -> st.Domain:
    path = tmp_path / "freight.sandtable.yaml"
    path.write_text(FREIGHT, encoding="utf-8")
    return st.load_domain(path)


def _specs(domain: st.Domain) -> dict[str, ToolSpec]:
    return {t.name: ToolSpec(t.name, t.description, t.input_schema()) for t in domain.tools.values()}


def test_the_strict_form_requires_every_property_and_makes_optional_ones_nullable(freight: st.Domain) -> None:
    specs = _specs(freight)
    assert specs["search_loads"].strict_input_schema() == {
        "type": "object",
        "properties": {
            "origin": {"type": ["string", "null"], "description": "City and state. (optional: null leaves it out)"},
            "equipment": {"type": ["string", "null"], "enum": ["dry_van", "reefer", None],
                          "description": "Optional: null leaves it out"},
            "limit": {"type": ["integer", "null"], "description": "Optional: null for the default, 10"},
        },
        "required": ["origin", "equipment", "limit"],
        "additionalProperties": False,
    }
    assert specs["quote"].strict_input_schema() == {
        "type": "object",
        "properties": {
            "load_id": {"type": "string"},
            "extras": {
                "type": ["object", "null"],
                "properties": {
                    "liftgate": {"type": ["boolean", "null"], "description": "Optional: null leaves it out"},
                    "note": {"type": "string"},
                },
                "required": ["liftgate", "note"],
                "additionalProperties": False,
                "description": "Optional: null leaves it out",
            },
            "stops": {"type": ["array", "null"], "items": {"type": "string"},
                      "description": "Optional: null leaves it out"},
        },
        "required": ["load_id", "extras", "stops"],
        "additionalProperties": False,
    }
    # the plain form is untouched
    assert specs["search_loads"].input_schema["properties"]["limit"] == {"type": "integer", "default": 10}


def test_a_tool_strict_mode_cannot_say_stays_plain_and_says_why(freight: st.Domain) -> None:
    tag = _specs(freight)["tag"]
    assert not tag.strict_ok
    assert tag.openai(strict=True) == {"type": "function", "function": {
        "name": "tag", "description": "", "parameters": tag.input_schema, "strict": False}}
    with pytest.raises(ValueError, match=r"^tool 'tag': OpenAI's strict mode cannot say its arguments \(an object "
                       r"without properties or an array without items\); use input_schema, not strict$"):
        tag.strict_input_schema()


def test_turn_tool_schemas_in_every_dialect(freight: st.Domain) -> None:
    seen: dict[str, Any] = {}

    def agent(turn: Any) -> str:
        for dialect in TOOL_DIALECTS:
            seen[dialect] = turn.tool_schemas(dialect)
        seen["default"] = turn.tool_schemas()
        return "L-1001 is available."

    assert run_trial(freight, "find-a-load", agent, ScriptedUser()).verdict == "passed"
    specs = list(_specs(freight).values())
    assert seen["anthropic"] == seen["default"] == [
        {"name": s.name, "description": s.description, "input_schema": s.input_schema} for s in specs]
    assert seen["openai"] == [{"type": "function", "function": {
        "name": s.name, "description": s.description, "parameters": s.input_schema}} for s in specs]
    assert [(f["function"]["name"], f["function"]["strict"]) for f in seen["openai-strict"]] == [
        ("search_loads", True), ("quote", True), ("tag", False)]
    assert seen["openai-strict"][0]["function"]["parameters"] == specs[0].strict_input_schema()
    with pytest.raises(ValueError, match=r"^unknown tool schema dialect 'mcp'; expected one of anthropic, openai, "
                       r"openai-strict$"):
        tool_schemas(specs, "mcp")


def test_every_call_the_strict_form_allows_runs_and_null_reads_as_left_out(freight: st.Domain) -> None:
    calls: list[tuple[Any, Any]] = []
    strict_all_null = {"origin": None, "equipment": None, "limit": None}
    nested_null = {"load_id": "L-1001", "extras": {"liftgate": None, "note": "dock 4"}, "stops": None}
    jsonschema.validate(strict_all_null, _specs(freight)["search_loads"].strict_input_schema())
    jsonschema.validate(nested_null, _specs(freight)["quote"].strict_input_schema())

    def agent(turn: Any) -> str:
        for name, args in (("search_loads", strict_all_null), ("search_loads", {}),
                           ("search_loads", {"origin": ""}), ("quote", nested_null),
                           ("quote", {"load_id": "L-1001", "extras": None})):
            r = turn.call_tool(name, json.dumps(args))
            calls.append((r.ok, r.value if r.ok else r.message))
        return "L-1001 is available."

    assert run_trial(freight, "find-a-load", agent, ScriptedUser()).verdict == "passed"
    found = [{"load_id": "L-1001", "origin": "Atlanta GA", "equipment": "dry_van", "status": "available"}]
    assert calls == [
        (True, found),  # all null: no filter, the default limit
        (True, found),
        (True, []),  # what a strict agent sends when it cannot send null: nothing matches ""
        (True, {"load": "L-1001", "extras": {"note": "dock 4"}}),
        (True, {"load": "L-1001"}),
    ]


def test_an_openai_strict_agent_sending_null_for_an_optional_argument_finds_the_load(freight: st.Domain) -> None:
    """The real openai SDK against the fake server: the model, on strict tools, sends
    origin and equipment as null; the trial finds the one available load."""
    script = [openai_tools(("call_1", "search_loads", {"origin": None, "equipment": None, "limit": None})),
              openai_text("L-1001 from Atlanta GA is available.")]
    with FakeOpenAI(script, keep_alive=True) as srv:

        async def agent(turn: Any) -> str:
            client = turn.state.setdefault("client", openai.AsyncOpenAI(
                api_key="test-key", base_url=srv.base_url, max_retries=0))
            messages: list[Any] = [{"role": "system", "content": turn.system_prompt}, *turn.messages]
            while True:
                completion = await client.chat.completions.create(
                    model="gpt-test", messages=messages, tools=turn.tool_schemas("openai-strict"))
                message = completion.choices[0].message
                if not message.tool_calls:
                    return str(message.content)
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    result = await turn.acall_tool(call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result.to_json()})

        result = run_trial(freight, "find-a-load", agent, ScriptedUser(), trial_timeout=20)
    assert (result.verdict, [c["ok"] for c in result.calls]) == ("passed", [True])
    assert result.calls[0]["result"] == [
        {"load_id": "L-1001", "origin": "Atlanta GA", "equipment": "dry_van", "status": "available"}]
    sent = srv.requests[0].json["tools"][0]["function"]
    assert (sent["strict"], sent["parameters"]["required"]) == (True, ["origin", "equipment", "limit"])
    assert asyncio.iscoroutinefunction(agent)
