"""turn.model_transport(...): for a framework that takes an HTTP
client but no base URL, a transport that sends every request to the trial's route through
the model proxy, whatever URL the client was made with (the SDK's default included); the
real openai and anthropic SDKs, sync, async and streaming, against the fake servers."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fakes import (
    FakeAnthropic,
    FakeOpenAI,
    claude_stream,
    claude_text,
    claude_usage,
    openai_stream,
    openai_text,
    openai_usage,
)

from pytest_sandtable.engine.api import ToolResult, TrialInfo, Turn
from pytest_sandtable.proxy import ModelProxy, ProxiedTrial

MESSAGES: Any = [{"role": "user", "content": "Where is order O-1001?"}]


def turn_of(trial: ProxiedTrial | None) -> Turn:
    return Turn(messages=MESSAGES, tools=[], system_prompt="", trial=TrialInfo("shop", "t", 1, 1, 0), state={},
                _call=lambda name, arguments: ToolResult(True), _models=trial)


@pytest.fixture(autouse=True)
def no_base_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    # the clients are left at the SDKs' defaults (api.openai.com, api.anthropic.com): only
    # the transport can bring them to the fakes
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def test_openai_at_its_default_url_reaches_the_target_through_the_transport_sync_and_async_streamed() -> None:
    script = [openai_text("Shipped.", usage=openai_usage(prompt=20, completion=8)),
              openai_stream("It ships Monday.", usage=openai_usage(prompt=30, completion=6))]
    with FakeOpenAI(script, keep_alive=True) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        turn = turn_of(trial)
        client = openai.OpenAI(api_key="test-key", max_retries=0,
                               http_client=openai.DefaultHttpxClient(transport=turn.model_transport(sync=True)))
        first = client.chat.completions.create(model="gpt-test", messages=MESSAGES)

        async def streamed() -> str:
            http = openai.DefaultAsyncHttpxClient(transport=turn.model_transport("openai"))
            aclient = openai.AsyncOpenAI(api_key="test-key", max_retries=0, http_client=http)
            stream = await aclient.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True,
                                                           stream_options={"include_usage": True})
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            await aclient.close()
            return text

        text = asyncio.run(streamed())
    assert (first.choices[0].message.content, text) == ("Shipped.", "It ships Monday.")
    assert [r.path for r in srv.requests] == ["/v1/chat/completions"] * 2
    assert srv.requests[0].headers["authorization"] == "Bearer test-key"
    assert trial.usage.to_dict() == {"gpt-test": {"input": 50, "output": 14, "cache_read": 0, "cache_write": 0,
                                                  "calls": 2}}


def test_anthropic_through_the_transport_sync_streamed_and_async() -> None:
    script = [claude_stream("It ships Monday.", usage=claude_usage(9, 11, cache_read=50)),
              claude_text("Shipped.", usage=claude_usage(12, 4, cache_write=7))]
    with FakeAnthropic(script, keep_alive=True) as srv, ModelProxy({"anthropic": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        turn = turn_of(trial)
        http = anthropic.DefaultHttpxClient(transport=turn.model_transport("anthropic", sync=True))
        client = anthropic.Anthropic(api_key="test-key", max_retries=0, http_client=http)
        with client.messages.stream(model="claude-test", max_tokens=64, messages=MESSAGES) as stream:
            text = "".join(stream.text_stream)

        async def asked() -> str:
            http = anthropic.DefaultAsyncHttpxClient(transport=turn.model_transport("anthropic"))
            aclient = anthropic.AsyncAnthropic(api_key="test-key", max_retries=0, http_client=http)
            message = await aclient.messages.create(model="claude-test", max_tokens=64, messages=MESSAGES)
            await aclient.close()
            return str(message.content[0].text)  # type: ignore[union-attr]

        second = asyncio.run(asked())
    assert (text, second) == ("It ships Monday.", "Shipped.")
    assert [r.path for r in srv.requests] == ["/v1/messages"] * 2
    assert trial.usage.to_dict() == {"claude-test": {"input": 21, "output": 15, "cache_read": 50, "cache_write": 7,
                                                     "calls": 2}}


def test_a_plain_httpx_client_with_lib_httpx() -> None:
    with FakeOpenAI([openai_text("One.")], keep_alive=True) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        with httpx.Client(transport=turn_of(trial).model_transport(sync=True, lib=httpx)) as plain:
            got = plain.post("https://api.openai.com/v1/chat/completions?x=1",
                             json={"model": "gpt-test", "messages": MESSAGES})
    assert got.json()["choices"][0]["message"]["content"] == "One."
    assert [r.path for r in srv.requests] == ["/v1/chat/completions?x=1"]
    assert srv.requests[0].headers["host"] == f"127.0.0.1:{srv.port}"
    assert trial.usage.to_dict()["gpt-test"]["calls"] == 1


def test_without_the_proxy_the_client_s_own_transport() -> None:
    turn = turn_of(None)
    assert turn.model_transport() is None
    assert turn.model_transport("anthropic", sync=True) is None
