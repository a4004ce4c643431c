"""--sandtable-model-proxy in a run: a module:attr agent on any framework points its own
model client (the real ``openai`` and ``anthropic`` SDKs, sync, async and streaming) at
``turn.model_base_url(...)``; the run's proxy forwards to the fake servers of
tests/fakes.py, adds what each trial's calls used to its agent usage (the terminal,
results.json), attributes every call to its trial at concurrency 8 and under ``-n 2``,
refuses calls once --sandtable-max-cost is spent, and records and replays the calls with
--sandtable-record, the model server stopped."""

from __future__ import annotations

import json
import socket
import textwrap
from typing import Any

import pytest
from fakes import (
    SHOP,
    FakeAnthropic,
    FakeOpenAI,
    Request,
    claude_message,
    claude_stream,
    claude_usage,
    openai_message,
    openai_text,
    openai_usage,
)

# the shop with its one scripted task: two agent turns, no model user
DOMAIN = SHOP[: SHOP.index("  - id: refund-delivered")] + SHOP[SHOP.index("  - id: opening-fixed"):]
OPENAI_KEY = "sk-openai-proxy-test-key-0123456789"
ANTHROPIC_KEY = "sk-ant-proxy-test-key-0123456789"

SYNC_AGENT = """\
import anthropic
import openai


def agent(turn):
    turn.call_tool("get_order", {"order_id": "O-1001"})
    client = openai.OpenAI(base_url=turn.model_base_url("openai"), max_retries=0)
    first = client.chat.completions.create(model="gpt-test", messages=turn.messages)
    claude = anthropic.Anthropic(base_url=turn.model_base_url("anthropic"), max_retries=0)
    with claude.messages.stream(model="claude-sonnet-4-6", max_tokens=64, messages=turn.messages) as stream:
        text = "".join(stream.text_stream)
    return f"{first.choices[0].message.content} {text}"
"""

ASYNC_AGENT = """\
import anthropic
import openai


async def agent(turn):
    await turn.acall_tool("get_order", {"order_id": "O-1001"})
    client = openai.AsyncOpenAI(base_url=turn.model_base_url("openai"), max_retries=0)
    stream = await client.chat.completions.create(
        model=f"gpt-{turn.trial.trial}", messages=turn.messages, stream=True,
        stream_options={"include_usage": True})
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    claude = anthropic.AsyncAnthropic(base_url=turn.model_base_url("anthropic"), max_retries=0)
    await claude.messages.create(model=f"claude-{turn.trial.trial}", max_tokens=64, messages=turn.messages)
    return text
"""

PER_TRIAL_AGENT = """\
import openai


def agent(turn):
    turn.call_tool("get_order", {"order_id": "O-1001"})
    client = openai.OpenAI(base_url=turn.model_base_url("openai"), max_retries=0)
    reply = client.chat.completions.create(model=f"gpt-{turn.trial.trial}", messages=turn.messages)
    return reply.choices[0].message.content
"""


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)


def setup(pytester: pytest.Pytester, agent: str) -> None:
    pytester.makefile(".sandtable.yaml", shop=DOMAIN)
    pytester.makepyfile(proxied_agent=agent)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    out = () if any(a.startswith("--sandtable-out=") for a in args) else ("--sandtable-out=out",)
    return pytester.runpytest("--sandtable-agent=proxied_agent:agent", "--sandtable-user=scripted",
                              "-p", "no:cacheprovider", "-p", "no:randomly", *out, *args)


def results(pytester: pytest.Pytester, out: str = "out") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / out / "results.json").read_text(encoding="utf-8"))
    return data


def by_model_trial(req: Request) -> Any:
    """Each trial asks for a model named after its trial number; its answer's tokens say which."""
    n = int(req.json["model"].rsplit("-", 1)[1])
    if req.json.get("stream"):
        from fakes import openai_stream

        return openai_stream(f"Order O-1001 shipped (trial {n}).", usage=openai_usage(prompt=100 * n, completion=n),
                             model=req.json["model"])
    return openai_message({"role": "assistant", "content": f"Order O-1001 shipped (trial {n})."}, "stop",
                          openai_usage(prompt=100 * n, completion=n), model=req.json["model"])


def claude_by_trial(req: Request) -> Any:
    n = int(req.json["model"].rsplit("-", 1)[1])
    return claude_message([{"type": "text", "text": "ok"}], "end_turn", claude_usage(10 * n, n),
                          model=req.json["model"])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_framework_agents_model_calls_are_counted_and_costed(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    setup(pytester, SYNC_AGENT)
    with FakeOpenAI(responder=lambda req: openai_text("Shipped.", usage=openai_usage(prompt=20, completion=8,
                                                                                       cached=5)),
                    keep_alive=True) as oai, \
            FakeAnthropic(responder=lambda req: claude_stream("On Monday.", usage=claude_usage(
                1000, 200, cache_read=300), model="claude-sonnet-4-6"), keep_alive=True) as claude:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
        result = run(pytester, "--sandtable-model-proxy")
        assert (len(oai.requests), len(claude.requests)) == (2, 2)  # two turns, each a call of each
    result.assert_outcomes(passed=1)
    assert oai.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"  # the agent's own key, passed on
    trial = results(pytester)["trials"][0]
    assert trial["usage"]["agent"] == {
        "gpt-test": {"input": 30, "output": 16, "cache_read": 10, "cache_write": 0, "calls": 2},
        "claude-sonnet-4-6": {"input": 2000, "output": 400, "cache_read": 600, "cache_write": 0, "calls": 2},
    }
    assert [e["text"] for e in trial["transcript"] if e["role"] == "agent"] == ["Shipped. On Monday."] * 2
    # gpt-test is not in the price table: n/a, never a crash; the Claude model is priced
    result.stdout.fnmatch_lines([
        "Usage (cost estimated at list prices)",
        "side    model                input    output    cache read    cache write           cost",
        "*",
        "agent   claude-sonnet-4-6    2,000       400           600              0        $0.0122",
        "agent   gpt-test                30        16            10              0            n/a",
        "total                        2,030       416           610              0  $0.0122 + n/a",
        "prompt cache: 610 input tokens read from cache, saving $0.0016 (20.8% of input cost)",
    ], consecutive=True)


def test_each_trial_gets_its_own_calls_at_concurrency_8(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    setup(pytester, ASYNC_AGENT)
    with FakeOpenAI(responder=by_model_trial, keep_alive=True) as oai, \
            FakeAnthropic(responder=claude_by_trial, keep_alive=True) as claude:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
        result = run(pytester, "--sandtable-model-proxy", "--sandtable-k=8", "--sandtable-concurrency=8")
        assert (len(oai.requests), len(claude.requests)) == (16, 16)
    result.assert_outcomes(passed=8)
    trials = results(pytester)["trials"]
    assert {t["trial"]: t["usage"]["agent"] for t in trials} == {
        n: {f"gpt-{n}": {"input": 200 * n, "output": 2 * n, "cache_read": 0, "cache_write": 0, "calls": 2},
            f"claude-{n}": {"input": 20 * n, "output": 2 * n, "cache_read": 0, "cache_write": 0, "calls": 2}}
        for n in range(1, 9)}


def test_each_trial_gets_its_own_calls_under_xdist(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    setup(pytester, PER_TRIAL_AGENT)
    with FakeOpenAI(responder=by_model_trial, keep_alive=True) as oai:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url)
        result = run(pytester, "--sandtable-model-proxy", "--sandtable-k=4", "-n", "2")
        assert len(oai.requests) == 8
    result.assert_outcomes(passed=4)
    trials = results(pytester)["trials"]
    assert {t["trial"]: t["usage"]["agent"] for t in trials} == {
        n: {f"gpt-{n}": {"input": 200 * n, "output": 2 * n, "cache_read": 0, "cache_write": 0, "calls": 2}}
        for n in range(1, 5)}


def test_a_target_that_refuses_fails_the_trial_with_the_model_error(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    setup(pytester, PER_TRIAL_AGENT)
    port = closed_port()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    result = run(pytester, "--sandtable-model-proxy")
    result.assert_outcomes(failed=1)
    trial = results(pytester)["trials"][0]
    runtime = [c["detail"] for c in trial["checks"] if c["kind"] == "runtime"]
    assert len(runtime) == 1 and runtime[0].startswith(
        f"the agent raised InternalServerError: Error code: 502 - sandtable model proxy: could not reach "
        f"http://127.0.0.1:{port}: ConnectError: "), runtime


def test_the_proxy_refuses_calls_once_the_cost_budget_is_spent(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    two_calls = textwrap.dedent("""\
        import anthropic


        def agent(turn):
            claude = anthropic.Anthropic(base_url=turn.model_base_url("anthropic"), max_retries=0)
            for _ in range(2):
                claude.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=turn.messages)
            return "done"
        """)
    setup(pytester, two_calls)
    with FakeAnthropic(responder=lambda req: claude_stream("ok", usage=claude_usage(100_000, 10),
                                                           model="claude-sonnet-4-6")) as claude:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
        result = run(pytester, "--sandtable-model-proxy", "--sandtable-max-cost=0.01")
        assert len(claude.requests) == 1  # the second call was never sent
    result.assert_outcomes(errors=1)
    trial = results(pytester)["trials"][0]
    assert trial["verdict"] == "errored"
    assert trial["error"] == ("the run's cost budget of $0.0100 is spent ($0.3001 recorded; --sandtable-max-cost); "
                              "this model call was not sent")
    assert trial["usage"]["agent"] == {"claude-sonnet-4-6": {"input": 100_000, "output": 10, "cache_read": 0,
                                                             "cache_write": 0, "calls": 1}}


def test_recorded_through_the_proxy_then_replayed_with_the_server_stopped(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys: None) -> None:
    setup(pytester, PER_TRIAL_AGENT)
    with FakeOpenAI(responder=by_model_trial, keep_alive=True) as oai:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url)
        # no --sandtable-model-proxy: recording turns it on
        recorded = run(pytester, "--sandtable-k=2", "--sandtable-record=once", "--sandtable-out=live")
        assert len(oai.requests) == 4
    recorded.assert_outcomes(passed=2)
    text = (pytester.path / "cassettes/shop/opening-fixed.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert [e["request"]["path"] for e in doc["trials"]["1"]] == ["/v1/chat/completions"] * 2
    assert OPENAI_KEY not in text and "127.0.0.1" not in text
    # the server is gone: every answer comes from the recording, none is sent
    replay = run(pytester, "--sandtable-k=2", "--sandtable-record=none", "--sandtable-out=replayed")
    replay.assert_outcomes(passed=2)
    live, replayed = results(pytester, "live")["trials"], results(pytester, "replayed")["trials"]
    assert [t["usage"] for t in replayed] == [t["usage"] for t in live]
    assert [t["replayed"] for t in live] == [False, False]
    assert [t["replayed"] for t in replayed] == [True, True]

    # a request the recording lacks: the adapters' miss, the trial errored, nothing sent
    pytester.makepyfile(proxied_agent=PER_TRIAL_AGENT.replace('f"gpt-{turn.trial.trial}"', '"gpt-9"'))
    missed = run(pytester, "--sandtable-k=1", "--sandtable-record=none", "--sandtable-out=missed")
    missed.assert_outcomes(errors=1)
    trial = results(pytester, "missed")["trials"][0]
    assert trial["verdict"] == "errored"
    assert trial["error"] == ("task 'opening-fixed' trial 1: no recording for this request in "
                              "cassettes/shop/opening-fixed.json (--sandtable-record=none; model call 1 differs from "
                              "the recording in 'model'); record it again with --sandtable-record=all")


def test_a_turn_hands_out_its_trials_routes_and_none_without_the_proxy() -> None:
    from pytest_sandtable.engine.api import ToolResult, TrialInfo, Turn
    from pytest_sandtable.proxy import ModelProxy

    def turn(models: Any = None) -> Turn:
        return Turn(messages=[], tools=[], system_prompt="", trial=TrialInfo("shop", "t", 1, 1, 0), state={},
                    _call=lambda name, args: ToolResult(True), _models=models)

    with ModelProxy({"openai": "http://127.0.0.1:9/v1", "anthropic": "http://127.0.0.1:9"}) as proxy:
        proxied = proxy.open_trial("t")
        on = turn(proxied)
        assert on.model_base_url("openai") == f"{proxy.url}/t/{proxied.token}/openai"
        assert on.model_base_url("anthropic") == f"{proxy.url}/t/{proxied.token}/anthropic"
        assert on.model_env() == {"OPENAI_BASE_URL": f"{proxy.url}/t/{proxied.token}/openai",
                                  "ANTHROPIC_BASE_URL": f"{proxy.url}/t/{proxied.token}/anthropic"}
    off = turn()
    assert (off.model_base_url("openai"), off.model_env()) == (None, {})
