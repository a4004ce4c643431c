"""MCP served without the ``mcp`` package (serve/mcp_http.py): the installed mcp 2.x
client and the requests a 1.x client sends (LangChain's and smolagents' adapters pin
mcp<2) both list and call the tools; a tool's error reaches the client said once, as
text, never as JSON inside the text; and REST, and MCP, serve a run in a process where
mcp cannot be imported at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from _domains import DESK

import pytest_sandtable as st
from pytest_sandtable.serve import serve_world

pytest_plugins = ["pytester"]

TASK = """\
tasks:
  - id: fair
    user: { opening: "MC 100101 here. Book L-1001 at 2100, please." }
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
"""

# what an mcp 1.x client (streamablehttp_client + ClientSession) sends
V1_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture
def desk(tmp_path: Path) -> st.Domain:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DESK + TASK, encoding="utf-8")
    return st.load_domain(path)


def served(domain: st.Domain, agent: Any) -> st.TrialResult:
    return st.run_trial(domain, "fair", agent, st.ScriptedUser(), serve=serve_world, trial_timeout=60)


def test_the_mcp_2_client_lists_calls_and_gets_a_tool_error_said_once(desk: st.Domain) -> None:
    seen: dict[str, Any] = {}

    async def agent(turn: st.Turn) -> str:
        from mcp import Client

        assert turn.mcp_url is not None
        async with Client(turn.mcp_url) as client:
            seen["tools"] = [(t.name, t.input_schema) for t in (await client.list_tools()).tools]
            missing = await client.call_tool("book_load", {"load_id": "L-9999", "rate": 2100})
            seen["error"] = (missing.is_error, [c.text for c in missing.content], missing.structured_content)
            unknown = await client.call_tool("cancel_load", {})
            seen["unknown"] = (unknown.is_error, unknown.content[0].text, unknown.structured_content)
            await client.call_tool("verify_carrier", {"mc_number": "100101"})
            booked = await client.call_tool("book_load", {"load_id": "L-1001", "rate": 2100})
            seen["ok"] = (booked.is_error, json.loads(booked.content[0].text), booked.structured_content)
        return "Booked."

    result = served(desk, agent)
    assert result.verdict == "passed", result.error
    assert [name for name, _ in seen["tools"]] == ["verify_carrier", "book_load"]
    assert seen["tools"][1][1] == desk.tools["book_load"].input_schema()
    assert seen["error"] == (True, ["error 404: loads L-9999 not found"],
                             {"error": 404, "message": "loads L-9999 not found"})
    message = "unknown tool 'cancel_load'; the tools are verify_carrier, book_load"
    assert seen["unknown"] == (True, f"error 404: {message}",
                               {"error": 404, "message": message, "tools": ["verify_carrier", "book_load"]})
    assert seen["ok"][0] is False and seen["ok"][1] == seen["ok"][2]
    assert [(c["tool"], c["ok"]) for c in result.calls] == [
        ("book_load", False), ("cancel_load", False), ("verify_carrier", True), ("book_load", True)]


def test_the_requests_an_mcp_1_client_sends_are_answered(desk: st.Domain) -> None:
    seen: dict[str, Any] = {}

    def agent(turn: st.Turn) -> str:
        url = str(turn.mcp_url)
        with httpx.Client(headers=V1_HEADERS) as client:
            def rpc(message: Any, **headers: str) -> tuple[int, str, Any]:
                text = message if isinstance(message, bytes) else json.dumps(message).encode()
                r = client.post(url, content=text, headers=headers)
                return r.status_code, r.headers.get("content-type", ""), r.json() if r.content else None

            init = client.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-03-26", "capabilities": {},
                "clientInfo": {"name": "mcp", "version": "1.9.4"}}})
            seen["init"] = (init.status_code, init.json(), "mcp-session-id" in init.headers)
            seen["initialized"] = rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
            seen["list"] = rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                               **{"mcp-protocol-version": "2025-03-26"})
            seen["verify"] = rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                  "params": {"name": "verify_carrier", "arguments": {"mc_number": "100101"}}})
            seen["book"] = rpc({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                "params": {"name": "book_load", "arguments": {"load_id": "L-1001", "rate": 2100}}})
            seen["ping"] = rpc({"jsonrpc": "2.0", "id": 4, "method": "ping"})
            seen["unknown method"] = rpc({"jsonrpc": "2.0", "id": 5, "method": "resources/list"})
            seen["discover"] = rpc({"jsonrpc": "2.0", "id": 6, "method": "server/discover"})
            seen["no name"] = rpc({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}})
            seen["batch"] = rpc([{"jsonrpc": "2.0", "id": 8, "method": "ping"},
                                 {"jsonrpc": "2.0", "method": "notifications/cancelled"}])
            seen["bad json"] = rpc(b"{not json")
            seen["bad version"] = rpc({"jsonrpc": "2.0", "id": 9, "method": "ping"},
                                      **{"mcp-protocol-version": "1999-01-01"})
            seen["not rpc"] = rpc({"id": 10, "method": "ping"})
            get = client.get(url)
            seen["get"] = (get.status_code, get.headers.get("allow"))
            seen["delete"] = client.delete(url).status_code
            sse = client.post(url, json={"jsonrpc": "2.0", "id": 11, "method": "ping"},
                              headers={"accept": "text/event-stream"})
            seen["sse"] = (sse.status_code, sse.headers["content-type"], sse.text)
        return "Booked."

    result = served(desk, agent)
    assert result.verdict == "passed", result.error
    assert seen["init"] == (200, {"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": "2025-03-26", "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "sandtable freight/fair/1", "version": st.__version__}}}, False)
    assert seen["initialized"] == (202, "", None)
    status, ctype, listed = seen["list"]
    assert (status, ctype) == (200, "application/json")
    assert [t["name"] for t in listed["result"]["tools"]] == ["verify_carrier", "book_load"]
    assert listed["result"]["tools"][1]["inputSchema"] == desk.tools["book_load"].input_schema()
    verify = seen["verify"][2]["result"]
    assert verify["isError"] is False and json.loads(verify["content"][0]["text"]) == verify["structuredContent"]
    assert seen["book"][2]["result"]["isError"] is False
    assert seen["ping"] == (200, "application/json", {"jsonrpc": "2.0", "id": 4, "result": {}})
    assert seen["unknown method"][2] == {"jsonrpc": "2.0", "id": 5,
                                         "error": {"code": -32601, "message": "Method not found: resources/list"}}
    assert seen["discover"][2]["error"]["code"] == -32601  # a 2.x client's probe: it falls back to initialize
    assert seen["no name"][2]["error"] == {"code": -32602,
                                           "message": "Invalid params: tools/call needs the tool's name"}
    assert seen["batch"] == (200, "application/json", [{"jsonrpc": "2.0", "id": 8, "result": {}}])
    status, _, body = seen["bad json"]
    assert (status, body["id"], body["error"]["code"]) == (400, None, -32700)
    assert seen["bad version"] == (400, "application/json", {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Unsupported protocol version: 1999-01-01 (this server speaks 2024-11-05, "
                                   "2025-03-26, 2025-06-18, 2025-11-25)"}})
    assert seen["not rpc"][2]["error"]["code"] == -32600
    assert seen["get"] == (405, "POST")
    assert seen["delete"] == 405
    assert seen["sse"] == (200, "text/event-stream; charset=utf-8",
                           'event: message\ndata: {"jsonrpc": "2.0", "id": 11, "result": {}}\n\n')
    assert [(c["tool"], c["ok"]) for c in result.calls] == [("verify_carrier", True), ("book_load", True)]


def test_an_unknown_protocol_version_is_answered_with_2025_06_18(desk: st.Domain) -> None:
    seen: list[Any] = []

    async def agent(turn: st.Turn) -> str:
        async with httpx.AsyncClient(headers=V1_HEADERS) as client:
            r = await client.post(str(turn.mcp_url), json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                           "params": {"protocolVersion": "2030-01-01"}})
            seen.append(r.json()["result"]["protocolVersion"])
        return "Hello."

    served(desk, agent)
    assert seen == ["2025-06-18"]


AGENTS = '''
import json
import sys

import httpx

assert sys.modules.get("mcp", 0) is None  # this process cannot import mcp


def rest_agent(turn):
    httpx.post(f"{turn.tools_url}/verify_carrier", json={"mc_number": "100101"}).raise_for_status()
    r = httpx.post(f"{turn.tools_url}/book_load", json={"load_id": "L-1001", "rate": 2100})
    return "Booked." if r.status_code == 200 else "Could not book."


def mcp_agent(turn):
    headers = {"accept": "application/json, text/event-stream"}
    with httpx.Client(headers=headers) as client:
        def call(i, name, arguments):
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
            return client.post(turn.mcp_url, json=body).json()["result"]

        client.post(turn.mcp_url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                        "params": {"protocolVersion": "2025-06-18"}}).raise_for_status()
        call(1, "verify_carrier", {"mc_number": "100101"})
        booked = call(2, "book_load", {"load_id": "L-1001", "rate": 2100})
    return "Could not book." if booked["isError"] else "Booked."
'''


@pytest.mark.parametrize("agent", ["rest_agent", "mcp_agent"])
def test_a_served_run_works_where_mcp_cannot_be_imported(pytester: pytest.Pytester, agent: str) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DESK + TASK, encoding="utf-8")
    pytester.path.joinpath("served_agents.py").write_text(AGENTS, encoding="utf-8")
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.makeconftest("import sys\nsys.modules['mcp'] = None\n")  # mcp "uninstalled" in the child only
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--sandtable-serve",
                                           f"--sandtable-agent=served_agents:{agent}")
    result.assert_outcomes(passed=1)
