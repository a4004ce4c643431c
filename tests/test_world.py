"""The world: seed rows shared by every trial, each trial's changes in its own overlay."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.conditions import row_matches
from pytest_sandtable.engine.world import World, seed_for

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

LOADS = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, origin: Atlanta GA, status: available, tags: [hazmat] }
      - { load_id: L-1002, origin: Dallas TX, status: available }
  bookings:
    key: booking_id
    key_format: "B-{n}"
    fields: [load_id]
tools:
  - name: get_load
    params: { load_id: { type: string } }
    ops:
      - get: { table: loads, key: $load_id }
  - name: book_load
    params: { load_id: { type: string } }
    ops:
      - create: { table: bookings, row: { load_id: $load_id } }
      - update: { table: loads, key: $load_id, set: { status: booked } }
tasks:
  - id: t
    user: { opening: Hi. }
"""


def test_every_trial_starts_from_the_seed(make_domain: Make, play: Play) -> None:
    domain = make_domain(LOADS)
    first = play(domain, [("book_load", {"load_id": "L-1001"}), "Booked."])
    assert first.calls[0]["ok"]
    second = play(domain, [("get_load", {"load_id": "L-1001"}), "Here it is."])
    assert second.calls[0]["result"]["status"] == "available"
    assert second.diff == {"created": [], "changed": []}


def test_seed_rows_are_never_mutated(make_domain: Make, play: Play) -> None:
    domain = make_domain(LOADS)
    before = copy.deepcopy(domain.tables["loads"].rows)
    result = play(domain, [("book_load", {"load_id": "L-1001"}), ("book_load", {"load_id": "L-1002"}), "Done."])
    assert [c["ok"] for c in result.calls] == [True, True]
    assert domain.tables["loads"].rows == before
    assert domain.tables["bookings"].rows == []


def test_an_agent_changing_a_result_does_not_change_the_world(make_domain: Make, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        row = turn.call_tool("get_load", {"load_id": "L-1001"}).value
        row["status"] = "stolen"
        row["tags"].append("mine")
        again = turn.call_tool("get_load", {"load_id": "L-1001"}).value
        return f"{again['status']} {again['tags']}"

    result = play(make_domain(LOADS), agent=agent)
    assert result.transcript[-1]["text"] == "available ['hazmat']"


def test_a_fresh_world_copies_nothing(make_domain: Make) -> None:
    domain = make_domain(LOADS)
    world = World(seed_for(domain))
    assert seed_for(domain) is world.seed
    assert world.get("loads", "L-1001") is domain.tables["loads"].rows[0]
    world.update("loads", "L-1001", {"status": "booked"})
    assert world.get("loads", "L-1001") == {**domain.tables["loads"].rows[0], "status": "booked"}
    assert domain.tables["loads"].rows[0]["status"] == "available"
    assert World(seed_for(domain)).get("loads", "L-1001")["status"] == "available"


def test_ops_are_atomic_a_failing_op_undoes_the_earlier_ones(make_domain: Make, play: Play) -> None:
    domain = make_domain(LOADS + """
    expect:
      state:
        - { table: bookings, count: 0 }
""")
    result = play(domain, [("book_load", {"load_id": "L-9999"}), "Sorry."])
    assert result.calls[0]["error"] == {"code": 404, "message": "loads L-9999 not found"}
    assert result.verdict == "passed"
    assert result.diff == {"created": [], "changed": []}


def test_key_format_numbers_new_rows_after_the_existing_ones(make_domain: Make, play: Play) -> None:
    domain = make_domain(LOADS.replace('fields: [load_id]', 'rows: [{ booking_id: B-1, load_id: L-0001 }]'))
    result = play(domain, [("book_load", {"load_id": "L-1001"}), ("book_load", {"load_id": "L-1002"}), "Booked."])
    assert [c["result"]["booking_id"] for c in result.calls] == ["B-2", "B-3"]  # the created rows
    assert [(c["table"], c["key"]) for c in result.diff["created"]] == [("bookings", "B-2"), ("bookings", "B-3")]


def test_create_with_an_existing_key_is_a_409(make_domain: Make, play: Play) -> None:
    domain = make_domain("""
    world:
      carriers: { key: mc_number, rows: [{ mc_number: "100101", name: Blue Ridge Haulers }] }
    tools:
      - name: add_carrier
        params: { mc_number: { type: string }, name: { type: string } }
        ops:
          - create: { table: carriers, row: { mc_number: $mc_number, name: $name } }
    tasks:
      - id: t
        user: { opening: Hi. }
    """)
    result = play(domain, [("add_carrier", {"mc_number": 100101, "name": "Copycat"}), "Hm."])
    assert result.calls[0]["error"] == {"code": 409, "message": "carriers 100101 already exists"}


def test_the_diff_shows_what_the_trial_changed_not_the_tasks_given(make_domain: Make, play: Play) -> None:
    domain = make_domain(LOADS.replace("  - id: t\n", """  - id: t
    given:
      - update: { table: loads, key: L-1002, set: { status: held } }
"""))
    result = play(domain, [("book_load", {"load_id": "L-1001"}), "Booked."])
    assert result.diff == {
        "created": [{"table": "bookings", "key": "B-1", "row": {"load_id": "L-1001", "booking_id": "B-1"}}],
        "changed": [
            {"table": "loads", "key": "L-1001", "fields": {"status": {"before": "available", "after": "booked"}}}
        ],
    }


# -- indexes: a big table's equality lookups use a hash index; the answer must equal a scan


def _big(n: int = 120) -> str:
    rows = "\n".join(
        f"      - {{ load_id: L-{i:04d}, origin: {'Dallas TX' if i % 3 == 0 else 'Atlanta GA'}, "
        f"rate: {1000 + i % 7}, hazmat: {'true' if i % 2 else 'false'}, status: available }}"
        for i in range(n)
    )
    return f"""
world:
  loads:
    key: load_id
    rows:
{rows}
tools:
  - name: noop
    ops: [{{ respond: ok }}]
tasks:
  - id: t
    user: {{ opening: Hi. }}
"""


@pytest.mark.parametrize(
    "where",
    [
        {"origin": "Dallas TX"},
        {"origin": "Dallas TX", "status": "available"},
        {"rate": "1003"},
        {"rate": 1003.0, "origin": "Atlanta GA"},
        {"rate": {"eq": 1003}, "hazmat": True},
        {"hazmat": True},
        {"hazmat": 1},
        {"status": "booked"},
        {"origin": "Nowhere"},
    ],
)
def test_an_indexed_select_equals_a_scan_with_changed_and_created_rows(make_domain: Make, where: Any) -> None:
    domain = make_domain(_big())
    world = World(seed_for(domain))
    world.update("loads", "L-0003", {"origin": "Atlanta GA"})  # leaves Dallas
    world.update("loads", "L-0004", {"origin": "Dallas TX", "status": "booked"})  # joins Dallas
    world.update("loads", "L-0010", {"rate": 1003})
    world.create("loads", {"load_id": "L-9000", "origin": "Dallas TX", "rate": "1003", "hazmat": True,
                           "status": "booked"})
    world.create("loads", {"load_id": "L-0500", "origin": "Atlanta GA", "rate": 1003.0, "status": "available"})
    scan = [r for r in world.rows("loads") if row_matches(r, where)]
    assert world.select("loads", where) == scan
    assert world.select("loads", where, limit=2) == scan[:2]
    assert seed_for(domain).tables["loads"]._indexes  # the index path was taken


def test_an_indexed_select_keeps_table_order(make_domain: Make) -> None:
    world = World(seed_for(make_domain(_big())))
    world.create("loads", {"load_id": "L-0001-X", "origin": "Dallas TX"})
    world.update("loads", "L-0006", {"rate": 0})
    keys = [r["load_id"] for r in world.select("loads", {"origin": "Dallas TX"})]
    assert keys[:3] == ["L-0000", "L-0003", "L-0006"]
    assert keys[-1] == "L-0001-X"
    assert len(keys) == 41


def test_touched_names_the_rows_of_the_diff_in_its_order(make_domain: Make) -> None:
    world = World(seed_for(make_domain(LOADS)))

    def from_diff() -> list[tuple[str, Any]]:
        diff = world.diff()
        return [(e["table"], e["key"]) for part in ("created", "changed", "deleted") for e in diff.get(part, [])]

    steps: list[Callable[[], Any]] = [
        lambda: world.update("loads", "L-1002", {"status": "available"}),  # the same value: no change
        lambda: world.create("bookings", {"load_id": "L-1001"}),
        lambda: world.update("loads", "L-1002", {"status": "booked"}),
        lambda: world.create("loads", {"load_id": "L-2000", "origin": "Reno NV"}),
        lambda: world.delete("loads", "L-1001"),
        lambda: world.create("loads", {"load_id": "L-1001", "origin": "Atlanta GA"}),  # made again
        lambda: world.delete("loads", "L-2000"),  # created, then gone
        lambda: world.update("loads", "L-1002", {"status": "available"}),  # back to the seed's value
        lambda: world.update("loads", "L-1002", {"tags": []}),  # a field the seed row lacks
    ]
    assert world.touched() == from_diff() == []
    seen = []
    for step in steps:
        step()
        assert world.touched() == from_diff()
        seen.append(world.touched())
    assert seen[2] == [("bookings", "B-1"), ("loads", "L-1002")]
    assert seen[4] == [("loads", "L-2000"), ("bookings", "B-1"), ("loads", "L-1002"), ("loads", "L-1001")]
    assert seen[-1] == [("bookings", "B-1"), ("loads", "L-1002"), ("loads", "L-1001")]
