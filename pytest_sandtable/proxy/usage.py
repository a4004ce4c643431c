"""Tokens out of a model API's answer as it passes the proxy: a JSON body, or the events
of a streamed one (server-sent events), in the OpenAI (chat completions, responses)
and Anthropic (messages) wire formats. Counted as the adapters count them: input is
the uncached part, ``cache_read`` and ``cache_write`` apart."""

from __future__ import annotations

import json
from typing import Any

Tokens = tuple[int, int, int, int]  # input, output, cache_read, cache_write


def _int(v: Any) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v if isinstance(v, int) and v > 0 else 0


def tokens_of(usage: Any) -> Tokens | None:
    """The tokens of a ``usage`` object of either wire format, or None when it is none."""
    if not isinstance(usage, dict):
        return None
    written = _int(usage.get("cache_creation_input_tokens"))
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # OpenAI chat completions
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        cached = cached or _int(usage.get("cache_read_input_tokens"))
        return max(_int(usage.get("prompt_tokens")) - cached - written, 0), _int(usage.get("completion_tokens")), \
            cached, written
    details = usage.get("input_tokens_details")
    if isinstance(details, dict):  # OpenAI responses: input_tokens counts the cached ones too
        cached = _int(details.get("cached_tokens"))
        return max(_int(usage.get("input_tokens")) - cached, 0), _int(usage.get("output_tokens")), cached, 0
    if "input_tokens" in usage or "output_tokens" in usage:  # Anthropic: input is the uncached part already
        return _int(usage.get("input_tokens")), _int(usage.get("output_tokens")), \
            _int(usage.get("cache_read_input_tokens")), written
    return None


class Counted:
    """What one answer said: its model and tokens (None when it said none)."""

    __slots__ = ("model", "tokens")

    def __init__(self) -> None:
        self.model: str | None = None
        self.tokens: Tokens | None = None


def count_body(body: bytes) -> Counted:
    """The model and tokens of a whole JSON answer."""
    counted = Counted()
    try:
        data = json.loads(body)
    except ValueError:
        return counted
    if isinstance(data, dict):
        if isinstance(data.get("response"), dict):  # (a responses-API event's shape)
            data = data["response"]
        model = data.get("model")
        counted.model = model if isinstance(model, str) else None
        counted.tokens = tokens_of(data.get("usage"))
    return counted


class StreamCounter:
    """The model and tokens of a streamed answer, fed its bytes as they pass: OpenAI's
    last chunk carries ``usage`` (with ``stream_options.include_usage``); Anthropic's
    ``message_start`` carries the input side and each ``message_delta`` the output so
    far; the responses API's ``response.completed`` carries the whole."""

    def __init__(self) -> None:
        self.counted = Counted()
        self._pending = b""
        self._anthropic: list[int] | None = None

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def finish(self) -> Counted:
        if self._pending:
            self._line(self._pending.rstrip(b"\r"))
            self._pending = b""
        if self._anthropic is not None:
            i, o, r, w = self._anthropic
            self.counted.tokens = (i, o, r, w)
        return self.counted

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            return
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self._model(message.get("model"))
            self._anthropic = list(tokens_of(message.get("usage")) or (0, 0, 0, 0))
            return
        if kind == "message_delta":
            usage = event.get("usage")
            if isinstance(usage, dict):
                acc = self._anthropic if self._anthropic is not None else [0, 0, 0, 0]
                # cumulative counts: the latest one stands
                if "output_tokens" in usage:
                    acc[1] = _int(usage.get("output_tokens"))
                for k, at in (("input_tokens", 0), ("cache_read_input_tokens", 2), ("cache_creation_input_tokens", 3)):
                    if _int(usage.get(k)):
                        acc[at] = _int(usage.get(k))
                self._anthropic = acc
            return
        if isinstance(event.get("response"), dict):  # responses API: response.created ... response.completed
            response = event["response"]
            self._model(response.get("model"))
            whole = tokens_of(response.get("usage"))
            if whole is not None:
                self.counted.tokens = whole
            return
        self._model(event.get("model"))  # OpenAI chat completions chunks
        last = tokens_of(event.get("usage"))
        if last is not None:
            self.counted.tokens = last

    def _model(self, model: Any) -> None:
        if isinstance(model, str) and model and self.counted.model is None:
            self.counted.model = model
