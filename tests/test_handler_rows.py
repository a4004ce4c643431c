"""What a handler's ``world.get`` and ``world.list`` give it (docs/handlers.md): rows that
share nothing mutable with the world, whichever way the handler reads or changes them.
The rows are copied as they are read (a handler that scans a table pays for what it
reads), so every way of reading a nested value, in Python or in C, is tried here
against a world whose seed rows every later trial shares."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.handlers import WorldHandle
from pytest_sandtable.engine.world import World, seed_for

DOMAIN = """\
version: 1
name: nested
policy: Nothing.
world:
  users:
    key: user_id
    rows:
      - { user_id: u1, name: { first: Ada, last: Byron }, tags: [a, b],
          cards: { c1: { kind: gift, balance: 10 }, c2: { kind: credit, history: [1, 2] } }, score: 3 }
      - { user_id: u2, name: { first: Alan, last: Turing }, tags: [c], cards: {}, score: 4 }
      - { user_id: u3, name: { first: Grace, last: Hopper }, tags: [], cards: {}, score: 5 }
      - { user_id: u4, name: { first: Edsger, last: Dijkstra }, tags: [d], cards: {}, score: 6 }
      - { user_id: u5, name: { first: Barbara, last: Liskov }, tags: [e], cards: {}, score: 7 }
  plain:
    key: id
    rows:
      - { id: p1, n: 1 }
      - { id: p2, n: 2, "a.b": 5 }
tools:
  - name: noop
    params: {}
    ops: [{ respond: { ok: true } }]
tasks:
  - id: t
    user: { opening: Hello. }
    reference:
      - say: Hello.
"""


@pytest.fixture
def domain(tmp_path: Path) -> st.Domain:
    (tmp_path / "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    return st.load_domain(tmp_path / "sandtable.yaml")


def seed_rows(domain: st.Domain) -> list[dict[str, Any]]:
    """The seed rows as plain, independent data, to compare the world with."""
    return json.loads(json.dumps(list(seed_for(domain).tables["users"].rows.values())))  # type: ignore[no-any-return]


def _deep_mutate(value: Any) -> None:
    """Change every mutable value reachable from ``value`` in place."""
    if isinstance(value, dict):
        for k in list(value):
            v = value[k]
            if isinstance(v, (dict, list)):
                _deep_mutate(v)
        value["MUTATED"] = True
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, (dict, list, tuple)):
                _deep_mutate(v)
        if isinstance(value, list):
            value.append("MUTATED")


def _nested_of(row: Any) -> list[Any]:
    return [row["name"], row["tags"], row["cards"], row["cards"]["c1"], row["cards"]["c2"]["history"]]


def _into(rows: list[Any], how: str) -> list[Any]:
    out: list[Any] = []
    if how == "slice":
        out[0:0] = rows
    elif how == "extend":
        out.extend(rows)
    else:
        out += rows
    return out


# each: a handler's way of getting something out of the rows it was given; everything it
# returns is then changed in place, all the way down
ROW_READS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "indexing": _nested_of,
    "get": lambda r: [r.get("name"), r.get("tags"), r.get("cards")],
    "items": lambda r: list(r.items()),
    "values": lambda r: list(r.values()),
    "pop": lambda r: [r.pop("name"), r.pop("cards"), r.pop("missing", None)],
    "popitem": lambda r: [r.popitem() for _ in range(len(r))],
    "setdefault": lambda r: [r.setdefault("name", {}), r.setdefault("tags")],
    "dict()": lambda r: dict(r),
    "**": lambda r: {**r},
    "copy": lambda r: r.copy(),
    "copy.copy": lambda r: copy.copy(r),
    "copy.deepcopy": lambda r: copy.deepcopy(r),
    "pickle": lambda r: pickle.loads(pickle.dumps(r)),
    "|": lambda r: r | {"extra": 1},
    "reversed |": lambda r: {"extra": 1} | r,
    "|=": lambda r: [r.__ior__({"extra": 1}), r["name"]],
    "update into": lambda r: [d for d in [{}] if d.update(r) is None],
    "json": lambda r: json.loads(json.dumps(r)),
    "fromkeys": lambda r: [r.fromkeys(["name"], r["tags"]), r["tags"]],
    "type(row)": lambda r: [type(r)(r), r["name"]],
    "nested items": lambda r: [list(r["cards"].items()), list(r["cards"].values())],
    "nested dict()": lambda r: [dict(r["cards"]), {**r["cards"]}],
}

LIST_READS: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "for": lambda rows: [row for row in rows],
    "list()": lambda rows: list(rows),
    "sorted": lambda rows: sorted(rows, key=lambda r: r["user_id"]),
    "index": lambda rows: [rows[0], rows[-1], rows[2]],
    "slice": lambda rows: rows[1:3],
    "reversed": lambda rows: list(reversed(rows)),
    "unpack": lambda rows: [*rows],
    "tuple": lambda rows: list(tuple(rows)),
    "copy": lambda rows: rows.copy(),
    "copy.copy": lambda rows: copy.copy(rows),
    "copy.deepcopy": lambda rows: copy.deepcopy(rows),
    "pickle": lambda rows: pickle.loads(pickle.dumps(rows)),
    "+": lambda rows: rows + [],  # noqa: RUF005 (the operator is what is tried)
    "radd": lambda rows: [] + rows,  # noqa: RUF005
    "*": lambda rows: rows * 2,
    "pop": lambda rows: [rows.pop(), rows.pop(0)],
    "sort": lambda rows: [rows.sort(key=lambda r: -r["score"]), rows][1],
    "reverse": lambda rows: [rows.reverse(), rows][1],
    "enumerate": lambda rows: [r for _, r in enumerate(rows)],
    "max": lambda rows: [max(rows, key=lambda r: r["score"])],
    "json": lambda rows: json.loads(json.dumps(rows)),
    "type(rows)": lambda rows: list(type(rows)(rows)),
    "slice assigned": lambda rows: _into(rows, "slice"),
    "extended": lambda rows: _into(rows, "extend"),
    "+=": lambda rows: _into(rows, "+="),
    "after an append": lambda rows: [rows.append({"x": [1]}), list(rows)][1],
    "after a slice assignment": lambda rows: [rows.__setitem__(slice(0, 1), []), list(rows)][1],
}


@pytest.mark.parametrize("how", ROW_READS)
def test_no_way_of_reading_a_row_reaches_the_world(domain: st.Domain, how: str) -> None:
    world = World(seed_for(domain))
    before = seed_rows(domain)
    handle = WorldHandle(world, domain)
    for row in (handle.get("users", "u1"), handle.list("users")[0]):
        assert row is not None
        _deep_mutate(ROW_READS[how](row))
        _deep_mutate(row)
    assert seed_rows(domain) == before
    assert [world.get("users", r["user_id"]) for r in before] == before
    assert handle.get("users", "u1") == before[0]  # a later read: the world's row as it was


@pytest.mark.parametrize("how", LIST_READS)
def test_no_way_of_reading_a_list_reaches_the_world(domain: st.Domain, how: str) -> None:
    world = World(seed_for(domain))
    before = seed_rows(domain)
    handle = WorldHandle(world, domain)
    rows = handle.list("users")
    assert len(rows) == 5
    for row in LIST_READS[how](rows):
        _deep_mutate(row)
        if isinstance(row, dict) and "name" in row:
            _deep_mutate(_nested_of(row) if "cards" in row and "c1" in row["cards"] else row["name"])
    for row in list(rows):
        _deep_mutate(row)
    assert seed_rows(domain) == before
    assert handle.list("users") == before


def test_a_row_keeps_what_the_handler_changed_in_it(domain: st.Domain) -> None:
    handle = WorldHandle(World(seed_for(domain)), domain)
    rows = handle.list("users")
    first = rows[0]
    first["name"]["first"] = "Augusta"
    first["cards"]["c2"]["history"].append(3)
    assert rows[0] is first and next(iter(rows)) is first  # the same row, read again
    assert first["name"] == {"first": "Augusta", "last": "Byron"}
    assert first.get("cards")["c2"] == {"kind": "credit", "history": [1, 2, 3]}
    assert dict(first)["name"]["first"] == "Augusta"
    assert json.loads(json.dumps(first))["cards"]["c2"]["history"] == [1, 2, 3]
    assert first == {"user_id": "u1", "name": {"first": "Augusta", "last": "Byron"}, "tags": ["a", "b"],
                     "cards": {"c1": {"kind": "gift", "balance": 10}, "c2": {"kind": "credit", "history": [1, 2, 3]}},
                     "score": 3}
    mine = {"mine": True}
    first["name"] = mine
    assert first["name"] is mine  # a value the handler put there is its own, not copied
    del first["tags"]
    assert "tags" not in first and first.get("tags", "gone") == "gone"
    assert isinstance(first, dict) and isinstance(rows, list)


def test_what_a_handler_writes_from_its_rows_is_what_it_holds(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    handle = WorldHandle(world, domain)
    user = handle.get("users", "u1")
    assert user is not None
    user["cards"]["c1"]["balance"] = 25
    handle.update("users", "u1", {"cards": user["cards"]})
    handle.update("users", "u2", handle.get("users", "u1") | {"user_id": "u2"})  # unread fields: the world's
    listed = handle.list("users")
    handle.update("users", "u3", {"name": listed[3]["name"], "tags": listed[4]["tags"]})
    assert world.get("users", "u1")["cards"]["c1"] == {"kind": "gift", "balance": 25}  # type: ignore[index]
    assert world.get("users", "u2") == {**world.get("users", "u1"), "user_id": "u2"}  # type: ignore[dict-item]
    assert world.get("users", "u3")["name"] == {"first": "Edsger", "last": "Dijkstra"}  # type: ignore[index]
    assert world.get("users", "u3")["tags"] == ["e"]  # type: ignore[index]
    user["cards"]["c1"]["balance"] = 99  # after the write: the world keeps what was written
    assert world.get("users", "u1")["cards"]["c1"]["balance"] == 25  # type: ignore[index]
    assert seed_for(domain).tables["users"].rows["u1"]["cards"]["c1"]["balance"] == 10
    # what update and create give back is the handler's: changing it changes nothing the world holds
    written = {"c9": {"kind": "gift", "balance": 1}}
    updated = handle.update("users", "u4", {"cards": written})
    created = handle.create("users", {"user_id": "u7", "cards": written, "tags": ["t"]})
    written["c9"]["balance"] = 2
    updated["cards"]["c9"]["balance"] = 3
    created["cards"]["c9"]["balance"] = 4
    created["tags"].append("u")
    assert world.get("users", "u4")["cards"] == {"c9": {"kind": "gift", "balance": 1}}  # type: ignore[index]
    assert world.get("users", "u7") == {"user_id": "u7", "cards": {"c9": {"kind": "gift", "balance": 1}},
                                        "tags": ["t"]}


def test_rows_of_scalars_and_short_lists_are_plain(domain: st.Domain) -> None:
    handle = WorldHandle(World(seed_for(domain)), domain)
    assert type(handle.get("plain", "p1")) is dict
    assert type(handle.list("plain")) is list


HANDLERS = '''\
def give(args, world, ctx):
    rows = world.list("users")
    return {"first": rows[0], "all": rows, "one": world.get("users", "u2")}


def change_then_give(args, world, ctx):
    rows = world.list("users")
    rows[0]["name"]["first"] = "changed"
    return rows
'''

TOOLS = """\
tools:
  - name: give
    params: {}
    handler: rows_handlers:give
  - name: change_then_give
    params: {}
    handler: rows_handlers:change_then_give
"""


def test_a_handler_returning_its_rows_gives_the_world_s_values_and_changes_nothing(tmp_path: Path) -> None:
    text = DOMAIN.replace("tools:\n  - name: noop\n    params: {}\n    ops: [{ respond: { ok: true } }]\n", TOOLS)
    (tmp_path / "rows_handlers.py").write_text(HANDLERS, encoding="utf-8")
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    domain = st.load_domain(tmp_path / "sandtable.yaml")
    before = seed_rows(domain)

    def agent(turn: st.Turn) -> str:
        turn.call_tool("change_then_give")
        turn.call_tool("give")
        return "Done."

    r = st.run_trial(domain, "t", agent, st.ScriptedUser())
    changed, given = (c["result"] for c in r.calls)
    assert changed[0]["name"]["first"] == "changed" and changed[1:] == before[1:]
    assert given == {"first": before[0], "all": before, "one": before[1]}
    assert type(given["all"]) is list and type(given["first"]) is dict  # plain JSON values in the call log
    assert r.diff == {"created": [], "changed": []}
    assert seed_rows(domain) == before


def _keys(rows: list[dict[str, Any]], key: str = "user_id") -> list[str]:
    return [r[key] for r in rows]


def test_a_where_key_with_dots_is_a_path_into_nested_fields(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    handle = WorldHandle(world, domain)
    assert _keys(handle.list("users", {"name.first": "Alan"})) == ["u2"]
    assert _keys(handle.list("users", {"name.last": {"in": ["Liskov", "Turing"]}, "score": {"gte": 4}})) == ["u2", "u5"]
    assert _keys(handle.list("users", {"cards.c1.kind": "gift"})) == ["u1"]
    assert _keys(handle.list("users", {"cards.c1": {"exists": False}})) == ["u2", "u3", "u4", "u5"]
    assert _keys(handle.list("users", {"name.first.x": "Ada"})) == []  # through a text: no such field
    assert _keys(handle.list("users", {"name.first": {"ne": "Ada"}}, limit=2)) == ["u2", "u3"]
    # what the trial wrote is found, in table order: a changed seed row where it was, a created one last
    handle.update("users", "u4", {"name": {"first": "Alan", "last": "Kay"}})
    handle.update("users", "u2", {"name": {"first": "Alonzo", "last": "Church"}})
    handle.create("users", {"user_id": "u6", "name": {"first": "Alan", "last": "Perlis"}, "score": 1})
    assert _keys(handle.list("users", {"name.first": "Alan"})) == ["u4", "u6"]
    assert _keys(handle.list("users", {"name.first": {"eq": "Alan"}, "score": {"lt": 5}})) == ["u6"]
    handle.delete("users", "u6")
    assert _keys(handle.list("users", {"name.first": "Alan"})) == ["u4"]
    assert seed_for(domain).tables["users"].rows["u4"]["name"]["first"] == "Edsger"


def test_a_field_whose_name_has_a_dot_is_that_field(domain: st.Domain) -> None:
    handle = WorldHandle(World(seed_for(domain)), domain)
    assert _keys(handle.list("plain", {"a.b": 5}), "id") == ["p2"]
    with pytest.raises(ValueError) as e:
        handle.list("users", {"name..first": "Ada"})
    assert str(e.value) == ("world.list('users', where=...): 'name..first' is no path; a path names nested "
                            "fields with dots between them, such as 'address.zip'")


def test_ieq_finds_a_text_with_case_set_aside_through_the_index_and_the_trials_writes(domain: st.Domain) -> None:
    world = World(seed_for(domain))
    handle = WorldHandle(world, domain)
    assert _keys(handle.list("users", {"name.last": {"ieq": "TURING"}})) == ["u2"]
    assert _keys(handle.list("users", {"name.first": {"ieq": "ada"}, "score": 3})) == ["u1"]
    assert _keys(handle.list("users", {"name.first": {"ieq": "ada"}, "score": 4})) == []
    assert _keys(handle.list("users", {"score": {"ieq": "3"}})) == []  # a number is no text
    handle.update("users", "u3", {"name": {"first": "ADA", "last": "Lovelace"}})
    handle.create("users", {"user_id": "u6", "name": {"first": "aDa", "last": "Yonath"}, "score": 1})
    handle.update("users", "u1", {"name": {"first": "Augusta", "last": "Byron"}})
    assert _keys(handle.list("users", {"name.first": {"ieq": "Ada"}})) == ["u3", "u6"]
    # the same rows as every row tested one by one, in table order
    every = [r for r in world.rows("users") if isinstance(r["name"]["first"], str)
             and r["name"]["first"].lower() == "ada"]
    assert [r["user_id"] for r in every] == ["u3", "u6"]
    assert seed_for(domain).tables["users"].lower_index(("name", "first"))["ada"] == ["u1"]


def _giving(tmp_path: Path, module: str, table: str, row: str) -> st.Domain:
    """The nested domain with one more table of one row, and one tool ``give`` whose
    handler (in ``module``) returns that row."""
    text = DOMAIN.replace("tools:\n  - name: noop\n    params: {}\n    ops: [{ respond: { ok: true } }]\n",
                          f"tools:\n  - name: give\n    params: {{}}\n    handler: {module}:give\n")
    text = text.replace("  plain:\n", f"  {table}:\n    key: id\n    rows:\n      - {row}\n  plain:\n")
    (tmp_path / f"{module}.py").write_text(f"def give(args, world, ctx):\n    return world.get({table!r}, 'r1')\n",
                                           encoding="utf-8")
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    return st.load_domain(tmp_path / "sandtable.yaml")


def test_a_world_row_that_is_not_json_errors_every_trial_that_returns_it(tmp_path: Path) -> None:
    # the world's objects found to be JSON are kept by id: a row once refused is refused again
    domain = _giving(tmp_path, "dated_handlers", "dated", "{ id: r1, on: { v: .nan } }")

    def agent(turn: st.Turn) -> str:
        turn.call_tool("give")
        return "Done."

    for _ in range(2):
        r = st.run_trial(domain, "t", agent, st.ScriptedUser())
        assert (r.verdict, r.error) == ("errored", "the domain failed running give: its handler "
                                            "dated_handlers:give returned nan at result.on.v, expected a JSON value")


def test_a_world_row_that_orjson_does_not_write_is_returned_the_same_every_call(tmp_path: Path) -> None:
    # the second and later copies of a world object go through orjson, and through marshal
    # when orjson cannot write it (an integer past 64 bits)
    row = "{ id: r1, n: { v: [123456789012345678901234567890, 1.5e300, -0.0, x] } }"
    domain = _giving(tmp_path, "big_handlers", "big", row)

    def agent(turn: st.Turn) -> str:
        for _ in range(3):
            turn.call_tool("give")
        return "Done."

    for _ in range(2):
        r = st.run_trial(domain, "t", agent, st.ScriptedUser())
        assert r.verdict != "errored", r.error
        values = [c["result"]["n"]["v"] for c in r.calls]
        assert values == [[123456789012345678901234567890, 1.5e300, -0.0, "x"]] * 3
        assert [type(x) for x in values[2]] == [int, float, float, str]
        assert json.dumps(values[2][2]) == "-0.0"
