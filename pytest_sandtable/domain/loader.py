"""Load a domain file: YAML, then the JSON Schema, then every cross-reference.

``load_domain`` either returns a complete :class:`~pytest_sandtable.domain.model.Domain`
or raises :class:`~pytest_sandtable.domain.errors.DomainError` listing every problem
found (not just the first), sorted by line, each pointing at the exact node.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]

from .conditions import json_type
from .errors import DomainError, PathTuple, Problem
from .model import (
    DEFAULT_MAX_TURNS,
    MISSING,
    OP_KINDS,
    PARAM_TYPES,
    SPEC_VERSION,
    CallMatcher,
    Check,
    Domain,
    Expect,
    Invariant,
    Op,
    Param,
    RefStep,
    StateExpectation,
    Table,
    Task,
    Tool,
    UserSpec,
)
from .yaml_reader import Document, load_yaml

__all__ = ["domain_schema", "load_domain", "load_domain_text"]

_SCHEMA_FILE = "schemas/domain.schema.json"

# `$name` is the call's argument `name`; `$$` is a literal dollar sign.
_ARG_REF = re.compile(r"\$\$|\$([A-Za-z_][A-Za-z0-9_]*)")
# `{name}` in a check message.
_MSG_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

# What a schema `pattern` means, for people.
_PATTERNS = {
    "^[A-Za-z_][A-Za-z0-9_]*$": "a name of letters, digits and _ that does not start with a digit",
    "^[A-Za-z0-9][A-Za-z0-9_.-]*$": "an id of letters, digits, _, . and - that starts with a letter or digit",
    "^[A-Za-z_][A-Za-z0-9_-]{0,63}$": (
        "a tool name of letters, digits, _ and - that does not start with a digit (at most 64 characters)"
    ),
    "^\\$[A-Za-z_][A-Za-z0-9_]*$": "a $name argument",
    "^-?[^-]": "a field name, or -field to sort descending",
}

# A key with spaces is almost always the tail of a text cut at a comma in `{ ... }`.
_COMMA_HINT = "inside { }, a comma ends a value; put text that contains commas in quotes"

_INVARIANT_COMMON = ("id", "kind", "soft", "source", "description")


# --------------------------------------------------------------------------- entry points


def load_domain(path: str | Path) -> Domain:
    """Load and validate the domain file at ``path``.

    Raises :class:`DomainError` with every problem found, sorted by line.
    """
    filename = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise DomainError([Problem(filename, None, None, "", "no such file")]) from None
    except IsADirectoryError:
        raise DomainError([Problem(filename, None, None, "", "is a directory, not a domain file")]) from None
    except OSError as exc:
        raise DomainError([Problem(filename, None, None, "", f"cannot read the file: {exc.strerror}")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DomainError([Problem(filename, line, None, "", "the file is not UTF-8 text")]) from None
    domain = _load(text, filename)
    domain.path = filename
    domain.sha256 = hashlib.sha256(raw).hexdigest()
    return domain


def load_domain_text(text: str, filename: str = "<string>") -> Domain:
    """Load and validate a domain from YAML ``text``; ``filename`` is used in problems.

    ``Domain.sha256`` is the hash of the text's UTF-8 bytes; ``Domain.path`` is None.
    """
    domain = _load(text, filename)
    domain.sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return domain


@lru_cache(maxsize=1)
def domain_schema() -> dict[str, Any]:
    """The JSON Schema of a domain file (draft 2020-12)."""
    text = resources.files("pytest_sandtable").joinpath(_SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@lru_cache(maxsize=1)
def _validator() -> Any:
    return jsonschema.Draft202012Validator(domain_schema())


def _load(text: str, filename: str) -> Domain:
    doc = load_yaml(text, filename)
    _check_version(doc)
    problems = list(doc.problems)
    errors = list(_validator().iter_errors(_without_plain_rows(doc.data)))
    problems += _Translator(doc).translate(errors)
    checker = _Checker(doc)
    if isinstance(doc.data, dict):
        problems += checker.run()
    if problems:
        raise DomainError(_sorted_unique(problems))
    return _build(doc.data, doc, checker.fields)


# all the schema asks of a seed row, which _without_plain_rows checks in Python
_ROW_SCHEMA = {"type": "object", "propertyNames": {"minLength": 1}}


@lru_cache(maxsize=1)
def _rows_checked_here() -> bool:
    table = domain_schema().get("$defs", {}).get("table", {})
    return bool(table.get("properties", {}).get("rows", {}).get("items") == _ROW_SCHEMA)


def _without_plain_rows(data: Any) -> Any:
    """The document for the schema, with each table's seed rows left out when every
    row is what the schema asks of a row: a mapping with no empty key (the YAML
    reader makes every key a string). jsonschema takes seconds over 100,000 rows; this
    check takes milliseconds. When a row is anything else, the schema sees them all
    and words the problem as always."""
    world = data.get("world") if isinstance(data, dict) else None
    if not isinstance(world, dict) or not _rows_checked_here():
        return data
    view = dict(world)
    for name, table in world.items():
        rows = table.get("rows") if isinstance(table, dict) else None
        if isinstance(rows, list) and rows and all(type(r) is dict and "" not in r for r in rows):
            view[name] = {**table, "rows": []}
    return {**data, "world": view}


def _sorted_unique(problems: Iterable[Problem]) -> list[Problem]:
    seen: set[tuple[int | None, int | None, str, str]] = set()
    out: list[Problem] = []
    for p in sorted(problems, key=Problem.sort_key):
        k = (p.line, p.col, p.path, p.message)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-sandtable")
    except PackageNotFoundError:
        return None


def _check_version(doc: Document) -> None:
    data = doc.data
    if not isinstance(data, dict):
        return
    v = data.get("version")
    if isinstance(v, int) and not isinstance(v, bool) and v > SPEC_VERSION:
        installed = _installed_version()
        who = f"pytest-sandtable {installed}" if installed else "this pytest-sandtable"
        raise DomainError(
            [
                doc.problem(
                    ("version",),
                    f"this file is spec version {v}; {who} reads version {SPEC_VERSION}. "
                    "Upgrade pytest-sandtable to load it.",
                )
            ]
        )


# --------------------------------------------------------------------------- wording helpers


def _show(value: Any) -> str:
    """A short literal form of a value, as the user would write it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, (int, float)):
        return repr(value)
    return json_type(value, integer=True)


def _found(value: Any) -> str:
    kind = json_type(value, integer=True)
    if isinstance(value, (dict, list)):
        return f"found an empty {kind}" if not value else f"found an {kind}"
    if value is None:
        return "found null"
    return f"found {kind} {_show(value)}"


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _and(names: Sequence[str]) -> str:
    q = [f"'{n}'" for n in names]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


def _or(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _bare(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _suggest(name: str, known: Iterable[str], prefix: str = "", suffix: str = "") -> str | None:
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean '{prefix}{match[0]}{suffix}'?" if match else None


_SUFFIX = {"{": "}"}


def _unknown(kind: str, name: str, known: Sequence[str], owner: str = "", prefix: str = "", hint: str = "") -> str:
    """``unknown field 'stauts' of table loads; did you mean 'status'?``

    ``prefix`` marks how the name was written: ``$`` for ``$name``, ``{`` for ``{name}``.
    """
    suffix = _SUFFIX.get(prefix, "")
    msg = f"unknown {kind} '{prefix}{name}{suffix}'" + (f" {owner}" if owner else "")
    suggestion = _suggest(name, known, prefix, suffix)
    if suggestion:
        return f"{msg}; {suggestion}"
    if hint:
        return f"{msg}; {hint}"
    if not known:
        return f"{msg}; none are declared"
    shown = [prefix + k + suffix for k in known[:12]] + (["..."] if len(known) > 12 else [])
    return f"{msg}; expected one of: {', '.join(shown)}"


# --------------------------------------------------------------------------- schema errors


class _Translator:
    """Turns jsonschema errors into problems a person can act on."""

    def __init__(self, doc: Document, base: PathTuple = ()) -> None:
        self.doc = doc
        self.base = base
        # path -> keys that a misspelt key there was meant to be ({tabel: x} -> table)
        self.typos: dict[PathTuple, set[str]] = {}

    def translate(self, errors: Iterable[Any]) -> list[Problem]:
        out: list[Problem] = []
        errors = list(errors)
        # an unknown key explains a wrong key count (an op `{gett: ...}`) or a
        # missing key (`{tabel: x}`); say it once
        unknown_at = set()
        for e in errors:
            if e.validator == "additionalProperties" and isinstance(e.instance, dict):
                path = tuple(e.absolute_path)
                unknown_at.add(path)
                allowed = list(_map(e.schema).get("properties", {}))
                for k in e.instance:
                    if k not in allowed:
                        self.typos.setdefault(path, set()).update(difflib.get_close_matches(k, allowed, 1, 0.6))
        # a value of the wrong type is not also "not one of" the allowed values
        wrong_type_at = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
        for e in errors:
            if e.validator in ("minProperties", "maxProperties") and tuple(e.absolute_path) in unknown_at:
                continue
            if e.validator in ("enum", "const") and tuple(e.absolute_path) in wrong_type_at:
                continue
            out += self._one(e)
        return out

    def _problem(self, path: PathTuple, message: str, *, at_key: bool = False) -> Problem:
        return self.doc.problem(self.base + path, message, at_key=at_key)

    def _one(self, e: Any) -> list[Problem]:
        path: PathTuple = tuple(e.absolute_path)
        inst = e.instance
        v = e.validator
        vv = e.validator_value
        schema = e.schema if isinstance(e.schema, dict) else {}

        if "propertyNames" in e.absolute_schema_path and isinstance(inst, str):
            key_path = (*path, inst)
            if v == "pattern":
                return [self._problem(key_path, f"found key {_show(inst)}, expected {_describe(vv)}", at_key=True)]
            return [self._problem(key_path, f"found key {_show(inst)}, expected a non-empty name", at_key=True)]
        if v in ("anyOf", "oneOf"):
            return self._alternatives(e, path)
        if v == "additionalProperties" and isinstance(inst, dict):
            allowed = list(schema.get("properties", {}))
            return [
                self._problem(
                    (*path, k), _unknown("key", k, allowed, hint=_COMMA_HINT if " " in k else ""), at_key=True
                )
                for k in inst
                if k not in allowed
            ]
        if v == "required" and isinstance(inst, dict):
            typos = self.typos.get(path, set())
            return [self._problem(path, f"missing required key '{k}'") for k in vv if k not in inst and k not in typos]
        if v == "type":
            types = [vv] if isinstance(vv, str) else list(vv)
            msg = f"{_found(inst)}, expected {_or(types)}"
            if not path and not self.base:
                msg += "; a domain file is a mapping that starts with 'version: 1'"
            if "string" in types and isinstance(inst, (int, float)):
                msg += "; put it in quotes to make it a string"
            return [self._problem(path, msg)]
        if v == "enum":
            msg = f"found {_show(inst)}, expected "
            msg += f"one of {', '.join(_bare(x) for x in vv)}" if len(vv) > 1 else _bare(vv[0])
            if isinstance(inst, str):
                suggestion = _suggest(inst, [x for x in vv if isinstance(x, str)])
                if suggestion:
                    msg += f"; {suggestion}"
            return [self._problem(path, msg)]
        if v == "const":
            if path == ("version",):
                return [
                    self._problem(path, f"found {_show(inst)}, expected {vv} (the spec version pytest-sandtable reads)")
                ]
            return [self._problem(path, f"found {_show(inst)}, expected {_bare(vv)}")]
        if v == "pattern":
            return [self._problem(path, f"found {_show(inst)}, expected {_describe(vv)}")]
        if v == "minLength":
            return [self._problem(path, "found an empty string, expected text")]
        if v == "minItems":
            found = "an empty array" if not inst else f"{len(inst)} item{'s' if len(inst) > 1 else ''}"
            return [self._problem(path, f"found {found}, expected at least {vv} item{'s' if vv > 1 else ''}")]
        if v in ("minProperties", "maxProperties"):
            props = list(schema.get("properties", {}))
            if schema.get("maxProperties") == 1 and props:
                keys = list(inst) if isinstance(inst, dict) else []
                found = _and(keys) if keys else "an empty mapping"
                return [self._problem(path, f"found {found}, expected exactly one of {', '.join(props)}")]
            return [self._problem(path, f"found an empty mapping, expected at least {vv} key")]
        if v == "minimum":
            return [self._problem(path, f"found {_show(inst)}, expected at least {vv}")]
        if v == "maximum":
            return [self._problem(path, f"found {_show(inst)}, expected at most {vv}")]
        if v == "uniqueItems" and isinstance(inst, list):
            seen: list[Any] = []
            for i, item in enumerate(inst):
                if item in seen:
                    return [self._problem((*path, i), f"{_show(item)} is listed twice")]
                seen.append(item)
        return [self._problem(path, str(e.message))]

    def _alternatives(self, e: Any, path: PathTuple) -> list[Problem]:
        inst = e.instance
        branches = e.validator_value
        if all(isinstance(b, dict) and set(b) == {"required"} for b in branches):
            names = [str(b["required"][0]) for b in branches]
            present = [n for n in names if isinstance(inst, dict) and n in inst]
            if not present and self.typos.get(path, set()) & set(names):
                return []
            if not present:
                qualifier = "at least one" if e.validator == "anyOf" else "one"
                return [self._problem(path, f"missing required key: {qualifier} of {_quoted(names)}")]
            return [self._problem(path, f"found {_and(present)}, expected only one of {_quoted(names)}")]
        by_branch: dict[int, list[Any]] = {}
        for sub in e.context:
            by_branch.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        fitting: list[list[Any]] = []
        expected: list[str] = []
        for _, errs in sorted(by_branch.items()):
            wrong_type = [s for s in errs if s.validator == "type" and not s.relative_path]
            if wrong_type:
                for s in wrong_type:
                    for t in [s.validator_value] if isinstance(s.validator_value, str) else s.validator_value:
                        if t not in expected:
                            expected.append(t)
            else:
                fitting.append(errs)
        if not fitting:
            return [self._problem(path, f"{_found(inst)}, expected {_or(expected)}")]
        # the alternative the value went furthest into explains it best
        best = max(fitting, key=lambda errs: max(len(s.relative_path) for s in errs))
        return self.translate(best)


def _describe(pattern: Any) -> str:
    return _PATTERNS.get(str(pattern), f"text matching {pattern}")


# --------------------------------------------------------------------------- cross-references


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[tuple[int, Any]]:
    return list(enumerate(value)) if isinstance(value, list) else []


def _single_op(op: Any, kinds: Sequence[str] = OP_KINDS) -> tuple[str, Any] | None:
    if isinstance(op, dict) and len(op) == 1:
        kind, spec = next(iter(op.items()))
        if kind in kinds:
            return kind, spec
    return None


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


class _Checker:
    """Every check the schema cannot express: names that must refer to something."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.data: dict[str, Any] = doc.data
        self.problems: list[Problem] = []
        self.tables: dict[str, dict[str, Any]] = {}
        self.fields: dict[str, dict[str, None]] = {}  # ordered sets
        self.closed: set[str] = set()  # tables with a `fields:` list
        self.seed_keys: dict[str, dict[str, int]] = {}  # table -> key text -> row index
        self.params: dict[str, dict[str, Any]] = {}  # tool -> its params mapping

    def add(self, path: PathTuple, message: str, *, at_key: bool = False) -> None:
        self.problems.append(self.doc.problem(path, message, at_key=at_key))

    def line_of(self, path: PathTuple) -> str:
        """`` (first at line N)`` for the node at ``path``."""
        pos = self.doc.pos(path)
        return f" (first at line {pos.line})" if pos else ""

    def run(self) -> list[Problem]:
        self._world()
        self._writes()
        self._tools()
        self._invariants()
        self._tasks()
        return self.problems

    # ---- references

    def table(self, name: Any, path: PathTuple) -> str | None:
        """The table `name` when it exists; otherwise reports it."""
        if not isinstance(name, str):
            return None
        if name in self.tables:
            return name
        self.add(path, _unknown("table", name, list(self.tables)))
        return None

    def field(self, table: str | None, name: Any, path: PathTuple, *, at_key: bool = False) -> None:
        if table is None or not isinstance(name, str) or table not in self.fields:
            return
        known = self.fields[table]
        if name not in known:
            self.add(path, _unknown("field", name, list(known), f"of table {table}"), at_key=at_key)

    def field_keys(self, table: str | None, conditions: Any, path: PathTuple) -> None:
        for k in _map(conditions):
            self.field(table, k, (*path, k), at_key=True)
        self.operator_values(conditions, path)

    def operator_values(self, conditions: Any, path: PathTuple) -> None:
        """What the schema cannot say: `in` lists and `matches` patterns that work."""
        for k, cond in _map(conditions).items():
            if not isinstance(cond, dict):
                continue
            for op in ("in", "not_in"):
                v = cond.get(op)
                if isinstance(v, str) and not (v.startswith("$") and not v.startswith("$$")):
                    self.add((*path, k, op), f"`{op}` expects a list of values (or a $name argument holding "
                                             f"one), found {_show(v)}; write [{_bare(v)}]")
            pattern = cond.get("matches")
            if isinstance(pattern, str) and not (pattern.startswith("$") and not pattern.startswith("$$")):
                try:
                    re.compile(pattern)
                except re.error as e:
                    self.add((*path, k, "matches"), f"not a valid regular expression: {e}")

    def tool(self, name: Any, path: PathTuple) -> str | None:
        if not isinstance(name, str):
            return None
        if name in self.params:
            return name
        self.add(path, _unknown("tool", name, list(self.params)))
        return None

    def param(self, tool: str | None, name: Any, path: PathTuple, *, at_key: bool = False, prefix: str = "") -> None:
        if tool is None or tool not in self.params or not isinstance(name, str):
            return
        known = list(self.params[tool])
        if name not in known:
            hint = f"tool {tool} has no params" if not known else ""
            self.add(path, _unknown("param", name, known, f"of tool {tool}", prefix, hint), at_key=at_key)

    def arg_refs(self, tool: str | None, value: Any, path: PathTuple) -> None:
        """`$name` in `value` must be a param of `tool`."""
        for at, name in _arg_refs(value, path):
            self.param(tool, name, at, prefix="$")

    def no_arg_refs(self, value: Any, path: PathTuple, where: str) -> None:
        for at, name in _arg_refs(value, path):
            self.add(at, f"'${name}' refers to a call argument, but {where} has none; write $$ for a literal $")

    def param_keys(self, tool: str | None, mapping: Any, path: PathTuple) -> None:
        for k in _map(mapping):
            self.param(tool, k, (*path, k), at_key=True)
        self.operator_values(mapping, path)

    # ---- world

    def _world(self) -> None:
        for name, t in _map(self.data.get("world")).items():
            if not isinstance(t, dict):
                continue
            path: PathTuple = ("world", name)
            self.tables[name] = t
            fields: dict[str, None] = {}
            key = t.get("key")
            if isinstance(key, str):
                fields[key] = None
            declared = t.get("fields")
            if isinstance(declared, list):
                self.closed.add(name)
                fields.update({f: None for f in declared if isinstance(f, str)})
            self.fields[name] = fields
            fmt = t.get("key_format")
            if isinstance(fmt, str) and "{n}" not in fmt:
                self.add(
                    (*path, "key_format"), f"found {_show(fmt)}, expected a format containing {{n}}, e.g. 'B-{{n}}'"
                )
            keys: dict[str, int] = {}
            self.seed_keys[name] = keys
            for i, row in _items(t.get("rows")):
                if not isinstance(row, dict):
                    continue
                rpath: PathTuple = (*path, "rows", i)
                for f in row:
                    if name in self.closed:
                        self.field(name, f, (*rpath, f), at_key=True)
                    else:
                        fields.setdefault(f, None)
                if not isinstance(key, str):
                    continue
                if key not in row:
                    self.add(rpath, f"missing the key field '{key}' of table {name}")
                    continue
                kv = row[key]
                if not isinstance(kv, (str, int, float)) or isinstance(kv, bool):
                    self.add((*rpath, key), f"{_found(kv)}, expected a string or number (a key)")
                    continue
                ks = _key_str(kv)
                if ks in keys:
                    first = self.line_of((*path, "rows", keys[ks]))
                    self.add((*rpath, key), f"duplicate key {_show(kv)} in table {name}{first}")
                else:
                    keys[ks] = i

    def _all_writes(self) -> Iterator[tuple[str, dict[str, Any], PathTuple]]:
        """Every create row and update set in the domain: (table, fields, path)."""
        for i, tool in _items(self.data.get("tools")):
            for j, op in _items(_map(tool).get("ops")):
                yield from self._write(op, ("tools", i, "ops", j))
        for i, task in _items(self.data.get("tasks")):
            for j, op in _items(_map(task).get("given")):
                yield from self._write(op, ("tasks", i, "given", j))

    def _write(self, op: Any, path: PathTuple) -> Iterator[tuple[str, dict[str, Any], PathTuple]]:
        single = _single_op(op, ("create", "update"))
        if single is None:
            return
        kind, spec = single
        spec = _map(spec)
        part = "row" if kind == "create" else "set"
        table = spec.get("table")
        values = spec.get(part)
        if isinstance(table, str) and isinstance(values, dict):
            yield table, values, (*path, kind, part)

    def _writes(self) -> None:
        """Creates and updates add fields to open tables; closed tables check them."""
        for table, values, path in self._all_writes():
            if table not in self.fields:
                continue
            for f in values:
                if table in self.closed:
                    self.field(table, f, (*path, f), at_key=True)
                else:
                    self.fields[table].setdefault(f, None)

    # ---- tools

    def _tools(self) -> None:
        first_at: dict[str, int] = {}
        tools = _items(self.data.get("tools"))
        for i, t in tools:
            name = _map(t).get("name")
            if not isinstance(name, str):
                continue
            if name in first_at:
                first = self.line_of(("tools", first_at[name]))
                self.add(("tools", i, "name"), f"duplicate tool name '{name}'{first}")
                continue
            first_at[name] = i
            self.params[name] = _map(t.get("params"))
        for i, t in tools:
            t = _map(t)
            name = t.get("name")
            if not isinstance(name, str) or first_at.get(name) != i:
                continue
            path: PathTuple = ("tools", i)
            for pname, p in _map(t.get("params")).items():
                self._param_def(p, (*path, "params", pname))
            for j, check in _items(t.get("checks")):
                self._check(name, _map(check), (*path, "checks", j))
            for j, op in _items(t.get("ops")):
                self._op(name, op, (*path, "ops", j))

    def _param_def(self, p: Any, path: PathTuple) -> None:
        if not isinstance(p, dict) or p.get("type") not in PARAM_TYPES:
            return
        ptype = p["type"]
        if "properties" in p and ptype != "object":
            self.add((*path, "properties"), f"'properties' is for type object; this param is type {ptype}", at_key=True)
        if "items" in p and ptype != "array":
            self.add((*path, "items"), f"'items' is for type array; this param is type {ptype}", at_key=True)
        for sub_name, sub in _map(p.get("properties")).items():
            self._param_def(sub, (*path, "properties", sub_name))
        if isinstance(p.get("items"), dict):
            self._param_def(p["items"], (*path, "items"))
        schema = _param_schema(p)
        type_only = {k: v for k, v in schema.items() if k not in ("enum", "default", "description")}
        for k, value in _items(p.get("enum")):
            self.problems += _validate_value(self.doc, value, type_only, (*path, "enum", k))
        if "default" in p:
            no_default = {k: v for k, v in schema.items() if k != "default"}
            self.problems += _validate_value(self.doc, p["default"], no_default, (*path, "default"))

    def _check(self, tool: str, check: dict[str, Any], path: PathTuple) -> None:
        for kind in ("require", "forbid"):
            target = check.get(kind)
            if not isinstance(target, dict):
                continue
            tpath = (*path, kind)
            table = self.table(target.get("table"), (*tpath, "table"))
            self.arg_refs(tool, target.get("key"), (*tpath, "key"))
            self.field_keys(table, target.get("where"), (*tpath, "where"))
            self.arg_refs(tool, target.get("where"), (*tpath, "where"))
        message = check.get("message")
        if isinstance(message, str):
            self.arg_refs(tool, message, (*path, "message"))
            for m in _MSG_REF.finditer(message):
                if m.group(1):
                    self.param(tool, m.group(1), (*path, "message"), prefix="{")

    def _op(self, tool: str, op: Any, path: PathTuple) -> None:
        single = _single_op(op)
        if single is None:
            return
        kind, spec = single
        opath = (*path, kind)
        if kind == "respond":
            self.arg_refs(tool, spec, opath)
            return
        if not isinstance(spec, dict):
            return
        table = self.table(spec.get("table"), (*opath, "table"))
        for part in ("key", "limit", "row", "set"):
            if part in spec:
                self.arg_refs(tool, spec[part], (*opath, part))
        if kind == "list":
            self.field_keys(table, spec.get("where"), (*opath, "where"))
            self.arg_refs(tool, spec.get("where"), (*opath, "where"))
            order_by = spec.get("order_by")
            if isinstance(order_by, str):
                self.field(table, order_by.removeprefix("-"), (*opath, "order_by"))

    # ---- invariants

    def _invariants(self) -> None:
        first_at: dict[str, int] = {}
        for i, inv in _items(self.data.get("invariants")):
            if not isinstance(inv, dict):
                continue
            path: PathTuple = ("invariants", i)
            inv_id = inv.get("id")
            if isinstance(inv_id, str):
                if inv_id in first_at:
                    where = self.line_of(("invariants", first_at[inv_id]))
                    self.add((*path, "id"), f"duplicate invariant id '{inv_id}'{where}")
                else:
                    first_at[inv_id] = i
            kind = inv.get("kind")
            if kind == "before":
                first = self.tool(inv.get("first"), (*path, "first"))
                then = self.tool(inv.get("then"), (*path, "then"))
                for j, name in _items(inv.get("same")):
                    self.param(first, name, (*path, "same", j))
                    self.param(then, name, (*path, "same", j))
            elif kind == "never_disclose":
                values = inv.get("values")
                if isinstance(values, dict):
                    vpath = (*path, "values")
                    table = self.table(values.get("table"), (*vpath, "table"))
                    self.field(table, values.get("field"), (*vpath, "field"))
                    self.field_keys(table, values.get("where"), (*vpath, "where"))
                    self.no_arg_refs(values.get("where"), (*vpath, "where"), "never_disclose")
            elif kind in ("require", "limit", "match", "never"):
                tool = self.tool(inv.get("tool"), (*path, "tool"))
                self._rule(kind, tool, inv, path)

    def _record(self, tool: str | None, ref: Any, path: PathTuple, *, with_field: bool) -> str | None:
        if not isinstance(ref, dict):
            return None
        table = self.table(ref.get("table"), (*path, "table"))
        self.arg_refs(tool, ref.get("key"), (*path, "key"))
        if with_field:
            self.field(table, ref.get("field"), (*path, "field"))
        return table

    def _rule(self, kind: str, tool: str | None, inv: dict[str, Any], path: PathTuple) -> None:
        if kind == "require":
            table = self._record(tool, inv.get("record"), (*path, "record"), with_field=False)
            self.field_keys(table, inv.get("where"), (*path, "where"))
            self.arg_refs(tool, inv.get("where"), (*path, "where"))
        elif kind == "limit":
            self.param(tool, inv.get("arg"), (*path, "arg"))
            for bound in ("lt", "lte", "gt", "gte"):
                if bound not in inv:
                    continue
                value = inv[bound]
                bpath = (*path, bound)
                if isinstance(value, dict):
                    self._record(tool, value, bpath, with_field=True)
                elif isinstance(value, str):
                    refs = list(_arg_refs(value, bpath))
                    if refs:
                        self.arg_refs(tool, value, bpath)
                    elif not _NUMBER.fullmatch(value.strip()):
                        self.add(
                            bpath, f"{_found(value)}, expected a number, a $name argument or {{table, key, field}}"
                        )
        elif kind == "match":
            for side in ("left", "right"):
                self._record(tool, inv.get(side), (*path, side), with_field=True)
        elif kind == "never":
            self.param_keys(tool, inv.get("when"), (*path, "when"))
            self.arg_refs(tool, inv.get("when"), (*path, "when"))

    # ---- tasks

    def _tasks(self) -> None:
        first_at: dict[str, int] = {}
        declared = self.data.get("tags")
        tags = list(declared) if isinstance(declared, dict) else None
        for i, task in _items(self.data.get("tasks")):
            if not isinstance(task, dict):
                continue
            path: PathTuple = ("tasks", i)
            task_id = task.get("id")
            if isinstance(task_id, str):
                if task_id in first_at:
                    first = self.line_of(("tasks", first_at[task_id]))
                    self.add((*path, "id"), f"duplicate task id '{task_id}'{first}")
                else:
                    first_at[task_id] = i
            if tags is not None:
                for j, tag in _items(task.get("tags")):
                    if isinstance(tag, str) and tag not in tags:
                        self.add(
                            (*path, "tags", j), _unknown("tag", tag, tags, hint="declare it in the top-level tags map")
                        )
            self._given(task.get("given"), (*path, "given"))
            expect = _map(task.get("expect"))
            for j, entry in _items(expect.get("state")):
                self._state(_map(entry), (*path, "expect", "state", j))
            for part in ("called", "not_called"):
                for j, matcher in _items(expect.get(part)):
                    mpath = (*path, "expect", part, j)
                    if isinstance(matcher, str):
                        self.tool(matcher, mpath)
                    elif isinstance(matcher, dict):
                        tool = self.tool(matcher.get("tool"), (*mpath, "tool"))
                        self.param_keys(tool, matcher.get("args"), (*mpath, "args"))
            for j, step in _items(task.get("reference")):
                self._step(_map(step), (*path, "reference", j))

    def _given(self, given: Any, path: PathTuple) -> None:
        created: dict[str, set[str]] = {}
        for j, op in _items(given):
            single = _single_op(op, ("create", "update"))
            if single is None or not isinstance(single[1], dict):
                continue
            kind, spec = single
            opath = (*path, j, kind)
            self.no_arg_refs(spec, opath, "given")
            table = self.table(spec.get("table"), (*opath, "table"))
            if table is None:
                continue
            existing = set(self.seed_keys.get(table, {})) | created.setdefault(table, set())
            key_field = self.tables[table].get("key")
            if kind == "update" and "key" in spec:
                ks = _key_str(spec["key"])
                if ks not in existing:
                    msg = f"no row of table {table} has the key {_show(spec['key'])}"
                    suggestion = _suggest(ks, list(self.seed_keys.get(table, {})) + sorted(created[table]))
                    self.add((*opath, "key"), f"{msg}; {suggestion}" if suggestion else msg)
            elif kind == "create" and isinstance(spec.get("row"), dict) and isinstance(key_field, str):
                row = spec["row"]
                if row.get(key_field) is not None:
                    ks = _key_str(row[key_field])
                    if ks in existing:
                        self.add(
                            (*opath, "row", key_field),
                            f"table {table} already has a row with key {_show(row[key_field])}",
                        )
                    created[table].add(ks)

    def _state(self, entry: dict[str, Any], path: PathTuple) -> None:
        table = self.table(entry.get("table"), (*path, "table"))
        has = {k for k in ("key", "fields", "where", "count") if k in entry}
        if "key" in has and has & {"where", "count"}:
            self.add(
                path, f"found 'key' with {_and(sorted(has & {'where', 'count'}))}; use key (with fields) or where/count"
            )
        elif "fields" in has and "key" not in has:
            self.add((*path, "fields"), "'fields' needs 'key'; to count matching rows use where and count", at_key=True)
        elif not has:
            self.add(path, "missing required key: one of 'key', 'where', 'count'")
        self.field_keys(table, entry.get("fields"), (*path, "fields"))
        self.field_keys(table, entry.get("where"), (*path, "where"))

    def _step(self, step: dict[str, Any], path: PathTuple) -> None:
        if "say" in step:  # with `call` too, the schema says so
            if "args" in step:
                self.add((*path, "args"), "'args' needs 'call'", at_key=True)
            return
        tool = self.tool(step.get("call"), (*path, "call"))
        if tool is None:
            return
        args = step.get("args", {})
        if not isinstance(args, dict):
            return
        params = self.params[tool]
        apath = (*path, "args")
        for name, value in args.items():
            if value is None:  # null is "not given", as at run time
                continue
            if name not in params:
                self.param(tool, name, (*apath, name), at_key=True)
            elif isinstance(params[name], dict) and params[name].get("type") in PARAM_TYPES:
                schema = _param_schema(params[name])
                self.problems += _validate_value(self.doc, _coerce(value, schema), schema, (*apath, name))
        for name, p in params.items():
            if isinstance(p, dict) and p.get("required", True) and "default" not in p and args.get(name) is None:
                where = apath if "args" in step else path
                self.add(where, f"missing required param '{name}' of tool {tool}")


def _param_schema(p: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a param, as agents see it."""
    ptype = p.get("type")
    schema: dict[str, Any] = {"type": ptype}
    if isinstance(p.get("description"), str):
        schema["description"] = p["description"]
    if isinstance(p.get("enum"), list):
        schema["enum"] = list(p["enum"])
    if "default" in p:
        schema["default"] = p["default"]
    props = p.get("properties")
    if ptype == "object" and isinstance(props, dict):
        schema["properties"] = {n: _param_schema(_map(sub)) for n, sub in props.items()}
        required = [
            n
            for n, sub in props.items()
            if isinstance(sub, dict) and sub.get("required", True) and "default" not in sub
        ]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
    if ptype == "array" and isinstance(p.get("items"), dict):
        schema["items"] = _param_schema(p["items"])
    return schema


def _coerce(value: Any, schema: Mapping[str, Any]) -> Any:
    """Coerce a value the way arguments are coerced at run time ("42" -> 42)."""
    t = schema.get("type")
    if t == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return _key_str(value)
    if isinstance(value, str):
        s = value.strip()
        if t == "integer" and re.fullmatch(r"[-+]?\d+", s):
            return int(s)
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


def _validate_value(doc: Document, value: Any, schema: dict[str, Any], path: PathTuple) -> list[Problem]:
    try:
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    except Exception:  # a malformed param was already reported by the schema
        return []
    return _Translator(doc, path).translate(errors)


# --------------------------------------------------------------------------- building


def _build(data: dict[str, Any], doc: Document, fields: Mapping[str, Mapping[str, None]]) -> Domain:
    tables = {
        name: Table(
            name=name,
            key=t["key"],
            rows=list(t.get("rows", [])),
            key_format=t.get("key_format"),
            fields=set(fields.get(name, {})),
        )
        for name, t in data.get("world", {}).items()
    }

    tools: dict[str, Tool] = {}
    for i, t in enumerate(data.get("tools", [])):
        params = {
            pname: Param(
                name=pname,
                type=p["type"],
                description=p.get("description"),
                required=p.get("required", True),
                default=p.get("default", MISSING),
                enum=list(p["enum"]) if "enum" in p else None,
                schema=_param_schema(p),
            )
            for pname, p in t.get("params", {}).items()
        }
        checks = []
        for c in t.get("checks", []):
            target = c["require"] if "require" in c else c["forbid"]
            checks.append(
                Check(
                    kind="require" if "require" in c else "forbid",
                    table=target["table"],
                    key=target.get("key"),
                    where=target.get("where"),
                    error=c.get("error", 400),
                    message=c["message"],
                )
            )
        tools[t["name"]] = Tool(
            name=t["name"],
            description=t.get("description", ""),
            params=params,
            checks=checks,
            ops=[_build_op(op) for op in t["ops"]],
            handoff=t.get("handoff", False),
            pos=doc.pos(("tools", i)),
        )

    invariants = []
    for i, inv in enumerate(data.get("invariants", [])):
        spec = {k: v for k, v in inv.items() if k not in _INVARIANT_COMMON}
        if inv["kind"] == "before":
            spec.setdefault("same", [])
        invariants.append(
            Invariant(
                id=inv["id"],
                kind=inv["kind"],
                spec=spec,
                soft=inv.get("soft", False),
                source_quote=inv.get("source", {}).get("quote"),
                description=inv.get("description"),
                pos=doc.pos(("invariants", i)),
            )
        )

    tasks = [_build_task(t, doc.pos(("tasks", i))) for i, t in enumerate(data.get("tasks", []))]
    return Domain(
        name=data["name"],
        description=data.get("description", ""),
        policy=data.get("policy", ""),
        tables=tables,
        tools=tools,
        invariants=invariants,
        tasks=tasks,
        version=data["version"],
        tags=dict(data.get("tags", {})),
    )


def _build_op(op: dict[str, Any]) -> Op:
    kind, spec = next(iter(op.items()))
    if kind == "respond":
        return Op(kind=kind, spec={"value": spec})
    return Op(kind=kind, spec=dict(spec))


def _build_task(t: dict[str, Any], pos: Any) -> Task:
    user = t.get("user", {})
    expect = t.get("expect", {})
    state = []
    per_table: dict[str, int] = {}
    for entry in expect.get("state", []):
        per_table[entry["table"]] = per_table.get(entry["table"], 0) + 1
        state.append(
            StateExpectation(
                table=entry["table"],
                key=entry.get("key"),
                fields=entry.get("fields"),
                where=entry.get("where"),
                count=entry.get("count"),
                index=per_table[entry["table"]],
            )
        )
    return Task(
        id=t["id"],
        description=t.get("description", ""),
        tags=list(t.get("tags", [])),
        critical=t.get("critical", False),
        max_turns=t.get("max_turns", DEFAULT_MAX_TURNS),
        given=[_build_op(op) for op in t.get("given", [])],
        user=UserSpec(
            persona=user.get("persona", ""),
            instructions=user.get("instructions", ""),
            opening=user.get("opening"),
            script=list(user.get("script", [])),
        ),
        expect=Expect(
            state=state,
            called=[_matcher(m) for m in expect.get("called", [])],
            not_called=[_matcher(m) for m in expect.get("not_called", [])],
            reply_includes=list(expect.get("reply_includes", [])),
        ),
        reference=[
            RefStep(call=s.get("call"), args=dict(s.get("args", {})), say=s.get("say")) for s in t.get("reference", [])
        ],
        pos=pos,
    )


def _matcher(m: str | dict[str, Any]) -> CallMatcher:
    if isinstance(m, str):
        return CallMatcher(tool=m)
    return CallMatcher(tool=m["tool"], args=m.get("args"))
