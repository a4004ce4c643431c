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
from ..domain.handlers import HandlerImportError, handler_folder, resolve_assertion
from ..domain.model import Assertion, CallMatcher, Domain, Expect, StateExpectation
from ..domain.wording import clip
from .handlers import DomainHook, HandlerBug, HandlerState, WorldHandle, call_bounded
from .invoke import exception_text
from .kept import KeptPer
from .results import Check
from .world import World, copy_row

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


def grade_state(
    e: StateExpectation, world: World, cid: str | None = None, resolved: Mapping[str, Any] | None = None
) -> Check:
    """``cid`` and ``resolved`` (its fields or where clause, resolved) when the caller has
    them already (see :class:`_Plan`); else they are made here."""
    if cid is None:
        cid = _state_id(e)
    if e.key is not None:
        row = world.get(e.table, e.key)
        if row is None:
            return Check("state", cid, False, f"{e.table} {format_value(e.key)}: no such row")
        fields = resolve_where(e.fields, {}, world.get) if resolved is None else resolved
        misses = [] if row_matches(row, fields) else _misses(row, fields)  # a passing check words nothing
        if misses:
            return Check("state", cid, False, f"{e.table} {format_value(e.key)}: {'; '.join(misses)}")
        return Check("state", cid, True)
    where = resolve_where(e.where, {}, world.get) if resolved is None else resolved
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


def grade_called(
    m: CallMatcher, calls: Sequence[dict[str, Any]], cid: str, world: World, resolved: Mapping[str, Any] | None = None
) -> Check:
    tool = m.tool
    where = resolve_where(m.args, {}, world.get) if resolved is None else resolved
    for c in calls:  # (with no conditions on the arguments, any successful call will do)
        if c["tool"] == tool and c["ok"] and (not where or row_matches(c["args"], where)):
            return Check("called", cid, True)
    # failed: only now are the calls gathered to say why
    ok_calls = [c for c in calls if c["tool"] == tool and c["ok"]]
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


def grade_not_called(
    m: CallMatcher, calls: Sequence[dict[str, Any]], cid: str, world: World, resolved: Mapping[str, Any] | None = None
) -> Check:
    where = resolve_where(m.args, {}, world.get) if resolved is None else resolved
    hits = [c for c in calls if c["tool"] == m.tool and (not where or row_matches(c["args"], where))]
    if not hits:
        return Check("not_called", cid, True)
    how = f" with {describe_clause(where)}" if where else ""
    return Check("not_called", cid, False, f"{m.tool} was called {len(hits)}x{how}")


def _matcher_ids(prefix: str, matchers: Sequence[CallMatcher]) -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for m in matchers:
        name = m.tool if m.by == "agent" else f"{m.by}:{m.tool}"  # issue 22: `called:user:<tool>`
        n = seen[name] = seen.get(name, 0) + 1
        ids.append(f"{prefix}:{name}#{n}" if n > 1 else f"{prefix}:{name}")
    return ids


def _constant(where: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``where`` resolved once for every trial, when nothing in it reads the world (a
    clause resolves with no arguments, so only a record reference reads it, through the
    lookup); None when something does, so that each trial resolves it on its own world."""
    read: list[str] = []

    def probe(table: str, key: Any) -> None:
        read.append(table)

    resolved = resolve_where(where, {}, probe)
    return None if read else resolved


class _Plan:
    """What grading an ``Expect`` needs that is the same in every trial, made on its first
    grading in the process: each check's id, and each clause resolved, unless it reads
    the world (then None, resolved again on each trial's world). The domain does not
    change once loaded, as for the clauses' plans in ``domain.conditions``."""

    __slots__ = ("called", "not_called", "replies", "state")

    def __init__(self, expect: Expect) -> None:
        self.state = [(e, _state_id(e), _constant(e.fields if e.key is not None else e.where)) for e in expect.state]
        self.called = _matchers("called", expect.called)
        self.not_called = _matchers("not_called", expect.not_called)
        self.replies = [(phrase, phrase.lower(), f"reply:{phrase}") for phrase in expect.reply_includes]


def _matchers(prefix: str, matchers: Sequence[CallMatcher]) -> list[tuple[CallMatcher, str, dict[str, Any] | None]]:
    """Each matcher with its check id and its clause resolved (None: it reads the world)."""
    return [(m, cid, _constant(m.args)) for m, cid in zip(matchers, _matcher_ids(prefix, matchers))]


_plan: KeptPer[Expect, _Plan] = KeptPer(_Plan)


def grade(expect: Expect, world: World, calls: Sequence[dict[str, Any]], agent_texts: Sequence[str]) -> list[Check]:
    """Every expectation of a task, passed or failed, in the order written."""
    plan = _plan(expect)
    checks = [grade_state(e, world, cid, resolved) for e, cid, resolved in plan.state]
    by = _Callers(calls) if plan.called or plan.not_called else None  # issue 22: whose calls each matcher reads
    for m, cid, resolved in plan.called:
        checks.append(_by_user(grade_called(m, by.of(m.by) if by else calls, cid, world, resolved), m))
    for m, cid, resolved in plan.not_called:
        checks.append(_by_user(grade_not_called(m, by.of(m.by) if by else calls, cid, world, resolved), m))
    if plan.replies:
        said = "\n".join(agent_texts).lower()
        for phrase, lowered, cid in plan.replies:
            ok = lowered in said
            checks.append(Check("reply", cid, ok, "" if ok else f"agent never said {format_literal(phrase)}"))
    return checks


# --------------------------------------------------------------------------- issue 22, part B
# Whose calls a matcher reads (`by`), and `expect.assert`: functions on the final world.


class _Callers:
    """A trial's calls by who made them: a log entry without ``by`` is the agent's; ``user``
    entries the simulated user's; ``setup``, ``history`` and ``sync`` entries nobody's a
    matcher reads. Split on the first matcher that asks (most logs are the agent's alone)."""

    __slots__ = ("calls", "split")

    def __init__(self, calls: Sequence[dict[str, Any]]) -> None:
        self.calls = calls
        self.split: dict[str, list[dict[str, Any]]] | None = None

    def of(self, by: str) -> Sequence[dict[str, Any]]:
        if self.split is None:
            if by == "agent" and not any("by" in c for c in self.calls):
                return self.calls
            self.split = {"agent": [], "user": []}
            for c in self.calls:
                who = c.get("by", "agent")
                if who in self.split:
                    self.split[who].append(c)
        return self.split.get(by, ())


def _by_user(check: Check, m: CallMatcher) -> Check:
    """A failed check of a ``by: user`` matcher says it was about the user's calls."""
    if m.by != "agent" and not check.passed:
        check.detail = f"{check.detail} (the {m.by}'s calls)"
    return check


class DomainAssertionError(Exception):
    """An ``expect.assert`` function raised, wrote to the world, or returned something
    other than a bool or ``(bool, message)``: the domain's fault, which errors the trial."""


def assertion_ids(asserts: Sequence[Assertion]) -> list[str]:
    """``assert:<id>``, or ``assert:<function>`` (the name after the colon), ``#2`` for a repeat."""
    seen: dict[str, int] = {}
    ids = []
    for a in asserts:
        name = a.id if a.id is not None else a.function.rpartition(":")[2]
        n = seen[name] = seen.get(name, 0) + 1
        ids.append(f"assert:{name}#{n}" if n > 1 else f"assert:{name}")
    return ids


def read_only_handle(world: World, domain: Domain) -> tuple[WorldHandle, list[str]]:
    """A :class:`WorldHandle` over ``world`` whose writes raise; with the list of the writes
    tried (an assertion that catches the error still errors its trial). It reads both
    sides' tables: the agent's world and, with dual control, the user's."""
    handle = WorldHandle(world, domain, tables={**domain.tables, **domain.user_tables} if domain.user_tables else None)
    tried: list[str] = []

    def refuse(call: str) -> Any:
        def write(*args: Any, **kwargs: Any) -> Any:
            tried.append(call)
            raise PermissionError(f"{call}: an assertion reads the world (get, list); it may not change it")

        write.__name__ = write.__qualname__ = call.partition(".")[2]
        return write

    handle.create, handle.update, handle.delete = refuse("world.create"), refuse("world.update"), refuse("world.delete")
    return handle, tried


def grade_asserts(domain: Domain, expect: Expect, world: World, bound: HandlerState | None = None) -> list[Check]:
    """Each ``expect.assert`` function called ``fn(world, **args)`` on the final world with
    a read-only handle. Raises :class:`DomainAssertionError` for the domain's faults, one
    that runs past ``bound``'s deadline among them (issue 37 #8)."""
    if not expect.asserts:
        return []
    folder = handler_folder(domain.path)
    handle, tried = read_only_handle(world, domain)
    checks = []
    for a, cid in zip(expect.asserts, assertion_ids(expect.asserts)):
        try:
            fn = resolve_assertion(a.function, folder)
        except HandlerImportError as e:
            raise DomainAssertionError(f"assertion {a.function} could not be loaded: {e}") from None
        try:
            if bound is None:
                value = fn(handle, **copy_row(a.args))
            else:
                hook = DomainHook(f"assertion {a.function}",
                                  within="within {seconds}s of the start of grading (the trial timeout)")
                value = call_bounded(bound, hook, fn, handle, **copy_row(a.args))
        except HandlerBug as e:  # it did not return in time
            raise DomainAssertionError(str(e)) from None
        except Exception as e:
            if tried:
                raise DomainAssertionError(f"assertion {a.function} tried to change the world ({tried[0]})") from None
            raise DomainAssertionError(f"assertion {a.function} raised {exception_text(e)}") from None
        if tried:
            raise DomainAssertionError(f"assertion {a.function} tried to change the world ({tried[0]})")
        checks.append(_assertion_check(a, cid, value))
    return checks


def _assertion_check(a: Assertion, cid: str, value: Any) -> Check:
    if type(value) is bool:
        return Check("assert", cid, value, "" if value else f"{a.function} returned False")
    if (isinstance(value, tuple) and len(value) == 2 and type(value[0]) is bool
            and isinstance(value[1], str)):
        ok, message = value
        return Check("assert", cid, ok, "" if ok else (clip(message, 2000) or f"{a.function} returned False"))
    raise DomainAssertionError(
        f"assertion {a.function} returned {clip(format_literal(value), 200)}, expected True, False or (bool, message)"
    )
