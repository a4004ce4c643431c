"""Grading a finished trial: the task's expectations against the final world and
the call log. Deterministic; no judge model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..domain.conditions import (
    describe_clause,
    first_mismatch,
    format_literal,
    format_value,
    resolve_where,
    row_matches,
)
from ..domain.model import CallMatcher, Expect, StateExpectation
from ..domain.wording import clip
from .results import Check
from .world import World

# The most characters one differing field takes in a state check's detail: enough to
# see the value, never a whole document repeated.
_MISS_MAX = 300


def _state_id(e: StateExpectation) -> str:
    if e.id is not None:
        return f"state:{e.id}"
    where = format_value(e.key) if e.key is not None else "where"
    return f"state:{e.table}[{where}]#{e.index}"


def _misses(row: Mapping[str, Any], where: Mapping[str, Any]) -> list[str]:
    """Every entry of a clause the row fails, each worded as first_mismatch words one."""
    out = []
    for f, cond in where.items():
        miss = first_mismatch(row, {f: cond})
        if miss:
            out.append(clip(miss, _MISS_MAX))
    return out


def _closest(world: World, table: str, where: Mapping[str, Any]) -> str:
    """``; closest: loads L-1002: status is "open", expected "booked"``: the row that fails
    the fewest entries of the clause (the first such, in table order); empty when the
    table has no rows. Only a failed check pays for this scan."""
    key = world.seed.tables[table].key
    best: tuple[int, Mapping[str, Any], list[str]] | None = None
    for row in world.rows(table):
        misses = _misses(row, where)
        if misses and (best is None or len(misses) < best[0]):
            best = (len(misses), row, misses)
            if len(misses) == 1:
                break
    if best is None:
        return ""
    return f"; closest: {table} {format_value(best[1].get(key))}: {'; '.join(best[2])}"


def grade_state(e: StateExpectation, world: World) -> Check:
    cid = _state_id(e)
    if e.key is not None:
        row = world.get(e.table, e.key)
        if row is None:
            return Check("state", cid, False, f"{e.table} {format_value(e.key)}: no such row")
        fields = resolve_where(e.fields, {}, world.get)
        misses = [] if row_matches(row, fields) else _misses(row, fields)  # a passing check words nothing
        if misses:
            return Check("state", cid, False, f"{e.table} {format_value(e.key)}: {'; '.join(misses)}")
        return Check("state", cid, True)
    where = resolve_where(e.where, {}, world.get)
    n = len(world.select(e.table, where))
    if n == e.count or (e.count is None and n >= 1):
        return Check("state", cid, True)
    clause = f" where {describe_clause(where)}" if where else ""
    if e.count is None:
        return Check("state", cid, False,
                     f"{e.table}{clause}: 0 rows, expected at least 1{_closest(world, e.table, where)}")
    closest = _closest(world, e.table, where) if n < e.count else ""
    return Check("state", cid, False,
                 f"{e.table}{clause}: {n} row{'s' if n != 1 else ''}, expected {e.count}{closest}")


def _call_args_str(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_literal(v)}" for k, v in args.items())


def grade_called(m: CallMatcher, calls: Sequence[dict[str, Any]], cid: str, world: World) -> Check:
    ok_calls = [c for c in calls if c["tool"] == m.tool and c["ok"]]
    where = resolve_where(m.args, {}, world.get)
    if any(row_matches(c["args"], where) for c in ok_calls):
        return Check("called", cid, True)
    if not where:
        attempted = [c for c in calls if c["tool"] == m.tool]
        if attempted:
            err = attempted[-1].get("error") or {}
            return Check(
                "called",
                cid,
                False,
                f"{m.tool} was called {len(attempted)}x but never succeeded "
                f"(last error: {err.get('code')} {err.get('message')})",
            )
        return Check("called", cid, False, f"{m.tool} was never called successfully")
    want = describe_clause(where)
    if not ok_calls:
        attempted = [c for c in calls if c["tool"] == m.tool]
        tail = f" (called {len(attempted)}x, none succeeded)" if attempted else ""
        return Check("called", cid, False, f"{m.tool} was never called successfully with {want}{tail}")
    # the closest successful call: the fewest fields that differ
    def misses(c: dict[str, Any]) -> list[str]:
        out = []
        for f, cond in where.items():
            one = first_mismatch(c["args"], {f: cond})
            if one:
                out.append(one)
        return out

    best = min(ok_calls, key=lambda c: len(misses(c)))
    return Check(
        "called",
        cid,
        False,
        f"{m.tool} was never called successfully with {want}; closest: "
        f"{m.tool}({_call_args_str(best['args'])}): {'; '.join(misses(best))}",
    )


def grade_not_called(m: CallMatcher, calls: Sequence[dict[str, Any]], cid: str, world: World) -> Check:
    where = resolve_where(m.args, {}, world.get)
    hits = [c for c in calls if c["tool"] == m.tool and row_matches(c["args"], where)]
    if not hits:
        return Check("not_called", cid, True)
    how = f" with {describe_clause(where)}" if where else ""
    return Check("not_called", cid, False, f"{m.tool} was called {len(hits)}x{how}")


def _matcher_ids(prefix: str, matchers: Sequence[CallMatcher]) -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for m in matchers:
        n = seen[m.tool] = seen.get(m.tool, 0) + 1
        ids.append(f"{prefix}:{m.tool}#{n}" if n > 1 else f"{prefix}:{m.tool}")
    return ids


def grade(expect: Expect, world: World, calls: Sequence[dict[str, Any]], agent_texts: Sequence[str]) -> list[Check]:
    """Every expectation of a task, passed or failed, in the order written."""
    checks = [grade_state(e, world) for e in expect.state]
    for m, cid in zip(expect.called, _matcher_ids("called", expect.called)):
        checks.append(grade_called(m, calls, cid, world))
    for m, cid in zip(expect.not_called, _matcher_ids("not_called", expect.not_called)):
        checks.append(grade_not_called(m, calls, cid, world))
    said = "\n".join(agent_texts).lower()
    for phrase in expect.reply_includes:
        ok = phrase.lower() in said
        checks.append(Check("reply", f"reply:{phrase}", ok, "" if ok else f"agent never said {format_literal(phrase)}"))
    return checks
