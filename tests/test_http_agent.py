"""The HTTP step agent (``sandtable-step/1``): the protocol on the wire, the example service,
and its narrower retry policy (only when the service surely did not act)."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import (
    Blackhole,
    Cut,
    Delay,
    Drop,
    FakeStepService,
    Hang,
    RawBody,
    Reply,
    Trickle,
    runtime_details,
    shop_domain,
    step_calls,
    step_reply,
)

import pytest_sandtable as st
from pytest_sandtable.adapters.http_agent import HttpStepAgent
from pytest_sandtable.adapters.options import AdapterOptions
from pytest_sandtable.adapters.registry import make_agent

TOKEN = "svc-token-5e8a11"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "http_agent_service.py"


@pytest.fixture
def domain(tmp_path: Path) -> st.Domain:
    return shop_domain(tmp_path)


@pytest.fixture
def svc() -> Iterator[FakeStepService]:
    with FakeStepService() as server:
        yield server


def agent_for(url: str, token: str | None = None, **options: Any) -> HttpStepAgent:
    return HttpStepAgent(url, AdapterOptions(**{"timeout": 5.0, "retries": 2, **options}), token=token)


def trial(domain: st.Domain, agent: Any, task: str = "opening-fixed", **kw: Any) -> st.TrialResult:
    return st.run_trial(domain, task, agent, st.ScriptedUser(), **kw)


def test_steps_on_the_wire(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(
        step_calls(("c1", "get_order", {"order_id": "O-1001"}), ("c2", "get_order", '{"order_id": "O-404"}'),
                   state={"n": 1}, usage={"model": "desk-model", "input_tokens": 100, "output_tokens": 20}),
        step_calls(("c3", "get_order", "{broken"), state={"n": 2}),
        step_reply("O-1001 was delivered.",
                   usage=[{"model": "desk-model", "input_tokens": 50, "output_tokens": 10, "cache_read_tokens": 40},
                          {"model": "router", "input_tokens": 5, "output_tokens": 1}]),
        step_reply("Bye!"),
    )
    agent = agent_for(svc.url, token=TOKEN)
    result = trial(domain, agent, run_seed=5)
    assert result.verdict == "passed"
    assert agent.name == svc.url
    assert [(c["args"], c["ok"]) for c in result.calls] == [
        ({"order_id": "O-1001"}, True), ({"order_id": "O-404"}, False), ({"_raw": "{broken"}, False)]

    first, second, third, fourth = svc.bodies
    assert first == {
        "protocol": "sandtable-step/1",
        "trial_id": "shop/opening-fixed/1",
        "trial": {"domain": "shop", "task": "opening-fixed", "trial": 1, "k": 1, "seed": result.seed},
        "turn": 1,
        "step": 1,
        "system_prompt": domain.system_prompt(),
        "tools": [{"name": t.name, "description": t.description, "input_schema": t.input_schema()}
                  for t in domain.tools.values()],
        "messages": [{"role": "user", "content": "Hi, where is my order O-1001?"}],
        "tool_results": [],
        "state": None,
    }
    assert (second["step"], second["state"]) == (2, {"n": 1})
    assert second["tool_results"] == [
        {"id": "c1", "name": "get_order", "ok": True,
         "result": {"order_id": "O-1001", "customer": "Ada Quill", "total": 42.5, "status": "delivered"}},
        {"id": "c2", "name": "get_order", "ok": False, "error": {"code": 404, "message": "orders O-404 not found"}},
    ]
    assert third["tool_results"][0]["error"]["code"] == 400
    assert (third["state"], fourth["state"]) == ({"n": 2}, {"n": 2})  # kept until the service changes it
    assert (fourth["turn"], fourth["step"], fourth["tool_results"]) == (2, 1, [])
    assert fourth["messages"][-2:] == [{"role": "assistant", "content": "O-1001 was delivered."},
                                       {"role": "user", "content": "Thanks, that's all."}]

    headers = [r.headers for r in svc.requests]
    assert {h["sandtable-protocol"] for h in headers} == {"sandtable-step/1"}
    assert headers[0]["authorization"] == f"Bearer {TOKEN}"
    keys = [h["idempotency-key"] for h in headers]
    assert len(set(keys)) == 4
    assert [k.split("/", 1)[1] for k in keys] == ["1/1", "1/2", "1/3", "2/1"]
    assert len({k.split("/")[0] for k in keys}) == 1  # one id per trial

    assert result.usage["agent"] == {
        "desk-model": {"input": 150, "output": 30, "cache_read": 40, "cache_write": 0, "calls": 2},
        "router": {"input": 5, "output": 1, "cache_read": 0, "cache_write": 0, "calls": 1},
    }
    assert TOKEN not in json.dumps(result.to_dict()) and TOKEN not in repr(agent)


def test_the_example_service(domain: st.Domain) -> None:
    spec = importlib.util.spec_from_file_location("http_agent_service", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    server = example.make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/step"
        agent, name = make_agent(url, AdapterOptions(timeout=5.0))
        result = trial(domain, agent)
        assert (name, result.verdict) == (url, "passed")
        assert [c["tool"] for c in result.calls] == ["get_order"]
        assert result.transcript[2]["text"] == (
            "Here is what I found. get_order: order id: O-1001, customer: Ada Quill, total: 42.5, status: delivered")
        # a repeated step gets the first answer back
        assert len(server.seen) == 3
    finally:
        server.shutdown()
        server.server_close()


# -- retries only where the service surely did not act ------------------------------------------


def test_503_retry_after_then_success(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Reply({"error": "warming up"}, 503, {"retry-after": "1"}), step_reply("Delivered."), step_reply("Bye."))
    assert runtime_details(trial(domain, agent_for(svc.url))) == []
    assert 0.95 <= svc.gaps()[0] < 2.5
    assert svc.requests[0].headers["idempotency-key"] == svc.requests[1].headers["idempotency-key"]


def test_429_until_retries_run_out(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(*[Reply({"error": "busy"}, 429, {"retry-after": "0"})] * 3)
    result = trial(domain, agent_for(svc.url, retries=2))
    assert runtime_details(result) == [f"http agent: HTTP 429 from {svc.host} after 3 attempts: busy"]


def test_500_is_not_retried(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Reply({"error": {"message": "boom"}}, 500))
    result = trial(domain, agent_for(svc.url))
    assert (result.verdict, runtime_details(result)) == ("failed", [f"http agent: HTTP 500 from {svc.host}: boom"])
    assert len(svc.requests) == 1


def test_hang_is_not_retried(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Hang(30))
    started = time.monotonic()
    result = trial(domain, agent_for(svc.url, timeout=0.5, retries=3))
    assert time.monotonic() - started < 6.0
    assert runtime_details(result) == [f"http agent: no response from {svc.host} within 0.5s"]
    assert len(svc.requests) == 1


def test_dropped_connection_is_not_retried(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Drop(), step_reply("never sent"))
    result = trial(domain, agent_for(svc.url))
    assert runtime_details(result) == [f"http agent: connection to {svc.host} closed without a response"]
    assert len(svc.requests) == 1


def test_connection_refused_is_retried(domain: st.Domain) -> None:
    with FakeStepService() as gone:
        url, host = gone.url, gone.host
    result = trial(domain, agent_for(url, retries=1))
    assert runtime_details(result) == [f"http agent: connection refused by {host} after 2 attempts"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (RawBody(b"<html>502</html>", content_type="text/html"),
         "bad response from {host} (HTTP 200): body is not JSON: HTML page '502'"),
        (Reply([1, 2]), "bad response from {host}: expected a JSON object, got array"),
        (Reply({"protocol": "sandtable-step/2", "reply": "hi"}),
         "bad response from {host}: the service speaks 'sandtable-step/2', this run speaks 'sandtable-step/1'"),
        (Reply({"error": "model quota exceeded"}),
         "bad response from {host}: the service reported an error: model quota exceeded"),
        (Reply({"reply": "hi", "tool_calls": [{"id": "1", "name": "get_order"}]}),
         "bad response from {host}: answer with either 'reply' or 'tool_calls', not both"),
        (Reply({"text": "hi"}), "bad response from {host}: expected 'reply' or 'tool_calls'"),
        (Reply({"reply": 42}), "bad response from {host}: 'reply' must be a string, got number"),
        (Reply({"tool_calls": []}), "bad response from {host}: 'tool_calls' must be a non-empty array"),
        (Reply({"tool_calls": [{"name": "get_order"}]}),
         "bad response from {host}: tool_calls[0].id must be a non-empty string"),
        (Reply({"tool_calls": [{"id": "1", "name": "get_order", "arguments": [1]}]}),
         "bad response from {host}: tool_calls[0].arguments must be an object, got array"),
        (Reply({"reply": "hi", "usage": {"input_tokens": -1}}),
         "bad response from {host}: usage.input_tokens must be a whole number >= 0"),
    ],
)
def test_garbage_answers(domain: st.Domain, svc: FakeStepService, body: Reply | RawBody, detail: str) -> None:
    svc.push(body)
    result = trial(domain, agent_for(svc.url))
    assert runtime_details(result) == ["http agent: " + detail.format(host=svc.host)]


def test_token_from_the_environment(domain: st.Domain, svc: FakeStepService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDTABLE_HTTP_AGENT_TOKEN", TOKEN)
    svc.push(Reply({"error": f"token {TOKEN} is not allowed"}, 403))
    agent, _ = make_agent(svc.url, AdapterOptions(timeout=5.0))
    result = trial(domain, agent)
    assert svc.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert runtime_details(result) == [f"http agent: HTTP 403 from {svc.host}: token *** is not allowed"]
    assert TOKEN not in json.dumps(result.to_dict())


# -- faults on the wire ---------------------------------------------------------------------------------


def test_reset_in_the_middle_of_the_answer_is_not_retried(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Cut(step_reply("Delivered.").body, keep=12), step_reply("never sent"))
    result = trial(domain, agent_for(svc.url))
    assert runtime_details(result) == [f"http agent: connection to {svc.host} dropped in the middle of the response"]
    assert len(svc.requests) == 1


def test_slow_step_within_the_timeout(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Delay(0.5, step_reply("Delivered.")), step_reply("Bye."))
    assert runtime_details(trial(domain, agent_for(svc.url, timeout=1.0))) == []


def test_trickling_service_is_bounded(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(Trickle(0.05))
    started = time.monotonic()
    result = trial(domain, agent_for(svc.url, timeout=0.4, retries=3))
    assert time.monotonic() - started < 5.0
    assert runtime_details(result) == [f"http agent: no response from {svc.host} within 0.4s"]
    assert len(svc.requests) == 1


def test_service_that_never_reads(domain: st.Domain) -> None:
    with Blackhole() as hole:
        started = time.monotonic()
        result = trial(domain, agent_for(f"http://{hole.host}/step", timeout=0.3, retries=3))
        assert time.monotonic() - started < 5.0
        assert runtime_details(result) == [f"http agent: no response from {hole.host} within 0.3s"]


def test_proxy_error_pages(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(RawBody(b"<html><head><title>503 Service Temporarily Unavailable</title></head></html>", 503, "text/html"),
             RawBody(b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", 502, "text/html"))
    result = trial(domain, agent_for(svc.url, retries=1))  # 503 is retried, 502 is not
    assert runtime_details(result) == [
        f"http agent: HTTP 502 from {svc.host} after 2 attempts: HTML page '502 Bad Gateway'"]
    assert len(svc.requests) == 2


def test_secrets_in_the_url_are_masked_when_echoed(domain: st.Domain, svc: FakeStepService) -> None:
    svc.push(lambda req: Reply({"error": f"no access for {req.path}"}, 403))
    agent = agent_for(f"{svc.url}?token=url-token-4471", token=TOKEN)
    result = trial(domain, agent)
    assert runtime_details(result) == [f"http agent: HTTP 403 from {svc.host}: no access for /step?token=***"]
    assert "url-token-4471" not in json.dumps(result.to_dict()) + repr(agent)
