"""Run options shared by the plugin, the adapters and the result writers."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class GateOptions:
    fail_under: float | None = None  # percent, compared with the highest pass^k
    floors: dict[str, float] = field(default_factory=dict)  # tag -> percent
