"""Small helpers shared by the adapters: endpoint names, clients per event loop, body snippets."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, without any user or password in it (for messages)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return netloc or url


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


def json_type(value: Any) -> str:
    """The JSON name of a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def error_detail(body: Any) -> str:
    """The human-readable message of an error body, in the shapes providers use:
    ``{"error": {"message": ...}}`` (Anthropic, OpenAI), ``{"error": "..."}`` (Ollama),
    ``{"message": ...}`` (vLLM), ``{"detail": ...}`` (FastAPI)."""
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return ""


def parse_json_body(raw: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when ``raw`` is JSON, else ``(False, None)``."""
    try:
        return True, json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return False, None


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text
