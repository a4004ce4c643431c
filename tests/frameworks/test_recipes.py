"""Each recipe of docs/frameworks.md (frameworks/recipes/*_agent.py) run by pytester against
the fake OpenAI server of tests/fakes.py (scripted tool calls, keep-alive): recorded with
--sandtable-record=once through the model proxy, then replayed with --sandtable-record=none
with the server stopped. The frameworks live in a venv of their own (.ci/run builds it from
frameworks/requirements.txt and sets SANDTABLE_REQUIRE_FRAMEWORKS: a missing framework
fails there); elsewhere a missing framework's tests are skipped with the reason."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from fakes import (
    SHOP,
    FakeAnthropic,
    FakeOpenAI,
    RawBody,
    Reply,
    Request,
    claude_message,
    claude_usage,
    openai_message,
    openai_usage,
    sse,
)

RECIPES = Path(__file__).resolve().parents[2] / "frameworks" / "recipes"
# the shop with its one scripted task: two agent turns, no model user
DOMAIN = SHOP[: SHOP.index("  - id: refund-delivered")] + SHOP[SHOP.index("  - id: opening-fixed"):]
KEY = "sk-openai-recipe-test-key-0123456789"
PRICES = "gpt-4.1-mini: {input: 0.4, output: 1.6, cache_read: 0.1}\n"  # USD per million tokens
ANSWER = "Order O-1001 was delivered."
USER_LINES = ("Hi, where is my order O-1001?", "Thanks, that's all.")  # the task's opening and script


def answer(req: Request) -> Reply:
    """The model: look the order up, then say what the tool said (or hand it to the
    framework's final_answer tool, as smolagents wants)."""
    body = req.json
    usage = openai_usage(prompt=1000, completion=100, cached=200)
    said = json.dumps(body["messages"])  # some frameworks merge the user's words into a tool result's message
    if said.rfind("delivered") < max(said.rfind(line) for line in USER_LINES):  # no lookup since the user spoke
        return call(body, "get_order", {"order_id": "O-1001"}, usage)
    names = {t.get("function", {}).get("name") for t in body.get("tools", [])}
    if "final_answer" in names:
        return call(body, "final_answer", {"answer": ANSWER}, usage)
    return openai_message({"role": "assistant", "content": ANSWER}, "stop", usage, model=body["model"])


def call(body: dict[str, Any], name: str, arguments: dict[str, Any], usage: dict[str, Any]) -> Reply:
    calls = [{"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]
    return openai_message({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls", usage,
                          model=body["model"])


CASES = [
    # (framework module, recipe, attribute, served)
    pytest.param("agents", "openai_agents_agent", "agent", False, id="openai-agents"),
    pytest.param("agents", "openai_agents_agent", "mcp_agent", True, id="openai-agents-mcp"),
    pytest.param("langgraph", "langgraph_agent", "agent", False, id="langgraph"),
    pytest.param("langgraph", "langgraph_agent", "mcp_agent", True, id="langgraph-mcp"),
    pytest.param("pydantic_ai", "pydantic_ai_agent", "agent", False, id="pydantic-ai"),
    pytest.param("pydantic_ai", "pydantic_ai_agent", "mcp_agent", True, id="pydantic-ai-mcp"),
    pytest.param("smolagents", "smolagents_agent", "agent", False, id="smolagents"),
    pytest.param("smolagents", "smolagents_agent", "mcp_agent", True, id="smolagents-mcp"),
]


def framework(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        if os.environ.get("SANDTABLE_REQUIRE_FRAMEWORKS"):  # .ci/run's framework venv: never skipped
            pytest.fail(f"{module} is not installed, and SANDTABLE_REQUIRE_FRAMEWORKS is set")
        pytest.skip(f"{module} is not installed: the framework tests run in the venv .ci/run builds from "
                    "frameworks/requirements.txt")


def run(pytester: pytest.Pytester, spec: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(f"--sandtable-agent={spec}", "--sandtable-user=scripted",
                              "--sandtable-prices=prices.yaml", "-p", "no:cacheprovider", "-p", "no:randomly", *args)


@pytest.mark.parametrize(("module", "recipe", "attr", "served"), CASES)
def test_a_recipe_is_recorded_then_replayed_with_the_server_stopped(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        module: str, recipe: str, attr: str, served: bool) -> None:
    framework(module)
    pytester.makefile(".sandtable.yaml", shop=DOMAIN)
    pytester.makefile(".yaml", prices=PRICES)
    pytester.makepyfile(**{recipe: (RECIPES / f"{recipe}.py").read_text(encoding="utf-8")})
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    serve = ("--sandtable-serve",) if served else ()
    with FakeOpenAI(responder=answer, keep_alive=True) as oai:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url)
        live = run(pytester, f"{recipe}:{attr}", "--sandtable-record=once", "--sandtable-out=live", *serve)
        sent = len(oai.requests)
    assert sent == 4, live.stdout.str()  # two turns, each a lookup and an answer
    live.assert_outcomes(passed=1)
    usage_lines = [
        "Usage (cost estimated at list prices)",
        "side    model           input    output    cache read    cache write     cost",
        "*",
        "agent   gpt-4.1-mini    3,200       400           800              0  $0.0020",
        "prompt cache: 800 input tokens read from cache, saving $0.0002 (15.0% of input cost)",
    ]
    live.stdout.fnmatch_lines(usage_lines, consecutive=True)
    # the server is gone: every answer comes from the cassette
    replay = run(pytester, f"{recipe}:{attr}", "--sandtable-record=none", "--sandtable-out=replayed", *serve)
    replay.assert_outcomes(passed=1)
    replay.stdout.fnmatch_lines(usage_lines, consecutive=True)
    trials = {out: json.loads((pytester.path / out / "results.json").read_text(encoding="utf-8"))["trials"][0]
              for out in ("live", "replayed")}
    assert (trials["live"]["replayed"], trials["replayed"]["replayed"]) == (False, True)
    assert trials["replayed"]["usage"] == trials["live"]["usage"]
    agent_said = [e["text"] for e in trials["replayed"]["transcript"] if e["role"] == "agent"]
    assert agent_said == [ANSWER, ANSWER]
    assert [c["tool"] for c in trials["replayed"]["calls"]] == ["get_order", "get_order"]


# -- the Claude Agent SDK: its bundled claude CLI against the fake Anthropic Messages server

CLAUDE_KEY = "sk-ant-recipe-test-key-0123456789"
MESSAGE_IDS = itertools.count(1)  # the CLI keeps one message per id, one result per tool call id: each its own


def claude_answer(req: Request) -> Reply | RawBody:
    """The model, as the CLI asks it (streamed, SSE; JSON if not): look the order up, then
    say what the tool said. Each answer and tool call has an id of its own."""
    body = req.json
    usage = claude_usage(input_tokens=1000, output_tokens=100, cache_read=200)
    said = json.dumps(body["messages"])
    names = [t["name"] for t in body.get("tools", []) if t.get("name", "").endswith("get_order")]
    n = next(MESSAGE_IDS)
    if names and said.rfind("delivered") < max(said.rfind(line) for line in USER_LINES):
        block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": names[0], "input": {}}
        arguments = {"order_id": "O-1001"}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
        done, stop = {**block, "input": arguments}, "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": ANSWER}
        done, stop = {**block, "text": ANSWER}, "end_turn"
    if not body.get("stream"):
        return claude_message([done], stop, usage, model=body["model"])
    start = {"id": f"msg_recipe{n:04d}", "type": "message", "role": "assistant", "model": body["model"],
             "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    return RawBody(sse(("message_start", {"type": "message_start", "message": start}),
                       ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                       ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                       ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                       ("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": stop, "stop_sequence": None},
                                          "usage": {"output_tokens": usage["output_tokens"]}}),
                       ("message_stop", {"type": "message_stop"})),
                   content_type="text/event-stream")


@pytest.mark.parametrize(("attr", "served"), [pytest.param("agent", False, id="claude-agent-sdk"),
                                              pytest.param("mcp_agent", True, id="claude-agent-sdk-mcp")])
def test_the_claude_agent_sdk_recipe_is_recorded_then_replayed_with_the_server_stopped(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, attr: str, served: bool) -> None:
    framework("claude_agent_sdk")
    recipe = "claude_agent_sdk_agent"
    pytester.makefile(".sandtable.yaml", shop=DOMAIN)
    pytester.makepyfile(**{recipe: (RECIPES / f"{recipe}.py").read_text(encoding="utf-8")})
    monkeypatch.setenv("ANTHROPIC_API_KEY", CLAUDE_KEY)
    monkeypatch.setenv("HOME", str(pytester.path / "home"))  # the CLI keeps its sessions under ~/.claude
    serve = ("--sandtable-serve",) if served else ()
    args = (f"--sandtable-agent={recipe}:{attr}", "--sandtable-user=scripted", "-p", "no:cacheprovider",
            "-p", "no:randomly", *serve)
    with FakeAnthropic(responder=claude_answer, keep_alive=True) as claude:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
        live = pytester.runpytest(*args, "--sandtable-record=once", "--sandtable-out=live")
        sent = [r.json for r in claude.requests]
    live.assert_outcomes(passed=1)
    # the CLI's title of the session, then two turns, each a lookup and an answer
    assert len(sent) == 5, live.stdout.str()
    usage_lines = [
        "Usage (cost estimated at list prices)",
        "side    model                input    output    cache read    cache write     cost",
        "*",
        "agent   claude-sonnet-4-6    5,000       500         1,000              0  $0.0228",
        "prompt cache: 1,000 input tokens read from cache, saving $0.0027 (15.0% of input cost)",
    ]
    live.stdout.fnmatch_lines(usage_lines, consecutive=True)
    replay = pytester.runpytest(*args, "--sandtable-record=none", "--sandtable-out=replayed")
    replay.assert_outcomes(passed=1)
    replay.stdout.fnmatch_lines(usage_lines, consecutive=True)
    trials = {out: json.loads((pytester.path / out / "results.json").read_text(encoding="utf-8"))["trials"][0]
              for out in ("live", "replayed")}
    assert (trials["live"]["replayed"], trials["replayed"]["replayed"]) == (False, True)
    assert trials["replayed"]["usage"] == trials["live"]["usage"]
    agent_said = [e["text"] for e in trials["replayed"]["transcript"] if e["role"] == "agent"]
    assert agent_said == [ANSWER, ANSWER]
    assert [c["tool"] for c in trials["replayed"]["calls"]] == ["get_order", "get_order"]


def test_an_agent_made_once_by_a_session_fixture_is_recorded_then_replayed(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """frameworks/recipes/fixture_conftest.py as the domain's conftest.py: the OpenAI Agents
    SDK's agent and client made once, each request routed through the trial's proxy route."""
    framework("agents")
    pytester.makefile(".sandtable.yaml", shop=DOMAIN)
    pytester.makefile(".yaml", prices=PRICES)
    pytester.makeconftest((RECIPES / "fixture_conftest.py").read_text(encoding="utf-8"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    args = ("--sandtable-user=scripted", "--sandtable-prices=prices.yaml", "-p", "no:cacheprovider",
            "-p", "no:randomly")
    with FakeOpenAI(responder=answer, keep_alive=True) as oai:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.base_url)
        live = pytester.runpytest(*args, "--sandtable-record=once", "--sandtable-out=live")
        sent = len(oai.requests)
    live.assert_outcomes(passed=1)
    assert sent == 4, live.stdout.str()
    usage_lines = ["agent   gpt-4.1-mini    3,200       400           800              0  $0.0020"]
    live.stdout.fnmatch_lines(["sandtable: agent=fixture sandtable_agent (conftest.py), user=scripted", "*",
                               *usage_lines])
    replay = pytester.runpytest(*args, "--sandtable-record=none", "--sandtable-out=replayed")
    replay.assert_outcomes(passed=1)
    replay.stdout.fnmatch_lines(usage_lines)
    trial = json.loads((pytester.path / "replayed" / "results.json").read_text(encoding="utf-8"))["trials"][0]
    assert trial["replayed"] is True
    assert [e["text"] for e in trial["transcript"] if e["role"] == "agent"] == [ANSWER, ANSWER]
