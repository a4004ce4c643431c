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
- the task passes when the agent does nothing (its expectations do not tell
  success from silence: τ-bench users' most common grading complaint), unless
  the task says that nothing should happen (`expect_nothing: true`);
- the task has no reference at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain.conditions import ABSENT, format_value, resolve
from ..domain.model import Domain, Task
from ..domain.wording import show
from .api import Turn, UserReply, UserTurn
from .reference import ReferenceAgent
from .results import TrialResult
from .scripted_user import ScriptedUser
from .tools import coerce_args, run_checks, run_ops
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
        for ref in refs:
            key = resolve(ref.get("key"), args)
            if key is ABSENT:
                out.append(f"rule {inv.id} did not apply: the call gave no {ref.get('key')}")
            elif world_get(ref["table"], key) is None:
                out.append(f"rule {inv.id} did not apply: {ref['table']} {format_value(key)} does not exist")
    return out


def lint_task(domain: Domain, task: Task) -> list[Finding]:
    """What would make this task's score misleading (see the module's docstring)."""
    file = domain.path or "<string>"
    line = task.pos.line if task.pos else 0
    if not task.user.opening and not task.user.script:
        found = [(ERROR, "the scripted user has nothing to say: give user.opening or user.script")]
        return [Finding(level, file, line, task.id, message) for level, message in found]
    user = _TracingUser()
    found = _reference_findings(domain, task, user)
    findings = [Finding(level, file, line, task.id, message) for level, message in found]
    if task.reference:
        findings += [
            Finding(WARNING, file, at or line, task.id, message) for at, message in _untriggered_lines(task, user.said)
        ]
    findings += [Finding(level, file, line, task.id, message) for level, message in _silence_findings(domain, task)]
    return findings


def _reacts(task: Task) -> bool:
    """Whether the scripted user's lines depend on the conversation (`when` lines or
    `say_unknown`): then only a replay tells how many turns the reference gets."""
    return task.user.say_unknown is not None or any(line.when is not None for line in task.user.script)


def _reference_findings(domain: Domain, task: Task, user: _TracingUser) -> list[tuple[str, str]]:
    """(level, message) for a reference that does not fit in its turns, errors, fails
    its own task or breaks a rule, or that rules silently did not apply to."""
    if not task.reference:
        return [(NOTE, "no reference: the reference agent cannot rehearse this task and lint cannot check it")]
    found: list[tuple[str, str]] = []
    says = sum(1 for s in task.reference if s.say is not None)
    user_lines = (1 if task.user.opening else 0) + len(task.user.script)
    if says > task.max_turns:
        found.append((ERROR, f"the reference has {_n(says, 'reply', 'replies')} but max_turns allows "
                             f"{_n(task.max_turns, 'agent turn')}"))
    elif says > user_lines and not _reacts(task):
        found.append((ERROR, f"the reference has {_n(says, 'reply', 'replies')} but the scripted user says "
                             f"{_n(user_lines, 'line')} (opening and script), so it gets {_n(user_lines, 'turn')}"))
    result = run_trial(domain, task, ReferenceAgent(), user)
    if _reacts(task):
        found += _ended_early(result, says)
    if result.error:
        found.append((ERROR, f"the reference trial errored: {result.error}"))
    for call in result.calls:
        if not call["ok"]:
            err = call["error"] or {}
            found.append((NOTE, f"reference call {call['index'] + 1} {call['tool']} returns an error "
                                f"({err.get('code')} {err.get('message')}); fine if the task is about that"))
    for v in result.violations:
        level = NOTE if v.soft else ERROR
        found.append((level, f"the reference breaks {'soft ' if v.soft else ''}rule {v.invariant}: {v.detail}"))
    for c in result.failed_checks:
        if c.kind != "invariant":
            found.append((ERROR, f"the reference fails its own expectation {c.id}: {c.detail}"))
    return found + _unapplied_rules(domain, task, result.calls)


def _ended_early(result: TrialResult, says: int) -> list[tuple[str, str]]:
    """A reacting scripted user that ended the conversation before the reference said
    all its replies: the reference cannot finish."""
    replies = sum(1 for e in result.transcript if e["role"] == "agent")
    if result.ended_by != "script_end" or replies >= says:
        return []
    return [(ERROR, f"the scripted user ends the conversation after {_n(replies, 'reply', 'replies')} of the "
                    f"reference's {says}: no script line applies to reply {replies} "
                    "(or a line with `end: true` did), so the reference cannot finish")]


def _untriggered_lines(task: Task, said: set[int]) -> list[tuple[int | None, str]]:
    """(line, message) for each script line with `when` that the reference's replay
    never said: a typo in its condition, or a branch the reference does not rehearse."""
    return [
        (line.pos.line if line.pos else None,
         f"script line {i + 1} ({show(line.say)}) is never said when the reference runs: its `when` never holds "
         "(a typo, or a branch the reference does not take)")
        for i, line in enumerate(task.user.script)
        if line.when is not None and i not in said
    ]


def _unapplied_rules(domain: Domain, task: Task, calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Rules that silently did not apply to the reference's calls, found by replaying its
    writes in order so that each call sees the world it saw in the trial."""
    world = World(seed_for(domain))
    apply_given(world, task)
    found: list[tuple[str, str]] = []
    for call in calls:
        tool = domain.tools.get(call["tool"])
        if tool is None:
            continue
        for msg in _unresolved(domain, tool.name, call["args"], world.get):
            found.append((WARNING, f"reference call {call['index'] + 1} {tool.name}: {msg}"))
        try:
            args = coerce_args(tool, call["args"])
        except Exception:
            continue
        if run_checks(tool, args, world) is None:
            run_ops(tool, args, world)
    return found


def _silence_findings(domain: Domain, task: Task) -> list[tuple[str, str]]:
    """(level, message) when the task's expectations do not tell success from silence."""
    e = task.expect
    if not (e.state or e.called or e.reply_includes or e.not_called):
        return [(WARNING, "has no expectations: any agent that breaks no rule passes it")]
    if run_trial(domain, task, _silent_agent, ScriptedUser()).verdict != "passed":
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
