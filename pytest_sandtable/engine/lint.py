"""`python -m pytest_sandtable lint`: find weak tasks before a model-backed run.

For every task it replays the task's `reference` with the scripted user and
reports what would make a score misleading:

- the reference does not fit in the turns the scripted user gives it;
- the reference fails its own expectations or breaks a rule (the task, not the
  agent, is wrong); a reference call that returns an error is noted;
- a rule did not apply to a reference call because a record it points at does
  not exist (`require`, `limit`, `match`);
- a script line with `when` that the reference never triggers (its condition
  has a typo, or the reference does not rehearse that branch);
- a fault or an event of the task that the reference never reaches (it makes fewer
  calls of the tool than the fault or event waits for), or an event it skips;
- the task passes when the agent does nothing (its expectations do not tell
  success from silence: τ-bench users' most common grading complaint), unless
  the task says that nothing should happen (`expect_nothing: true`);
- the task has no reference at all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..domain.conditions import ABSENT, format_value, resolve
from ..domain.model import CallMatcher, Domain, Event, Fault, ScriptLine, Task
from ..domain.wording import show
from .api import Turn, UserReply, UserTurn
from .faults import apply_event, counted
from .handlers import HandlerState, run_tool
from .reference import ReferenceAgent
from .results import TrialResult
from .scripted_user import ScriptedUser
from .tools import coerce_args
from .trial import apply_given, run_trial
from .world import World, seed_for

ERROR = "error"
WARNING = "warning"
NOTE = "note"


@dataclass(frozen=True)
class Finding:
    level: str
    file: str
    line: int
    task: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.level}: {self.task}: {self.message}"


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _silent_agent(turn: Turn) -> str:
    return ""


def passes_when_silent(domain: Domain, task: Task) -> bool:
    """Whether ``task`` passes when the agent never calls a tool and says nothing, against
    the task's scripted user: lint's check, and ``mutate``'s do-nothing baseline."""
    return run_trial(domain, task, _silent_agent, ScriptedUser(), wait_latency=False).verdict == "passed"


class _TracingUser:
    """The scripted user, noting which script lines it said (by index)."""

    name = "scripted"
    inline = True

    def __init__(self) -> None:
        self.user = ScriptedUser()
        self.said: set[int] = set()

    def __call__(self, turn: UserTurn) -> UserReply:
        index, reply = self.user.next_line(turn)
        if index is not None:
            self.said.add(index)
        self.said.update(turn.state.get("script_said", ()))  # dual control: call lines said on the way
        return reply


def _unresolved(domain: Domain, tool: str, args: dict[str, Any], world_get: Any) -> list[str]:
    """Rules of `tool` that do not apply to these args because a record is missing."""
    out = []
    for inv in domain.invariants:
        if inv.tool != tool or inv.kind not in ("require", "limit", "match"):
            continue
        refs: list[dict[str, Any]] = []
        s = inv.spec
        if inv.kind == "require":
            refs.append(s["record"])
        elif inv.kind == "match":
            refs += [s["left"], s["right"]]
        else:
            refs += [s[op] for op in ("lt", "lte", "gt", "gte") if isinstance(s.get(op), dict)]
        # `require` with `each`: one record per element of the array argument, as `$item`
        items = args.get(s["each"]) if inv.kind == "require" and "each" in s else None
        arg_sets = [{**args, "item": x} for x in items] if isinstance(items, list) else [args]
        for ref in refs:
            for one in arg_sets:
                key = resolve(ref.get("key"), one)
                if key is ABSENT:
                    out.append(f"rule {inv.id} did not apply: the call gave no {ref.get('key')}")
                elif world_get(ref["table"], key) is None:
                    out.append(f"rule {inv.id} did not apply: {ref['table']} {format_value(key)} does not exist")
    return out


def lint_task(domain: Domain, task: Task) -> list[Finding]:
    """What would make this task's score misleading (see the module's docstring)."""
    file = domain.path or "<string>"
    line = task.pos.line if task.pos else 0
    if not task.user.opening and not task.user.script and not task.solo:  # (issue 22: a solo task has no user)
        found = [(ERROR, "the scripted user has nothing to say: give user.opening or user.script")]
        return [Finding(level, file, line, task.id, message) for level, message in found]
    user = _TracingUser()
    found, replay = _reference_findings(domain, task, user)
    findings = [Finding(level, file, line, task.id, message) for level, message in found]
    if task.reference:
        findings += [
            Finding(level, file, at or line, task.id, message)
            for level, at, message in _untriggered_lines(task, user.said)
        ]
    if replay is not None:
        findings += [Finding(WARNING, file, at or line, task.id, message) for at, message in _unreached(task, replay)]
    findings += [Finding(level, file, line, task.id, message) for level, message in _silence_findings(domain, task)]
    return findings


def _reacts(task: Task) -> bool:
    """Whether the scripted user's lines depend on the conversation (`when` lines or
    `say_unknown`): then only a replay tells how many turns the reference gets."""
    return task.user.say_unknown is not None or any(line.when is not None for line in task.user.script)


def _reference_findings(
    domain: Domain, task: Task, user: _TracingUser
) -> tuple[list[tuple[str, str]], TrialResult | None]:
    """(level, message) for a reference that does not fit in its turns, errors, fails
    its own task or breaks a rule, or that rules silently did not apply to; and the
    reference's replay (None without a reference)."""
    if not task.reference:
        return [(NOTE, "no reference: the reference agent cannot rehearse this task and lint cannot check it")], None
    found: list[tuple[str, str]] = []
    says = sum(1 for s in task.reference if s.say is not None)
    user_lines = (1 if task.user.opening else 0) + len(task.user.script)
    if says > task.max_turns:
        found.append((ERROR, f"the reference has {_n(says, 'reply', 'replies')} but max_turns allows "
                             f"{_n(task.max_turns, 'agent turn')}"))
    elif says > user_lines and not _reacts(task):
        found.append((ERROR, f"the reference has {_n(says, 'reply', 'replies')} but the scripted user says "
                             f"{_n(user_lines, 'line')} (opening and script), so it gets {_n(user_lines, 'turn')}"))
    result = run_trial(domain, task, ReferenceAgent(), user, wait_latency=False)
    if _reacts(task):
        found += _ended_early(result, says)
    if result.error:
        found.append((ERROR, f"the reference trial errored: {result.error}"))
    for call in result.calls:
        if not call["ok"] and not call.get("fault"):  # a fault's error is the task's point
            err = call["error"] or {}
            found.append((NOTE, f"reference call {call['index'] + 1} {call['tool']} returns an error "
                                f"({err.get('code')} {err.get('message')}); fine if the task is about that"))
    for v in result.violations:
        level = NOTE if v.soft else ERROR
        found.append((level, f"the reference breaks {'soft ' if v.soft else ''}rule {v.invariant}: {v.detail}"))
    for c in result.failed_checks:
        if c.kind != "invariant":
            found.append((ERROR, f"the reference fails its own expectation {c.id}: {c.detail}"))
    return found + _unapplied_rules(domain, task, result), result


def _ended_early(result: TrialResult, says: int) -> list[tuple[str, str]]:
    """A reacting scripted user that ended the conversation before the reference said
    all its replies: the reference cannot finish."""
    replies = sum(1 for e in result.transcript if e["role"] == "agent")
    if result.ended_by != "script_end" or replies >= says:
        return []
    return [(ERROR, f"the scripted user ends the conversation after {_n(replies, 'reply', 'replies')} of the "
                    f"reference's {says}: no script line applies to reply {replies} "
                    "(or a line with `end: true` did), so the reference cannot finish")]


def _untriggered_lines(task: Task, said: set[int]) -> list[tuple[str, int | None, str]]:
    """(level, line, message) for the script lines with `when` that the reference's replay
    never said: a typo in its condition, or a branch the reference does not rehearse. A warning
    each, but for the call lines of a user tool no `called` expectation of the user's names: those
    are what the caller does when an agent asks for something the reference never asks (an
    imported τ² telecom task's caller follows any instruction it knows), one note for them all."""
    expected = [m for m in task.expect.called if m.by == "user"]
    out: list[tuple[str, int | None, str]] = []
    idle: list[str] = []
    for i, line in enumerate(task.user.script):
        if line.when is None or i in said:
            continue
        if line.call is not None and not any(_may_match(m, line) for m in expected):
            idle.append(line.call)
            continue
        what = show(line.say) if line.call is None else f"call {line.call}"
        out.append((WARNING, line.pos.line if line.pos else None,
                    f"script line {i + 1} ({what}) is never said when the reference runs: its `when` never holds "
                    "(a typo, or a branch the reference does not take)"))
    if idle:
        tools = list(dict.fromkeys(idle))
        shown = ", ".join(tools[:4]) + (f" and {len(tools) - 4} more" if len(tools) > 4 else "")
        out.append((NOTE, task.pos.line if task.pos else None,
                    f"{_n(len(idle), 'call line')} of the scripted user never said when the reference runs "
                    f"({shown}): what the caller does if an agent asks for it; no expectation needs them"))
    return out


def _may_match(matcher: CallMatcher, line: ScriptLine) -> bool:
    """Whether a user's ``called`` matcher may match the call a script line makes (an argument
    condition other than a plain value is taken to match)."""
    args = line.args or {}
    return matcher.tool == line.call and all(
        isinstance(want, dict) or args.get(name) == want for name, want in (matcher.args or {}).items())


def _unapplied_rules(domain: Domain, task: Task, result: TrialResult) -> list[tuple[str, str]]:
    """Rules that silently did not apply to the reference's calls, found by replaying its
    writes (and the task's events) in order so that each call sees the world it saw in
    the trial."""
    world = World(seed_for(domain))
    apply_given(world, task)
    handlers = HandlerState(domain, task, result.seed)  # a handler tool replays as it ran
    found: list[tuple[str, str]] = []
    for entry in result.transcript:
        if entry["role"] == "event":
            apply_event(world, task.events[entry["event"] - 1])
            continue
        if entry["role"] != "tool":
            continue
        call = result.calls[entry["call"]]
        tool = domain.tools.get(call["tool"])
        if tool is None:
            continue
        for msg in _unresolved(domain, tool.name, call["args"], world.get):
            found.append((WARNING, f"reference call {call['index'] + 1} {tool.name}: {msg}"))
        fault = call.get("fault") or {}
        if fault.get("kind") and not fault.get("after_commit"):
            continue  # the fault refused the call before the tool ran
        try:
            args = coerce_args(tool, call["args"])
        except Exception:
            continue
        run_tool(tool, args, world, handlers, call["index"])
    return found


def _unreached(task: Task, replay: TrialResult) -> list[tuple[int | None, str]]:
    """(line, message) for each fault and event of the task that the reference's replay
    never reaches, and each event it skips: a typo in the call number, or a reference
    that does not rehearse what the task is about."""
    made = Counter(c["tool"] for c in replay.calls if counted(c))
    out: list[tuple[int | None, str]] = []
    for f in task.faults:
        missed = [] if f.every or f.fraction is not None else [n for n in f.calls if n > made[f.tool]]
        if missed or made[f.tool] == 0:
            out.append((f.pos.line if f.pos else None,
                        f"fault {f.index} ({_fault_words(f, missed)}) is never reached when the reference runs: "
                        f"it makes {_n(made[f.tool], 'call')} of {f.tool}"))
    skipped = {e["event"]: e["skipped"] for e in replay.transcript if e["role"] == "event" and "skipped" in e}
    for ev in task.events:
        where = ev.pos.line if ev.pos else None
        if made[ev.tool] < ev.call:
            out.append((where, f"event {ev.index} ({_event_words(ev)}) never happens when the reference runs: "
                               f"it makes {_n(made[ev.tool], 'call')} of {ev.tool}"))
        elif ev.index in skipped:
            out.append((where, f"event {ev.index} ({_event_words(ev)}) is skipped when the reference runs: "
                               f"{skipped[ev.index]}"))
    return out


def _fault_words(f: Fault, missed: list[int]) -> str:
    """``timeout of book_load, call 2``"""
    what = f"{f.kind or 'latency'} of {f.tool}"
    if missed:
        return f"{what}, call{'s' if len(missed) > 1 else ''} {', '.join(map(str, missed))}"
    return what


def _event_words(ev: Event) -> str:
    """``update loads after call 2 of search_loads``"""
    return f"{ev.op} {ev.spec['table']} after call {ev.call} of {ev.tool}"


def _silence_findings(domain: Domain, task: Task) -> list[tuple[str, str]]:
    """(level, message) when the task's expectations do not tell success from silence."""
    e = task.expect
    if not (e.state or e.called or e.reply_includes or e.not_called or e.world_matches_reference):
        return [(WARNING, "has no expectations: any agent that breaks no rule passes it")]
    if not passes_when_silent(domain, task):
        if task.expect_nothing:
            return [(NOTE, "fails when the agent does nothing, so `expect_nothing: true` changes nothing here")]
        return []
    if task.expect_nothing:
        return [(NOTE, "passes when the agent does nothing, as `expect_nothing: true` says it should")]
    positive = bool(e.called or e.reply_includes) or any(
        s.key is None and (s.count is None or s.count >= 1) for s in e.state
    )
    if positive:
        return [(WARNING, "passes when the agent does nothing: its expectations hold in the untouched "
                          "world; expect something only a correct conversation reaches, or, when "
                          "nothing should happen in this task, say so with `expect_nothing: true`")]
    return [(NOTE, "passes when the agent does nothing (every expectation says what must not "
                   "happen); a `called` expectation would check the agent engaged")]


def lint_domain(domain: Domain) -> list[Finding]:
    out: list[Finding] = []
    for task in domain.tasks:
        out.extend(lint_task(domain, task))
    return out
