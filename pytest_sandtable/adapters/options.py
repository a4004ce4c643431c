"""How model-backed agents and users are reached: base URLs, sampling, timeouts, retries."""

from __future__ import annotations

from dataclasses import dataclass


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
    # mark the stable prefix of Claude requests with cache_control (--sandtable-prompt-cache)
    prompt_cache: bool = True
