"""Policy rules, evaluated before every tool call against the world at that moment,
and `never_disclose` over every agent message."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..domain.conditions import (
    ABSENT,
    LITERAL,
    argument_name,
    as_number,
    condition_fields,
    describe_clause,
    entry_plan,
    equal,
    first_mismatch,
    format_literal,
    format_value,
    has_absent,
    resolve,
    resolve_conditions,
    resolve_where,
    row_matches,
)
from ..domain.model import Domain, Invariant
from .kept import KeptPer
from .world import FieldValues, Seed, SeedTable, World, _index_key


def _ref_value(ref: Any, args: Mapping[str, Any], world: World) -> tuple[bool, Any, Any]:
    """Resolve a bound: a constant, or {table, key, field} read from the world now.

    Returns (applies, value, the record's key or ABSENT for a constant), for
    :func:`_ref_description` to name it when the rule is broken; a record that does not
    resolve makes the rule not apply.
    """
    if isinstance(ref, dict) and "table" in ref:
        key = resolve(ref.get("key"), args)
        if key is ABSENT:
            return False, None, ABSENT
        row = world.get(ref["table"], key)
        if row is None or row.get(ref["field"]) is None:
            return False, None, ABSENT
        return True, row[ref["field"]], key
    return True, resolve(ref, args), ABSENT


def _ref_description(ref: Any, key: Any) -> str:
    """``loads L-1001 max_rate``: the record a bound was read from; empty for a constant."""
    return "" if key is ABSENT else f"{ref['table']} {format_value(key)} {ref['field']}"


_LIMIT_WORDS = {
    "lte": ("<=", "exceeds the limit"),
    "lt": ("<", "is not below the limit"),
    "gte": (">=", "is below the minimum"),
    "gt": (">", "is not above the minimum"),
}
_LIMIT_HOLDS = {"lte": operator.le, "lt": operator.lt, "gte": operator.ge, "gt": operator.gt}


def check_call(
    inv: Invariant,
    tool: str,
    args: Mapping[str, Any],
    world: World,
    succeeded: Sequence[tuple[str, Mapping[str, Any]]],
) -> str | None:
    """The violation's detail if this call breaks the rule, else None."""
    return _checker_of(inv)(tool, args, world, succeeded)


_Checker = Callable[[str, Mapping[str, Any], World, Sequence[tuple[str, Mapping[str, Any]]]], "str | None"]
def _never(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> None:
    return None


def _checker(inv: Invariant) -> _Checker:
    """The rule as a function of a call, its spec read once: what :func:`check_call` does."""
    s = inv.spec
    if inv.kind == "before":
        return _before_checker(s)
    if inv.kind not in ("require", "limit", "match", "never"):
        return _never
    about = inv.tool
    if inv.kind == "require":
        if "each" in s:
            def check(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> str | None:
                return None if tool != about else _require_each(s, tool, args, world)
            return check
        return _require_checker(s, about)
    if inv.kind == "limit":
        return _limit_checker(s, about)
    if inv.kind == "match":
        return _match_checker(s, about)

    def general(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> str | None:
        return None if tool != about else _check_never(s, tool, args, world)
    return general


def _match_checker(s: Mapping[str, Any], about: str | None) -> _Checker:
    left, right = _bound(s["left"]), _bound(s["right"])

    def check(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> str | None:
        if tool != about:
            return None
        la, lv, lkey = left(args, world)
        ra, rv, rkey = right(args, world)
        if not (la and ra) or equal(lv, rv):
            return None
        ldesc, rdesc = _ref_description(s["left"], lkey), _ref_description(s["right"], rkey)
        return f"{tool}: {ldesc} is {format_literal(lv)} but {rdesc} is {format_literal(rv)}"
    return check


def _before_checker(s: Mapping[str, Any]) -> _Checker:
    then, first = s["then"], s["first"]
    same: Sequence[str] = s.get("same") or ()
    one = same[0] if len(same) == 1 else None

    def check(tool: str, args: Mapping[str, Any], world: World,
              succeeded: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
        if tool != then:
            return None
        for name, prev in succeeded:
            if name != first:
                continue
            if one is not None:  # one field to agree on, as most rules have: no generator
                if equal(prev.get(one), args.get(one)):
                    return None
            elif all(equal(prev.get(f), args.get(f)) for f in same):
                return None
        which = ", ".join(f"{f}={format_value(args.get(f))}" for f in same)
        return f"{tool} called before {first} succeeded" + (f" for {which}" if which else "")
    return check


def _require_checker(s: Mapping[str, Any], about: str | None) -> _Checker:
    """`require` of one record: its key read as `$name` straight from the call when it is
    one, its clause resolved once when it holds only literals (the same on every call)."""
    rec = s["record"]
    table, key_arg = rec["table"], argument_name(rec.get("key"))
    where = s.get("where")
    fixed = resolve_where(where, {}) if where and all(k is LITERAL for _, k, _ in entry_plan(where)) else None
    if key_arg is None or fixed is None:
        def general(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> str | None:
            return None if tool != about else _require(s, tool, args, world, "")
        return general

    def check(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> str | None:
        if tool != about:
            return None
        key = args.get(key_arg, ABSENT)
        if key is ABSENT or isinstance(key, (dict, list)):
            return None
        row = world.get(table, key)
        if row is None or row_matches(row, fixed):
            return None
        return f"{tool}: {table} {format_value(key)} {first_mismatch(row, fixed)}"
    return check


_Bound = Callable[[Mapping[str, Any], World], "tuple[bool, Any, Any]"]


def _bound(ref: Any) -> _Bound:
    """:func:`_ref_value` of one bound, read once: a record's key taken straight from the
    call when it is exactly `$name`, a constant without a `$` taken as it is."""
    if isinstance(ref, dict) and "table" in ref:
        table, field, key_arg = ref["table"], ref["field"], argument_name(ref.get("key"))
        if key_arg is not None:
            def record(args: Mapping[str, Any], world: World) -> tuple[bool, Any, Any]:
                key = args.get(key_arg, ABSENT)
                if key is ABSENT:
                    return False, None, ABSENT
                row = world.get(table, key)
                if row is None or row.get(field) is None:
                    return False, None, ABSENT
                return True, row[field], key
            return record
    elif not _has_dollar(ref):
        constant = (True, resolve(ref, {}), ABSENT)
        return lambda args, world: constant
    return lambda args, world: _ref_value(ref, args, world)


def _has_dollar(expr: Any) -> bool:
    """Whether an expression refers to anything (`$name`, or `$$`) :func:`resolve` would
    read or rewrite; a value without one resolves to itself, whatever the call."""
    if isinstance(expr, str):
        return "$" in expr
    if isinstance(expr, dict):
        return any(_has_dollar(v) for v in expr.values())
    if isinstance(expr, list):
        return any(_has_dollar(v) for v in expr)
    return False


def _limit_checker(s: Mapping[str, Any], about: str | None) -> _Checker:
    arg = s["arg"]
    bounds = [(_bound(s[op]), _LIMIT_HOLDS[op], words) for op, (_sym, words) in _LIMIT_WORDS.items() if op in s]

    def check(tool: str, args: Mapping[str, Any], world: World, succeeded: Any) -> str | None:
        if tool != about:
            return None
        value = args.get(arg, ABSENT)
        nv = None if value is ABSENT else as_number(value)
        if nv is None:
            return None
        for read, holds, words in bounds:
            applies, bound, _ = read(args, world)
            nb = as_number(bound)
            if not applies or nb is None:
                continue
            if not holds(nv, nb):
                return f"{tool} {arg}={format_value(value)} {words} {format_value(bound)}"
        return None
    return check


def _check_never(s: Mapping[str, Any], tool: str, args: Mapping[str, Any], world: World) -> str | None:
    """A `never` rule on a call of its tool."""
    if not s.get("when"):
        return f"{tool} was called"
    # `$name` in a condition is the call's argument; one the call did not give cannot
    # hold, nor can a record's field that does not resolve
    when = resolve_conditions(s["when"], args, world.get)
    if has_absent(when):
        return None
    if row_matches(args, when):
        given = ", ".join(f"{f}={format_value(args.get(f))}" for f in condition_fields(when) if f in args)
        return f"{tool} called with {given} (never when {describe_clause(when)})"
    return None


def _require(s: Mapping[str, Any], tool: str, args: Mapping[str, Any], world: World, element: str) -> str | None:
    """The record `record.key` names must match `where`; ``element`` names the array
    element the key came from (`flights[1] `) under `each`."""
    rec = s["record"]
    key = resolve(rec.get("key"), args)
    if key is ABSENT or isinstance(key, (dict, list)):
        return None
    row = world.get(rec["table"], key)
    if row is None:
        return None
    miss = first_mismatch(row, resolve_where(s.get("where"), args, world.get))
    return f"{tool}: {element}{rec['table']} {format_value(key)} {miss}" if miss else None


def _require_each(s: Mapping[str, Any], tool: str, args: Mapping[str, Any], world: World) -> str | None:
    """`require` with `each: param`: every element of the array argument, as `$item`, must
    point at a matching record; the first that does not is the violation."""
    items = args.get(s["each"], ABSENT)
    if not isinstance(items, list):
        return None
    for i, item in enumerate(items):
        detail = _require(s, tool, {**args, "item": item}, world, f"{s['each']}[{i}]: ")
        if detail:
            return detail
    return None


# -- never_disclose ---------------------------------------------------------

# 2350, 2,350, $2,350.00, 2 350, 2350.5: a number as a person writes it. Not part of
# an identifier like L-2350 or a longer number; but the end of a range (2300-2350) is.
_NUMBER_IN_TEXT = re.compile(
    r"(?:(?<![\w.,-])|(?<=\d-))\$?\s?"
    r"((?:\d{1,3}(?:,\d{3})+|\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+|\d+)(?:\.\d+)?)"
    r"(?![\w]|[.,]\d)"
)
_WORD = re.compile(r"\w+")
# thousands separators people and models write: comma, space, no-break and thin spaces
_SEPARATORS = re.compile("[, \u00a0\u202f\u2009]")
# what comes before a `-number` that makes it the end of a range: a number, not an id (L-1001-2350)
_RANGE_START = re.compile(r"(?:^|[^\w.,$-])\$?\d[\d,]*(?:\.\d+)?\s?-$")


def numbers_in(text: str) -> dict[float, str]:
    """Every number written in a text, as value -> how it was written."""
    out: dict[float, str] = {}
    for m in _NUMBER_IN_TEXT.finditer(text):
        if m.start() and text[m.start() - 1] == "-" and not _RANGE_START.search(text, 0, m.start()):
            continue
        raw = m.group(1)
        try:
            out.setdefault(float(_SEPARATORS.sub("", raw)), m.group(0).strip())
        except ValueError:  # pragma: no cover
            continue
    return out


class _TextIndex:
    """A field's non-blank seed text values by their first word (lower case), each with
    its place in the seed's order; those without a word apart."""

    def __init__(self, st: SeedTable, field: str) -> None:
        self.table = st
        self.by_word: dict[str, list[tuple[int, str]]] = {}
        self.wordless: list[tuple[int, str]] = []
        for i, ik in enumerate(st.value_counts(field)):
            if ik[0] != "s" or not ik[1].strip():
                continue
            m = _WORD.search(ik[1])
            if m is None:
                self.wordless.append((i, ik[1]))
            else:
                self.by_word.setdefault(m.group(0).lower(), []).append((i, ik[1]))


# the texts whose numbers and words a scanner keeps, and the longest one it keeps
_KEPT_TEXTS = 2048
_KEPT_TEXT_MAX = 4096
_NOT_KEPT: Any = object()  # no finding kept for a rule and a text (None is one: nothing found)


class DisclosureScanner:
    """Finds protected values in an agent message, in the forms a person would write them."""

    def __init__(self, domain: Domain) -> None:
        self.rules = [i for i in domain.invariants if i.kind == "never_disclose"]
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._indexes: dict[tuple[str, str], _TextIndex] = {}
        self._texts: dict[str, tuple[dict[float, str], set[str]]] = {}
        # (rule's index, text) -> what the rule found, for rules that read only the seed
        self._found: dict[tuple[int, str], str | None] = {}
        self._seed: Seed | None = None
        # per rule, what its findings depend on besides the text (read once, see scan):
        # True for listed values, the (table, field) of a whole field, None for a `where`
        self._depends: list[bool | tuple[str, str] | None] = [self._reads(inv) for inv in self.rules]

    @staticmethod
    def _reads(inv: Invariant) -> bool | tuple[str, str] | None:
        vals = inv.spec["values"]
        if isinstance(vals, list):
            return True
        return None if vals.get("where") else (vals["table"], vals["field"])

    def _text_pattern(self, value: str) -> re.Pattern[str]:
        p = self._patterns.get(value)
        if p is None:
            p = re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)", re.IGNORECASE)
            self._patterns[value] = p
        return p

    def _values(self, inv: Invariant, world: World) -> Iterable[tuple[Any, str | None]]:
        """(index key, record description or None) of every protected value right now."""
        vals = inv.spec["values"]
        if isinstance(vals, list):
            for v in vals:
                yield _index_key(v), None
            return
        table, fieldname = vals["table"], vals["field"]
        where = vals.get("where")
        if where:
            for row in world.select(table, resolve_where(where, {}, world.get)):
                if fieldname in row:
                    yield _index_key(row[fieldname]), table
            return
        for ik in world.field_values(table, fieldname):
            yield ik, table

    def scan(self, text: str, world: World) -> list[tuple[Invariant, str]]:
        """(rule, detail) for every rule whose protected value the text contains."""
        found: list[tuple[Invariant, str]] = []
        if not self.rules or not text:
            return found
        if world.seed is not self._seed:  # what is kept holds for one seed
            self._seed, self._found = world.seed, {}
        keepable = len(text) <= _KEPT_TEXT_MAX
        read: tuple[dict[float, str], set[str]] | None = None  # the text read only when a rule must scan it
        # A rule's finding is kept when it depends on the text alone here: its values are
        # listed, or are a whole field that holds in every row what the seed holds (the
        # trial changed nothing in the table, or nothing of that field and no row's key):
        # then it finds, and words, what it would in any such trial.
        for i, inv in enumerate(self.rules):
            depends = self._depends[i]
            keep = keepable and (depends is True or (isinstance(depends, tuple) and world.field_as_seeded(*depends)))
            hit = self._found.get((i, text), _NOT_KEPT) if keep else _NOT_KEPT
            if hit is _NOT_KEPT:
                if read is None:
                    read = self._read(text)
                hit = self._scan_rule(inv, text, read[0], read[1], world)
                if keep:
                    if len(self._found) >= _KEPT_TEXTS:
                        self._found.clear()
                    self._found[(i, text)] = hit
            if hit:
                found.append((inv, hit))
        return found

    def _read(self, text: str) -> tuple[dict[float, str], set[str]]:
        """The numbers and the (lower-case) words of a text. Kept for short texts: an agent
        says the same lines trial after trial (the reference agent, every one of them);
        the numbers and words are only read, never changed."""
        hit = self._texts.get(text)
        if hit is None:
            hit = (numbers_in(text), {w.lower() for w in _WORD.findall(text)})
            if len(text) <= _KEPT_TEXT_MAX:
                if len(self._texts) >= _KEPT_TEXTS:
                    self._texts.clear()
                self._texts[text] = hit
        return hit

    def _scan_rule(
        self, inv: Invariant, text: str, nums: dict[float, str], words: set[str], world: World
    ) -> str | None:
        vals = inv.spec["values"]
        if isinstance(vals, dict) and not vals.get("where"):
            return self._scan_field(inv, vals["table"], vals["field"], text, nums, words, world)
        for n, written in nums.items():
            ik = ("n", n)
            if any(v == ik for v, _ in self._values(inv, world)):
                return self._detail(inv, n, written, world)
        for ik, _ in self._values(inv, world):
            if ik is None or ik[0] != "s":
                continue
            value = ik[1]
            if not value.strip():
                continue
            first = _WORD.findall(value)
            if first and first[0].lower() not in words:
                continue
            m = self._text_pattern(value).search(text)
            if m:
                return self._detail(inv, value, m.group(0), world)
        return None

    def _scan_field(
        self,
        inv: Invariant,
        table: str,
        field: str,
        text: str,
        nums: dict[float, str],
        words: set[str],
        world: World,
    ) -> str | None:
        """A whole field's values: what the text holds is looked up in them (the same
        outcome as trying every value in field_values() order, at the cost of the
        text and of this trial's changes, not of the table's size)."""
        now = world.field_view(table, field)
        for n, written in nums.items():
            if ("n", n) in now:
                return self._detail(inv, n, written, world)
        for value in self._candidates(now, table, field, words, world):
            m = self._text_pattern(value).search(text)
            if m:
                return self._detail(inv, value, m.group(0), world)
        return None

    def _candidates(self, now: FieldValues, table: str, field: str, words: set[str], world: World) -> list[str]:
        """The field's non-blank text values whose first word the text has (or that
        have none), in field_values() order: the seed's first, then those added."""
        st = world.seed.tables[table]
        idx = self._indexes.get((table, field))
        if idx is None or idx.table is not st:
            idx = self._indexes[(table, field)] = _TextIndex(st, field)
        found: list[tuple[int, int, str]] = []
        for w in words:
            for i, value in idx.by_word.get(w, ()):
                if now.in_seed_order(("s", value)):
                    found.append((0, i, value))
        for i, value in idx.wordless:
            if now.in_seed_order(("s", value)):
                found.append((0, i, value))
        for j, ik in enumerate(now.tail()):
            if ik[0] != "s" or not ik[1].strip():
                continue
            m = _WORD.search(ik[1])
            if m is None or m.group(0).lower() in words:
                found.append((1, j, ik[1]))
        found.sort(key=lambda f: (f[0], f[1]))
        return [value for _, _, value in found]

    def _detail(self, inv: Invariant, value: Any, written: str, world: World) -> str:
        vals = inv.spec["values"]
        if isinstance(vals, dict):
            keys = world.keys_with_value(vals["table"], vals["field"], value)
            rec = f"{vals['table']} {format_value(keys[0])} " if keys else f"{vals['table']} "
            return f"agent said {rec}{vals['field']} {format_value(value)} as {format_literal(written)}"
        return f"agent said the protected value {format_literal(format_value(value))} as {format_literal(written)}"


# a rule (by identity) -> its checker, made on its first check in the process: a rule is
# checked on every call of its tool, and its spec says the same each time (the domain is
# not changed once loaded); kept here, not on the rule, which the domain cache pickles
_checker_of: KeptPer[Invariant, _Checker] = KeptPer(_checker)
