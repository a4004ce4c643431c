"""The model proxy under an agent's own model client (issue 24): a local OpenAI- and
Anthropic-compatible endpoint on 127.0.0.1 that forwards to the real base URL and
counts, per trial, the tokens, cost and latency of what passed, streamed answers
included; with a trial's recording tape, replays and records through
``adapters.recording`` as the adapters do. A library for now: the plugin does not
start it yet.

Importing this package loads httpx; the plugin imports it only when the proxy is used.
"""

from __future__ import annotations

from .server import MAX_BODY, ModelProxy, ProxiedTrial

__all__ = ["MAX_BODY", "ModelProxy", "ProxiedTrial"]
