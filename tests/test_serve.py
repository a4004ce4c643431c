"""``--sandtable-serve``: each trial's world served over REST and MCP, every call through
the engine's own ``turn.call_tool`` path, graded the same way; agents that call their
tools themselves (an MCP client, plain HTTP, an HTTP step service) pass and fail as
they should, with trials in flight at once and under xdist; bad input on the wire gets
its status and a trial that cannot be served errors alone."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _domains import DESK
from fakes import FakeStepService, Reply

import pytest_sandtable as st
from pytest_sandtable.adapters.http_agent import HttpStepAgent
from pytest_sandtable.adapters.options import AdapterOptions
from pytest_sandtable.serve import serve_world

pytest_plugins = ["pytester"]

# a fair rate books L-1001 within its ceiling (2350) and passes; a greedy one breaks rate-ceiling and fails
TASKS = """\
tasks:
  - id: fair
    user: { opening: "MC 100101 here. Book L-1001 at 2100, please." }
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
  - id: greedy
    user: { opening: "MC 100101 here. Book L-1001 at 2500, please." }
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
"""

# the agents, as a team would write them: they never touch turn.call_tool
AGENTS = '''
import re

import httpx
from mcp import Client


def wanted(turn):
    text = turn.last_user_message
    return re.search(r"MC (\\d+)", text).group(1), re.search(r"(L-\\d+)", text).group(1), \\
        float(re.search(r"at (\\d+)", text).group(1))


async def mcp_agent(turn):
    """An MCP client agent, awaiting on the trial's own event loop."""
    mc, load, rate = wanted(turn)
    async with Client(turn.mcp_url) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == {"verify_carrier", "book_load"}, listed
        await client.call_tool("verify_carrier", {"mc_number": mc})
        result = await client.call_tool("book_load", {"load_id": load, "rate": rate})
    return "Booked." if not result.is_error else "Could not book."


def rest_agent(turn):
    """A plain-HTTP agent with a blocking client (sync: it runs in a thread of its own)."""
    mc, load, rate = wanted(turn)
    httpx.post(f"{turn.tools_url}/verify_carrier", json={"mc_number": mc}).raise_for_status()
    r = httpx.post(f"{turn.tools_url}/book_load", json={"load_id": load, "rate": rate})
    return "Booked." if r.status_code == 200 else "Could not book."


async def rest_async_agent(turn):
    """A plain-HTTP agent awaiting an async client on the trial's own event loop."""
    mc, load, rate = wanted(turn)
    async with httpx.AsyncClient() as client:
        (await client.post(f"{turn.tools_url}/verify_carrier", json={"mc_number": mc})).raise_for_status()
        r = await client.post(f"{turn.tools_url}/book_load", json={"load_id": load, "rate": rate})
    return "Booked." if r.status_code == 200 else "Could not book."
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.path.joinpath("sandtable.yaml").write_text(DESK + TASKS, encoding="utf-8")
    pytester.path.joinpath("served_agents.py").write_text(AGENTS, encoding="utf-8")
    pytester.makeini("[pytest]\npythonpath = .\n")  # xdist workers import the agents too
    monkeypatch.syspath_prepend(str(pytester.path))
    return pytester


def run_results(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    out = pytester.path / "out"
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-serve", f"--sandtable-out={out}", *args)
    return result, json.loads((out / "results.json").read_text(encoding="utf-8"))


def verdicts(doc: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for t in sorted(doc["trials"], key=lambda t: (t["task"], t["trial"])):
        found.setdefault(t["task"], []).append(t["verdict"])
    return found


CONCURRENCY_8 = ["--sandtable-concurrency=8"]
XDIST_2 = ["-n", "2", "--sandtable-concurrency=4"]


@pytest.mark.parametrize(("agent", "spread"), [
    ("mcp_agent", CONCURRENCY_8), ("rest_agent", CONCURRENCY_8), ("rest_async_agent", CONCURRENCY_8),
    ("mcp_agent", XDIST_2), ("rest_agent", XDIST_2),
], ids=["mcp-concurrency-8", "rest-concurrency-8", "rest-async-concurrency-8", "mcp-xdist-2", "rest-xdist-2"])
def test_agents_that_call_the_served_world_pass_and_fail_as_expected(
    project: pytest.Pytester, agent: str, spread: list[str]
) -> None:
    result, doc = run_results(project, f"--sandtable-agent=served_agents:{agent}", "--sandtable-k=4", *spread)
    assert verdicts(doc) == {"fair": ["passed"] * 4, "greedy": ["failed"] * 4}
    result.assert_outcomes(passed=4, failed=4)
    for t in doc["trials"]:  # every call in the call log and the transcript, as turn.call_tool records them
        assert [(c["tool"], c["ok"]) for c in t["calls"]] == [("verify_carrier", True), ("book_load", True)]
        assert [e["call"] for e in t["transcript"] if e["role"] == "tool"] == [0, 1]
        broken = [v["invariant"] for v in t["violations"]]
        assert broken == (["rate-ceiling"] if t["task"] == "greedy" else [])


def test_the_step_protocol_names_the_urls_and_a_service_may_call_them(project: pytest.Pytester) -> None:
    def service(request: Any) -> Reply:
        body = request.json
        # the service calls the world itself, over REST, before it answers the step
        httpx.post(f"{body['tools_url']}/book_load", json={"load_id": "L-1001", "rate": 2100}).raise_for_status()
        return Reply({"reply": "Booked.", "state": {"urls": [body["tools_url"], body["mcp_url"]]}})

    with FakeStepService(responder=service) as svc:
        _, doc = run_results(project, f"--sandtable-agent={svc.url}", "-k", "fair")
        body = svc.requests[0].json
    assert body["tools_url"].startswith("http://127.0.0.1:") and body["tools_url"].endswith("/tools")
    assert body["mcp_url"] == body["tools_url"][: -len("/tools")] + "/mcp"
    assert verdicts(doc) == {"fair": ["passed"]}
    assert [c["tool"] for c in doc["trials"][0]["calls"]] == ["book_load"]


# -- the engine with a real server, in this process ---------------------------------------


@pytest.fixture
def desk(tmp_path: Path) -> st.Domain:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DESK + TASKS, encoding="utf-8")
    return st.load_domain(path)


def served_trial(domain: st.Domain, agent: Any, task: str = "fair", **kw: Any) -> st.TrialResult:
    return st.run_trial(domain, task, agent, st.ScriptedUser(), serve=serve_world, **kw)


def test_bad_input_on_the_rest_routes(desk: st.Domain) -> None:
    seen: dict[str, Any] = {}

    def agent(turn: st.Turn) -> str:
        base = turn.tools_url
        assert base is not None
        seen["unknown"] = httpx.post(f"{base}/cancel_load", json={})
        seen["bad_json"] = httpx.post(f"{base}/book_load", content=b"{load_id: L-1001",
                                      headers={"content-type": "application/json"})
        seen["bad_args"] = httpx.post(f"{base}/book_load", json={"load_id": "L-1001", "rate": "a lot"})
        seen["not_found"] = httpx.post(f"{base}/verify_carrier", json={"mc_number": "999"})
        seen["openapi"] = httpx.get(base[: -len("/tools")] + "/openapi.json")
        seen["listed"] = httpx.get(base)
        return "Sorry."

    result = served_trial(desk, agent)
    assert (seen["unknown"].status_code, seen["unknown"].json()) == (404, {
        "error": 404, "message": "unknown tool 'cancel_load'; the tools are verify_carrier, book_load",
        "tools": ["verify_carrier", "book_load"]})
    assert seen["bad_json"].status_code == 400
    assert seen["bad_json"].json()["message"] == (
        "invalid arguments for book_load: arguments are not valid JSON: "
        "Expecting property name enclosed in double quotes")
    assert seen["bad_args"].status_code == 400
    assert seen["not_found"].status_code == 404
    # each bad call is in the call log, as through turn.call_tool
    assert [(c["tool"], c["error"]["code"]) for c in result.calls] == [
        ("cancel_load", 404), ("book_load", 400), ("book_load", 400), ("verify_carrier", 404)]
    assert [t["name"] for t in seen["listed"].json()] == ["verify_carrier", "book_load"]
    doc = seen["openapi"].json()
    assert doc["openapi"] == "3.1.0"
    assert sorted(doc["paths"]) == ["/tools/book_load", "/tools/verify_carrier"]
    schema = doc["paths"]["/tools/book_load"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema == desk.tools["book_load"].input_schema()


def test_an_async_agent_that_blocks_the_loop_with_a_sync_client_does_not_deadlock(desk: st.Domain) -> None:
    # a common mistake (a blocking client inside async code): the server is on a loop of its own
    async def agent(turn: st.Turn) -> str:
        r = httpx.post(f"{turn.tools_url}/book_load", json={"load_id": "L-1001", "rate": 2100}, timeout=5)
        return "Booked." if r.status_code == 200 else "No."

    result = served_trial(desk, agent, trial_timeout=20)
    assert result.verdict == "passed", result.error
    assert [(c["tool"], c["ok"]) for c in result.calls] == [("book_load", True)]


def test_without_serve_there_are_no_urls(desk: st.Domain) -> None:
    urls: list[Any] = []

    def agent(turn: st.Turn) -> str:
        urls.extend([turn.tools_url, turn.mcp_url])
        return "Hello."

    st.run_trial(desk, "fair", agent, st.ScriptedUser())
    assert urls == [None, None]


def test_a_call_after_the_trial_ended_changes_nothing(desk: st.Domain) -> None:
    statuses: list[Any] = []
    urls: list[str] = []
    done = threading.Event()

    def keep_calling(base: str) -> None:
        # goes on after the agent's reply: the trial ends meanwhile
        while True:
            try:
                statuses.append(httpx.post(f"{base}/verify_carrier", json={"mc_number": "100101"}).status_code)
            except Exception:  # refused, or dropped unread as the server stopped (in-process
                # pytester runs re-import httpcore, so httpx may not translate its errors)
                statuses.append("no answer")
            if statuses[-1] != 200:
                break
        done.set()

    def agent(turn: st.Turn) -> str:
        assert turn.tools_url is not None
        urls.append(turn.tools_url)
        threading.Thread(target=keep_calling, args=(turn.tools_url,), daemon=True).start()
        time.sleep(0.05)
        return "Bye."

    result = served_trial(desk, agent)
    assert done.wait(10)
    assert statuses[-1] in (410, "no answer")
    # exactly the calls answered before the end are in the log; the rest changed nothing
    assert len(result.calls) == statuses.count(200)
    with pytest.raises(Exception, match="Connection refused"):  # and the server is gone
        httpx.post(f"{urls[0]}/verify_carrier", json={"mc_number": "100101"})


@pytest.mark.parametrize("after", [0.0, 0.002, 0.01, 0.05])  # before the call is sent, in flight, answered
def test_an_mcp_client_that_disconnects_mid_call(desk: st.Domain, after: float) -> None:
    async def agent(turn: st.Turn) -> str:
        from mcp import Client

        assert turn.mcp_url is not None
        try:
            async with Client(turn.mcp_url) as client:
                call = asyncio.ensure_future(client.call_tool("verify_carrier", {"mc_number": "100101"}))
                await asyncio.sleep(after)
                call.cancel()  # the client goes away with its call in flight
                await asyncio.gather(call, return_exceptions=True)
        except Exception:
            # mcp's client may trip over the abandoned call's answer as it closes (an
            # anyio.BrokenResourceError in its task group, about 1 run in 25): its own race,
            # not the server's, which is what this test is about
            pass
        async with Client(turn.mcp_url) as client:  # and a new one carries on
            result = await client.call_tool("book_load", {"load_id": "L-1001", "rate": 2100})
        return "Booked." if not result.is_error else "No."

    result = served_trial(desk, agent)
    assert result.verdict == "passed", result.error
    # the abandoned call ran whole or not at all
    assert [(c["tool"], c["ok"]) for c in result.calls] in (
        [("book_load", True)], [("verify_carrier", True), ("book_load", True)])


def test_a_tool_loop_over_rest_ends_the_turn(desk: st.Domain) -> None:
    codes: list[int] = []

    def agent(turn: st.Turn) -> str:
        with httpx.Client() as client:
            for _ in range(105):
                codes.append(client.post(f"{turn.tools_url}/verify_carrier", json={"mc_number": "100101"})
                             .status_code)
        return "Done."

    result = served_trial(desk, agent)
    assert result.verdict == "failed"
    assert [c.detail for c in result.checks if c.kind == "runtime"] == [
        "the agent made more than 100 tool calls in one turn"]
    assert codes == [200] * 100 + [500] + [409] * 4
    assert len(result.calls) == 100


# -- a trial that cannot be served, and options ---------------------------------------------


def test_a_port_in_use_errors_the_trial_and_the_run_goes_on(project: pytest.Pytester) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        result, doc = run_results(project, "--sandtable-agent=served_agents:rest_agent",
                                  f"--sandtable-serve-port={port}")
    finally:
        holder.close()
    message = (f"the trial's world could not be served: could not serve the world on 127.0.0.1:{port}: "
               "the port is in use (another process holds it)")
    assert [(t["task"], t["verdict"], t["error"]) for t in doc["trials"]] == [
        ("fair", "errored", message), ("greedy", "errored", message)]
    result.assert_outcomes(errors=2)


def test_a_free_fixed_port_serves_trial_after_trial(project: pytest.Pytester) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    _, doc = run_results(project, "--sandtable-agent=served_agents:rest_agent", "--sandtable-k=2",
                         f"--sandtable-serve-port={port}")
    assert verdicts(doc) == {"fair": ["passed"] * 2, "greedy": ["failed"] * 2}


@pytest.mark.parametrize(("args", "message"), [
    (["--sandtable-serve-port=8123"], "--sandtable-serve-port needs --sandtable-serve"),
    (["--sandtable-serve", "--sandtable-serve-port=70000"], "--sandtable-serve-port: expected 1 to 65535, got 70000"),
    (["--sandtable-serve", "--sandtable-serve-port=8123", "--sandtable-concurrency=2"],
     "--sandtable-serve-port: trials running at once would share the port; use it with "
     "--sandtable-concurrency 1 and without -n, or leave it out for a free port per trial"),
])
def test_serve_options_are_checked(project: pytest.Pytester, args: list[str], message: str) -> None:
    result = project.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines == [f"ERROR: {message}", ""] or f"ERROR: {message}" in result.errlines


def test_without_the_serve_extra_one_line_names_it(project: pytest.Pytester) -> None:
    # the extra "uninstalled" in the child process only: import machinery finds no starlette there
    project.makeconftest("import sys\nsys.modules['starlette'] = None\n")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--sandtable-serve")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --sandtable-serve needs the 'serve' extra: pip install 'pytest-sandtable[serve]'" in result.errlines


def test_the_example_mcp_agent_passes_and_fails_as_its_docstring_says(pytester: pytest.Pytester) -> None:
    root = Path(__file__).resolve().parents[1]
    pytester.path.joinpath("sandtable.yaml").write_text(
        (root / "example_domains" / "freight" / "sandtable.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    pytester.syspathinsert(str(root))
    out = pytester.path / "out"
    pytester.runpytest("-p", "no:cacheprovider", "--sandtable-serve", "--sandtable-agent=examples.mcp_agent:agent",
                       "-k", "book-at-posted-rate or expired-insurance", f"--sandtable-out={out}")
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert verdicts(doc) == {"book-at-posted-rate": ["passed"], "expired-insurance": ["failed"]}


def test_http_step_agent_sends_no_urls_without_serve(tmp_path: Path) -> None:
    # the step body stays as it was for a run without --sandtable-serve
    from fakes import shop_domain, step_reply

    with FakeStepService([step_reply("Hi.")]) as svc:
        agent = HttpStepAgent(svc.url, AdapterOptions(timeout=5.0, retries=0))
        st.run_trial(shop_domain(tmp_path), "opening-fixed", agent, st.ScriptedUser(), k=1)
        body = svc.bodies[0]
    assert "tools_url" not in body and "mcp_url" not in body


