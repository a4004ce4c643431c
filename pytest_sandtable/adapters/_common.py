"""Small helpers shared by the adapters: endpoint names, base URLs, clients per event loop,
error bodies in the shapes servers use."""

from __future__ import annotations

import asyncio
import base64
import html
import json
import re
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from ..domain.conditions import json_type as json_type  # re-exported for the adapters
from ..engine.redact import public_url as public_url  # re-exported for the adapters

if TYPE_CHECKING:
    from datetime import datetime

    from ..engine.api import Turn

T = TypeVar("T")

# not the locale's names: a prompt must not depend on the machine that sent it
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def today_line(now: datetime) -> str:
    """``Today is Wednesday 2024-05-15; the time is 15:00 (UTC).``: the simulated clock,
    for a model's system prompt."""
    offset = now.strftime("%z")  # +0000, -0500
    zone = "UTC" if offset in ("", "+0000") else f"UTC{offset[:3]}:{offset[3:5]}"
    return f"Today is {_WEEKDAYS[now.weekday()]} {now:%Y-%m-%d}; the time is {now:%H:%M} ({zone})."


def agent_system_prompt(turn: Turn, state: dict[str, Any]) -> str:
    """The system prompt the Claude and OpenAI agents send: the domain's, and, when the
    domain or the task declares a clock (``turn.now``), :func:`today_line` after it, as
    the clock reads at the trial's first turn. Kept in the adapter's ``state``, so the
    prompt stays the same for the whole trial (a handler's ``ctx.advance`` moves
    ``turn.now``, not the prompt: a prompt that changed would lose the prompt cache)."""
    system: str | None = state.get("system")
    if system is None:
        now = turn.now
        system = turn.system_prompt
        if now is not None:
            system = f"{system}\n\n{today_line(now)}" if system else today_line(now)
        state["system"] = system
    return system


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, without any user or password in it (for messages)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return netloc or url




_SECRET_PARAM = re.compile(r"key|token|secret|sig|auth|pass", re.IGNORECASE)


def url_secrets(url: str) -> tuple[str, ...]:
    """What in a URL must be masked wherever a server echoes it: the password, the
    basic-auth token made of user and password, and query values named like secrets
    (``api_key=``, ``token=``, ``sig=``...)."""
    p = urlsplit(url)
    found: list[str] = []
    userinfo = p.netloc.rpartition("@")[0]
    if userinfo:
        user, _, password = userinfo.partition(":")
        if password:
            found.append(unquote(password))
            found.append(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    found += [v for k, v in parse_qsl(p.query) if _SECRET_PARAM.search(k) and v]
    return tuple(found)


def _with_scheme(url: str) -> str:
    """``url`` stripped, with ``http://`` in front when it names no scheme
    (``127.0.0.1:8000/v1``, ``localhost:11434``)."""
    url = url.strip()
    return url if "://" in url else "http://" + url


def has_path(url: str) -> bool:
    """Whether a base URL names a path (``http://host:4000`` and ``host:4000/`` do not)."""
    return urlsplit(_with_scheme(url)).path.strip("/") != ""


def _with_path(url: str, path: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, path, p.query, ""))


def openai_base_url(url: str) -> str:
    """The base URL of an OpenAI-compatible server, normalised (docs/agents.md):

    - surrounding spaces and trailing slashes are dropped, and ``http://`` is added to
      an address without a scheme (``localhost:8000/v1``);
    - a URL of the endpoint itself (``.../chat/completions``) is cut back to its base;
    - a URL with no path at all (``http://127.0.0.1:11434``) gets ``/v1``, where vLLM,
      Ollama, LiteLLM, llama.cpp's server and LM Studio all serve the API;
    - any other path is kept as it is (``https://openrouter.ai/api/v1``,
      ``https://api.groq.com/openai/v1``), and so is a query string (``?api-version=...``).
    """
    url = _with_scheme(url)
    path = urlsplit(url).path.rstrip("/")
    if path.endswith("/chat/completions"):
        path = path[: -len("/chat/completions")]
    return _with_path(url, path or "/v1")


def anthropic_base_url(url: str | None) -> str | None:
    """The base URL handed to the anthropic SDK, which appends ``/v1/messages`` itself.

    Trailing slashes are dropped, and so is a trailing ``/v1/messages`` or ``/v1`` (a
    common way to write a gateway's address that would otherwise end in
    ``/v1/v1/messages``); ``http://`` is added to an address without a scheme. Empty
    or blank means unset (None: the public API).
    """
    if url is None or not url.strip():
        return None
    url = _with_scheme(url)
    path = urlsplit(url).path.rstrip("/")
    for tail in ("/messages", "/v1"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    return _with_path(url, path)


class PerLoop(Generic[T]):
    """One client per running event loop.

    HTTP clients keep pooled connections bound to the loop that opened them, while
    a process may run trials on several loops over its life (``run_trial`` makes a
    new one each time; the plugin keeps one per run). Trials on the same loop share
    one client and its connection pool.
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._factory()
            self._clients[loop] = client
        return client


def snippet(text: str | bytes, limit: int = 120) -> str:
    """The start of a body, on one line, quoted (for error messages)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    one = " ".join(text.split())
    if len(one) > limit:
        one = one[: limit - 3] + "..."
    return repr(one)


_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_H1_RE = re.compile(r"<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)
_DROP_RE = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_TAG_RE = re.compile(r"<[^>]*>")


def body_snippet(raw: bytes, content_type: str | None = None) -> str:
    """A body that is not JSON, for a message: an HTML page (a proxy's or a load
    balancer's error page) by its title, else its text; anything else by its start."""
    text = raw.decode("utf-8", "replace")
    if not text.strip():
        return "(empty)"
    looks_html = "html" in (content_type or "").lower() or text.lstrip()[:15].lower().startswith(("<!doctype", "<html"))
    if not looks_html:
        return snippet(text)
    m = _TITLE_RE.search(text) or _H1_RE.search(_DROP_RE.sub(" ", text))
    if m:
        title = html.unescape(_TAG_RE.sub(" ", m.group(1)))
        if title.strip():
            return "HTML page " + snippet(title)
    return "HTML page " + snippet(html.unescape(_TAG_RE.sub(" ", _DROP_RE.sub(" ", text))))


def error_detail(body: Any) -> str:
    """The human-readable message of an error body, in the shapes servers use:
    ``{"error": {"message": ...}}`` (Anthropic, OpenAI, llama.cpp, LiteLLM, OpenRouter),
    ``{"error": "..."}`` (Ollama), ``{"message": ...}`` (vLLM),
    ``{"detail": "..."}`` or ``{"detail": [{"loc": [...], "msg": ...}]}`` (FastAPI)."""
    if not isinstance(body, Mapping):
        return ""
    err = body.get("error")
    if isinstance(err, Mapping):
        if isinstance(err.get("message"), str) and err["message"].strip():
            return str(err["message"])
        for key in ("type", "code"):
            if isinstance(err.get(key), (str, int)) and not isinstance(err.get(key), bool):
                return str(err[key])
    if isinstance(err, str) and err.strip():
        return err
    for key in ("message", "detail"):
        if isinstance(body.get(key), str) and body[key].strip():
            return str(body[key])
    detail = body.get("detail")
    if isinstance(detail, list):
        parts = []
        for d in detail[:3]:
            if isinstance(d, Mapping) and isinstance(d.get("msg"), str):
                loc = d.get("loc")
                where = ".".join(str(x) for x in loc) if isinstance(loc, list) else ""
                parts.append(f"{where}: {d['msg']}" if where else str(d["msg"]))
        return "; ".join(parts)
    return ""


def error_code(body: Any) -> int | None:
    """The numeric ``error.code`` of a body (OpenRouter and LiteLLM put the upstream's
    HTTP status there, also in answers sent with HTTP 200), else None."""
    err = body.get("error") if isinstance(body, Mapping) else None
    code = err.get("code") if isinstance(err, Mapping) else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    return code if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599 else None


def parse_json_body(raw: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when ``raw`` is JSON, else ``(False, None)``. A UTF-8 byte
    order mark and surrounding whitespace (some proxies pad bodies) are allowed."""
    try:
        return True, json.loads(raw.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        return False, None


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text
