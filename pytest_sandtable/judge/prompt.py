"""What a judge is shown and how its answer is read.

A judge sees the policy, one criterion and the part of the transcript the criterion
reads (its ``scope``, ``turns`` or ``after_tool``), one line per message or tool call.
It must answer with one JSON object, ``{"verdict": "yes" | "no", "quote": "..."}``, the
quote copied verbatim from one line of what it was shown. A "yes" needs a quote; a
"no" may give ``""`` when nothing bears on the criterion. A quote that is not in the
part of the transcript shown makes the verdict void: the judge relied on something
that is not there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.model import Criterion

PROMPT_VERSION = 1
"""Changes with the prompt or the format: part of every cache key (judge/cache.py)."""

SYSTEM = """\
You are a judge. You grade one conversation between a customer-facing AI agent and a \
user against one yes/no criterion, judging only what the transcript shows.

Answer with one JSON object and nothing else:
{"verdict": "yes" or "no", "quote": "the exact words of the transcript your verdict relies on"}

The quote must be copied verbatim from one line of the transcript: words of a message \
or of a tool call, without the [n] speaker label. A "yes" always needs a quote. For a \
"no", quote the closest passage, or give "" when nothing in the transcript bears on \
the criterion."""

RETRY = ("Your answer was not in the required format. Answer again with one JSON object and nothing "
         'else: {"verdict": "yes" or "no", "quote": "..."}')

_SCOPES = {
    "all": "the whole conversation",
    "final": "the agent's last message only",
}


@dataclass(frozen=True)
class Line:
    """One line a judge is shown: the transcript entry it comes from and its text."""

    index: int  # the entry's position in the trial's transcript
    label: str  # "[2] agent", "[2] agent -> lookup_order"
    text: str


def _call_text(call: Mapping[str, Any]) -> str:
    args = json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True)
    if call.get("ok"):
        shown = json.dumps(call.get("result"), ensure_ascii=False, sort_keys=True)
        return f"{call.get('tool')}({args}) = {shown}"
    err = call.get("error") or {}
    return f"{call.get('tool')}({args}) ! error {err.get('code')}: {err.get('message')}"


def all_lines(trial: Mapping[str, Any]) -> list[Line]:
    """Every message and tool call of a trial (a results.json trial or
    ``TrialResult.to_dict()``), in order; world events and empty messages are left out
    (an agent's empty last turn is not its "final" message)."""
    calls = trial.get("calls") or []
    out: list[Line] = []
    for i, e in enumerate(trial.get("transcript") or []):
        role = e.get("role")
        if role == "tool":
            idx = e.get("call")
            if isinstance(idx, int) and 0 <= idx < len(calls):
                call = calls[idx]
                out.append(Line(i, f"[{call.get('turn', '?')}] agent -> {call.get('tool')}", _call_text(call)))
        elif role in ("user", "agent") and str(e.get("text") or "").strip():  # an empty message says nothing
            out.append(Line(i, f"[{e.get('turn', '?')}] {role}", str(e.get("text", ""))))
    return out


def scoped_lines(trial: Mapping[str, Any], criterion: Criterion) -> list[Line] | None:
    """The lines ``criterion`` reads of ``trial``; None when it does not apply (its
    ``after_tool`` was never called, or the trial has no agent message it reads)."""
    lines = all_lines(trial)
    agent = [n for n, line in enumerate(lines) if line.label.endswith("] agent")]
    if criterion.after_tool is not None:
        first = next((n for n, line in enumerate(lines) if line.label.endswith(f"-> {criterion.after_tool}")), None)
        return None if first is None else lines[first:]
    if criterion.turns is not None:
        lo, hi = criterion.turns
        if len(agent) < lo:
            return None
        start = agent[lo - 2] + 1 if lo >= 2 else 0
        end = agent[min(hi, len(agent)) - 1]
        return lines[start:end + 1]
    if criterion.scope == "final":
        return [lines[agent[-1]]] if agent else None
    return lines if lines else None


def what_is_read(criterion: Criterion) -> str:
    if criterion.after_tool is not None:
        return f"what follows the agent's first call of {criterion.after_tool}"
    if criterion.turns is not None:
        return f"the agent's messages {criterion.turns[0]} to {criterion.turns[1]} and the user's lines before them"
    return _SCOPES.get(criterion.scope, _SCOPES["all"])


def render(lines: Sequence[Line]) -> str:
    return "\n".join(f"{line.label}: {line.text}" for line in lines)


def user_message(policy: str, criterion: Criterion, lines: Sequence[Line]) -> str:
    """The judge's one user message: the policy, the criterion, the transcript."""
    policy_text = policy.strip() or "(none given)"
    return (f"Policy the agent follows:\n{policy_text}\n\n"
            f"Criterion ({criterion.id}): {criterion.question}\n"
            f"Read: {what_is_read(criterion)}.\n\n"
            f"Transcript:\n{render(lines)}")


# --------------------------------------------------------------------------- the answer

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True)
class Answer:
    """A judge's answer read: ``verdict`` "yes" or "no" and its ``quote``; or ``problem``,
    why it is not in the verdict format."""

    verdict: str | None = None
    quote: str = ""
    problem: str | None = None


def snippet(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


def parse_answer(text: str) -> Answer:
    """The verdict and quote of a judge's text, or why it is not in the format."""
    match = _OBJECT.search(text)
    if match is None:
        return Answer(problem=f"no JSON verdict in the answer {snippet(text)}")
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return Answer(problem=f"no JSON verdict in the answer {snippet(text)}")
    if not isinstance(data, dict):
        return Answer(problem=f"no JSON verdict in the answer {snippet(text)}")
    verdict = data.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().lower() not in ("yes", "no"):
        return Answer(problem=f"verdict {snippet(json.dumps(verdict))} is not yes or no")
    quote = data.get("quote", "")
    if quote is None:
        quote = ""
    if not isinstance(quote, str):
        return Answer(problem="the quote is not text")
    return Answer(verdict=verdict.strip().lower(), quote=quote.strip())


def _normal(text: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return " ".join(text.split())


def find_quote(quote: str, lines: Sequence[Line]) -> int | None:
    """The transcript index of the line ``quote`` is taken from (whitespace and curly
    quotes aside, case kept); None when no line shown holds it."""
    wanted = _normal(quote.strip().strip('"').removesuffix("...").removeprefix("..."))
    if not wanted:
        return None
    for line in lines:
        if wanted in _normal(line.text):
            return line.index
    return None
