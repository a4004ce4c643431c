"""`python -m pytest_sandtable lint`: find weak tasks before a model-backed run.

For every task it replays the task's `reference` with the scripted user and
reports what would make a score misleading:

- the reference does not fit in the turns the scripted user gives it;
- the reference fails its own expectations or breaks a rule (the task, not the
  agent, is wrong); a reference call that returns an error is noted;
- a rule did not apply to a reference call because a record it points at does
  not exist (`require`, `limit`, `match`);
- the task passes when the agent does nothing (its expectations do not tell
  success from silence: τ-bench users' most common grading complaint);
- the task has no reference at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain.conditions import ABSENT, format_value, resolve
from ..domain.model import Domain, Task
from .api import Turn
from .reference import ReferenceAgent
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
    lines = ([task.user.opening] if task.user.opening else []) + list(task.user.script)
    if not lines:
        found = [(ERROR, "the scripted user has nothing to say: give user.opening or user.script")]
    else:
        found = _reference_findings(domain, task, len(lines)) + _silence_findings(domain, task)
    return [Finding(level, file, line, task.id, message) for level, message in found]


def _reference_findings(domain: Domain, task: Task, user_lines: int) -> list[tuple[str, str]]:
    """(level, message) for a reference that does not fit in its turns, errors, fails
    its own task or breaks a rule, or that rules silently did not apply to."""
    if not task.reference:
        return [(NOTE, "no reference: the reference agent cannot rehearse this task and lint cannot check it")]
    found: list[tuple[str, str]] = []
    says = sum(1 for s in task.reference if s.say is not None)
    if says > task.max_turns:
        found.append((ERROR, f"the reference has {_n(says, 'reply', 'replies')} but max_turns allows "
                             f"{_n(task.max_turns, 'agent turn')}"))
    elif says > user_lines:
        found.append((ERROR, f"the reference has {_n(says, 'reply', 'replies')} but the scripted user says "
                             f"{_n(user_lines, 'line')} (opening and script), so it gets {_n(user_lines, 'turn')}"))
    result = run_trial(domain, task, ReferenceAgent(), ScriptedUser())
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
        return []
    positive = bool(e.called or e.reply_includes) or any(
        s.key is None and (s.count is None or s.count >= 1) for s in e.state
    )
    if positive:
        return [(WARNING, "passes when the agent does nothing: its expectations hold in the untouched "
                          "world; expect something only a correct conversation reaches")]
    return [(NOTE, "passes when the agent does nothing (every expectation says what must not "
                   "happen); a `called` expectation would check the agent engaged")]


def lint_domain(domain: Domain) -> list[Finding]:
    out: list[Finding] = []
    for task in domain.tasks:
        out.extend(lint_task(domain, task))
    return out
