"""Any OpenAI-compatible chat-completions endpoint as the agent under test (``openai:<model>``):
OpenAI itself, vLLM, Ollama, LiteLLM, llama.cpp's server... through ``httpx``.

Base URL: the option (``--sandtable-agent-base-url`` / ``--sandtable-user-base-url``), else
``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``; requests go to
``<base>/chat/completions``. Key: ``$OPENAI_API_KEY``, sent as a bearer token when set
(local servers usually need none).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from .._agent_api import AgentError, Turn, Usage
from .._options import AdapterOptions
from ._common import PerLoop, error_detail, host_of, json_type, parse_json_body, snippet
from ._retry import Caller, Fatal, TimedOut, Transient, connection_failure, parse_retry_after, retryable_status

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_STEPS_PER_TURN = 50
"""Model calls one agent turn may make (each follows a round of tool calls)."""


class OpenAIChat:
    """Calls ``POST <base>/chat/completions`` for one model with the retry policy.

    ``role`` ("agent" or "user") and ``error`` (AgentError or UserError) decide how
    failures are named and raised.
    """

    def __init__(
        self,
        model: str,
        options: AdapterOptions,
        *,
        role: str,
        error: type[Exception],
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.model = model
        self.options = options
        self.label = f"openai {role} {model}"
        self.error = error
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.host = host_of(self.base_url)
        self.__key = api_key if api_key is not None else (os.environ.get("OPENAI_API_KEY") or None)
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(lambda: httpx.AsyncClient(
            timeout=options.timeout, limits=httpx.Limits(max_connections=None, max_keepalive_connections=64)))

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def max_tokens_field(self) -> str:
        """api.openai.com's newer models want ``max_completion_tokens``; other servers
        (vLLM, Ollama, LiteLLM) all take ``max_tokens``."""
        return "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"

    def payload(self, messages: list[dict[str, Any]], seed: int | None, **extra: Any) -> dict[str, Any]:
        """A request body: the model, messages, seed, temperature and max tokens from options."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if seed is not None:
            body["seed"] = seed
        if self.options.temperature is not None:
            body["temperature"] = self.options.temperature
        body[self.max_tokens_field] = self.options.max_tokens
        body.update(extra)
        return body

    async def complete(self, usage: Usage, body: dict[str, Any]) -> dict[str, Any]:
        """One completion (retried as the policy says). Returns ``choices[0]`` checked
        for shape, and records the usage."""
        client = self._clients.get()
        host = self.host
        caller = Caller(self.label, host, self.error, self.options.retries, self.options.timeout,
                        (self.__key,) if self.__key else ())
        headers = {"Authorization": f"Bearer {self.__key}"} if self.__key else {}
        url = self.base_url + "/chat/completions"

        async def attempt() -> Any:
            try:
                r = await client.post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                raise TimedOut() from None
            except httpx.TransportError as e:
                raise Transient(connection_failure(e, host)) from None
            ok, data = parse_json_body(r.content)
            if not r.is_success:
                what = f"HTTP {r.status_code} from {host}"
                detail = error_detail(data) if ok else ""
                if not detail and r.content:
                    detail = snippet(r.content)
                if retryable_status(r.status_code):
                    raise Transient(what, detail, parse_retry_after(r.headers))
                raise Fatal(what, detail)
            if not ok:
                raise Fatal(f"bad response from {host} (HTTP {r.status_code})",
                            f"body is not JSON: {snippet(r.content)}")
            return data

        data = await caller.call(attempt)
        choice, problem = _check_completion(data)
        if choice is None:
            raise caller.failure(f"bad response from {host}", problem)
        u = data.get("usage")
        if isinstance(u, dict):
            prompt = _int(u.get("prompt_tokens"))
            details = u.get("prompt_tokens_details")
            cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
            # prompt_tokens counts cached ones too; Usage.input is the uncached part, as for Claude
            usage.add(self.model, input_tokens=max(prompt - cached, 0),
                      output_tokens=_int(u.get("completion_tokens")), cache_read=cached)
        else:
            usage.add(self.model)
        return choice


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _check_completion(data: Any) -> tuple[dict[str, Any] | None, str]:
    """``(choices[0], '')`` or ``(None, what is wrong)``."""
    if not isinstance(data, dict):
        return None, f"expected an object, got {json_type(data)}"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return None, "'choices' must be a non-empty array" if "choices" in data else "'choices' is missing"
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return None, "choices[0].message must be an object"
    msg = choice["message"]
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return None, f"choices[0].message.content must be a string, got {json_type(content)}"
    calls = msg.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return None, f"choices[0].message.tool_calls must be an array, got {json_type(calls)}"
        for i, c in enumerate(calls):
            where = f"choices[0].message.tool_calls[{i}]"
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict):
                return None, f"{where}.function must be an object"
            if not isinstance(fn.get("name"), str):
                return None, f"{where}.function.name must be a string"
            if not isinstance(fn.get("arguments", ""), (str, dict)):
                return None, f"{where}.function.arguments must be a string"
    return choice, ""


def message_text(msg: dict[str, Any]) -> str:
    """The text of a chat message (a string, or a list of ``{"type": "text"}`` parts)."""
    content = msg.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text").strip()
    return ""


def tool_arguments(raw: Any) -> dict[str, Any] | str:
    """The arguments of a tool call: the parsed object, or the raw text when it is not a
    JSON object (the engine then reports a tool error to the model)."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return str(raw)
    return parsed if isinstance(parsed, dict) else str(raw)


class OpenAIAgent:
    """The agent under test played by a model behind an OpenAI-compatible endpoint.

    Args:
        model: the model name the server knows, e.g. ``gpt-4.1`` or ``qwen2.5:7b``.
        options: base URL (``agent_base_url``), timeouts, retries, temperature, max_tokens.
        api_key: defaults to ``$OPENAI_API_KEY`` (may be absent).

    The native history (system, user, assistant with ``tool_calls``, ``tool`` results)
    is kept in ``turn.state``; ``seed`` is the trial's seed. The reply of a turn is the
    text of every response in it.
    """

    def __init__(self, model: str, options: AdapterOptions, *, api_key: str | None = None) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.options = options
        self._api = OpenAIChat(model, options, role="agent", error=AgentError,
                               base_url=options.agent_base_url, api_key=api_key)

    def __repr__(self) -> str:
        return f"OpenAIAgent(model={self.model!r}, base_url={self._api.base_url!r})"

    async def __call__(self, turn: Turn) -> str:
        st: dict[str, Any] = turn.state.setdefault("openai", {"messages": [], "seen": 0})
        history: list[dict[str, Any]] = st["messages"]
        if not history and turn.system_prompt:
            history.append({"role": "system", "content": turn.system_prompt})
        for m in turn.messages[st["seen"]:]:
            if m["role"] == "user":
                history.append({"role": "user", "content": m["content"]})
        st["seen"] = len(turn.messages) + 1
        extra: dict[str, Any] = {}
        if turn.tools:
            extra["tools"] = [t.openai() for t in turn.tools]
        label = self._api.label
        said: list[str] = []
        for _ in range(MAX_STEPS_PER_TURN):
            choice = await self._api.complete(turn.usage, self._api.payload(history, turn.trial.seed, **extra))
            msg = choice["message"]
            finish = choice.get("finish_reason")
            text = message_text(msg)
            calls = msg.get("tool_calls") or []
            if calls and finish == "length":
                raise AgentError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) "
                                 "in the middle of a tool call")
            if text:
                said.append(text)
            if calls:
                normalized: list[dict[str, Any]] = []
                for i, c in enumerate(calls):
                    fn = c["function"]
                    args = fn.get("arguments", "")
                    args = args if isinstance(args, str) else json.dumps(args)
                    normalized.append({
                        "id": c.get("id") or f"call_{len(history)}_{i}",
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": args},
                    })
                history.append({"role": "assistant", "content": text or None, "tool_calls": normalized})
                for c in normalized:
                    r = turn.call_tool(c["function"]["name"], tool_arguments(c["function"]["arguments"]))
                    history.append({"role": "tool", "tool_call_id": c["id"], "content": r.to_json()})
                continue
            history.append({"role": "assistant", "content": text})
            if not said and finish == "length":
                raise AgentError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) before any text")
            if not said and finish == "content_filter":
                raise AgentError(f"{label}: the response was withheld by the server's content filter")
            return "\n\n".join(said)
        raise AgentError(f"{label}: no reply after {MAX_STEPS_PER_TURN} model calls in one turn")
