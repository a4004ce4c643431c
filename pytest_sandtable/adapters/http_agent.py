"""A team's own agent service as the agent under test (``http://...`` / ``https://...``),
spoken to with the step protocol ``sandtable-step/1`` (docs/http-protocol.md).

Each agent turn is one or more *steps*. A step POSTs the conversation, the tools, the
trial's identity and the results of the tool calls the service asked for in the
previous step; the service answers with more tool calls (which the run executes
against the trial's world and posts back in the next step) or with the turn's reply.

Retries are narrower than for model calls, because a service may act on a step:
only when it surely did not (the connection was refused before anything was sent,
or it answered 429 or 503, honouring ``retry-after``). A timeout, a dropped
connection or another error status fails the trial at once. Every step carries an
``Idempotency-Key`` header so a service can recognise a repeated step anyway.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import httpx

from ..engine.api import AgentError, ToolResult, Turn
from . import recording
from ._common import PerLoop, body_snippet, error_detail, host_of, json_type, parse_json_body, public_url, url_secrets
from ._retry import Caller, Fatal, TimedOut, Transient, connection_failure, is_connect_refused, parse_retry_after
from .options import AdapterOptions

PROTOCOL = "sandtable-step/1"
TOKEN_ENV = "SANDTABLE_HTTP_AGENT_TOKEN"
MAX_STEPS_PER_TURN = 50
RETRY_STATUSES = frozenset({429, 503})
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def tool_result_json(call_id: str, name: str, r: ToolResult) -> dict[str, Any]:
    """A tool result as the protocol posts it back."""
    if r.ok:
        return {"id": call_id, "name": name, "ok": True, "result": r.value}
    return {"id": call_id, "name": name, "ok": False, "error": {"code": r.error, "message": r.message}}


class HttpStepAgent:
    """The agent under test behind an HTTP endpoint speaking ``sandtable-step/1``.

    Args:
        url: the step endpoint, e.g. ``http://127.0.0.1:8787/step``.
        options: ``timeout`` per step, ``retries`` (for the safe cases only).
        token: sent as ``Authorization: Bearer``; defaults to ``$SANDTABLE_HTTP_AGENT_TOKEN``.
    """

    def __init__(self, url: str, options: AdapterOptions, *, token: str | None = None) -> None:
        self.url = url
        self.name = public_url(url)
        self.host = host_of(url)
        self.options = options
        self.__token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(lambda: recording.httpx_client(
            options.timeout, httpx.Limits(max_connections=None, max_keepalive_connections=64)))

    def __repr__(self) -> str:
        return f"HttpStepAgent({self.name!r})"

    async def __call__(self, turn: Turn) -> str | None:
        st: dict[str, Any] = turn.state.setdefault("http", {"key": uuid.uuid4().hex, "state": None})
        turn_no = sum(1 for m in turn.messages if m["role"] == "assistant") + 1
        tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in turn.tools]
        info = turn.trial
        results: list[dict[str, Any]] = []
        for step in range(1, MAX_STEPS_PER_TURN + 1):
            body = {
                "protocol": PROTOCOL,
                "trial_id": info.trial_id,
                "trial": {"domain": info.domain, "task": info.task_id, "trial": info.trial, "k": info.k,
                          "seed": info.seed},
                "turn": turn_no,
                "step": step,
                "system_prompt": turn.system_prompt,
                "tools": tools,
                "messages": turn.messages,
                "tool_results": results,
                "state": st["state"],
            }
            now = turn.now  # read at each step: a handler's ctx.advance in the last step's calls moves it
            if now is not None:  # the domain or the task declares a clock
                body["now"] = now.isoformat()
            if turn.tools_url is not None:  # --sandtable-serve: the service may call the world itself
                body["tools_url"], body["mcp_url"] = turn.tools_url, turn.mcp_url
            answer = await self._post(body, f"{st['key']}/{turn_no}/{step}", turn)
            if "state" in answer:
                st["state"] = answer["state"]
            if answer.get("reply") is not None:
                reply: str = answer["reply"]
                return reply
            results = []
            for call in answer["tool_calls"]:
                r = await turn.acall_tool(call["name"], call.get("arguments"))
                results.append(tool_result_json(call["id"], call["name"], r))
        raise AgentError(f"http agent: no reply from {self.host} after {MAX_STEPS_PER_TURN} steps in one turn")

    async def _post(self, body: dict[str, Any], key: str, turn: Turn) -> dict[str, Any]:
        client = self._clients.get()
        host = self.host
        secrets = ((self.__token,) if self.__token else ()) + url_secrets(self.url)
        caller = Caller("http agent", host, AgentError, self.options.retries, self.options.timeout, secrets,
                        retry_timeouts=False)
        headers = {"Sandtable-Protocol": PROTOCOL, "Idempotency-Key": key}
        if self.__token:
            headers["Authorization"] = f"Bearer {self.__token}"

        async def attempt() -> Any:
            try:
                r = await client.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException:
                raise TimedOut() from None
            except httpx.TransportError as e:
                if is_connect_refused(e):  # nothing was sent: safe to try again
                    raise Transient(connection_failure(e, host)) from None
                raise Fatal(connection_failure(e, host)) from None
            ok, data = parse_json_body(r.content)
            if not r.is_success:
                what = f"HTTP {r.status_code} from {host}"
                detail = (error_detail(data) if ok else "") or (
                    body_snippet(r.content, r.headers.get("content-type")) if r.content else "")
                if r.status_code in RETRY_STATUSES:
                    raise Transient(what, detail, parse_retry_after(r.headers))
                raise Fatal(what, detail)
            if not ok:
                raise Fatal(f"bad response from {host} (HTTP {r.status_code})",
                            f"body is not JSON: {body_snippet(r.content, r.headers.get('content-type'))}")
            return data

        data = await caller.call(attempt)
        problem = _check_answer(data)
        if problem:
            raise caller.failure(f"bad response from {host}", problem)
        usage = data.get("usage")
        for u in [usage] if isinstance(usage, dict) else usage or []:
            turn.usage.add(
                u.get("model") or "http-agent",
                input_tokens=u.get("input_tokens", 0),
                output_tokens=u.get("output_tokens", 0),
                cache_read=u.get("cache_read_tokens", 0),
                cache_write=u.get("cache_write_tokens", 0),
            )
        answer: dict[str, Any] = data
        return answer


def _check_answer(data: Any) -> str:
    """What is wrong with a step answer, or ''."""
    if not isinstance(data, dict):
        return f"expected a JSON object, got {json_type(data)}"
    proto = data.get("protocol", PROTOCOL)
    if proto != PROTOCOL:
        return f"the service speaks {proto!r}, this run speaks {PROTOCOL!r}"
    if data.get("error") is not None:
        return f"the service reported an error: {error_detail(data) or body_snippet(str(data['error']).encode())}"
    reply, calls = data.get("reply"), data.get("tool_calls")
    if reply is not None and calls is not None:
        return "answer with either 'reply' or 'tool_calls', not both"
    if reply is None and calls is None:
        return "expected 'reply' or 'tool_calls'"
    if reply is not None and not isinstance(reply, str):
        return f"'reply' must be a string, got {json_type(reply)}"
    if calls is not None:
        if not isinstance(calls, list) or not calls:
            return "'tool_calls' must be a non-empty array"
        for i, c in enumerate(calls):
            if not isinstance(c, dict):
                return f"tool_calls[{i}] must be an object, got {json_type(c)}"
            for field in ("id", "name"):
                if not isinstance(c.get(field), str) or not c[field]:
                    return f"tool_calls[{i}].{field} must be a non-empty string"
            if c.get("arguments") is not None and not isinstance(c["arguments"], (dict, str)):
                return f"tool_calls[{i}].arguments must be an object, got {json_type(c['arguments'])}"
    usage = data.get("usage")
    if usage is not None:
        entries = [usage] if isinstance(usage, dict) else usage
        if not isinstance(entries, list):
            return f"'usage' must be an object or an array, got {json_type(usage)}"
        for i, u in enumerate(entries):
            if not isinstance(u, dict):
                return f"usage[{i}] must be an object, got {json_type(u)}"
            if u.get("model") is not None and not isinstance(u["model"], str):
                return "usage.model must be a string"
            for f in _USAGE_FIELDS:
                v = u.get(f, 0)
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    return f"usage.{f} must be a whole number >= 0"
    return ""
