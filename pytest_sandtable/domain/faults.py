"""A task's ``faults`` and ``events``: their checks (stage 2 of loading) and their build
(stage 3) (docs/spec.md, "Faults and events").

A fault makes calls of a tool fail like a flaky dependency's; an event changes the world
right after a call of a tool, as someone else would. What the schema cannot say is
checked here: tools, tables, keys and fields that must exist, keys that only fit some
kinds (``status``, ``retry_after``, ``after_commit``), and faults that could never apply
because an earlier one of the same tool already takes their calls. Whether the task's
reference reaches a fault or an event only a replay can tell: that is ``lint``'s.

The checker is :mod:`.check`'s; this module reads it through :class:`Checker`, the part
of it these checks use, so that it does not import the module that calls it.
"""

from __future__ import annotations

import http
from collections.abc import Mapping
from typing import Any, Protocol

from .errors import PathTuple
from .model import FAULT_KINDS, Event, Fault, Pos
from .wording import clip, show, suggest
from .yaml_reader import Document

DEFAULT_STATUS = {"timeout": 504, "rate_limit": 429, "server_error": 503}
DEFAULT_RETRY_AFTER = 1.0
# the kinds whose error may come after the tool's writes landed (a rate limit refuses a call before it runs)
COMMIT_KINDS = ("timeout", "server_error")
EVENT_OPS = ("update", "create", "delete")
# the ops of a tool that change the world: `after_commit` on a tool without one changes nothing
_WRITES = ("create", "update", "delete", "append", "add", "subtract")


class Checker(Protocol):
    """What these checks use of :class:`.check._Checker`."""

    tables: dict[str, dict[str, Any]]
    fields: dict[str, dict[str, None]]
    closed: set[str]
    seed_keys: dict[str, dict[str, int]]
    doc: Document
    data: dict[str, Any]

    def add(self, path: PathTuple, message: str, *, at_key: bool = False) -> None: ...
    def tool(self, name: Any, path: PathTuple) -> str | None: ...
    def table(self, name: Any, path: PathTuple) -> str | None: ...
    def field(self, table: str | None, name: Any, path: PathTuple, *, at_key: bool = False) -> None: ...
    def no_arg_refs(self, value: Any, path: PathTuple, where: str) -> None: ...


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _key_text(value: Any) -> str:
    """Keys compare as text: 100101 and "100101" are the same key (as in :mod:`.check`)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


# --------------------------------------------------------------------------- checks


def check_task(c: Checker, task: Mapping[str, Any], path: PathTuple) -> None:
    """The problems of one task's ``faults`` and ``events`` (at ``path``) that the schema
    cannot see."""
    tools = {t["name"]: t for t in (_map(x) for x in _list(c.data.get("tools"))) if isinstance(t.get("name"), str)}
    taken: dict[str, dict[int | str, int]] = {}  # tool -> call number (or "every") -> fault index
    for j, fault in enumerate(_list(task.get("faults"))):
        if isinstance(fault, dict):
            _fault(c, fault, (*path, "faults", j), tools, taken.setdefault(str(fault.get("tool")), {}), j)
    created = _given_keys(c, task.get("given"))
    for j, event in enumerate(_list(task.get("events"))):
        if isinstance(event, dict):
            _event(c, event, (*path, "events", j), tools, created)


def _fault(c: Checker, fault: dict[str, Any], path: PathTuple, tools: Mapping[str, Any],
           taken: dict[int | str, int], j: int) -> None:
    tool = c.tool(fault.get("tool"), (*path, "tool"))
    kind = fault.get("kind")
    kind = kind if kind in FAULT_KINDS else None
    if "status" in fault and kind is not None and kind != "server_error":
        c.add((*path, "status"), f"'status' is for kind server_error; this fault is kind {kind} "
                                 f"(error {DEFAULT_STATUS[kind]})", at_key=True)
    if "retry_after" in fault and kind is not None and kind != "rate_limit":
        c.add((*path, "retry_after"), f"'retry_after' is for kind rate_limit; this fault is kind {kind}", at_key=True)
    if fault.get("after_commit") is True:
        _after_commit(c, kind, "kind" in fault, tools.get(tool) if tool else None, (*path, "after_commit"))
    if tool is not None and ("kind" not in fault or kind is not None):  # a wrong kind is reported already
        _overlap(c, fault.get("calls", "every"), path, tool, taken, j)


def _after_commit(c: Checker, kind: str | None, has_kind: bool, tool: Any, path: PathTuple) -> None:
    """``after_commit`` needs a kind whose error can follow the write, and a tool that writes."""
    if kind == "rate_limit":
        c.add(path, "after_commit is for kinds timeout and server_error: a rate limit refuses the call "
                    "before it runs", at_key=True)
    elif kind is None and not has_kind:
        c.add(path, "after_commit needs a kind (timeout or server_error): latency alone is no error", at_key=True)
    elif isinstance(tool, dict) and "handler" not in tool and not _writes(tool):
        c.add(path, f"after_commit: tool {clip(str(tool.get('name')))} writes nothing (no create, update or "
                    "delete op), so the call would change nothing before its error; drop after_commit", at_key=True)


def _writes(tool: Mapping[str, Any]) -> bool:
    return any(isinstance(op, dict) and any(k in op for k in _WRITES) for op in _list(tool.get("ops")))


def _overlap(c: Checker, calls: Any, path: PathTuple, tool: str, taken: dict[int | str, int], j: int) -> None:
    """A fault whose calls an earlier fault of the same tool already takes never applies
    to them (the first listed fault of a call is the one it gets): report it."""
    if "every" in taken:
        c.add(path, f"this fault never applies: the fault at line {_line(c, path, taken['every'])} already "
                    f"takes every call of {clip(tool)}")
        return
    if calls == "every":
        taken["every"] = j
        return
    numbers = [calls] if isinstance(calls, int) and not isinstance(calls, bool) else _list(calls)
    for n in numbers:
        if isinstance(n, int) and not isinstance(n, bool):
            if n in taken:
                c.add((*path, "calls"), f"call {n} of {clip(tool)} already fails by the fault at line "
                                        f"{_line(c, path, taken[n])}; a call gets the first fault that lists it")
            else:
                taken[n] = j


def _line(c: Checker, path: PathTuple, j: int) -> str:
    """The line of item ``j`` of the list that ``path`` is an item of."""
    pos = c.doc.pos((*path[:-1], j))
    return str(pos.line) if pos else "?"


def _given_keys(c: Checker, given: Any) -> dict[str, set[str]]:
    """The keys each table gets from the task's ``given`` creates (those that name one)."""
    out: dict[str, set[str]] = {}
    for op in _list(given):
        spec = _map(_map(op).get("create"))
        table = spec.get("table")
        key_field = _map(c.tables.get(table) if isinstance(table, str) else None).get("key")
        row = _map(spec.get("row"))
        if isinstance(key_field, str) and row.get(key_field) is not None:
            out.setdefault(str(table), set()).add(_key_text(row[key_field]))
    return out


def _event(c: Checker, event: dict[str, Any], path: PathTuple, tools: Mapping[str, Any],
           created: dict[str, set[str]]) -> None:
    after = _map(event.get("after"))
    c.tool(after.get("tool"), (*path, "after", "tool"))
    ops = [op for op in EVENT_OPS if op in event]
    if len(ops) != 1 or not isinstance(event[ops[0]], dict):
        return  # the schema says which
    op, spec = ops[0], event[ops[0]]
    opath = (*path, op)
    c.no_arg_refs(spec, opath, "an event")
    table = c.table(spec.get("table"), (*opath, "table"))
    if table is None:
        return
    part = {"update": "set", "create": "row"}.get(op, "")
    for f in _map(spec.get(part)):
        if table in c.closed:
            c.field(table, f, (*opath, part, f), at_key=True)
        else:
            c.fields[table].setdefault(f, None)
    key_field = c.tables[table].get("key")
    existing = set(c.seed_keys.get(table, {})) | created.get(table, set())
    if op == "create":
        row = _map(spec.get("row"))
        if isinstance(key_field, str) and row.get(key_field) is not None:
            ks = _key_text(row[key_field])
            if ks in c.seed_keys.get(table, {}):
                c.add((*opath, "row", key_field), f"table {clip(table)} already has a row with key "
                                                  f"{show(row[key_field])}")
            created.setdefault(table, set()).add(ks)
    elif "key" in spec and not _is_arg_ref(spec["key"]) and _key_text(spec["key"]) not in existing \
            and not _creatable(tools, table):
        msg = f"no row of table {clip(table)} has the key {show(spec['key'])}, and no tool creates one"
        suggestion = suggest(_key_text(spec["key"]), sorted(existing))
        c.add((*opath, "key"), f"{msg}; {suggestion}" if suggestion else msg)


def _is_arg_ref(value: Any) -> bool:
    """A `$name` (reported as such already), not a key; `$$` starts a literal `$`."""
    return isinstance(value, str) and value.startswith("$") and not value.startswith("$$")


def _creatable(tools: Mapping[str, Any], table: str) -> bool:
    """Whether a call could create a row of ``table`` (a create op, or a handler, which may)."""
    for tool in tools.values():
        if "handler" in tool:
            return True
        for op in _list(tool.get("ops")):
            if _map(_map(op).get("create")).get("table") == table:
                return True
    return False


# --------------------------------------------------------------------------- build


def build_faults(faults: list[dict[str, Any]], pos_of: Any, path: PathTuple) -> list[Fault]:
    """The task's faults, each with its defaults filled in. ``pos_of(path)`` gives where
    a node is (``Document.pos``); ``path`` is the task's."""
    return [_build_fault(f, j + 1, pos_of((*path, "faults", j))) for j, f in enumerate(faults)]


def _build_fault(f: dict[str, Any], index: int, pos: Pos | None) -> Fault:
    kind = f.get("kind")
    calls = f.get("calls", "every")
    status = f.get("status", DEFAULT_STATUS[kind]) if kind else None
    retry_after = float(f.get("retry_after", DEFAULT_RETRY_AFTER)) if kind == "rate_limit" else None
    return Fault(
        tool=f["tool"],
        kind=kind,
        calls=tuple([calls] if isinstance(calls, int) else calls if isinstance(calls, list) else ()),
        every=calls == "every",
        fraction=float(calls["fraction"]) if isinstance(calls, dict) else None,
        after_commit=f.get("after_commit", False),
        status=status,
        retry_after=retry_after,
        latency_ms=f.get("latency_ms", 0),
        message=f.get("message") or _message(f["tool"], kind, status, retry_after),
        index=index,
        pos=pos,
    )


def _message(tool: str, kind: str | None, status: int | None, retry_after: float | None) -> str:
    """What the agent is told, as a client library would word the failure."""
    if kind == "timeout":
        return f"the request to {tool} timed out"
    if kind == "rate_limit":
        seconds = f"{retry_after:g} second{'' if retry_after == 1 else 's'}"
        return f"rate limited: too many requests to {tool}; retry after {seconds}"
    if kind == "server_error":
        try:
            phrase = http.HTTPStatus(status or 503).phrase
        except ValueError:
            phrase = "Server Error"
        return f"{tool} failed: {status} {phrase}"
    return ""


def build_events(events: list[dict[str, Any]], pos_of: Any, path: PathTuple) -> list[Event]:
    """The task's events, in the order written."""
    out = []
    for j, e in enumerate(events):
        op = next(k for k in EVENT_OPS if k in e)
        out.append(Event(tool=e["after"]["tool"], call=e["after"].get("call", 1), op=op, spec=dict(e[op]),
                         index=j + 1, pos=pos_of((*path, "events", j))))
    return out
