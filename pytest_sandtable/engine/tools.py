"""Running one tool call: arguments validated and coerced, checks, atomic ops."""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from ..domain.conditions import (
    ABSENT,
    ARGUMENT,
    LITERAL,
    argument_name,
    as_number,
    entry_plan,
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
from .kept import KeptPer
from .world import Conflict, NotFound, Savepoint, Seed, World, copy_row


class ArgError(Exception):
    """A bad argument: becomes a tool error (400) the agent sees."""


MAX_ARG_DEPTH = 64
"""Levels of nested objects and arrays one argument may have (``[[1]]`` has two)."""
MAX_ARG_VALUES = 100_000
"""Values (keys, items and scalars, nested ones included) the arguments of one call may hold."""
RECORDED_LIMIT = 20_000
"""Characters of one argument the call log keeps: of a string (a key too), or of an
object's or array's JSON. Report.safe's ``VALUE_LIMIT`` and ``TEXT_LIMIT``, with its
marker, so that what the log keeps is what results.json shows: an agent's 50 MB argument
is clipped when the call is recorded, not held by the trial until it is written. The
rules, the tool's checks and its ops or handler read the whole argument."""


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
        self.chars = 0  # characters of the strings copied (the size of what was walked, for the call log's cap)
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
        if t is str:
            self.chars += len(x)
            return x
        if t is float or t is bool or x is None:
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


def clipped_text(text: str, size: int, unit: str, limit: int = RECORDED_LIMIT) -> str:
    """The start of ``text`` and a marker saying how big it was (``… [clipped: 52,428,800
    characters]``), ``limit`` characters in all: report.safe's marker, so that clipping
    again there changes nothing."""
    marker = f"… [clipped: {size:,} {unit}]"
    return text[: max(0, limit - len(marker))] + marker


def recorded_arguments(args: Any) -> tuple[Any, bool]:
    """The call log's copy of a call's arguments: :func:`plain_arguments`' copy with each
    argument within :data:`RECORDED_LIMIT` (a string longer clipped, an object or array
    whose JSON is longer made its clipped JSON text, as report.safe clips them); and
    whether anything was clipped. Arguments that are not an object are one argument."""
    if _flat(args):  # what most calls pass: no string in them over the cap
        return dict(args), False
    walk = _Plain()
    if not isinstance(args, dict):
        return _capped(walk, walk.copy(args, "arguments", 1), 0, 0)
    walk._inside.add(id(args))
    out: dict[str, Any] = {}
    cut = False
    for name, value in args.items():
        if walk.full():
            break
        key = name if isinstance(name, str) else text_of(walk.copy(name, "arguments", 1))
        if len(key) > RECORDED_LIMIT:
            key, cut = clipped_text(key, len(key), "characters"), True
        chars, values = walk.chars, walk.values
        out[key], clipped = _capped(walk, walk.copy(value, name if isinstance(name, str) else "arguments", 1),
                                    chars, values)
        cut = cut or clipped
    return out, cut


def _capped(walk: _Plain, value: Any, chars: int, values: int) -> tuple[Any, bool]:
    """One walked argument within :data:`RECORDED_LIMIT`; whether it was clipped. Its size
    is measured (its JSON, by the C encoder) only when the walk's count of its characters
    and values says it may be over the cap."""
    if type(value) is str:
        return (value, False) if len(value) <= RECORDED_LIMIT else (
            clipped_text(value, len(value), "characters"), True)
    if not isinstance(value, (dict, list)):
        return value, False
    # a string's JSON is at most 6 characters a character (\u escapes), a scalar's ~32
    if (walk.chars - chars) * 6 + (walk.values - values) * 32 <= RECORDED_LIMIT:
        return value, False
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= RECORDED_LIMIT:
        return value, False
    return clipped_text(text, len(text), "characters of JSON"), True


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
        if t is str:
            if len(v) > RECORDED_LIMIT:  # the call log clips it (recorded_arguments)
                return False
        elif t not in _FLAT_SCALARS and (t is not int or (v.bit_length() >= _SURELY_SHORT_BITS and _too_long(v))):
            return False
        if type(k) is not str or len(k) > RECORDED_LIMIT:
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
    ("2" for an integer property becomes 2, null for an optional property is left out);
    what does not coerce is left for validation."""
    t = schema.get("type")
    if t == "object" and isinstance(v, dict):
        props = schema.get("properties") or {}
        # null for an optional property is leaving it out, as at the top (what an agent on
        # OpenAI's strict mode sends for every optional property it does not mean)
        required = schema.get("required") or ()
        return {k: _coerce_nested(x, props[k]) if k in props else x for k, x in v.items()
                if x is not None or k not in props or k in required}
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

    quick = _quick_check(p.schema)
    if quick is not None and quick(v):  # valid by a check of its own: jsonschema finds nothing either
        return
    # what jsonschema.validate(v, p.schema) raises, without checking the schema itself again
    error = jsonschema.exceptions.best_match(_validator(p.schema).iter_errors(v))
    if error is not None:
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in error.absolute_path)
        raise ArgError(f"{p.name}{where}: {error.message}")


_QUICK_TYPES: dict[str, Any] = {"string": str, "boolean": bool}
_NOTES = frozenset({"type", "description", "title"})


def _made_quick_check(schema: dict[str, Any]) -> Any:
    """For the usual structured param, a list of texts or booleans (``{"type": "array",
    "items": {"type": "string"}}``, with a description at most): a check that says a
    value is valid exactly when jsonschema would (it says nothing of the invalid, which
    jsonschema then words). None for any other schema."""
    items = schema.get("items")
    if schema.get("type") != "array" or not isinstance(items, dict) or not _NOTES.issuperset(
            set(schema) - {"items"}) or not _NOTES.issuperset(items):
        return None
    kind = items.get("type")
    want = _QUICK_TYPES.get(kind) if isinstance(kind, str) else None
    if want is None:
        return None
    return lambda v: type(v) is list and all(type(x) is want for x in v)


_quick_check: KeptPer[dict[str, Any], Any] = KeptPer(_made_quick_check)


# a param's schema -> its validator, made (and the schema checked) on its first call in
# the process: jsonschema.validate checks the schema against its meta-schema on every
# call, which cost far more than validating a call's arguments
def _made_validator(schema: dict[str, Any]) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # an invalid schema raises here, on every call, as before
    return cls(schema)


_validator: KeptPer[dict[str, Any], Any] = KeptPer(_made_validator)


def _short(v: Any) -> str:
    s = json.dumps(plain_arguments(v)[0], ensure_ascii=False)
    return s if len(s) <= 60 else s[:57] + "..."


def coerce_args(tool: Tool, raw: Any) -> dict[str, Any]:
    """Validate and coerce a call's arguments against the tool's params."""
    if type(raw) is dict:
        args = tool_plan(tool).args.coerce_plain(raw)
        if args is not None:
            return args
    return _coerce_args(tool, raw)


def _coerce_args(tool: Tool, raw: Any) -> dict[str, Any]:
    """:func:`coerce_args` the whole way: every check, and the wording of every problem."""
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


# what a param takes as it is, where coercion would give back the same value (see
# _ArgPlan.coerce_plain): a text for a string, a bool for a boolean, a finite float for a
# number, an int for a number or an integer when a float holds it exactly (coercion goes
# through the float); any other param, or value, takes the whole way
_TAKES_AS_IS = {"string": (str,), "boolean": (bool,), "number": (int, float), "integer": (int,)}
_EXACT_INT = 2**53


class _ArgPlan:
    """A tool's params as :func:`coerce_args` reads a call's arguments on its fast path:
    per param its name, the types it takes as they are, the texts of its enum (when every
    entry is one), its default, and for a list of texts or booleans (the usual array
    param, :func:`_made_quick_check`) the check that it is one."""

    __slots__ = ("names", "params")

    def __init__(self, tool: Tool) -> None:
        self.names = frozenset(tool.params)
        self.params: list[tuple[str, tuple[type, ...], frozenset[str] | None, Param, Any]] = []
        for name, p in tool.params.items():
            takes = _TAKES_AS_IS.get(p.type, ())
            texts: frozenset[str] | None = None
            if p.enum is not None:
                if p.type == "string" and all(type(e) is str for e in p.enum):
                    texts = frozenset(p.enum)
                else:
                    takes = ()  # numbers and mixed enums compare by value: the whole way
            # a list of texts (or booleans) is its items as they are: the whole way copies the
            # list, coerces nothing in it and finds it valid exactly when this check does
            quick = _made_quick_check(p.schema) if p.type == "array" and p.enum is None else None
            if quick is not None:
                takes = (list,)
            self.params.append((name, takes, texts, p, quick))

    def coerce_plain(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """The coerced arguments when every one is a param's and of a type it takes as it is
        (what nearly every call passes): what the whole way gives, without its walk, its
        coercion and its checks; None when any is not (the whole way then decides, and
        words what is wrong)."""
        if not self.names.issuperset(raw):
            return None
        args: dict[str, Any] = {}
        for name, takes, texts, p, quick in self.params:
            v = raw.get(name)
            if v is None:
                if p.default is not MISSING:
                    d = p.default
                    args[name] = d if type(d) in _FLAT_SCALARS or type(d) is int else copy.deepcopy(d)
                elif p.required:
                    return None
                continue
            t = type(v)
            if t not in takes:
                return None
            if t is int:
                if not -_EXACT_INT <= v <= _EXACT_INT:
                    return None
            elif t is float:
                if not math.isfinite(v):
                    return None
            elif texts is not None and v not in texts:
                return None
            elif quick is not None:
                if not quick(v):
                    return None
                v = list(v)
            args[name] = v
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
    return planned_checks(tool_plan(tool), args, world)


def planned_checks(plan: ToolPlan, args: dict[str, Any], world: World) -> ToolResult | None:
    """:func:`run_checks` with the tool's plan at hand."""
    for c, key_arg, fixed in plan.checks:
        if key_arg is None:
            failed = _check_fails(c, args, world) if c.each is None else _check_each(c, args, world)
        else:  # a record by `$name`, with a clause of literals or none, as most checks are
            key = args.get(key_arg, ABSENT)
            row = None if key is ABSENT or isinstance(key, (dict, list)) else world.get(c.table, key)
            found = row is not None and (fixed is None or row_matches(row, fixed))
            failed = args if found != (c.kind == "require") else None
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


class _OpPlan:
    """One op as :func:`run_ops` runs it, read from its spec once: its table, the argument
    its key is when that is exactly `$name` (read from the call without resolving), the
    entry plan of a create's row or an update's `set`, its `order_by` taken apart."""

    __slots__ = (
        "entries", "key_arg", "kind", "listed_seed", "listings", "order_desc", "order_field", "run", "scalar_row",
        "slot", "spec", "table",
    )

    def __init__(self, kind: str, spec: dict[str, Any], params: Mapping[str, Param]) -> None:
        self.kind = kind
        self.spec = spec
        self.table: str = spec.get("table", "")
        self.key_arg = argument_name(spec.get("key"))
        # what runs the op, picked once by its kind, and which of planned_ops' slots its
        # value goes to (an op of no kind known runs nothing: validated at load time)
        self.run, self.slot = _OP_KINDS.get(kind, (_op_nothing, _NO_SLOT))
        # a create's row or an update's `set`, entry by entry (None: resolved the whole way)
        written = spec.get("row" if kind == "create" else "set", _NO_ENTRIES) if kind in ("create", "update") else None
        self.entries = entry_plan(written) if type(written) is dict else None
        # a create whose row holds scalars alone, each a literal or a scalar param's
        # argument: the row _entries builds is new and shares nothing, the world keeps it
        self.scalar_row = kind == "create" and self.entries is not None and all(
            how is LITERAL or (how is ARGUMENT and x in params and _scalar_param(params[x]))
            for _, how, x in self.entries
        )
        order: str = spec.get("order_by") or ""
        self.order_field: str | None = order.lstrip("-") if order else None
        self.order_desc = order.startswith("-")
        # a `list` op's listings of seed rows by clause (see _listed), for one seed at a time
        self.listed_seed: Seed | None = None
        self.listings: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def key(self, args: Mapping[str, Any]) -> Any:
        """The op's key for this call (ABSENT when its `$name` was not given)."""
        return args.get(self.key_arg, ABSENT) if self.key_arg is not None else resolve(self.spec["key"], args)


class ToolPlan:
    """What every call of a tool reads from its definition, read once per tool and process:
    its params for :func:`coerce_args`, its checks with the argument each key is, its ops
    and which of them takes the savepoint."""

    __slots__ = ("_savepoint", "args", "checks", "ops", "single", "tool")

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self.args = _ArgPlan(tool)
        self.checks = [_check_plan(c) for c in tool.checks]
        self.ops = [_OpPlan(op.kind, op.spec, tool.params) for op in tool.ops]
        # the op of a tool that has one, as most have: nothing before it to undo, so no
        # savepoint and no slots (see planned_ops)
        self.single = self.ops[0] if len(self.ops) == 1 else None
        self._savepoint: tuple[Seed, int] | None = None

    def savepoint_at(self, seed: Seed) -> int:
        """The op before which the savepoint is taken (-1: none): the first write with an
        op after it that may fail (what an error must undo is the writes before it). Read
        once per seed, whose tables say which field is a created row's key."""
        if self._savepoint is None or self._savepoint[0] is not seed:
            fails = [_may_fail(op, seed) for op in self.ops]
            at = next((i for i, op in enumerate(self.ops) if op.kind in _WRITES and any(fails[i + 1:])), -1)
            self._savepoint = (seed, at)
        return self._savepoint[1]


def _scalar_param(p: Param) -> bool:
    """Whether a param's argument is always a scalar: its type coerces to one (a text, a
    number, a bool) and its default, if it has one, is one."""
    return p.type in _TAKES_AS_IS and (p.default is MISSING or type(p.default) in _FLAT_SCALARS
                                       or type(p.default) is int)


def _may_fail(op: _OpPlan, seed: Seed) -> bool:
    """Whether an op may raise what undoes the ops before it (NotFound, Conflict, DataError):
    a read, an update or a delete may find no row, a create that gives its row's key may
    find it taken; a `list`, a `respond` and a create whose key the table gives cannot."""
    if op.kind in ("list", "respond"):
        return False
    if op.kind == "create":
        row = op.spec.get("row", _NO_ENTRIES)
        return type(row) is not dict or seed.tables[op.table].key in row
    return True


def _check_plan(c: Check) -> tuple[Check, str | None, dict[str, Any] | None]:
    """A check, the argument its key is and its clause resolved, when the key is exactly
    `$name` and the clause holds only literals (or there is none): then the check is the
    record's lookup and a match, the same on every call. Otherwise the argument is None
    and the check runs the whole way."""
    key_arg = argument_name(c.key) if c.each is None else None
    if key_arg is None or not c.where:
        return c, key_arg, None
    if all(kind is LITERAL for _, kind, _ in entry_plan(c.where)):
        return c, key_arg, resolve_where(c.where, {})
    return c, None, None


# a tool (by identity) -> its plan: made on the tool's first call in the process, kept
# here and not on the tool (the domain cache pickles tools); bounded, for processes that
# load domains again and again
tool_plan: KeptPer[Tool, ToolPlan] = KeptPer(ToolPlan)  # the tool's plan (see ToolPlan)


def run_ops(tool: Tool, args: dict[str, Any], world: World) -> ToolResult:
    """Run the tool's ops atomically: all of them or, on an error, none."""
    # Each op changes the world whole or not at all (it raises before it writes), so what
    # an error must undo is the writes of the ops before it: the savepoint is taken before
    # the first write that has an op after it that may fail, and a tool that only reads
    # (or whose writes nothing after can undo) takes none.
    return planned_ops(tool_plan(tool), args, world)


def planned_ops(plan: ToolPlan, args: dict[str, Any], world: World) -> ToolResult:
    """:func:`run_ops` with the tool's plan at hand."""
    op = plan.single
    if op is not None:  # one op: it writes whole or not at all, nothing to undo
        try:
            value = op.run(op, args, world)
        except (NotFound, Conflict, DataError) as e:
            return _op_failed(e)
        if op.slot == _RESULT:
            return ToolResult(True, value=value)
        return ToolResult(True, value=copy_row(value) if value is not None else None)
    sp: Savepoint | None = None
    # per slot the value of the last op that gave one: a read's or respond's result, the
    # row created, updated, deleted
    values: list[Any] = [_UNSET, None, None, None, None]
    savepoint_at = plan.savepoint_at(world.seed)
    try:
        for i, op in enumerate(plan.ops):
            if i == savepoint_at:
                sp = world.savepoint()
            values[op.slot] = op.run(op, args, world)
    except (NotFound, Conflict, DataError) as e:
        if sp is not None:
            world.rollback(sp)
        return _op_failed(e)
    result, created, updated, deleted, _ = values
    if result is not _UNSET:
        return ToolResult(True, value=result)
    # no read or respond: the row the tool created (the agent needs its new key), else the
    # one it updated, else the one it deleted
    written = created if created is not None else updated if updated is not None else deleted
    return ToolResult(True, value=copy_row(written) if written is not None else None)


def _op_failed(e: NotFound | Conflict | DataError) -> ToolResult:
    """The tool error an op's raise becomes: 404 for no row, 409 for a taken key, 500 for
    data the write cannot take."""
    code = 404 if isinstance(e, NotFound) else 409 if isinstance(e, Conflict) else 500
    return ToolResult(False, error=code, message=str(e))


# what runs an op of one kind: its value for the op's slot
_OpRun = Callable[[_OpPlan, Mapping[str, Any], World], Any]

# planned_ops' slots: where an op's value goes (see _OP_KINDS); _NO_SLOT for an op that
# gives none. _UNSET: no op gave a result (a respond may give None)
_RESULT, _CREATED, _UPDATED, _DELETED, _NO_SLOT = 0, 1, 2, 3, 4
_UNSET: Any = object()


def _op_get(op: _OpPlan, args: Mapping[str, Any], world: World) -> dict[str, Any]:
    key = op.key(args)
    row = None if key is ABSENT else world.get(op.table, key)
    if row is None:
        raise NotFound(f"{op.table} {format_value(key) if key is not ABSENT else '(no key)'} not found")
    return copy_row(row)


def _op_create(op: _OpPlan, args: Mapping[str, Any], world: World) -> dict[str, Any]:
    row = _entries(op.entries, args) if op.entries is not None else _resolved_row(op.spec["row"], args)
    return world.create_own(op.table, row) if op.scalar_row else world.create(op.table, row)


def _op_delete(op: _OpPlan, args: Mapping[str, Any], world: World) -> dict[str, Any]:
    key = op.key(args)
    if key is ABSENT:
        raise NotFound(f"{op.table} (no key) not found")
    return world.delete(op.table, key)


def _op_respond(op: _OpPlan, args: Mapping[str, Any], world: World) -> Any:
    return _strip_absent(resolve(op.spec.get("value"), args))


def _op_nothing(op: _OpPlan, args: Mapping[str, Any], world: World) -> Any:
    return None


def _listed(op: _OpPlan, args: Mapping[str, Any], world: World) -> list[dict[str, Any]]:
    """A `list` op's rows (copies), ordered and cut as it says."""
    s = op.spec
    where = resolve_where(s.get("where"), args, world.get)
    limit = s.get("limit")
    n = None
    if limit is not None:
        limit = resolve(limit, args)
        n = as_number(limit) if limit is not None and limit is not ABSENT else None
    if world.untouched(op.table):  # the seed's rows: the same listing for the same clause in any trial
        key = _listing_key(where, n)
        if key is not None:
            if op.listed_seed is not world.seed:
                op.listed_seed, op.listings = world.seed, {}
            rows = op.listings.get(key)
            if rows is None:
                if len(op.listings) >= _LISTINGS_KEPT:
                    op.listings.clear()
                rows = op.listings[key] = _ordered(op, where, n, world)
            return [copy_row(r) for r in rows]
    return [copy_row(r) for r in _ordered(op, where, n, world)]


def _ordered(op: _OpPlan, where: dict[str, Any], n: float | None, world: World) -> list[dict[str, Any]]:
    """The rows a `list` op gives (the world's, not copies): those matching its resolved
    clause, ordered by its `order_by`, the first ``n`` when it has a limit."""
    rows = world.select(op.table, where)
    f = op.order_field
    if f is not None and len(rows) > 1:
        keys = [_sort_key(r.get(f)) for r in rows]
        rows = [rows[i] for i in sorted(range(len(rows)), key=keys.__getitem__, reverse=op.order_desc)]
    if n is not None:
        rows = rows[: max(0, int(n))]
    return rows


# the listings one `list` op keeps (see _listed); past this many clauses, it starts over
_LISTINGS_KEPT = 256


def _listing_key(where: dict[str, Any], n: float | None) -> tuple[Any, ...] | None:
    """What a resolved clause and limit are kept by: each field with its value and the
    value's type (1, 1.0 and True are equal keys of a dict: kept apart, no listing stands
    for a clause it was not made by); None for a clause of anything but scalars
    (operators, combinators), which is not kept."""
    key: list[Any] = [n]
    for f, v in where.items():
        t = type(v)
        if t not in _FLAT_SCALARS and t is not int:
            return None
        key += (f, t, v)
    return tuple(key)


# a created row or a `set` not written: one mapping, so that its plan is made once
_NO_ENTRIES: dict[str, Any] = {}


def _resolved_row(expr: Any, args: Mapping[str, Any]) -> Any:
    """``_strip_absent(resolve(expr, args))`` of a created row or an update's `set`: a
    mapping of the domain by its entry plan (no call per entry), anything else the whole way."""
    if type(expr) is not dict:
        return _strip_absent(resolve(expr, args))
    return _entries(entry_plan(expr), args)


def _entries(plan: list[tuple[str, str, Any]], args: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping resolved by its entry plan, its absent `$name` entries left out."""
    out: dict[str, Any] = {}
    for f, kind, x in plan:
        if kind is LITERAL:
            out[f] = x
            continue
        v = args.get(x, ABSENT) if kind is ARGUMENT else resolve(x, args)
        if v is not ABSENT:
            out[f] = _strip_absent(v) if isinstance(v, (dict, list)) else v
    return out


def _update(op: _OpPlan, args: Mapping[str, Any], world: World) -> dict[str, Any]:
    """One `update` op, as :func:`apply_update` makes it, with the op's key read by its plan."""
    key = op.key(args)
    if key is ABSENT:
        raise NotFound(f"{op.table} (no key) not found")
    return _apply_update(world, op.spec, key, args, op.entries)


# the ops that write: an error after one of them undoes its writes
_WRITES = frozenset({"create", "update", "delete"})

# an op's kind -> what runs it and the slot of planned_ops its value goes to: a read's or
# respond's value is the tool's result as it is, a write's the world's row (copied once,
# for the one the tool returns)
_OP_KINDS: dict[str, tuple[_OpRun, int]] = {
    "get": (_op_get, _RESULT),
    "list": (_listed, _RESULT),
    "create": (_op_create, _CREATED),
    "update": (_update, _UPDATED),
    "delete": (_op_delete, _DELETED),
    "respond": (_op_respond, _RESULT),
}


class DataError(Exception):
    """A write the row's current data cannot take (adding to a text, appending to a
    number): the domain's data is wrong, not the agent's call, so the tool answers 500."""


# the parts of an `update` besides `set`, in the order they apply after it
_UPDATE_PARTS = ("add", "subtract", "append")


def apply_update(world: World, spec: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """One `update` op: `set` values as written, then `add` / `subtract` numbers to
    numeric fields and `append` items to list fields, computed from the row as it is.
    A part whose `$name` the call did not give leaves its field alone."""
    key = resolve(spec["key"], args)
    if key is ABSENT:
        raise NotFound(f"{spec['table']} (no key) not found")
    return _apply_update(world, spec, key, args)


def _apply_update(
    world: World, spec: Mapping[str, Any], key: Any, args: Mapping[str, Any],
    entries: list[tuple[str, str, Any]] | None = None,
) -> dict[str, Any]:
    """:func:`apply_update` once its key is known (not ABSENT); ``entries``, the plan of
    its `set` when the caller has it."""
    table = spec["table"]
    row = world.get(table, key)
    if row is None:
        raise NotFound(f"{table} {format_value(key)} not found")
    values = _entries(entries, args) if entries is not None else _resolved_row(spec.get("set", _NO_ENTRIES), args)
    for part in _UPDATE_PARTS:
        if part not in spec:
            continue
        for field, expr in (spec[part] or {}).items():
            value = resolve(expr, args)
            if value is ABSENT:
                continue
            current = values[field] if field in values else row.get(field)
            where = f"{table} {format_value(key)} {field}"
            values[field] = _append(current, value, where) if part == "append" else \
                _arithmetic(current, value, part, where)
    return world.rewrite(table, key, row, values)


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
