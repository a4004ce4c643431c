"""One trial: a fresh world, the simulated user speaks first, the agent under
test calls tools (each checked against the rules before it runs), then the
final world and the call log are graded."""

from __future__ import annotations

import asyncio
import hashlib
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
    ToolResult,
    ToolSpec,
    TrialInfo,
    Turn,
    Usage,
    UserCallable,
    UserReply,
    UserTurn,
)
from .attribution import attribute
from .faults import TrialFaults, apply_event, event_entry, fault_error, fault_record
from .grading import grade
from .handlers import HandlerBug, HandlerState, run_tool
from .invoke import Deadline, EngineStop, _AgentExit, agent_traceback, exception_text, invoke
from .reference import ReferenceAgent
from .reference_world import grade_world_matches_reference
from .results import ERRORED, FAILED, PASSED, Check, TrialResult, Violation
from .rules import DisclosureScanner, check_call
from .scripted_user import ScriptedUser
from .tools import ArgError, coerce_args, plain_arguments, text_of
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


class _DomainParts:
    """What every trial of a domain shares, made on its first trial in the process (kept
    here, not in the domain, which the domain cache pickles): the tool specs, the
    disclosure scanner, the call rules by the tool they are about (so a call checks only
    its own rules), the system prompt, the soft rules and whether any rule is pending."""

    __slots__ = ("domain", "rules", "scanner", "soft", "system_prompt", "tools")

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.tools = [ToolSpec(t.name, t.description, t.input_schema()) for t in domain.tools.values()]
        self.scanner = DisclosureScanner(domain)
        self.rules: dict[str, list[Invariant]] = {}
        for inv in domain.invariants:
            if inv.tool is not None:
                self.rules.setdefault(inv.tool, []).append(inv)
        self.system_prompt = domain.system_prompt()
        self.soft = [inv for inv in domain.invariants if inv.soft]


_PARTS: dict[int, _DomainParts] = {}


def _domain_parts(domain: Domain) -> _DomainParts:
    hit = _PARTS.get(id(domain))
    if hit is None or hit.domain is not domain:
        hit = _PARTS[id(domain)] = _DomainParts(domain)
    return hit


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

    def __init__(self, domain: Domain, task: Task, info: TrialInfo) -> None:
        self.domain = domain
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
        # the text conversation as agents' APIs see it, kept as the transcript grows
        self.conversation: list[dict[str, str]] = []

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

    def raise_stop(self) -> None:
        """Raise the stop a served call met during the agent's turn, if one did."""
        if self.stop is not None:
            raise self.stop

    def _call_tool(self, name: str, raw: Any) -> ToolResult:
        self.calls_this_turn += 1
        if self.calls_this_turn > MAX_TOOL_CALLS_PER_TURN:
            raise _ToolBudgetExceeded()
        index = len(self.calls)
        name = name if isinstance(name, str) else text_of(name)
        tool = self.domain.tools.get(name)
        violations: list[Violation] = []
        args: Any = raw
        n, fault = 0, None
        if tool is None:
            known = ", ".join(self.domain.tools)
            result = ToolResult(False, error=404, message=f"unknown tool {name!r}; the tools are {known}")
        else:
            try:
                args = coerce_args(tool, raw)
            except ArgError as e:  # not a violation: the rules are about calls that could run
                result = ToolResult(False, error=400, message=f"invalid arguments for {tool.name}: {e}")
            else:
                n = 0 if self.faults is None else self.faults.count(tool.name)
                result, fault = self._run(tool, args, index, violations, n)
        recorded = plain_arguments(args)[0]
        call: dict[str, Any] = {
            "index": index,
            "turn": self.turn,
            "tool": name,
            # recorded as JSON values: an agent may pass Decimal, datetime, UUID... (results travel as JSON)
            "args": recorded if isinstance(recorded, dict) else {"_raw": recorded},
            "ok": result.ok,
            "result": result.value if result.ok else None,
            "error": None if result.ok else {"code": result.error, "message": result.message},
            "violations": [v.invariant for v in violations],
        }
        if fault is not None:  # only a faulted call has the key: results without faults stay as they were
            call["fault"] = fault
        self.calls.append(call)
        self.violations.extend(violations)
        self.transcript.append({"role": "tool", "call": index})
        if n and self.faults is not None:
            self._events_after(name, n, index)
        return result

    def _run(
        self, tool: Tool, args: dict[str, Any], index: int, violations: list[Violation], n: int
    ) -> tuple[ToolResult, dict[str, Any] | None]:
        """A call with valid arguments, the ``n``-th of its tool (0 when the task has no
        faults or events): its rules checked (what they find added to ``violations``),
        then the tool run, unless a fault of the task takes the call. With the fault's
        record for the call log, when one did."""
        self._check_rules(tool, args, index, violations)
        fault = None if not n or self.faults is None else self.faults.fault(tool.name, n)
        landed: bool | None = None
        if fault is None:
            result = self._run_tool(tool, args, index)
        elif fault.kind is not None and not fault.after_commit:  # refused before the tool runs
            result = fault_error(fault)
        else:  # latency alone, or an error after the tool ran and its writes landed
            result = self._run_tool(tool, args, index)
            if fault.kind is not None:
                landed, result = result.ok, fault_error(fault)
        if result.ok:
            self.succeeded.append((tool.name, args))
            if tool.handoff:
                self.handed_off = True
        if fault is None:
            return result, None
        self.delay = fault.latency_ms / 1000
        return result, fault_record(fault, landed)

    def _check_rules(self, tool: Tool, args: dict[str, Any], index: int, violations: list[Violation]) -> None:
        """The call's rules, checked on the world as the call finds it (a faulted call too)."""
        try:
            for inv in self.rules.get(tool.name, ()):
                detail = check_call(inv, tool.name, args, self.world, self.succeeded)
                if detail:
                    violations.append(Violation(inv.id, inv.kind, inv.soft, detail, self.turn, index, inv.source_quote))
        except Exception as e:  # the domain's rules, not the agent, went wrong
            raise _DomainBug(f"the domain failed running {tool.name}: {type(e).__name__}: {e}") from None

    def _run_tool(self, tool: Tool, args: dict[str, Any], index: int) -> ToolResult:
        """The tool itself: its checks, then its ops or its handler."""
        try:
            return run_tool(tool, args, self.world, self.handlers, index)
        except HandlerBug as e:  # its text says what the handler did, with its traceback
            raise _DomainBug(f"the domain failed running {tool.name}: {e}") from None
        except Exception as e:  # the domain's ops, not the agent, went wrong
            raise _DomainBug(f"the domain failed running {tool.name}: {type(e).__name__}: {e}") from None

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
        with self.lock:
            self.closed = True

    def say(self, role: str, text: str) -> None:
        self.transcript.append({"role": role, "text": text, "turn": self.turn})
        self.conversation.append({"role": "user" if role == "user" else "assistant", "content": text})
        if role == "agent":
            for inv, detail in self.scanner.scan(text, self.world):
                self.violations.append(
                    Violation(inv.id, inv.kind, inv.soft, detail, self.turn, None, inv.source_quote)
                )


class _Dialogue:
    """The simulated user and the agent under test taking turns over a trial, and how
    that ended: `ended_by`, the agent's failure as a `runtime` check, or `error` when
    the trial is errored (the user or the domain failed, not the agent)."""

    def __init__(self, t: _Trial, agent: AgentCallable, user: UserCallable, deadline: Deadline) -> None:
        self.t = t
        self.agent = agent
        self.user = user
        self.deadline = deadline
        self.system_prompt = t.parts.system_prompt
        self.runtime: list[Check] = []
        self.error: str | None = None
        self.ended_by = ""
        self.latency: list[float] = []
        self.agent_traceback: str | None = None
        self.agent_usage, self.user_usage = Usage(), Usage()
        self.agent_state: dict[str, Any] = {}
        self.user_state: dict[str, Any] = {}
        self.script = [line.say for line in t.task.user.script]  # each user turn gets a copy

    async def run(self) -> None:
        """The user speaks first; then the agent and the user take turns until the
        conversation ends. A closing message with text still gets one last agent turn."""
        first = await self._opening()
        if first is None:
            return
        self.t.say("user", first.text)
        closing = bool(first.stop)
        if closing:
            self.ended_by = first.stop or ""
        while True:
            if not await self._agent_turn() or closing:
                return
            if self.t.handed_off:
                self.ended_by = "handoff"
                return
            if self.t.turn >= self.t.task.max_turns:
                self.ended_by = "max_turns"
                return
            reply = await self._user_says()
            if reply is None:
                return
            if reply.stop:
                self.ended_by = reply.stop
                if not reply.text.strip():
                    return
                closing = True
            self.t.say("user", reply.text)

    async def _opening(self) -> UserReply | None:
        """The user's first message (the task's fixed opening, if it has one), or None
        when the trial is errored before the conversation starts."""
        opening = self.t.task.user.opening
        first = UserReply(opening) if opening else await self._user_says()
        if first is None:
            return None
        if first.stop and not first.text.strip():
            self.error = f"simulated user ended the conversation before it started ({first.stop})"
            return None
        return first

    async def _user_says(self) -> UserReply | None:
        """The user's next message, or None when the user failed: the trial is then
        errored, since the simulated user's failure is not the agent's."""
        try:
            return await self._ask_user()
        except Exception as e:
            self.error = f"simulated user failed: {exception_text(e)}"
            return None

    async def _ask_user(self) -> UserReply:
        spec = self.t.task.user
        ut = UserTurn(
            messages=list(self.t.conversation),
            persona=spec.persona,
            instructions=spec.instructions,
            opening=spec.opening,
            script=list(self.script),
            trial=self.t.info,
            state=self.user_state,
            handed_off=self.t.handed_off,
            usage=self.user_usage,
            lines=list(spec.script),
            say_unknown=spec.say_unknown,
            calls=list(self.t.calls),
        )
        try:
            r = await invoke(self.user, ut, self.deadline.left())
        except (asyncio.TimeoutError, TimeoutError):
            raise TimeoutError(f"no answer before {self._trial_timeout()}") from None
        if isinstance(r, str):
            return UserReply(r)
        if not isinstance(r, UserReply):
            raise TypeError(f"the simulated user returned {type(r).__name__}, expected UserReply or str")
        return r

    async def _agent_turn(self) -> bool:
        """One agent turn, its reply said; False when the turn ended the trial instead
        (the agent failed, or the domain did while running one of its tool calls)."""
        t = self.t
        t.turn += 1
        t.calls_this_turn = 0
        turn = Turn(
            messages=list(t.conversation),
            tools=t.tools,
            system_prompt=self.system_prompt,
            trial=t.info,
            state=self.agent_state,
            _call=t.call_tool,
            _wait=t.wait_owed,
            usage=self.agent_usage,
            tools_url=t.tools_url,
            mcp_url=t.mcp_url,
        )
        t0 = time.perf_counter()
        answered: list[float] = []  # when the answer was there (see invoke)
        try:
            reply = await invoke(self.agent, turn, self.deadline.left(), answered)
            t.raise_stop()  # a served call of this turn met a domain bug or the tool budget
            # latency faults of calls an async agent made with call_tool on the loop: the turn
            # takes that long, as it would have against the slow dependency
            if t.owed:
                await asyncio.wait_for(t.wait_owed(), self.deadline.left())
                answered.clear()
        except _DomainBug as e:
            self.error = str(e)
            self.ended_by = "domain_error"
            return False
        except (_ToolBudgetExceeded, Exception) as e:  # the trial's own cancellation goes on up
            self._agent_raised(e)
            return False
        self.latency.append((answered[-1] if answered else time.perf_counter()) - t0)
        if self.deadline.passed():
            # an async agent that blocks the event loop cannot be interrupted; judge it after the fact
            self._agent_failed(self._too_late("; it blocked the event loop, so it could not be stopped earlier"))
            return False
        if reply is not None and not isinstance(reply, str):
            self._agent_failed(f"the agent returned {type(reply).__name__}, expected a str reply")
            return False
        t.say("agent", reply or "")
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


def _grade_expectations(t: _Trial, checks: list[Check]) -> str | None:
    """Add the checks of the task's expectations; why grading errored, if it did."""
    agent_texts = [e["text"] for e in t.transcript if e["role"] == "agent"]
    try:
        checks.extend(grade(t.task.expect, t.world, t.calls, agent_texts))
        checks.extend(grade_world_matches_reference(t.domain, t.task, t.world, t.info.seed, apply_given))
    except Exception as e:  # an expectation of the domain went wrong, not the agent
        return f"the domain failed grading the trial: {type(e).__name__}: {e}"
    return None


def _soft_rules(t: _Trial) -> dict[str, dict[str, Any]]:
    """Each soft rule: its tool, whether it applied (the trial tried that tool) and whether it was broken."""
    if not t.parts.soft:
        return {}
    attempted = {c["tool"] for c in t.calls}
    broken = {v.invariant for v in t.violations if v.soft}
    return {
        inv.id: {
            "tool": inv.tool,
            "applied": inv.tool is None or inv.tool in attempted,
            "broken": inv.id in broken,
        }
        for inv in t.parts.soft
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
) -> TrialResult:
    """Run one trial and grade it. Never raises for a failing agent or user: the
    agent's failures fail the trial with a `runtime` check; the simulated user's
    failures and domain bugs make it errored. A failed trial carries its likely owner
    (:mod:`.attribution`). With ``serve``, the trial's world is served while it runs
    (``turn.tools_url`` / ``turn.mcp_url``); a world that cannot be served errors the trial.
    ``wait_latency=False`` records a task's ``latency_ms`` faults without waiting them out
    (the engine's own replays: lint, the reference replay of attribution)."""
    if isinstance(task, str):
        task = domain.task(task)
    result = await _graded_trial(
        domain, task, agent, user, trial=trial, k=k, run_seed=run_seed, agent_name=agent_name,
        user_name=user_name, trial_timeout=trial_timeout, location=location, serve=serve,
        wait_latency=wait_latency,
    )
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
    if task.reference and (task.user.opening or task.user.script):
        replay = await _graded_trial(domain, task, ReferenceAgent(), ScriptedUser(), agent_name="reference",
                                     user_name="scripted", wait_latency=False)
        found = None if replay.verdict == ERRORED else replay
    _REFERENCES[(id(domain), task.id)] = (domain, found)
    return found


async def _graded_trial(
    domain: Domain,
    task: Task,
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
) -> TrialResult:
    """:func:`arun_trial` without the attribution (the reference replay is one of these)."""
    # The engine binds its own reference agent to the task, so this is a check of its class,
    # not of a capability: the task's reference path is hidden data no outside agent may get.
    if isinstance(agent, ReferenceAgent):
        agent = agent.for_task(task)
    deadline = Deadline(trial_timeout)
    info = TrialInfo(domain.name, task.id, trial, k, trial_seed(run_seed, domain.name, task.id, trial))
    t = _Trial(domain, task, info)
    t.wait_latency = wait_latency
    talk = _Dialogue(t, agent, user, deadline)
    started = time.perf_counter()

    error: str | None = None
    try:
        apply_given(t.world, task)
    except (NotFound, Conflict) as e:
        error = f"the task's given could not be applied: {e}"
    baseline = t.world.savepoint()
    if error is None:
        error = await _talk(t, talk, serve)
    t.close()

    checks = talk.runtime + _rule_checks(t.violations)
    if error is None:
        error = _grade_expectations(t, checks)
    if error is not None:
        verdict = ERRORED
    else:
        verdict = PASSED if all(c.passed for c in checks) else FAILED
    return TrialResult(
        soft=_soft_rules(t),
        traceback=talk.agent_traceback,
        domain=domain.name,
        task=task.id,
        trial=trial,
        k=k,
        seed=info.seed,
        verdict=verdict,
        tags=list(task.tags),
        shared_tags=[tag for tag in task.tags if tag in domain.shared_tags],
        pending=domain.pending_for(task),
        critical=task.critical,
        error=error,
        ended_by=talk.ended_by,
        turns=t.turn,
        agent=agent_name,
        user=user_name,
        transcript=t.transcript,
        calls=t.calls,
        checks=checks,
        violations=t.violations,
        diff=t.world.diff(baseline),
        usage={"agent": talk.agent_usage.to_dict(), "user": talk.user_usage.to_dict()},
        latency=[round(x, 6) for x in talk.latency],
        duration=round(time.perf_counter() - started, 6),
        location=location,
    )


def run_trial(
    domain: Domain,
    task: Task | str,
    agent: AgentCallable,
    user: UserCallable,
    **kwargs: Any,
) -> TrialResult:
    """Synchronous :func:`arun_trial` (for scripts and tests outside an event loop)."""
    return asyncio.run(arun_trial(domain, task, agent, user, **kwargs))


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
    try:
        t.call_tool(stored["tool"], raw)
    except _DomainBug as e:
        raise NotReproducible(f"call {stored['index'] + 1} {stored['tool']}: {e}") from None
    replayed = t.calls[-1]
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
    baseline = t.world.savepoint()
    for entry in stored.transcript:
        if entry["role"] == "tool":
            _replay_call(t, stored.calls[entry["call"]])
        elif entry["role"] != "event":  # an event happens again in the replay of the call it follows
            t.turn = entry["turn"]
            t.say(entry["role"], entry["text"])
    checks = [c for c in stored.checks if c.kind == "runtime"] + _rule_checks(t.violations)
    error = _grade_expectations(t, checks)
    verdict = ERRORED if error is not None else (PASSED if all(c.passed for c in checks) else FAILED)
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
        "diff": t.world.diff(baseline),
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
