"""``expect: { world_matches_reference: true }``: the final world must equal the world
the task's reference calls make.

This is τ-bench's criterion (it replays the ground-truth actions on fresh data and
compares a hash of the whole database), graded here field by field, so a failed check
says which rows and fields differ instead of that two hashes do. The reference's calls
are replayed on a fresh world (the task's ``given`` applied) through the same path a
trial's calls take (argument coercion, ``checks``, then the ops or the handler, with
the trial's seed and clock), without rules, faults or events: the reference world is
what the calls *do*, whatever a rule thinks of them (a task whose events change the
world should state its expectations with ``state`` entries instead). Values compare with their types (``1`` and
``1.0`` differ, as they do in τ-bench's hash).
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ..domain.conditions import format_literal, format_value
from ..domain.model import Domain, Task
from ..domain.wording import clip
from .api import ToolResult
from .handlers import STRICT_JSON, HandlerBug, HandlerState, run_tool
from .results import Check
from .start import run_start
from .tools import ArgError, coerce_args
from .world import World, seed_for

__all__ = ["CHECK_ID", "grade_world_matches_reference", "reference_world"]

CHECK_ID = "state:world_matches_reference"
# rows and fields a failed check names before it says how many more differ
_MAX_ROWS = 3
_MAX_FIELDS = 4
_VALUE_MAX = 120


def reference_world(
    domain: Domain,
    task: Task,
    seed: int,
    apply_given: Callable[[World, Task], None],
    results: list[ToolResult] | None = None,
) -> World:
    """A fresh world after the task's ``given`` and its reference's calls (a call that
    fails changes nothing, as in a trial). Each call's result is added to ``results``
    when given (what the agent would have been shown)."""
    return _replayed(domain, task, seed, apply_given, results)[0]


def _replayed(
    domain: Domain,
    task: Task,
    seed: int,
    apply_given: Callable[[World, Task], None],
    results: list[ToolResult] | None = None,
) -> tuple[World, bool]:
    """:func:`reference_world`, and whether a handler read the seed (``ctx.seed``,
    ``ctx.random``) on the way: when none did, the world is the same for every seed."""
    world = World(seed_for(domain))
    apply_given(world, task)
    handlers = HandlerState(domain, task, seed)
    if task.setup or task.history:  # the reference starts where the trial did, on the same seed's draws
        run_start(domain, task, world, handlers)
    for index, step in enumerate(s for s in task.reference if s.call is not None):
        result = _replay(domain, str(step.call), step.args, world, handlers, index)
        if results is not None:
            results.append(result)
    return world, handlers.shared.seeded


# the reference world of a task whose replay read no seed, made once per process: it is the
# same for every trial, and replaying it was half of an imported τ-bench trial. Keyed by the
# task object (kept alive here, so its id is not reused); a domain loaded again (regrade's
# edited copy) has new task objects. Only read by the grading below, never changed: kept
# with the rows it touched (World.touched), which every trial of the task is graded on.
_UNSEEDED: dict[int, tuple[Task, World, list[tuple[str, Any]]]] = {}
_UNSEEDED_MAX = 4096


def _wanted(domain: Domain, task: Task, seed: int, apply_given: Callable[[World, Task], None]
            ) -> tuple[World, list[tuple[str, Any]]]:
    """The task's reference world and the rows it touched."""
    kept = _UNSEEDED.get(id(task))
    if kept is not None and kept[0] is task:
        return kept[1], kept[2]
    world, seeded = _replayed(domain, task, seed, apply_given)
    touched = world.touched()
    if not seeded and len(_UNSEEDED) < _UNSEEDED_MAX:
        _UNSEEDED[id(task)] = (task, world, touched)
    return world, touched


def _replay(
    domain: Domain, name: str, raw: dict[str, Any], world: World, handlers: HandlerState, index: int
) -> ToolResult:
    """One call as a trial makes it, without rules or faults."""
    tool = domain.tools.get(name)
    if tool is None:
        return ToolResult(False, error=404, message=f"unknown tool {name!r}")
    try:
        args = coerce_args(tool, dict(raw))
    except ArgError as e:
        return ToolResult(False, error=400, message=f"invalid arguments for {tool.name}: {e}")
    return run_tool(tool, args, world, handlers, index)


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types, all the way down (True is not 1, 1 is not 1.0)."""
    if type(a) is dict and type(b) is dict:  # two rows: the same bytes are the same values
        try:
            # orjson's (5-7 times quicker than marshal's) tell 1, 1.0 and true apart, and a
            # subclass or a date (a YAML timestamp) is refused; not NaN from None (both
            # null), so a row with a null in its text is compared by marshal's
            text = orjson.dumps(a, option=STRICT_JSON)
            if text == orjson.dumps(b, option=STRICT_JSON) and b"null" not in text:
                return True
        except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, a lone surrogate
            pass
        try:
            if marshal.dumps(a, 2) == marshal.dumps(b, 2):
                return True
        except (ValueError, TypeError, RecursionError):
            pass
    return _same_walk(a, b)


def _same_walk(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_walk(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_walk(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _show(value: Any) -> str:
    return clip(format_literal(value), _VALUE_MAX)


def _differences(path: str, got: Any, want: Any, out: list[str]) -> None:
    """Each place two values differ, as deep as both are mappings (or lists of the same
    length): ``payment_methods.gift_card_1.balance is 40.5, expected 64.75``."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in [*want, *(k for k in got if k not in want)]:
            where = f"{path}.{k}"
            if k not in got:
                out.append(f"{where} is absent, expected {_show(want[k])}")
            elif k not in want:
                out.append(f"{where} is {_show(got[k])}, expected no such field")
            else:
                _differences(where, got[k], want[k], out)
    elif isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for i, (a, b) in enumerate(zip(got, want)):
            _differences(f"{path}[{i}]", a, b, out)
    elif isinstance(got, list) and isinstance(want, list) and _same(got, want[: len(got)]):
        out.append(f"{path} lacks {_items(len(want) - len(got))} at the end: {_show(want[len(got):])}")
    elif isinstance(got, list) and isinstance(want, list) and _same(got[: len(want)], want):
        out.append(f"{path} has {_items(len(got) - len(want))} more at the end: {_show(got[len(want):])}")
    elif not _same(got, want):
        out.append(f"{path} is {_show(got)}, expected {_show(want)}")


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def _row_difference(table: str, key: Any, got: Mapping[str, Any] | None, want: Mapping[str, Any] | None) -> str:
    """``orders #W1: status is "pending", expected "cancelled"; ...``"""
    head = f"{table} {format_value(key)}"
    if got is None:
        return f"{head}: missing, expected it to exist"
    if want is None:
        return f"{head}: exists, expected no such row"
    misses: list[str] = []
    _differences("", dict(got), dict(want), misses)
    misses = [m.removeprefix(".") for m in misses]
    more = f"; and {len(misses) - _MAX_FIELDS} more fields" if len(misses) > _MAX_FIELDS else ""
    return f"{head}: {'; '.join(misses[:_MAX_FIELDS])}{more}"


def grade_world_matches_reference(
    domain: Domain, task: Task, world: World, seed: int, apply_given: Callable[[World, Task], None]
) -> list[Check]:
    """The task's ``world_matches_reference`` check, or nothing when it has none.
    ``apply_given`` is the trial's own (passed in: the trial module imports this one)."""
    if not task.expect.world_matches_reference:
        return []
    try:
        wanted, wanted_rows = _wanted(domain, task, seed, apply_given)
    except HandlerBug as e:
        raise RuntimeError(f"replaying the reference: {e}") from None
    differing = []
    seen: set[tuple[str, Any]] = set()
    for table, key in world.touched() + wanted_rows:
        if (table, format_value(key)) in seen or table in domain.user_tables:
            continue  # dual control: the reference makes the agent's world; the user's is graded by `state`
        seen.add((table, format_value(key)))
        got, want = world.get(table, key), wanted.get(table, key)
        if got is None and want is None:
            continue
        if got is None or want is None or not _same(got, want):
            differing.append(_row_difference(table, key, got, want))
    if not differing:
        return [Check("state", CHECK_ID, True)]
    more = f"; and {len(differing) - _MAX_ROWS} more rows" if len(differing) > _MAX_ROWS else ""
    noun = "row differs" if len(differing) == 1 else "rows differ"
    detail = f"{len(differing)} {noun} from the reference's world: " + " | ".join(differing[:_MAX_ROWS]) + more
    return [Check("state", CHECK_ID, False, detail)]
