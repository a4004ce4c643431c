"""A tool call's fast paths give what the whole way gives: arguments taken as they are
when coercion would not change them, a tool's ops, checks and rules read from their
spec once per process, a `never_disclose` finding kept while its field holds what the
seed holds, texts read as numbers once, a created row's key given without looking it up
again, a diff that sorts only the fields that changed."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.conditions import as_number
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.engine.handlers import HandlerState, run_tool
from pytest_sandtable.engine.rules import DisclosureScanner, check_call
from pytest_sandtable.engine.tools import ArgError, _coerce_args, coerce_args, tool_plan
from pytest_sandtable.engine.world import World, seed_for

DOMAIN = """\
version: 1
name: depot
world:
  trucks:
    key: truck_id
    rows:
      - { truck_id: T-1, depot: Reno, size: 26, state: ready, note: spare }
      - { truck_id: T-2, depot: Elko, size: 16, state: parked }
  moves:
    key: move_id
    key_format: M-{n}
    rows:
      - { move_id: M-2, truck_id: T-2, miles: 40 }
  rates:
    key: lane
    rows:
      - { lane: Reno-Elko, ceiling: 2375, note: winter }
      - { lane: Elko-Reno, ceiling: 1900, note: summer }
tools:
  - name: move
    params:
      truck_id: { type: string }
      miles: { type: number }
      legs: { type: integer, required: false }
      size: { type: string, required: false, enum: [small, large] }
      code: { type: string, required: false, enum: ["1.0", "2"] }
      level: { type: number, required: false, enum: [1, 2] }
      urgent: { type: boolean, required: false }
      stops: { type: array, items: { type: string }, default: [Reno] }
      crew: { type: integer, default: 2 }
      who: { type: string, required: false }
    checks:
      - { require: { table: trucks, key: $truck_id }, error: 404, message: "no truck {truck_id}" }
      - { require: { table: trucks, key: $truck_id, where: { state: ready } }, error: 409,
          message: "truck {truck_id} is not ready" }
    ops:
      - update: { table: trucks, key: $truck_id, set: { state: moving, depot: $who } }
      - create: { table: moves, row: { truck_id: $truck_id, miles: $miles, stops: $stops, by: "crew of $crew" } }
  - name: stamp
    params: { truck_id: { type: string }, move_id: { type: string } }
    ops:
      - update: { table: trucks, key: $truck_id, set: { state: stamped } }
      - create: { table: moves, row: { move_id: $move_id, truck_id: $truck_id } }
      - list: { table: moves, where: { truck_id: $truck_id } }
  - name: price
    params:
      lane: { type: string }
      rate: { type: number }
      cap: { type: number, required: false }
    ops:
      - respond: { lane: $lane, rate: $rate }
invariants:
  - id: ready-trucks
    kind: require
    tool: move
    record: { table: trucks, key: $truck_id }
    where: { state: ready, size: 26 }
  - id: in-its-depot
    kind: require
    tool: move
    record: { table: trucks, key: $truck_id }
    where: { depot: $who }
  - id: under-ceiling
    kind: limit
    tool: price
    arg: rate
    lte: { table: rates, key: $lane, field: ceiling }
  - id: over-floor
    kind: limit
    tool: price
    arg: rate
    gte: 100
    lt: $cap
  - id: lanes-agree
    kind: match
    tool: move
    left: { table: trucks, key: $truck_id, field: depot }
    right: { table: rates, key: Reno-Elko, field: note }
  - id: ceiling-is-secret
    kind: never_disclose
    values: { table: rates, field: ceiling }
tasks:
  - id: t
    user: { opening: Hi. }
"""


@pytest.fixture(scope="module")
def domain() -> st.Domain:
    return load_domain_text(DOMAIN)


def typed(args: dict[str, Any]) -> list[tuple[str, type, Any]]:
    """Arguments with each value's type: 2 and 2.0 differ here, as they do in results.json."""
    return [(k, type(v), v) for k, v in args.items()]


def whole_way(tool: st.Tool, raw: Any) -> list[tuple[str, type, Any]] | str:
    try:
        return typed(_coerce_args(tool, raw))
    except ArgError as e:
        return f"ArgError: {e}"


def either_way(tool: st.Tool, raw: Any) -> list[tuple[str, type, Any]] | str:
    try:
        return typed(coerce_args(tool, raw))
    except ArgError as e:
        return f"ArgError: {e}"


CALLS: list[dict[str, Any]] = [
    {"truck_id": "T-1", "miles": 40},
    {"truck_id": "T-1", "miles": 40.5, "legs": 3, "size": "small", "urgent": True, "who": "Ann"},
    {"truck_id": "T-1", "miles": 2**53},
    {"truck_id": "T-1", "miles": 2**53 + 1},  # through a float on the whole way: 2**53
    {"truck_id": "T-1", "miles": -(2**60) - 1},
    {"truck_id": "T-1", "miles": 40, "legs": 2**53 + 1},
    {"truck_id": "T-1", "miles": True},
    {"truck_id": "T-1", "miles": math.nan},
    {"truck_id": "T-1", "miles": math.inf},
    {"truck_id": "T-1", "miles": "40"},
    {"truck_id": 100101, "miles": 40},
    {"truck_id": "T-1", "miles": 40, "legs": 3.0},
    {"truck_id": "T-1", "miles": 40, "size": "medium"},
    {"truck_id": "T-1", "miles": 40, "code": "1"},  # "1" is "1.0" as a number: in the enum
    {"truck_id": "T-1", "miles": 40, "code": "3"},
    {"truck_id": "T-1", "miles": 40, "level": 1},
    {"truck_id": "T-1", "miles": 40, "level": 3},
    {"truck_id": "T-1", "miles": 40, "urgent": "true"},
    {"truck_id": "T-1", "miles": 40, "stops": ["Elko"], "crew": None},
    {"truck_id": "T-1", "miles": 40, "stops": None, "crew": 5},
    {"truck_id": "T-1"},
    {"miles": 40},
    {"truck_id": "T-1", "miles": 40, "driver": "Ann"},
    {"truck_id": "T-1", "miles": 40, "who": ["Ann"]},
    {"truck_id": "T-1", "miles": 10**5000},
    {},
]


@pytest.mark.parametrize("raw", CALLS, ids=[str(i) for i in range(len(CALLS))])
def test_arguments_coerce_as_the_whole_way_coerces_them(domain: st.Domain, raw: dict[str, Any]) -> None:
    tool = domain.tools["move"]
    fast = tool_plan(tool).args.coerce_plain(raw)
    want = whole_way(tool, copy.deepcopy(raw))
    if fast is not None:  # taken as they are: exactly what the whole way gives
        assert typed(fast) == want
    assert either_way(tool, raw) == want


def test_the_fast_path_takes_the_common_calls_and_leaves_the_rest(domain: st.Domain) -> None:
    args = tool_plan(domain.tools["move"]).args
    taken = [i for i, raw in enumerate(CALLS) if args.coerce_plain(raw) is not None]
    assert taken == [0, 1, 2, 19]  # texts, numbers a float holds exactly, booleans, defaults


def test_a_default_is_a_fresh_copy_on_every_call(domain: st.Domain) -> None:
    tool = domain.tools["move"]
    first = coerce_args(tool, {"truck_id": "T-1", "miles": 1})
    assert first["stops"] == ["Reno"] and first["crew"] == 2
    first["stops"].append("Elko")
    assert coerce_args(tool, {"truck_id": "T-1", "miles": 1})["stops"] == ["Reno"]
    assert tool.params["stops"].default == ["Reno"]


def test_a_wrong_argument_is_worded_as_before(domain: st.Domain) -> None:
    tool = domain.tools["move"]
    with pytest.raises(ArgError) as e:
        coerce_args(tool, {"truck_id": "T-1", "miles": 40, "size": "medium", "legs": 2.5})
    assert str(e.value) == 'legs: expected an integer, got number 2.5; size: "medium" is not one of "small", "large"'
    with pytest.raises(ArgError) as e:
        coerce_args(tool, {"truck_id": "T-1", "miles": 40, "driver": "Ann", "depot": "Reno"})
    assert str(e.value) == ("unknown arguments 'driver', 'depot' (move takes truck_id, miles, legs, size, code, "
                            "level, urgent, stops, crew, who)")


def call(domain: st.Domain, world: World, tool: str, raw: dict[str, Any]) -> st.ToolResult:
    t = domain.tools[tool]
    return run_tool(t, coerce_args(t, raw), world, HandlerState(domain, domain.tasks[0], 1), 0)


def test_ops_resolve_rows_and_sets_entry_by_entry(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    stops = ["Reno", "Wells"]
    raw = {"truck_id": "T-1", "miles": 40, "stops": stops}
    result = call(domain, world, "move", raw)
    # `who` not given: the update leaves `depot` alone; `$crew` is its default inside a text
    assert result.ok and result.value == {"truck_id": "T-1", "miles": 40, "stops": ["Reno", "Wells"],
                                          "by": "crew of 2", "move_id": "M-3"}
    stops.append("Elko")  # the agent's list changed after the call: the world's row is its own
    assert world.get("moves", "M-3")["stops"] == ["Reno", "Wells"]
    assert world.diff() == {
        "created": [{"table": "moves", "key": "M-3", "row": {"truck_id": "T-1", "miles": 40,
                                                             "stops": ["Reno", "Wells"], "by": "crew of 2",
                                                             "move_id": "M-3"}}],
        "changed": [{"table": "trucks", "key": "T-1", "fields": {"state": {"before": "ready", "after": "moving"}}}],
    }


def test_checks_by_key_alone_and_with_a_clause_word_their_errors(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    missing = call(domain, world, "move", {"truck_id": "T-9", "miles": 1})
    assert (missing.ok, missing.error, missing.message) == (False, 404, "no truck T-9")
    parked = call(domain, world, "move", {"truck_id": "T-2", "miles": 1})
    assert (parked.ok, parked.error, parked.message) == (False, 409, "truck T-2 is not ready")
    assert world.diff() == {"created": [], "changed": []}


def test_a_created_key_skips_seed_keys_and_deleted_ones(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    # one seed row, so the first key tried is M-2, which the seed has
    assert world.create("moves", {"truck_id": "T-1"})["move_id"] == "M-3"
    assert world.create("moves", {"truck_id": "T-1"})["move_id"] == "M-4"
    world.delete("moves", "M-4")
    assert world.create("moves", {"truck_id": "T-1"})["move_id"] == "M-5"  # M-4 is not given out again
    with pytest.raises(st.engine.world.Conflict, match=r"^moves M-3 already exists$"):
        world.create("moves", {"move_id": "M-3"})
    assert [r["move_id"] for r in world.rows("moves")] == ["M-2", "M-3", "M-5"]


def test_a_diff_names_changed_and_removed_fields_in_order(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    world.update("trucks", "T-1", {"state": "gone", "depot": "Elko", "size": 26})
    world.delete("trucks", "T-2")
    world.create("trucks", {"truck_id": "T-2", "size": 20, "color": "red"})  # a seed key made again
    assert world.diff()["changed"] == [
        {"table": "trucks", "key": "T-1", "fields": {"depot": {"before": "Reno", "after": "Elko"},
                                                     "state": {"before": "ready", "after": "gone"}}},
        {"table": "trucks", "key": "T-2", "fields": {"color": {"before": None, "after": "red"},
                                                     "depot": {"before": "Elko", "after": None},
                                                     "size": {"before": 16, "after": 20},
                                                     "state": {"before": "parked", "after": None}}},
    ]


def details(domain: st.Domain, world: World, tool: str, args: dict[str, Any]) -> dict[str, str | None]:
    return {inv.id: check_call(inv, tool, args, world, []) for inv in domain.invariants
            if inv.kind != "never_disclose"}


def test_rules_read_once_still_read_the_call_and_the_world_of_the_moment(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    assert details(domain, world, "move", {"truck_id": "T-1", "who": "Reno"}) == {
        "ready-trucks": None, "in-its-depot": None, "under-ceiling": None, "over-floor": None,
        "lanes-agree": 'move: trucks T-1 depot is "Reno" but rates Reno-Elko note is "winter"',
    }
    world.update("trucks", "T-1", {"state": "parked", "depot": "winter"})
    assert details(domain, world, "move", {"truck_id": "T-1", "who": "Reno"}) == {
        "ready-trucks": 'move: trucks T-1 state is "parked", expected "ready"',
        "in-its-depot": 'move: trucks T-1 depot is "winter", expected "Reno"',
        "under-ceiling": None, "over-floor": None, "lanes-agree": None,
    }
    ready = next(inv for inv in domain.invariants if inv.id == "ready-trucks")
    assert check_call(ready, "move", {"truck_id": ["T-1"]}, world, []) is None  # no record: no rule
    assert details(domain, world, "price", {"lane": "Reno-Elko", "rate": 2400, "cap": 2000}) == {
        "ready-trucks": None, "in-its-depot": None,
        "under-ceiling": "price rate=2400 exceeds the limit 2375",
        "over-floor": "price rate=2400 is not below the limit 2000",
        "lanes-agree": None,
    }
    assert details(domain, world, "price", {"lane": "Nowhere", "rate": "50"})["over-floor"] == \
        "price rate=50 is below the minimum 100"
    assert details(domain, world, "price", {"lane": "Nowhere", "rate": 500}) == dict.fromkeys(
        ["ready-trucks", "in-its-depot", "under-ceiling", "over-floor", "lanes-agree"])


def test_a_rule_read_once_belongs_to_its_own_domain() -> None:
    low, high = (load_domain_text(DOMAIN.replace("gte: 100", f"gte: {n}")) for n in (100, 1000))
    args = {"lane": "Nowhere", "rate": 500}
    for _ in range(2):
        assert details(low, World(seed_for(low)), "price", args)["over-floor"] is None
        assert details(high, World(seed_for(high)), "price", args)["over-floor"] == \
            "price rate=500 is below the minimum 1000"


def found(scanner: DisclosureScanner, text: str, world: World) -> list[str]:
    return [detail for _, detail in scanner.scan(text, world)]


def test_a_finding_is_kept_while_the_field_holds_what_the_seed_holds(domain: st.Domain) -> None:
    scanner = DisclosureScanner(domain)
    text = "The most we pay on that lane is $2,375."
    said = ['agent said rates Reno-Elko ceiling 2375 as "$2,375"']
    world = World(seed_for(domain))
    assert found(scanner, text, world) == said
    world.update("rates", "Reno-Elko", {"note": "spring"})  # another field of the same row
    assert world.field_as_seeded("rates", "ceiling") and found(scanner, text, world) == said
    world.update("rates", "Elko-Reno", {"ceiling": 2375})  # the value now in two rows: first named
    assert not world.field_as_seeded("rates", "ceiling") and found(scanner, text, world) == said
    raised = World(seed_for(domain))
    raised.update("rates", "Reno-Elko", {"ceiling": 2400})
    assert found(scanner, text, raised) == []
    assert found(scanner, "Up to 2400.", raised) == ['agent said rates Reno-Elko ceiling 2400 as "2400"']
    gone = World(seed_for(domain))
    gone.delete("rates", "Reno-Elko")
    assert found(scanner, text, gone) == []
    assert found(scanner, text, World(seed_for(domain))) == said


def test_a_field_as_seeded_is_one_no_write_changed(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    assert world.field_as_seeded("rates", "ceiling")
    world.update("rates", "Reno-Elko", {"note": "spring"})
    assert world.field_as_seeded("rates", "ceiling") and not world.field_as_seeded("rates", "note")
    world.update("rates", "Elko-Reno", {"ceiling": 1900})  # the same value written anew: not known to be
    assert not world.field_as_seeded("rates", "ceiling")
    made = World(seed_for(domain))
    made.create("rates", {"lane": "Reno-Wells"})
    assert not made.field_as_seeded("rates", "ceiling")
    again = World(seed_for(domain))
    again.delete("rates", "Reno-Elko")
    assert not again.field_as_seeded("rates", "ceiling")
    again.create("rates", {"lane": "Reno-Elko", "ceiling": 2375, "note": "winter"})  # made again, anew
    assert not again.field_as_seeded("rates", "lane")


@pytest.mark.parametrize(("text", "value"), [
    ("2350", 2350.0), (" 2350 ", 2350.0), ("-1.5e3", -1500.0), ("2026-05-04", None), ("1" * 250, float("1" * 250)),
    ("+.5", 0.5), ("12abc", None), ("", None), ("L-1001", None),
])
def test_a_text_reads_as_the_same_number_every_time(text: str, value: float | None) -> None:
    class Text(str):
        pass

    assert [as_number(text) for _ in range(3)] == [value] * 3
    assert as_number(Text(text)) == value


def test_a_savepoint_is_taken_only_where_a_later_op_may_fail(domain: st.Domain) -> None:
    seed = seed_for(domain)
    # move: an update, then a create whose key the table gives (it cannot fail): none
    assert tool_plan(domain.tools["move"]).savepoint_at(seed) == -1
    # stamp: an update, then a create that gives its key (it may be taken): before the update
    assert tool_plan(domain.tools["stamp"]).savepoint_at(seed) == 0
    assert tool_plan(domain.tools["price"]).savepoint_at(seed) == -1
    world = World(seed)
    taken = call(domain, world, "stamp", {"truck_id": "T-1", "move_id": "M-2"})
    assert (taken.ok, taken.error, taken.message) == (False, 409, "moves M-2 already exists")
    assert world.diff() == {"created": [], "changed": []}  # the update undone
    done = call(domain, world, "stamp", {"truck_id": "T-1", "move_id": "M-7"})
    assert done.ok and done.value == [{"move_id": "M-7", "truck_id": "T-1"}]
    assert world.get("trucks", "T-1")["state"] == "stamped"


def test_a_handlers_listed_rows_are_copies_in_one_round_trip_or_row_by_row(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    handle = st.WorldHandle(world, domain)
    listed = handle.list("trucks")
    assert listed == list(world.rows("trucks")) and listed == [world.get("trucks", "T-1"), world.get("trucks", "T-2")]
    listed[0]["depot"] = "Vegas"
    assert world.get("trucks", "T-1")["depot"] == "Reno"

    class Odd:  # no JSON value, which marshal cannot take either: that row is copied as it is
        pass

    odd = Odd()
    world.create("trucks", {"truck_id": "T-3", "cargo": [odd]})
    rows = handle.list("trucks", {"depot": {"exists": False}})
    kept = world.get("trucks", "T-3")["cargo"][0]
    assert [r["truck_id"] for r in rows] == ["T-3"] and isinstance(kept, Odd) and rows[0]["cargo"][0] is not kept
    assert [r["truck_id"] for r in handle.list("trucks", limit=2)] == ["T-1", "T-2"]
