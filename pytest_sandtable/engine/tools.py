"""Running one tool call: arguments validated and coerced, checks, atomic ops."""

from __future__ import annotations

import copy
import json
import math
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
from ..domain.model import MISSING, Param, Tool
from .api import ToolResult
from .world import Conflict, NotFound, World, copy_row


class ArgError(Exception):
    """A bad argument: becomes a tool error (400) the agent sees."""


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
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
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
    if t == "string" and isinstance(v, (int, float)) and not isinstance(v, bool):
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

    try:
        jsonschema.validate(v, p.schema)
    except jsonschema.ValidationError as e:
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e.absolute_path)
        raise ArgError(f"{p.name}{where}: {e.message}") from None


def _short(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


def coerce_args(tool: Tool, raw: Any) -> dict[str, Any]:
    """Validate and coerce a call's arguments against the tool's params."""
    if raw is None or raw == "":
        raw = {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ArgError(f"arguments are not valid JSON: {e.msg}") from None
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
    if isinstance(v, dict):
        return {k: _strip_absent(x) for k, x in v.items() if x is not ABSENT}
    if isinstance(v, list):
        return [_strip_absent(x) for x in v if x is not ABSENT]
    return v


def run_checks(tool: Tool, args: dict[str, Any], world: World) -> ToolResult | None:
    """The first failing check's tool error, or None when all pass."""
    for c in tool.checks:
        where = resolve_where(c.where, args)
        if c.key is not None:
            key = resolve(c.key, args)
            row = None if key is ABSENT else world.get(c.table, key)
            found = row is not None and row_matches(row, where)
        else:
            found = bool(world.select(c.table, where, limit=1))
        if found != (c.kind == "require"):
            default = f"{c.table} check failed" if c.kind == "require" else f"{c.table} conflict"
            return ToolResult(False, error=c.error, message=template(c.message, args) if c.message else default)
    return None


def run_ops(tool: Tool, args: dict[str, Any], world: World) -> ToolResult:
    """Run the tool's ops atomically: all of them or, on an error, none."""
    sp = world.savepoint()
    result: Any = None
    have_result = False
    created: Any = None
    updated: Any = None
    try:
        for op in tool.ops:
            s = op.spec
            if op.kind == "get":
                key = resolve(s["key"], args)
                row = None if key is ABSENT else world.get(s["table"], key)
                if row is None:
                    raise NotFound(f"{s['table']} {format_value(key) if key is not ABSENT else '(no key)'} not found")
                result, have_result = copy_row(row), True
            elif op.kind == "list":
                rows = world.select(s["table"], resolve_where(s.get("where"), args))
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
                key = resolve(s["key"], args)
                if key is ABSENT:
                    raise NotFound(f"{s['table']} (no key) not found")
                updated = world.update(s["table"], key, _strip_absent(resolve(s.get("set", {}), args)))
            elif op.kind == "respond":
                result, have_result = _strip_absent(resolve(s.get("value"), args)), True
    except NotFound as e:
        world.rollback(sp)
        return ToolResult(False, error=404, message=str(e))
    except Conflict as e:
        world.rollback(sp)
        return ToolResult(False, error=409, message=str(e))
    if have_result:
        return ToolResult(True, value=result)
    # no read or respond: the row the tool created (the agent needs its new key), else the one it updated
    written = created if created is not None else updated
    return ToolResult(True, value=copy_row(written) if written is not None else None)


def _sort_key(v: Any) -> tuple[int, Any]:
    n = as_number(v)
    if n is not None:
        return (0, n)
    if v is None:
        return (2, "")
    return (1, str(v))
