"""The ``--sandtable-judge`` spec: a comma-separated panel of ``provider:model`` judges.

``claude:claude-haiku-4-5,openai:gpt-4.1-mini`` is a panel of two. Providers are the
adapters' model providers: ``claude`` (the Messages API through the anthropic SDK,
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``) and ``openai`` (an OpenAI-compatible
``/chat/completions`` endpoint, ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``). The same
model may sit twice on a panel only under distinct names, so each verdict says whose it
is: a second ``claude:M`` is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

PROVIDERS = ("claude", "openai")


class JudgeSpecError(ValueError):
    """A ``--sandtable-judge`` spec that names no usable panel; the message says why."""


@dataclass(frozen=True)
class JudgeSpec:
    """One judge of the panel: its provider and model."""

    provider: str
    model: str

    @property
    def name(self) -> str:
        """``provider:model``, as reports name the judge."""
        return f"{self.provider}:{self.model}"


def parse_panel(spec: str) -> tuple[JudgeSpec, ...]:
    """The judges a spec names, in its order; :class:`JudgeSpecError` for an empty spec,
    an entry without a model, an unknown provider or a judge named twice."""
    entries = [part.strip() for part in spec.split(",")]
    if not any(entries):
        raise JudgeSpecError("names no judge; give at least one, e.g. claude:claude-haiku-4-5")
    judges: list[JudgeSpec] = []
    for entry in entries:
        if not entry:
            raise JudgeSpecError(f"an empty entry in {spec!r}; separate judges by one comma")
        provider, colon, model = entry.partition(":")
        provider, model = provider.strip(), model.strip()
        if provider not in PROVIDERS:
            raise JudgeSpecError(f"unknown judge provider {provider!r} in {entry!r}; "
                                 f"expected {' or '.join(PROVIDERS)}, as in claude:MODEL")
        if not colon or not model:
            raise JudgeSpecError(f"judge {entry!r} names no model; write {provider}:MODEL")
        judge = JudgeSpec(provider, model)
        if judge in judges:
            raise JudgeSpecError(f"judge {judge.name!r} is named twice; each judge of a panel once")
        judges.append(judge)
    return tuple(judges)
