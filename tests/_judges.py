"""What the judge tests share: a finished trial to judge, criteria, and fake Anthropic and
OpenAI servers whose answers are scripted per judge model (the real SDK and httpx talk
to them; nothing is monkeypatched)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fakes import FakeAnthropic, FakeOpenAI, Reply, Request, claude_text, claude_usage, openai_text, openai_usage

from pytest_sandtable.domain.model import Criterion

POLICY = "A late delivery gets a $35 fee refund. Apologise for the delay."
FEE = "The $35 late fee is refunded because the load arrived two days late."
SORRY = "I am sorry about the delay."


def trial(*agent_texts: str, verdict: str = "passed", task: str = "late", number: int = 1) -> dict[str, Any]:
    """A finished trial's dict (as ``TrialResult.to_dict()`` gives it): the user asks, the
    agent looks the order up, then says ``agent_texts`` one turn each."""
    texts = agent_texts or (f"{SORRY} {FEE}",)
    transcript: list[dict[str, Any]] = [{"role": "user", "text": "My load L-1001 came late.", "turn": 1},
                                        {"role": "tool", "call": 0}]
    for n, text in enumerate(texts, 1):
        if n > 1:
            transcript.append({"role": "user", "text": "And?", "turn": n})
        transcript.append({"role": "agent", "text": text, "turn": n})
    calls = [{"index": 0, "turn": 1, "tool": "lookup_order", "args": {"load_id": "L-1001"}, "ok": True,
              "result": {"status": "late", "days": 2}, "error": None}]
    return {"domain": "freight", "task": task, "trial": number, "k": 1, "seed": 1, "verdict": verdict,
            "tags": ["refunds"], "transcript": transcript, "calls": calls}


CRITERIA = (
    Criterion(id="explains-fee", question="Did the agent state the $35 fee and why it applies?"),
    Criterion(id="apologises", question="Did the agent apologise for the delay?", scope="final"),
)


def verdict(v: str, quote: str = "") -> str:
    return json.dumps({"verdict": v, "quote": quote})


Script = dict[str, Callable[[str], Any]]
"""Judge model -> a function of the judge's user message (criterion and transcript) to its
answer: a string (the judge's text) or a fakes action (a Hang, a Delay, an error)."""


def _criterion_of(message: str) -> str:
    line = next(ln for ln in message.splitlines() if ln.startswith("Criterion ("))
    return line.split("(", 1)[1].split(")", 1)[0]


def answering(by_criterion: dict[str, str | Any]) -> Callable[[str], Any]:
    """A judge answering by the criterion it is asked about."""
    return lambda message: by_criterion[_criterion_of(message)]


class Judges:
    """Fake servers answering judge requests from a :data:`Script`, counting calls."""

    def __init__(self, claude: FakeAnthropic, openai: FakeOpenAI, script: Script) -> None:
        self.claude, self.openai, self.script = claude, openai, script

    @property
    def calls(self) -> int:
        return len(self.claude.requests) + len(self.openai.requests)

    def messages(self, model: str) -> list[list[dict[str, Any]]]:
        out = []
        for r in [*self.claude.requests, *self.openai.requests]:
            body = r.json
            if body["model"] == model:
                out.append(body["messages"])
        return out


def _claude_answer(script: Script) -> Callable[[Request], Any]:
    def answer(req: Request) -> Any:
        body = req.json
        got = script[body["model"]](body["messages"][0]["content"] if len(body["messages"]) == 1 else
                                    "\n".join([body["messages"][0]["content"], "RETRY"]))
        return claude_text(got, usage=claude_usage(1000, 50)) if isinstance(got, str) else got
    return answer


def _openai_answer(script: Script) -> Callable[[Request], Any]:
    def answer(req: Request) -> Any:
        body = req.json
        user = [m for m in body["messages"] if m["role"] == "user"]
        got = script[body["model"]](user[0]["content"] if len(user) == 1 else user[0]["content"] + "\nRETRY")
        return openai_text(got, usage=openai_usage(1000, 50)) if isinstance(got, str) else got
    return answer


@contextmanager
def fake_judges(monkeypatch: pytest.MonkeyPatch, script: Script) -> Iterator[Judges]:
    """Fake Anthropic and OpenAI servers answering judges from ``script``, with the
    environment pointing the adapters at them."""
    with FakeAnthropic(responder=_claude_answer(script)) as claude, \
            FakeOpenAI(responder=_openai_answer(script)) as openai:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-judge")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-judge")
        monkeypatch.setenv("OPENAI_BASE_URL", openai.base_url)
        yield Judges(claude, openai, script)


__all__ = ["Reply"]
