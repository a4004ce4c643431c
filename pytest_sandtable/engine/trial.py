"""One trial: a fresh world, the simulated user speaks first, the agent under
test calls tools (each checked against the rules before it runs), then the
final world and the call log are graded."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import os
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

from ..domain.conditions import format_value
from ..domain.model import Domain, Invariant, Task
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
from .grading import grade
from .results import ERRORED, FAILED, PASSED, Check, TrialResult, Violation
from .rules import DisclosureScanner, check_call
from .tools import ArgError, coerce_args, run_checks, run_ops
from .world import Conflict, NotFound, World, seed_for

MAX_TOOL_CALLS_PER_TURN = 100


class _DomainBug(BaseException):
    """A rule or op of the domain raised: the trial is errored (not the agent's fault).
    BaseException so that an agent's `except Exception` does not swallow it."""


class _ToolBudgetExceeded(BaseException):
    """Raised out of call_tool to stop an agent stuck in a tool loop (BaseException so
    an agent's `except Exception` does not swallow it)."""


# frames of ours and of the machinery that calls agents are not the agent's
_NOT_THE_AGENTS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
    os.path.abspath(threading.__file__),
)


def _agent_traceback(e: BaseException) -> str:
    """The traceback of an agent's exception, without this package's own frames."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(_NOT_THE_AGENTS)]
    lines = traceback.format_list(frames[-20:]) + traceback.format_exception_only(type(e), e)
    return "".join(lines).rstrip()


def trial_seed(run_seed: int, domain: str, task: str, trial: int) -> int:
    """A per-trial seed derived stably from (run seed, domain, task, trial number)."""
    h = hashlib.sha256(f"{run_seed}\x1f{domain}\x1f{task}\x1f{trial}".encode()).digest()
    return int.from_bytes(h[:4], "big")


_Parts = tuple[list[ToolSpec], DisclosureScanner, dict[str, list[Invariant]]]
_PARTS: dict[int, tuple[Domain, _Parts]] = {}


def _domain_parts(domain: Domain) -> _Parts:
    """What every trial of a domain shares: tool specs, the disclosure scanner, and the
    call rules by the tool they are about (so a call checks only its own rules)."""
    hit = _PARTS.get(id(domain))
    if hit is None or hit[0] is not domain:
        specs = [ToolSpec(t.name, t.description, t.input_schema()) for t in domain.tools.values()]
        rules: dict[str, list[Invariant]] = {}
        for inv in domain.invariants:
            if inv.tool is not None:
                rules.setdefault(inv.tool, []).append(inv)
        hit = (domain, (specs, DisclosureScanner(domain), rules))
        _PARTS[id(domain)] = hit
    return hit[1]


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # an object whose class defines `async def __call__`
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004


async def _invoke(fn: Any, arg: Any, timeout: float | None, inline: bool) -> Any:
    """Call an agent or user. Async ones run on the loop; sync ones in a worker thread
    (so a hung one times out and the run goes on), except our own fast, known-safe ones."""
    if inline:
        value = fn(arg)
    elif _is_async(fn):
        value = _exits_guarded(fn, arg)
    else:
        value = await asyncio.wait_for(_in_daemon_thread(fn, arg), timeout)
    if inspect.isawaitable(value):
        return await asyncio.wait_for(_awaited(value), timeout)
    return value


class _AgentExit(Exception):
    """An agent or user raised SystemExit or KeyboardInterrupt. Carried as an ordinary
    exception: asyncio lets those two escape a task and tear down the event loop."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(repr(exc))
        self.exc = exc


def _exits_guarded(fn: Any, arg: Any) -> Any:
    try:
        return fn(arg)
    except (SystemExit, KeyboardInterrupt) as e:
        raise _AgentExit(e) from None


async def _awaited(aw: Any) -> Any:
    try:
        return await aw
    except (SystemExit, KeyboardInterrupt) as e:
        raise _AgentExit(e) from None


def _in_daemon_thread(fn: Any, arg: Any) -> asyncio.Future[Any]:
    """Run a sync call in a daemon thread: a hung agent can be abandoned at its timeout
    without holding the process open at exit (executor threads are joined at exit)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def work() -> None:
        try:
            value = ctx.run(fn, arg)
        except (SystemExit, KeyboardInterrupt) as e:
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, False, _AgentExit(e))
            return
        except BaseException as e:  # carried to the awaiting trial
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, False, e)
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=work, name="sandtable-agent", daemon=True).start()
    return fut


class _Deadline:
    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds if seconds else None

    def passed(self) -> bool:
        return self.end is not None and time.monotonic() > self.end

    def left(self) -> float | None:
        if self.end is None:
            return None
        return max(0.001, self.end - time.monotonic())


class _Trial:
    def __init__(self, domain: Domain, task: Task, info: TrialInfo) -> None:
        self.domain = domain
        self.task = task
        self.info = info
        self.world = World(seed_for(domain))
        self.tools, self.scanner, self.rules = _domain_parts(domain)
        self.calls: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self.violations: list[Violation] = []
        self.succeeded: list[tuple[str, Mapping[str, Any]]] = []
        self.turn = 0
        self.calls_this_turn = 0
        self.handed_off = False
        self.closed = False
        self.lock = threading.Lock()
        # the text conversation as agents' APIs see it, kept as the transcript grows
        self.conversation: list[dict[str, str]] = []

    def apply_given(self) -> None:
        for op in self.task.given:
            s = op.spec
            if op.kind == "update":
                self.world.update(s["table"], s["key"], s.get("set", {}))
            elif op.kind == "create":
                self.world.create(s["table"], s.get("row", {}))

    def call_tool(self, name: str, raw: Any) -> ToolResult:
        # an abandoned (timed-out) agent thread may still call in: the lock keeps it from
        # changing the world while the trial is graded, and `closed` turns it away after
        with self.lock:
            if self.closed:
                return ToolResult(False, error=410, message="the trial is over")
            return self._call_tool(name, raw)

    def _call_tool(self, name: str, raw: Any) -> ToolResult:
        self.calls_this_turn += 1
        if self.calls_this_turn > MAX_TOOL_CALLS_PER_TURN:
            raise _ToolBudgetExceeded()
        index = len(self.calls)
        tool = self.domain.tools.get(str(name))
        violations: list[Violation] = []
        args: Any = raw
        if tool is None:
            known = ", ".join(self.domain.tools)
            result = ToolResult(False, error=404, message=f"unknown tool {name!r}; the tools are {known}")
        else:
            try:
                args = coerce_args(tool, raw)
                bad = None
            except ArgError as e:
                bad = str(e)
            rule_args = args if isinstance(args, dict) else {}
            try:
                for inv in self.rules.get(tool.name, ()):
                    detail = check_call(inv, tool.name, rule_args, self.world, self.succeeded)
                    if detail:
                        violations.append(
                            Violation(inv.id, inv.kind, inv.soft, detail, self.turn, index, inv.source_quote)
                        )
                if bad is not None:
                    result = ToolResult(False, error=400, message=f"invalid arguments for {tool.name}: {bad}")
                else:
                    result = run_checks(tool, args, self.world) or run_ops(tool, args, self.world)
            except Exception as e:  # the domain's rules or ops, not the agent, went wrong
                raise _DomainBug(f"the domain failed running {tool.name}: {type(e).__name__}: {e}") from None
            if result.ok:
                self.succeeded.append((tool.name, args))
                if tool.handoff:
                    self.handed_off = True
        call: dict[str, Any] = {
            "index": index,
            "turn": self.turn,
            "tool": str(name),
            # recorded as JSON values: an agent may pass Decimal, datetime, UUID... (results travel as JSON)
            "args": _plain(args) if isinstance(args, dict) else {"_raw": _plain(args)},
            "ok": result.ok,
            "result": result.value if result.ok else None,
            "error": None if result.ok else {"code": result.error, "message": result.message},
            "violations": [v.invariant for v in violations],
        }
        self.calls.append(call)
        self.violations.extend(violations)
        self.transcript.append({"role": "tool", "call": index})
        return result

    def say(self, role: str, text: str) -> None:
        self.transcript.append({"role": role, "text": text, "turn": self.turn})
        self.conversation.append({"role": "user" if role == "user" else "assistant", "content": text})
        if role == "agent":
            for inv, detail in self.scanner.scan(text, self.world):
                self.violations.append(
                    Violation(inv.id, inv.kind, inv.soft, detail, self.turn, None, inv.source_quote)
                )


def _plain(x: Any) -> Any:
    """A JSON-compatible copy of a value (non-JSON leaves become their str())."""
    t = type(x)
    if t is str or t is int or t is float or t is bool or x is None:
        return x
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (int, float)):  # int/float subclasses, e.g. numpy scalars register as these
        return float(x) if isinstance(x, float) else int(x)
    return str(x)


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
) -> TrialResult:
    """Run one trial and grade it. Never raises for a failing agent or user: the
    agent's failures fail the trial with a `runtime` check; the simulated user's
    failures and domain bugs make it errored."""
    if isinstance(task, str):
        task = domain.task(task)
    from .reference import ReferenceAgent
    from .scripted_user import ScriptedUser

    if isinstance(agent, ReferenceAgent):
        agent = agent.for_task(task)
    agent_inline = isinstance(agent, ReferenceAgent)
    user_inline = isinstance(user, ScriptedUser)
    deadline = _Deadline(trial_timeout)
    system_prompt = domain.system_prompt()
    info = TrialInfo(domain.name, task.id, trial, k, trial_seed(run_seed, domain.name, task.id, trial))
    t = _Trial(domain, task, info)
    started = time.perf_counter()
    runtime: list[Check] = []
    error: str | None = None
    ended_by = ""
    latency: list[float] = []
    agent_traceback: str | None = None
    agent_usage, user_usage = Usage(), Usage()
    agent_state: dict[str, Any] = {}
    user_state: dict[str, Any] = {}
    spec = task.user

    async def ask_user() -> UserReply:
        ut = UserTurn(
            messages=list(t.conversation),
            persona=spec.persona,
            instructions=spec.instructions,
            opening=spec.opening,
            script=list(spec.script),
            trial=info,
            state=user_state,
            handed_off=t.handed_off,
            usage=user_usage,
        )
        try:
            r = await _invoke(user, ut, deadline.left(), user_inline)
        except (asyncio.TimeoutError, TimeoutError):
            raise TimeoutError(f"no answer before the trial timeout of {format_value(trial_timeout)}s") from None
        if isinstance(r, str):
            return UserReply(r)
        if not isinstance(r, UserReply):
            raise TypeError(f"the simulated user returned {type(r).__name__}, expected UserReply or str")
        return r

    try:
        t.apply_given()
    except (NotFound, Conflict) as e:
        error = f"the task's given could not be applied: {e}"
    baseline = t.world.savepoint()

    if error is None:
        try:
            first = UserReply(spec.opening) if spec.opening else await ask_user()
        except Exception as e:  # the simulated user's failure is not the agent's
            error = f"simulated user failed: {type(e).__name__}: {e}"
            first = UserReply("")
        if error is None and first.stop and not first.text.strip():
            error = f"simulated user ended the conversation before it started ({first.stop})"
        if error is None:
            t.say("user", first.text)
            closing = bool(first.stop)
            if closing:
                ended_by = first.stop or ""
            while True:
                t.turn += 1
                t.calls_this_turn = 0
                turn = Turn(
                    messages=list(t.conversation),
                    tools=t.tools,
                    system_prompt=system_prompt,
                    trial=info,
                    state=agent_state,
                    _call=t.call_tool,
                    usage=agent_usage,
                )
                t0 = time.perf_counter()
                try:
                    reply = await _invoke(agent, turn, deadline.left(), agent_inline)
                except _DomainBug as e:
                    error = str(e)
                    ended_by = "domain_error"
                    break
                except (SystemExit, _AgentExit) as e:
                    exc = e.exc if isinstance(e, _AgentExit) else e
                    what = (f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit)
                            else f"raised {type(exc).__name__}")
                    runtime.append(Check("runtime", "runtime", False, f"the agent {what}"))
                    ended_by = "agent_error"
                    break
                except _ToolBudgetExceeded:
                    runtime.append(Check("runtime", "runtime", False,
                                         f"the agent made more than {MAX_TOOL_CALLS_PER_TURN} tool calls in one turn"))
                    ended_by = "agent_error"
                    break
                except (asyncio.TimeoutError, TimeoutError):
                    runtime.append(Check("runtime", "runtime", False,
                                         f"the agent did not answer before the trial timeout of "
                                         f"{format_value(trial_timeout)}s (turn {t.turn})"))
                    ended_by = "agent_error"
                    break
                except AgentError as e:
                    runtime.append(Check("runtime", "runtime", False, str(e)))
                    ended_by = "agent_error"
                    break
                except Exception as e:
                    runtime.append(Check("runtime", "runtime", False, f"the agent raised {type(e).__name__}: {e}"))
                    agent_traceback = _agent_traceback(e)
                    ended_by = "agent_error"
                    break
                latency.append(time.perf_counter() - t0)
                if deadline.passed():
                    # an async agent that blocks the event loop cannot be interrupted; judge it after the fact
                    runtime.append(Check("runtime", "runtime", False,
                                         f"the agent did not answer before the trial timeout of "
                                         f"{format_value(trial_timeout)}s (turn {t.turn}; it blocked the event "
                                         f"loop, so it could not be stopped earlier)"))
                    ended_by = "agent_error"
                    break
                if reply is not None and not isinstance(reply, str):
                    runtime.append(Check("runtime", "runtime", False,
                                         f"the agent returned {type(reply).__name__}, expected a str reply"))
                    ended_by = "agent_error"
                    break
                t.say("agent", reply or "")
                if closing:
                    break
                if t.handed_off:
                    ended_by = "handoff"
                    break
                if t.turn >= task.max_turns:
                    ended_by = "max_turns"
                    break
                try:
                    ur = await ask_user()
                except Exception as e:
                    error = f"simulated user failed: {type(e).__name__}: {e}"
                    break
                if ur.stop:
                    ended_by = ur.stop
                    if not ur.text.strip():
                        break
                    closing = True
                t.say("user", ur.text)

    with t.lock:
        t.closed = True
    checks: list[Check] = list(runtime)
    hard: dict[str, list[Violation]] = {}
    for v in t.violations:
        if not v.soft:
            hard.setdefault(v.invariant, []).append(v)
    for inv_id, vs in hard.items():
        more = f" (and {len(vs) - 1} more)" if len(vs) > 1 else ""
        checks.append(Check("invariant", inv_id, False, vs[0].detail + more))
    agent_texts = [e["text"] for e in t.transcript if e["role"] == "agent"]
    if error is None:
        try:
            checks.extend(grade(task.expect, t.world, t.calls, agent_texts))
        except Exception as e:  # an expectation of the domain went wrong, not the agent
            error = f"the domain failed grading the trial: {type(e).__name__}: {e}"
    if error is not None:
        verdict = ERRORED
    else:
        verdict = PASSED if all(c.passed for c in checks) else FAILED
    attempted = {c["tool"] for c in t.calls}
    broken = {v.invariant for v in t.violations if v.soft}
    soft = {
        inv.id: {
            "tool": inv.tool,
            "applied": inv.tool is None or inv.tool in attempted,
            "broken": inv.id in broken,
        }
        for inv in domain.invariants
        if inv.soft
    }
    return TrialResult(
        soft=soft,
        traceback=agent_traceback,
        domain=domain.name,
        task=task.id,
        trial=trial,
        k=k,
        seed=info.seed,
        verdict=verdict,
        tags=list(task.tags),
        critical=task.critical,
        error=error,
        ended_by=ended_by,
        turns=t.turn,
        agent=agent_name,
        user=user_name,
        transcript=t.transcript,
        calls=t.calls,
        checks=checks,
        violations=t.violations,
        diff=t.world.diff(baseline),
        usage={"agent": agent_usage.to_dict(), "user": user_usage.to_dict()},
        latency=[round(x, 6) for x in latency],
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
