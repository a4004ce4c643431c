"""Any OpenAI-compatible chat-completions endpoint as the agent under test (``openai:<model>``):
OpenAI itself, vLLM, Ollama, LiteLLM, llama.cpp's server, LM Studio... through ``httpx``.

Base URL: the option (``--sandtable-agent-base-url`` / ``--sandtable-user-base-url``), else
``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``, normalised by
:func:`._common.openai_base_url`; requests go to ``<base>/chat/completions``. Key:
``$OPENAI_API_KEY``, sent as a bearer token when set (local servers usually need none).

Servers differ in what they accept and how they answer; docs/agents.md lists what is
tolerated. In short: ``content`` may be null, a string or a list of parts; tool-call
``arguments`` may be JSON text, an object, empty or missing; missing or repeated
tool-call ids are replaced; the legacy ``function_call`` is read as a tool call;
``usage`` may be missing, null or partial; an ``error`` in an HTTP 200 body is an
error. When a server rejects (400/422) a parameter the run added on its own
(``seed``, the name or size of the output-token limit, ``content: null`` of a
tool-call message), the request is changed once and sent again at once, and the
change is kept for the endpoint's later requests. ``temperature`` is sent only when
asked for and never dropped.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..engine.api import AgentError, Turn, Usage
from . import recording
from ._common import (
    PerLoop,
    agent_system_prompt,
    body_snippet,
    error_code,
    error_detail,
    has_path,
    host_of,
    json_type,
    openai_base_url,
    parse_json_body,
    public_url,
    snippet,
    url_secrets,
)
from ._retry import Again, Caller, Fatal, TimedOut, Transient, connection_failure, parse_retry_after, should_retry
from .options import AdapterOptions

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_STEPS_PER_TURN = 50
"""Model calls one agent turn may make (each follows a round of tool calls)."""
MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens")
_TOO_BIG = re.compile(r"too large|too long|too many|exceed|context|maximum|at most|less than|greater than")


def _endpoint(base_url: str, tail: str) -> str:
    p = urlsplit(base_url)
    return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + tail, p.query, ""))


class OpenAIChat:
    """Calls ``POST <base>/chat/completions`` for one model with the retry policy.

    ``role`` ("agent" or "user") and ``error`` (AgentError or UserError) decide how
    failures are named and raised. What a server turned out to reject is remembered
    here, for the endpoint's later calls.
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
        given = (base_url or "").strip() or (os.environ.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_BASE_URL
        self.base_url = openai_base_url(given)
        self.host = host_of(self.base_url)
        self.url = _endpoint(self.base_url, "/chat/completions")
        # a base URL without a path got /v1; should the server have no /v1/chat/completions
        # (404/405), <base>/chat/completions is tried once instead
        self._bare_url: str | None = None
        if not has_path(given):
            self._bare_url = _endpoint(urlsplit(self.base_url)._replace(path="").geturl(), "/chat/completions")
        self.__key = api_key if api_key is not None else (os.environ.get("OPENAI_API_KEY", "").strip() or None)
        self._send_seed = True
        self._max_field: str | None = "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"
        self._tried_fields = {self._max_field}
        self._null_content = True
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(lambda: recording.httpx_client(
            options.timeout, httpx.Limits(max_connections=None, max_keepalive_connections=64)))

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.model!r}, base_url={public_url(self.base_url)!r})"

    @property
    def max_tokens_field(self) -> str | None:
        """The name the output-token limit is sent under: ``max_completion_tokens`` to
        api.openai.com (its newer models want it), ``max_tokens`` elsewhere (vLLM, Ollama,
        LiteLLM...); switched, or dropped, when the server rejects it."""
        return self._max_field

    def payload(self, messages: list[dict[str, Any]], seed: int | None, **extra: Any) -> dict[str, Any]:
        """A request body: the model, messages, seed and temperature from options (the
        output-token limit is added when sending, see :meth:`complete`)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if seed is not None:
            body["seed"] = seed
        if self.options.temperature is not None:
            body["temperature"] = self.options.temperature
        body.update(extra)
        return body

    def _prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body as this server takes it."""
        out = dict(body)
        if not self._send_seed:
            out.pop("seed", None)
        if self._max_field is not None:
            out[self._max_field] = self.options.max_tokens
        out["stream"] = False
        if not self._null_content:
            out["messages"] = [{**m, "content": ""} if m.get("content", "") is None else m for m in body["messages"]]
        return out

    def _adjust(self, status: int, data: Any, raw: bytes, sent: dict[str, Any]) -> bool:
        """After a 400/422: change what is sent when the server rejected something the run
        added on its own. True when something changed (each change is made once)."""
        if status not in (400, 422):
            return False
        text = raw.decode("utf-8", "replace").lower()
        err = data.get("error") if isinstance(data, dict) else None
        param = err.get("param") if isinstance(err, dict) else None

        def names(word: str) -> bool:
            return param == word or re.search(rf"(?<![a-z_]){re.escape(word)}(?![a-z_])", text) is not None

        if "seed" in sent and names("seed"):
            self._send_seed = False
            return True
        field = self._max_field
        if field is not None and field in sent and (names(field) or "maximum context length" in text):
            other = MAX_TOKENS_FIELDS[1] if field == MAX_TOKENS_FIELDS[0] else MAX_TOKENS_FIELDS[0]
            if other not in self._tried_fields and not _TOO_BIG.search(text) \
                    and (names(other) or field == "max_completion_tokens"):
                self._max_field = other
                self._tried_fields.add(other)
            else:  # too large for the context left, or not taken at all: the server's own limit applies
                self._max_field = None
            return True
        if self._null_content and names("content") and any(
                m.get("content", "") is None for m in sent.get("messages", [])):
            self._null_content = False
            return True
        return False

    async def complete(self, usage: Usage, body: dict[str, Any]) -> dict[str, Any]:
        """One completion (retried as the policy says). Returns ``choices[0]`` checked
        for shape, and records the usage."""
        client = self._clients.get()
        host = self.host
        secrets = ((self.__key,) if self.__key else ()) + url_secrets(self.base_url)
        caller = Caller(self.label, host, self.error, self.options.retries, self.options.timeout, secrets)
        headers = {"Authorization": f"Bearer {self.__key}"} if self.__key else {}

        async def post(url: str, sent: dict[str, Any]) -> httpx.Response:
            try:
                return await client.post(url, json=sent, headers=headers)
            except httpx.TimeoutException:
                raise TimedOut() from None
            except httpx.TransportError as e:
                raise Transient(connection_failure(e, host)) from None

        async def attempt() -> tuple[dict[str, Any], dict[str, Any]]:
            sent = self._prepare(body)
            r = await post(self.url, sent)
            if r.status_code in (404, 405) and self._bare_url is not None:
                bare, self._bare_url = self._bare_url, None
                r2 = await post(bare, sent)
                if r2.status_code not in (404, 405):
                    self.url, r = bare, r2
            ok, data = parse_json_body(r.content)
            if not r.is_success:
                if self._adjust(r.status_code, data if ok else None, r.content, sent):
                    raise Again()
                what = f"HTTP {r.status_code} from {host}"
                detail = (error_detail(data) if ok else "") or (
                    body_snippet(r.content, r.headers.get("content-type")) if r.content else "")
                if 300 <= r.status_code < 400 and r.headers.get("location"):
                    detail = f"redirected to {public_url(r.headers['location'])}; give that address as the base URL"
                if should_retry(r.status_code, r.headers):
                    raise Transient(what, detail, parse_retry_after(r.headers))
                raise Fatal(what, detail)
            if not ok:
                ctype = r.headers.get("content-type", "")
                if "event-stream" in ctype:
                    raise Fatal(f"bad response from {host} (HTTP {r.status_code})",
                                "the server streamed its answer (text/event-stream) although the request "
                                "said stream: false")
                raise Fatal(f"bad response from {host} (HTTP {r.status_code})",
                            f"body is not JSON: {body_snippet(r.content, ctype)}")
            failed = _error_in_body(data)
            if failed is not None:
                detail, code, transient = failed
                what = f"error from {host} (HTTP {r.status_code}" + (f", code {code})" if code else ")")
                if transient:
                    raise Transient(what, detail)
                raise Fatal(what, detail)
            choice, problem = _check_completion(data)
            if choice is None:
                raise Fatal(f"bad response from {host}", problem)
            return data, choice

        data, choice = await caller.call(attempt)
        usage.add(self.model, *_usage(data.get("usage")))
        return choice


def _int(v: Any) -> int:
    """A token count: a whole number >= 0 (an integral float too), else 0."""
    if isinstance(v, bool):
        return 0
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v if isinstance(v, int) and v > 0 else 0


def _usage(u: Any) -> tuple[int, int, int, int]:
    """``(input, output, cache_read, cache_write)`` of a ``usage`` object; zeros when it
    is missing or null (Ollama and llama.cpp may leave it out).

    ``prompt_tokens`` counts cached tokens too; input is the uncached part, as for
    Claude. Cached tokens: ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM,
    LiteLLM), else ``cache_read_input_tokens`` (LiteLLM for Anthropic models), else
    ``prompt_cache_hit_tokens`` (DeepSeek); cache writes: ``cache_creation_input_tokens``.
    """
    if not isinstance(u, dict):
        return 0, 0, 0, 0
    prompt = _int(u.get("prompt_tokens"))
    details = u.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or _int(u.get("cache_read_input_tokens")) or _int(u.get("prompt_cache_hit_tokens"))
    written = _int(u.get("cache_creation_input_tokens"))
    return max(prompt - cached - written, 0), _int(u.get("completion_tokens")), cached, written


def _error_in_body(data: Any) -> tuple[str, int | None, bool] | None:
    """An error reported inside a 200 answer: ``(detail, code, transient)``, else None.

    OpenRouter and LiteLLM may answer 200 with ``{"error": {...}}`` and no choices (the
    code, when numeric, is the upstream's HTTP status and decides whether to retry;
    without one it is not retried), or with a choice whose ``finish_reason`` is
    ``error`` (a generation that failed part-way: retried)."""
    if not isinstance(data, dict):
        return None
    err = data.get("error")
    if err not in (None, "", {}) and not data.get("choices"):
        detail = error_detail(data) or snippet(json.dumps(err))
        code = error_code(data)
        return detail, code, code is not None and should_retry(code, None)
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if isinstance(first, dict) and (first.get("finish_reason") == "error" or isinstance(first.get("error"), dict)):
        detail = error_detail(first) or "the generation failed part-way"
        return detail, error_code(first), True
    return None


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
            if not isinstance(fn.get("name"), str) or not fn["name"]:
                return None, f"{where}.function.name must be a string"
    legacy = msg.get("function_call")
    if legacy is not None and not calls and (not isinstance(legacy, dict) or not isinstance(legacy.get("name"), str)):
        return None, "choices[0].message.function_call.name must be a string"
    return choice, ""


_THINK_RE = re.compile(r"^\s*<(think|thinking)>.*?(?:</\1>|$)", re.DOTALL)


def message_text(msg: dict[str, Any]) -> str:
    """The text of a chat message: ``content`` as a string or a list of text parts, without
    a leading ``<think>...</think>`` block (reasoning models on servers that do not
    split it off); else the ``refusal`` the model gave instead."""
    content = msg.get("content")
    text = ""
    refusal: str = msg["refusal"] if isinstance(msg.get("refusal"), str) else ""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts: list[str] = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type") in ("text", "output_text", None) and isinstance(p.get("text"),
                                                                                                    str):
                parts.append(p["text"])
            elif isinstance(p, dict) and p.get("type") == "refusal" and isinstance(p.get("refusal"), str):
                refusal = refusal or p["refusal"]
        text = "".join(parts)
    text = _THINK_RE.sub("", text, count=1).strip()
    return text or refusal.strip()


def tool_arguments(raw: Any) -> dict[str, Any] | str:
    """The arguments of a tool call: the parsed object (JSON text of JSON text too), or the
    raw text when it is not a JSON object (the engine then reports a tool error to the
    model)."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return json.dumps(raw)
    try:
        parsed = json.loads(raw)
        if isinstance(parsed, str):  # encoded twice, as some servers do
            parsed = json.loads(parsed)
    except (ValueError, RecursionError):  # nested too deep to read is passed on too: the engine says why
        return str(raw)
    return parsed if isinstance(parsed, dict) else str(raw)


def tool_calls(msg: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of a message, as they go back into the history: ``tool_calls``, or
    the legacy ``function_call``; ``arguments`` as JSON text (an object is serialised,
    empty or missing is ``{}``); an id that is missing, empty or repeated in the message
    is replaced by a new one of 9 letters and digits (``call00001``: Mistral's templates
    accept nothing else), counted in ``state``."""
    raw = msg.get("tool_calls") or []
    if not raw and isinstance(msg.get("function_call"), dict):
        raw = [{"function": msg["function_call"]}]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in raw:
        fn = c["function"]
        args = fn.get("arguments")
        if args is None or (isinstance(args, str) and not args.strip()):
            args = "{}"
        elif not isinstance(args, str):
            args = json.dumps(args)
        cid = c.get("id")
        if not isinstance(cid, str) or not cid or cid in seen:
            state["ids"] = state.get("ids", 0) + 1
            cid = f"call{state['ids']:05d}"
        seen.add(cid)
        out.append({"id": cid, "type": "function", "function": {"name": fn["name"], "arguments": args}})
    return out


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
        return f"OpenAIAgent(model={self.model!r}, base_url={public_url(self._api.base_url)!r})"

    async def __call__(self, turn: Turn) -> str:
        st: dict[str, Any] = turn.state.setdefault("openai", {"messages": [], "seen": 0})
        history: list[dict[str, Any]] = st["messages"]
        system = agent_system_prompt(turn, st)
        if not history and system:
            history.append({"role": "system", "content": system})
        prefix = st["seen"] == 0  # (issue 22) the first turn: an agent message now is a task's history
        for m in turn.messages[st["seen"]:]:
            if m["role"] == "user":
                history.append({"role": "user", "content": m["content"]})
            elif prefix and m["role"] == "assistant":
                history.append({"role": "assistant", "content": m["content"]})
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
            calls = tool_calls(msg, st)
            if calls and finish == "length":
                raise AgentError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) "
                                 "in the middle of a tool call")
            if text:
                said.append(text)
            if calls:
                # content null when there is no text, as the API says; servers that refuse
                # null get "" instead (OpenAIChat remembers)
                history.append({"role": "assistant", "content": text or None, "tool_calls": calls})
                for c in calls:
                    r = await turn.acall_tool(c["function"]["name"], tool_arguments(c["function"]["arguments"]))
                    history.append({"role": "tool", "tool_call_id": c["id"], "content": r.to_json()})
                continue
            history.append({"role": "assistant", "content": text})
            if not said and finish == "length":
                raise AgentError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) before any text")
            if not said and finish == "content_filter":
                raise AgentError(f"{label}: the response was withheld by the server's content filter")
            return "\n\n".join(said)
        raise AgentError(f"{label}: no reply after {MAX_STEPS_PER_TURN} model calls in one turn")
