"""Stage 3 of loading: the model objects, from data that has passed stages 1 and 2.

Only a file without problems gets here, so this code indexes the data freely: every
required key is there and has its type, and every name refers to something declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import faults, handlers, judging
from .model import (
    DEFAULT_MAX_TURNS,
    MISSING,
    Accept,
    Assertion,
    CallMatcher,
    Check,
    Domain,
    Expect,
    HistoryMessage,
    Invariant,
    Op,
    Param,
    Pos,
    RefStep,
    ScriptLine,
    SetupStep,
    StateExpectation,
    Table,
    Task,
    Tool,
    UserSpec,
)
from .yaml_reader import Document

# The keys every invariant has; the rest are its kind's spec.
_INVARIANT_COMMON = ("id", "kind", "soft", "source", "description", "pending")
# The conditions of a script line's `when` that may be one name or text or a list of them
# (the model keeps a list).
_LISTED_CONDITIONS = ("reply_includes", "called", "not_called", "result_includes", "user_called", "user_not_called")


def build(doc: Document, fields: Mapping[str, Mapping[str, None]]) -> Domain:
    """The :class:`Domain` that ``doc`` describes.

    ``fields`` are each table's fields as the checker collected them: declared, or
    (for a table without a ``fields:`` list) every field its rows and writes use.
    """
    data: dict[str, Any] = doc.data
    domain = Domain(
        name=data["name"],
        description=data.get("description", ""),
        policy=data.get("policy", ""),
        tables=_tables(data.get("world", {}), fields),
        tools={t["name"]: _tool(t, doc.pos(("tools", i))) for i, t in enumerate(data.get("tools", []))},
        invariants=[_invariant(inv, doc.pos(("invariants", i))) for i, inv in enumerate(data.get("invariants", []))],
        tasks=[_task(doc, i, t) for i, t in enumerate(data.get("tasks", []))],
        version=data["version"],
        tags={tag: _tag_description(d) for tag, d in data.get("tags", {}).items()},
        shared_tags={tag for tag, d in data.get("tags", {}).items() if isinstance(d, dict) and d.get("shared")},
        judge=judging.build_criteria(data.get("judge", {}), doc.pos, ("judge",)),
        # dual control (issue 22 A): the caller's world and tools
        user_tables=_tables(data.get("user_world", {}), fields),
        user_tools={t["name"]: _tool(t, doc.pos(("user_tools", i))) for i, t in enumerate(data.get("user_tools", []))},
    )
    handlers.attach(domain, data)  # `handler` and `clock` (docs/handlers.md)
    return domain


def _tag_description(declared: str | dict[str, Any]) -> str:
    """A declared tag is its description, or ``{description, shared}``."""
    return declared if isinstance(declared, str) else str(declared.get("description", ""))


def param_schema(p: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a param, as agents see it.

    The checker validates enums, defaults and reference arguments against it too, on
    data the schema may have rejected: a sub-param that is not a mapping reads as empty.
    """
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
        schema["properties"] = {n: param_schema(sub if isinstance(sub, dict) else {}) for n, sub in props.items()}
        required = [
            n
            for n, sub in props.items()
            if isinstance(sub, dict) and sub.get("required", True) and "default" not in sub
        ]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
    if ptype == "array" and isinstance(p.get("items"), dict):
        schema["items"] = param_schema(p["items"])
    return schema


def _tables(world: dict[str, Any], fields: Mapping[str, Mapping[str, None]]) -> dict[str, Table]:
    return {
        name: Table(
            name=name,
            key=t["key"],
            rows=list(t.get("rows", [])),
            key_format=t.get("key_format"),
            fields=set(fields.get(name, {})),
        )
        for name, t in world.items()
    }


def _tool(t: dict[str, Any], pos: Pos | None) -> Tool:
    return Tool(
        name=t["name"],
        description=t.get("description", ""),
        params={name: _param(name, p) for name, p in t.get("params", {}).items()},
        checks=[_check(c) for c in t.get("checks", [])],
        ops=[_op(op) for op in t.get("ops", [])],  # none for a `handler` tool
        handoff=t.get("handoff", False),
        pos=pos,
    )


def _param(name: str, p: dict[str, Any]) -> Param:
    return Param(
        name=name,
        type=p["type"],
        description=p.get("description"),
        required=p.get("required", True),
        default=p.get("default", MISSING),
        enum=list(p["enum"]) if "enum" in p else None,
        schema=param_schema(p),
    )


def _check(c: dict[str, Any]) -> Check:
    target = c["require"] if "require" in c else c["forbid"]
    return Check(
        kind="require" if "require" in c else "forbid",
        table=target["table"],
        key=target.get("key"),
        where=target.get("where"),
        error=c.get("error", 400),
        message=c["message"],
        each=c.get("each"),
    )


def _op(op: dict[str, Any]) -> Op:
    kind, spec = next(iter(op.items()))
    if kind == "respond":
        return Op(kind=kind, spec={"value": spec})
    return Op(kind=kind, spec=dict(spec))


def _invariant(inv: dict[str, Any], pos: Pos | None) -> Invariant:
    spec = {k: v for k, v in inv.items() if k not in _INVARIANT_COMMON}
    if inv["kind"] == "before":
        spec.setdefault("same", [])
    return Invariant(
        id=inv["id"],
        kind=inv["kind"],
        spec=spec,
        soft=inv.get("soft", False),
        source_quote=inv.get("source", {}).get("quote"),
        description=inv.get("description"),
        pos=pos,
        pending=inv.get("pending", False),
    )


def _task(doc: Document, i: int, t: dict[str, Any]) -> Task:
    user = t.get("user", {})
    expect = t.get("expect", {})
    script_path = ("tasks", i, "user", "script")
    return Task(
        id=t["id"],
        description=t.get("description", ""),
        tags=list(t.get("tags", [])),
        critical=t.get("critical", False),
        max_turns=t.get("max_turns", DEFAULT_MAX_TURNS),
        given=[_op(op) for op in t.get("given", [])],
        user=UserSpec(
            persona=user.get("persona", ""),
            instructions=user.get("instructions", ""),
            opening=user.get("opening"),
            script=[_script_line(line, doc.pos((*script_path, j))) for j, line in enumerate(user.get("script", []))],
            say_unknown=user.get("say_unknown"),
        ),
        expect=Expect(
            state=_state(expect.get("state", [])),
            called=[_matcher(m) for m in expect.get("called", [])],
            not_called=[_matcher(m) for m in expect.get("not_called", [])],
            reply_includes=list(expect.get("reply_includes", [])),
            world_matches_reference=bool(expect.get("world_matches_reference", False)),
            asserts=_assertions(doc, i, expect.get("assert", [])),  # issue 22, part B
            basis=tuple(expect["basis"]) if "basis" in expect else None,
        ),
        reference=[
            RefStep(call=s.get("call"), args=dict(s.get("args", {})), say=s.get("say")) for s in t.get("reference", [])
        ],
        pos=doc.pos(("tasks", i)),
        pending=t.get("pending", False),
        expect_nothing=t.get("expect_nothing", False),
        faults=faults.build_faults(t.get("faults", []), doc.pos, ("tasks", i)),
        events=faults.build_events(t.get("events", []), doc.pos, ("tasks", i)),
        accept=tuple(
            Accept(mutant=a["mutant"], reason=a["reason"], pos=doc.pos(("tasks", i, "accept", j)))
            for j, a in enumerate(t.get("accept", []))
        ),
        judge=judging.build_criteria(t.get("judge", {}), doc.pos, ("tasks", i, "judge")),
        **_mid_way(doc, i, t),  # issue 22, part B
        user_given=[_op(op) for op in t.get("user_given", [])],  # dual control (issue 22 A)
    )


def _script_line(line: str | dict[str, Any], pos: Pos | None) -> ScriptLine:
    """A plain string, or ``{say, when?, end?}`` with each listed condition as a list."""
    if isinstance(line, str):
        return ScriptLine(say=line, pos=pos)
    when = line.get("when")
    if when is not None:
        when = {k: [v] if k in _LISTED_CONDITIONS and isinstance(v, str) else v for k, v in when.items()}
    if "call" in line:  # dual control (issue 22 A): a call line
        return ScriptLine(say="", when=when, end=line.get("end", False), pos=pos, call=line["call"],
                          args=dict(line.get("args", {})))
    return ScriptLine(say=line["say"], when=when, end=line.get("end", False), pos=pos)


def _state(entries: list[dict[str, Any]]) -> list[StateExpectation]:
    """A task's expected state; ``index`` numbers the entries of each table from 1."""
    state = []
    per_table: dict[str, int] = {}
    for entry in entries:
        per_table[entry["table"]] = per_table.get(entry["table"], 0) + 1
        state.append(
            StateExpectation(
                table=entry["table"],
                key=entry.get("key"),
                fields=entry.get("fields"),
                where=entry.get("where"),
                count=entry.get("count"),
                index=per_table[entry["table"]],
                id=entry.get("id"),
            )
        )
    return state


def _matcher(m: str | dict[str, Any]) -> CallMatcher:
    if isinstance(m, str):
        return CallMatcher(tool=m)
    return CallMatcher(tool=m["tool"], args=m.get("args"), by=m.get("by", "agent"))


# --------------------------------------------------------------------------- issue 22, part B


def _assertions(doc: Document, i: int, entries: list[Any]) -> list[Assertion]:
    out = []
    for j, entry in enumerate(entries):
        pos = doc.pos(("tasks", i, "expect", "assert", j))
        if isinstance(entry, str):
            out.append(Assertion(function=entry, pos=pos))
        else:
            out.append(Assertion(function=entry["function"], args=dict(entry.get("args", {})), id=entry.get("id"),
                                 pos=pos))
    return out


def _mid_way(doc: Document, i: int, t: dict[str, Any]) -> dict[str, Any]:
    """A task's `setup`, `history`, `solo` and `ticket`, as Task's keyword arguments."""
    setup = [
        SetupStep(call=s.get("call"), args=dict(s.get("args", {})), by=s.get("by", "agent"), handler=s.get("handler"),
                  pos=doc.pos(("tasks", i, "setup", j)))
        for j, s in enumerate(t.get("setup", []))
    ]
    history = [
        HistoryMessage(
            role=m["role"],
            say=m["say"],
            calls=tuple(RefStep(call=c["call"], args=dict(c.get("args", {}))) for c in m.get("calls", [])),
            pos=doc.pos(("tasks", i, "history", j)),
        )
        for j, m in enumerate(t.get("history", []))
    ]
    return {"setup": setup, "history": history, "solo": bool(t.get("solo", False)), "ticket": t.get("ticket")}
