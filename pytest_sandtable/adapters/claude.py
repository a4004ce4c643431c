"""Claude as the agent under test (``claude:<model>``), through the ``anthropic`` SDK.

The agent keeps the native Messages history of its trial in ``turn.state`` (text,
``tool_use`` and ``tool_result`` blocks, and any thinking blocks, passed back as the
API returned them), sends the domain's tools and the default system prompt, runs every
tool call of a response in order, and loops until the model ends its turn.

The key comes from ``ANTHROPIC_API_KEY`` only; the base URL from ``ANTHROPIC_BASE_URL``
when set (the SDK reads it), else the public API. The SDK's own retries are off:
:mod:`._retry` applies the project's policy.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic
from anthropic.types import Message

from .._agent_api import AgentError, Turn, Usage
from .._options import AdapterOptions
from ._common import PerLoop, error_detail, host_of, json_type, snippet
from ._retry import Caller, Fatal, TimedOut, Transient, connection_failure, parse_retry_after, retryable_status

MAX_STEPS_PER_TURN = 50
"""Model calls one agent turn may make (each follows a round of tool calls)."""


def anthropic_key(api_key: str | None = None) -> str:
    """The API key: the one given, else ``$ANTHROPIC_API_KEY``; ValueError without one."""
    key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise ValueError("claude:<model> needs an API key in the ANTHROPIC_API_KEY environment variable")
    return key


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
        self.__key = anthropic_key(api_key)
        self._base_url = base_url
        self._clients: PerLoop[anthropic.AsyncAnthropic] = PerLoop(self._new_client)

    def __repr__(self) -> str:
        return f"ClaudeMessages(model={self.model!r})"

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self.__key,
            base_url=self._base_url,  # None: $ANTHROPIC_BASE_URL, else the public API
            max_retries=0,
            timeout=self.options.timeout,
        )

    async def create(self, usage: Usage, **params: Any) -> Message:
        """One ``messages.create`` call (retried as the policy says), its usage recorded."""
        client = self._clients.get()
        host = host_of(str(client.base_url))
        caller = Caller(self.label, host, self.error, self.options.retries, self.options.timeout, (self.__key,))
        params.setdefault("max_tokens", self.options.max_tokens)
        if self.options.temperature is not None:
            # not a named argument of the 2.x SDK (newer models reject it); sent only when asked for
            params["extra_body"] = {"temperature": self.options.temperature}

        async def attempt() -> Any:
            try:
                return await client.messages.create(model=self.model, **params)
            except anthropic.APITimeoutError:
                raise TimedOut() from None
            except anthropic.APIConnectionError as e:
                raise Transient(connection_failure(e, host)) from None
            except anthropic.APIStatusError as e:
                what = f"HTTP {e.status_code} from {host}"
                detail = _status_detail(e)
                if retryable_status(e.status_code):
                    raise Transient(what, detail, parse_retry_after(e.response.headers)) from None
                raise Fatal(what, detail) from None
            except anthropic.APIError as e:
                raise Fatal(f"bad response from {host}", str(e)) from None
            except json.JSONDecodeError as e:  # a JSON content type with a body that is not JSON
                raise Fatal(f"bad response from {host}", f"body is not JSON: {snippet(e.doc)}") from None

        got = await caller.call(attempt)
        problem = _check_message(got)
        if problem:
            raise caller.failure(f"bad response from {host}", problem)
        msg: Message = got
        u = msg.usage
        usage.add(
            self.model,
            input_tokens=u.input_tokens or 0,
            output_tokens=u.output_tokens or 0,
            cache_read=u.cache_read_input_tokens or 0,
            cache_write=u.cache_creation_input_tokens or 0,
        )
        return msg


def _status_detail(e: anthropic.APIStatusError) -> str:
    message = e.api_message or error_detail(e.body)
    if not message and isinstance(e.body, str):
        message = snippet(e.body)
    if e.request_id:
        message = f"{message} (request-id {e.request_id})" if message else f"request-id {e.request_id}"
    return message


def _check_message(msg: Any) -> str:
    """What is wrong with a Messages response, or ''."""
    if isinstance(msg, str):
        return f"body is not JSON: {snippet(msg)}"
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
            for field, typ, name in (("id", str, "a string"), ("name", str, "a string"), ("input", dict, "an object")):
                if not isinstance(getattr(block, field, None), typ):
                    return f"content[{i}].{field} must be {name}"
    if msg.usage is None or not isinstance(getattr(msg.usage, "input_tokens", None), int):
        return "'usage' is missing"
    return ""


def _texts(msg: Message) -> str:
    return "".join(b.text for b in msg.content if b.type == "text").strip()


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
        for m in turn.messages[st["seen"]:]:
            if m["role"] == "user":
                _append(history, "user", [{"type": "text", "text": m["content"] or "(no message)"}])
        st["seen"] = len(turn.messages) + 1  # + the reply this turn ends with
        params: dict[str, Any] = {}
        if turn.system_prompt:
            params["system"] = turn.system_prompt
        if turn.tools:
            params["tools"] = [t.anthropic() for t in turn.tools]
        said: list[str] = []
        label = self._api.label
        for _ in range(MAX_STEPS_PER_TURN):
            msg = await self._api.create(turn.usage, messages=history, **params)
            blocks = [b.to_dict(mode="json") for b in msg.content]
            text = _texts(msg)
            tool_uses = [b for b in msg.content if b.type == "tool_use"]
            reason = msg.stop_reason
            if reason == "max_tokens" and tool_uses:
                raise AgentError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) "
                                 "in the middle of a tool call")
            if reason == "refusal":
                if text:
                    return _joined([*said, text])
                raise AgentError(f"{label}: the model refused to answer (stop_reason 'refusal')")
            if reason == "model_context_window_exceeded":
                raise AgentError(f"{label}: the conversation no longer fits the model's context window")
            if text:
                said.append(text)
            if blocks:
                _append(history, "assistant", blocks)
            if reason == "pause_turn":
                continue
            if tool_uses:
                results = []
                for b in tool_uses:
                    r = turn.call_tool(b.name, b.input)
                    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.id, "content": r.to_json()}
                    if not r.ok:
                        result["is_error"] = True
                    results.append(result)
                _append(history, "user", results)
                continue
            if reason == "max_tokens" and not said:
                raise AgentError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) before any text")
            if reason not in ("end_turn", "stop_sequence", "max_tokens", None) and not said:
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

