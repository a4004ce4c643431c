"""Trivial-agent baselines: how many of a domain's tasks an agent that does not do the
job passes anyway (issue 28; the Agentic Benchmark Checklist's "trivial agent" check).

Two agents, each replayed through the engine against every task's scripted user (its
faults and events included), with no model and no network:

- **do-nothing** never calls a tool and says nothing (lint's silent agent,
  :func:`~pytest_sandtable.engine.lint.passes_when_silent`). A task it passes cannot
  tell success from silence. Tasks marked ``expect_nothing: true`` are meant to pass it
  (nothing should happen in them): they are left out of this baseline's count and listed
  on their own, so the rate counts only tasks where passing is a weakness.
- **spam** makes the reference's calls, in the reference's turns (so it sees what the
  reference sees), but each reply is every value it saw in tool results so far (every
  scalar of every result, errors' messages too, one a line, each once): the "reply with
  every value you saw" agent. A task it passes does not tell an answer from a dump of
  the data: its ``reply_includes`` phrases are all in the data (or it has none), and no
  ``never_disclose`` rule covers what the dump leaks. Tasks without a ``reference`` have
  no calls to follow: they are left out of this baseline's count and listed on their own.
  Since spam makes the reference's calls, its world is the reference's: what it tests is
  the checks on replies. So its figure comes twice: over every task with a reference
  (passing one that checks no reply is a reply nobody reads), and over the tasks that
  check replies (``reply_includes``), where passing means every phrase is in the data.

The figures are the share of the counted tasks that pass; :func:`baseline_lines` words
them for the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.model import Domain, RefStep, Task
from ..engine.api import Turn
from ..engine.lint import passes_when_silent
from ..engine.scripted_user import ScriptedUser
from ..engine.trial import run_trial

__all__ = ["Baselines", "SpamAgent", "baseline_lines", "baselines", "dump"]


@dataclass(frozen=True)
class Baselines:
    """A domain's trivial-agent baselines: the ids of the tasks each agent passes, in
    the domain's order."""

    domain: str
    tasks: int  # tasks replayed (every task of the domain)
    do_nothing: list[str]  # tasks that pass when the agent calls nothing and says nothing
    spam: list[str]  # tasks that pass when the agent makes the reference's calls and replies with a dump
    # tasks marked `expect_nothing: true`: meant to pass do-nothing, so not counted in it
    expect_nothing: list[str]
    # tasks without a reference: spam has no calls to follow, so they are not counted in it
    no_reference: list[str]
    # tasks with a reference that check what the agent says (`reply_includes`): where spam
    # passing means the phrases are all in the data it dumped, not that nothing is checked
    reply_checked: list[str] = field(default_factory=list)

    @property
    def do_nothing_counted(self) -> int:
        """The tasks the do-nothing rate is of: all but those marked ``expect_nothing``."""
        return self.tasks - len(self.expect_nothing)

    @property
    def spam_counted(self) -> int:
        """The tasks the spam rate is of: those with a reference."""
        return self.tasks - len(self.no_reference)

    @property
    def spam_reply_checked(self) -> list[str]:
        """The tasks spam passes that check the reply: a dump of the data says every phrase."""
        checked = set(self.reply_checked)
        return [t for t in self.spam if t in checked]

    @property
    def do_nothing_rate(self) -> float | None:
        """The share of counted tasks do-nothing passes; None when none are counted."""
        return len(self.do_nothing) / self.do_nothing_counted if self.do_nothing_counted else None

    @property
    def spam_rate(self) -> float | None:
        """The share of counted tasks spam passes; None when none are counted."""
        return len(self.spam) / self.spam_counted if self.spam_counted else None


def baselines(domain: Domain, tasks: Collection[str] | None = None) -> Baselines:
    """Replays every task of ``domain`` (with ``tasks``, those of these ids) with the
    do-nothing and the spam agent (see the module's docstring). Never raises for a task:
    a trial that errors (a handler that raises, a ``given`` that cannot be applied) is a
    trial that did not pass."""
    do_nothing: list[str] = []
    spam: list[str] = []
    expect_nothing: list[str] = []
    no_reference: list[str] = []
    reply_checked: list[str] = []
    chosen = [t for t in domain.tasks if tasks is None or t.id in tasks]
    for task in chosen:
        if task.expect_nothing:
            expect_nothing.append(task.id)
        elif passes_when_silent(domain, task):
            do_nothing.append(task.id)
        if not task.reference:
            no_reference.append(task.id)
            continue
        if task.expect.reply_includes:
            reply_checked.append(task.id)
        if passes_spam(domain, task):
            spam.append(task.id)
    return Baselines(domain.name, len(chosen), do_nothing, spam, expect_nothing, no_reference, reply_checked)


def passes_spam(domain: Domain, task: Task) -> bool:
    """Whether ``task`` passes when the agent makes its reference's calls and replies with
    every value it saw (:class:`SpamAgent`), against the task's scripted user."""
    result = run_trial(domain, task, SpamAgent(task.reference), ScriptedUser(), wait_latency=False)
    return result.verdict == "passed"


class SpamAgent:
    """Makes the calls of a reference, turn by turn as the reference agent does (the
    calls before a ``say`` in one turn), but replies, every turn, with :func:`dump` of
    every tool result of the trial so far in place of the reference's words."""

    name = "spam"
    inline = True  # sync, never blocks: runs on the trial's loop (engine.api.runs_inline)

    def __init__(self, steps: Sequence[RefStep]) -> None:
        self.steps = list(steps)

    def __call__(self, turn: Turn) -> str:
        state = turn.state
        i: int = state.get("_spam_i", 0)
        seen: dict[str, None] = state.setdefault("_spam_seen", {})  # an ordered set
        while i < len(self.steps):
            step = self.steps[i]
            i += 1
            if step.call is None:
                break  # the reference's reply: the turn ends here, with the dump instead
            result = turn.call_tool(step.call, dict(step.args))
            shown = result.value if result.ok else {"error": result.error, "message": result.message}
            seen.update(dict.fromkeys(dump(shown)))
        state["_spam_i"] = i
        return "\n".join(seen)


def dump(value: Any) -> Iterator[str]:
    """Every scalar in ``value`` as text, as the agent saw it in the result's JSON
    (strings as they are, numbers and booleans as JSON writes them; nulls left out),
    depth first in order; mappings' values, not their keys."""
    if isinstance(value, dict):
        for item in value.values():
            yield from dump(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from dump(item)
    elif isinstance(value, str):
        yield value
    elif value is not None:
        yield json.dumps(value, default=str)


def _rate_line(agent: str, passed: list[str], counted: int, left_out: Sequence[str] = (), why: str = "",
               which: str = "") -> str:
    share = f"{len(passed) / counted * 100:.1f}%" if counted else "n/a"  # as report.fmt.pct writes it
    line = f"{agent} passes {len(passed)} of {counted} task{'' if counted == 1 else 's'}{which} ({share})"
    if passed:
        line += ": " + ", ".join(passed)
    if left_out:
        line += f"; not counted: {len(left_out)} task{'' if len(left_out) == 1 else 's'} {why}"
    return line


def baseline_lines(b: Baselines) -> list[str]:
    """The terminal lines of ``b``, one a baseline, e.g.
    ``do-nothing passes 1 of 8 tasks (12.5%): cancel-nothing`` and
    ``spam passes 0 of 8 tasks (0.0%)``; then, when some tasks check the reply, spam's
    share of those: ``spam passes 1 of 2 tasks that check replies (50.0%): verify-carrier``
    (the others it passes check nothing it says)."""
    lines = [
        _rate_line("do-nothing", b.do_nothing, b.do_nothing_counted, b.expect_nothing, "with expect_nothing: true"),
        _rate_line("spam", b.spam, b.spam_counted, b.no_reference, "without a reference"),
    ]
    if b.reply_checked:
        lines.append(_rate_line("spam", b.spam_reply_checked, len(b.reply_checked), which=" that check replies"))
    return lines
