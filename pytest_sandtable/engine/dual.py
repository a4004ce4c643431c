"""Dual control (issue 22, docs/spec.md "The caller's world"): the simulated user's own
tables (``user_world``) and the tools only it calls (``user_tools``), in one trial.

Both sides' tables live in the trial's one :class:`~.world.World` (their names are
unique across the two), so a fresh world per trial is a fresh copy of both, and the
task's ``state`` expectations read either side. What keeps them apart is here: a user
tool's handler gets a handle over the user tables only (an agent tool's gets the agent
tables only), the agent's tool list never has a user tool, and the call log marks a
user's call ``"by": "user"`` (an agent's call has no ``by``, so results.json of a domain
without a user world is as it was).

After every agent call and every user call the domain's ``sync`` hook (``sync(world,
ctx)``, a handle over both worlds) runs; when it changed anything, its writes are logged
as a call ``{"tool": "sync", "by": "sync", ...}``. A user tool or sync hook that raises
errors the trial as the domain's fault (:class:`DualBug`), never the agent's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..domain.handlers import HandlerImportError, handler_folder, resolve_sync
from ..domain.model import Domain, Task
from .api import ToolResult, ToolSpec
from .handlers import DomainHook, HandlerBug, HandlerContext, HandlerState, WorldHandle, call_bounded, run_tool
from .invoke import EngineStop, exception_text
from .kept import KeptPer
from .tools import ArgError, coerce_args, recorded_arguments, text_of
from .world import World

__all__ = ["DualBug", "UserSide", "apply_user_given", "split_diff", "user_tool_specs"]


class DualBug(Exception):
    """A user tool or the sync hook raised: the trial is errored (the domain's fault). The
    trial keeps the first one it met (a user that swallows it still errors its trial)."""


class _UserSpecs:
    """The user tools as :class:`ToolSpec` (what a user is shown), made once per domain."""

    def __init__(self, domain: Domain) -> None:
        self.specs = [ToolSpec(t.name, t.description, t.input_schema()) for t in domain.user_tools.values()]


_specs: KeptPer[Domain, _UserSpecs] = KeptPer(_UserSpecs)


def user_tool_specs(domain: Domain) -> list[ToolSpec]:
    """The domain's user tools as the simulated user sees them (a list shared per domain)."""
    return _specs(domain).specs


def apply_user_given(world: World, task: Task) -> None:
    """The task's ``user_given``, on the fresh world's user tables (as ``given``)."""
    for op in task.user_given:
        s = op.spec
        if op.kind == "update":
            world.update(s["table"], s["key"], s.get("set", {}))
        elif op.kind == "create":
            world.create(s["table"], s.get("row", {}))


class _UserHandlers(HandlerState):
    """The user tools' handler state: the agent side's seed, clock and end-of-trial flag,
    with a handle over the user tables only."""

    def __init__(self, agent: HandlerState) -> None:
        super().__init__(agent.domain, agent.task, agent.seed)
        self.shared = agent.shared
        self.over = agent.over
        self.deadline = agent.deadline
        self.root = agent.root  # the trial's alarm and `running`: closed with the trial (issue 37 #7)
        self._user_handle: tuple[World, WorldHandle] | None = None

    def handle(self, world: World) -> WorldHandle:
        made = self._user_handle
        if made is None or made[0] is not world:
            made = self._user_handle = (world, WorldHandle(world, self.domain, self.over,
                                                           tables=self.domain.user_tables))
        return made[1]


def user_handlers(agent: HandlerState) -> HandlerState:
    """The handler state a user tool runs with outside a trial's user turns (a ``by: user``
    setup step): ``agent``'s seed, clock and flag, a handle over the user tables only."""
    return _UserHandlers(agent)


def split_diff(diff: dict[str, Any], domain: Domain) -> dict[str, Any]:
    """The trial's diff with the user tables' changes under ``"user"`` (the agent's stay
    where they were): only for a domain with a user world, so other diffs are unchanged."""
    if not domain.user_tables:
        return diff
    mine: dict[str, Any] = {"created": [], "changed": []}
    out: dict[str, Any] = {}
    for part, entries in diff.items():
        agent = [e for e in entries if e["table"] not in domain.user_tables]
        user = [e for e in entries if e["table"] in domain.user_tables]
        out[part] = agent
        if user or part != "deleted":
            mine[part] = user
    if "deleted" in out and not out["deleted"]:
        del out["deleted"]
    out["user"] = mine
    return out


class UserSide:
    """One trial's user side: the user's tool calls and the sync hook, logged in the
    trial's call log (``calls``) and transcript."""

    __slots__ = ("calls", "domain", "handlers", "state", "sync", "sync_handle", "sync_hook", "transcript", "turn_of",
                 "world")

    def __init__(self, domain: Domain, world: World, handlers: HandlerState, calls: list[dict[str, Any]],
                 transcript: list[dict[str, Any]], turn_of: Callable[[], int]) -> None:
        self.domain = domain
        self.world = world
        self.handlers = handlers
        self.state = _UserHandlers(handlers)
        self.calls = calls
        self.transcript = transcript
        self.turn_of = turn_of
        self.sync: Callable[..., Any] | None = None
        self.sync_handle: WorldHandle | None = None
        self.sync_hook = DomainHook(f"the domain's sync {domain.sync}")
        if domain.sync:
            try:
                self.sync = resolve_sync(domain.sync, handler_folder(domain.path))
            except HandlerImportError as e:
                raise DualBug(f"the domain's sync {domain.sync} could not be loaded: {e}") from None
            tables = {**domain.tables, **domain.user_tables}
            self.sync_handle = WorldHandle(world, domain, handlers.over, tables=tables)

    def call(self, name: str, raw: Any) -> ToolResult:
        """A user tool call: arguments coerced, checks then ops or handler (on the user
        tables), logged ``by: user``; then the sync hook. Raises :class:`DualBug` when the
        tool's handler or ops raise."""
        if not isinstance(name, str):
            name = text_of(name)
        tool = self.domain.user_tools.get(name)
        index = len(self.calls)
        args: Any = raw
        if tool is None:
            known = ", ".join(self.domain.user_tools)
            result = ToolResult(False, error=404, message=f"unknown user tool {name!r}; the user tools are {known}")
        else:
            try:
                args = coerce_args(tool, raw)
            except ArgError as e:
                result = ToolResult(False, error=400, message=f"invalid arguments for {tool.name}: {e}")
            else:
                try:
                    result = run_tool(tool, args, self.world, self.state, index)
                except HandlerBug as e:
                    raise DualBug(f"the domain failed running the user tool {tool.name}: {e}") from None
                except EngineStop:
                    raise
                except Exception as e:
                    raise DualBug(f"the domain failed running the user tool {tool.name}: "
                                  f"{exception_text(e)}") from None
        recorded, _ = recorded_arguments(args)
        ok = result.ok
        self.calls.append({
            "index": index,
            "turn": self.turn_of(),
            "tool": name,
            "args": recorded if isinstance(recorded, dict) else {"_raw": recorded},
            "ok": ok,
            "result": result.value if ok else None,
            "error": None if ok else {"code": result.error, "message": result.message},
            "violations": [],
            "by": "user",
        })
        self.transcript.append({"role": "tool", "call": index})
        self.after_step()
        return result

    def after_step(self) -> None:
        """The sync hook, after a step (an agent's or the user's call): its writes logged
        as a ``sync`` call when it changed anything."""
        if self.sync is None:
            return
        index = len(self.calls)
        sp = self.world.savepoint()
        ctx = HandlerContext(self.handlers.shared, "sync", index)
        try:  # bounded by the trial's deadline, as a handler is (issue 37 #8)
            call_bounded(self.handlers, self.sync_hook, self.sync, self.sync_handle, ctx)
        except HandlerBug as e:  # it did not return before the trial timeout
            self.world.rollback(sp)
            raise DualBug(str(e)) from None
        except Exception as e:
            self.world.rollback(sp)
            raise DualBug(f"the domain's sync {self.domain.sync} raised {exception_text(e)}") from None
        diff = self.world.diff(sp)
        if not any(diff.values()):
            return
        self.calls.append({
            "index": index,
            "turn": self.turn_of(),
            "tool": "sync",
            "args": {},
            "ok": True,
            "result": json.loads(json.dumps(diff, default=str)),
            "error": None,
            "violations": [],
            "by": "sync",
        })
