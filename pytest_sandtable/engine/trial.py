"""One trial: a fresh world, the simulated user speaks first, the agent under
test calls tools (each checked against the rules before it runs), then the
final world and the call log are graded."""

from __future__ import annotations

import asyncio
import atexit
import enum
import hashlib
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..domain.conditions import format_value
from ..domain.model import Domain, Invariant, Task, Tool
from .api import (
    AgentCallable,
    AgentError,
    ModelRoutes,
    ToolResult,
    ToolSpec,
    TrialInfo,
    Turn,
    Usage,
    UserCallable,
    UserReply,
    UserTurn,
    runs_inline,
)
from .attribution import attribute
from .dual import DualBug, UserSide, apply_user_given, split_diff, user_tool_specs
from .faults import TrialFaults, apply_event, event_entry, fault_error, fault_record
from .grading import DomainAssertionError, grade, grade_asserts
from .handlers import HandlerBug, HandlerInterrupted, HandlerState, run_tool
from .invoke import (
    CrossLoopError,
    Deadline,
    EngineStop,
    _AgentExit,
    agent_traceback,
    awaited_within,
    call_inline,
    exception_text,
    invoke,
    is_pending,
)
from .kept import KeptPer
from .reference import ReferenceAgent
from .reference_world import grade_world_matches_reference
from .results import ERRORED, FAILED, PASSED, Check, TrialResult, Violation
from .rules import DisclosureScanner, check_call
from .scripted_user import ScriptedUser
from .start import StartFailed, run_start
from .tools import RECORDED_LIMIT, ArgError, clipped_text, coerce_args, recorded_arguments, text_of
from .world import Conflict, NotFound, World, seed_for

MAX_TOOL_CALLS_PER_TURN = 100

ToolCaller = Callable[[str, Any], ToolResult]
ServeHook = Callable[[list[ToolSpec], ToolCaller, str], AbstractAsyncContextManager[tuple[str, str]]]
"""Serves a trial's world while its block runs (``pytest_sandtable.serve.serve_world``):
given the tools, the function every served call goes through and the trial's id, it
yields the REST base URL and the MCP URL. The engine never imports a server."""


class _DomainBug(EngineStop):
    """A rule or op of the domain raised: the trial is errored (not the agent's fault)."""


class _ToolBudgetExceeded(EngineStop):
    """Raised out of call_tool to stop an agent stuck in a tool loop."""


def trial_seed(run_seed: int, domain: str, task: str, trial: int) -> int:
    """A per-trial seed derived stably from (run seed, domain, task, trial number)."""
    h = hashlib.sha256(f"{run_seed}\x1f{domain}\x1f{task}\x1f{trial}".encode()).digest()
    return int.from_bytes(h[:4], "big")


class _TaskParts:
    """What every trial of one task shares, made on its first trial in the process (kept
    with its domain's parts): the reference agent bound to it, its script's lines and
    their texts, its tags, those its domain shares, and the pending items it runs under.
    A trial's result gets copies of the lists (a reader of one result may change it)."""

    __slots__ = ("lines", "pending", "reference_agent", "script", "shared_tags", "tags", "task")

    def __init__(self, domain: Domain, task: Task) -> None:
        self.task = task
        self.reference_agent = ReferenceAgent(task.reference)
        self.lines = list(task.user.script)
        self.script = [line.say for line in self.lines]
        self.tags = list(task.tags)
        self.shared_tags = [tag for tag in task.tags if tag in domain.shared_tags]
        self.pending = domain.pending_for(task)


class _DomainParts:
    """What every trial of a domain shares, made on its first trial in the process (kept
    here, not in the domain, which the domain cache pickles): the tool specs, the
    disclosure scanner, the call rules by the tool they are about (so a call checks only
    its own rules), the system prompt, the soft rules and whether any rule is pending;
    and each task's own parts (:class:`_TaskParts`), made on the task's first trial."""

    __slots__ = ("domain", "rules", "scanner", "soft", "soft_tools", "system_prompt", "tasks", "tools")

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.tools = [ToolSpec(t.name, t.description, t.input_schema()) for t in domain.tools.values()]
        self.scanner = DisclosureScanner(domain)
        self.rules: dict[str, list[Invariant]] = {}
        for inv in domain.invariants:
            if inv.tool is not None:
                self.rules.setdefault(inv.tool, []).append(inv)
        self.system_prompt = domain.system_prompt()
        # the soft rules, as (id, tool): `Invariant.tool` is worked out on each read
        self.soft = [(inv.id, inv.tool) for inv in domain.invariants if inv.soft]
        # whether a soft rule is about a tool: only then does a trial gather the tools it tried
        self.soft_tools = any(tool is not None for _, tool in self.soft)
        self.tasks: dict[str, _TaskParts] = {}

    def task_parts(self, task: Task) -> _TaskParts:
        hit = self.tasks.get(task.id)
        if hit is None or hit.task is not task:
            hit = self.tasks[task.id] = _TaskParts(self.domain, task)
        return hit


_domain_parts: KeptPer[Domain, _DomainParts] = KeptPer(_DomainParts)


def apply_given(world: World, task: Task) -> None:
    """Apply the task's `given` (its changes to the seed world) to a fresh world."""
    for op in task.given:
        s = op.spec
        if op.kind == "update":
            world.update(s["table"], s["key"], s.get("set", {}))
        elif op.kind == "create":
            world.create(s["table"], s.get("row", {}))


class _Trial:
    """The trial's world and record: what the agent's tool calls and messages change,
    and what is graded at the end."""

    # slots: every tool call reads and writes several of these
    __slots__ = (
        "calls", "calls_this_turn", "closed", "conversation", "delay", "domain",
        "dual", "dual_error",  # dual control (issue 22 A)
        "faults", "handed_off",
        "handlers", "info", "lock", "loop_thread", "mcp_url", "models", "owed", "parts", "rules", "scanner", "stop",
        "succeeded", "task", "tool_by_name", "tools", "tools_url", "transcript", "turn", "violations",
        "wait_latency", "world",
    )

    def __init__(self, domain: Domain, task: Task, info: TrialInfo) -> None:
        self.domain = domain
        self.tool_by_name = domain.tools
        self.task = task
        self.info = info
        self.handlers = HandlerState(domain, task, info.seed)  # seed and clock of `handler:` tools
        self.world = World(seed_for(domain))
        self.parts = parts = _domain_parts(domain)
        self.tools, self.scanner, self.rules = parts.tools, parts.scanner, parts.rules
        self.calls: list[dict[str, Any]] = []
        self.faults = TrialFaults.for_task(task, info.seed)
        # the latency of the call just made, waited out after the lock (see call_tool)
        self.delay = 0.0
        # the thread of the trial's event loop, where a wait would hold up every trial in flight
        self.loop_thread = threading.get_ident()
        # latency of calls made on the loop, not waited yet: `Turn.acall_tool` waits it out
        # right after its call, and what a plain call_tool on the loop left is waited after the turn
        self.owed = 0.0
        # False for the engine's own replays (lint, attribution): latency_ms is recorded, not waited
        self.wait_latency = True
        self.transcript: list[dict[str, Any]] = []
        self.violations: list[Violation] = []
        self.succeeded: list[tuple[str, Mapping[str, Any]]] = []
        self.turn = 0
        self.calls_this_turn = 0
        self.handed_off = False
        self.closed = False
        self.lock = threading.Lock()
        # an engine stop raised by a call that came over the served world (--sandtable-serve):
        # it cannot go up the agent's stack from the server, so the agent's turn raises it
        self.stop: EngineStop | None = None
        self.tools_url: str | None = None
        self.mcp_url: str | None = None
        self.models: ModelRoutes | None = None  # --sandtable-model-proxy: the trial's routes (Turn._models)
        # the text conversation as agents' APIs see it, kept as the transcript grows
        self.conversation: list[dict[str, str]] = []
        # --- dual control (issue 22 A): the user side (user tools, sync), made by the trial
        # for a domain with user tools or a sync hook; the first user-tool or sync failure
        self.dual: UserSide | None = None
        self.dual_error: DualBug | None = None
        # --- end dual control

    def user_call(self, name: str, raw: Any) -> ToolResult:
        """A simulated user's call of a user tool (``UserTurn.call``), under the trial's lock;
        a user-tool or sync failure is kept: it errors the trial whatever the user does."""
        with self.lock:
            if self.closed:
                return ToolResult(False, error=410, message="the trial is over")
            if self.dual is None:
                return ToolResult(False, error=404, message=f"unknown user tool {text_of(name)!r}; "
                                                           "this domain has no user tools")
            try:
                return self.dual.call(name, raw)
            except DualBug as e:
                if self.dual_error is None:
                    self.dual_error = e
                raise

    def call_tool(self, name: str, raw: Any) -> ToolResult:
        # an abandoned (timed-out) agent thread may still call in: the lock keeps it from
        # changing the world while the trial is graded, and `closed` turns it away after
        with self.lock:
            if self.closed:
                return ToolResult(False, error=410, message="the trial is over")
            self.delay = 0.0
            result = self._call_tool(name, raw)
            delay = self.delay
        if delay and self.wait_latency:
            if threading.get_ident() != self.loop_thread:
                time.sleep(delay)  # a fault's latency_ms, waited where it holds up only this trial's agent
            else:  # on the loop a sleep would hold up every trial in flight: awaited instead
                self.owed += delay
        return result

    async def wait_owed(self) -> None:
        """Wait out the latency faults of calls made on the event loop, without blocking it."""
        owed, self.owed = self.owed, 0.0
        if owed > 0:
            await asyncio.sleep(owed)

    def served_call(self, name: str, raw: Any) -> ToolResult:
        """A call that came over the served world: :meth:`call_tool` itself, but a stop it
        raises (a domain bug, a tool loop) is kept for the agent's turn to raise, and the
        caller (the server) gets an error; after a stop, calls change nothing."""
        if self.stop is not None:
            return ToolResult(False, error=409, message="the turn was stopped; this call was not run")
        try:
            return self.call_tool(name, raw)
        except EngineStop as e:
            self.stop = e
            return ToolResult(False, error=500, message="the turn was stopped; this call was not run")

    def _call_tool(self, name: str, raw: Any) -> ToolResult:
        self.calls_this_turn += 1
        if self.calls_this_turn > MAX_TOOL_CALLS_PER_TURN:
            raise _ToolBudgetExceeded()
        index = len(self.calls)
        if not isinstance(name, str):
            name = text_of(name)
        tool = self.tool_by_name.get(name)
        found: list[Violation] | tuple[()] = ()
        args: Any = raw
        n, fault = 0, None
        if tool is None:
            known = ", ".join(self.tool_by_name)
            if len(name) > RECORDED_LIMIT:  # an agent's 50 MB "name": the call log keeps it clipped
                name = clipped_text(name, len(name), "characters")
            result = ToolResult(False, error=404, message=f"unknown tool {name!r}; the tools are {known}")
        else:
            try:
                args = coerce_args(tool, raw)
            except ArgError as e:  # not a violation: the rules are about calls that could run
                result = ToolResult(False, error=400, message=f"invalid arguments for {tool.name}: {e}")
            else:
                rules = self.rules.get(tool.name)
                if rules is not None:
                    found = self._check_rules(tool, args, index, rules)
                if self.faults is not None:
                    n = self.faults.count(tool.name)
                # the tool itself: its checks, then its ops or its handler (run here, not in a
                # function of its own: one frame fewer on every call)
                try:
                    if n == 0:  # the task has no faults nor events
                        result = run_tool(tool, args, self.world, self.handlers, index)
                    else:
                        result, fault = self._run_faulted(tool, args, index, n)
                except HandlerBug as e:  # its text says what the handler did, with its traceback
                    raise _DomainBug(f"the domain failed running {tool.name}: {e}") from None
                except Exception as e:  # the domain's ops, not the agent, went wrong
                    raise _DomainBug(f"the domain failed running {tool.name}: {type(e).__name__}: {e}") from None
                if result.ok and tool.handoff:
                    self.handed_off = True
        # clipped to the caps here, not when the trial is written: the trial never holds an
        # agent's huge argument past its call (the rules, checks and ops above read it whole)
        recorded, cut = recorded_arguments(args)
        ok = result.ok
        if ok and tool is not None:  # what `before` rules compare later calls with: the log's copy, if clipped
            self.succeeded.append((tool.name, recorded if cut else args))
        call: dict[str, Any] = {
            "index": index,
            "turn": self.turn,
            "tool": name,
            # recorded as JSON values: an agent may pass Decimal, datetime, UUID... (results travel as JSON)
            "args": recorded if isinstance(recorded, dict) else {"_raw": recorded},
            "ok": ok,
            "result": result.value if ok else None,
            "error": None if ok else {"code": result.error, "message": result.message},
            "violations": [v.invariant for v in found] if found else [],
        }
        if fault is not None:  # only a faulted call has the key: results without faults stay as they were
            call["fault"] = fault
        self.calls.append(call)
        if found:
            self.violations.extend(found)
        self.transcript.append({"role": "tool", "call": index})
        if n:
            self._events_after(name, n, index)
        if self.dual is not None and self.dual.sync is not None:  # dual control: sync after the step
            try:
                self.dual.after_step()
            except DualBug as e:
                raise _DomainBug(str(e)) from None
        return result

    def _run_faulted(
        self, tool: Tool, args: dict[str, Any], index: int, n: int
    ) -> tuple[ToolResult, dict[str, Any] | None]:
        """A call with valid arguments whose rules were checked, the ``n``-th of its tool, in
        a task with faults or events: the tool run, unless a fault of the task takes the
        call. With the fault's record for the call log, when one did. (What the tool raises
        is the caller's to make a domain bug of.)"""
        fault = self.faults.fault(tool.name, n) if self.faults is not None else None
        if fault is None:
            return run_tool(tool, args, self.world, self.handlers, index), None
        landed: bool | None = None
        if fault.kind is not None and not fault.after_commit:  # refused before the tool runs
            result = fault_error(fault)
        else:  # latency alone, or an error after the tool ran and its writes landed
            result = run_tool(tool, args, self.world, self.handlers, index)
            if fault.kind is not None:
                landed, result = result.ok, fault_error(fault)
        self.delay = fault.latency_ms / 1000
        return result, fault_record(fault, landed)

    def _check_rules(
        self, tool: Tool, args: dict[str, Any], index: int, rules: list[Invariant]
    ) -> list[Violation] | tuple[()]:
        """The call's rules, checked on the world as the call finds it (a faulted call too):
        what they find (an empty tuple, shared, when nothing: most calls break no rule)."""
        found: list[Violation] = []
        try:
            for inv in rules:
                detail = check_call(inv, tool.name, args, self.world, self.succeeded)
                if detail:
                    if len(detail) > RECORDED_LIMIT:  # it quotes a huge argument: kept as the log keeps one
                        detail = clipped_text(detail, len(detail), "characters")
                    found.append(Violation(inv.id, inv.kind, inv.soft, detail, self.turn, index, inv.source_quote))
        except Exception as e:  # the domain's rules, not the agent, went wrong
            raise _DomainBug(f"the domain failed running {tool.name}: {type(e).__name__}: {e}") from None
        return found or ()

    def _events_after(self, tool: str, n: int, index: int) -> None:
        """The task's events that follow the ``n``-th call of ``tool`` (call ``index``):
        each changes the world (or is skipped, its row gone or its key taken) and shows in
        the transcript."""
        assert self.faults is not None
        for event in self.faults.events_after(tool, n):
            skipped = apply_event(self.world, event)
            self.transcript.append(event_entry(event, index, self.turn, skipped))

    def close(self) -> None:
        """Turn away the tool calls of agent threads abandoned at their timeout."""
        running = self.handlers.running
        if running is not None and running[1] != threading.get_ident():
            # a handler hung past the timeout in an agent's thread holds the lock for good:
            # the trial is graded without it, and its later writes are refused (HandlerState.close)
            self.handlers.close()
            self.closed = True
            if self.lock.acquire(timeout=0.1):  # unless it was returning just now
                self.lock.release()
            return
        with self.lock:
            self.closed = True
        self.handlers.close()

    def say(self, role: str, text: str) -> None:
        self.transcript.append({"role": role, "text": text, "turn": self.turn})
        self.conversation.append({"role": "user" if role == "user" else "assistant", "content": text})
        if role == "agent":
            found = self.scanner.scan(text, self.world)
            if found:
                for inv, detail in found:
                    self.violations.append(
                        Violation(inv.id, inv.kind, inv.soft, detail, self.turn, None, inv.source_quote)
                    )


class _OnLoop(enum.Enum):
    """The type of :data:`_ON_LOOP` (an enum of one, so that type checkers narrow ``is``)."""

    ON_LOOP = 0


_ON_LOOP = _OnLoop.ON_LOOP
"""What an inline agent's or user's turn, run without a coroutine, returns when the rest
of it needs the event loop after all (see ``_Dialogue.run``)."""


def _user_reply(r: Any) -> UserReply:
    """What a simulated user returned, as its reply (a str is one that goes on)."""
    if isinstance(r, str):
        return UserReply(r)
    if not isinstance(r, UserReply):
        raise TypeError(f"the simulated user returned {type(r).__name__}, expected UserReply or str")
    return r


class _Dialogue:
    """The simulated user and the agent under test taking turns over a trial, and how
    that ended: `ended_by`, the agent's failure as a `runtime` check, or `error` when
    the trial is errored (the user or the domain failed, not the agent)."""

    # slots: every turn reads several of these
    __slots__ = (
        "agent", "agent_inline", "agent_state", "agent_traceback", "agent_turn", "agent_usage", "deadline",
        "ended_by", "error", "held_agent", "held_user", "latency", "parts", "runtime", "shared_agent_turn",
        "shared_user_turn", "system_prompt", "t", "user", "user_inline", "user_state", "user_turn", "user_usage",
    )

    def __init__(
        self, t: _Trial, agent: AgentCallable, user: UserCallable, deadline: Deadline, parts: _TaskParts
    ) -> None:
        self.t = t
        self.agent = agent
        self.user = user
        self.deadline = deadline
        self.system_prompt = t.parts.system_prompt
        self.runtime: list[Check] = []
        self.error: str | None = None
        self.ended_by = ""
        self.latency: list[float] = []  # seconds per agent turn, rounded as results hold them
        self.agent_traceback: str | None = None
        self.agent_usage, self.user_usage = Usage(), Usage()
        self.agent_state: dict[str, Any] = {}
        self.user_state: dict[str, Any] = {}
        self.parts = parts
        # asked once per trial, not on every turn: those that run inline are called directly,
        # without the coroutine (and the deadline arithmetic) of `invoke`
        self.agent_inline = runs_inline(agent)
        self.user_inline = runs_inline(user)
        # The engine's own reference agent (bound to this task) and scripted user read their
        # turn during the call and keep nothing of it, nor change it: each gets one turn for
        # the whole trial, over the trial's own lists, made on its first call. Any other
        # agent or user gets a turn of its own on every call, with copies of the lists.
        self.shared_agent_turn = type(agent) is ReferenceAgent
        self.shared_user_turn = type(user) is ScriptedUser
        self.agent_turn: Turn | None = None
        self.user_turn: UserTurn | None = None
        # what an inline agent's or user's call gave that needs the loop (an awaitable, or a
        # reply with latency owed, and the turn's start), left for the coroutine of the turn
        self.held_agent: tuple[Any, float] | None = None
        self.held_user: Any = None

    async def run(self) -> None:
        """The user speaks first (the task's fixed opening, if it has one); then the agent
        and the user take turns until the conversation ends. A closing message with text
        still gets one last agent turn."""
        t = self.t
        closing = False
        opening = t.task.user.opening
        if t.task.history or t.task.solo:  # issue 22, part B: the trial starts mid-way
            opening, closing = _mid_way_opening(self, t.task)
        if not opening:
            first = self._inline_user_says() if self.user_inline else _ON_LOOP
            if first is _ON_LOOP:
                first = await self._user_says()
            if first is None:
                return
            if first.stop:
                if not first.text.strip():
                    self.error = f"simulated user ended the conversation before it started ({first.stop})"
                    return
                self.ended_by, closing = first.stop, True
            opening = first.text
        if opening is not _AGENT_NEXT:  # (issue 22: a history that ends with the user's message)
            t.say("user", opening)
        max_turns = t.task.max_turns
        while True:
            # an inline agent's or user's turn runs without a coroutine, unless it needs the loop
            done = self._inline_agent_turn() if self.agent_inline else _ON_LOOP
            if done is _ON_LOOP:
                done = await self._agent_turn()
            if not done or closing:
                return
            if t.handed_off:
                self.ended_by = "handoff"
                return
            if t.turn >= max_turns:
                self.ended_by = "max_turns"
                return
            reply = self._inline_user_says() if self.user_inline else _ON_LOOP
            if reply is _ON_LOOP:
                reply = await self._user_says()
            if reply is None:
                return
            if reply.stop:
                self.ended_by = reply.stop
                if not reply.text.strip():
                    return
                closing = True
            t.say("user", reply.text)

    def _inline_user_says(self) -> UserReply | _OnLoop | None:
        """An inline user's next message, without a coroutine: as :meth:`_user_says`, or
        :data:`_ON_LOOP` when the user gave an awaitable (held for :meth:`_user_says`)."""
        try:
            ut = self._user_turn()
            try:
                r = call_inline(self.user, ut)
            except (asyncio.TimeoutError, TimeoutError):
                raise TimeoutError(f"no answer before {self._trial_timeout()}") from None
            if self.t.dual_error is not None:  # dual control: a user tool or sync failed
                self._dual_failed(self.t.dual_error)
                return None
            if type(r) is UserReply:
                return r
            if is_pending(r):
                self.held_user = r
                return _ON_LOOP
            return _user_reply(r)
        except Exception as e:
            self._user_failed(e)
            return None

    def _dual_failed(self, e: Exception) -> None:
        """Error the trial for a user tool or the sync hook that raised (the domain's fault)."""
        self.error = str(e)
        self.ended_by = "domain_error"

    async def _user_says(self) -> UserReply | None:
        """The user's next message on the loop (the awaitable an inline user gave, or a
        call through :func:`invoke`), or None when the user failed: the trial is then
        errored, since the simulated user's failure is not the agent's."""
        try:
            held, self.held_user = self.held_user, None
            ut = None if held is not None else self._user_turn()
            try:
                if held is not None:
                    r = await awaited_within(held, self.deadline.left())
                else:
                    r = await invoke(self.user, ut, self.deadline.left())
            except (asyncio.TimeoutError, TimeoutError):
                raise TimeoutError(f"no answer before {self._trial_timeout()}") from None
            if self.t.dual_error is not None:  # dual control: a user tool or sync failed
                self._dual_failed(self.t.dual_error)
                return None
            return r if type(r) is UserReply else _user_reply(r)
        except Exception as e:
            self._user_failed(e)
            return None

    def _user_failed(self, e: Exception) -> None:
        """Error the trial for the simulated user's failure (none is the agent's)."""
        running = self.t.handlers.running
        if running is not None and isinstance(e, TimeoutError):
            # the user waits on a user tool's handler or the sync hook that has not returned:
            # the domain's fault (issue 37 #8)
            self.error = self.t.handlers.late_error(running[0])
            self.ended_by = "domain_error"
        elif self.t.dual_error is not None or isinstance(e, DualBug):  # dual control: the domain's
            self._dual_failed(self.t.dual_error or e)
        elif isinstance(e, CrossLoopError):
            self.error = f"harness wiring problem, not the simulated user's failure: {e}"
        else:
            self.error = f"simulated user failed: {exception_text(e)}"

    def _user_turn(self) -> UserTurn:
        """What the user is given for its next message: the trial's one shared turn for the
        engine's scripted user (brought up to date), else a new turn with copies."""
        t = self.t
        if self.user_turn is not None:
            self.user_turn.handed_off = t.handed_off
            return self.user_turn
        shared = self.shared_user_turn
        spec = t.task.user
        ut = UserTurn(
            messages=t.conversation if shared else list(t.conversation),
            persona=spec.persona,
            instructions=spec.instructions,
            opening=spec.opening,
            script=self.parts.script if shared else list(self.parts.script),
            trial=t.info,
            state=self.user_state,
            handed_off=t.handed_off,
            usage=self.user_usage,
            lines=self.parts.lines if shared else list(self.parts.lines),
            say_unknown=spec.say_unknown,
            calls=t.calls if shared else list(t.calls),
            tools=user_tool_specs(t.domain) if t.dual is not None else [],  # dual control
            _call=t.user_call if t.dual is not None else None,
        )
        if shared:
            self.user_turn = ut
        return ut

    def _next_agent_turn(self) -> Turn:
        """What the agent is given for its turn: the trial's one shared turn for the engine's
        reference agent, else a new turn with a copy of the conversation."""
        if self.agent_turn is not None:
            return self.agent_turn
        t = self.t
        shared = self.shared_agent_turn
        turn = Turn(
            messages=t.conversation if shared else list(t.conversation),
            tools=t.tools,
            system_prompt=self.system_prompt,
            trial=t.info,
            state=self.agent_state,
            _call=t.call_tool,
            _wait=t.wait_owed,
            usage=self.agent_usage,
            tools_url=t.tools_url,
            mcp_url=t.mcp_url,
            _clock=t.handlers if t.task.clock_now or t.domain.clock_now else None,  # turn.now: ctx.now's clock
            _models=t.models,
        )
        if shared:
            self.agent_turn = turn
        return turn

    def _begin_turn(self) -> tuple[Turn, float]:
        """The next agent turn counted, and what the agent is given for it, with its start."""
        t = self.t
        t.turn += 1
        t.calls_this_turn = 0
        return self.agent_turn or self._next_agent_turn(), time.perf_counter()

    def _inline_agent_turn(self) -> bool | _OnLoop:
        """An inline agent's turn, without a coroutine: as :meth:`_agent_turn`, or
        :data:`_ON_LOOP` when the rest of it needs the loop (the agent gave an awaitable,
        or its calls left latency to wait out): :meth:`_agent_turn` finishes it."""
        turn, t0 = self._begin_turn()
        t = self.t
        try:
            reply = call_inline(self.agent, turn)
            if (type(reply) is not str and is_pending(reply)) or t.owed:
                self.held_agent = (reply, t0)
                return _ON_LOOP
            if t.stop is not None:  # a served call of this turn met a domain bug or the tool budget
                raise t.stop
        except (_DomainBug, _ToolBudgetExceeded, Exception) as e:  # the trial's own cancellation goes on up
            return self._turn_failed(e)
        return self._agent_replied(reply, t0, None)

    async def _agent_turn(self) -> bool:
        """One agent turn, its reply said; False when the turn ended the trial instead
        (the agent failed, or the domain did while running one of its tool calls). An
        inline agent's turn held by :meth:`_inline_agent_turn` is finished here."""
        held, self.held_agent = self.held_agent, None
        if held is None:
            turn, t0 = self._begin_turn()
        else:
            reply, t0 = held
        answered: list[float] = []  # when the answer was there (see invoke); an inline one: now
        try:
            if held is None:
                reply = await invoke(self.agent, turn, self.deadline.left(), answered)
            elif type(reply) is not str and is_pending(reply):  # an inline agent that gave an awaitable
                reply = await awaited_within(reply, self.deadline.left(), answered)
            t = self.t
            if t.stop is not None:  # a served call of this turn met a domain bug or the tool budget
                raise t.stop
            # latency faults of calls an async agent made with call_tool on the loop: the turn
            # takes that long, as it would have against the slow dependency
            if t.owed:
                await asyncio.wait_for(t.wait_owed(), self.deadline.left())
                answered.clear()
        except (_DomainBug, _ToolBudgetExceeded, Exception) as e:  # the trial's own cancellation goes on up
            return self._turn_failed(e)
        return self._agent_replied(reply, t0, answered)

    def _turn_failed(self, e: BaseException) -> bool:
        """End the trial on what the agent's turn raised: a domain bug errors it, anything
        else fails it (see :meth:`_agent_raised`). False, as the turn returns."""
        if isinstance(e, _DomainBug):
            self.error = str(e)
            self.ended_by = "domain_error"
        elif isinstance(e, CrossLoopError):  # errored: the harness's wiring, not the agent
            self.error = f"harness wiring problem, not the agent's failure: {e}"
            self.ended_by = "harness_error"
        else:
            self._agent_raised(e)
        return False

    def _agent_replied(self, reply: Any, t0: float, answered: list[float] | None) -> bool:
        """The turn's latency recorded and its reply said; False when the agent answered
        too late or with something other than text."""
        self.latency.append(round((answered[-1] if answered else time.perf_counter()) - t0, 6))
        end = self.deadline.end  # Deadline.passed(), without its call: this runs every turn
        if end is not None and time.monotonic() > end:
            # an async agent that blocks the event loop cannot be interrupted; judge it after the fact
            self._agent_failed(self._too_late("; it blocked the event loop, so it could not be stopped earlier"))
            return False
        if type(reply) is not str and reply is not None and not isinstance(reply, str):
            self._agent_failed(f"the agent returned {type(reply).__name__}, expected a str reply")
            return False
        self.t.say("agent", reply or "")
        return True

    def _agent_raised(self, e: BaseException) -> None:
        """Fail the trial for what the agent raised; only an exception of the agent's own
        code (not a timeout, an exit or an adapter's AgentError) keeps its traceback."""
        exc = e.exc if isinstance(e, _AgentExit) else e  # what the agent's code raised
        if isinstance(exc, SystemExit):
            self._agent_failed(f"the agent called sys.exit({exc.code!r})")
        elif isinstance(exc, KeyboardInterrupt):
            self._agent_failed("the agent raised KeyboardInterrupt")
        elif isinstance(e, _ToolBudgetExceeded):
            self._agent_failed(f"the agent made more than {MAX_TOOL_CALLS_PER_TURN} tool calls in one turn")
        elif isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            running = self.t.handlers.running
            if running is not None:  # the agent waits on a handler that has not returned: the domain's fault
                self.error = self.t.handlers.late_error(running[0])
                self.ended_by = "domain_error"
            else:
                self._agent_failed(self._too_late())
        elif isinstance(e, AgentError):
            self._agent_failed(str(e))
        else:
            self._agent_failed(f"the agent raised {exception_text(exc)}", agent_traceback(exc))

    def _agent_failed(self, detail: str, traceback: str | None = None) -> None:
        """End the trial on the agent's failure: a failed `runtime` check that says what went wrong."""
        self.runtime.append(Check("runtime", "runtime", False, detail))
        self.agent_traceback = traceback
        self.ended_by = "agent_error"

    def _too_late(self, why: str = "") -> str:
        return f"the agent did not answer before {self._trial_timeout()} (turn {self.t.turn}{why})"

    def _trial_timeout(self) -> str:
        return f"the trial timeout of {format_value(self.deadline.seconds)}s"


async def _talk(t: _Trial, talk: _Dialogue, serve: ServeHook | None) -> str | None:
    """The conversation, with the world served while it runs when ``serve`` is given (the
    server stops when it ends, whatever happens); why the trial errored, if it did."""
    if serve is None:
        await talk.run()
        return talk.error
    try:
        served = serve(t.tools, t.served_call, t.info.trial_id)
        t.tools_url, t.mcp_url = await served.__aenter__()
    except Exception as e:  # the port is in use, the server did not start: this trial only
        return f"the trial's world could not be served: {e}"
    try:
        await talk.run()
    finally:
        t.close()  # before the server stops: a call still in flight gets 410 and changes nothing
        await served.__aexit__(None, None, None)
    return talk.error


def _verdict(checks: list[Check]) -> str:
    """Passed when every check passed, else failed (a loop: this runs once a trial)."""
    for c in checks:
        if not c.passed and c.counted:  # (issue 22: a check the task's basis leaves out never fails it)
            return FAILED
    return PASSED


def _rule_checks(violations: list[Violation]) -> list[Check]:
    """One failed check per hard rule broken: its first violation's detail, and how many more."""
    hard: dict[str, list[Violation]] = {}
    for v in violations:
        if not v.soft:
            hard.setdefault(v.invariant, []).append(v)
    checks = []
    for inv_id, vs in hard.items():
        more = f" (and {len(vs) - 1} more)" if len(vs) > 1 else ""
        checks.append(Check("invariant", inv_id, False, vs[0].detail + more))
    return checks


def _grade_expectations(t: _Trial, checks: list[Check], trial_timeout: float | None = None) -> str | None:
    """Add the checks of the task's expectations; why grading errored, if it did. With a
    trial timeout, the task's ``assert`` functions are bounded by as much again, counted
    from the start of grading (issue 37 #8): a trial whose agent took its whole time is
    still graded."""
    expect = t.task.expect
    bound = None
    if trial_timeout and expect.asserts:
        bound = HandlerState(t.domain, t.task, t.info.seed)
        bound.deadline = Deadline(trial_timeout)
    try:
        return _graded(t, checks, bound)
    finally:
        if bound is not None:
            bound.close()


def _graded(t: _Trial, checks: list[Check], bound: HandlerState | None) -> str | None:
    expect = t.task.expect
    # only the task's reply_includes read what the agent said
    agent_texts = [e["text"] for e in t.transcript if e["role"] == "agent"] if expect.reply_includes else ()
    start = len(checks)
    try:
        checks.extend(grade(expect, t.world, t.calls, agent_texts))
        if expect.world_matches_reference:
            # the reference starts where the trial did: its setup and history (engine/reference_world.py)
            checks.extend(grade_world_matches_reference(t.domain, t.task, t.world, t.info.seed, apply_given))
        checks.extend(grade_asserts(t.domain, expect, t.world, bound))  # issue 22, part B
    except DomainAssertionError as e:  # issue 22, part B: an assertion's fault is the domain's
        return f"the domain failed grading the trial: {e}"
    except Exception as e:  # an expectation of the domain went wrong, not the agent
        return f"the domain failed grading the trial: {type(e).__name__}: {e}"
    if expect.basis is not None:  # issue 22, part B: kinds the basis leaves out are recorded, not counted
        for c in checks[start:]:
            if c.kind not in expect.basis:
                c.counted = False
    return None


def _soft_rules(t: _Trial) -> dict[str, dict[str, Any]]:
    """Each soft rule: its tool, whether it applied (the trial tried that tool) and whether it was broken."""
    if not t.parts.soft:
        return {}
    attempted = {c["tool"] for c in t.calls} if t.parts.soft_tools else set()
    broken = {v.invariant for v in t.violations if v.soft}
    return {
        inv: {"tool": tool, "applied": tool is None or tool in attempted, "broken": inv in broken}
        for inv, tool in t.parts.soft
    }


async def arun_trial(
    domain: Domain,
    task: Task | str,
    agent: AgentCallable,
    user: UserCallable,
    *,
    trial: int = 1,
    k: int = 1,
    run_seed: int = 0,
    agent_name: str = "",
    user_name: str = "",
    trial_timeout: float | None = None,
    location: str = "",
    serve: ServeHook | None = None,
    wait_latency: bool = True,
    trial_id: str = "",
    models: ModelRoutes | None = None,
) -> TrialResult:
    """Run one trial and grade it. Never raises for a failing agent or user: the
    agent's failures fail the trial with a `runtime` check; the simulated user's
    failures and domain bugs make it errored. A failed trial carries its likely owner
    (:mod:`.attribution`). With ``serve``, the trial's world is served while it runs
    (``turn.tools_url`` / ``turn.mcp_url``); a world that cannot be served errors the trial.
    ``wait_latency=False`` records a task's ``latency_ms`` faults without waiting them out
    (the engine's own replays: lint, the reference replay of attribution). ``trial_id``
    is the agent's ``turn.trial.trial_id`` (default ``<domain>/<task>/<trial>``). ``models``:
    the trial's routes through the model proxy (``turn.model_base_url``, ``turn.model_env``)."""
    if isinstance(task, str):
        task = domain.task(task)
    try:
        result = await _graded_trial(
            domain, task, agent, user, trial, k, run_seed, agent_name, user_name, trial_timeout, location, serve,
            wait_latency, trial_id, models,
        )
    except HandlerInterrupted as e:  # Ctrl-C while a handler ran: the run stops, as on any Ctrl-C
        raise KeyboardInterrupt(str(e)) from None
    if result.verdict == FAILED:
        result.attribution = await _owner(domain, task, result)
    return result


async def _owner(domain: Domain, task: Task, result: TrialResult) -> dict[str, str] | None:
    return _likely_owner(domain, task, result, await reference_trial(domain, task))


def _likely_owner(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """The failed trial's likely owner. Whatever the trial holds, reading it must not cost
    the trial its verdict: a failure to attribute leaves the owner unknown (None)."""
    try:
        return attribute(domain, task, result, reference)
    except Exception:
        return None


_REFERENCES: dict[tuple[int, str], tuple[Domain, TrialResult | None]] = {}


async def reference_trial(domain: Domain, task: Task) -> TrialResult | None:
    """The task's reference replayed with the scripted user, as evidence of whether the
    task itself holds (the replay lint makes); None when the task has no reference, gives
    the scripted user nothing to say, or the replay errored. Run once per task and
    process: only failed trials ask, and they share it."""
    hit = _REFERENCES.get((id(domain), task.id))
    if hit is not None and hit[0] is domain:
        return hit[1]
    found: TrialResult | None = None
    if task.reference and (task.user.opening or task.user.script or task.solo or task.history):
        replay = await _graded_trial(domain, task, ReferenceAgent(), ScriptedUser(), 1, 1, 0, "reference",
                                     "scripted", None, "", None, False)
        found = None if replay.verdict == ERRORED else replay
    _REFERENCES[(id(domain), task.id)] = (domain, found)
    return found


async def _graded_trial(
    domain: Domain,
    task: Task,
    agent: AgentCallable,
    user: UserCallable,
    trial: int,
    k: int,
    run_seed: int,
    agent_name: str,
    user_name: str,
    trial_timeout: float | None,
    location: str,
    serve: ServeHook | None,
    wait_latency: bool,
    trial_id: str = "",
    models: ModelRoutes | None = None,
) -> TrialResult:
    """:func:`arun_trial` without the attribution (the reference replay is one of these).
    Its arguments are positional, as those of the TrialResult it makes: it runs once a
    trial, and keyword arguments cost a lookup each."""
    info = TrialInfo(domain.name, task.id, trial, k, trial_seed(run_seed, domain.name, task.id, trial), trial_id)
    t = _Trial(domain, task, info)
    t.models = models
    parts = t.parts.task_parts(task)
    # The engine binds its own reference agent to the task, so this is a check of its class,
    # not of a capability: the task's reference path is hidden data no outside agent may get.
    # (Bound once per task: it keeps its place in the turn's state, not in itself.)
    if isinstance(agent, ReferenceAgent):
        agent = parts.reference_agent if type(agent) is ReferenceAgent else agent.for_task(task)
    t.wait_latency = wait_latency
    talk = _Dialogue(t, agent, user, Deadline(trial_timeout), parts)
    t.handlers.deadline = talk.deadline  # a handler running past it errors the trial
    started = time.perf_counter()

    try:  # whatever ends the trial (Ctrl-C too, in its setup too): its handlers' alarm is disarmed
        error = _begin(t, task)
        baseline = t.world.savepoint()
        if error is None:
            if serve is None:  # as _talk does without a server, one coroutine fewer
                await talk.run()
                error = talk.error
            else:
                error = await _talk(t, talk, serve)
    finally:
        t.close()

    checks = talk.runtime  # the dialogue is over: its list becomes the trial's
    if t.violations:
        checks.extend(_rule_checks(t.violations))
    if error is None:
        error = _grade_expectations(t, checks, trial_timeout)
    verdict = ERRORED if error is not None else _verdict(checks)
    # positional, in the order of TrialResult's fields (tests/test_trial_hot_path2.py pins
    # it): keyword arguments cost ~1 µs of a trial's ~70
    return TrialResult(
        domain.name,  # domain
        task.id,  # task
        trial,  # trial
        k,  # k
        info.seed,  # seed
        verdict,  # verdict
        list(parts.tags),  # tags
        task.critical,  # critical
        error,  # error
        talk.ended_by,  # ended_by
        t.turn,  # turns
        agent_name,  # agent
        user_name,  # user
        t.transcript,  # transcript
        t.calls,  # calls
        checks,  # checks
        t.violations,  # violations
        split_diff(t.world.diff(baseline), domain),  # diff (a user world's changes under "user")
        {"agent": talk.agent_usage.to_dict(), "user": talk.user_usage.to_dict()},  # usage
        talk.latency,  # latency
        round(time.perf_counter() - started, 6),  # duration
        location,  # location
        talk.agent_traceback,  # traceback
        _soft_rules(t),  # soft
        list(parts.shared_tags),  # shared_tags
        [dict(item) for item in parts.pending] if parts.pending else [],  # pending
    )


def _begin(t: _Trial, task: Task) -> str | None:
    """The trial's world as it starts: the task's ``given``, the user side (dual control,
    issue 22 A), its setup and history (issue 22, part B); why the trial errors, if it does."""
    try:
        apply_given(t.world, task)
    except (NotFound, Conflict) as e:
        return f"the task's given could not be applied: {e}"
    error = _dual_start(t, task)
    if error is None and (task.setup or task.history):
        error = _start(t)
    return error


def _dual_start(t: _Trial, task: Task) -> str | None:
    """Dual control (issue 22 A): the task's ``user_given`` applied, and the user side made
    for a domain with user tools or a sync hook; why the trial errors, if it does."""
    domain = t.domain
    try:
        apply_user_given(t.world, task)
    except (NotFound, Conflict) as e:
        return f"the task's user_given could not be applied: {e}"
    if domain.user_tools or domain.sync:
        try:
            t.dual = UserSide(domain, t.world, t.handlers, t.calls, t.transcript, lambda: t.turn)
        except DualBug as e:
            return str(e)
    return None


def run_trial(
    domain: Domain,
    task: Task | str,
    agent: AgentCallable,
    user: UserCallable,
    **kwargs: Any,
) -> TrialResult:
    """Synchronous :func:`arun_trial` (for scripts and tests outside an event loop).

    Every call in a thread runs on that thread's one event loop, made on its first call
    and kept (closed when the thread ends, or at exit for the main thread), not on a new
    loop a call as ``asyncio.run`` would: an agent may keep clients bound to the loop (an
    ``httpx.AsyncClient``, an SDK's async client) from one call to the next, and a call
    costs what its trial costs. Tasks an agent leaves running go on in the next call of
    the same thread. A trial whose agent and user both run inline (they never await:
    the reference agent, the scripted user) is driven straight through, as the plugin
    drives it. Called from a thread whose event loop is running (inside ``async def``
    code), it raises RuntimeError: ``await arun_trial(...)`` there instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_trial() cannot be called from a running event loop; await arun_trial(...) with the same arguments")
    loop = _thread_loop()
    coro = arun_trial(domain, task, agent, user, **kwargs)
    if _DRIVE_INLINE and runs_inline(agent) and runs_inline(user) and kwargs.get("serve") is None:
        return _drive(loop, coro)
    return _run_on(loop, coro)


class _ThreadLoop:
    """A thread's event loop for :func:`run_trial`, closed as ``asyncio.run`` closes its
    loop (tasks left running cancelled, async generators and the default executor shut
    down) when the thread's state goes (the thread ended) or at exit."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        loop = self.loop
        if loop.is_closed() or loop.is_running():
            return
        try:
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in left:
                t.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter shutdown: nothing more to do
            pass


_LOOPS = threading.local()
_MAIN_LOOP: list[_ThreadLoop] = []  # the main thread's, closed at exit
# an inline trial driven without the loop's round trip: on Python 3.12 and later,
# asyncio.timeout (which wait_for uses) needs a task, which such a drive has not
_DRIVE_INLINE = sys.version_info < (3, 12)


def _thread_loop() -> asyncio.AbstractEventLoop:
    held: _ThreadLoop | None = getattr(_LOOPS, "held", None)
    if held is None or held.loop.is_closed():
        held = _LOOPS.held = _ThreadLoop()
        if threading.current_thread() is threading.main_thread():
            if not _MAIN_LOOP:
                atexit.register(_close_main_loop)
            _MAIN_LOOP[:] = [held]
    return held.loop


def _close_main_loop() -> None:
    for held in _MAIN_LOOP:
        held.close()


def _run_on(loop: asyncio.AbstractEventLoop, coro: Any) -> TrialResult:
    """The trial run to its end on ``loop``; on Ctrl-C (or anything else that stops the
    loop) its task is cancelled and unwound first, as ``asyncio.run`` does."""
    asyncio.set_event_loop(loop)
    task = loop.create_task(coro)
    try:
        result: TrialResult = loop.run_until_complete(task)
        return result
    except BaseException:
        if not task.done():
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
        raise
    finally:
        asyncio.set_event_loop(None)


def _drive(loop: asyncio.AbstractEventLoop, coro: Any) -> TrialResult:
    """A trial whose agent and user run inline: its coroutine sent once with ``loop`` as
    the running loop (what the trial schedules goes there); should it wait on something
    after all (a fault's latency), it goes on on the loop from there."""
    asyncio._set_running_loop(loop)
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        result: TrialResult = done.value
        return result
    except BaseException:
        coro.close()
        raise
    finally:
        asyncio._set_running_loop(None)
    return _run_on(loop, _go_on(coro, yielded))


async def _go_on(coro: Any, yielded: Any) -> TrialResult:
    """Drive ``coro``, suspended on the future ``yielded`` (or on a bare yield, None),
    to its end as a task of the running loop would."""
    while True:
        try:
            if yielded is None:
                await asyncio.sleep(0)
            else:
                yielded._asyncio_future_blocking = False
                await yielded  # done: the coroutine reads its result (or error) when resumed
        except asyncio.CancelledError as e:
            if not (yielded is not None and yielded.done()):  # this task cancelled: into the trial
                try:
                    yielded = coro.throw(e)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
                continue
        except BaseException:  # the future's own error, which the trial reads on resuming
            pass
        try:
            yielded = coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- issue 22, part B
# A trial that starts mid-way: its task's setup and history run before the first message,
# or, solo, the agent works from the task's ticket alone.


class _AgentNext(enum.Enum):
    """The type of :data:`_AGENT_NEXT` (an enum of one, so that type checkers narrow ``is``)."""

    AGENT_NEXT = 0


_AGENT_NEXT: Any = _AgentNext.AGENT_NEXT
"""The opening of a trial whose history ends with the user's message: nothing is said,
the agent speaks next."""


def _start(t: _Trial) -> str | None:
    """The task's setup and history on the trial's world, its log and conversation; why the
    trial errored, if a step failed (the domain's fault)."""
    try:
        run_start(t.domain, t.task, t.world, t.handlers, t.calls, t.transcript, t.conversation,
                  t.dual.after_step if t.dual is not None and t.dual.sync is not None else None)
    except StartFailed as e:
        return f"the domain failed starting the trial: {e}"
    return None


def _mid_way_opening(talk: _Dialogue, task: Task) -> tuple[Any, bool]:
    """The opening of a trial that starts mid-way, and whether the conversation closes
    after the agent's next turn. Solo: the ticket, and the trial ends after the agent's
    first reply (there is no simulated user to answer it). A history that ends with the
    user's message: nothing is said (the agent speaks next); with the agent's: None, so the
    simulated user is asked for its next message, having read the history."""
    if task.solo:
        # τ²'s solo agent also gets the user's tools; here it has the agent's (docs/spec.md, "Solo tasks")
        talk.ended_by = "solo"
        return task.ticket, True
    if task.history[-1].role == "user":
        return _AGENT_NEXT, False
    return None, False


# --------------------------------------------------------------------------- regrade


class NotReproducible(Exception):
    """A stored trial whose call log does not replay to what it recorded (the tools or the
    world differ from those it ran against, or a stored value was cut or redacted)."""


def _as_json(value: Any) -> Any:
    """A value as results.json holds it, for comparing a replayed result with a stored one."""
    import json

    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _replay_call(t: _Trial, stored: dict[str, Any]) -> None:
    """Run a stored call again, through the same path as the agent's call; raise
    NotReproducible when its outcome differs from the stored one."""
    t.turn = stored["turn"]
    t.calls_this_turn = 0
    args = stored["args"]
    raw = args["_raw"] if isinstance(args, dict) and list(args) == ["_raw"] else args
    at = len(t.calls)
    try:
        if stored.get("by") == "user":  # dual control: the user's call, through the user's path
            t.user_call(stored["tool"], raw)
        else:
            t.call_tool(stored["tool"], raw)
    except (_DomainBug, DualBug) as e:
        raise NotReproducible(f"call {stored['index'] + 1} {stored['tool']}: {e}") from None
    replayed = t.calls[at]
    for field in ("ok", "result", "error"):
        now, then = _as_json(replayed[field]), stored.get(field)
        if now != then:
            raise NotReproducible(
                f"call {stored['index'] + 1} {stored['tool']} gives {field} {_short(now)} when replayed, "
                f"{_short(then)} in the run"
            )


def _short(value: Any, limit: int = 160) -> str:
    text = format_value(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def regrade_trial(domain: Domain, task: Task, stored: TrialResult, reference: TrialResult | None) -> TrialResult:
    """``stored`` graded again against ``domain`` without any agent or user: its world
    rebuilt by replaying its transcript (tool calls through the domain's tools, each
    checked against the rules before it runs; agent replies scanned for disclosures),
    then its expectations graded. The agent's own failures (``runtime`` checks) stand.
    Raises NotReproducible when a replayed call's outcome differs from the stored one.
    ``reference`` is :func:`reference_trial`'s, for the attribution."""
    info = TrialInfo(domain.name, task.id, stored.trial, stored.k, stored.seed)
    t = _Trial(domain, task, info)
    try:
        apply_given(t.world, task)
    except (NotFound, Conflict) as e:
        raise NotReproducible(f"the task's given could not be applied: {e}") from None
    dual_error = _dual_start(t, task)  # dual control (issue 22 A)
    if dual_error is not None:
        raise NotReproducible(dual_error)
    started = 0
    if task.setup or task.history:  # issue 22, part B: the start made again, its entries not replayed
        error = _start(t)
        if error is not None:
            raise NotReproducible(error)
        started = len(t.transcript)
    baseline = t.world.savepoint()
    for entry in stored.transcript[started:]:
        if entry["role"] == "tool":
            _replay_call(t, stored.calls[entry["call"]])
        elif entry["role"] != "event":  # an event happens again in the replay of the call it follows
            t.turn = entry["turn"]
            t.say(entry["role"], entry["text"])
    checks = [c for c in stored.checks if c.kind == "runtime"] + _rule_checks(t.violations)
    error = _grade_expectations(t, checks)
    verdict = ERRORED if error is not None else _verdict(checks)
    calls = [dict(c, violations=now["violations"]) for c, now in zip(stored.calls, t.calls)]
    result = TrialResult(**{
        **{f: getattr(stored, f) for f in ("domain", "task", "trial", "k", "seed", "ended_by", "turns", "agent",
                                           "user", "transcript", "usage", "latency", "duration", "traceback")},
        "verdict": verdict,
        "tags": list(task.tags),
        "shared_tags": [tag for tag in task.tags if tag in domain.shared_tags],
        "pending": domain.pending_for(task),
        "critical": task.critical,
        "error": error,
        "calls": calls,
        "checks": checks,
        "violations": t.violations,
        "diff": split_diff(t.world.diff(baseline), domain),
        "soft": _soft_rules(t),
        "location": _moved(stored.location, task),
    })
    if verdict == FAILED:
        result.attribution = _likely_owner(domain, task, result, reference)
    return result


def _moved(location: str, task: Task) -> str:
    """``FILE:LINE`` of the task, with the line it has in the edited file."""
    file, sep, _ = location.rpartition(":")
    return f"{file}:{task.pos.line}" if sep and task.pos else location


def run_reference_trial(domain: Domain, task: Task) -> TrialResult | None:
    """Synchronous :func:`reference_trial` (for regrading outside an event loop)."""
    return asyncio.run(reference_trial(domain, task))
