"""Who likely owns a failed trial: the agent under test, the task, or the simulated user.

A failed trial is not always the agent's fault. The task may be wrong (its own
reference fails it, or an expectation asks for what a rule forbids), or the
simulated user may have spoiled the conversation (it hung up before the agent could
act, or said a load id nobody gave it and the agent acted on it). Reading every
failure to tell these apart is what makes a low score trustworthy; this module does
the reading that the transcript, the call log and the checks make certain, and says
which fact decided, so a person can check it in one glance.

:func:`attribute` is a pure function of the task, the finished trial and the task's
reference trial (replayed once per task by the engine, see ``engine.trial``). The
rules, in the order they are tried (docs/grading.md has examples):

1. ``task``: the reference replayed with the scripted user fails every check the
   trial fails: an expectation (the reference fails its own task), or a rule while it
   meets every expectation (an expectation contradicts the rule).
2. ``agent``: the agent itself failed (raised, timed out), or broke a hard rule; the
   rules hold whatever the user says, so a broken one is the agent's.
3. ``user``: with only expectations missed (nothing the agent did that it must not),
   the user said a value (a number, an id such as ``L-1003``) that neither its persona,
   instructions, opening or script nor anything said or shown before held, and the
   agent then used it in a call; or the user ended the conversation before the agent
   could do what was missed (it had fewer turns than the task's reference needs for
   it, or, without a reference, the agent's last reply was asking the user something),
   the agent's last reply not being a refusal.
4. ``agent`` otherwise: it missed an expectation the user made possible.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.conditions import format_literal
from ..domain.model import Domain, Task
from .results import FAILED, Check, TrialResult
from .rules import numbers_in

__all__ = ["AGENT", "TASK", "USER", "attribute", "reference_turns"]

AGENT = "agent"
TASK = "task"
USER = "user"

# what ended a conversation without the simulated user choosing to: the agent handed
# off (the scripted user then says `handed_off`), the task's turn limit, a failure
_NOT_THE_USERS_END = frozenset(
    {"", "handoff", "handed_off", "max_turns", "agent_error", "domain_error", "worker_crashed"}
)
# the checks a user can keep an agent from meeting (a `not_called` or a rule is about
# what the agent did, which no user makes it do)
_MISSABLE = ("called", "state", "reply")
# an agent reply that declines: it decided, the conversation did not cut it short
_REFUSAL = re.compile(
    r"\b(?:can['’]?t|cannot|can not|unable|won['’]?t|will not|not able|not allowed|not permitted"
    r"|decline|unfortunately|afraid)\b",
    re.IGNORECASE,
)
# an identifier as people write them: L-1003, FA-12, B412, MC100101 (a letter prefix and digits)
_ID = re.compile(r"(?<![\w-])(?:[A-Za-z]{1,4}-\d+(?:-\d+)*|[A-Z]{1,4}\d{2,})(?![\w-])")
# smaller numbers are everyday words ("2 trucks", "in 5 minutes"), not values someone was given
_MIN_NUMBER = 10
_QUOTE = 120  # characters of a quoted message


def attribute(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """``{"owner": "agent" | "task" | "user", "evidence": one sentence}`` for a failed
    trial; None for one that passed or errored. ``reference`` is the task's reference
    replayed with the scripted user (None when the task has none or it cannot be replayed)."""
    if result.verdict != FAILED:
        return None
    for rule in (_task_fails_it, _agent_failed, _agent_broke_a_rule, _user_invented_a_value, _user_stopped_early):
        found = rule(domain, task, result, reference)
        if found is not None:
            return found
    return _agent_missed(result)


def _owner(owner: str, evidence: str) -> dict[str, str]:
    return {"owner": owner, "evidence": evidence}


def _quote(text: str) -> str:
    """A message quoted on one line, cut at :data:`_QUOTE` characters."""
    flat = " ".join(str(text).split())
    return format_literal(flat if len(flat) <= _QUOTE else flat[: _QUOTE - 1] + "…")


def _turns(n: int) -> str:
    return f"{n} agent turn" + ("" if n == 1 else "s")


# --------------------------------------------------------------------------- task


def _task_fails_it(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """The reference fails every check this trial fails: the task, not the agent, is wrong.
    (A trial that also fails a check the reference passes would fail on a sound task too.)"""
    if reference is None or reference.verdict != FAILED:
        return None
    failed_there = {(c.kind, c.id) for c in reference.failed_checks if c.kind != "runtime"}
    if not all((c.kind, c.id) in failed_there for c in result.failed_checks):
        return None
    failed_here = {(c.kind, c.id) for c in result.failed_checks}
    shared = [c for c in reference.failed_checks if (c.kind, c.id) in failed_here]
    expectation = next((c for c in shared if c.kind != "invariant"), None)
    if expectation is not None:
        return _owner(TASK, f"the task's own reference fails expectation {expectation.id} "
                            f"when replayed: {expectation.detail}")
    if shared and all(c.kind == "invariant" for c in reference.failed_checks):
        rule = shared[0]
        return _owner(TASK, f"an expectation contradicts rule {rule.id}: the task's reference meets every "
                            f"expectation but breaks it: {rule.detail}")
    return None


# --------------------------------------------------------------------------- agent


def _agent_failed(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """The agent raised, timed out or looped: the runtime check says how."""
    runtime = next((c for c in result.failed_checks if c.kind == "runtime"), None)
    if runtime is None:
        return None
    return _owner(AGENT, f"the agent failed at turn {result.turns}: {runtime.detail}")


def _agent_broke_a_rule(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """The first hard rule broken, with the call (or the reply) that broke it."""
    v = next((v for v in result.violations if not v.soft), None)
    if v is None:
        return None
    if v.call is not None and 0 <= v.call < len(result.calls):
        where = f"with call {v.call + 1} ({result.calls[v.call]['tool']}) at turn {v.turn}"
    else:
        where = f"in its reply at turn {v.turn}"
    return _owner(AGENT, f"the agent broke rule {v.invariant} {where}: {v.detail}")


def _agent_missed(result: TrialResult) -> dict[str, str]:
    """The first expectation missed; the rules before found no one else to own it."""
    c = result.failed_checks[0]
    return _owner(AGENT, f"the agent missed expectation {c.id}, which the user made possible: {c.detail}")


# --------------------------------------------------------------------------- user


def _missed_only(result: TrialResult) -> list[Check]:
    """The failed checks when every one is an expectation a user could keep the agent
    from meeting; [] when any is something the agent did (a rule, a not_called)."""
    failed = result.failed_checks
    return failed if failed and all(c.kind in _MISSABLE for c in failed) else []


@dataclass(frozen=True)
class _Said:
    """Values written in a text: numbers (by value) and identifiers (lower case)."""

    numbers: dict[float, str]
    ids: dict[str, str]

    @classmethod
    def of(cls, text: str) -> _Said:
        nums = {n: w for n, w in numbers_in(text).items() if abs(n) >= _MIN_NUMBER}
        return cls(nums, {m.group(0).lower(): m.group(0) for m in _ID.finditer(text)})


def _strings(value: Any) -> Iterator[str]:
    """Every string and number of a JSON value as text (a tool's arguments or result)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        yield json.dumps(value)
    else:
        yield str(value)


class _Known:
    """Every number and identifier some source has held so far."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.numbers: set[float] = set()
        self.ids: set[str] = set()
        self.add(texts)

    def add(self, texts: Iterable[str]) -> None:
        for text in texts:
            said = _Said.of(text)
            self.numbers.update(said.numbers)
            self.ids.update(said.ids)

    def new_in(self, said: _Said) -> list[tuple[str, float | str]]:
        """(as written, value) of what ``said`` holds that no source did, in order written."""
        out: list[tuple[str, float | str]] = [(w, k) for k, w in said.ids.items() if k not in self.ids]
        out += [(w, n) for n, w in said.numbers.items() if n not in self.numbers]
        return out


def _user_sources(task: Task) -> list[str]:
    spec = task.user
    return [spec.persona, spec.instructions, spec.opening or "", spec.say_unknown or "",
            *(line.say for line in spec.script)]


def _used_in(value: float | str, calls: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first of ``calls`` whose arguments hold ``value``."""
    for call in calls:
        said = _Said.of("\n".join(_strings(call.get("args"))))
        if (value in said.numbers) if isinstance(value, float) else (value in said.ids):
            return call
    return None


def _same_shape(written: str, task: Task) -> tuple[str, str] | None:
    """(field, token) of an identifier in the user's persona or instructions written
    like ``written`` (L-1003 and L-1001): the user said another value than it was given."""
    shape = re.sub(r"[0-9]", "9", re.sub(r"[A-Za-z]", "A", written))
    for name in ("instructions", "persona"):
        for m in _ID.finditer(getattr(task.user, name)):
            token = m.group(0)
            if token.lower() != written.lower() and re.sub(r"[0-9]", "9", re.sub(r"[A-Za-z]", "A", token)) == shape:
                return name, token
    return None


def _user_invented_a_value(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """A value the user said that nothing it was given or was told held, which the
    agent then used in a call (so it shaped the outcome)."""
    if not _missed_only(result):
        return None
    known = _Known(_user_sources(task))
    for pos, entry in enumerate(result.transcript):
        role = entry.get("role")
        if role == "tool":
            call = result.calls[entry["call"]]
            known.add(_strings([call.get("args"), call.get("result"), call.get("error")]))
            continue
        text = str(entry.get("text", ""))
        if role == "user":
            later = [result.calls[e["call"]] for e in result.transcript[pos + 1:] if e.get("role") == "tool"]
            for written, value in known.new_in(_Said.of(text)):
                call = _used_in(value, later)
                if call is not None:
                    return _owner(USER, _invented(task, entry, written, call, text))
        known.add([text])
    return None


def _invented(task: Task, entry: dict[str, Any], written: str, call: dict[str, Any], text: str) -> str:
    then = f"and the agent then called {call['tool']} with it: {_quote(text)}"
    other = _same_shape(written, task) if not written[:1].isdigit() else None
    if other is not None:
        verb = "give" if other[0] == "instructions" else "gives"
        return (f"the user contradicted its {other[0]} at turn {entry.get('turn')}: it said {written} where its "
                f"{other[0]} {verb} {other[1]}, {then}")
    return (f"the user said {written} at turn {entry.get('turn')}, a value found neither in its persona, "
            f"instructions, opening or script nor earlier in the conversation or tool results, {then}")


def reference_turns(task: Task) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """When the task's reference does things: the turn of each tool's first call, and
    (turn, reply) of each reply. A reference's turn ends at each ``say``."""
    first_call: dict[str, int] = {}
    replies: list[tuple[int, str]] = []
    turn = 1
    for step in task.reference:
        if step.call is not None:
            first_call.setdefault(step.call, turn)
        else:
            replies.append((turn, step.say or ""))
            turn += 1
    return first_call, replies


def _needed(check: Check, domain: Domain, task: Task) -> tuple[str, int | None]:
    """What the missed check needed done, and the turn the task's reference does it in (None: unknown)."""
    first_call, replies = reference_turns(task)
    if check.kind == "reply":
        phrase = check.id.split(":", 1)[1]
        turn = next((t for t, say in replies if phrase.lower() in say.lower()), None)
        return f"the agent said {format_literal(phrase)}", turn
    if check.kind == "called":
        tools = [check.id.split(":", 1)[1].split("#", 1)[0]]
    else:  # a state expectation: met by a call of a tool that writes its table
        table = check.id.split(":", 1)[1].split("[", 1)[0]
        tools = [t.name for t in domain.tools.values()
                 if any(op.kind in ("create", "update") and op.spec.get("table") == table for op in t.ops)]
    done = sorted((first_call[t], t) for t in tools if t in first_call)
    if done:
        return f"{done[0][1]} was called", done[0][0]
    if len(tools) == 1:
        return f"{tools[0]} was called", None
    return f"expectation {check.id} was met", None


def _user_stopped_early(
    domain: Domain, task: Task, result: TrialResult, reference: TrialResult | None
) -> dict[str, str] | None:
    """The user ended the conversation before the agent could do what it missed."""
    missed = _missed_only(result)
    if not missed or result.ended_by in _NOT_THE_USERS_END:
        return None
    last = _last_replies(result.transcript)
    if any(_REFUSAL.search(text) for text in last):
        return None
    what, turn = _needed(missed[0], domain, task)
    asking = next((text for text in reversed(last) if "?" in text), None)
    if turn is not None:
        if result.turns >= turn:
            return None  # the agent had the turns the reference needs
        why = f"(the task's reference does it in turn {turn})"
    elif asking is not None:
        why = f"while the agent was asking {_quote(asking)}"
    else:
        return None
    user_says = [e for e in result.transcript if e.get("role") == "user"]
    said = f": {_quote(str(user_says[-1].get('text', '')))}" if user_says else ""
    return _owner(USER, f"the user ended the conversation ({result.ended_by}) after {_turns(result.turns)}, "
                        f"before {what} {why}; it last said{said}")


def _last_replies(transcript: Sequence[dict[str, Any]]) -> list[str]:
    """The agent's last replies the user's ending answered: the one before the user's last
    message and the last one. (A user that ends with a message gives the agent one more
    turn, after it; one that ends without a word leaves the last reply unanswered. The
    transcript does not tell which, so both count.)"""
    spoken = [e for e in transcript if e.get("role") in ("user", "agent")]
    last_user = max((i for i, e in enumerate(spoken) if e["role"] == "user"), default=-1)
    before = [str(e.get("text", "")) for e in spoken[:last_user] if e["role"] == "agent"][-1:]
    final = [str(e.get("text", "")) for e in spoken if e["role"] == "agent"][-1:]
    return before + [text for text in final if text not in before]
