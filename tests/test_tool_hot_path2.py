"""A tool of one op runs it straight (no savepoint, no slots) and gives what the general
way of several ops gives; each kind of op is run by what its plan picked once; a created
row the tool built itself is not copied again on its way into the world."""

from __future__ import annotations

from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.engine.handlers import HandlerState, run_tool
from pytest_sandtable.engine.tools import ToolPlan, coerce_args, planned_ops, tool_plan
from pytest_sandtable.engine.world import World, seed_for

DOMAIN = """\
version: 1
name: yard
world:
  trucks:
    key: truck_id
    rows:
      - { truck_id: T-1, depot: Reno, size: 26, state: ready, tags: [cab, lift] }
      - { truck_id: T-2, depot: Elko, size: 16, state: parked }
      - { truck_id: T-3, depot: Reno, size: 20, state: ready }
  moves:
    key: move_id
    key_format: M-{n}
    rows: []
tools:
  - name: show
    params: { truck_id: { type: string } }
    ops:
      - get: { table: trucks, key: $truck_id }
  - name: in_depot
    params: { depot: { type: string }, most: { type: integer, required: false } }
    ops:
      - list: { table: trucks, where: { depot: $depot }, order_by: -size, limit: $most }
  - name: log_move
    params: { truck_id: { type: string }, miles: { type: number } }
    ops:
      - create: { table: moves, row: { truck_id: $truck_id, miles: $miles, legs: [out, back] } }
  - name: add_truck
    params: { truck_id: { type: string } }
    ops:
      - create: { table: trucks, row: { truck_id: $truck_id, depot: Reno } }
  - name: park
    params: { truck_id: { type: string } }
    ops:
      - update: { table: trucks, key: $truck_id, set: { state: parked }, append: { tags: parked } }
  - name: scrap
    params: { truck_id: { type: string } }
    ops:
      - delete: { table: trucks, key: $truck_id }
  - name: quote
    params: { truck_id: { type: string }, note: { type: string, required: false } }
    ops:
      - respond: { truck: $truck_id, note: $note }
  - name: hush
    params: { truck_id: { type: string } }
    ops:
      - respond: null
  - name: resize
    params: { truck_id: { type: string }, size: { type: number } }
    ops:
      - update: { table: trucks, key: $truck_id, add: { size: $size } }
tasks:
  - id: t
    user: { opening: Hi. }
"""


@pytest.fixture(scope="module")
def domain() -> st.Domain:
    return load_domain_text(DOMAIN)


def general(plan: ToolPlan) -> ToolPlan:
    """The same plan run by the general way (the loop over ops and slots)."""
    twin = ToolPlan(plan.tool)
    twin.single = None
    return twin


def outcome(result: st.ToolResult, world: World) -> tuple[Any, ...]:
    return result.ok, result.value, result.error, result.message, world.diff()


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("show", {"truck_id": "T-1"}),
    ("show", {"truck_id": "T-9"}),
    ("in_depot", {"depot": "Reno"}),
    ("in_depot", {"depot": "Reno", "most": 1}),
    ("in_depot", {"depot": "Wells"}),
    ("log_move", {"truck_id": "T-1", "miles": 40}),
    ("add_truck", {"truck_id": "T-4"}),
    ("add_truck", {"truck_id": "T-2"}),
    ("park", {"truck_id": "T-1"}),
    ("park", {"truck_id": "T-2"}),
    ("park", {"truck_id": "T-9"}),
    ("scrap", {"truck_id": "T-3"}),
    ("scrap", {"truck_id": "T-9"}),
    ("quote", {"truck_id": "T-1"}),
    ("hush", {"truck_id": "T-1"}),
    ("resize", {"truck_id": "T-1", "size": 2}),
]


@pytest.mark.parametrize(("tool", "args"), CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CALLS)])
def test_one_op_gives_what_the_general_way_gives(domain: st.Domain, tool: str, args: dict[str, Any]) -> None:
    plan = tool_plan(domain.tools[tool])
    assert plan.single is plan.ops[0]
    straight, looped = World(seed_for(domain)), World(seed_for(domain))
    assert outcome(planned_ops(plan, args, straight), straight) == \
        outcome(planned_ops(general(plan), args, looped), looped)


def call(domain: st.Domain, world: World, tool: str, raw: dict[str, Any]) -> st.ToolResult:
    t = domain.tools[tool]
    return run_tool(t, coerce_args(t, raw), world, HandlerState(domain, domain.tasks[0], 1), 0)


def test_each_kind_of_one_op_answers_exactly(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    shown = call(domain, world, "show", {"truck_id": "T-1"})
    assert shown == st.ToolResult(True, value={"truck_id": "T-1", "depot": "Reno", "size": 26, "state": "ready",
                                               "tags": ["cab", "lift"]})
    shown.value["tags"].append("dent")  # the agent's copy: the world's row is its own
    assert world.get("trucks", "T-1")["tags"] == ["cab", "lift"]
    assert call(domain, world, "show", {"truck_id": "T-9"}) == st.ToolResult(False, error=404,
                                                                             message="trucks T-9 not found")
    listed = call(domain, world, "in_depot", {"depot": "Reno", "most": 1})
    assert listed == st.ToolResult(True, value=[{"truck_id": "T-1", "depot": "Reno", "size": 26, "state": "ready",
                                                 "tags": ["cab", "lift"]}])
    assert call(domain, world, "quote", {"truck_id": "T-2"}) == st.ToolResult(True, value={"truck": "T-2"})
    assert call(domain, world, "hush", {"truck_id": "T-2"}) == st.ToolResult(True, value=None)
    assert call(domain, world, "add_truck", {"truck_id": "T-2"}) == st.ToolResult(False, error=409,
                                                                                  message="trucks T-2 already exists")
    parked = call(domain, world, "park", {"truck_id": "T-2"})
    assert parked == st.ToolResult(True, value={"truck_id": "T-2", "depot": "Elko", "size": 16, "state": "parked",
                                                "tags": ["parked"]})
    parked.value["tags"].append("again")
    assert world.get("trucks", "T-2")["tags"] == ["parked"]
    assert call(domain, world, "scrap", {"truck_id": "T-3"}) == st.ToolResult(True, value={
        "truck_id": "T-3", "depot": "Reno", "size": 20, "state": "ready"})
    assert call(domain, world, "scrap", {"truck_id": "T-3"}) == st.ToolResult(False, error=404,
                                                                              message="trucks T-3 not found")
    world.update("trucks", "T-1", {"size": "big"})
    assert call(domain, world, "resize", {"truck_id": "T-1", "size": 2}) == st.ToolResult(
        False, error=500, message='trucks T-1 size is "big", not a number: cannot add 2')
    assert world.diff() == {
        "created": [],
        "changed": [
            # in the order first changed; T-2's state was parked already
            {"table": "trucks", "key": "T-2", "fields": {"tags": {"before": None, "after": ["parked"]}}},
            {"table": "trucks", "key": "T-1", "fields": {"size": {"before": 26, "after": "big"}}},
        ],
        "deleted": [{"table": "trucks", "key": "T-3",
                     "row": {"truck_id": "T-3", "depot": "Reno", "size": 20, "state": "ready"}}],
    }


def test_a_created_row_is_the_worlds_own_and_the_agent_gets_a_copy(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    made = call(domain, world, "log_move", {"truck_id": "T-1", "miles": 40})
    assert made == st.ToolResult(True, value={"truck_id": "T-1", "miles": 40, "legs": ["out", "back"],
                                              "move_id": "M-1"})
    made.value["legs"].append("again")  # neither the world's row nor the tool's spec shares it
    again = call(domain, world, "log_move", {"truck_id": "T-2", "miles": 7})
    assert again.value == {"truck_id": "T-2", "miles": 7, "legs": ["out", "back"], "move_id": "M-2"}
    world.get("moves", "M-2")["legs"].append("by hand")  # a write past the API: the spec's literal stays
    assert call(domain, world, "log_move", {"truck_id": "T-3", "miles": 1}).value["legs"] == ["out", "back"]
    assert world.get("moves", "M-1")["legs"] == ["out", "back"]


def test_a_tool_built_row_of_scalars_goes_into_the_world_as_it_is(domain: st.Domain) -> None:
    assert tool_plan(domain.tools["add_truck"]).single.scalar_row is True  # type: ignore[union-attr]
    assert tool_plan(domain.tools["log_move"]).single.scalar_row is False  # type: ignore[union-attr]  # a list
    world = World(seed_for(domain))
    made = call(domain, world, "add_truck", {"truck_id": "T-4"})
    assert made == st.ToolResult(True, value={"truck_id": "T-4", "depot": "Reno"})
    made.value["depot"] = "Elko"  # the agent's copy
    assert world.get("trucks", "T-4") == {"truck_id": "T-4", "depot": "Reno"}
    assert world.diff()["created"] == [{"table": "trucks", "key": "T-4", "row": {"truck_id": "T-4", "depot": "Reno"}}]


def listed(domain: st.Domain, world: World, raw: dict[str, Any]) -> list[str]:
    result = call(domain, world, "in_depot", raw)
    assert result.ok
    return [row["truck_id"] for row in result.value]


def test_a_listing_of_seed_rows_is_kept_and_every_call_gets_fresh_copies(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    first = call(domain, world, "in_depot", {"depot": "Reno"})
    assert [r["truck_id"] for r in first.value] == ["T-1", "T-3"]  # by size, largest first
    first.value[0]["tags"].append("dent")
    first.value.pop()
    again = call(domain, world, "in_depot", {"depot": "Reno"})
    assert again.value == [
        {"truck_id": "T-1", "depot": "Reno", "size": 26, "state": "ready", "tags": ["cab", "lift"]},
        {"truck_id": "T-3", "depot": "Reno", "size": 20, "state": "ready"},
    ]
    assert listed(domain, world, {"depot": "Reno", "most": 1}) == ["T-1"]  # another limit: another listing
    assert listed(domain, World(seed_for(domain)), {"depot": "Reno"}) == ["T-1", "T-3"]  # another trial


def test_a_listing_reads_the_table_the_trial_changed(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    assert listed(domain, world, {"depot": "Elko"}) == ["T-2"]
    world.update("trucks", "T-3", {"depot": "Elko", "size": 30})
    assert listed(domain, world, {"depot": "Elko"}) == ["T-3", "T-2"]
    world.delete("trucks", "T-2")
    assert listed(domain, world, {"depot": "Elko"}) == ["T-3"]
    assert listed(domain, World(seed_for(domain)), {"depot": "Elko"}) == ["T-2"]  # the seed's, untouched


def test_a_listing_is_kept_for_its_own_seed() -> None:
    first = load_domain_text(DOMAIN)
    other = load_domain_text(DOMAIN.replace("depot: Elko, size: 16", "depot: Reno, size: 16"))
    assert listed(first, World(seed_for(first)), {"depot": "Reno"}) == ["T-1", "T-3"]
    assert listed(other, World(seed_for(other)), {"depot": "Reno"}) == ["T-1", "T-3", "T-2"]
    assert listed(first, World(seed_for(first)), {"depot": "Reno"}) == ["T-1", "T-3"]


def test_a_table_with_no_rows_yet_selects_none_until_written(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    assert world.select("moves", {"truck_id": "T-1"}) == []
    assert world.select("moves", {}) == []
    row = world.create("moves", {"truck_id": "T-1"})
    assert world.select("moves", {"truck_id": "T-1"}) == [row] == [{"truck_id": "T-1", "move_id": "M-1"}]
    world.delete("moves", "M-1")
    assert world.select("moves", {}) == []
