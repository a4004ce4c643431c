"""Stage 2 of loading: every check the schema cannot express.

Mostly names that must refer to something declared elsewhere in the file: tables,
fields, tools, params, ``$name`` arguments and tags. Also ids and keys that must be
unique, seed rows against their table, and values (param enums and defaults,
reference-call arguments) against the param's schema.

It runs on the same data as the schema, even where the schema found mistakes, so one
load reports every problem; that is why it reads the data warily (:func:`_map`,
:func:`_items`) and leaves wrong shapes to the schema's problems.

The checks run one section of the file after another. The world comes first (it
declares the tables and their fields), then the writes (which add fields to tables
without a ``fields:`` list), then tools (which declare params), then invariants and
tasks, which refer to all of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]

from . import faults, judging
from .build import param_schema
from .conditions import COMBINATORS, RECORD_OPERATORS, is_operator_object
from .errors import PathTuple, Problem
from .handlers import handler_problems
from .model import OP_KINDS, PARAM_TYPES, RESERVED_TAGS
from .translate import translate
from .wording import bare, clip, closest, found, quoted_and, show, suggest, unknown
from .yaml_reader import Document

# `$name` is the call's argument `name`; `$$` is a literal dollar sign.
# The most characters of a `matches` or `reply_matches` pattern (docs/spec.md, "Limits").
# Compiling a regular expression costs about 160 bytes of memory and 1 us of CPU per
# character (a 10 MB pattern: 1.6 GB and 10 s, where any other 10 MB string loads in
# about 100 MB); a pattern a person writes, even an alternation of a few hundred codes,
# is well under this, and one of this size compiles in about 35 ms and 1.5 MB.
PATTERN_MAX = 10_000

_ARG_REF = re.compile(r"\$\$|\$([A-Za-z_][A-Za-z0-9_]*)")
# `{name}` in a check message.
_MSG_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# exactly `$name` (or `$name.field...`): a reference to an argument's value, not a text
_EXACT_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")
# only $names, numbers and arithmetic: `$n + 1`, `$balance - $amount`, `$price*2`
_TERM = r"\s*(?:\$[A-Za-z_][A-Za-z0-9_.]*|[-+]?(?:\d+\.?\d*|\.\d+))\s*"
_EXPRESSION = re.compile(rf"{_TERM}(?:[-+*/%]{_TERM})+")
# `$field + x` / `$field - x`: the field's own value changed, which add / subtract say
_SELF_EXPRESSION = re.compile(r"\s*\$([A-Za-z_][A-Za-z0-9_]*)\s*([-+])\s*(\S+)\s*")
# the parts of an update besides `set` (engine/tools.py applies them in this order)
_UPDATE_PARTS = ("add", "subtract", "append")

Fields = dict[str, dict[str, None]]  # table -> its fields, an ordered set


def check(doc: Document) -> tuple[list[Problem], Fields]:
    """The problems in ``doc`` that the schema cannot see, and each table's fields.

    The fields are what :func:`~pytest_sandtable.domain.build.build` gives each table:
    its ``fields:`` list, or every field its seed rows and writes use.
    """
    if not isinstance(doc.data, dict):  # the schema says what it should be
        return [], {}
    c = _Checker(doc)
    _world(c)
    _user_world(c)  # dual control (issue 22 A)
    _writes(c)
    _tools(c)
    _user_tools(c)  # dual control (issue 22 A)
    _invariants(c)
    _tasks(c)
    _dual_tasks(c)  # dual control (issue 22 A)
    judging.check_domain(c)  # `judge:` criteria (docs/judges.md)
    _unknown_reads(c)
    c.problems += handler_problems(doc)  # `handler` imports, `clock` times (docs/handlers.md)
    return c.problems, c.fields


# --------------------------------------------------------------------------- reading warily


def _map(value: Any) -> dict[str, Any]:
    """A mapping, or an empty one in place of a value of another type."""
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[tuple[int, Any]]:
    """A list's items with their index; none for a value that is not a list."""
    return list(enumerate(value)) if isinstance(value, list) else []


def _single_op(op: Any, kinds: Sequence[str] = OP_KINDS) -> tuple[str, Any] | None:
    """An op's kind and spec, when it is a mapping of one key, one of ``kinds``."""
    if isinstance(op, dict) and len(op) == 1:
        kind, spec = next(iter(op.items()))
        if kind in kinds:
            return kind, spec
    return None


# --------------------------------------------------------------------------- keys and $name references


def _key_str(value: Any) -> str:
    """Keys compare as text: 100101 and "100101" are the same key."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _arg_refs(value: Any, path: PathTuple) -> Iterator[tuple[PathTuple, str]]:
    """Every `$name` in a value (strings inside mappings and lists too)."""
    if isinstance(value, str):
        for m in _ARG_REF.finditer(value):
            if m.group(1):
                yield path, m.group(1)
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from _arg_refs(item, (*path, k))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _arg_refs(item, (*path, i))


# --------------------------------------------------------------------------- what the checks share


class _Checker:
    """What the checks share: the names the file declares, the look-ups that report a
    name declared nowhere, and the problems found so far."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.data: dict[str, Any] = doc.data
        self.problems: list[Problem] = []
        self.tables: dict[str, dict[str, Any]] = {}
        self.fields: Fields = {}
        self.closed: set[str] = set()  # tables with a `fields:` list
        self.seed_keys: dict[str, dict[str, int]] = {}  # table -> key text -> row index
        self.params: dict[str, dict[str, Any]] = {}  # tool -> its params mapping
        # Open tables (no `fields:` list) take their fields from seed rows and writes, so
        # a typo in a write names a field of its own, and every correct read of the
        # field it was meant to be looks unknown. What `_unknown_reads` needs to report
        # the one write instead: each open table's fields the seed rows have, where
        # each field is written, which fields are read, and the unknown reads.
        self.row_fields: dict[str, set[str]] = {}
        self.written: dict[str, dict[str, list[PathTuple]]] = {}
        self.read: dict[str, set[str]] = {}
        self.unknown_reads: dict[tuple[str, str], list[tuple[PathTuple, bool]]] = {}
        # --- dual control (issue 22 A): the user world's tables, the user tools' params, and
        # the section (`world` or `user_world`) each table is declared in
        self.user_tables: set[str] = set()
        self.user_params: dict[str, dict[str, Any]] = {}
        self.section: dict[str, str] = {}
        # --- end dual control

    def add(self, path: PathTuple, message: str, *, at_key: bool = False) -> None:
        self.problems.append(self.doc.problem(path, message, at_key=at_key))

    def line_of(self, path: PathTuple) -> str:
        """`` (first at line N)`` for the node at ``path``."""
        pos = self.doc.pos(path)
        return f" (first at line {pos.line})" if pos else ""

    def repeated(self, section: str, i: int, key: str, value: str, first_at: dict[str, int]) -> bool:
        """Whether ``value``, the ``key`` of item ``i`` of ``section`` (``tools``, ``invariants``,
        ``tasks``), is also that of an earlier item; reports it if so. ``first_at`` maps
        each value to the index of the first item that has it."""
        if value not in first_at:
            first_at[value] = i
            return False
        noun = section.removesuffix("s")
        first = self.line_of((section, first_at[value]))
        self.add((section, i, key), f"duplicate {noun} {key} '{clip(value)}'{first}")
        return True

    def table(self, name: Any, path: PathTuple) -> str | None:
        """The table `name` when it exists; otherwise reports it."""
        if not isinstance(name, str):
            return None
        if name in self.tables:
            return name
        self.add(path, unknown("table", name, list(self.tables)))
        return None

    def field(self, table: str | None, name: Any, path: PathTuple, *, at_key: bool = False) -> None:
        if table is None or not isinstance(name, str) or table not in self.fields:
            return
        known = self.fields[table]
        if name in known:
            self.read.setdefault(table, set()).add(name)
        elif table in self.closed:
            self.add(path, unknown("field", name, list(known), f"of table {clip(table)}"), at_key=at_key)
        else:  # reported at the end, when every read is known (see `_unknown_reads`)
            self.unknown_reads.setdefault((table, name), []).append((path, at_key))

    def field_keys(self, table: str | None, conditions: Any, path: PathTuple, *, call: bool = True) -> None:
        """Conditions on the fields of ``table``'s rows. ``call``: whether a call's
        arguments are there for `$name` in a record reference's key."""
        for k, _cond, kpath in self.condition_entries(conditions, path, call=call):
            self.field(table, k, kpath, at_key=True)

    def condition_entries(self, conditions: Any, path: PathTuple, *,
                          call: bool) -> Iterator[tuple[str, Any, PathTuple]]:
        """Each field (or argument) a conditions mapping tests, with its condition and
        path, those inside `any_of` / `all_of` / `not` too; checks on the way the
        operator values the schema cannot judge, and record references' tables and fields."""
        for k, cond in _map(conditions).items():
            kpath = (*path, k)
            if k in COMBINATORS:
                subs = [(None, cond)] if k == "not" else _items(cond)
                for j, sub in subs:
                    yield from self.condition_entries(sub, kpath if j is None else (*kpath, j), call=call)
                continue
            self.operator_values({k: cond}, path)
            for op, value in _map(cond).items() if is_operator_object(cond) else ():
                if op in RECORD_OPERATORS and isinstance(value, dict):
                    _record(self, None, value, (*kpath, op), with_field=True)
                    if not call:
                        self.no_arg_refs(value.get("key"), (*kpath, op, "key"), "an expectation")
            yield k, cond, kpath

    def operator_values(self, conditions: Any, path: PathTuple) -> None:
        """What the schema cannot say: `in` lists and `matches` patterns that work."""
        for k, cond in _map(conditions).items():
            if not isinstance(cond, dict):
                continue
            for op in ("in", "not_in"):
                v = cond.get(op)
                if isinstance(v, str) and not (v.startswith("$") and not v.startswith("$$")):
                    self.add(
                        (*path, k, op),
                        f"`{op}` expects a list of values (or a $name argument holding "
                        f"one), found {show(v)}; write [{bare(v)}]",
                    )
            pattern = cond.get("matches")
            if isinstance(pattern, str) and not (pattern.startswith("$") and not pattern.startswith("$$")):
                self.pattern(pattern, (*path, k, "matches"))

    def pattern(self, pattern: str, path: PathTuple) -> None:
        """``pattern`` (at ``path``) must compile as a Python regular expression, and
        be at most :data:`PATTERN_MAX` characters (checked first: not compiled past it)."""
        if len(pattern) > PATTERN_MAX:
            self.add(
                path,
                f"found a pattern of {len(pattern):,} characters, expected a regular expression of at most "
                f"{PATTERN_MAX:,} characters; write a shorter one",
            )
            return
        try:
            re.compile(pattern)
        except re.error as e:
            self.add(path, f"not a valid regular expression: {e}")
        except (RecursionError, OverflowError):  # groups nested too deeply, a{99999999999}
            self.add(path, "not a valid regular expression: too complex for Python's re")

    def tool(self, name: Any, path: PathTuple) -> str | None:
        """The tool `name` when it exists; otherwise reports it."""
        if not isinstance(name, str):
            return None
        if name in self.params:
            return name
        if name in self.user_params:  # dual control: a user tool where only the agent's apply
            self.add(path, f"'{clip(name)}' is a user tool (user_tools), which only the simulated user calls; "
                           f"{_agent_only(path)}")
            return None
        self.add(path, unknown("tool", name, list(self.params)))
        return None

    def param(self, tool: str | None, name: Any, path: PathTuple, *, at_key: bool = False, prefix: str = "") -> None:
        if tool is None or tool not in self.params or not isinstance(name, str):
            return
        known = list(self.params[tool])
        if name not in known:
            hint = f"tool {clip(tool)} has no params" if not known else ""
            self.add(path, unknown("param", name, known, f"of tool {clip(tool)}", prefix, hint), at_key=at_key)

    def arg_refs(self, tool: str | None, value: Any, path: PathTuple, *, each: bool = False) -> None:
        """`$name` in `value` must be a param of `tool`; `$item` is the element under
        ``each``, and outside it (unless a param is named so) says where it belongs."""
        for at, name in _arg_refs(value, path):
            if name == "item" and (each or tool is None or "item" in _map(self.params.get(tool))):
                continue
            if name == "item" and tool in self.params:
                self.add(at, "'$item' is the element of `each`, and there is no `each` here; "
                             "add each: <an array param> to the check or require rule")
                continue
            self.param(tool, name, at, prefix="$")

    def no_arg_refs(self, value: Any, path: PathTuple, where: str) -> None:
        for at, name in _arg_refs(value, path):
            self.add(at, f"'${clip(name)}' refers to a call argument, but {where} has none; write $$ for a literal $")

    def param_keys(self, tool: str | None, mapping: Any, path: PathTuple, *, call: bool = True) -> None:
        """Conditions on a call's arguments: each a param of ``tool``, with a condition
        that the param's type can meet (a rule that can never fire is a mistake)."""
        for k, cond, kpath in self.condition_entries(mapping, path, call=call):
            self.param(tool, k, kpath, at_key=True)
            p = _map(self.params.get(tool or "")).get(k)
            if isinstance(p, dict):
                self.param_condition(k, p, cond, kpath)

    def param_condition(self, name: str, p: dict[str, Any], cond: Any, path: PathTuple) -> None:
        """A condition no argument of param ``p`` can meet, reported: an operator its
        type never satisfies, or a value its enum or type never takes."""
        ptype = p.get("type")
        if ptype not in PARAM_TYPES:  # the schema reports it
            return
        if not is_operator_object(cond):
            self.never_equal(name, p, cond, path)
            return
        for op, want in cond.items():
            takes = _OPERATOR_TYPES.get(op)
            if takes is not None and ptype not in takes:
                self.add((*path, op), f"`{op}` never holds for param '{clip(name)}' of type {ptype}: "
                         f"it applies to {_TYPE_WORDS[takes]}, so the condition can never be met", at_key=True)
            elif op == "eq":
                self.never_equal(name, p, want, (*path, op))
            elif op == "in" and isinstance(want, list):
                for j, item in enumerate(want):
                    self.never_equal(name, p, item, (*path, op, j))

    def never_equal(self, name: str, p: dict[str, Any], value: Any, path: PathTuple) -> None:
        """A literal an argument of param ``p`` can never equal (not in its enum, not of its type)."""
        if isinstance(value, (dict, list)) or (isinstance(value, str) and _ARG_REF.search(value)):
            return
        enum = p.get("enum")
        if isinstance(enum, list) and not any(_same(value, e) for e in enum):
            self.add(path, f"found {show(value)}, which param '{clip(name)}' never takes: "
                           f"expected one of {', '.join(show(e) for e in enum[:12])}")
            return
        schema = param_schema(p)
        if schema.get("type") in ("number", "integer", "boolean"):
            coerced = _coerce(value, {"type": schema["type"]})
            if not _valid(coerced, {"type": schema["type"]}):
                self.add(path, f"{found(value)}, which param '{clip(name)}' of type {schema['type']} never is; "
                               "the condition can never be met")

    def value(self, value: Any, schema: dict[str, Any], path: PathTuple) -> None:
        """``value`` (at ``path``) must be valid under ``schema``, a param's."""
        try:
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
        except Exception:  # a malformed param was already reported by the schema
            return
        self.problems += translate(self.doc, errors, path)


# The param types each operator can hold for (the others never satisfy it).
_OPERATOR_TYPES: dict[str, tuple[str, ...]] = {
    "gt": ("number", "integer", "string"),
    "gte": ("number", "integer", "string"),
    "lt": ("number", "integer", "string"),
    "lte": ("number", "integer", "string"),
    "contains": ("string", "array"),
    "ieq": ("string",),
    "matches": ("string", "number", "integer"),
    "length": ("string", "array", "object"),
    "each": ("array",),
}
_TYPE_WORDS = {
    ("number", "integer", "string"): "numbers and strings",
    ("string", "array"): "strings and arrays",
    ("string", "number", "integer"): "strings and numbers",
    ("string", "array", "object"): "strings, arrays and objects",
    ("array",): "arrays",
    ("string",): "strings",
}


def _same(a: Any, b: Any) -> bool:
    """Equal as conditions compare (numbers numerically, keys as text)."""
    return a == b or (not isinstance(a, bool) and not isinstance(b, bool)
                      and isinstance(a, (int, float, str)) and isinstance(b, (int, float, str))
                      and _key_str(a) == _key_str(b))


def _valid(value: Any, schema: dict[str, Any]) -> bool:
    try:
        return not any(True for _ in jsonschema.Draft202012Validator(schema).iter_errors(value))
    except Exception:  # pragma: no cover - the schemas here are fixed
        return True


# --------------------------------------------------------------------------- world


def _world(c: _Checker) -> None:
    """Declares every table with its fields, and checks its seed rows."""
    for name, t in _map(c.data.get("world")).items():
        if isinstance(t, dict):
            _declare_table(c, name, t)
            _seed_rows(c, name, t)


def _declare_table(c: _Checker, name: str, t: dict[str, Any]) -> None:
    c.tables[name] = t
    fields: dict[str, None] = {}
    key = t.get("key")
    if isinstance(key, str):
        fields[key] = None
    declared = t.get("fields")
    if isinstance(declared, list):
        c.closed.add(name)
        fields.update({f: None for f in declared if isinstance(f, str)})
    c.fields[name] = fields
    fmt = t.get("key_format")
    if isinstance(fmt, str) and "{n}" not in fmt:
        c.add((c.section.get(name, "world"), name, "key_format"),
              f"found {show(fmt)}, expected a format containing {{n}}, e.g. 'B-{{n}}'")


def _seed_rows(c: _Checker, name: str, t: dict[str, Any]) -> None:
    """Each row's fields (checked against a ``fields:`` list, or added to the table's)
    and its key: present, a string or number, and unique. One loop, as a table may
    have 100,000 rows."""
    path: PathTuple = (c.section.get(name, "world"), name)
    fields = c.fields[name]
    key = t.get("key")
    keys: dict[str, int] = {}
    c.seed_keys[name] = keys
    for i, row in _items(t.get("rows")):
        if not isinstance(row, dict):
            continue
        rpath: PathTuple = (*path, "rows", i)
        for f in row:
            if name in c.closed:
                c.field(name, f, (*rpath, f), at_key=True)
            else:
                fields.setdefault(f, None)
        if not isinstance(key, str):
            continue
        if key not in row:
            c.add(rpath, f"missing the key field '{clip(key)}' of table {clip(name)}")
            continue
        kv = row[key]
        if not isinstance(kv, (str, int, float)) or isinstance(kv, bool):
            c.add((*rpath, key), f"{found(kv)}, expected a string or number (a key)")
            continue
        ks = _key_str(kv)
        if ks in keys:
            first = c.line_of((*path, "rows", keys[ks]))
            c.add((*rpath, key), f"duplicate key {show(kv)} in table {clip(name)}{first}")
        else:
            keys[ks] = i


def _writes(c: _Checker) -> None:
    """Creates and updates add fields to open tables; closed tables check them."""
    c.row_fields = {name: set(fields) for name, fields in c.fields.items() if name not in c.closed}
    for table, values, path in _all_writes(c.data):
        if table not in c.fields:
            continue
        for f in values:
            if table in c.closed:
                c.field(table, f, (*path, f), at_key=True)
            else:
                c.fields[table].setdefault(f, None)
                c.written.setdefault(table, {}).setdefault(f, []).append((*path, f))


def _unknown_reads(c: _Checker) -> None:
    """Reports the unknown fields read from open tables. When the field read is a
    close match of one that only a write names, which nothing reads and no seed row
    has (``set: {statsu: x}`` while 40 places read ``status``), the write is the
    mistake: it is reported, once, instead of every correct read."""
    misspelt: dict[tuple[str, str], str] = {}  # (table, field written) -> the field read
    for (table, name), uses in c.unknown_reads.items():
        meant = _written_typo(c, table, name)
        if meant is not None:
            misspelt.setdefault((table, meant), name)
            continue
        for path, at_key in uses:
            c.add(path, unknown("field", name, list(c.fields[table]), f"of table {clip(table)}"), at_key=at_key)
    for (table, typo), name in misspelt.items():
        uses = c.unknown_reads[(table, name)]
        lines = sorted(pos.line for pos in (c.doc.pos(path) for path, _ in uses) if pos)
        where = f"at line {lines[0]}" if len(uses) == 1 and lines else f"in {len(uses)} places"
        if len(uses) > 1 and lines:
            where += f", first at line {lines[0]}"
        for path in c.written[table][typo]:
            c.add(
                path,
                f"unknown field '{clip(typo)}' of table {clip(table)}; did you mean '{clip(name)}'? "
                f"(no seed row has either; '{clip(name)}' is read {where}, '{clip(typo)}' is only written)",
                at_key=True,
            )


def _written_typo(c: _Checker, table: str, name: str) -> str | None:
    """The field of open ``table`` that an unknown field ``name`` read from it was
    probably meant to be spelt as, when that field is only written (never read, not
    in any seed row): then the write holds the typo."""
    meant = closest(name, list(c.fields[table]))
    if meant is None or meant in c.row_fields.get(table, ()) or meant in c.read.get(table, ()):
        return None
    return meant if meant in c.written.get(table, {}) else None


def _all_writes(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], PathTuple]]:
    """Every create row and update set in the domain: (table, fields, path)."""
    for section in ("tools", "user_tools"):  # dual control: the user tools' writes too
        for i, tool in _items(data.get(section)):
            for j, op in _items(_map(tool).get("ops")):
                yield from _write(op, (section, i, "ops", j))
    for i, task in _items(data.get("tasks")):
        for part in ("given", "user_given"):
            for j, op in _items(_map(task).get(part)):
                yield from _write(op, ("tasks", i, part, j))


def _write(op: Any, path: PathTuple) -> Iterator[tuple[str, dict[str, Any], PathTuple]]:
    single = _single_op(op, ("create", "update"))
    if single is None:
        return
    kind, spec = single
    spec = _map(spec)
    table = spec.get("table")
    if not isinstance(table, str):
        return
    for part, values in _writes_of(kind, spec):
        yield table, values, (*path, kind, part)


# --------------------------------------------------------------------------- tools


def _tools(c: _Checker) -> None:
    """Declares every tool's params, then checks each tool (a repeated name only once)."""
    tools = _items(c.data.get("tools"))
    first_at: dict[str, int] = {}
    for i, t in tools:
        name = _map(t).get("name")
        if isinstance(name, str) and not c.repeated("tools", i, "name", name, first_at):
            c.params[name] = _map(t.get("params"))
    for i, t in tools:
        t = _map(t)
        name = t.get("name")
        if isinstance(name, str) and first_at.get(name) == i:
            _tool(c, name, t, ("tools", i))


def _tool(c: _Checker, name: str, t: dict[str, Any], path: PathTuple) -> None:
    for pname, p in _map(t.get("params")).items():
        _param_def(c, p, (*path, "params", pname))
    for j, entry in _items(t.get("checks")):
        _tool_check(c, name, _map(entry), (*path, "checks", j))
    for j, op in _items(t.get("ops")):
        _op(c, name, op, (*path, "ops", j))


def _param_def(c: _Checker, p: Any, path: PathTuple) -> None:
    """`properties` and `items` fit the type; enum values and the default are valid."""
    if not isinstance(p, dict) or p.get("type") not in PARAM_TYPES:
        return
    ptype = p["type"]
    if "properties" in p and ptype != "object":
        c.add((*path, "properties"), f"'properties' is for type object; this param is type {ptype}", at_key=True)
    if "items" in p and ptype != "array":
        c.add((*path, "items"), f"'items' is for type array; this param is type {ptype}", at_key=True)
    for sub_name, sub in _map(p.get("properties")).items():
        _param_def(c, sub, (*path, "properties", sub_name))
    if isinstance(p.get("items"), dict):
        _param_def(c, p["items"], (*path, "items"))
    schema = param_schema(p)
    type_only = {k: v for k, v in schema.items() if k not in ("enum", "default", "description")}
    for k, value in _items(p.get("enum")):
        c.value(value, type_only, (*path, "enum", k))
    if "default" in p:
        no_default = {k: v for k, v in schema.items() if k != "default"}
        c.value(p["default"], no_default, (*path, "default"))


def _tool_check(c: _Checker, tool: str, entry: dict[str, Any], path: PathTuple) -> None:
    """One of a tool's `checks`: its row reference and its message's `$name` and `{name}`."""
    each = _each(c, tool, entry.get("each"), (*path, "each"))
    for kind in ("require", "forbid"):
        target = entry.get(kind)
        if not isinstance(target, dict):
            continue
        tpath = (*path, kind)
        table = c.table(target.get("table"), (*tpath, "table"))
        c.arg_refs(tool, target.get("key"), (*tpath, "key"), each=each)
        _one_value_key(c, tool, target.get("key"), (*tpath, "key"))
        c.field_keys(table, target.get("where"), (*tpath, "where"))
        c.arg_refs(tool, target.get("where"), (*tpath, "where"), each=each)
    message = entry.get("message")
    if isinstance(message, str):
        c.arg_refs(tool, message, (*path, "message"), each=each)
        for m in _MSG_REF.finditer(message):
            if m.group(1) and not (each and m.group(1) == "item"):
                c.param(tool, m.group(1), (*path, "message"), prefix="{")


def _each(c: _Checker, tool: str | None, name: Any, path: PathTuple) -> bool:
    """`each: param` names an array param of ``tool``; whether `each` is given at all."""
    if name is None:
        return False
    p = _map(c.params.get(tool or "")).get(name) if isinstance(name, str) else None
    if p is None:
        c.param(tool, name, path)
    elif isinstance(p, dict) and p.get("type") in PARAM_TYPES and p.get("type") != "array":
        c.add(path, f"'{clip(name)}' is a param of type {p['type']}; `each` takes an array param, "
                    "whose elements it checks one by one")
    return True


def _one_value_key(c: _Checker, tool: str | None, key: Any, path: PathTuple) -> None:
    """A record's key that is a whole array or object argument names no record: the
    rule or check would never find one. `each` is what was meant."""
    m = _EXACT_REF.fullmatch(key) if isinstance(key, str) and tool is not None else None
    if m is None or m.group(2):
        return
    name = m.group(1)
    p = _map(c.params.get(tool or "")).get(name)
    if isinstance(p, dict) and p.get("type") in ("array", "object"):
        fix = f"write each: {name} and key: $item (or $item.<field>)" if p["type"] == "array" \
            else f"write key: ${name}.<field>"
        c.add(path, f"'{clip(key)}' is a param of type {p['type']}, and a key is one value, so no record "
                    f"is ever found; {fix}")


def _writes_of(kind: str, spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The parts of a write op that name fields: a create's `row`, an update's `set`,
    `add`, `subtract` and `append`."""
    for part in ("row",) if kind == "create" else ("set", *_UPDATE_PARTS):
        values = spec.get(part)
        if isinstance(values, dict):
            yield part, values


def _update(c: _Checker, tool: str | None, table: str | None, spec: dict[str, Any], path: PathTuple) -> None:
    """An update's parts: a field in one part only; `add` / `subtract` with numbers on
    fields that hold numbers; `append` on fields that hold lists."""
    seen: dict[str, str] = {}
    for part, values in _writes_of("update", spec):
        for f, value in values.items():
            fpath = (*path, part, f)
            if f in seen:
                c.add(fpath, f"field '{clip(f)}' is also in `{seen[f]}`; an update changes a field once", at_key=True)
                continue
            seen[f] = part
            if part in ("add", "subtract"):
                _amount(c, tool, part, value, fpath)
                _seed_kinds(c, table, f, fpath, part)
            elif part == "append":
                _seed_kinds(c, table, f, fpath, part)


def _amount(c: _Checker, tool: str | None, part: str, value: Any, path: PathTuple) -> None:
    """What `add` / `subtract` takes: a number, or a `$name` of a number or integer param."""
    if isinstance(value, str):
        m = _EXACT_REF.fullmatch(value)
        if m and not m.group(2):
            p = _map(c.params.get(tool or "")).get(m.group(1))
            if isinstance(p, dict) and p.get("type") in PARAM_TYPES and p["type"] not in ("number", "integer"):
                c.add(path, f"'{clip(value)}' is a param of type {p['type']}; `{part}` takes a number "
                            "or a $name of a number or integer param")
            return
        if not _NUMBER.fullmatch(value.strip()):
            c.add(path, f"{found(value)}, expected a number or a $name argument for `{part}`")


def _seed_kinds(c: _Checker, table: str | None, f: str, path: PathTuple, part: str) -> None:
    """`add` / `subtract` on a field some seed row holds a non-number in, `append` on one
    some seed row holds a non-list in: the write would fail at run time."""
    if table is None:
        return
    want = "list" if part == "append" else "number"
    for i, row in _items(c.tables[table].get("rows")):
        v = _map(row).get(f)
        if v is None:
            continue
        ok = isinstance(v, list) if want == "list" else _NUMBER.fullmatch(str(v).strip()) is not None \
            and not isinstance(v, bool) and isinstance(v, (int, float, str))
        if not ok:
            line = c.doc.pos((c.section.get(table, "world"), table, "rows", i, f))
            at = f" (line {line.line})" if line else ""
            c.add(path, f"`{part}` needs a {want} field, but '{clip(f)}' of table {clip(table)} "
                        f"holds {show(v)} in a seed row{at}", at_key=True)
            return


def _no_expressions(c: _Checker, values: Any, path: PathTuple, part: str) -> None:
    """A value that reads like arithmetic (`$n + 1`) would be stored as that text:
    values are never computed, so it is an error that points at `add` / `subtract`."""
    for f, value in _map(values).items():
        if not (isinstance(value, str) and _EXPRESSION.fullmatch(value) and _ARG_REF.search(value)):
            continue
        m = _SELF_EXPRESSION.fullmatch(value)
        if part == "set" and m is not None and m.group(1) == f:
            op = "add" if m.group(2) == "+" else "subtract"
            fix = f"to change a number, write {op}: {{ {clip(f)}: {m.group(3)} }} in the update"
        elif part == "set":
            fix = f"to change a number, write add: {{ {clip(f)}: <a number or $name> }} (or subtract) in the update"
        else:
            fix = "write the number, or change it with an update's add / subtract"
        c.add((*path, f), f"found {show(value)}, arithmetic, which values never do (it would be stored "
                          f"as this text); {fix}")


def _op(c: _Checker, tool: str, op: Any, path: PathTuple) -> None:
    single = _single_op(op)
    if single is None:
        return
    kind, spec = single
    opath = (*path, kind)
    if kind == "respond":
        c.arg_refs(tool, spec, opath)
        return
    if not isinstance(spec, dict):
        return
    table = c.table(spec.get("table"), (*opath, "table"))
    for part in ("key", "limit", "row", "set", *_UPDATE_PARTS):
        if part in spec:
            c.arg_refs(tool, spec[part], (*opath, part))
    for part, values in _writes_of(kind, spec) if kind in ("create", "update") else ():
        if part in ("set", "row"):
            _no_expressions(c, values, (*opath, part), part)
    if kind == "update":
        _update(c, tool, table, spec, opath)
    if kind == "list":
        c.field_keys(table, spec.get("where"), (*opath, "where"))
        c.arg_refs(tool, spec.get("where"), (*opath, "where"))
        order_by = spec.get("order_by")
        if isinstance(order_by, str):
            c.field(table, order_by.removeprefix("-"), (*opath, "order_by"))


# --------------------------------------------------------------------------- invariants


def _invariants(c: _Checker) -> None:
    first_at: dict[str, int] = {}
    for i, inv in _items(c.data.get("invariants")):
        if not isinstance(inv, dict):
            continue
        path: PathTuple = ("invariants", i)
        inv_id = inv.get("id")
        if isinstance(inv_id, str):
            c.repeated("invariants", i, "id", inv_id, first_at)
        kind = inv.get("kind")
        if kind == "before":
            _before(c, inv, path)
        elif kind == "never_disclose":
            _never_disclose(c, inv, path)
        elif isinstance(kind, str) and kind in _TOOL_RULES:
            tool = c.tool(inv.get("tool"), (*path, "tool"))
            _TOOL_RULES[kind](c, tool, inv, path)


def _before(c: _Checker, inv: dict[str, Any], path: PathTuple) -> None:
    first = c.tool(inv.get("first"), (*path, "first"))
    then = c.tool(inv.get("then"), (*path, "then"))
    for j, name in _items(inv.get("same")):
        c.param(first, name, (*path, "same", j))
        c.param(then, name, (*path, "same", j))


def _never_disclose(c: _Checker, inv: dict[str, Any], path: PathTuple) -> None:
    values = inv.get("values")
    if isinstance(values, dict):
        vpath = (*path, "values")
        table = c.table(values.get("table"), (*vpath, "table"))
        c.field(table, values.get("field"), (*vpath, "field"))
        c.field_keys(table, values.get("where"), (*vpath, "where"))  # no_arg_refs reports every $name
        c.no_arg_refs(values.get("where"), (*vpath, "where"), "never_disclose")


def _record(c: _Checker, tool: str | None, ref: Any, path: PathTuple, *, with_field: bool,
            each: bool = False) -> str | None:
    """A `{table, key}` (with `field`) reference to a row; returns its table if it exists."""
    if not isinstance(ref, dict):
        return None
    table = c.table(ref.get("table"), (*path, "table"))
    c.arg_refs(tool, ref.get("key"), (*path, "key"), each=each)
    if with_field:
        c.field(table, ref.get("field"), (*path, "field"))
    return table


def _require(c: _Checker, tool: str | None, inv: dict[str, Any], path: PathTuple) -> None:
    each = _each(c, tool, inv.get("each"), (*path, "each"))
    record = inv.get("record")
    table = _record(c, tool, record, (*path, "record"), with_field=False, each=each)
    _one_value_key(c, tool, _map(record).get("key"), (*path, "record", "key"))
    c.field_keys(table, inv.get("where"), (*path, "where"))
    c.arg_refs(tool, inv.get("where"), (*path, "where"), each=each)


def _limit(c: _Checker, tool: str | None, inv: dict[str, Any], path: PathTuple) -> None:
    arg = inv.get("arg")
    c.param(tool, arg, (*path, "arg"))
    p = _map(c.params.get(tool or "")).get(arg) if isinstance(arg, str) else None
    if isinstance(arg, str) and isinstance(p, dict):
        _numeric_param(c, arg, p, (*path, "arg"), "a limit on it never fires")
    for bound in ("lt", "lte", "gt", "gte"):
        if bound in inv:
            _limit_bound(c, tool, inv[bound], (*path, bound))


def _numeric_param(c: _Checker, name: str, p: dict[str, Any], path: PathTuple, consequence: str) -> None:
    """A param whose arguments are never numbers (an array, object or boolean, or a
    string whose enum has no number) makes a numeric comparison on it a dead rule."""
    ptype = p.get("type")
    enum = p.get("enum")
    if ptype in ("array", "object", "boolean"):
        c.add(path, f"'{clip(name)}' is a param of type {ptype}, never a number, so {consequence}; "
                    "bound a number or integer param")
    elif ptype == "string" and isinstance(enum, list) and enum \
            and not any(_NUMBER.fullmatch(str(e).strip()) for e in enum):
        c.add(path, f"'{clip(name)}' is a param whose enum has no number, so {consequence}; "
                    "bound a number or integer param")


def _limit_bound(c: _Checker, tool: str | None, value: Any, path: PathTuple) -> None:
    """A bound is a number, a `$name` argument or a `{table, key, field}` value."""
    if isinstance(value, dict):
        _record(c, tool, value, path, with_field=True)
    elif isinstance(value, str):
        if list(_arg_refs(value, path)):
            c.arg_refs(tool, value, path)
            m = _EXACT_REF.fullmatch(value)
            p = _map(c.params.get(tool or "")).get(m.group(1)) if m and not m.group(2) else None
            if m and isinstance(p, dict):
                _numeric_param(c, m.group(1), p, path, "the bound never applies")
        elif not _NUMBER.fullmatch(value.strip()):
            c.add(path, f"{found(value)}, expected a number, a $name argument or {{table, key, field}}")


def _match(c: _Checker, tool: str | None, inv: dict[str, Any], path: PathTuple) -> None:
    for side in ("left", "right"):
        _record(c, tool, inv.get(side), (*path, side), with_field=True)


def _never(c: _Checker, tool: str | None, inv: dict[str, Any], path: PathTuple) -> None:
    c.param_keys(tool, inv.get("when"), (*path, "when"))
    c.arg_refs(tool, inv.get("when"), (*path, "when"))


# The invariants about calls of one tool (`tool:`), by kind.
_TOOL_RULES: dict[str, Callable[[_Checker, str | None, dict[str, Any], PathTuple], None]] = {
    "require": _require,
    "limit": _limit,
    "match": _match,
    "never": _never,
}


# --------------------------------------------------------------------------- tasks


_RESERVED_TAG = "{!r} is a pytest marker with its own meaning; rename the tag"


def _tasks(c: _Checker) -> None:
    first_at: dict[str, int] = {}
    declared = c.data.get("tags")
    tags = list(declared) if isinstance(declared, dict) else None
    for tag in tags or ():
        if tag in RESERVED_TAGS:
            c.add(("tags", tag), _RESERVED_TAG.format(tag), at_key=True)
    for i, task in _items(c.data.get("tasks")):
        if not isinstance(task, dict):
            continue
        path: PathTuple = ("tasks", i)
        task_id = task.get("id")
        if isinstance(task_id, str):
            c.repeated("tasks", i, "id", task_id, first_at)
        _task_tags(c, task.get("tags"), tags, (*path, "tags"))
        _user(c, _map(task.get("user")), (*path, "user"))
        _given(c, task.get("given"), (*path, "given"))
        _expect(c, _map(task.get("expect")), (*path, "expect"))
        for j, step in _items(task.get("reference")):
            _step(c, _map(step), (*path, "reference", j))
        _reference_world(c, task, path)
        faults.check_task(c, task, path)
        _accept(c, task.get("accept"), (*path, "accept"))
        _mid_way(c, task, path)  # issue 22, part B


def _accept(c: _Checker, entries: Any, path: PathTuple) -> None:
    """Each mutant is accepted once in a task: a second entry for it is a problem at the
    second (which reason holds?). Whether the id names a mutant that `mutate` generates
    is `mutate`'s check; the schema checks each entry's shape."""
    first_at: dict[str, int] = {}
    for j, entry in _items(entries):
        mutant = _map(entry).get("mutant")
        if not isinstance(mutant, str) or not mutant:
            continue
        if mutant in first_at:
            c.add((*path, j, "mutant"), f"mutant '{clip(mutant)}' is accepted twice in this task"
                                        f"{c.line_of((*path, first_at[mutant]))}")
        else:
            first_at[mutant] = j


def _reference_world(c: _Checker, task: dict[str, Any], path: PathTuple) -> None:
    """`world_matches_reference` compares the final world with the one the reference
    makes, so the task must say what its reference is: a reference without calls (only
    replies, or `[]`) says the world must stay as it was; no `reference` at all is a
    mistake, not a refusal task."""
    if _map(task.get("expect")).get("world_matches_reference") is not True or "reference" in task:
        return
    c.add((*path, "expect", "world_matches_reference"),
          "world_matches_reference needs the task's `reference` (its calls make the expected world; "
          "`reference: []` when nothing should change)", at_key=True)


def _task_tags(c: _Checker, task_tags: Any, declared: list[str] | None, path: PathTuple) -> None:
    """Each tag is declared (when the file declares tags) and is not a marker pytest
    reads on its own: a trial tagged ``skip`` would be skipped by pytest."""
    for j, tag in _items(task_tags):
        if not isinstance(tag, str):
            continue
        if tag in RESERVED_TAGS:
            c.add((*path, j), _RESERVED_TAG.format(tag))
        elif declared is not None and tag not in declared:
            c.add((*path, j), unknown("tag", tag, declared, hint="declare it in the top-level tags map"))


def _user(c: _Checker, user: dict[str, Any], path: PathTuple) -> None:
    """The script's conditions name tools and valid patterns, and a script with
    conditions has a first line to start the conversation with."""
    script = _items(user.get("script"))
    for j, line in script:
        when = _map(_map(line).get("when"))
        wpath = (*path, "script", j, "when")
        for part in ("called", "not_called"):
            names = when.get(part)
            for k, name in _items(names) if isinstance(names, list) else [(None, names)]:
                c.tool(name, (*wpath, part) if k is None else (*wpath, part, k))
        pattern = when.get("reply_matches")
        if isinstance(pattern, str):
            c.pattern(pattern, (*wpath, "reply_matches"))
    starts = bool(user.get("opening")) or any(isinstance(line, str) or "when" not in _map(line) for _, line in script)
    if script and not starts:
        c.add(
            (*path, "script"),
            "every line has `when`, so the scripted user has nothing to start the conversation with: "
            "give user.opening, or a line without `when`",
        )


def _given(c: _Checker, given: Any, path: PathTuple) -> None:
    """An update names a row that exists by then (seeded or created before it); a
    create's key is not taken yet."""
    created: dict[str, set[str]] = {}
    for j, op in _items(given):
        single = _single_op(op, ("create", "update"))
        if single is None or not isinstance(single[1], dict):
            continue
        kind, spec = single
        opath = (*path, j, kind)
        c.no_arg_refs(spec, opath, "given")
        for part in _UPDATE_PARTS if kind == "update" else ():
            if part in spec:
                c.add((*opath, part), f"`{part}` is for tools' updates; `given` writes its values as they are: "
                                      "use set with the value the row should hold", at_key=True)
        table = c.table(spec.get("table"), (*opath, "table"))
        if table is None:
            continue
        existing = set(c.seed_keys.get(table, {})) | created.setdefault(table, set())
        key_field = c.tables[table].get("key")
        if kind == "update" and "key" in spec:
            ks = _key_str(spec["key"])
            if ks not in existing:
                msg = f"no row of table {clip(table)} has the key {show(spec['key'])}"
                suggestion = suggest(ks, list(c.seed_keys.get(table, {})) + sorted(created[table]))
                c.add((*opath, "key"), f"{msg}; {suggestion}" if suggestion else msg)
        elif kind == "create" and isinstance(spec.get("row"), dict) and isinstance(key_field, str):
            row = spec["row"]
            if row.get(key_field) is not None:
                ks = _key_str(row[key_field])
                if ks in existing:
                    c.add(
                        (*opath, "row", key_field),
                        f"table {clip(table)} already has a row with key {show(row[key_field])}",
                    )
                created[table].add(ks)


def _expect(c: _Checker, expect: dict[str, Any], path: PathTuple) -> None:
    first_at: dict[str, int] = {}
    for j, entry in _items(expect.get("state")):
        _state(c, _map(entry), (*path, "state", j))
        state_id = _map(entry).get("id")
        if isinstance(state_id, str):
            if state_id in first_at:
                first = c.line_of((*path, "state", first_at[state_id]))
                c.add((*path, "state", j, "id"), f"duplicate state id '{clip(state_id)}' in this task{first}")
            else:
                first_at[state_id] = j
    for part in ("called", "not_called"):
        for j, matcher in _items(expect.get(part)):
            mpath = (*path, part, j)
            if isinstance(matcher, str):
                c.tool(matcher, mpath)
            elif isinstance(matcher, dict) and matcher.get("by") == "user":  # the user's own calls
                name = matcher.get("tool")
                if isinstance(name, str) and name not in c.user_params:
                    tools = ", ".join(clip(n) for n in list(c.user_params)[:12])
                    c.add((*mpath, "tool"), (f"'{clip(name)}' is an agent tool; a `by: user` matcher names one of "
                                             f"the user tools (user_tools): {tools}" if name in c.params and tools
                                             else f"'{clip(name)}' is an agent tool; a `by: user` matcher names a "
                                             "user tool, and this domain declares none (the top-level user_tools)"
                                             if name in c.params else
                                             unknown("user tool", name, list(c.user_params))))
                elif isinstance(name, str):
                    with _user_tools_as_tools(c):
                        c.param_keys(name, matcher.get("args"), (*mpath, "args"), call=False)
            elif isinstance(matcher, dict):
                tool = c.tool(matcher.get("tool"), (*mpath, "tool"))
                c.param_keys(tool, matcher.get("args"), (*mpath, "args"), call=False)


def _state(c: _Checker, entry: dict[str, Any], path: PathTuple) -> None:
    table = c.table(entry.get("table"), (*path, "table"))
    has = {k for k in ("key", "fields", "where", "count") if k in entry}
    if "key" in has and has & {"where", "count"}:
        c.add(
            path,
            f"found 'key' with {quoted_and(sorted(has & {'where', 'count'}))}; use key (with fields) or where/count",
        )
    elif "fields" in has and "key" not in has:
        c.add((*path, "fields"), "'fields' needs 'key'; to count matching rows use where and count", at_key=True)
    elif not has:
        c.add(path, "missing required key: one of 'key', 'where', 'count'")
    c.field_keys(table, entry.get("fields"), (*path, "fields"), call=False)
    c.field_keys(table, entry.get("where"), (*path, "where"), call=False)


def _step(c: _Checker, step: dict[str, Any], path: PathTuple) -> None:
    """A reference step: a `say`, or a `call` whose args are the tool's params, valid
    (after the coercion tools apply), with every required one given."""
    if "say" in step:  # with `call` too, the schema says so
        if "args" in step:
            c.add((*path, "args"), "'args' needs 'call'", at_key=True)
        return
    tool = c.tool(step.get("call"), (*path, "call"))
    if tool is None:
        return
    args = step.get("args", {})
    if not isinstance(args, dict):
        return
    params = c.params[tool]
    apath = (*path, "args")
    for name, value in args.items():
        if value is None:  # null is "not given", as at run time
            continue
        if name not in params:
            c.param(tool, name, (*apath, name), at_key=True)
        elif isinstance(params[name], dict) and params[name].get("type") in PARAM_TYPES:
            schema = param_schema(params[name])
            c.value(_coerce(value, schema), schema, (*apath, name))
    for name, p in params.items():
        if isinstance(p, dict) and p.get("required", True) and "default" not in p and args.get(name) is None:
            where = apath if "args" in step else path
            c.add(where, f"missing required param '{clip(name)}' of tool {clip(tool)}")


def _finite_number(value: Any) -> bool:
    """A number that stands for a string as its text, as at run time: not NaN or an
    infinity, whose text ("nan", "inf") is no value anyone meant."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _coerce(value: Any, schema: Mapping[str, Any]) -> Any:
    """Coerce a value the way arguments are coerced at run time ("42" -> 42)."""
    t = schema.get("type")
    if t == "string" and _finite_number(value):
        return _key_str(value)
    if isinstance(value, str):
        s = value.strip()
        if t == "integer" and re.fullmatch(r"[-+]?\d+", s):
            try:
                return int(s)
            except ValueError:  # over Python's 4,300 digits: left as text, which the schema refuses
                return value
        if t == "number" and _NUMBER.fullmatch(s):
            f = float(s)
            return int(f) if f.is_integer() and re.fullmatch(r"[-+]?\d+", s) else f
        if t == "boolean" and s.lower() in ("true", "false"):
            return s.lower() == "true"
    if t == "object" and isinstance(value, dict):
        props = _map(schema.get("properties"))
        return {k: _coerce(v, _map(props.get(k))) for k, v in value.items()}
    if t == "array" and isinstance(value, list):
        items = _map(schema.get("items"))
        return [_coerce(v, items) for v in value]
    return value


# --------------------------------------------------------------------------- issue 22, part B
# `expect.assert` ids, `expect.basis`, `setup`, `history`, `solo` and `ticket`. (Whether an
# assertion's or a setup handler's function imports, and takes its arguments, is
# domain/handlers.py's check, with the tools' handlers.)

# which keys of `expect` each basis kind stands for
_BASIS_KEYS = {
    "state": ("state", "world_matches_reference"),
    "called": ("called",),
    "not_called": ("not_called",),
    "reply": ("reply_includes",),
    "assert": ("assert",),
}


def _mid_way(c: _Checker, task: dict[str, Any], path: PathTuple) -> None:
    expect = _map(task.get("expect"))
    _assert_ids(c, expect.get("assert"), (*path, "expect", "assert"))
    _basis(c, expect, (*path, "expect"))
    for j, step in _items(task.get("setup")):
        step = _map(step)
        spath = (*path, "setup", j)
        if step.get("by") == "user" and "call" in step:  # a user tool, on the user's world
            name = step["call"]
            if isinstance(name, str) and name in c.params:
                tools = ", ".join(clip(n) for n in list(c.user_params)[:12])
                c.add((*spath, "call"), f"'{clip(name)}' is an agent tool; a `by: user` setup step calls one of "
                                        f"the user tools (user_tools): {tools}" if tools else
                                        f"'{clip(name)}' is an agent tool; a `by: user` setup step calls a user "
                                        f"tool, and this domain declares none (the top-level user_tools)")
            elif isinstance(name, str) and name not in c.user_params:
                c.add((*spath, "call"), unknown("user tool", name, list(c.user_params),
                                                hint="declare it in the top-level user_tools"))
            elif isinstance(name, str):
                with _user_tools_as_tools(c):
                    _step(c, {k: v for k, v in step.items() if k in ("call", "args")}, spath)
            continue
        if "call" in step:
            _step(c, {k: v for k, v in step.items() if k in ("call", "args")}, spath)
        elif "handler" in step and "by" in step:
            c.add((*spath, "by"), "'by' is for a setup `call`; a `handler` step is a function over the world",
                  at_key=True)
    for j, message in _items(task.get("history")):
        message = _map(message)
        mpath = (*path, "history", j)
        calls = message.get("calls")
        if calls is not None and message.get("role") == "user":
            c.add((*mpath, "calls"), "only the agent's messages have `calls` (the user's tools are not in this "
                                     "domain's history)", at_key=True)
            continue
        for k, call in _items(calls):
            _step(c, _map(call), (*mpath, "calls", k))
    _solo(c, task, path)


def _assert_ids(c: _Checker, entries: Any, path: PathTuple) -> None:
    first_at: dict[str, int] = {}
    for j, entry in _items(entries):
        aid = _map(entry).get("id")
        if not isinstance(aid, str):
            continue
        if aid in first_at:
            first = c.line_of((*path, first_at[aid]))
            c.add((*path, j, "id"), f"duplicate assert id '{clip(aid)}' in this task{first}")
        else:
            first_at[aid] = j


def _basis(c: _Checker, expect: dict[str, Any], path: PathTuple) -> None:
    """Each kind the basis names is one the task expects something of (an unknown kind is
    the schema's problem, with its did-you-mean)."""
    for j, kind in _items(expect.get("basis")):
        keys = _BASIS_KEYS.get(kind) if isinstance(kind, str) else None
        if keys is None:
            continue
        if not any(expect.get(k) for k in keys):
            c.add((*path, "basis", j), f"basis names `{kind}` but the task has no `{keys[0]}`"
                                       + (" (nor world_matches_reference)" if kind == "state" else ""))


def _solo(c: _Checker, task: dict[str, Any], path: PathTuple) -> None:
    """A solo task has a ticket and no simulated user to speak; a ticket is for a solo task."""
    if task.get("solo") is not True:
        if "ticket" in task:
            c.add((*path, "ticket"), "'ticket' is for a solo task: add `solo: true` (the agent then works from the "
                                     "ticket alone), or give the user an opening", at_key=True)
        return
    if "ticket" not in task:
        c.add((*path, "solo"), "a solo task needs `ticket`: the agent's first message, what it works from",
              at_key=True)
    user = _map(task.get("user"))
    for key in ("opening", "script", "say_unknown"):
        if key in user:
            c.add((*path, "user", key), f"a solo task has no simulated user, so no user.{key}: the agent works "
                                        "from the ticket alone", at_key=True)
    if "history" in task:
        c.add((*path, "history"), "a solo task starts from its ticket, not from a conversation: drop `history` "
                                  "or `solo`", at_key=True)

# --------------------------------------------------------------------------- dual control (issue 22 A)
# The caller's own world (`user_world`), the tools only the simulated user calls
# (`user_tools`) and a task's `user_given` (docs/spec.md, "The caller's world"): the two
# sides' tables and tools are named apart, and each side's tools see only its own tables.


def _agent_only(path: PathTuple) -> str:
    """What to write where a user tool is named and only an agent tool may be."""
    if path[:1] == ("invariants",):
        return "invariants apply to the agent's tools only"
    if "when" in path:
        return "for the user's own calls write user_called / user_not_called"
    return "name one of the agent's tools here"


def _user_world(c: _Checker) -> None:
    """Declares the user world's tables (each name unused by `world`) and checks their rows."""
    for name, t in _map(c.data.get("user_world")).items():
        if not isinstance(t, dict):
            continue
        if name in c.tables:
            c.add(("user_world", name), f"table {clip(name)} is also a table of `world`{c.line_of(('world', name))}; "
                                        "a table name is unique across world and user_world", at_key=True)
            continue
        c.section[name] = "user_world"
        c.user_tables.add(name)
        _declare_table(c, name, t)
        _seed_rows(c, name, t)


def _user_tools(c: _Checker) -> None:
    """Declares the user tools' params (each name unused by `tools`), then checks each tool
    as a tool, and that every tool's ops and checks name tables of its own side."""
    tools = _items(c.data.get("user_tools"))
    first_at: dict[str, int] = {}
    agent_at = {_map(t).get("name"): i for i, t in reversed(_items(c.data.get("tools")))}
    for i, t in tools:
        name = _map(t).get("name")
        if not isinstance(name, str):
            continue
        if name in agent_at:
            c.add(("user_tools", i, "name"), f"tool name '{clip(name)}' is also a tool of `tools`"
                                             f"{c.line_of(('tools', agent_at[name]))}; a tool name is unique "
                                             "across tools and user_tools")
        elif not c.repeated("user_tools", i, "name", name, first_at):
            c.user_params[name] = _map(t.get("params"))
    for i, t in tools:
        t = _map(t)
        name = t.get("name")
        if isinstance(name, str) and first_at.get(name) == i and name in c.user_params:
            with _user_tools_as_tools(c):
                _tool(c, name, t, ("user_tools", i))
    for section in ("tools", "user_tools"):
        for i, t in _items(c.data.get(section)):
            _tool_sides(c, _map(t), (section, i), user=section == "user_tools")


class _user_tools_as_tools:
    """While it holds, the user tools are tools to the checker (their params, `$name`
    references and call arguments are checked as any tool's)."""

    def __init__(self, c: _Checker) -> None:
        self.c = c
        self.added: list[str] = []

    def __enter__(self) -> None:
        for name, params in self.c.user_params.items():
            if name not in self.c.params:
                self.c.params[name] = params
                self.added.append(name)

    def __exit__(self, *exc: object) -> None:
        for name in self.added:
            del self.c.params[name]


def _side_problem(c: _Checker, table: Any, path: PathTuple, who: str, *, user: bool) -> None:
    """``table`` (at ``path``) must be a table of the side ``user`` says; ``who`` words
    what names it (``user tool 'x'``, ``user_given``)."""
    if not isinstance(table, str) or table not in c.tables:
        return  # unknown tables are reported where they are read
    if user and table not in c.user_tables:
        c.add(path, f"{who}: table {clip(table)} belongs to the agent's world; "
                    f"{'a user tool sees' if who.startswith('user tool') else 'it writes'} only `user_world`")
    elif not user and table in c.user_tables:
        c.add(path, f"{who}: table {clip(table)} belongs to the user's world (user_world); "
                    f"{'an agent tool sees' if who.startswith('tool') else 'it writes'} only `world`")


def _tool_sides(c: _Checker, t: dict[str, Any], path: PathTuple, *, user: bool) -> None:
    name = t.get("name")
    who = f"{'user tool' if user else 'tool'} '{clip(str(name))}'"
    for j, entry in _items(t.get("checks")):
        for kind in ("require", "forbid"):
            target = _map(_map(entry).get(kind))
            _side_problem(c, target.get("table"), (*path, "checks", j, kind, "table"), who, user=user)
    for j, op in _items(t.get("ops")):
        single = _single_op(op)
        if single is not None and single[0] != "respond":
            kind, spec = single
            _side_problem(c, _map(spec).get("table"), (*path, "ops", j, kind, "table"), who, user=user)


def _dual_tasks(c: _Checker) -> None:
    """Each task's `user_given` (on user tables), its `given` (on agent tables) and its
    script's call lines and conditions on the user's calls."""
    for i, task in _items(c.data.get("tasks")):
        if not isinstance(task, dict):
            continue
        path: PathTuple = ("tasks", i)
        _given(c, task.get("user_given"), (*path, "user_given"))
        for part in ("given", "user_given"):
            for j, op in _items(task.get(part)):
                single = _single_op(op, ("create", "update"))
                if single is not None:
                    _side_problem(c, _map(single[1]).get("table"), (*path, part, j, single[0], "table"), part,
                                  user=part == "user_given")
        for j, line in _items(_map(task.get("user")).get("script")):
            if isinstance(line, dict):
                _script_line(c, line, (*path, "user", "script", j))


def _script_line(c: _Checker, line: dict[str, Any], path: PathTuple) -> None:
    """A line says (`say`) or calls a user tool (`call`, with valid `args`); its `when`
    may test the user's own calls and results."""
    if "say" in line and "call" in line:
        c.add(path, "a script line says or calls, not both: give `say` (what the user says) or `call` "
                    "(a user tool the user calls)")
    elif "say" not in line and "call" not in line:
        c.add(path, "a script line needs `say` (what the user says) or `call` (a user tool the user calls)"
              if c.user_params else "missing required key 'say'")
    elif "say" in line and "args" in line:
        c.add((*path, "args"), "'args' needs 'call'", at_key=True)
    elif "call" in line:
        name = line["call"]
        if isinstance(name, str) and name not in c.user_params:
            if name in c.params:
                tools = ", ".join(clip(n) for n in list(c.user_params)[:12]) or "none"
                c.add((*path, "call"), f"'{clip(name)}' is an agent tool; a script line calls one of the user tools "
                                       f"(user_tools): {tools}")
            else:
                c.add((*path, "call"), unknown("user tool", name, list(c.user_params),
                                               hint="declare it in the top-level user_tools"))
        elif isinstance(name, str):
            with _user_tools_as_tools(c):
                _step(c, {k: v for k, v in line.items() if k in ("call", "args")}, path)
    when = _map(line.get("when"))
    wpath = (*path, "when")
    for part in ("user_called", "user_not_called"):
        names = when.get(part)
        for k, name in _items(names) if isinstance(names, list) else [(None, names)]:
            at = (*wpath, part) if k is None else (*wpath, part, k)
            if not isinstance(name, str) or name in c.user_params:
                continue
            if name in c.params:
                c.add(at, f"'{clip(name)}' is an agent tool; `{part}` names user tools (for the agent's calls "
                          f"write {part.removeprefix('user_')})")
            else:
                c.add(at, unknown("user tool", name, list(c.user_params)))
    pattern = when.get("result_matches")
    if isinstance(pattern, str):
        c.pattern(pattern, (*wpath, "result_matches"))
