"""Running a ``handler:`` tool: a Python function in place of the declarative ops.

The function is called as ``function(args, world, ctx)`` (docs/handlers.md):

- ``args``: the call's validated, coerced arguments (a copy: the call log keeps its own);
- ``world``: a :class:`WorldHandle`, whose writes go through the trial's
  :class:`~.world.World` like the ops' writes do, so the diff, the grading and the rules
  see them; all the writes of one call stay, or (when the handler raises) none;
- ``ctx``: a :class:`HandlerContext`: the trial's seed, a seeded ``random.Random``, the
  simulated clock (never wall time: results must not depend on when a trial ran).

It returns the tool's result (a JSON value) or raises :class:`ToolError` (a tool error
the agent sees). Anything else it raises, a BaseException too (``SystemExit``,
``KeyboardInterrupt``, ``GeneratorExit``, its own subclass), is a bug of the domain:
:class:`HandlerBug`, which errors the trial with the handler's traceback. The one
exception is a real Ctrl-C that arrives during the call (:class:`HandlerInterrupted`),
which stops the run.
"""

from __future__ import annotations

import copy
import dis
import importlib
import marshal
import math
import operator
import os
import random
import signal
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

import orjson

from ..domain.conditions import format_value
from ..domain.handlers import HandlerImportError, clock_now, handler_folder, resolve_handler
from ..domain.model import Domain, Table, Task, Tool
from ..domain.wording import clip, quoted
from .api import ToolResult
from .invoke import Deadline, EngineStop, agent_traceback
from .kept import KeptPer
from .tools import planned_checks, planned_ops, tool_plan
from .world import Conflict, NotFound, World, copy_row, norm_key

__all__ = [
    "DomainHook", "HandlerBug", "HandlerContext", "HandlerInterrupted", "HandlerState", "ToolError", "WorldHandle",
    "call_bounded", "disarm_left", "run_handler", "run_tool",
]


class ToolError(Exception):
    """Raised by a handler: the call fails with this status and message, as a failing
    ``checks`` entry would (the agent sees both); the call's writes are undone."""

    def __init__(self, status: int, message: str) -> None:
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise ValueError(f"ToolError status must be an integer from 400 to 599, got {status!r}")
        super().__init__(status, message)
        self.status = status
        self.message = str(message)

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


class HandlerBug(Exception):
    """A handler raised something other than :class:`ToolError`, returned what is not a
    JSON value, or could not be imported: the domain's bug, which errors the trial. Its
    text is the trial's reason (with the handler's traceback, when it raised)."""


class HandlerInterrupted(EngineStop, KeyboardInterrupt):
    """Ctrl-C arrived while a handler ran (see :func:`_ctrl_c`): an engine stop, so that it
    goes up through the agent's code as itself, and a KeyboardInterrupt, so that the run
    stops as on any other Ctrl-C (the trial is not recorded)."""


def _ctrl_c(e: KeyboardInterrupt) -> bool:
    """Whether a KeyboardInterrupt out of a handler may be a real Ctrl-C rather than the
    handler's own: only the main thread gets signals (a handler called in an agent's
    thread or a pool's never sees one), and a signal interrupts the running code between
    instructions or inside a call (``time.sleep``), never at a ``raise`` statement, which
    is where ``raise KeyboardInterrupt`` in the handler's code (or code it calls) leaves
    the innermost frame of the traceback."""
    if threading.current_thread() is not threading.main_thread():
        return False
    tb = e.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    for ins in dis.get_instructions(tb.tb_frame.f_code):
        if ins.offset == tb.tb_lasti:
            return ins.opname != "RAISE_VARARGS"
    return True


_Flag = list[bool]  # one flag, shared by reference (the trial is over)


class _Shared:
    """What a trial's handler calls share and a handler's ``ctx`` reads: the seed, one
    ``random.Random`` and the simulated clock (made on first use). Plain values only: a
    handler's ``ctx`` leads to no engine object (see :class:`WorldHandle`)."""

    __slots__ = ("_clock", "_now", "_random", "seed", "seeded")

    def __init__(self, seed: int, domain_clock: Any, task_clock: Any) -> None:
        self.seed = seed
        self._clock = (domain_clock, task_clock)
        self._random: random.Random | None = None
        self._now: datetime | None = None
        # a handler read the seed or the generator: what the calls did may depend on the seed
        self.seeded = False

    @property
    def random(self) -> random.Random:
        self.seeded = True
        if self._random is None:
            self._random = random.Random(self.seed)
        return self._random

    @property
    def now(self) -> datetime:
        if self._now is None:
            self._now = clock_now(*self._clock)
        return self._now

    def advance(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise ValueError(f"ctx.advance(seconds) takes a number of seconds, got {seconds!r}")
        if seconds < 0:
            raise ValueError(f"ctx.advance(seconds) only moves the clock forward, got {seconds!r}")
        self._now = self.now + timedelta(seconds=seconds)


class HandlerState:
    """What a trial's handlers share across its calls: the seed, one ``random.Random``
    and the simulated clock. Built with every trial, so it costs nothing until a handler
    runs (the clock and the generator are made on first use). The engine's: a handler is
    given neither this nor the world (see :class:`WorldHandle`)."""

    def __init__(self, domain: Domain, task: Task, seed: int) -> None:
        self.domain = domain
        self.task = task
        self.seed = seed
        self.shared = _Shared(seed, domain.clock_now, task.clock_now)
        self._functions: dict[str, Any] = {}  # tool -> its function, resolved on its first call
        self._handle: tuple[World, WorldHandle] | None = None  # the world's handle, made on the first call
        # the trial's deadline (set by the trial): a handler still running then errors the trial
        self.deadline: Deadline | None = None
        # the domain's code under way (a tool's handler, or a DomainHook: the sync hook, a setup
        # step, an assertion) and the thread it runs in; kept on the trial's state (`root`)
        self.running: tuple[Tool | DomainHook, int] | None = None
        # set when the trial is over: a write by an abandoned handler (hung past the timeout) is refused
        self.over = [False]
        self._alarm: tuple[Any, ...] | None = None  # the SIGALRM handler and timer replaced, while armed
        # the trial's own state, whose alarm, deadline and `running` every state of the trial
        # uses (a user tool's state is made from it: engine/dual.py), so that closing it
        # disarms whatever alarm the trial set (issue 37 #7)
        self.root: HandlerState = self

    @property
    def random(self) -> random.Random:
        return self.shared.random

    @property
    def now(self) -> datetime:
        return self.shared.now

    def function(self, tool: Tool) -> Any:
        """The tool's handler function, looked up once per trial (resolved once per process)."""
        fn = self._functions.get(tool.name)
        if fn is None:
            fn = self._functions[tool.name] = _function(tool, self.domain)
        return fn

    def handle(self, world: World) -> WorldHandle:
        """The handlers' handle over ``world``, made once per trial (and world)."""
        made = self._handle
        if made is None or made[0] is not world:
            made = self._handle = (world, WorldHandle(world, self.domain, self.over))
        return made[1]

    def late(self, what: Tool | DomainHook) -> str:
        """Why the trial errored when ``what`` (a tool's handler, a hook) outlived the trial
        timeout, as the code that called it words it."""
        seconds = self.deadline.seconds if self.deadline is not None else None
        if isinstance(what, DomainHook):
            return f"{what.what} did not return {what.within.format(seconds=format_value(seconds))}"
        return f"its handler {what.handler} did not return before the trial timeout of {format_value(seconds)}s"

    def late_error(self, what: Tool | DomainHook) -> str:
        """The trial's error when ``what`` outlived the trial timeout in a thread the trial
        stopped waiting for (a sync agent's or user's): as the call on the main thread words it."""
        if isinstance(what, DomainHook):
            return self.late(what)
        side = "the user tool " if self.domain.user_tools.get(what.name) is what else ""
        return f"the domain failed running {side}{what.name}: {self.late(what)}"

    def close(self) -> None:
        """The trial is over: later writes of its handlers are refused, its alarm disarmed
        (whichever of the trial's states set it: the alarm is the root's)."""
        self.over[0] = True
        root = self.root
        if root._alarm is not None:
            _disarm(root)

    def advance(self, seconds: float) -> None:
        self.shared.advance(seconds)


class HandlerContext:
    """The ``ctx`` of one handler call. ``seed`` is the trial's; ``random`` is a
    ``random.Random(seed)`` shared by the trial's handler calls in order (so the same
    seed and the same calls give the same values); ``now`` is the simulated clock (a
    timezone-aware ``datetime``), which :meth:`advance` moves for the rest of the trial;
    ``tool`` and ``call_index`` (0-based, as in the call log) name this call."""

    __slots__ = ("_shared", "call_index", "tool")

    def __init__(self, state: HandlerState | _Shared, tool: str, call_index: int) -> None:
        self._shared = state.shared if isinstance(state, HandlerState) else state
        self.tool = tool
        self.call_index = call_index

    @property
    def seed(self) -> int:
        self._shared.seeded = True
        return self._shared.seed

    @property
    def random(self) -> random.Random:
        return self._shared.random

    @property
    def now(self) -> datetime:
        return self._shared.now

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward by ``seconds`` (for the rest of the trial)."""
        self._shared.advance(seconds)

    def __repr__(self) -> str:
        return f"HandlerContext(tool={self.tool!r}, call_index={self.call_index}, now={self.now.isoformat()})"


class WorldHandle:
    """A handler's view of the trial's world. Rows it returns are copies (changing them
    changes nothing), made as they are read (:class:`_Row`, :class:`_Rows`); its writes
    are the world's recorded writes, as the ops' are. A missing key on ``update`` or
    ``delete`` raises ``ToolError(404, ...)``, creating a key that exists
    ``ToolError(409, ...)``, as the ops' would.

    It holds no engine object a handler could reach: its methods are closures over the
    world, so no attribute leads to the world's rows, whose seed rows every trial shares
    (a handler that changed one through ``world._world`` changed every later trial's
    start: issue 21 #13)."""

    __slots__ = ("create", "delete", "get", "list", "update")

    get: Callable[[str, Any], dict[str, Any] | None]
    list: Callable[..., list[dict[str, Any]]]
    create: Callable[[str, Mapping[str, Any]], dict[str, Any]]
    update: Callable[[str, Any, Mapping[str, Any]], dict[str, Any]]
    delete: Callable[[str, Any], dict[str, Any]]

    def __init__(self, world: World, domain: Domain, _over: _Flag | None = None,
                 tables: Mapping[str, Table] | None = None) -> None:
        # `tables`: the tables it sees, when not the agent's (dual control: the user tools'
        # handle sees the user world, the sync hook's both)
        tables = domain.tables if tables is None else tables
        over = _over if _over is not None else [False]

        def open_for(call: str) -> None:
            if over[0]:  # a handler abandoned at the trial timeout that went on: its trial is graded
                raise RuntimeError(f"{call}: the trial is over (its timeout passed); nothing is written")

        def table_of(table: Any) -> str:
            if not isinstance(table, str) or table not in tables:
                raise ValueError(f"unknown table {table!r}; the tables are {quoted(tables)}")
            return table

        def get(table: str, key: Any) -> dict[str, Any] | None:
            """The row with this key (a copy), or None."""
            row = world.get(table_of(table), key)
            return _lazy(row) if row is not None else None

        def list_(
            table: str, where: Mapping[str, Any] | None = None, limit: int | None = None
        ) -> list[dict[str, Any]]:
            """The rows matching ``where`` (field -> value, or an operator object such as
            ``{"gte": 3}``, as in the spec), in table order, at most ``limit`` of them."""
            if where is not None and not isinstance(where, Mapping):
                raise ValueError(f"world.list(where=...) takes a mapping of field -> condition, got {where!r}")
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise ValueError(f"world.list(limit=...) takes a whole number of rows (0 or more), got {limit!r}")
            name = table_of(table)
            fields, paths = _where_paths(name, where or {}, tables[name].fields)
            rows = world.select(name, fields, limit=limit, paths=paths)
            return _rows_for(rows)

        def create(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
            """Create a row (its key given by the table's ``key_format`` when absent); the row created."""
            name = table_of(table)
            open_for("world.create")
            if not isinstance(row, Mapping):
                raise ValueError(f"world.create({name!r}, row) takes a mapping, got {row!r}")
            row = _written(row, f"world.create({name!r}, row)", "row")  # a copy of its own: kept as it is
            try:
                return _lazy(world.create_own(name, row))
            except Conflict as e:
                raise ToolError(409, str(e)) from None

        def update(table: str, key: Any, values: Mapping[str, Any]) -> dict[str, Any]:
            """Replace whole fields of the row with this key; the row as updated."""
            name = table_of(table)
            open_for("world.update")
            if not isinstance(values, Mapping):
                raise ValueError(f"world.update({name!r}, key, values) takes a mapping, got {values!r}")
            values = _written(values, f"world.update({name!r}, key, values)", "values")
            field = tables[name].key
            if field in values and _key_text(values[field]) != _key_text(key):
                raise ValueError(
                    f"world.update cannot change a row's key ({name}.{field}); delete it and create another")
            old = world.get(name, key)
            if old is None:
                raise ToolError(404, f"{name} {key} not found")
            return _lazy(world.rewrite(name, key, old, values, own=True))  # `values`: a copy of its own

        def delete(table: str, key: Any) -> dict[str, Any]:
            """Delete the row with this key; the row as it was."""
            name = table_of(table)
            open_for("world.delete")
            try:
                return world.delete(name, key)  # a copy already
            except NotFound as e:
                raise ToolError(404, str(e)) from None

        list_.__name__ = list_.__qualname__ = "list"
        self.get, self.list, self.create, self.update, self.delete = get, list_, create, update, delete

    def __repr__(self) -> str:
        return "WorldHandle(get, list, create, update, delete)"


def _where_paths(table: str, where: Mapping[str, Any], fields: set[str]
                 ) -> tuple[dict[str, Any], list[tuple[tuple[str, ...], Any]] | None]:
    """A handler's ``where``, its dotted keys (``"address.zip"``, not a field of the
    table) taken apart as paths into nested mappings."""
    if not any(type(f) is str and "." in f and f not in fields for f in where):
        return dict(where), None
    plain: dict[str, Any] = {}
    paths: list[tuple[tuple[str, ...], Any]] = []
    for f, cond in where.items():
        if type(f) is str and "." in f and f not in fields:
            path = tuple(f.split("."))
            if "" in path:
                raise ValueError(f"world.list({table!r}, where=...): {f!r} is no path; a path names nested "
                                 "fields with dots between them, such as 'address.zip'")
            paths.append((path, cond))
        else:
            plain[f] = cond
    return plain, paths


def _written(values: Mapping[str, Any], call: str, arg: str) -> dict[str, Any]:
    """What a handler writes, copied: JSON values only, since the diff, results.json and
    the grading read them (a ``datetime`` is written as ``ctx.now.isoformat()``)."""
    try:
        copied: dict[str, Any] = _json_copy_fast(values)
    except _NotJson as e:
        raise ValueError(f"{call}: {e.what} at {arg}{''.join(reversed(e.path))}, expected a JSON value") from None
    return copied


def _row_copy(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row for a handler: a fresh copy. A row of the world holds JSON values (what the
    seed and every write put there), which marshal copies in C, 2-4 times faster than the
    JSON walk on nested rows (a handler that lists a table copies every row it gets);
    format 2 shares no sub-object between two places, as the walk does not. What marshal
    cannot take (a row too deep, a value of another type) goes by the walk, and a seed row
    holding what JSON cannot (YAML's .nan) is copied as it is."""
    try:
        copied: dict[str, Any] = marshal.loads(marshal.dumps(cast(dict[str, Any], row), 2))
        return copied
    except (ValueError, TypeError, RecursionError):
        pass
    try:
        copied = _json_copy(row)
    except _NotJson:
        return copy_row(row)
    return copied


# -- the rows a handler gets ------------------------------------------------------------
#
# A handler may change what it reads (τ-bench's tools change an order's items in place,
# then write them back), so what it gets must share nothing mutable with the world: the
# world's rows are shared with every later trial (a seed row) and with the trial's diff.
# Copying a whole row on every read made a handler that scans a table (a user looked up
# by name among 500 nested profiles) spend most of its trial in copies of fields it never
# read. A row is handed out as a _Row: a shallow copy (its scalars are the row's, as
# they are immutable) whose nested values are copied on their first read, so a scan costs
# the fields it reads.

_SCALARS = frozenset({str, int, float, bool, type(None)})
_dict_new = dict.__new__
_dict_get = dict.__getitem__
_dict_set = dict.__setitem__
_dict_update = dict.update
_dict_items = dict.items
_dict_keys = dict.keys
_dict_values = dict.values


class _Row(dict[str, Any]):
    """A row (or a mapping inside one) given to a handler: a shallow copy of the world's
    row, whose nested values (mappings and lists) are the world's own objects until first
    read, when the read puts a private copy in their place. Every way of reading a value
    goes through that copy: indexing, ``get``, ``items``, ``values``, ``pop``,
    ``setdefault``, ``copy``, and ``dict(row)`` or ``{**row}`` (which read it key by key,
    since the class has its own ``__iter__``). A value is the world's while it is the very
    object the world's row holds under its key (``_src``): whatever a handler puts in a
    row is its own, and the world never changes the objects a _Row shares with it (a
    write replaces a row, never changes it), so a value copied late is the value the row
    held when it was handed out."""

    __slots__ = ("_src",)

    _src: Mapping[str, Any]  # the world's row this one copies ({} once every value is copied)

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # type(row)(...) in a handler: a plain mapping
        dict.__init__(self, *args, **kwargs)
        self._src = _NOTHING

    def __getitem__(self, key: Any) -> Any:
        value = _dict_get(self, key)
        if type(value) in _SCALARS or self._src.get(key) is not value:
            return value
        value = dict(value) if type(value) is dict and _SCALARS.issuperset(map(type, value.values())) \
            else _private(value)
        _dict_set(self, key, value)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __iter__(self) -> Any:  # its own: dict(row) and {**row} then read through __getitem__
        return dict.__iter__(self)

    def _own(self) -> None:
        """Every nested value copied: what reads values in bulk, in C, sees only copies."""
        src = self._src
        if src:
            for key, value in list(_dict_items(self)):
                if type(value) not in _SCALARS and src.get(key) is value:
                    _dict_set(self, key, _private(value))
            self._src = _NOTHING

    def items(self) -> Any:
        self._own()
        return _dict_items(self)

    def values(self) -> Any:
        self._own()
        return dict.values(self)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            value = self[key]
            dict.__delitem__(self, key)
            return value
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, Any]:
        self._own()
        return dict.popitem(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else dict.setdefault(self, key, default)

    def copy(self) -> dict[str, Any]:
        """A shallow copy, as ``dict.copy`` makes one (sharing this row's copies)."""
        self._own()
        return dict.copy(self)

    __copy__ = copy

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        return copy.deepcopy(dict(_dict_items(self)), memo)  # the world's values copied too

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickled as a plain dict
        return (dict, (self.copy(),))

    def __or__(self, other: Any) -> Any:
        if not isinstance(other, dict):
            return NotImplemented
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: Any) -> Any:
        if not isinstance(other, dict):
            return NotImplemented
        out = dict(other)
        out.update(self)
        return out

    @classmethod
    def fromkeys(cls, keys: Any, value: Any = None) -> dict[Any, Any]:  # type: ignore[override]
        return dict.fromkeys(keys, value)


_NOTHING: Mapping[str, Any] = {}
_list_get = list.__getitem__
_list_set = list.__setitem__
_list_iter = list.__iter__


class _Rows(list[dict[str, Any]]):
    """The rows of ``world.list`` given to a handler: the world's rows, each made a
    handler's row (:func:`_lazy`) when first read, so a handler that looks through a table
    for one row and stops there pays for the rows it read. Reading one row (indexing, or
    iterating, which ``list(rows)``, ``sorted(rows)``, ``for``, unpacking and ``in``'s
    callers do in C through ``__iter__``) makes it; everything else (a slice, a change, a
    copy) first makes them all. ``_raw`` holds the ids of the rows not made yet: the
    world's rows, alive while the world holds them or this list does."""

    __slots__ = ("_raw",)

    _raw: set[int]

    def __init__(self, *args: Any) -> None:  # type(rows)(...) in a handler: a plain list
        list.__init__(self, *args)
        self._raw = set()

    def __getitem__(self, index: Any) -> Any:
        if self._raw and type(index) is int:
            row = _list_get(self, index)
            if id(row) not in self._raw:
                return row
            self._raw.discard(id(row))
            made = _lazy(row)
            _list_set(self, index, made)
            return made
        self._own()
        return _list_get(self, index)

    def __iter__(self) -> Any:
        if not self._raw:
            return _list_iter(self)
        return self._walk()

    def _walk(self) -> Any:
        raw = self._raw
        for i, row in enumerate(_list_iter(self)):  # by index: a row made in place is read there
            if id(row) in raw:
                raw.discard(id(row))
                row = _lazy(row)
                _list_set(self, i, row)
            yield row

    def _own(self) -> None:
        raw = self._raw
        if raw:
            for i, row in enumerate(_list_iter(self)):
                if id(row) in raw:
                    _list_set(self, i, _lazy(row))
            raw.clear()

    def __reversed__(self) -> Any:
        self._own()
        return list.__reversed__(self)

    def copy(self) -> list[dict[str, Any]]:
        self._own()
        return list.copy(self)

    __copy__ = copy

    def __deepcopy__(self, memo: Any) -> list[Any]:
        return copy.deepcopy(list(_list_iter(self)), memo)  # the world's rows copied too

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickled as a plain list
        return (list, (self.copy(),))

    def __radd__(self, other: Any) -> Any:  # [...] + rows: list's own + would read the world's rows
        if not isinstance(other, list):
            return NotImplemented
        return other + self.copy()


def _owning(name: str) -> Any:
    method = getattr(list, name)

    def owning(self: _Rows, *args: Any, **kwargs: Any) -> Any:
        self._own()
        return method(self, *args, **kwargs)

    owning.__name__ = owning.__qualname__ = name
    return owning


# every other way to read or change the list: its rows made first
for _name in ("__setitem__", "__delitem__", "__add__", "__iadd__", "__mul__", "__rmul__", "__imul__",
              "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"):
    if hasattr(list, _name):
        setattr(_Rows, _name, _owning(_name))
del _name


def _rows_for(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``world.list``'s rows for a handler: a :class:`_Rows` over the world's rows (a few
    are made at once)."""
    if len(rows) < 4:
        return [_lazy(r) for r in rows]
    out: _Rows = list.__new__(_Rows)
    list.extend(out, rows)
    out._raw = set(map(id, rows))
    return out




def _lazy(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row for a handler: a plain copy when it holds scalars only, else a :class:`_Row`."""
    if type(row) is not dict:
        return _row_copy(row)
    if _SCALARS.issuperset(map(type, row.values())):
        return dict(row)
    out: _Row = _dict_new(_Row)
    _dict_update(out, row)
    out._src = row
    return out


def _private(value: Any) -> Any:
    """A nested value of a world row, copied for a handler (a mapping lazily in turn)."""
    t = type(value)
    if t is dict:
        return _lazy(value)
    if t is list:
        try:
            return _world_copy(value, 0)  # through orjson once it is known to be JSON
        except _NotJson:  # a seed's .nan, a list nested past the walk's limit
            pass
        try:
            return marshal.loads(marshal.dumps(value, 2))
        except (ValueError, TypeError, RecursionError):
            return copy.deepcopy(value)
    return value if t in _SCALARS else copy.deepcopy(value)


def _key_text(key: Any) -> str:
    return str(norm_key(key))


def run_tool(tool: Tool, args: dict[str, Any], world: World, state: HandlerState, index: int) -> ToolResult:
    """A call with valid arguments, as every path runs it (a trial, the reference's
    world, lint's replay): the tool's checks, then its handler or its ops."""
    plan = tool_plan(tool)  # looked up once for the checks and the ops
    if plan.checks:  # most tools that only read have none
        failed = planned_checks(plan, args, world)
        if failed is not None:
            return failed
    return run_handler(tool, args, world, state, index) if tool.handler else planned_ops(plan, args, world)


def run_handler(tool: Tool, args: dict[str, Any], world: World, state: HandlerState, index: int) -> ToolResult:
    """Call the tool's handler: its result, or the tool error it raised, with its writes
    kept or (on any raise) undone. Raises :class:`HandlerBug` for the domain's bugs, a
    handler still running at the trial's deadline among them (see :func:`_arm`)."""
    fn = state.function(tool)
    sp = world.savepoint()
    handle = state.handle(world)
    ctx = HandlerContext(state.shared, tool.name, index)
    thread = threading.get_ident()
    root = state.root  # the trial's: one alarm and one `running` for every side's handlers
    if root._alarm is None and root.deadline is not None and root.deadline.end is not None:
        _arm(root, thread)  # once a trial, on its first handler call on the main thread
    root.running = (tool, thread)
    try:
        value = fn(copy_row(args), handle, ctx)
    except ToolError as e:
        root.running = None
        world.rollback(sp)
        return ToolResult(False, error=e.status, message=e.message)
    except BaseException as e:  # the handler's own bug, whatever it raised: the domain's, not the agent's
        root.running = None
        world.rollback(sp)
        if isinstance(e, _HandlerTimeout):
            raise HandlerBug(root.late(tool)) from None
        if isinstance(e, KeyboardInterrupt) and _ctrl_c(e):
            # a real Ctrl-C during the call: the run stops
            raise HandlerInterrupted(f"Ctrl-C while the handler {tool.handler} of tool {tool.name} ran") from e
        raise HandlerBug(_raised(tool, e)) from None
    root.running = None
    try:
        return ToolResult(True, value=_json_copy_fast(value))
    except _NotJson as e:
        world.rollback(sp)
        raise HandlerBug(f"its handler {tool.handler} returned {e}, expected a JSON value") from None


class DomainHook:
    """A function of the domain's other than a tool's handler that a trial calls and bounds
    by its deadline (issue 37 #8): the ``sync`` hook, a ``setup`` step's handler, an
    ``expect.assert`` function. ``what`` names it in the trial's error (``the domain's sync
    m:f``); ``within`` says which deadline it missed (``{seconds}``: the trial timeout's)."""

    __slots__ = ("what", "within")

    def __init__(self, what: str, within: str = "before the trial timeout of {seconds}s") -> None:
        self.what = what
        self.within = within


def call_bounded(state: HandlerState, hook: DomainHook, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a hook of the domain's, bounded as a tool's handler is (see
    :func:`run_handler`): on the main thread the trial's alarm interrupts it at the
    deadline, which raises :class:`HandlerBug` with ``state.late(hook)``; in another
    thread the trial stops waiting at its deadline and finds ``hook`` in ``running``
    (:meth:`HandlerState.late_error`). What ``fn`` raises otherwise is the caller's."""
    root = state.root
    thread = threading.get_ident()
    if root._alarm is None and root.deadline is not None and root.deadline.end is not None:
        _arm(root, thread)
    root.running = (hook, thread)
    try:
        return fn(*args, **kwargs)
    except _HandlerTimeout:
        raise HandlerBug(root.late(hook)) from None
    finally:
        root.running = None


class _HandlerTimeout(BaseException):
    """Raised into a handler running on the main thread at its trial's deadline by the
    SIGALRM that :func:`_arm` set (a BaseException: a handler's ``except Exception``
    does not swallow it)."""


# the engine's own files: an alarm that finds the main thread in one of them (the handler
# returned, or is inside a world call) waits for the next tick
_ENGINE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TICK = 0.05  # seconds between alarms once the deadline has passed, until the handler stops
_ARMED: list[HandlerState] = []  # the state whose alarm is set (one timer a process)
# signal's C functions, where there are SIGALRM and interval timers (not on Windows)
_SIG: Any = importlib.import_module("_signal") if hasattr(signal, "setitimer") else None


def _arm(state: HandlerState, thread: int) -> None:
    """Set SIGALRM for the trial's deadline, then every :data:`_TICK`, so that a handler
    that loops or sleeps on the main thread (where the event loop runs with concurrency 1:
    the reference agent's, an inline or async agent's calls) is interrupted there and its
    trial errored. Only where it is ours to set: on the main thread, with no SIGALRM
    handler of anyone else's (pytest-timeout's) and no timer running; elsewhere nothing is
    armed (docs/limitations.md). Once per trial, disarmed when it closes: ~9 µs a trial
    (``_signal``'s functions, without the enum conversions of ``signal``'s, which take
    twice that). Off the main thread (a sync agent's or user's call) it is tried again
    at the trial's next call: a trial whose first hook ran in the agent's thread (the sync
    hook after its call) still arms for the user tool its scripted user calls on the main
    thread."""
    if thread != threading.main_thread().ident:
        return
    state._alarm = ()  # tried: not again this trial, armed or not
    if _ARMED and _ARMED[0].over[0]:  # a trial that is over left its alarm: never one outliving its trial
        _disarm(_ARMED[0])
    if _ARMED or _SIG is None or state.deadline is None:
        return
    try:
        previous = _SIG.getsignal(_SIG.SIGALRM)
        if previous not in (_SIG.SIG_DFL, _SIG.SIG_IGN):
            return
        _SIG.signal(_SIG.SIGALRM, _on_alarm)
        timer = _SIG.setitimer(_SIG.ITIMER_REAL, state.deadline.left() or _TICK, _TICK)
        if timer != (0.0, 0.0):  # someone's timer was running: theirs, put back
            _SIG.setitimer(_SIG.ITIMER_REAL, *timer)
            _SIG.signal(_SIG.SIGALRM, previous)
            return
    except (ValueError, OSError):  # not the main interpreter's main thread, after all
        return
    state._alarm = (previous,)
    _ARMED.append(state)


def _disarm(state: HandlerState) -> None:
    alarm, state._alarm = state._alarm, ()
    if alarm and state in _ARMED and _SIG is not None:
        _ARMED.remove(state)
        _SIG.setitimer(_SIG.ITIMER_REAL, 0)
        _SIG.signal(_SIG.SIGALRM, alarm[0])


def disarm_left() -> bool:
    """Disarm an alarm a trial left set (none should be; the plugin calls this as a run
    ends, before Python puts SIGALRM's default action back at exit, which would let a
    timer still running kill the process: exit 142, issue 37 #7). Whether one was."""
    if not _ARMED:
        return False
    _disarm(_ARMED[0])
    return True


def _on_alarm(signum: int, frame: Any) -> None:
    """The trial's deadline passed: interrupt its handler if one is running here, in its
    own code (not the engine's, where it has returned or is writing the world)."""
    state = _ARMED[0] if _ARMED else None
    if state is not None and state.over[0]:  # its trial is over: the alarm goes with it
        _disarm(state)
        return
    running = state.running if state is not None else None
    if running is None or running[1] != threading.get_ident():
        return
    if frame is not None and frame.f_code.co_filename.startswith(_ENGINE):
        return
    raise _HandlerTimeout()


# the folder of a domain's handler modules, found once per domain and process
_FOLDERS: KeptPer[Domain, str | None] = KeptPer(lambda domain: handler_folder(domain.path))


def _function(tool: Tool, domain: Domain) -> Any:
    """The handler's function (imported on this process's first call, when the domain
    came from the cache and was not checked here)."""
    assert tool.handler is not None
    try:
        return resolve_handler(tool.handler, _FOLDERS(domain))
    except HandlerImportError as e:
        raise HandlerBug(f"its handler {tool.handler} could not be loaded: {e}") from None


def _raised(tool: Tool, e: BaseException) -> str:
    """``its handler m:f raised KeyError: 'x'`` and the handler's frames."""
    try:
        message = str(e)
    except Exception:
        message = "(its message could not be read)"
    head = f"{type(e).__name__}: {clip(message, 300)}" if message else type(e).__name__
    return f"its handler {tool.handler} raised {head}\nTraceback (most recent call last):\n{agent_traceback(e)}"


class _NotJson(Exception):
    """A handler's result holds what results.json cannot: what, and where (the path is
    filled in on the way up, so a result that is JSON pays for no path at all)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    def __str__(self) -> str:
        return f"{self.what} at result{''.join(reversed(self.path))}"


_MAX_DEPTH = 64
_PLAIN = frozenset({str, int, bool, type(None)})


# orjson's options where only plain JSON values may pass: every subclass of a builtin type
# (a str, int, float, dict or list subclass), dataclass and datetime goes to `default` (or
# is refused without one). Also the reference world's row comparison's.
STRICT_JSON = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _as_written(value: Any) -> Any:
    """A handler's row or rows as they hold them (what :func:`_json_copy` reads); any
    other subclass, dataclass or datetime is left to :func:`_json_copy`."""
    t = type(value)
    if t is _Row:
        return dict(_dict_items(value))
    if t is _Rows:
        return list(_list_iter(value))
    raise TypeError


def _json_copy_fast(value: Any) -> Any:
    """:func:`_json_copy` of a handler's result or write, made in C when it can be: orjson writes it
    and reads it back, a new value that shares nothing with it. Taken only when it equals
    what the handler returned and has at most ``_MAX_DEPTH`` arrays and objects in all (so
    none nested deeper): orjson writes NaN and the infinities as null, a UUID as its text
    and an enum as its value, none of which equals what it became, and all of which
    :func:`_json_copy` refuses; a tuple, which becomes a list, is walked too. Everything
    else orjson cannot write is walked, and the walk words what it is and where."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is _Row:
        src = value._src
        if src and _untouched(value, src):  # the world's row as it is: copied whole
            return _world_copy(src, 0)
    try:
        data = orjson.dumps(value, default=_as_written, option=STRICT_JSON)
    except TypeError:  # orjson.JSONEncodeError
        return _json_copy(value)
    if data.count(b"[") + data.count(b"{") <= _MAX_DEPTH:
        out = orjson.loads(data)
        if out == value:
            return out
    return _json_copy(value)


def _json_copy(value: Any, depth: int = 0) -> Any:
    """A copy of a handler's result that shares nothing with it (the handler may keep and
    change what it returned), or :class:`_NotJson` naming the first value JSON cannot hold.
    Called once per handler call on what are mostly rows: plain values are taken as they
    are, without a test per type."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is float or isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson(repr(float(value)))
        return float(value)
    if isinstance(value, int):  # an int subclass (not bool, which is plain)
        return int(value)
    if depth >= _MAX_DEPTH:
        raise _NotJson(f"values nested more than {_MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        # a handler's row as it holds it: what it has not read yet is the world's, copied here
        src = value._src if type(value) is _Row else _NOTHING
        if src and _untouched(cast(_Row, value), src):  # the world's row as it is: copied whole
            return _world_copy(src, depth)
        out: dict[str, Any] = {}
        for k, v in (_dict_items(value) if type(value) is _Row else value.items()):
            if type(k) is not str:
                raise _NotJson(f"the key {k!r} ({type(k).__name__}, not a string)")
            try:
                out[k] = v if type(v) in _PLAIN else \
                    _world_copy(v, depth + 1) if src and src.get(k) is v else _json_copy(v, depth + 1)
            except _NotJson as e:
                e.path.append(f".{k}")
                raise
        return out
    if isinstance(value, (list, tuple)):
        items: list[Any] = []
        raw = value._raw if type(value) is _Rows else None
        for i, v in enumerate(_list_iter(value) if type(value) is _Rows else value):  # a _Rows as it holds it
            try:
                items.append(v if type(v) in _PLAIN else
                             _world_copy(v, depth + 1) if raw and id(v) in raw else _json_copy(v, depth + 1))
            except _NotJson as e:
                e.path.append(f"[{i}]")
                raise
        return items
    raise _NotJson(f"a {t.__name__}")


def _untouched(row: dict[str, Any], src: Mapping[str, Any]) -> bool:
    """Whether a handler's row holds the very keys and values of the world's row it
    copies, in its order (nothing read into a copy, nothing put in or taken out)."""
    return (len(row) == len(src) and list(_dict_keys(row)) == list(src)
            and all(map(operator.is_, _dict_values(row), src.values())))


# the world's own objects (a seed row's nested values, rows no handler has read yet) found
# to be JSON, by id, with the depth they were found at: the world never changes an object
# it holds (a write puts new ones in its place), so one that was JSON still is, and is
# copied again in C instead of the walk: through orjson (what JSON gives back is what the
# walk makes: lists for tuples, plain ints and floats for their subclasses; twice as quick
# as marshal), else marshal (an integer past 64 bits, a lone surrogate)
_JSON_OK: dict[int, tuple[Any, int]] = {}


def _world_copy(value: Any, depth: int) -> Any:
    """:func:`_json_copy` of an object the world holds."""
    ok = _JSON_OK.get(id(value))
    if ok is not None and ok[0] is value and depth <= ok[1]:
        try:
            return orjson.loads(orjson.dumps(value))
        except TypeError:  # orjson.JSONEncodeError
            return marshal.loads(marshal.dumps(value, 2))
    out = _json_copy(value, depth)
    if len(_JSON_OK) >= 10_000:  # it holds them alive: a bounded number (the seed objects refill it)
        _JSON_OK.clear()
    _JSON_OK[id(value)] = (value, depth)
    return out
