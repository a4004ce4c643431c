"""Grading a finished trial: the task's expectations against the final world and
the call log. Deterministic; no judge model."""

from __future__ import annotations

from collections import Counter
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
from .results import Check
from .world import World


def _state_id(e: StateExpectation) -> str:
    where = format_value(e.key) if e.key is not None else "where"
    return f"state:{e.table}[{where}]#{e.index}"


def grade_state(e: StateExpectation, world: World) -> Check:
    cid = _state_id(e)
    if e.key is not None:
        row = world.get(e.table, e.key)
        if row is None:
            return Check("state", cid, False, f"{e.table} {format_value(e.key)}: no such row")
        miss = first_mismatch(row, resolve_where(e.fields, {}))
        if miss:
            return Check("state", cid, False, f"{e.table} {format_value(e.key)}: {miss}")
        return Check("state", cid, True)
    where = resolve_where(e.where, {})
    n = len(world.select(e.table, where))
    clause = f" where {describe_clause(where)}" if where else ""
    if e.count is None:
        if n >= 1:
            return Check("state", cid, True)
        return Check("state", cid, False, f"{e.table}{clause}: 0 rows, expected at least 1")
    if n == e.count:
        return Check("state", cid, True)
    return Check("state", cid, False, f"{e.table}{clause}: {n} row{'s' if n != 1 else ''}, expected {e.count}")


def _call_args_str(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_literal(v)}" for k, v in args.items())


def grade_called(m: CallMatcher, calls: Sequence[dict[str, Any]], cid: str) -> Check:
    ok_calls = [c for c in calls if c["tool"] == m.tool and c["ok"]]
    where = resolve_where(m.args, {})
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


def grade_not_called(m: CallMatcher, calls: Sequence[dict[str, Any]], cid: str) -> Check:
    where = resolve_where(m.args, {})
    hits = [c for c in calls if c["tool"] == m.tool and row_matches(c["args"], where)]
    if not hits:
        return Check("not_called", cid, True)
    how = f" with {describe_clause(where)}" if where else ""
    return Check("not_called", cid, False, f"{m.tool} was called {len(hits)}x{how}")


def _matcher_ids(prefix: str, matchers: Sequence[CallMatcher]) -> list[str]:
    seen: Counter[str] = Counter()
    ids = []
    for m in matchers:
        seen[m.tool] += 1
        ids.append(f"{prefix}:{m.tool}" + (f"#{seen[m.tool]}" if seen[m.tool] > 1 else ""))
    return ids


def grade(expect: Expect, world: World, calls: Sequence[dict[str, Any]], agent_texts: Sequence[str]) -> list[Check]:
    """Every expectation of a task, passed or failed, in the order written."""
    checks = [grade_state(e, world) for e in expect.state]
    for m, cid in zip(expect.called, _matcher_ids("called", expect.called)):
        checks.append(grade_called(m, calls, cid))
    for m, cid in zip(expect.not_called, _matcher_ids("not_called", expect.not_called)):
        checks.append(grade_not_called(m, calls, cid))
    said = "\n".join(agent_texts).lower()
    for phrase in expect.reply_includes:
        ok = phrase.lower() in said
        checks.append(Check("reply", f"reply:{phrase}", ok, "" if ok else f"agent never said {format_literal(phrase)}"))
    return checks
