"""Run options shared by the plugin, the adapters and the result writers."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit


def public_url(url: str) -> str:
    """The URL without user, password, query or fragment (they may hold keys): safe to
    show in output, results and reports."""
    try:
        p = urlsplit(url)
    except ValueError:
        return "[redacted]"
    return urlunsplit((p.scheme, p.netloc.rpartition("@")[2], p.path, "", ""))


def public_spec(spec: str) -> str:
    """An agent or user spec as it may be shown: an http(s) URL loses its credentials."""
    return public_url(spec) if spec.startswith(("http://", "https://")) else spec


@dataclass(frozen=True)
class AdapterOptions:
    """How model-backed agents and users are reached. Keys are read from the
    environment by the adapters themselves and never stored here."""

    agent_base_url: str | None = None  # OpenAI-compatible endpoint for `openai:<model>` agents
    user_base_url: str | None = None  # likewise for `openai:<model>` simulated users
    temperature: float | None = None
    max_tokens: int = 4096
    timeout: float = 60.0  # seconds per model/endpoint call
    retries: int = 4  # retries of a call where it is safe (429, 529, 5xx, dropped connections)
    run_seed: int = 0
