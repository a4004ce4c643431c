"""The trial's fast paths give what the general paths give: flat arguments copied without
the walk, the hash index on small tables, savepoints of the tables a trial changed, a
tool's ops undone from the first write on, disclosure findings kept for texts over an
unchanged table, a param's JSON Schema validator made once, a clause's plan made once, a
handler's result and writes copied through orjson."""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.conditions import equal, resolve_where, row_matches
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.domain.model import Param
from pytest_sandtable.engine import handlers
from pytest_sandtable.engine.api import TrialInfo
from pytest_sandtable.engine.handlers import HandlerState, run_tool
from pytest_sandtable.engine.rules import DisclosureScanner
from pytest_sandtable.engine.tools import ArgError, _Plain, _validate_structured, coerce_args, plain_arguments
from pytest_sandtable.engine.trial import _Trial
from pytest_sandtable.engine.world import World, seed_for

DOMAIN = """\
version: 1
name: yard
world:
  trucks:
    key: truck_id
    rows:
      - { truck_id: T-1, depot: Reno, size: 26, note: "2,350 miles" }
      - { truck_id: T-2, depot: Elko, size: 16 }
      - { truck_id: T-3, depot: Reno, size: "26" }
      - { truck_id: 4, depot: reno, size: 26.0 }
      - { truck_id: T-5, depot: Reno }
  moves:
    key: move_id
    key_format: M-{n}
    rows: []
  rates:
    key: lane
    rows:
      - { lane: Reno-Elko, ceiling: 2375 }
tools:
  - name: move_and_check
    params: { truck_id: { type: string }, depot: { type: string } }
    ops:
      - create: { table: moves, row: { truck_id: $truck_id, depot: $depot } }
      - update: { table: trucks, key: $truck_id, set: { depot: $depot } }
  - name: move_then_read
    params: { truck_id: { type: string }, lane: { type: string } }
    ops:
      - update: { table: trucks, key: $truck_id, set: { depot: Moved } }
      - get: { table: rates, key: $lane }
  - name: add_move
    params: { move_id: { type: string } }
    ops:
      - create: { table: moves, row: { move_id: $move_id } }
  - name: book
    params:
      plan: { type: object, properties: { legs: { type: array, items: { type: integer } } } }
    ops:
      - respond: { ok: true }
invariants:
  - id: ceiling-is-secret
    kind: never_disclose
    values: { table: rates, field: ceiling }
  - id: code-word
    kind: never_disclose
    values: [bluebird]
tasks:
  - id: t
    user: { opening: Hi. }
"""


@pytest.fixture(scope="module")
def domain() -> st.Domain:
    return load_domain_text(DOMAIN)


def fresh(domain: st.Domain) -> World:
    return World(seed_for(domain))


def walked(args: Any) -> tuple[Any, str | None]:
    walk = _Plain()
    return walk.arguments(args), walk.problem


@pytest.mark.parametrize("args", [
    {},
    {"a": "x", "b": 1, "c": 2.5, "d": True, "e": None},
    {"nan": math.nan, "big": 10**300, "neg": -7},
])
def test_flat_arguments_are_copied_as_the_walk_copies_them(args: dict[str, Any]) -> None:
    copied, problem = plain_arguments(args)
    want, want_problem = walked(args)
    assert problem is want_problem is None
    assert list(copied.items()) == list(want.items()) or (math.isnan(copied["nan"]) and copied.keys() == want.keys())
    assert copied is not args


def test_a_too_long_integer_still_takes_the_walk_and_is_named() -> None:
    args = {"amount": 10**5000}
    copied, problem = plain_arguments(args)
    assert problem == "amount: expected at most 4300 digits in an integer, got more"
    assert copied == {"amount": "<integer of more than 4300 digits>"}
    with pytest.raises(ArgError, match=r"^move_id: expected at most 4300 digits in an integer, got more$"):
        coerce_args(load_domain_text(DOMAIN).tools["add_move"], {"move_id": 10**5000})


def test_an_object_argument_is_walked_not_shared() -> None:
    inner = {"legs": [1, 2]}
    copied, problem = plain_arguments({"plan": inner})
    assert (copied, problem) == ({"plan": {"legs": [1, 2]}}, None)
    assert copied["plan"] is not inner


WHERES = [
    {"depot": "Reno"},
    {"size": 26},
    {"size": "26.0"},
    {"size": {"eq": 26}},
    {"size": {"eq": 26}, "depot": "Reno"},
    {"depot": {"in": ["Reno", "Elko"]}},
    {"truck_id": "4"},
    {"truck_id": 4.0},
    {"note": None},
    {"depot": "Nowhere"},
    {"any_of": [{"depot": "Elko"}, {"size": 26}]},
]


def test_the_index_finds_what_a_scan_finds_in_table_order_as_the_trial_changes_rows(domain: st.Domain) -> None:
    rng = random.Random(7)
    world = fresh(domain)
    for step in range(60):
        for where in WHERES:
            scanned = [r for r in world.rows("trucks") if row_matches(r, where)]
            assert world.select("trucks", where) == scanned, (step, where)
            assert world.select("trucks", where, limit=1) == scanned[:1]
        key = rng.choice(["T-1", "T-2", "T-3", 4, "T-5", f"N-{step % 7}"])
        what = rng.choice(["update", "delete", "create"])
        try:
            if what == "update":
                depot, size = rng.choice(["Reno", "Elko", "Vegas"]), rng.choice([26, 16])
                world.update("trucks", key, {"depot": depot, "size": size})
            elif what == "delete":
                world.delete("trucks", key)
            else:
                world.create("trucks", {"truck_id": key, "depot": rng.choice(["Reno", "Elko"]), "size": 26})
        except (st.engine.world.NotFound, st.engine.world.Conflict):
            pass


def test_a_savepoint_keeps_only_changed_tables_and_rolls_every_table_back(domain: st.Domain) -> None:
    world = fresh(domain)
    start = world.savepoint()
    assert start == ({}, {})
    world.update("trucks", "T-1", {"depot": "Elko"})
    middle = world.savepoint()
    assert list(middle[0]) == ["trucks"] and middle[1] == {}
    world.create("moves", {"truck_id": "T-1"})
    world.delete("rates", "Reno-Elko")
    world.rollback(middle)
    assert world.get("trucks", "T-1")["depot"] == "Elko"
    assert world.count("moves") == 0 and world.get("rates", "Reno-Elko") is not None
    assert world.diff(start) == {"created": [], "changed": [
        {"table": "trucks", "key": "T-1", "fields": {"depot": {"before": "Reno", "after": "Elko"}}}]}
    world.rollback(start)
    assert world.diff() == {"created": [], "changed": []}
    assert [world.untouched(t) for t in ("trucks", "moves", "rates")] == [True, True, True]


def run(domain: st.Domain, world: World, tool: str, args: dict[str, Any]) -> st.ToolResult:
    t = domain.tools[tool]
    return run_tool(t, coerce_args(t, args), world, HandlerState(domain, domain.tasks[0], 1), 0)


def test_an_error_after_a_write_undoes_the_write(domain: st.Domain) -> None:
    world = fresh(domain)
    result = run(domain, world, "move_and_check", {"truck_id": "T-9", "depot": "Elko"})
    assert (result.ok, result.error, result.message) == (False, 404, "trucks T-9 not found")
    assert world.diff() == {"created": [], "changed": []} and world.count("moves") == 0
    result = run(domain, world, "move_then_read", {"truck_id": "T-1", "lane": "Elko-Reno"})
    assert (result.ok, result.error, result.message) == (False, 404, "rates Elko-Reno not found")
    assert world.get("trucks", "T-1")["depot"] == "Reno" and world.untouched("trucks")


def test_a_lone_write_that_fails_changes_nothing_and_one_that_succeeds_stays(domain: st.Domain) -> None:
    world = fresh(domain)
    assert run(domain, world, "add_move", {"move_id": "M-1"}).value == {"move_id": "M-1"}
    result = run(domain, world, "add_move", {"move_id": "M-1"})
    assert (result.ok, result.error, result.message) == (False, 409, "moves M-1 already exists")
    assert world.diff()["created"] == [{"table": "moves", "key": "M-1", "row": {"move_id": "M-1"}}]
    result = run(domain, world, "move_and_check", {"truck_id": "T-2", "depot": "Reno"})
    assert result.value == {"truck_id": "T-2", "depot": "Reno", "move_id": "M-2"}  # the row it created
    assert [m["key"] for m in world.diff()["created"]] == ["M-1", "M-2"]
    assert world.get("trucks", "T-2") == {"truck_id": "T-2", "depot": "Reno", "size": 16}


def test_a_finding_kept_for_an_unchanged_table_is_not_used_once_the_table_changes(domain: st.Domain) -> None:
    scanner = DisclosureScanner(domain)
    text = "Our ceiling on that lane is $2,375, bluebird."
    found = [(inv.id, detail) for inv, detail in scanner.scan(text, fresh(domain))]
    assert found == [
        ("ceiling-is-secret", 'agent said rates Reno-Elko ceiling 2375 as "$2,375"'),
        ("code-word", 'agent said the protected value "bluebird" as "bluebird"'),
    ]
    assert [(inv.id, detail) for inv, detail in scanner.scan(text, fresh(domain))] == found  # kept
    changed = fresh(domain)
    changed.update("rates", "Reno-Elko", {"ceiling": 2400})
    assert [inv.id for inv, _ in scanner.scan(text, changed)] == ["code-word"]
    moved = fresh(domain)
    moved.create("rates", {"lane": "Elko-Reno", "ceiling": 2375})
    assert next(d for _, d in scanner.scan(text, moved)) == 'agent said rates Reno-Elko ceiling 2375 as "$2,375"'
    assert [(inv.id, detail) for inv, detail in scanner.scan(text, fresh(domain))] == found


def test_a_structured_argument_is_checked_against_its_schema_on_every_call(domain: st.Domain) -> None:
    tool = domain.tools["book"]
    for _ in range(2):
        with pytest.raises(ArgError, match=r"^plan\.legs\[1\]: 'x' is not of type 'integer'$"):
            coerce_args(tool, {"plan": {"legs": [1, "x"]}})
        with pytest.raises(ArgError, match=r"^plan\.legs: 'no' is not of type 'array'$"):
            coerce_args(tool, {"plan": {"legs": "no"}})
    assert coerce_args(tool, {"plan": {"legs": ["2"]}}) == {"plan": {"legs": [2]}}


def test_an_invalid_schema_raises_on_every_call_as_jsonschema_validate_does() -> None:
    param = Param("p", "object", schema={"type": "object", "properties": {"a": {"type": 5}}})
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            _validate_structured(param, {"a": 1})


@pytest.mark.parametrize(("a", "b", "same"), [
    ("2100", "2100.0", True), (" 7", "7", True), ("1e3", "1000", True), ("abc", "abd", False),
    ("", "0", False), ("L-1", "L-1", True), ("-1", "-1.0", True), ("x1", "x1.0", False), (10**20, 10**20 + 1, True),
])
def test_texts_compare_as_numbers_when_both_are_numbers(a: Any, b: Any, same: bool) -> None:
    assert equal(a, b) is same
    assert equal(b, a) is same


def test_a_clause_resolves_the_same_each_time_whatever_its_arguments() -> None:
    where = {"depot": "Reno", "size": 26, "truck_id": "$truck_id", "note": "from $depot", "flag": None,
             "lane": {"eq": {"table": "rates", "key": "$lane", "field": "ceiling"}},
             "not": {"depot": "$depot"}}
    rates = {("rates", "Reno-Elko"): {"lane": "Reno-Elko", "ceiling": 2375}}

    def lookup(table: str, key: Any) -> dict[str, Any] | None:
        return rates.get((table, key))

    assert resolve_where(where, {"truck_id": "T-1", "depot": "Elko", "lane": "Reno-Elko"}, lookup) == {
        "depot": "Reno", "size": 26, "truck_id": "T-1", "note": "from Elko", "flag": None,
        "lane": {"eq": 2375}, "not": {"depot": "Elko"}}
    assert resolve_where(where, {}, lookup) == {"depot": "Reno", "size": 26, "note": "from ", "flag": None}
    # an argument that is an operator object is read as one, as it always was
    assert resolve_where(where, {"truck_id": {"in": ["T-1", "T-2"]}}, lookup)["truck_id"] == {"in": ["T-1", "T-2"]}


def test_repeated_trials_of_a_task_give_the_same_results() -> None:
    domain = st.load_domain("example_domains/freight/sandtable.yaml")
    agent, user = st.ReferenceAgent(), st.ScriptedUser()

    def plain(r: st.TrialResult) -> dict[str, Any]:
        d = r.to_dict()
        d.pop("duration"), d.pop("latency")
        return d

    for task in domain.tasks:
        first = plain(st.run_trial(domain, task, agent, user, trial=2, k=3, run_seed=5))
        again = plain(st.run_trial(domain, task, agent, user, trial=2, k=3, run_seed=5))
        assert again == first, task.id


def test_a_trial_checks_only_its_own_tools_rules(domain: st.Domain) -> None:
    t = _Trial(domain, domain.tasks[0], TrialInfo("yard", "t", 1, 1, 1))
    assert t.rules == {} and [inv.id for inv in t.scanner.rules] == ["ceiling-is-secret", "code-word"]


def test_kept_per_object_is_made_once_per_identity_and_starts_over_past_its_limit() -> None:
    from pytest_sandtable.engine.kept import KeptPer

    made: list[object] = []

    def make(obj: dict[str, int]) -> int:
        made.append(obj)
        if obj.get("bad"):
            raise ValueError("bad spec")
        return len(made)

    kept: KeptPer[dict[str, int], int] = KeptPer(make, limit=2)
    a, b, equal_to_a = {"x": 1}, {"y": 2}, {"x": 1}
    assert (kept(a), kept(a), kept(equal_to_a)) == (1, 1, 2)  # by identity, not equality
    bad = {"bad": 1}
    for _ in range(2):  # a make that raises keeps nothing: it raises each time
        with pytest.raises(ValueError, match="bad spec"):
            kept(bad)
    assert kept(b) == 5  # a third object: the two kept before are let go
    assert kept(a) == 6


@pytest.mark.parametrize("value", [[], ["a", "b"], [True, False], ["a", 1], [1.5], ["a", None], "a,b", [["a"]]])
def test_a_list_of_texts_or_booleans_takes_the_quick_way_to_what_the_whole_way_gives(value: Any) -> None:
    from pytest_sandtable.engine.tools import _coerce_args

    tools = load_domain_text(DOMAIN.replace("tools:\n", """tools:
  - name: tag
    params:
      names: { type: array, items: { type: string } }
      flags: { type: array, items: { type: boolean }, description: Each a flag. }
    ops:
      - respond: { ok: true }
""", 1)).tools
    tool = tools["tag"]
    for name in ("names", "flags"):
        raw = {name: value}
        try:
            want: Any = _coerce_args(tool, dict(raw))
        except ArgError as e:
            want = str(e)
        try:
            got: Any = coerce_args(tool, raw)
        except ArgError as e:
            got = str(e)
        assert got == want
        if isinstance(got, dict):
            assert got[name] is not value  # a copy, as the whole way makes


class _Text(str):
    pass


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Size(float):
    pass


@dataclasses.dataclass
class _Point:
    x: int


def _nested(levels: int) -> list[Any]:
    """Arrays nested ``levels`` deep (``[[]]`` is two)."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _typed(value: Any) -> Any:
    """A value with every type spelt out: 1, 1.0 and True differ, a tuple is no list."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in dict.items(value)])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in list.__iter__(value)] if isinstance(value, list)
                else [_typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return (type(value).__name__, "nan")
    return (type(value).__name__, repr(value))


def _containers(value: Any) -> set[int]:
    """The ids of every list and mapping in a value, itself included."""
    if isinstance(value, dict):
        return {id(value)}.union(*map(_containers, dict.values(value)))
    if isinstance(value, (list, tuple)):
        return {id(value)}.union(*map(_containers, list.__iter__(value) if isinstance(value, list) else value))
    return set()


def _copied(copy: Any, value: Any) -> Any:
    """What a copy gives: the value, typed, or the words of what it refused."""
    try:
        return _typed(copy(value))
    except handlers._NotJson as e:
        return str(e)


_ROW = {"order_id": "O1", "status": "pending", "items": [{"sku": "A", "price": 9.5}], "note": {"by": "Ada"}}
RESULTS: list[Any] = [
    "a", 1, None, True, 1.5, -0.0, 2**70, -(2**70), 1e300, "\ud800", {"s": "\ud800"}, [2**64],
    math.nan, math.inf, [1, -math.inf], {"a": {"b": math.nan}},
    uuid.UUID(int=7), {"id": uuid.UUID(int=7)}, _Color.RED, [_Color.RED], _Level.HIGH, {"level": _Level.HIGH},
    _Text("t"), {"t": _Text("t")}, {_Text("k"): 1}, {1: 2}, {None: 1}, _Size(2.5), [_Size(2.5)],
    (1, 2), {"a": (1, [2, (3,)])}, b"x", {"b": b"x"}, datetime(2026, 1, 2, tzinfo=timezone.utc), _Point(1),
    {"p": _Point(1)}, {"s": {1, 2}}, _nested(64), _nested(65), {"n": _nested(63)}, {"n": _nested(64)},
    [{"a": 1}] * 70, {"text": "[" * 80 + "{" * 80},
]


@pytest.mark.parametrize("value", RESULTS)
def test_a_handlers_result_is_copied_through_orjson_exactly_as_the_walk_copies_it(value: Any) -> None:
    got = _copied(handlers._json_copy_fast, value)
    assert got == _copied(handlers._json_copy, value)
    if isinstance(value, (dict, list)) and not isinstance(got, str):  # taken, not refused
        assert not _containers(handlers._json_copy_fast(value)) & _containers(value)  # nothing of the handler's


def test_a_handlers_rows_are_copied_as_they_hold_them_read_or_not() -> None:
    untouched = handlers._lazy(_ROW)
    read = handlers._lazy(_ROW)
    read["items"].append({"sku": "B", "price": 1})
    read["status"] = "held"
    rows = handlers._rows_for([_ROW] * 5)
    rows[1]["note"]["by"] = "Lin"
    for value in (untouched, read, rows, {"rows": rows, "row": read}, [untouched, _Color.RED]):
        assert _copied(handlers._json_copy_fast, value) == _copied(handlers._json_copy, value)
    assert handlers._json_copy_fast(read)["items"] == [{"sku": "A", "price": 9.5}, {"sku": "B", "price": 1}]
    assert handlers._json_copy_fast(rows)[1]["note"] == {"by": "Lin"}
    assert _ROW["items"] == [{"sku": "A", "price": 9.5}] and _ROW["note"] == {"by": "Ada"}  # the world's, unchanged
    copy = handlers._json_copy_fast(untouched)
    copy["items"][0]["sku"] = "Z"
    assert _ROW["items"][0]["sku"] == "A"


@pytest.mark.parametrize("value", [[1.5, {"a": [2]}], [math.nan, 1], [2**70], ["\ud800"], [_nested(70)]])
def test_a_world_list_a_handler_reads_is_a_copy_of_what_the_world_holds(value: list[Any]) -> None:
    for _ in range(2):  # the second time through orjson, once the list is known to be JSON
        copy = handlers._private(value)
        assert copy is not value and _typed(copy) == _typed(value)


def test_a_uuid_or_an_enum_a_handler_returns_errors_its_trial_as_before(tmp_path: Path) -> None:
    (tmp_path / "odd_handlers.py").write_text(
        "import enum, uuid\n"
        "class Color(enum.Enum):\n    RED = 'red'\n"
        "def ident(args, world, ctx):\n    return {'order': world.get('moves', 'M-1'), 'id': uuid.UUID(int=7)}\n"
        "def color(args, world, ctx):\n    return [world.list('moves'), {'color': Color.RED}]\n"
        "def fine(args, world, ctx):\n    return {'at': (1, 2.5), 'rows': world.list('moves')}\n",
        encoding="utf-8")
    text = DOMAIN.replace("    rows: []\n", "    rows:\n      - { move_id: M-1, truck_id: T-1, depot: Reno }\n", 1)
    tools = "".join(f"  - name: {n}\n    handler: odd_handlers:{n}\n" for n in ("ident", "color", "fine"))
    text = text.replace("tools:\n", "tools:\n" + tools, 1)
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    domain = st.load_domain(tmp_path / "sandtable.yaml")

    def calling(tool: str) -> Any:
        def agent(turn: st.Turn) -> str:
            turn.call_tool(tool)
            return "Done."
        return agent

    errors = {tool: st.run_trial(domain, "t", calling(tool), st.ScriptedUser()).error for tool in ("ident", "color")}
    assert errors == {
        "ident": "the domain failed running ident: its handler odd_handlers:ident returned a UUID at result.id, "
                 "expected a JSON value",
        "color": "the domain failed running color: its handler odd_handlers:color returned a Color at "
                 "result[1].color, expected a JSON value",
    }
    r = st.run_trial(domain, "t", calling("fine"), st.ScriptedUser())
    assert r.error is None
    assert r.calls[0]["result"] == {"at": [1, 2.5],
                                    "rows": [{"move_id": "M-1", "truck_id": "T-1", "depot": "Reno"}]}


class _Name(str):
    pass


@pytest.mark.parametrize(("a", "b"), [
    ({"a": 1}, {"a": 1.0}), ({"a": True}, {"a": 1}), ({"a": None}, {"a": math.nan}), ({"a": math.nan}, {"a": math.nan}),
    ({"a": "x"}, {"a": _Name("x")}), ({"a": "2026-01-01"}, {"a": datetime(2026, 1, 1).date()}),
    ({"a": 2**70}, {"a": 2**70}), ({"a": 2**70}, {"a": 2**70 + 1}), ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    ({"a": -0.0}, {"a": 0.0}), ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}), ({"a": "\ud800"}, {"a": "\ud800"}),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}), ({"a": {"b": "c"}}, {"a": {"b": "c"}}), ({}, {}),
    ({"a": 1}, {"a": 1, "b": None}),
])
def test_reference_rows_compare_through_orjson_as_through_marshal_and_the_walk(a: Any, b: Any) -> None:
    import marshal

    from pytest_sandtable.engine.reference_world import _same, _same_walk

    try:  # the comparison before orjson
        want = marshal.dumps(a, 2) == marshal.dumps(b, 2) or _same_walk(a, b)
    except ValueError:  # what marshal cannot write
        want = _same_walk(a, b)
    assert _same(a, b) is want and _same(b, a) is want
