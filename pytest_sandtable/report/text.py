"""Plain-text renderings of one trial for the terminal: the failure message, the
transcript and the agent's traceback.

What they print is what results.json keeps (:mod:`.safe`): secrets redacted (CI logs
are often public), every value within the size caps, lone surrogates replaced; a
transcript of more than :data:`~.safe.ENTRY_LIMIT` entries, its start and its end.
Control characters (C0 but newline and tab, DEL, C1) are written as escapes, ``\\x1b``,
as a domain file's problems write them: an agent's reply must not drive the terminal
(an ESC sequence, OSC 0 setting the window title, OSC 52 writing the clipboard).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..domain.conditions import format_literal
from ..engine.results import TrialResult
from .fmt import clip, plural
from .safe import for_terminal, not_shown, secret_values, shown_items, shown_trial

__all__ = [
    "escape_controls", "event_note", "failure_text", "fault_note", "headline", "owner_line", "traceback_text",
    "transcript_text",
]


# What the terminal must not get raw: C0 controls but newline and tab, DEL, and C1.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def escape_controls(text: str) -> str:
    """``text`` with each control character but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={format_literal(v)}" for k, v in args.items())


def _short_json(v: Any, limit: int = 300) -> str:
    return clip(json.dumps(v, ensure_ascii=False, default=str), limit)


def fault_note(fault: Mapping[str, Any]) -> str:
    """What a faulted call met, from its ``fault`` in results.json: ``fault 1: timeout
    after commit: the call ran and its writes landed``."""
    parts = []
    kind = fault.get("kind")
    if kind:
        what = str(kind)
        if fault.get("retry_after") is not None:
            what += f" (retry after {format_literal(fault['retry_after'])} s)"
        if fault.get("after_commit"):
            what += " after commit: " + ("the call ran and its writes landed" if fault.get("landed")
                                         else "the call ran and failed, so nothing landed")
        else:
            what += ": the call did not run"
        parts.append(what)
    if fault.get("latency_ms"):
        parts.append(f"{format_literal(fault['latency_ms'])} ms latency")
    return f"fault {fault.get('fault')}: " + "; ".join(parts)


def event_note(entry: Mapping[str, Any]) -> str:
    """A task's event from its transcript entry: ``event 1 after call 2: update loads
    L-1002 set status='booked'``, and why it was skipped when it was."""
    op, where = entry.get("op"), f"{entry.get('table')}"
    if "key" in entry:
        where += f" {format_literal(entry['key'])}"
    values = entry.get("values")
    change = f"{op} {where}"
    if isinstance(values, dict):
        change += (" set " if op == "update" else " ") + _args(values)
    skipped = f" (skipped: {entry['skipped']})" if entry.get("skipped") else ""
    return f"event {entry.get('event')} after call {int(entry.get('after_call', 0)) + 1}: {change}{skipped}"


def headline(r: TrialResult) -> str:
    turns = plural(r.turns, "agent turn")
    if r.ended_by:
        how = f"ended by {r.ended_by} after {turns}"
    elif r.turns:  # an errored trial stops without an end reason
        how = f"stopped after {turns}"
    else:
        how = "stopped before the first agent turn"
    return f"{r.task} trial {r.trial} of {r.k} {r.verdict} (seed {r.seed}, {how})"


def _shown(render: Callable[[TrialResult], str], r: TrialResult, secrets: Sequence[str] | None) -> str:
    """``render`` of ``r`` within the caps, without secrets (those of the environment
    when ``secrets`` is None) and with lone surrogates replaced."""
    keys = secret_values() if secrets is None else secrets
    try:
        text = render(shown_trial(r, keys))
    except Exception as exc:  # one odd value must not cost the terminal the trial's verdict
        text = f"{headline(r)}\n  (its details cannot be shown: {type(exc).__name__}: {clip(str(exc), 200)})"
    return escape_controls(for_terminal(text, keys))


def failure_text(r: TrialResult, secrets: Sequence[str] | None = None) -> str:
    """The failed checks and violations first, one line each."""
    return _shown(_failure_text, r, secrets)


def transcript_text(r: TrialResult, secrets: Sequence[str] | None = None) -> str:
    """User, agent, tool calls with arguments and results, violations where they happened."""
    return _shown(_transcript_text, r, secrets)


def traceback_text(r: TrialResult, secrets: Sequence[str] | None = None) -> str:
    """Where the agent raised (its own frames); empty when it did not."""
    return _shown(lambda t: t.traceback or "", r, secrets)


def _failure_text(r: TrialResult) -> str:
    """The failed checks and violations first, one line each."""
    lines = [headline(r)]
    if r.error:
        lines.append(f"  errored: {r.error}")
    failed = r.failed_checks
    if failed:
        w_kind = max(len(c.kind) for c in failed)
        w_id = max(len(c.id) for c in failed)
        quotes = {v.invariant: v.quote for v in r.violations if v.quote}
        for c in failed:
            lines.append(f"  {c.kind:<{w_kind}}  {c.id:<{w_id}}  {c.detail}")
            if c.kind == "invariant" and c.id in quotes:
                lines.append(f"  {'':<{w_kind}}  {'':<{w_id}}  policy: {format_literal(quotes[c.id] or '')}")
    uncounted = r.uncounted_failed_checks  # issue 22: of kinds the task's basis leaves out
    if uncounted:
        lines.append("  not counted (kinds the task's basis leaves out; never fail a trial):")
        w_kind = max(len(c.kind) for c in uncounted)
        w_id = max(len(c.id) for c in uncounted)
        lines.extend(f"    {c.kind:<{w_kind}}  {c.id:<{w_id}}  {c.detail}" for c in uncounted)
    soft = [v for v in r.violations if v.soft]
    if soft:
        lines.append("  soft rules broken (reported, never fail a trial):")
        first, hidden, last = shown_items(soft)
        lines.extend(f"    {v.invariant}  {v.detail}" for v in first)
        if hidden:
            lines.append(f"    {not_shown(hidden, len(soft), 'soft rule breaks')}")
        lines.extend(f"    {v.invariant}  {v.detail}" for v in last)
    if r.attribution:
        lines.append(owner_line(r.attribution))
    return "\n".join(lines)


def owner_line(attribution: Mapping[str, str]) -> str:
    """The failure's likely owner and the fact that decided it (engine/attribution.py)."""
    return f"  likely owner: {attribution.get('owner')} — {attribution.get('evidence')}"


def _transcript_text(r: TrialResult) -> str:
    """User, agent, tool calls with arguments and results, violations where they happened."""
    by_call: dict[int, list[str]] = {}
    said: dict[int, list[str]] = {}
    for v in r.violations:
        mark = f"{'soft rule' if v.soft else 'VIOLATION'} {v.invariant}: {v.detail}"
        if v.call is not None:
            by_call.setdefault(v.call, []).append(mark)
        else:
            said.setdefault(v.turn, []).append(mark)
    out: list[str] = []
    first, hidden, last = shown_items(r.transcript)
    for e in [*first, None, *last] if hidden else first:
        if e is None:  # between the start and the end of a long transcript
            out.append(f"        {not_shown(hidden, len(r.transcript), 'transcript entries')}")
            continue
        if e["role"] == "tool":
            c = r.calls[e["call"]]
            head = f"[{c['turn']}] {c.get('by', 'agent')} -> {c['tool']}({_args(c['args'])})"  # (issue 22: by)
            if c.get("by") == "user":  # dual control: the simulated user's own call, on one line
                err = c["error"] or {}
                got = _short_json(c["result"]) if c["ok"] else f"error {err.get('code')}: {err.get('message')}"
                out.append(f"[{c['turn']}] user called {c['tool']}({_args(c['args'])}) -> {got}")
                continue
            if c["ok"]:
                out.append(f"{head}\n        = {_short_json(c['result'])}")
            else:
                err = c["error"] or {}
                out.append(f"{head}\n        ! error {err.get('code')}: {err.get('message')}")
            if c.get("fault"):
                out.append(f"        ~ {fault_note(c['fault'])}")
            out.extend(f"        !! {m}" for m in by_call.get(c["index"], ()))
        elif e["role"] == "event":
            out.append(f"[{e['turn']}] world: {event_note(e)}")
        else:
            who = "user " if e["role"] == "user" else "agent"
            text = str(e["text"]).replace("\n", "\n        ")
            out.append(f"[{e['turn']}] {who}: {text}")
            if e["role"] == "agent":
                out.extend(f"        !! {m}" for m in said.pop(e["turn"], ()))
    return "\n".join(out)
