"""Running one tool call: arguments validated and coerced, checks, atomic ops."""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ..domain.conditions import (
    ABSENT,
    as_number,
    equal,
    format_literal,
    format_value,
    json_type,
    resolve,
    resolve_where,
    row_matches,
    template,
)
from ..domain.model import MISSING, Check, Param, Tool
from .api import ToolResult
from .world import Conflict, NotFound, Savepoint, World, copy_row


class ArgError(Exception):
    """A bad argument: becomes a tool error (400) the agent sees."""


MAX_ARG_DEPTH = 64
"""Levels of nested objects and arrays one argument may have (``[[1]]`` has two)."""
MAX_ARG_VALUES = 100_000
"""Values (keys, items and scalars, nested ones included) the arguments of one call may hold."""


def max_int_digits() -> int:
    """The longest integer, in decimal digits, that Python turns into text (4,300 unless
    the interpreter is told otherwise; 0 means no limit)."""
    limit: int = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # Python 3.10.7+
    return limit


class _LongInteger:
    """An integer of a call's JSON text too long to read (see :func:`_json_int`)."""


def _json_int(text: str) -> Any:
    """An integer of a call's JSON text: one longer than :func:`max_int_digits` becomes a
    :class:`_LongInteger`, left for :func:`plain_arguments` to name, where ``json.loads``
    would raise a ValueError of its own."""
    try:
        return int(text)
    except ValueError:
        return _LongInteger()


# the least limit Python allows (sys.set_int_max_str_digits refuses less, bar 0 for none)
# times 3 bits a digit: an integer shorter than this is surely short enough
_SURELY_SHORT_BITS = 3 * 640


def _too_long(n: int) -> bool:
    if n.bit_length() < _SURELY_SHORT_BITS:  # nearly every integer, without asking the limit
        return False
    limit = max_int_digits()
    # fewer than 3 bits a digit: surely short enough, without making the text
    if limit == 0 or n.bit_length() < 3 * limit:
        return False
    try:
        str(n)
    except ValueError:
        return True
    return False


def text_of(x: Any) -> str:
    """``str(x)``; an object whose text cannot be made is named by its type."""
    try:
        return str(x)
    except Exception:
        return f"<{type(x).__name__}>"


class _Plain:
    """Makes a JSON-compatible copy of a call's arguments (non-JSON leaves become their
    text) and notes the first reason they are not JSON data at all: an integer too long
    to write, an object or array that contains itself, nesting deeper than
    :data:`MAX_ARG_DEPTH`, more than :data:`MAX_ARG_VALUES` values. Such parts become a
    short marker in the copy, so that the call log can always be written; the walk is
    bounded by the caps, so no argument makes it recurse or run without end."""

    def __init__(self) -> None:
        self.problem: str | None = None
        self.values = 0
        self._inside: set[int] = set()  # the containers on the way down (a cycle comes back to one)

    def _note(self, where: str, problem: str) -> None:
        if self.problem is None:
            self.problem = f"{where}: {problem}"

    def full(self) -> bool:
        return self.values > MAX_ARG_VALUES

    def arguments(self, args: Any) -> Any:
        """The copy of a call's arguments; a problem inside one names that argument."""
        if not isinstance(args, dict):
            return self.copy(args, "arguments", 1)
        self._inside.add(id(args))
        out: dict[str, Any] = {}
        for name, value in args.items():
            if self.full():
                break
            if isinstance(name, str):
                out[name] = self.copy(value, name, 1)
            else:
                out[text_of(self.copy(name, "arguments", 1))] = self.copy(value, "arguments", 1)
        return out

    def copy(self, x: Any, where: str, level: int) -> Any:
        self.values += 1
        if self.full():
            self._note("arguments", f"expected at most {MAX_ARG_VALUES} values, got more")
            return "<more values>"
        t = type(x)
        if t is str or t is float or t is bool or x is None:
            return x
        if isinstance(x, _LongInteger) or (isinstance(x, int) and not isinstance(x, bool) and _too_long(x)):
            self._note(where, f"expected at most {max_int_digits()} digits in an integer, got more")
            return f"<integer of more than {max_int_digits()} digits>"
        if isinstance(x, (dict, list, tuple)):
            return self._container(x, where, level)
        if isinstance(x, (int, float)):  # int/float subclasses, e.g. numpy scalars register as these
            return float(x) if isinstance(x, float) else int(x)
        return text_of(x)

    def _container(self, x: dict[Any, Any] | list[Any] | tuple[Any, ...], where: str, level: int) -> Any:
        kind = "an object" if isinstance(x, dict) else "an array"
        if id(x) in self._inside:
            self._note(where, f"expected JSON data, got {kind} that contains itself")
            return "<contains itself>"
        if level > MAX_ARG_DEPTH:
            self._note(where, f"expected at most {MAX_ARG_DEPTH} levels of nesting, got more")
            return f"<nested more than {MAX_ARG_DEPTH} levels>"
        self._inside.add(id(x))
        try:
            if isinstance(x, dict):
                out: dict[str, Any] = {}
                for k, v in x.items():
                    if self.full():
                        break
                    key = self.copy(k, where, level + 1)
                    out[key if isinstance(key, str) else text_of(key)] = self.copy(v, where, level + 1)
                return out
            items: list[Any] = []
            for v in x:
                if self.full():
                    break
                items.append(self.copy(v, where, level + 1))
            return items
        finally:
            self._inside.discard(id(x))


def plain_arguments(args: Any) -> tuple[Any, str | None]:
    """A JSON-compatible copy of a call's arguments (an object, or anything an agent
    passed instead), for the call log; and why they are not JSON data, naming the
    argument (None when they are)."""
    if _flat(args):  # what most calls pass: the walk would copy each value as it is
        return dict(args), None
    walk = _Plain()
    return walk.arguments(args), walk.problem


# the scalars the walk keeps as they are (an int too, unless too long to write)
_FLAT_SCALARS = frozenset({str, float, bool, type(None)})


def _flat(args: Any) -> bool:
    """Whether ``args`` is an object of text keys and plain scalars within the caps, which
    :class:`_Plain` would copy value for value, finding no problem."""
    if type(args) is not dict or len(args) > MAX_ARG_VALUES:
        return False
    for k, v in args.items():
        t = type(v)
        if type(k) is not str or (t not in _FLAT_SCALARS and (t is not int or _too_long(v))):
            return False
    return True


_TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
}


def _bad(p: Param, v: Any) -> ArgError:
    return ArgError(f"{p.name}: expected {_TYPE_NAMES.get(p.type, p.type)}, got {json_type(v)} {_short(v)}")


def _coerce(p: Param, v: Any) -> Any:
    t = p.type
    if t == "string":
        if isinstance(v, str):
            out: Any = v
        elif _is_finite_number(v):
            out = format_value(v)
        else:
            raise _bad(p, v)
    elif t in ("number", "integer"):
        n = as_number(v)
        if n is None or not math.isfinite(n):
            raise _bad(p, v)
        if t == "integer":
            if not n.is_integer():
                raise _bad(p, v)
            out = int(n)
        else:
            out = int(n) if isinstance(v, int) or (isinstance(v, str) and n.is_integer() and "." not in v) else n
    elif t == "boolean":
        if isinstance(v, bool):
            out = v
        elif isinstance(v, str) and v.strip().lower() in ("true", "false"):
            out = v.strip().lower() == "true"
        else:
            raise _bad(p, v)
    elif t in ("object", "array"):
        if not isinstance(v, dict if t == "object" else list):
            raise _bad(p, v)
        out = _coerce_nested(v, p.schema)
        _validate_structured(p, out)
    else:  # pragma: no cover - validated at load time
        out = v
    if p.enum is not None and not any(equal(out, e) for e in p.enum):
        raise ArgError(f"{p.name}: {format_literal(out)} is not one of {', '.join(format_literal(e) for e in p.enum)}")
    return out


def _is_finite_number(v: Any) -> bool:
    """Whether a number may stand for a string argument (as its text): not NaN or an
    infinity, whose text ("nan", "inf") is no value a person meant."""
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and math.isfinite(v))


def _coerce_nested(v: Any, schema: dict[str, Any]) -> Any:
    """Coerce the values inside an object or array argument the way top-level ones are
    ("2" for an integer property becomes 2); what does not coerce is left for validation."""
    t = schema.get("type")
    if t == "object" and isinstance(v, dict):
        props = schema.get("properties") or {}
        return {k: _coerce_nested(x, props[k]) if k in props else x for k, x in v.items()}
    if t == "array" and isinstance(v, list):
        items = schema.get("items")
        return [_coerce_nested(x, items) for x in v] if isinstance(items, dict) else list(v)
    if t == "string" and _is_finite_number(v):
        return format_value(v)
    if t in ("number", "integer") and isinstance(v, str):
        n = as_number(v)
        if n is not None and (t == "number" or n.is_integer()):
            return int(n) if n.is_integer() and (t == "integer" or "." not in v) else n
    if t == "boolean" and isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    return v


def _validate_structured(p: Param, v: Any) -> None:
    import jsonschema  # only tools with object/array params pay for this import

    # what jsonschema.validate(v, p.schema) raises, without checking the schema itself again
    error = jsonschema.exceptions.best_match(_validator(p.schema).iter_errors(v))
    if error is not None:
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in error.absolute_path)
        raise ArgError(f"{p.name}{where}: {error.message}")


# a param's schema -> its validator, made (and the schema checked) on its first call in
# the process: jsonschema.validate checks the schema against its meta-schema on every
# call, which cost far more than validating a call's arguments
_VALIDATORS: dict[int, tuple[dict[str, Any], Any]] = {}
_VALIDATORS_KEPT = 4096  # past this many (domains loaded again and again), start over


def _validator(schema: dict[str, Any]) -> Any:
    hit = _VALIDATORS.get(id(schema))
    if hit is None or hit[0] is not schema:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)  # an invalid schema raises here, on every call, as before
        if len(_VALIDATORS) >= _VALIDATORS_KEPT:
            _VALIDATORS.clear()
        hit = _VALIDATORS[id(schema)] = (schema, cls(schema))
    return hit[1]


def _short(v: Any) -> str:
    s = json.dumps(plain_arguments(v)[0], ensure_ascii=False)
    return s if len(s) <= 60 else s[:57] + "..."


def coerce_args(tool: Tool, raw: Any) -> dict[str, Any]:
    """Validate and coerce a call's arguments against the tool's params."""
    if raw is None or (isinstance(raw, str) and not raw):
        raw = {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw, parse_int=_json_int)
        except json.JSONDecodeError as e:
            raise ArgError(f"arguments are not valid JSON: {e.msg}") from None
        except RecursionError:  # nested far deeper than the cap
            raise ArgError(f"arguments: expected at most {MAX_ARG_DEPTH} levels of nesting, got more") from None
    # before anything reads them: nothing after can then fail or run without end on them
    problem = None if _flat(raw) else plain_arguments(raw)[1]
    if problem is not None:
        raise ArgError(problem)
    if not isinstance(raw, dict):
        raise ArgError(f"arguments must be an object, got {json_type(raw)}")
    unknown = [k for k in raw if k not in tool.params]
    if unknown:
        takes = ", ".join(tool.params) or "no arguments"
        s = "s" if len(unknown) > 1 else ""
        raise ArgError(f"unknown argument{s} {', '.join(repr(k) for k in unknown)} ({tool.name} takes {takes})")
    args: dict[str, Any] = {}
    problems: list[str] = []
    for name, p in tool.params.items():
        v = raw.get(name)
        if v is None:
            if p.default is not MISSING:
                args[name] = copy.deepcopy(p.default)
            elif p.required:
                problems.append(f"missing required argument {name!r}")
            continue
        try:
            args[name] = _coerce(p, v)
        except ArgError as e:
            problems.append(str(e))
    if problems:
        raise ArgError("; ".join(problems))
    return args


def _strip_absent(v: Any) -> Any:
    """Leave out what refers to an optional argument the call did not give (null at the top)."""
    if v is ABSENT:
        return None
    if isinstance(v, dict):  # a value that is no container is itself: no call for it
        return {k: _strip_absent(x) if isinstance(x, (dict, list)) else x for k, x in v.items() if x is not ABSENT}
    if isinstance(v, list):
        return [_strip_absent(x) if isinstance(x, (dict, list)) else x for x in v if x is not ABSENT]
    return v


def run_checks(tool: Tool, args: dict[str, Any], world: World) -> ToolResult | None:
    """The first failing check's tool error, or None when all pass."""
    for c in tool.checks:
        failed = _check_fails(c, args, world) if c.each is None else _check_each(c, args, world)
        if failed is not None:
            default = f"{c.table} check failed" if c.kind == "require" else f"{c.table} conflict"
            return ToolResult(False, error=c.error, message=template(c.message, failed) if c.message else default)
    return None


def _check_fails(c: Check, args: Mapping[str, Any], world: World) -> Mapping[str, Any] | None:
    """The arguments to word the error with when the check fails, else None."""
    where = resolve_where(c.where, args, world.get)
    if c.key is not None:
        key = resolve(c.key, args)
        row = None if key is ABSENT or isinstance(key, (dict, list)) else world.get(c.table, key)
        found = row is not None and row_matches(row, where)
    else:
        found = bool(world.select(c.table, where, limit=1))
    return args if found != (c.kind == "require") else None


def _check_each(c: Check, args: Mapping[str, Any], world: World) -> Mapping[str, Any] | None:
    """`each: param`: the check runs once per element of the array argument, the element
    as `$item`; the first element it fails for words the error (`{item}`, `$item.field`)."""
    items = args.get(str(c.each))
    for item in items if isinstance(items, list) else ():
        failed = _check_fails(c, {**args, "item": item}, world)
        if failed is not None:
            return failed
    return None



def run_ops(tool: Tool, args: dict[str, Any], world: World) -> ToolResult:
    """Run the tool's ops atomically: all of them or, on an error, none."""
    # Each op changes the world whole or not at all (it raises before it writes), so what
    # an error must undo is the writes of the ops before it: the savepoint is taken before
    # the first write that has an op after it, and a tool that only reads takes none.
    sp: Savepoint | None = None
    last = len(tool.ops) - 1
    result: Any = None
    have_result = False
    created: Any = None
    updated: Any = None
    deleted: Any = None
    try:
        for i, op in enumerate(tool.ops):
            s = op.spec
            if sp is None and i < last and op.kind in _WRITES:
                sp = world.savepoint()
            if op.kind == "get":
                key = resolve(s["key"], args)
                row = None if key is ABSENT else world.get(s["table"], key)
                if row is None:
                    raise NotFound(f"{s['table']} {format_value(key) if key is not ABSENT else '(no key)'} not found")
                result, have_result = copy_row(row), True
            elif op.kind == "list":
                rows = world.select(s["table"], resolve_where(s.get("where"), args, world.get))
                order = s.get("order_by")
                if order:
                    desc = order.startswith("-")
                    f = order.lstrip("-")
                    rows = sorted(rows, key=lambda r: _sort_key(r.get(f)), reverse=desc)
                limit = resolve(s.get("limit"), args)
                n = as_number(limit) if limit is not None and limit is not ABSENT else None
                if n is not None:
                    rows = rows[: max(0, int(n))]
                result, have_result = [copy_row(r) for r in rows], True
            elif op.kind == "create":
                created = world.create(s["table"], _strip_absent(resolve(s.get("row", {}), args)))
            elif op.kind == "update":
                updated = apply_update(world, s, args)
            elif op.kind == "delete":
                key = resolve(s["key"], args)
                if key is ABSENT:
                    raise NotFound(f"{s['table']} (no key) not found")
                deleted = world.delete(s["table"], key)
            elif op.kind == "respond":
                result, have_result = _strip_absent(resolve(s.get("value"), args)), True
    except (NotFound, Conflict, DataError) as e:
        if sp is not None:
            world.rollback(sp)
        code = 404 if isinstance(e, NotFound) else 409 if isinstance(e, Conflict) else 500
        return ToolResult(False, error=code, message=str(e))
    if have_result:
        return ToolResult(True, value=result)
    # no read or respond: the row the tool created (the agent needs its new key), else the
    # one it updated, else the one it deleted
    written = next((r for r in (created, updated, deleted) if r is not None), None)
    return ToolResult(True, value=copy_row(written) if written is not None else None)


# the ops that write: an error after one of them undoes its writes
_WRITES = frozenset({"create", "update", "delete"})


class DataError(Exception):
    """A write the row's current data cannot take (adding to a text, appending to a
    number): the domain's data is wrong, not the agent's call, so the tool answers 500."""


# the parts of an `update` besides `set`, in the order they apply after it
_UPDATE_PARTS = ("add", "subtract", "append")


def apply_update(world: World, spec: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """One `update` op: `set` values as written, then `add` / `subtract` numbers to
    numeric fields and `append` items to list fields, computed from the row as it is.
    A part whose `$name` the call did not give leaves its field alone."""
    table = spec["table"]
    key = resolve(spec["key"], args)
    if key is ABSENT:
        raise NotFound(f"{table} (no key) not found")
    row = world.get(table, key)
    if row is None:
        raise NotFound(f"{table} {format_value(key)} not found")
    values = _strip_absent(resolve(spec.get("set", {}), args))
    for part in _UPDATE_PARTS:
        for field, expr in (spec.get(part) or {}).items():
            value = resolve(expr, args)
            if value is ABSENT:
                continue
            current = values[field] if field in values else row.get(field)
            where = f"{table} {format_value(key)} {field}"
            values[field] = _append(current, value, where) if part == "append" else \
                _arithmetic(current, value, part, where)
    return world.update(table, key, values)


def _append(current: Any, item: Any, where: str) -> list[Any]:
    if current is None:  # a list not started yet
        return [_strip_absent(item)]
    if not isinstance(current, list):
        raise DataError(f"{where} is {format_literal(current)}, not a list: cannot append to it")
    return [*current, _strip_absent(item)]


def _arithmetic(current: Any, amount: Any, part: str, where: str) -> int | float:
    """``current`` plus or minus ``amount`` in decimal, so 0.1 + 0.2 stores 0.3; an int
    when both are ints. A field not set yet counts as 0."""
    a = _decimal(0 if current is None else current)
    b = _decimal(amount)
    if a is None:
        raise DataError(f"{where} is {format_literal(current)}, not a number: cannot {part} {format_value(amount)}")
    if b is None:  # an argument is checked against its numeric param first; a bad literal is a load error
        raise DataError(f"cannot {part} {format_literal(amount)} to {where}: not a number")
    total = a + b if part == "add" else a - b
    ints = isinstance(current, (int, type(None))) and isinstance(amount, int)
    return int(total) if ints and total == total.to_integral_value() else float(total)


def _decimal(v: Any) -> Decimal | None:
    """A number as written (a float by its shortest text), for arithmetic without float noise."""
    n = as_number(v)
    if n is None or not math.isfinite(n):
        return None
    if isinstance(v, str):
        return Decimal(v.strip())
    return Decimal(v) if isinstance(v, int) else Decimal(repr(n))


def _sort_key(v: Any) -> tuple[int, Any]:
    n = as_number(v)
    if n is not None:
        return (0, n)
    if v is None:
        return (2, "")
    return (1, str(v))
