"""The model proxy (pytest_sandtable.proxy) under the real ``openai`` and ``anthropic``
SDKs, sync, async and streaming, against the fake servers: every request forwarded
to its target and attributed to its trial by the trial's own URL (32 trials at once
included), tokens counted as the adapters count them, latency measured, cost with
``None`` for a model the price table lacks; a target that refuses, an answer cut
short, a body too large and a URL of no trial each get a clear error."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fakes import (
    Cut,
    FakeAnthropic,
    FakeOpenAI,
    Request,
    claude_stream,
    claude_text,
    claude_usage,
    openai_message,
    openai_stream,
    openai_text,
    openai_usage,
    sse,
)

from pytest_sandtable.proxy import MAX_BODY, ModelProxy

MESSAGES: Any = [{"role": "user", "content": "Where is order O-1001?"}]


def _openai(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="test-key", base_url=base_url, max_retries=0)


def _anthropic(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0)


def test_sync_openai_calls_are_forwarded_and_counted() -> None:
    with FakeOpenAI([openai_text("Shipped.", usage=openai_usage(prompt=20, completion=8, cached=5))],
                    keep_alive=True) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("shop/refund/1")
        completion = _openai(trial.base_url("openai")).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert completion.choices[0].message.content == "Shipped."
    assert srv.requests[0].path == "/v1/chat/completions"
    assert srv.requests[0].headers["authorization"] == "Bearer test-key"  # the agent's key, passed on
    assert srv.bodies[0]["messages"] == MESSAGES
    assert trial.usage.to_dict() == {"gpt-test": {"input": 15, "output": 8, "cache_read": 5, "cache_write": 0,
                                                  "calls": 1}}
    assert (trial.requests, len(trial.latency), trial.errors) == (1, 1, [])
    assert trial.cost() == {"gpt-test": None}  # not in the price table: n/a, never a crash
    assert trial.env() == {"OPENAI_BASE_URL": trial.base_url("openai")}


def test_async_openai_streaming_is_passed_on_as_a_stream_and_counted() -> None:
    with FakeOpenAI([openai_stream("It ships Monday.", usage=openai_usage(prompt=30, completion=6))],
                    keep_alive=True) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")

        async def ask() -> str:
            client = openai.AsyncOpenAI(api_key="test-key", base_url=trial.base_url("openai"), max_retries=0)
            stream = await client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True,
                                                          stream_options={"include_usage": True})
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        assert asyncio.run(ask()) == "It ships Monday."
    assert trial.usage.to_dict() == {"gpt-test": {"input": 30, "output": 6, "cache_read": 0, "cache_write": 0,
                                                  "calls": 1}}
    assert trial.errors == []


def test_anthropic_sync_and_async_streaming_are_counted_with_the_cache_fields() -> None:
    script = [claude_text("Shipped.", usage=claude_usage(12, 4, cache_read=100, cache_write=7)),
              claude_stream("It ships Monday.", usage=claude_usage(9, 11, cache_read=50))]
    with FakeAnthropic(script, keep_alive=True) as srv, ModelProxy({"anthropic": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        url = trial.base_url("anthropic")
        message = _anthropic(url).messages.create(model="claude-test", max_tokens=64, messages=MESSAGES)

        async def streamed() -> str:
            client = anthropic.AsyncAnthropic(api_key="test-key", base_url=url, max_retries=0)
            async with client.messages.stream(model="claude-test", max_tokens=64, messages=MESSAGES) as stream:
                return "".join([text async for text in stream.text_stream])

        text = asyncio.run(streamed())
    assert (message.content[0].text, text) == ("Shipped.", "It ships Monday.")  # type: ignore[union-attr]
    assert [r.path for r in srv.requests] == ["/v1/messages"] * 2
    assert "test-key" in srv.requests[0].headers.get("x-api-key", srv.requests[0].headers.get("authorization", ""))
    assert trial.usage.to_dict() == {"claude-test": {"input": 21, "output": 15, "cache_read": 150, "cache_write": 7,
                                                     "calls": 2}}
    assert len(trial.latency) == 2


def test_each_request_counts_for_its_own_trial_with_32_in_flight() -> None:
    def respond(req: Request) -> Any:
        asked = req.json["model"]  # each trial asks for its own model
        n = int(asked.rsplit("-", 1)[1])
        return openai_message({"role": "assistant", "content": "ok"}, "stop", openai_usage(prompt=n, completion=1),
                              model=asked)

    with FakeOpenAI(responder=respond, keep_alive=True) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trials = [proxy.open_trial(f"t{i}") for i in range(32)]
        barrier = threading.Barrier(32)

        def run(i: int) -> None:
            client = _openai(trials[i].base_url("openai"))
            barrier.wait()
            for _ in range(i % 3 + 1):
                client.chat.completions.create(model=f"gpt-{i + 1}", messages=MESSAGES)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    for i, trial in enumerate(trials):
        calls = i % 3 + 1
        assert trial.usage.to_dict() == {f"gpt-{i + 1}": {"input": (i + 1) * calls, "output": calls, "cache_read": 0,
                                                          "cache_write": 0, "calls": calls}}, i
    assert len(srv.requests) == sum(i % 3 + 1 for i in range(32))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_target_that_refuses_is_a_502_naming_it() -> None:
    port = _closed_port()
    with ModelProxy({"openai": f"http://127.0.0.1:{port}/v1"}) as proxy:
        trial = proxy.open_trial("t")
        with pytest.raises(openai.APIStatusError) as caught:
            _openai(trial.base_url("openai")).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert caught.value.message.startswith(
        f"Error code: 502 - sandtable model proxy: could not reach http://127.0.0.1:{port}: ConnectError: ")
    assert (trial.errors, trial.usage.to_dict()) == ([f"http://127.0.0.1:{port} refused: ConnectError"], {})


def test_a_streamed_answer_cut_mid_way_is_cut_for_the_agent_and_counted_as_an_error() -> None:
    whole = sse((None, {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                        "choices": [{"index": 0, "delta": {"content": "It ships"}, "finish_reason": None}]}),
                (None, "[DONE]"))
    with FakeOpenAI([Cut(whole, keep=60, content_type="text/event-stream")]) as srv, \
            ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        # cut while create() reads the answer: the SDK's APIError; while the stream is read: its
        # HTTP client's own error (the SDK's httpx, whichever distribution it is)
        with pytest.raises(Exception) as cut:
            stream = _openai(trial.base_url("openai")).chat.completions.create(
                model="gpt-test", messages=MESSAGES, stream=True)
            for _ in stream:
                pass
    assert isinstance(cut.value, openai.APIError) or type(cut.value).__name__ == "RemoteProtocolError"
    assert trial.errors == ["the answer was cut short: RemoteProtocolError"]


def test_a_url_of_no_trial_and_a_body_too_large_are_refused_in_the_targets_format() -> None:
    with FakeAnthropic([]) as srv, ModelProxy({"anthropic": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        url = trial.base_url("anthropic")
        trial.close()
        with pytest.raises(anthropic.NotFoundError) as gone:
            _anthropic(url).messages.create(model="claude-test", max_tokens=8, messages=MESSAGES)
        live = proxy.open_trial("u")
        with pytest.raises(anthropic.APIStatusError) as big:
            _anthropic(live.base_url("anthropic")).messages.create(
                model="claude-test", max_tokens=8, messages=[{"role": "user", "content": "x" * (MAX_BODY + 1)}])
    assert gone.value.body == {"type": "error", "error": {"type": "not_found_error", "message": (
        "sandtable model proxy: no trial at this URL (its trial ended, or it is not a URL the run handed out)")}}
    assert big.value.status_code == 413
    assert json.loads(big.value.response.text)["error"]["message"] == (
        "sandtable model proxy: the request body is over 33,554,432 bytes")
    assert srv.requests == []  # neither reached the target
    with pytest.raises(KeyError, match="the model proxy has no target 'openai' \\(it has anthropic\\)"):
        live.base_url("openai")


def test_recorded_through_the_proxy_then_replayed_with_the_model_server_stopped(tmp_path: Path) -> None:
    from pytest_sandtable.adapters.recording import Settings

    domain_file = tmp_path / "shop.sandtable.yaml"
    cassettes = tmp_path / "cassettes"
    script = [openai_text("Shipped.", usage=openai_usage(prompt=20, completion=8)),
              openai_stream("It ships Monday.", usage=openai_usage(prompt=30, completion=6))]

    def conversation(base_url: str) -> list[str]:
        client = _openai(base_url)
        first = client.chat.completions.create(model="gpt-test", messages=MESSAGES)
        stream = client.chat.completions.create(model="gpt-test", messages=[*MESSAGES, {"role": "user",
                                                "content": "When?"}], stream=True,
                                                stream_options={"include_usage": True})
        return [str(first.choices[0].message.content), "".join(c.choices[0].delta.content or "" for c in stream
                                                               if c.choices)]

    once = Settings("once", folder=cassettes)
    with FakeOpenAI(script, keep_alive=True) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        tape = once.open("shop", domain_file, "refund", 1)
        recorded = proxy.open_trial("shop/refund/1", tape)
        assert conversation(recorded.base_url("openai")) == ["Shipped.", "It ships Monday."]
        tape.write(trial_errored=False)
        target = srv.base_url
    assert (tape.live, tape.replayed) == (2, 0)
    # the model server is gone: every answer comes from the recording
    replay = Settings("none", folder=cassettes)
    with ModelProxy({"openai": target}) as proxy:
        tape = replay.open("shop", domain_file, "refund", 1)
        replayed = proxy.open_trial("shop/refund/1", tape)
        assert conversation(replayed.base_url("openai")) == ["Shipped.", "It ships Monday."]
        assert (tape.live, tape.replayed, tape.miss) == (0, 2, None)
        assert replayed.usage.to_dict() == recorded.usage.to_dict() == {"gpt-test": {
            "input": 50, "output": 14, "cache_read": 0, "cache_write": 0, "calls": 2}}
        # a request the recording lacks: the adapters' own miss, never sent
        with pytest.raises(openai.APIStatusError) as miss:
            _openai(replayed.base_url("openai")).chat.completions.create(model="gpt-test", messages=[
                {"role": "user", "content": "Something else"}])
    assert miss.value.status_code == 412
    assert tape.miss is not None and tape.miss.startswith(
        "task 'refund' trial 1: no recording for this request in ")
    assert tape.miss.endswith("(--sandtable-record=none; the recording of trial 1 has 2 model calls, this is call 3); "
                              "record it again with --sandtable-record=all")
