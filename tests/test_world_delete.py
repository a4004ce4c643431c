"""World.delete: a row gone for every read, the savepoint, the diff and the field views,
while the shared seed stays untouched."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.world import NotFound, World, seed_for

Make = Callable[[str], st.Domain]

# 70 rows: over the size at which select uses an index, so both paths are exercised
ROWS = "\n".join(
    f"      - {{ load_id: L-{i}, origin: {'Atlanta' if i % 2 else 'Dallas'}, status: open }}" for i in range(1, 71)
)
BIG = f"""
world:
  loads:
    key: load_id
    key_format: "L-{{n}}"
    rows:
{ROWS}
  notes:
    key: note_id
    key_format: "N-{{n}}"
    rows:
      - {{ note_id: N-1, text: first }}
      - {{ note_id: N-2, text: second }}
tools:
  - name: get_note
    params: {{ note_id: {{ type: string }} }}
    ops:
      - get: {{ table: notes, key: $note_id }}
tasks:
  - id: t
    user: {{ opening: Hi. }}
"""


@pytest.fixture
def world(make_domain: Make) -> World:
    return World(seed_for(make_domain(BIG)))


def test_delete_returns_the_row_and_every_read_sees_it_gone(world: World) -> None:
    assert world.delete("notes", "N-1") == {"note_id": "N-1", "text": "first"}
    assert world.get("notes", "N-1") is None
    assert world.count("notes") == 1
    assert list(world.rows("notes")) == [{"note_id": "N-2", "text": "second"}]
    assert world.select("notes", {}) == [{"note_id": "N-2", "text": "second"}]
    assert world.select("notes", {"text": {"ne": "nothing"}}) == [{"note_id": "N-2", "text": "second"}]
    assert world.seed.tables["notes"].rows["N-1"] == {"note_id": "N-1", "text": "first"}  # the seed is untouched
    assert World(world.seed).get("notes", "N-1") == {"note_id": "N-1", "text": "first"}  # so is the next trial


def test_deleting_a_missing_or_deleted_row_is_not_found(world: World) -> None:
    with pytest.raises(NotFound, match=r"^notes N-9 not found$"):
        world.delete("notes", "N-9")
    world.delete("notes", "N-2")
    with pytest.raises(NotFound, match=r"^notes N-2 not found$"):
        world.delete("notes", "N-2")
    with pytest.raises(NotFound, match=r"^notes N-2 not found$"):
        world.update("notes", "N-2", {"text": "again"})


def test_an_indexed_select_and_the_field_views_skip_a_deleted_row(world: World) -> None:
    assert len(world.select("loads", {"origin": "Atlanta"})) == 35
    world.delete("loads", "L-1")
    world.update("loads", "L-3", {"status": "booked"})
    world.delete("loads", "L-3")
    atlanta = world.select("loads", {"origin": "Atlanta"})
    assert len(atlanta) == 33
    assert atlanta[0]["load_id"] == "L-5"
    assert world.field_values("loads", "origin")[("s", "Atlanta")] == 33
    assert ("s", "booked") not in world.field_view("loads", "status")
    assert world.keys_with_value("loads", "origin", "Atlanta") == ["L-5", "L-7", "L-9"]
    assert world.count("loads") == 68


def test_a_created_row_can_be_deleted_and_its_key_is_not_given_out_again(world: World) -> None:
    made = world.create("notes", {"text": "third"})
    assert made["note_id"] == "N-3"
    world.delete("notes", "N-3")
    assert world.count("notes") == 2
    assert [r["note_id"] for r in world.rows("notes")] == ["N-1", "N-2"]
    assert world.create("notes", {"text": "fourth"})["note_id"] == "N-4"
    assert world.diff() == {"created": [{"table": "notes", "key": "N-4", "row": {"text": "fourth", "note_id": "N-4"}}],
                            "changed": []}


def test_a_deleted_key_may_be_created_again(world: World) -> None:
    world.delete("notes", "N-1")
    world.create("notes", {"note_id": "N-1", "text": "redone"})
    assert [r["text"] for r in world.rows("notes")] == ["redone", "second"]  # in its seed place
    assert world.diff() == {"created": [], "changed": [
        {"table": "notes", "key": "N-1", "fields": {"text": {"before": "first", "after": "redone"}}}]}
    world.create("notes", {"text": "third"})
    world.delete("notes", "N-3")
    world.create("notes", {"note_id": "N-3", "text": "again"})
    assert [r["note_id"] for r in world.rows("notes")] == ["N-1", "N-2", "N-3"]


def test_the_diff_shows_deleted_rows_as_they_were(world: World) -> None:
    world.update("notes", "N-1", {"text": "edited"})
    world.delete("notes", "N-1")
    assert world.diff() == {"created": [], "changed": [],
                            "deleted": [{"table": "notes", "key": "N-1", "row": {"note_id": "N-1", "text": "first"}}]}


def test_rollback_brings_a_deleted_row_back_and_the_diff_counts_from_the_savepoint(world: World) -> None:
    given = world.create("notes", {"text": "given"})
    baseline = world.savepoint()
    world.delete("notes", given["note_id"])
    world.delete("notes", "N-2")
    assert world.diff(baseline) == {"created": [], "changed": [], "deleted": [  # in the order they were touched
        {"table": "notes", "key": "N-3", "row": {"text": "given", "note_id": "N-3"}},
        {"table": "notes", "key": "N-2", "row": {"note_id": "N-2", "text": "second"}},
    ]}
    world.rollback(baseline)
    assert [r["note_id"] for r in world.rows("notes")] == ["N-1", "N-2", "N-3"]
    assert world.diff(baseline) == {"created": [], "changed": []}


def test_a_row_deleted_before_the_savepoint_and_made_again_after_it_is_created(world: World) -> None:
    world.delete("notes", "N-1")
    baseline = world.savepoint()
    world.create("notes", {"note_id": "N-1", "text": "back"})
    back = {"table": "notes", "key": "N-1", "row": {"note_id": "N-1", "text": "back"}}
    assert world.diff(baseline) == {"created": [back], "changed": []}
