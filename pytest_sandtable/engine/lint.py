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
from .trial import run_trial

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
    file = domain.path or "<string>"
    line = task.pos.line if task.pos else 0
    found: list[Finding] = []

    def add(level: str, message: str) -> None:
        found.append(Finding(level, file, line, task.id, message))

    user = ScriptedUser()
    lines = ([task.user.opening] if task.user.opening else []) + list(task.user.script)
    if not lines:
        add(ERROR, "the scripted user has nothing to say: give user.opening or user.script")
        return found
    if not task.reference:
        add(NOTE, "no reference: the reference agent cannot rehearse this task and lint cannot check it")
    else:
        says = sum(1 for s in task.reference if s.say is not None)
        if says > task.max_turns:
            add(ERROR, f"the reference has {_n(says, 'reply', 'replies')} but max_turns allows "
                       f"{_n(task.max_turns, 'agent turn')}")
        elif says > len(lines):
            add(ERROR, f"the reference has {_n(says, 'reply', 'replies')} but the scripted user says "
                       f"{_n(len(lines), 'line')} (opening and script), so it gets {_n(len(lines), 'turn')}")
        result = run_trial(domain, task, ReferenceAgent(), user)
        if result.error:
            add(ERROR, f"the reference trial errored: {result.error}")
        for call in result.calls:
            if not call["ok"]:
                err = call["error"] or {}
                add(NOTE, f"reference call {call['index'] + 1} {call['tool']} returns an error "
                          f"({err.get('code')} {err.get('message')}); fine if the task is about that")
        for v in result.violations:
            level = NOTE if v.soft else ERROR
            add(level, f"the reference breaks {'soft ' if v.soft else ''}rule {v.invariant}: {v.detail}")
        for c in result.failed_checks:
            if c.kind != "invariant":
                add(ERROR, f"the reference fails its own expectation {c.id}: {c.detail}")
        # rules that silently did not apply to the reference's calls
        from .world import World, seed_for

        world = World(seed_for(domain))
        for op in task.given:
            if op.kind == "update":
                world.update(op.spec["table"], op.spec["key"], op.spec.get("set", {}))
            elif op.kind == "create":
                world.create(op.spec["table"], op.spec.get("row", {}))
        # replay writes in order so each call sees the world it saw in the trial
        from .tools import coerce_args, run_checks, run_ops

        for call in result.calls:
            tool = domain.tools.get(call["tool"])
            if tool is None:
                continue
            for msg in _unresolved(domain, tool.name, call["args"], world.get):
                add(WARNING, f"reference call {call['index'] + 1} {tool.name}: {msg}")
            try:
                args = coerce_args(tool, call["args"])
            except Exception:
                continue
            if run_checks(tool, args, world) is None:
                run_ops(tool, args, world)
    if task.expect.state or task.expect.called or task.expect.reply_includes or task.expect.not_called:
        silent = run_trial(domain, task, _silent_agent, user)
        if silent.verdict == "passed":
            e = task.expect
            positive = bool(e.called or e.reply_includes) or any(
                s.key is None and (s.count is None or s.count >= 1) for s in e.state
            )
            if positive:
                add(WARNING, "passes when the agent does nothing: its expectations hold in the untouched "
                             "world; expect something only a correct conversation reaches")
            else:
                add(NOTE, "passes when the agent does nothing (every expectation says what must not "
                          "happen); a `called` expectation would check the agent engaged")
    else:
        add(WARNING, "has no expectations: any agent that breaks no rule passes it")
    return found


def lint_domain(domain: Domain) -> list[Finding]:
    out: list[Finding] = []
    for task in domain.tasks:
        out.extend(lint_task(domain, task))
    return out
