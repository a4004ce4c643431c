"""A finished trial as OpenTelemetry spans, made after the trial from what it recorded.

One span per trial (``sandtable.trial <domain>/<task>[<trial>]``, a trace of its own),
and under it, in the order they happened: a span per user turn
(``sandtable.user_turn``), per agent turn (``invoke_agent <agent>``) with a span per
tool call under it (``execute_tool <tool>``; the rules it broke, its fault and the
events that followed it as span events), and a span per model the agent or the user
used (``chat <model>``: a trial records its tokens per model, not per call). Names and
attributes follow the OpenTelemetry GenAI semantic conventions where one applies
(``gen_ai.*``); the rest are ``sandtable.*``.

Times come from the trial: it ended at ``ended_ns`` (when its test phase ended) and
lasted ``duration``; each agent turn lasted its recorded ``latency``; the user turns
share the rest. A trial records no time per tool call, so the calls of a turn share it
evenly, in order (``sandtable.time.estimated`` says so on their spans).

Every text and value passes through ``report.safe``: secrets redacted, lone
surrogates replaced, and clipped to :data:`VALUE_LIMIT` characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..report.safe import clip_text, safe_text, scrub_secrets, scrub_text

__all__ = ["VALUE_LIMIT", "Segment", "record_trial", "timeline", "trial_span_name"]

VALUE_LIMIT = 1_000  # characters of one attribute's text (an argument's JSON, a reply, a detail)
_NAME_LIMIT = 200  # characters of a name (a tool's, a model's, an agent's) in a span name

_NS = 1_000_000_000


@dataclass
class Segment:
    """One user or agent turn on the trial's timeline: its kind, its times (ns since the
    epoch), and for an agent turn its number, the calls made in it (indices into the
    trial's ``calls``), the events that followed them and its reply."""

    kind: str  # "user" | "agent"
    turn: int
    start: int = 0
    end: int = 0
    text: str | None = None
    calls: list[int] = field(default_factory=list)
    events: list[Mapping[str, Any]] = field(default_factory=list)


def trial_span_name(trial: Mapping[str, Any]) -> str:
    return f"sandtable.trial {trial.get('domain')}/{trial.get('task')}[{trial.get('trial')}]"


def _segments(trial: Mapping[str, Any]) -> list[Segment]:
    calls = trial.get("calls") or []
    found: list[Segment] = []
    for entry in trial.get("transcript") or []:
        if not isinstance(entry, Mapping):
            continue
        role = entry.get("role")
        if role == "user":
            found.append(Segment("user", _int(entry.get("turn")), text=str(entry.get("text", ""))))
            continue
        if role == "tool":
            index = _int(entry.get("call"))
            call = calls[index] if 0 <= index < len(calls) and isinstance(calls[index], Mapping) else {}
            turn = _int(call.get("turn"))
        else:
            turn = _int(entry.get("turn"))
        last = found[-1] if found else None
        if last is None or last.kind != "agent" or last.turn != turn:
            last = Segment("agent", turn)
            found.append(last)
        if role == "tool":
            last.calls.append(index)
        elif role == "event":
            last.events.append(entry)
        elif role == "agent":
            last.text = str(entry.get("text", ""))
    return found


def timeline(trial: Mapping[str, Any], ended_ns: int) -> tuple[int, list[Segment]]:
    """The trial's start and its turns with their times: each agent turn as long as its
    recorded latency, the user turns sharing what is left of the trial's duration; all
    of it within the trial (scaled down if the latencies add up to more)."""
    duration = max(0, round(_float(trial.get("duration")) * _NS))
    start = ended_ns - duration
    segments = _segments(trial)
    latency = [max(0, round(_float(x) * _NS)) for x in (trial.get("latency") or [])]
    agent_ns = {}
    for seg in segments:
        if seg.kind == "agent":
            agent_ns[id(seg)] = latency[seg.turn - 1] if 0 < seg.turn <= len(latency) else 0
    users = sum(1 for seg in segments if seg.kind == "user")
    agent_total = sum(agent_ns.values())
    scale = duration / agent_total if agent_total > duration else 1.0
    user_ns = (duration - agent_total * scale) / users if users else 0.0
    at = 0.0  # ns since the start (an offset: a float of ns since the epoch is off by hundreds)
    for seg in segments:
        seg.start = min(start + round(at), ended_ns)
        at += agent_ns[id(seg)] * scale if seg.kind == "agent" else user_ns
        seg.end = min(max(start + round(at), seg.start), ended_ns)
    return start, segments


def record_trial(tracer: Any, trial: Mapping[str, Any], ended_ns: int, secrets: Sequence[str] = ()) -> None:
    """Make the spans of a finished ``trial`` (a trial dict, as results.json holds it) with
    ``tracer`` (an OpenTelemetry ``Tracer``, or ``export.JsonTracer``, which makes the
    same spans as OTLP/JSON directly), ended at ``ended_ns`` ns since the epoch."""
    text = _Texts(secrets)
    start, segments = timeline(trial, ended_ns)
    agent = text.name(trial.get("agent") or "agent")
    root = _root_span(tracer, trial, start, ended_ns, agent, text)
    context = _context(tracer, root)
    violations = [v for v in trial.get("violations") or [] if isinstance(v, Mapping)]
    for seg in segments:
        if seg.kind == "user":
            span = tracer.start_span("sandtable.user_turn", context=context, start_time=seg.start,
                                     attributes=_attributes({
                                         "sandtable.turn": seg.turn,
                                         "sandtable.user": text.name(trial.get("user") or "user"),
                                         "sandtable.text": text.value(seg.text),
                                     }))
            span.end(end_time=seg.end)
        else:
            _agent_turn(tracer, context, trial, seg, agent, violations, text)
    _chat_spans(tracer, context, _mapping(trial.get("usage")), start, ended_ns, text)
    root.end(end_time=ended_ns)


def _root_span(tracer: Any, trial: Mapping[str, Any], start: int, ended_ns: int, agent: str, text: _Texts) -> Any:
    """The trial's span (not ended): its attributes, a check event per check, an error
    status unless it passed."""
    verdict = str(trial.get("verdict", ""))
    usage = _mapping(trial.get("usage"))
    agent_tokens = _tokens(usage.get("agent"))
    user_tokens = _tokens(usage.get("user"))
    checks = [c for c in trial.get("checks") or [] if isinstance(c, Mapping)]
    root = tracer.start_span(
        trial_span_name({k: text.name(trial.get(k)) for k in ("domain", "task", "trial")}),
        start_time=start,
        attributes=_attributes({
            "sandtable.domain": text.name(trial.get("domain")),
            "sandtable.task": text.name(trial.get("task")),
            "sandtable.trial": _int(trial.get("trial")),
            "sandtable.k": _int(trial.get("k")),
            "sandtable.seed": _int(trial.get("seed")),
            "sandtable.verdict": verdict,
            "sandtable.failed_checks": [text.name(c.get("id")) for c in checks if not c.get("passed")],
            "sandtable.agent": agent,
            "sandtable.user": text.name(trial.get("user") or "user"),
            "sandtable.ended_by": text.name(trial.get("ended_by")),
            "sandtable.turns": _int(trial.get("turns")),
            "sandtable.tags": [text.name(t) for t in trial.get("tags") or []],
            "sandtable.critical": bool(trial.get("critical")),
            "sandtable.error": text.value(trial["error"]) if trial.get("error") else None,
            "sandtable.replayed": bool(trial.get("replayed")),
            "sandtable.location": text.name(trial.get("location")) or None,
            "gen_ai.agent.name": agent,
            "gen_ai.usage.input_tokens": agent_tokens[0],
            "gen_ai.usage.output_tokens": agent_tokens[1],
            "sandtable.user.usage.input_tokens": user_tokens[0],
            "sandtable.user.usage.output_tokens": user_tokens[1],
        }),
    )
    for c in checks:
        root.add_event("sandtable.check", _attributes({
            "sandtable.check.kind": text.name(c.get("kind")),
            "sandtable.check.id": text.name(c.get("id")),
            "sandtable.check.passed": bool(c.get("passed")),
            "sandtable.check.detail": text.value(c.get("detail")) or None,
        }), timestamp=ended_ns)
    if verdict != "passed":
        why = trial.get("error") or ", ".join(text.name(c.get("id")) for c in checks if not c.get("passed"))
        _set_error(root, text.value(f"{verdict}: {why}" if why else verdict))
    return root


def _agent_turn(tracer: Any, context: Any, trial: Mapping[str, Any], seg: Segment, agent: str,
                violations: list[Mapping[str, Any]], text: _Texts) -> None:
    """An agent turn's span, the rules its words broke as events, its calls' spans under it."""
    calls = trial.get("calls") or []
    span = tracer.start_span(f"invoke_agent {agent}", context=context, start_time=seg.start,
                             attributes=_attributes({
                                 "gen_ai.operation.name": "invoke_agent",
                                 "gen_ai.agent.name": agent,
                                 "sandtable.turn": seg.turn,
                                 "sandtable.text": text.value(seg.text) if seg.text is not None else None,
                             }))
    for v in violations:  # what the agent said broke a rule: an event of its turn
        if v.get("call") is None and _int(v.get("turn")) == seg.turn:
            span.add_event("sandtable.rule", _violation(v, text), timestamp=seg.end)
    turn_context = _context(tracer, span)
    n = len(seg.calls)
    slot = (seg.end - seg.start) / n if n else 0
    for i, index in enumerate(seg.calls):
        call = calls[index] if 0 <= index < len(calls) and isinstance(calls[index], Mapping) else {}
        c_start = seg.start + round(i * slot)  # offsets: a float of ns since the epoch is off by hundreds
        c_end = seg.start + round((i + 1) * slot)
        _record_call(tracer, turn_context, call, index, c_start, min(max(c_end, c_start), seg.end),
                     [v for v in violations if v.get("call") == index],
                     [e for e in seg.events if e.get("after_call") == index], text)
    span.end(end_time=seg.end)


def _chat_spans(tracer: Any, context: Any, usage: Mapping[str, Any], start: int, ended_ns: int,
                text: _Texts) -> None:
    """A span per model the agent or the user used, with its tokens (the whole trial long)."""
    for side in ("agent", "user"):
        by_model = usage.get(side)
        if not isinstance(by_model, Mapping):
            continue
        for model, counts in by_model.items():
            if not isinstance(counts, Mapping):
                continue
            name = text.name(model)
            span = tracer.start_span(f"chat {name}", context=context, start_time=start, attributes=_attributes({
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": name,
                "gen_ai.usage.input_tokens": _int(counts.get("input")),
                "gen_ai.usage.output_tokens": _int(counts.get("output")),
                "gen_ai.usage.cache_read.input_tokens": _int(counts.get("cache_read")),
                "gen_ai.usage.cache_creation.input_tokens": _int(counts.get("cache_write")),
                "sandtable.side": side,
                "sandtable.model.calls": _int(counts.get("calls")),
            }))
            span.end(end_time=ended_ns)


def _record_call(tracer: Any, context: Any, call: Mapping[str, Any], index: int, start: int, end: int,
                 violations: list[Mapping[str, Any]], events: list[Mapping[str, Any]], text: _Texts) -> None:
    tool = text.name(call.get("tool"))
    ok = bool(call.get("ok"))
    error = _mapping(call.get("error"))
    span = tracer.start_span(f"execute_tool {tool}", context=context, start_time=start, attributes=_attributes({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": f"call-{index}",
        "gen_ai.tool.call.arguments": text.json(call.get("args")),
        "sandtable.call.index": index,
        "sandtable.tool.ok": ok,
        "sandtable.time.estimated": True,
        "error.type": None if ok else text.name(error.get("code")),
        "sandtable.tool.error": None if ok else text.value(error.get("message")),
    }))
    for v in violations:  # the rules are checked before the call runs
        span.add_event("sandtable.rule", _violation(v, text), timestamp=start)
    fault = call.get("fault")
    if isinstance(fault, Mapping):
        span.add_event("sandtable.fault", _attributes({
            "sandtable.fault.index": _int(fault.get("fault")),
            "sandtable.fault.kind": text.name(fault.get("kind")) if fault.get("kind") is not None else None,
            "sandtable.fault.latency_ms": _int(fault.get("latency_ms")),
            "sandtable.fault.retry_after": _float(fault["retry_after"]) if fault.get("retry_after") is not None
            else None,
            "sandtable.fault.landed": bool(fault["landed"]) if "landed" in fault else None,
        }), timestamp=end)
    for e in events:
        span.add_event("sandtable.event", _attributes({
            "sandtable.event.index": _int(e.get("event")),
            "sandtable.event.op": text.name(e.get("op")),
            "sandtable.event.table": text.name(e.get("table")),
            "sandtable.event.key": text.name(e["key"]) if "key" in e else None,
            "sandtable.event.skipped": text.value(e["skipped"]) if e.get("skipped") else None,
        }), timestamp=end)
    if not ok:
        _set_error(span, text.value(error.get("message")))
    span.end(end_time=end)


def _context(tracer: Any, span: Any) -> Any:
    """The context whose current span is ``span``, for its children: the tracer's own
    (``JsonTracer.context_of``), else OpenTelemetry's."""
    context_of = getattr(tracer, "context_of", None)
    if context_of is not None:
        return context_of(span)
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def _set_error(span: Any, message: str) -> None:
    set_error = getattr(span, "set_error", None)
    if set_error is not None:
        set_error(message)
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, message))


def _violation(v: Mapping[str, Any], text: _Texts) -> dict[str, Any]:
    return _attributes({
        "sandtable.rule.id": text.name(v.get("invariant")),
        "sandtable.rule.kind": text.name(v.get("kind")),
        "sandtable.rule.soft": bool(v.get("soft")),
        "sandtable.rule.passed": False,
        "sandtable.rule.detail": text.value(v.get("detail")),
        "sandtable.rule.quote": text.value(v["quote"]) if v.get("quote") else None,
    })


class _Texts:
    """Text made safe for a span: secrets redacted, lone surrogates replaced, clipped."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self.secrets = secrets
        self._names: dict[str, str] = {}  # a trial's names recur on most of its spans

    def value(self, value: Any, limit: int = VALUE_LIMIT) -> str:
        s = value if isinstance(value, str) else "" if value is None else str(value)
        return safe_text(clip_text(scrub_text(s, self.secrets), limit, self.secrets))

    def name(self, value: Any) -> str:
        if type(value) is not str:
            return self.value(value, _NAME_LIMIT)
        made = self._names.get(value)
        if made is None:
            made = self._names[value] = self.value(value, _NAME_LIMIT)
        return made

    def json(self, value: Any) -> str:
        try:
            encoded = json.dumps(scrub_secrets(value, self.secrets), ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as e:
            encoded = f"(not JSON: {type(e).__name__})"
        return self.value(encoded)


def _mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _attributes(d: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes OpenTelemetry takes: no None (an attribute left out instead)."""
    return {k: v for k, v in d.items() if v is not None}


def _tokens(by_model: Any) -> tuple[int, int]:
    if not isinstance(by_model, Mapping):
        return 0, 0
    counts = [c for c in by_model.values() if isinstance(c, Mapping)]
    return sum(_int(c.get("input")) for c in counts), sum(_int(c.get("output")) for c in counts)


def _int(x: Any) -> int:
    try:
        return int(x)
    except (TypeError, ValueError, OverflowError):
        return 0


def _float(x: Any) -> float:
    try:
        f = float(x)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return f if f == f and abs(f) != float("inf") else 0.0
