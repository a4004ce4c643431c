"""Values, `$arg` references and conditions (`where`, `when`, `args`, `fields`).

Number comparison is numeric: "2100", 2100 and 2100.0 are equal. Strings that
are not numbers compare as strings (so ISO dates order correctly).

A conditions mapping is field -> value or operator object, plus the combinators
`any_of` / `all_of` (lists of conditions) and `not` (conditions). An operator's value
may be a record's field, `{table, key, field}`, read from the world when the
conditions are resolved (:func:`resolve_where` with a ``lookup``), so evaluating
(:func:`row_matches`, :func:`test`) never needs the world.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

OPERATOR_SYMBOLS = {
    "eq": "=",
    "ne": "!=",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "in": "in",
    "not_in": "not in",
    "contains": "contains",
    "ieq": "equals (any case)",
    "matches": "matches",
    "exists": "exists",
    "length": "length",
    "each": "each",
}

# Keys of a conditions mapping that are not fields: they combine other conditions.
COMBINATORS = frozenset({"any_of", "all_of", "not"})
# The operators whose value may be a record's field, {table, key, field}.
RECORD_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "ieq"})

# A row of a table by key, or None: how conditions read a record's field (World.get).
Lookup = Callable[[str, Any], "Mapping[str, Any] | None"]


class _Absent:
    """An optional argument the call did not give: its `where` field is ignored."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

_REF = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")
_EMBEDDED = re.compile(r"\$\$|\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


def resolve(expr: Any, args: Mapping[str, Any]) -> Any:
    """Resolve `$name` references in a value expression against a call's arguments.

    A string that is exactly `$name` becomes the argument's value (typed), or
    ABSENT when the call did not give it; exactly `$name.field` (any depth) is a
    field of an object argument (`$item.flight_number` in `each`). `$name` inside a
    longer string is interpolated; `$$` is a literal `$`. Dicts and lists are
    resolved deeply.
    """
    if isinstance(expr, str):
        if "$" not in expr:
            return expr
        ref = _reference(expr)
        if ref is not None:
            name, path = ref
            value = args.get(name, ABSENT)
            if not path or value is ABSENT:
                return value
            if isinstance(value, dict):
                return _path(value, path)
            # not an object: the text it always was, `$load_id.` then the rest

        def sub(mm: re.Match[str]) -> str:
            if mm.group(0) == "$$":
                return "$"
            v = args.get(mm.group(1), ABSENT)
            rest = mm.group(2)
            if rest and isinstance(v, dict):  # `$item.flight_number`: the object's field
                v, rest = _path(v, rest), ""
            return ("" if v is ABSENT else format_value(v)) + rest

        return _EMBEDDED.sub(sub, expr)
    if isinstance(expr, dict):
        return {k: resolve(v, args) for k, v in expr.items()}
    if isinstance(expr, list):
        return [resolve(v, args) for v in expr]
    return expr


# texts of the domain with a `$` -> what _REF reads in them: the domain's expressions are
# resolved on every call, so each is read once (bounded, in case texts come from elsewhere)
_REFERENCES: dict[str, tuple[str, str] | None] = {}
_REFERENCES_MAX = 100_000


def _reference(expr: str) -> tuple[str, str] | None:
    """``(name, .path)`` of a text that is exactly ``$name.path``; None for any other."""
    try:
        return _REFERENCES[expr]
    except KeyError:
        pass
    m = _REF.match(expr)
    ref = (m.group(1), m.group(2)) if m else None
    if len(_REFERENCES) < _REFERENCES_MAX:
        _REFERENCES[expr] = ref
    return ref


def _path(value: Any, path: str) -> Any:
    """The field at ``.a.b`` of an object value; ABSENT when it has none."""
    for name in path[1:].split("."):
        if not isinstance(value, dict) or name not in value:
            return ABSENT
        value = value[name]
    return value


_BRACE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template(message: str, args: Mapping[str, Any]) -> str:
    """Fill `{name}` and `$name` in a message from the call's arguments."""
    text = resolve(message, args)
    if not isinstance(text, str):
        text = format_value(text)
    return _BRACE.sub(lambda m: format_value(args[m.group(1)]) if m.group(1) in args else m.group(0), text)


def as_number(v: Any) -> float | None:
    """The numeric value of an int, float or numeric string; None otherwise."""
    t = type(v)
    if t is float:
        return v  # type: ignore[no-any-return]
    if t is int:
        try:
            return float(v)
        except OverflowError:  # an int too big for a float is no number we compare
            return None
    if t is str:
        # cheap pre-check: most text values (ids, names) start with a letter
        if not v or v[0] not in _NUMBER_START:
            return None
        return _text_number(v)
    if isinstance(v, bool):
        return None
    elif isinstance(v, (numbers.Real, Decimal)):  # int/float subclasses, Decimal, Fraction, numpy numbers
        try:
            return float(v)
        except (OverflowError, ValueError):
            return None
    elif not isinstance(v, str):
        return None
    return _read_number(v)  # a str subclass: read each time (it is no key of the texts kept)


def _read_number(v: str) -> float | None:
    if _NUMBER.match(v):
        try:
            return float(v)
        except ValueError:  # pragma: no cover - the regex admits only floats
            return None
    return None


# texts that may be numbers -> their value or None: the same few texts (dates, amounts,
# ids of digits) are compared and sorted on every call, and the pattern is the cost
_TEXT_NUMBERS: dict[str, float | None] = {}
_TEXT_NUMBERS_MAX = 100_000
_TEXT_NUMBER_LONGEST = 200  # longer texts are read each time, not kept


def _text_number(v: str) -> float | None:
    try:
        return _TEXT_NUMBERS[v]
    except KeyError:
        pass
    n = _read_number(v)
    if len(v) <= _TEXT_NUMBER_LONGEST:
        if len(_TEXT_NUMBERS) >= _TEXT_NUMBERS_MAX:
            _TEXT_NUMBERS.clear()
        _TEXT_NUMBERS[v] = n
    return n


_NUMBER_START = frozenset("0123456789+-. \t\n\r\f\v")


def equal(a: Any, b: Any) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is str or ta is int):
        if a == b:
            return True  # the common case, settled without parsing numbers
        if ta is str and (not a or not b or a[0] not in _NUMBER_START or b[0] not in _NUMBER_START):
            return False  # two different texts, one of them no number: as_number would say so
    if isinstance(a, bool) or isinstance(b, bool):
        # JSON semantics: true is not 1 (and the hash indexes of `_world` agree)
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return na == nb
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _compare(a: Any, b: Any) -> int | None:
    """-1/0/1, numerically when both are numbers, else as strings of the same type."""
    na, nb = as_number(a), as_number(b)
    if na is not None and nb is not None:
        return (na > nb) - (na < nb)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    return None


_OPERATORS = frozenset(OPERATOR_SYMBOLS)


def is_operator_object(cond: Any) -> bool:
    return isinstance(cond, dict) and bool(cond) and _OPERATORS.issuperset(cond)


def test(actual: Any, cond: Any, present: bool = True) -> bool:
    """Does a value satisfy a condition (a literal for equality, or an operator object)?"""
    if not (isinstance(cond, dict) and cond and _OPERATORS.issuperset(cond)):  # is_operator_object, inline
        return present and equal(actual, cond)
    for op, want in cond.items():
        if op == "exists":
            if bool(want) != (present and actual is not None):
                return False
            continue
        if not present:
            if op in ("ne", "not_in"):
                continue
            return False
        if op == "eq":
            ok = equal(actual, want)
        elif op == "ne":
            ok = not equal(actual, want)
        elif op in ("gt", "gte", "lt", "lte"):
            c = _compare(actual, want)
            if c is None:
                return False
            ok = c > 0 if op == "gt" else c >= 0 if op == "gte" else c < 0 if op == "lt" else c <= 0
        elif op == "in":
            ok = isinstance(want, list) and any(equal(actual, w) for w in want)
        elif op == "not_in":
            ok = not (isinstance(want, list) and any(equal(actual, w) for w in want))
        elif op == "contains":
            if isinstance(actual, str):
                ok = str(want).lower() in actual.lower()
            elif isinstance(actual, list):
                ok = any(equal(x, want) for x in actual)
            else:
                ok = False
        elif op == "ieq":  # both texts lowercased, as `contains` compares them
            ok = isinstance(actual, str) and isinstance(want, str) and actual.lower() == want.lower()
        elif op == "matches":
            ok = isinstance(actual, (str, int, float)) and re.search(str(want), str(actual)) is not None
        elif op == "length":
            ok = isinstance(actual, (str, list, dict)) and test(len(actual), want)
        elif op == "each":
            ok = isinstance(actual, list) and all(element_matches(x, want) for x in actual)
        else:  # pragma: no cover - validated at load time
            return False
        if not ok:
            return False
    return True


def element_matches(element: Any, cond: Any) -> bool:
    """Does one element of a list satisfy `each`'s condition: a value or an operator
    object for the element itself, or conditions on its fields when it is an object."""
    if isinstance(cond, dict) and not is_operator_object(cond):
        return isinstance(element, dict) and row_matches(element, cond)
    return test(element, cond)


def is_record_ref(value: Any) -> bool:
    """``{table, key, field}``: a record's field, read from the world."""
    return type(value) is dict and "table" in value and "field" in value


def _record_value(ref: Mapping[str, Any], lookup: Lookup | None) -> Any:
    """The field of the record a resolved reference names; ABSENT when it does not
    resolve (no world, no such record, the field absent or null), like an argument
    the call did not give."""
    key = ref.get("key", ABSENT)
    if lookup is None or key is ABSENT:
        return ABSENT
    row = lookup(ref["table"], key)
    if row is None or row.get(ref["field"]) is None:
        return ABSENT
    return row[ref["field"]]


def resolve_conditions(where: Mapping[str, Any] | None, args: Mapping[str, Any],
                       lookup: Lookup | None = None) -> dict[str, Any]:
    """Resolve `$name` and record references in conditions, leaving ABSENT where a
    value is unknown (for rules that then do not apply; see :func:`has_absent`)."""
    out: dict[str, Any] = {}
    for f, cond in (where or {}).items():
        if f in COMBINATORS:
            if f == "not":
                out[f] = resolve_conditions(cond, args, lookup)
            else:
                out[f] = [resolve_conditions(c, args, lookup) for c in cond]
            continue
        r = resolve(cond, args)
        if type(r) is dict and is_operator_object(r):
            r = {op: _record_value(v, lookup) if op in RECORD_OPERATORS and is_record_ref(v) else v
                 for op, v in r.items()}
        out[f] = r
    return out


def has_absent(v: Any) -> bool:
    """Whether a resolved value refers to something unknown anywhere inside."""
    if v is ABSENT:
        return True
    if isinstance(v, dict):
        return any(has_absent(x) for x in v.values())
    if isinstance(v, list):
        return any(has_absent(x) for x in v)
    return False


def resolve_where(where: Mapping[str, Any] | None, args: Mapping[str, Any],
                  lookup: Lookup | None = None) -> dict[str, Any]:
    """Resolve a where clause; fields whose `$arg` was not given (or whose record
    reference does not resolve) are dropped, and so are combinator parts left empty."""
    if not where:
        return {}
    _, plan, literal = _clause(where)
    if literal:  # nothing to resolve: the clause as it is, in a dict of its own
        return dict(where)
    out: dict[str, Any] = {}
    for f, kind, cond in plan:
        if kind is _LITERAL:
            out[f] = cond
            continue
        if kind is _ARGUMENT:  # `$name`: the argument, unless it is an object (read below)
            r = args.get(cond, ABSENT)
            if r is ABSENT:
                continue
            if not isinstance(r, dict):
                out[f] = r
                continue
        elif f in COMBINATORS:
            part = _resolve_combinator(f, cond, args, lookup)
            if part is not None:
                out[f] = part
            continue
        else:
            r = resolve(cond, args)
            if r is ABSENT:
                continue
        if is_operator_object(r):
            r = {op: _record_value(v, lookup) if op in RECORD_OPERATORS and is_record_ref(v) else v
                 for op, v in r.items()}
            r = {op: v for op, v in r.items() if v is not ABSENT}
            if not r:
                continue
        out[f] = r
    return out


# How resolve_where takes each entry of a clause: a literal as it is (a text without `$`
# or a number, true, false or null), `$name` as the argument (no pattern to match), the
# rest (operator objects, combinators, embedded `$name`) the whole way.
_LITERAL, _ARGUMENT, _OTHER = "literal", "argument", "other"
_LITERAL_TYPES = frozenset({int, float, bool, type(None)})
_Plan = list[tuple[str, str, Any]]
# a clause of the domain (by identity) -> the clause, its plan and whether every entry is
# a literal: clauses are resolved on every call with the same dict; the domain is not
# changed once loaded (bounded all the same)
_PLANS: dict[int, tuple[Mapping[str, Any], _Plan, bool]] = {}
_PLANS_MAX = 100_000


def _plan(where: Mapping[str, Any]) -> _Plan:
    return _clause(where)[1]


def _clause(where: Mapping[str, Any]) -> tuple[Mapping[str, Any], _Plan, bool]:
    """The clause, its plan and whether all its entries are literals (kept per clause)."""
    hit = _PLANS.get(id(where))
    if hit is not None and hit[0] is where:
        return hit
    plan: _Plan = []
    for f, cond in where.items():
        t = type(cond)
        if f in COMBINATORS:
            plan.append((f, _OTHER, cond))
        elif (t is str and "$" not in cond) or t in _LITERAL_TYPES:
            plan.append((f, _LITERAL, cond))
        elif t is str and (ref := _reference(cond)) is not None and not ref[1]:
            plan.append((f, _ARGUMENT, ref[0]))
        else:
            plan.append((f, _OTHER, cond))
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    hit = _PLANS[id(where)] = (where, plan, all(kind is _LITERAL for _, kind, _ in plan))
    return hit


def entry_plan(expr: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """How a mapping of the domain resolves, entry by entry (kept per mapping, as a clause's
    plan): ``(key, LITERAL, the value)``, ``(key, ARGUMENT, the argument's name)`` for an
    entry that is exactly `$name`, ``(key, OTHER, the expression)`` for the rest, which
    :func:`resolve` takes whole. A created row or an update's `set` is resolved by it on
    every call without a call per entry."""
    return _plan(expr)


LITERAL, ARGUMENT = _LITERAL, _ARGUMENT


def argument_name(expr: Any) -> str | None:
    """The argument's name when an expression is exactly `$name` (what :func:`resolve`
    makes ``args.get(name, ABSENT)``), else None."""
    if type(expr) is not str or "$" not in expr:
        return None
    ref = _reference(expr)
    return ref[0] if ref is not None and not ref[1] else None


def _resolve_combinator(kind: str, cond: Any, args: Mapping[str, Any], lookup: Lookup | None) -> Any:
    """A resolved `not` or `any_of` / `all_of`; None when nothing of it is left (every
    field of it refers to an argument not given), so that it is ignored as a field is."""
    if kind == "not":
        inner = resolve_where(cond, args, lookup)
        return inner or None
    parts = [p for p in (resolve_where(c, args, lookup) for c in cond) if p]
    return parts or None


def _combinator_holds(row: Mapping[str, Any], kind: str, cond: Any) -> bool:
    if kind == "not":
        return not row_matches(row, cond)
    if kind == "any_of":
        return any(row_matches(row, c) for c in cond)
    return all(row_matches(row, c) for c in cond)


def row_matches(row: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """Does a row satisfy an already resolved where clause?"""
    for f, cond in where.items():
        t = type(cond)
        if t is str or t is int:  # a literal, as most entries are: equality, without test()
            if f not in row:
                return False
            v = row[f]
            if not ((type(v) is t and v == cond) or equal(v, cond)):
                return False
        elif f in COMBINATORS:
            if not _combinator_holds(row, f, cond):
                return False
        elif not test(row.get(f), cond, f in row):
            return False
    return True


def first_mismatch(row: Mapping[str, Any], where: Mapping[str, Any]) -> str | None:
    """Describe the first field of a row that fails the clause, or None."""
    for f, cond in where.items():
        if f in COMBINATORS:
            if not _combinator_holds(row, f, cond):
                return _combinator_mismatch(row, f, cond)
            continue
        if not test(row.get(f), cond, f in row):
            got = _clipped(format_literal(row[f])) if f in row else "missing"
            return f"{f} is {got}, expected {describe_condition(cond)}"
    return None


# The most characters of a found value a mismatch repeats: enough to recognise it, so
# that a long text in a row does not fill a check's detail.
_FOUND_MAX = 80


def _clipped(text: str) -> str:
    return text if len(text) <= _FOUND_MAX else f"{text[:_FOUND_MAX]}... ({len(text):,} characters)"


def _combinator_mismatch(row: Mapping[str, Any], kind: str, cond: Any) -> str:
    if kind == "not":
        return f"{describe_clause(cond)} holds, expected it not to"
    if kind == "all_of":
        for c in cond:
            miss = first_mismatch(row, c)
            if miss:
                return miss
    misses = [first_mismatch(row, c) or "" for c in cond]
    return "none of any_of holds: " + "; or ".join(misses)


def describe_condition(cond: Any) -> str:
    if not is_operator_object(cond):
        return format_literal(cond)
    parts = []
    for op, want in cond.items():
        if op == "exists":
            parts.append("present" if want else "absent")
        elif op == "length":
            parts.append(f"length {describe_condition(want)}")
        elif op == "each":
            inner = describe_clause(want) if isinstance(want, dict) and not is_operator_object(want) \
                else describe_condition(want)
            parts.append(f"each {inner}")
        elif op == "eq":
            parts.append(format_literal(want))
        else:
            parts.append(f"{OPERATOR_SYMBOLS[op]} {format_literal(want)}")
    return " and ".join(parts)


def describe_clause(where: Mapping[str, Any]) -> str:
    """`amount > 500, status="open"`: a resolved clause for messages."""
    parts = []
    for f, cond in where.items():
        if f == "not":
            parts.append(f"not ({describe_clause(cond)})")
        elif f in COMBINATORS:
            joiner = " or " if f == "any_of" else " and "
            parts.append(f"{f} (" + joiner.join(f"({describe_clause(c)})" if len(c) > 1 else describe_clause(c)
                                               for c in cond) + ")")
        elif is_operator_object(cond):
            parts.append(f"{f} {describe_condition(cond)}")
        else:
            parts.append(f"{f}={format_literal(cond)}")
    return ", ".join(parts)


def condition_fields(where: Mapping[str, Any]) -> list[str]:
    """The fields a clause tests, those inside its combinators too, each once in order."""
    out: dict[str, None] = {}
    for f, cond in where.items():
        if f == "not":
            out.update(dict.fromkeys(condition_fields(cond)))
        elif f in COMBINATORS:
            for c in cond:
                out.update(dict.fromkeys(condition_fields(c)))
        else:
            out[f] = None
    return list(out)


def json_type(value: Any, *, integer: bool = False) -> str:
    """The JSON name of a value's type (``integer`` apart from ``number`` when asked)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if integer else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def format_value(v: Any) -> str:
    """A value as a person reads it: 2350 not 2350.0, strings bare."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        import json

        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    if v is None:
        return "null"
    return str(v)


def format_literal(v: Any) -> str:
    """Like format_value, but strings quoted (for 'is "available", expected "booked"')."""
    if isinstance(v, str):
        return '"' + v + '"'
    return format_value(v)
