"""Claude as the agent under test (``claude:<model>``), through the ``anthropic`` SDK.

The agent keeps the native Messages history of its trial in ``turn.state`` (text,
``tool_use`` and ``tool_result`` blocks, and any thinking, redacted thinking or server
tool blocks, passed back as the API returned them), sends the domain's tools and the
default system prompt, runs every tool call of a response in order, and loops until
the model ends its turn.

The key comes from ``ANTHROPIC_API_KEY`` only; the base URL from the ``base_url``
argument, else ``ANTHROPIC_BASE_URL`` when set and not blank, else the public API,
normalised by :func:`._common.anthropic_base_url`. The SDK's own retries are off:
:mod:`._retry` applies the project's policy.

Prompt caching (on unless ``AdapterOptions.prompt_cache`` is off): every request marks
its stable prefix with ``cache_control`` (see :func:`cache_marked`), for agents and
simulated users alike.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic
from anthropic.types import Message

from ..engine.api import AgentError, Turn, Usage
from . import recording
from ._common import (
    PerLoop,
    agent_system_prompt,
    anthropic_base_url,
    body_snippet,
    error_detail,
    host_of,
    json_type,
    snippet,
)
from ._retry import Caller, Fatal, TimedOut, Transient, connection_failure, parse_retry_after, should_retry
from .options import AdapterOptions

MAX_STEPS_PER_TURN = 50
"""Model calls one agent turn may make (each follows a round of tool calls)."""
DEFAULT_BASE_URL = "https://api.anthropic.com"
TRANSIENT_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
"""Anthropic error types worth another attempt when they come in an HTTP 200 body."""

# Prompt caching, as Anthropic documents it (platform.claude.com/docs/en/build-with-claude/
# prompt-caching; the "prompt caching" notes of anthropics/skills, claude-api/shared/
# prompt-caching.md): the prompt renders as tools, then system, then messages; a
# ``cache_control`` breakpoint caches the prefix up to and including its block; "max 4
# cache_control breakpoints per request" (a fifth is an HTTP 400); breakpoints go on
# tool definitions, system text blocks and message content blocks (text, image,
# tool_use, tool_result, document), not on thinking blocks; and "each breakpoint walks
# backward at most 20 content blocks to find a prior cache entry".
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""The 5-minute cache (the default TTL; writes cost 1.25x the input price, reads 0.1x)."""
MAX_CACHE_BREAKPOINTS = 4
"""The API's limit of ``cache_control`` breakpoints in one request."""
CACHE_LOOKBACK_BLOCKS = 15
"""Content blocks a breakpoint may be from the previous request's and still find its
cache entry: the API looks back 20; 15 is the margin its notes advise."""
_NOT_CACHEABLE = frozenset({"thinking", "redacted_thinking"})


def anthropic_key(api_key: str | None = None) -> str:
    """The API key: the one given, else ``$ANTHROPIC_API_KEY``; ValueError without one."""
    key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY", "").strip()
    if not key:
        raise ValueError("claude:<model> needs an API key in the ANTHROPIC_API_KEY environment variable")
    return key


REPLAY_KEY = "sandtable-replays-without-a-key"
"""What the SDK is given as its key when ``--sandtable-record=none`` replays every call and
no key is set: no request leaves the machine, so none is needed (docs/recording.md)."""


def _key_or_replay(api_key: str | None) -> str:
    try:
        return anthropic_key(api_key)
    except ValueError:
        played = recording.settings()
        if played is not None and played.mode == "none":
            return REPLAY_KEY
        raise


class ClaudeMessages:
    """Calls the Messages API for one model with the retry policy; one SDK client per
    event loop. ``role`` ("agent" or "user") and ``error`` (AgentError or UserError)
    decide how failures are named and raised."""

    def __init__(
        self,
        model: str,
        options: AdapterOptions,
        *,
        role: str,
        error: type[Exception],
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        self.model = model
        self.options = options
        self.label = f"claude {role} {model}"
        self.error = error
        self.__key = _key_or_replay(api_key)
        given = base_url if base_url is not None else os.environ.get("ANTHROPIC_BASE_URL")
        self.base_url = anthropic_base_url(given) or DEFAULT_BASE_URL
        self.host = host_of(self.base_url)
        self._clients: PerLoop[anthropic.AsyncAnthropic] = PerLoop(self._new_client)

    def __repr__(self) -> str:
        return f"ClaudeMessages(model={self.model!r})"

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self.__key,
            base_url=self.base_url,  # always explicit: a blank $ANTHROPIC_BASE_URL must not reach the SDK
            max_retries=0,
            timeout=self.options.timeout,
            http_client=recording.anthropic_http_client(),  # through --sandtable-record when it is on
        )

    async def create(self, usage: Usage, *, earlier_mark: int | None = None, **params: Any) -> Message:
        """One ``messages.create`` call (retried as the policy says), its usage recorded.
        With prompt caching on, the request's prefix is marked (:func:`cache_marked`;
        ``earlier_mark`` is the previous request's, from :func:`cache_mark`)."""
        if self.options.prompt_cache:
            params = cache_marked(params, earlier_mark)
        client = self._clients.get()
        host = self.host
        caller = Caller(self.label, host, self.error, self.options.retries, self.options.timeout, (self.__key,))
        params.setdefault("max_tokens", self.options.max_tokens)
        if self.options.temperature is not None:
            # not a named argument of the 2.x SDK (newer models reject it); sent only when asked for
            params["extra_body"] = {"temperature": self.options.temperature}

        async def attempt() -> Message:
            try:
                got: Any = await client.messages.create(model=self.model, **params)
            except anthropic.APITimeoutError:
                raise TimedOut() from None
            except anthropic.APIConnectionError as e:
                raise Transient(connection_failure(e, host)) from None
            except anthropic.APIStatusError as e:
                what = f"HTTP {e.status_code} from {host}"
                detail = _status_detail(e)
                if should_retry(e.status_code, e.response.headers):
                    raise Transient(what, detail, parse_retry_after(e.response.headers)) from None
                raise Fatal(what, detail) from None
            except anthropic.APIError as e:
                raise Fatal(f"bad response from {host}", str(e)) from None
            except json.JSONDecodeError as e:  # a JSON content type with a body that is not JSON
                raise Fatal(f"bad response from {host}", f"body is not JSON: {snippet(e.doc)}") from None
            err = _error_in_body(got)
            if err is not None:
                etype, detail = err
                what = f"error from {host} (HTTP 200" + (f", {etype})" if etype else ")")
                if etype in TRANSIENT_ERROR_TYPES:
                    raise Transient(what, detail)
                raise Fatal(what, detail)
            problem = _check_message(got)
            if problem:
                raise Fatal(f"bad response from {host}", problem)
            msg: Message = got
            return msg

        msg = await caller.call(attempt)
        usage.add(self.model, *_usage(msg.usage))
        return msg


def _n(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def _usage(u: Any) -> tuple[int, int, int, int]:
    """``(input, output, cache_read, cache_write)``; zeros for what a compatible server
    leaves out. Cache writes: ``cache_creation_input_tokens``, else the sum of the
    ``cache_creation`` object's counts (5-minute and 1-hour writes)."""
    if u is None:
        return 0, 0, 0, 0
    written = _n(getattr(u, "cache_creation_input_tokens", None))
    breakdown = getattr(u, "cache_creation", None)
    if not written and breakdown is not None:
        parts = breakdown.to_dict() if hasattr(breakdown, "to_dict") else breakdown
        if isinstance(parts, dict):
            written = sum(_n(v) for v in parts.values())
    return (_n(getattr(u, "input_tokens", None)), _n(getattr(u, "output_tokens", None)),
            _n(getattr(u, "cache_read_input_tokens", None)), written)


def _cacheable(block: Any) -> bool:
    """A content block that may carry ``cache_control``: not thinking, not empty text
    (the API rejects a breakpoint on either)."""
    if isinstance(block, str):
        return bool(block)
    if not isinstance(block, dict) or block.get("type") in _NOT_CACHEABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _blocks(message: dict[str, Any]) -> list[Any]:
    """A message's content blocks; text given as a string is one block."""
    content = message.get("content")
    return [content] if isinstance(content, str) else list(content) if isinstance(content, list) else []


def cache_mark(messages: list[dict[str, Any]]) -> int | None:
    """Where the history's breakpoint goes: the position, counting every content block
    of every message in order from 0, of the last block that may carry ``cache_control``
    (None when there is none). An agent passes it back as ``earlier_mark`` next call."""
    n = sum(len(_blocks(m)) for m in messages)
    for m in reversed(messages):
        blocks = _blocks(m)
        n -= len(blocks)
        for j in range(len(blocks) - 1, -1, -1):
            if _cacheable(blocks[j]):
                return n + j
    return None


def _marked_at(messages: list[dict[str, Any]], marks: set[int]) -> list[dict[str, Any]]:
    """A copy of ``messages`` with ``cache_control`` on the blocks at ``marks``; the
    marked messages and blocks are copied, so the caller's history never keeps a
    breakpoint (old ones would pile up past the API's limit)."""
    out: list[dict[str, Any]] = []
    n = 0
    for m in messages:
        blocks = _blocks(m)
        here = {i - n for i in marks if n <= i < n + len(blocks)}
        n += len(blocks)
        if not here:
            out.append(m)
            continue
        content = [({"type": "text", "text": b} if isinstance(b, str) else dict(b))
                   | ({"cache_control": dict(CACHE_CONTROL)} if j in here else {}) for j, b in enumerate(blocks)]
        out.append({**m, "content": content})
    return out


def cache_marked(params: dict[str, Any], earlier_mark: int | None = None) -> dict[str, Any]:
    """``messages.create`` parameters with the stable prefix marked for the cache, at
    most :data:`MAX_CACHE_BREAKPOINTS` breakpoints: the last tool definition, the
    system prompt (sent as one text block) and the last cacheable block of the history,
    so that each call reads what the one before it wrote. A fourth goes on the previous
    request's breakpoint (``earlier_mark``) when more than :data:`CACHE_LOOKBACK_BLOCKS`
    blocks were added since (a turn of many tool calls), where the API's lookback
    would no longer find it. Nothing given is changed."""
    out = dict(params)
    tools = out.get("tools")
    if isinstance(tools, list) and tools and isinstance(tools[-1], dict):
        out["tools"] = [*tools[:-1], {**tools[-1], "cache_control": dict(CACHE_CONTROL)}]
    system = out.get("system")
    if isinstance(system, str) and system:
        out["system"] = [{"type": "text", "text": system, "cache_control": dict(CACHE_CONTROL)}]
    messages = out.get("messages")
    if isinstance(messages, list):
        last = cache_mark(messages)
        marks = set() if last is None else {last}
        if last is not None and earlier_mark is not None and 0 <= earlier_mark < last - CACHE_LOOKBACK_BLOCKS:
            marks.add(earlier_mark)
        out["messages"] = _marked_at(messages, marks)
    return out


def _status_detail(e: anthropic.APIStatusError) -> str:
    message = e.api_message or error_detail(e.body)
    if not message and e.response.content:
        message = body_snippet(e.response.content, e.response.headers.get("content-type"))
    if e.request_id:
        message = f"{message} (request-id {e.request_id})" if message else f"request-id {e.request_id}"
    return message


def _error_in_body(msg: Any) -> tuple[str, str] | None:
    """``(error type, message)`` of an error sent with HTTP 200 (``{"type": "error",
    "error": {...}}``, as some gateways do), else None."""
    err = getattr(msg, "error", None) if not isinstance(msg, (str, bytes)) else None
    if getattr(msg, "type", None) != "error" and not (isinstance(err, dict) and getattr(msg, "content", None) is None):
        return None
    body = {"error": err} if err is not None else {}
    etype = err.get("type") if isinstance(err, dict) else None
    return (etype if isinstance(etype, str) else ""), error_detail(body) or "the server reported an error"


def _check_message(msg: Any) -> str:
    """What is wrong with a Messages response, or ''. Tolerated (a compatible server's
    variations): a missing ``usage``, a ``tool_use`` without an id or input, input as
    JSON text."""
    if isinstance(msg, str):
        return f"body is not JSON: {body_snippet(msg.encode())}"
    if not isinstance(msg, Message):
        return f"expected a message object, got {json_type(msg)}"
    content = msg.content
    if not isinstance(content, list):
        return f"'content' must be an array, got {json_type(content)}"
    for i, block in enumerate(content):
        kind = getattr(block, "type", None)
        if not isinstance(kind, str):
            return f"content[{i}] has no 'type'"
        if kind == "text" and not isinstance(getattr(block, "text", None), str):
            return f"content[{i}].text must be a string"
        if kind == "tool_use":
            name = getattr(block, "name", None)
            if not isinstance(name, str) or not name:
                return f"content[{i}].name must be a string"
            if _tool_input(getattr(block, "input", None)) is None:
                return f"content[{i}].input must be an object"
    return ""


def _tool_input(value: Any) -> dict[str, Any] | None:
    """A tool_use block's input as an object: missing is ``{}``, JSON text of an object is
    parsed; anything else None."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # also nesting too deep to read
            return None
    return value if isinstance(value, dict) else None


def _texts(msg: Message) -> str:
    return "".join(b.text for b in msg.content if b.type == "text").strip()


def _tool_uses(blocks: list[dict[str, Any]], state: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of a response (as they go back into the history), each with
    an id (a missing or repeated one is replaced) and its input as an object."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for b in blocks:
        if b.get("type") != "tool_use":
            continue
        if not isinstance(b.get("id"), str) or not b["id"] or b["id"] in seen:
            state["ids"] = state.get("ids", 0) + 1
            b["id"] = f"toolu_sandtable_{state['ids']:04d}"
        seen.add(b["id"])
        b["input"] = _tool_input(b.get("input")) or {}
        out.append(b)
    return out


class ClaudeAgent:
    """The agent under test played by a Claude model (``claude:<model>``).

    Args:
        model: the model id, e.g. ``claude-sonnet-4-5``.
        options: timeouts, retries, temperature, max_tokens.
        api_key: defaults to ``$ANTHROPIC_API_KEY``.
        base_url: defaults to ``$ANTHROPIC_BASE_URL``, else the public API.

    The reply of a turn is the text of every response in it (text said before a
    tool call included), paragraphs joined by a blank line, since a chat user would
    see all of it.
    """

    def __init__(
        self, model: str, options: AdapterOptions, *, api_key: str | None = None, base_url: str | None = None
    ) -> None:
        self.model = model
        self.name = f"claude:{model}"
        self.options = options
        self._api = ClaudeMessages(model, options, role="agent", error=AgentError, api_key=api_key, base_url=base_url)

    def __repr__(self) -> str:
        return f"ClaudeAgent(model={self.model!r})"

    async def __call__(self, turn: Turn) -> str:
        st: dict[str, Any] = turn.state.setdefault("claude", {"messages": [], "seen": 0})
        history: list[dict[str, Any]] = st["messages"]
        prefix = st["seen"] == 0  # (issue 22) the first turn: an agent message now is a task's history
        for m in turn.messages[st["seen"]:]:
            if m["role"] == "user":
                _append(history, "user", [{"type": "text", "text": m["content"] or "(no message)"}])
            elif prefix and m["role"] == "assistant" and m["content"]:
                _append(history, "assistant", [{"type": "text", "text": m["content"]}])
        st["seen"] = len(turn.messages) + 1  # + the reply this turn ends with
        params: dict[str, Any] = {}
        system = agent_system_prompt(turn, st)
        if system:
            params["system"] = system
        if turn.tools:
            params["tools"] = [t.anthropic() for t in turn.tools]
        said: list[str] = []
        label = self._api.label
        limit = f"the response hit max_tokens ({self.options.max_tokens})"
        too_long = "the conversation no longer fits the model's context window"
        for _ in range(MAX_STEPS_PER_TURN):
            mark = cache_mark(history)
            msg = await self._api.create(turn.usage, messages=history, earlier_mark=st.get("cache_mark"), **params)
            st["cache_mark"] = mark
            # as returned; no warnings for values a compatible server sends in another type
            blocks = [b.to_dict(mode="json", warnings=False) for b in msg.content]
            text = _texts(msg)
            tool_uses = _tool_uses(blocks, st)
            reason = msg.stop_reason
            if tool_uses and reason in ("max_tokens", "model_context_window_exceeded"):
                cut = limit if reason == "max_tokens" else too_long
                raise AgentError(f"{label}: {cut} in the middle of a tool call")
            if reason == "refusal":
                # the refused response is left out of the history, as the API asks
                if text or said:
                    return _joined([*said, text])
                raise AgentError(f"{label}: the model refused to answer (stop_reason 'refusal')")
            if text:
                said.append(text)
            if blocks:
                _append(history, "assistant", blocks)
            if tool_uses:  # whatever the stop reason says (some compatible servers say end_turn)
                results = []
                for b in tool_uses:
                    r = await turn.acall_tool(b["name"], b["input"])
                    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": b["id"], "content": r.to_json()}
                    if not r.ok:
                        result["is_error"] = True
                    results.append(result)
                _append(history, "user", results)
                continue
            if reason == "pause_turn":  # a server tool paused a long turn: send it back to go on
                continue
            if not said:
                if reason == "max_tokens":
                    raise AgentError(f"{label}: {limit} before any text")
                if reason == "model_context_window_exceeded":
                    raise AgentError(f"{label}: {too_long}")
                if reason not in ("end_turn", "stop_sequence", None):
                    raise AgentError(f"{label}: the model stopped ({reason}) without a reply")
            return _joined(said)
        raise AgentError(f"{label}: no reply after {MAX_STEPS_PER_TURN} model calls in one turn")


def _joined(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)


def _append(history: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add blocks to the history, merging into the last message when it has the same
    role (the API wants alternating roles)."""
    if history and history[-1]["role"] == role:
        history[-1]["content"].extend(blocks)
    else:
        history.append({"role": role, "content": list(blocks)})
