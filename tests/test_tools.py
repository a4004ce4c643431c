"""Tool calls: arguments validated and coerced, checks, ops, and what the agent gets back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import pytest_sandtable as st

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

TASK = """
tasks:
  - id: t
    user: { opening: Hi. }
"""

ECHO = """
world:
  calls: { key: id, fields: [value] }
tools:
  - name: echo
    params:
      value: { type: %s }
    ops:
      - respond: $value
""" + TASK


def call(play: Play, domain: st.Domain, tool: str, args: Any) -> dict[str, Any]:
    """Make one call in a trial; what the call log says about it."""
    result = play(domain, [(tool, args), "ok"])
    (logged,) = result.calls
    return logged


@pytest.mark.parametrize(
    ("ptype", "given", "value"),
    [
        ("integer", "42", 42),
        ("integer", 42.0, 42),
        ("integer", " -7 ", -7),
        ("number", "2100", 2100),
        ("number", "2100.50", 2100.5),
        ("number", 2100.0, 2100.0),
        ("string", 100101, "100101"),
        ("string", 2350.0, "2350"),
        ("boolean", "true", True),
        ("boolean", "False", False),
    ],
)
def test_arguments_are_coerced_to_their_types(
    make_domain: Make, play: Play, ptype: str, given: Any, value: Any
) -> None:
    logged = call(play, make_domain(ECHO % ptype), "echo", {"value": given})
    assert logged["ok"]
    assert logged["args"] == {"value": value}
    assert logged["result"] == value
    assert type(logged["result"]) is type(value)


@pytest.mark.parametrize(
    ("ptype", "given", "message"),
    [
        ("integer", "4.5", 'value: expected an integer, got string "4.5"'),
        ("integer", True, "value: expected an integer, got boolean true"),
        ("number", "2,100", 'value: expected a number, got string "2,100"'),
        ("number", "lots", 'value: expected a number, got string "lots"'),
        ("string", ["a"], 'value: expected a string, got array ["a"]'),
        ("boolean", "yes", 'value: expected a boolean, got string "yes"'),
        ("boolean", 1, "value: expected a boolean, got number 1"),
        ("object", "x", 'value: expected an object, got string "x"'),
        ("array", {"a": 1}, 'value: expected an array, got object {"a": 1}'),
    ],
)
def test_a_bad_argument_is_a_tool_error_the_agent_sees(
    make_domain: Make, play: Play, ptype: str, given: Any, message: str
) -> None:
    logged = call(play, make_domain(ECHO % ptype), "echo", {"value": given})
    assert logged["error"] == {"code": 400, "message": f"invalid arguments for echo: {message}"}


def test_the_agent_gets_the_error_as_a_tool_result_and_the_trial_goes_on(make_domain: Make, play: Play) -> None:
    seen: list[st.ToolResult] = []

    def agent(turn: st.Turn) -> str:
        seen.append(turn.call_tool("echo", {"value": "many"}))
        seen.append(turn.call_tool("echo", '{"value": "7"}'))
        return "done"

    result = play(make_domain(ECHO % "integer"), agent=agent)
    assert seen == [
        st.ToolResult(False, error=400,
                      message='invalid arguments for echo: value: expected an integer, got string "many"'),
        st.ToolResult(True, value=7),
    ]
    assert json.loads(seen[0].to_json()) == {
        "error": 400, "message": 'invalid arguments for echo: value: expected an integer, got string "many"'
    }
    assert seen[1].to_json() == "7"
    assert result.verdict == "passed"


SEARCH = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, origin: Atlanta GA, equipment: dry_van, rate: 1800, status: available }
      - { load_id: L-1002, origin: Atlanta GA, equipment: reefer, rate: 2600, status: available }
      - { load_id: L-1003, origin: Dallas TX, equipment: dry_van, rate: 950, status: booked }
      - { load_id: L-1004, origin: Atlanta GA, equipment: dry_van, rate: 2100, status: available }
      - { load_id: L-1005, origin: Atlanta GA, equipment: flatbed, rate: 1500, status: available }
tools:
  - name: search_loads
    params:
      origin: { type: string }
      equipment: { type: string, required: false, enum: [dry_van, reefer, flatbed] }
      limit: { type: integer, default: 3 }
    ops:
      - list: { table: loads, where: { origin: $origin, equipment: $equipment, status: available }, order_by: -rate }
  - name: cheapest
    params: { origin: { type: string } }
    ops:
      - list: { table: loads, where: { origin: $origin }, order_by: rate, limit: 2 }
""" + TASK


def ids(logged: dict[str, Any]) -> list[str]:
    return [row["load_id"] for row in logged["result"]]


def test_list_filters_and_orders(make_domain: Make, play: Play) -> None:
    domain = make_domain(SEARCH)
    assert ids(call(play, domain, "search_loads", {"origin": "Atlanta GA"})) == ["L-1002", "L-1004", "L-1001", "L-1005"]
    assert ids(call(play, domain, "cheapest", {"origin": "Atlanta GA"})) == ["L-1005", "L-1001"]
    assert ids(call(play, domain, "search_loads", {"origin": "Boise ID"})) == []


def test_an_optional_argument_not_given_drops_its_filter(make_domain: Make, play: Play) -> None:
    domain = make_domain(SEARCH)
    assert ids(call(play, domain, "search_loads", {"origin": "Atlanta GA", "equipment": "dry_van"})) == [
        "L-1004", "L-1001"
    ]
    assert len(call(play, domain, "search_loads", {"origin": "Atlanta GA", "equipment": None})["result"]) == 4


def test_defaults_fill_missing_arguments(make_domain: Make, play: Play) -> None:
    logged = call(play, make_domain(SEARCH), "search_loads", {"origin": "Atlanta GA"})
    assert logged["args"] == {"origin": "Atlanta GA", "limit": 3}


def test_enum(make_domain: Make, play: Play) -> None:
    logged = call(play, make_domain(SEARCH), "search_loads", {"origin": "Atlanta GA", "equipment": "tanker"})
    assert logged["error"] == {
        "code": 400,
        "message": 'invalid arguments for search_loads: equipment: "tanker" is not one of '
                   '"dry_van", "reefer", "flatbed"',
    }


def test_missing_and_unknown_arguments(make_domain: Make, play: Play) -> None:
    domain = make_domain(SEARCH)
    assert call(play, domain, "search_loads", {})["error"] == {
        "code": 400, "message": "invalid arguments for search_loads: missing required argument 'origin'"
    }
    assert call(play, domain, "search_loads", {"origin": "Atlanta GA", "lane": "x"})["error"] == {
        "code": 400,
        "message": "invalid arguments for search_loads: unknown argument 'lane' "
                   "(search_loads takes origin, equipment, limit)",
    }
    assert call(play, domain, "cheapest", {"origin": "X", "a": 1, "b": 2})["error"] == {
        "code": 400, "message": "invalid arguments for cheapest: unknown arguments 'a', 'b' (cheapest takes origin)"
    }


def test_several_bad_arguments_are_reported_together(make_domain: Make, play: Play) -> None:
    logged = call(play, make_domain(SEARCH), "search_loads", {"equipment": "tanker", "limit": "few"})
    assert logged["error"]["message"] == (
        "invalid arguments for search_loads: missing required argument 'origin'; "
        'equipment: "tanker" is not one of "dry_van", "reefer", "flatbed"; limit: expected an integer, got string "few"'
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{oops", "arguments are not valid JSON: Expecting property name enclosed in double quotes"),
        ([1, 2], "arguments must be an object, got array"),
    ],
)
def test_arguments_that_are_not_an_object(make_domain: Make, play: Play, raw: Any, message: str) -> None:
    logged = call(play, make_domain(SEARCH), "search_loads", raw)
    assert logged["error"] == {"code": 400, "message": f"invalid arguments for search_loads: {message}"}


def test_arguments_as_json_text(make_domain: Make, play: Play) -> None:
    logged = call(play, make_domain(SEARCH), "search_loads", '{"origin": "Dallas TX", "limit": "5"}')
    assert logged["args"] == {"origin": "Dallas TX", "limit": 5}


def test_an_unknown_tool(make_domain: Make, play: Play) -> None:
    logged = call(play, make_domain(SEARCH), "book_load", {"load_id": "L-1001"})
    assert logged["error"] == {"code": 404, "message": "unknown tool 'book_load'; the tools are search_loads, cheapest"}


def test_tools_are_shown_to_the_agent_as_json_schemas(make_domain: Make, play: Play) -> None:
    shown: list[dict[str, Any]] = []

    def agent(turn: st.Turn) -> str:
        shown.extend({"name": t.name, **t.input_schema} for t in turn.tools)
        return "ok"

    play(make_domain(SEARCH), agent=agent)
    assert shown[0] == {
        "name": "search_loads",
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "equipment": {"type": "string", "enum": ["dry_van", "reefer", "flatbed"]},
            "limit": {"type": "integer", "default": 3},
        },
        "additionalProperties": False,
        "required": ["origin"],
    }


ORDERS = """
world:
  orders: { key: order_id, key_format: "O-{n}", fields: [items, address] }
tools:
  - name: place_order
    params:
      items:
        type: array
        items: { type: object, properties: { sku: { type: string }, qty: { type: integer } } }
      address: { type: object, properties: { city: { type: string }, zip: { type: string, required: false } } }
    ops:
      - create: { table: orders, row: { items: $items, address: $address } }
""" + TASK


def test_object_and_array_arguments(make_domain: Make, play: Play) -> None:
    logged = call(play, make_domain(ORDERS), "place_order",
                  {"items": [{"sku": "MUG-1", "qty": "2"}], "address": {"city": "Austin", "zip": 78701}})
    assert logged["result"] == {
        "order_id": "O-1", "items": [{"sku": "MUG-1", "qty": 2}], "address": {"city": "Austin", "zip": "78701"}
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"items": [{"sku": "MUG-1"}], "address": {"city": "Austin"}}, "items[0]: 'qty' is a required property"),
        ({"items": [], "address": {"city": "Austin", "country": "US"}},
         "address: Additional properties are not allowed ('country' was unexpected)"),
        ({"items": [{"sku": "MUG-1", "qty": "two"}], "address": {"city": "Austin"}},
         "items[0].qty: 'two' is not of type 'integer'"),
    ],
)
def test_bad_object_and_array_arguments(make_domain: Make, play: Play, args: Any, message: str) -> None:
    logged = call(play, make_domain(ORDERS), "place_order", args)
    assert logged["error"] == {"code": 400, "message": f"invalid arguments for place_order: {message}"}


# -- checks ------------------------------------------------------------------------------

BOOK = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, status: available }
      - { load_id: L-1002, status: booked }
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id, mc_number] }
tools:
  - name: book_load
    params: { load_id: { type: string }, mc_number: { type: string } }
    checks:
      - { require: { table: loads, key: $load_id }, error: 404, message: "no load {load_id}" }
      - require: { table: loads, key: $load_id, where: { status: available } }
        error: 409
        message: "load $load_id is already booked"
      - forbid: { table: bookings, where: { mc_number: $mc_number } }
        error: 429
        message: "carrier {mc_number} already has a booking today"
    ops:
      - create: { table: bookings, row: { load_id: $load_id, mc_number: $mc_number } }
      - update: { table: loads, key: $load_id, set: { status: booked } }
""" + TASK


@pytest.mark.parametrize(
    ("load", "error"),
    [
        ("L-9999", {"code": 404, "message": "no load L-9999"}),
        ("L-1002", {"code": 409, "message": "load L-1002 is already booked"}),
    ],
)
def test_checks_give_templated_errors(make_domain: Make, play: Play, load: str, error: dict[str, Any]) -> None:
    result = play(make_domain(BOOK), [("book_load", {"load_id": load, "mc_number": "100101"}), "Sorry."])
    assert result.calls[0]["error"] == error
    assert result.diff == {"created": [], "changed": []}


def test_a_forbid_check_fails_when_a_matching_record_exists(make_domain: Make, play: Play) -> None:
    domain = make_domain(BOOK.replace("L-1002, status: booked", "L-1002, status: available"))
    result = play(domain, [("book_load", {"load_id": "L-1001", "mc_number": "100101"}),
                           ("book_load", {"load_id": "L-1002", "mc_number": "100101"}), "Booked one."])
    assert [c["error"] for c in result.calls] == [
        None, {"code": 429, "message": "carrier 100101 already has a booking today"}
    ]
    assert [r["key"] for r in result.diff["created"]] == ["B-1"]


# -- ops and results ------------------------------------------------------------------------

OPS = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, status: available, rate: 1800 }
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id] }
tools:
  - name: get_then_respond
    params: { load_id: { type: string } }
    ops:
      - get: { table: loads, key: $load_id }
      - respond: { load: $load_id, message: "Quote for $load_id costs $$5 ($5 for $load_id-X)" }
  - name: respond_then_get
    params: { load_id: { type: string } }
    ops:
      - respond: { ignored: true }
      - get: { table: loads, key: $load_id }
  - name: book
    params: { load_id: { type: string } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
      - create: { table: bookings, row: { load_id: $load_id } }
  - name: reprice
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { rate: $rate } }
""" + TASK


@pytest.mark.parametrize(
    ("tool", "args", "value"),
    [
        ("get_then_respond", {"load_id": "L-1001"},
         {"load": "L-1001", "message": "Quote for L-1001 costs $5 ($5 for L-1001-X)"}),
        ("respond_then_get", {"load_id": "L-1001"}, {"load_id": "L-1001", "status": "available", "rate": 1800}),
        ("book", {"load_id": "L-1001"}, {"load_id": "L-1001", "booking_id": "B-1"}),
        ("reprice", {"load_id": "L-1001", "rate": "1900"}, {"load_id": "L-1001", "status": "available", "rate": 1900}),
    ],
)
def test_the_result_is_the_last_read_or_respond_else_the_written_row(
    make_domain: Make, play: Play, tool: str, args: dict[str, Any], value: Any
) -> None:
    assert call(play, make_domain(OPS), tool, args)["result"] == value


def test_respond_leaves_out_an_optional_argument_not_given(make_domain: Make, play: Play) -> None:
    domain = make_domain("""
    tools:
      - name: echo
        params: { note: { type: string, required: false } }
        ops:
          - respond: $note
      - name: receipt
        params: { note: { type: string, required: false } }
        ops:
          - respond: { note: $note, text: "note=$note" }
    tasks:
      - id: t
        user: { opening: Hi. }
    """)
    result = play(domain, [("echo", {}), ("receipt", {}), ("echo", {"note": "hi"}), "ok"])
    assert [c["result"] for c in result.calls] == [None, {"text": "note="}, "hi"]
    assert json.loads(json.dumps(result.to_dict()))["calls"][0]["result"] is None


def test_get_and_update_of_a_missing_row_are_404(make_domain: Make, play: Play) -> None:
    domain = make_domain(OPS)
    assert call(play, domain, "respond_then_get", {"load_id": "L-404"})["error"] == {
        "code": 404, "message": "loads L-404 not found"
    }
    assert call(play, domain, "reprice", {"load_id": "L-404", "rate": 1})["error"] == {
        "code": 404, "message": "loads L-404 not found"
    }


def test_a_failed_call_writes_nothing(make_domain: Make, play: Play) -> None:
    result = play(make_domain(OPS), [("book", {"load_id": "L-404"}), "Sorry."])
    assert result.calls[0]["error"] == {"code": 404, "message": "loads L-404 not found"}
    assert result.diff == {"created": [], "changed": []}
