"""Policy rules, evaluated before every tool call against the world at that moment,
and `never_disclose` over every agent message."""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..domain.conditions import (
    ABSENT,
    as_number,
    condition_fields,
    describe_clause,
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
    s = inv.spec
    if inv.kind == "before":
        if tool != s["then"]:
            return None
        same = s.get("same") or ()
        for name, prev in succeeded:
            if name == s["first"] and all(equal(prev.get(f), args.get(f)) for f in same):
                return None
        which = ", ".join(f"{f}={format_value(args.get(f))}" for f in same)
        return f"{tool} called before {s['first']} succeeded" + (f" for {which}" if which else "")
    if inv.tool != tool:
        return None
    if inv.kind == "require":
        if "each" in s:
            return _require_each(s, tool, args, world)
        return _require(s, tool, args, world, "")
    if inv.kind == "limit":
        value = args.get(s["arg"], ABSENT)
        if value is ABSENT or as_number(value) is None:
            return None
        for op, (_sym, words) in _LIMIT_WORDS.items():
            if op not in s:
                continue
            applies, bound, _ = _ref_value(s[op], args, world)
            nb, nv = as_number(bound), as_number(value)
            if not applies or nb is None or nv is None:
                continue
            if not _LIMIT_HOLDS[op](nv, nb):
                return f"{tool} {s['arg']}={format_value(value)} {words} {format_value(bound)}"
        return None
    if inv.kind == "match":
        la, lv, lkey = _ref_value(s["left"], args, world)
        ra, rv, rkey = _ref_value(s["right"], args, world)
        if not (la and ra) or equal(lv, rv):
            return None
        ldesc, rdesc = _ref_description(s["left"], lkey), _ref_description(s["right"], rkey)
        return f"{tool}: {ldesc} is {format_literal(lv)} but {rdesc} is {format_literal(rv)}"
    if inv.kind == "never":
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
        nums, words = self._read(text)
        if world.seed is not self._seed:  # what is kept holds for one seed
            self._seed, self._found = world.seed, {}
        for i, inv in enumerate(self.rules):
            keep = self._seed_only(inv, world) and len(text) <= _KEPT_TEXT_MAX
            hit = self._found.get((i, text), _NOT_KEPT) if keep else _NOT_KEPT
            if hit is _NOT_KEPT:
                hit = self._scan_rule(inv, text, nums, words, world)
                if keep:
                    if len(self._found) >= _KEPT_TEXTS:
                        self._found.clear()
                    self._found[(i, text)] = hit
            if hit:
                found.append((inv, hit))
        return found

    @staticmethod
    def _seed_only(inv: Invariant, world: World) -> bool:
        """Whether what the rule finds in a text depends on the text alone here: its values
        are listed, or are a whole field of a table the trial has not changed (then it
        finds, and words, what it would in any such trial)."""
        vals = inv.spec["values"]
        if isinstance(vals, list):
            return True
        return not vals.get("where") and world.untouched(vals["table"])

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
