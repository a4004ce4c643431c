"""Plain-text renderings of one trial for the terminal: the failure message, the
transcript and the agent's traceback.

What they print is what results.json keeps (:mod:`.safe`): secrets redacted (CI logs
are often public), every value within the size caps, lone surrogates replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..domain.conditions import format_literal
from ..engine.results import TrialResult
from .fmt import clip, plural
from .safe import for_terminal, secret_values, shown_trial

__all__ = ["failure_text", "headline", "owner_line", "traceback_text", "transcript_text"]


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={format_literal(v)}" for k, v in args.items())


def _short_json(v: Any, limit: int = 300) -> str:
    return clip(json.dumps(v, ensure_ascii=False, default=str), limit)


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
    return for_terminal(text, keys)


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
    soft = [v for v in r.violations if v.soft]
    if soft:
        lines.append("  soft rules broken (reported, never fail a trial):")
        for v in soft:
            lines.append(f"    {v.invariant}  {v.detail}")
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
    for e in r.transcript:
        if e["role"] == "tool":
            c = r.calls[e["call"]]
            head = f"[{c['turn']}] agent -> {c['tool']}({_args(c['args'])})"
            if c["ok"]:
                out.append(f"{head}\n        = {_short_json(c['result'])}")
            else:
                err = c["error"] or {}
                out.append(f"{head}\n        ! error {err.get('code')}: {err.get('message')}")
            out.extend(f"        !! {m}" for m in by_call.get(c["index"], ()))
        else:
            who = "user " if e["role"] == "user" else "agent"
            text = str(e["text"]).replace("\n", "\n        ")
            out.append(f"[{e['turn']}] {who}: {text}")
            if e["role"] == "agent":
                out.extend(f"        !! {m}" for m in said.pop(e["turn"], ()))
    return "\n".join(out)
