"""A served world (``--sandtable-serve``) is for the trial's agent only: a web page in a
browser on the machine (a cross-origin POST, a DNS-rebinding page) and a process that
guesses URLs run nothing; a body too big is refused before it is read whole; a body
that holds a lone surrogate gets the tool's own error, as through ``turn.call_tool``."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _domains import DESK

import pytest_sandtable as st
from pytest_sandtable.serve import serve_world

TASK = """\
tasks:
  - id: fair
    user: { opening: "MC 100101 here. Book L-1001 at 2100, please." }
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
"""

JSON = {"content-type": "application/json"}
MIB = 1024 * 1024


@pytest.fixture
def desk(tmp_path: Path) -> st.Domain:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DESK + TASK, encoding="utf-8")
    return st.load_domain(path)


def served(domain: st.Domain, agent: Any) -> st.TrialResult:
    return st.run_trial(domain, "fair", agent, st.ScriptedUser(), serve=serve_world, trial_timeout=60)


def answer(r: httpx.Response) -> tuple[int, Any]:
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def test_the_urls_hold_a_secret_of_each_trial(desk: st.Domain) -> None:
    urls: list[tuple[str | None, str | None]] = []

    def agent(turn: st.Turn) -> str:
        urls.append((turn.tools_url, turn.mcp_url))
        return "Hello."

    served(desk, agent)
    served(desk, agent)
    shape = re.compile(r"http://127\.0\.0\.1:\d+/t/[A-Za-z0-9_-]{22}/(tools|mcp)")
    for tools_url, mcp_url in urls:
        assert tools_url is not None and mcp_url is not None
        assert shape.fullmatch(tools_url) and shape.fullmatch(mcp_url), (tools_url, mcp_url)
        assert mcp_url == tools_url[: -len("/tools")] + "/mcp"
    assert urls[0][0].rpartition("/t/")[2] != urls[1][0].rpartition("/t/")[2]  # type: ignore[union-attr]


def test_only_the_agent_may_call_the_tools(desk: st.Domain) -> None:
    seen: dict[str, tuple[int, Any]] = {}

    def agent(turn: st.Turn) -> str:
        assert turn.tools_url is not None and turn.mcp_url is not None
        tools = turn.tools_url
        port = tools.split(":")[2].split("/")[0]
        root = f"http://127.0.0.1:{port}"
        args = json.dumps({"load_id": "L-1001", "rate": 2100})
        book = f"{tools}/book_load"
        # a page's simple cross-origin POST: text/plain, or no Content-Type at all
        seen["text/plain"] = answer(httpx.post(book, content=args, headers={"content-type": "text/plain"}))
        seen["no type"] = answer(httpx.post(book, content=args.encode()))
        # a page that reads the answer: its Origin; a DNS-rebinding page: its Host
        seen["origin"] = answer(httpx.post(book, content=args, headers={**JSON, "origin": "http://shop.example"}))
        seen["other port"] = answer(httpx.post(book, content=args, headers={**JSON, "origin": "http://127.0.0.1:1"}))
        seen["host"] = answer(httpx.post(book, content=args, headers={**JSON, "host": f"rebind.example:{port}"}))
        seen["mcp host"] = answer(httpx.post(turn.mcp_url, content="{}", headers={**JSON, "host": "rebind.example"}))
        # a process that guesses: the port alone, or a wrong token
        seen["no token"] = answer(httpx.post(f"{root}/tools/book_load", content=args, headers=JSON))
        seen["guessed"] = answer(httpx.post(f"{root}/t/AAAAAAAAAAAAAAAAAAAAAA/tools/book_load", content=args,
                                            headers=JSON))
        seen["openapi"] = answer(httpx.get(f"{root}/openapi.json"))
        seen["mcp"] = answer(httpx.post(f"{root}/mcp", content="{}", headers=JSON))
        # the agent itself: its own origin is fine
        seen["agent"] = answer(httpx.post(f"{tools}/verify_carrier", json={"mc_number": "100101"},
                                          headers={"origin": root}))
        return "Sorry."

    result = served(desk, agent)
    media = "the request body must be JSON sent as Content-Type: application/json, not "
    assert seen["text/plain"] == (415, {"error": 415, "message": media + "text/plain"})
    assert seen["no type"] == (415, {"error": 415, "message": media + "no Content-Type"})
    refused = "requests from the origin {!r} are refused: only the agent may call a trial's tools"
    assert seen["origin"] == (403, {"error": 403, "message": refused.format("http://shop.example")})
    assert seen["other port"] == (403, {"error": 403, "message": refused.format("http://127.0.0.1:1")})
    assert seen["host"][0] == 421 and re.fullmatch(
        r"the Host header 'rebind\.example:\d+' is not this server \(127\.0\.0\.1:\d+\)", seen["host"][1]["message"])
    assert seen["mcp host"][0] == 421
    not_found = (404, {"error": 404, "message": "not found: a trial's tools are at the URLs handed to its agent"})
    for key in ("no token", "guessed", "openapi", "mcp"):
        assert seen[key] == not_found, key
    assert seen["agent"][0] == 200, seen["agent"]
    # none of the refused requests ran: the call log holds the agent's call alone
    assert [(c["tool"], c["ok"]) for c in result.calls] == [("verify_carrier", True)]
    assert result.verdict == "failed"  # nothing was booked


def unfinished_post(url: str, head: dict[str, str], sent: int) -> tuple[int, Any]:
    """POST to ``url`` with headers ``head``, send ``sent`` bytes of a body in chunked
    encoding (``sent`` 0: none), and read the answer without ever finishing the body:
    a server that waited for the whole of it would never answer (a socket timeout)."""
    hostport, _, path = url.removeprefix("http://").partition("/")
    host, _, port = hostport.partition(":")
    lines = [f"POST /{path} HTTP/1.1", f"Host: {hostport}", "Content-Type: application/json",
             *(f"{k}: {v}" for k, v in head.items())]
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        chunk = b"x" * MIB
        for _ in range(sent // MIB):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
            more = sock.recv(65536)
            if not more:
                break
            data += more
    status = int(data.split(b" ", 2)[1])
    body = data.partition(b"\r\n\r\n")[2]
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode()


def _length(data: bytes) -> int:
    found = re.search(rb"(?im)^content-length: *(\d+)", data.partition(b"\r\n\r\n")[0])
    return int(found.group(1)) if found else 0


def test_a_body_over_the_limit_gets_413_before_it_is_read_and_the_trial_goes_on(desk: st.Domain) -> None:
    seen: dict[str, Any] = {}

    def lazy(total: int) -> Iterator[bytes]:
        """A JSON body of ``total`` bytes, made a MiB at a time as the client sends it."""
        yield b'{"load_id": "'
        for _ in range(total // MIB):
            yield b"x" * MIB
        yield b'"}'

    def agent(turn: st.Turn) -> str:
        book = f"{turn.tools_url}/book_load"
        # declared: refused by its Content-Length, before a byte of it is read
        seen["declared"] = unfinished_post(book, {"Content-Length": str(50 * MIB)}, 0)
        # chunked: counted as it streams in, refused once past the limit
        seen["chunked"] = unfinished_post(book, {"Transfer-Encoding": "chunked"}, 9 * MIB)
        seen["mcp"] = unfinished_post(str(turn.mcp_url), {"Content-Length": str(50 * MIB),
                                                          "Accept": "application/json, text/event-stream"}, 0)
        # a client that sends it all anyway (twelve of them crashed the process before)
        seen["httpx"] = [answer(httpx.post(book, content=lazy(16 * MIB), headers=JSON, timeout=30))
                         for _ in range(3)]
        seen["after"] = answer(httpx.post(book, json={"load_id": "L-1001", "rate": 2100}))
        return "Booked." if seen["after"][0] == 200 else "No."

    result = served(desk, agent)
    too_big = (413, {"error": 413, "message": "the request body is over 8,388,608 bytes"})
    assert seen["declared"] == too_big
    assert seen["chunked"] == too_big
    assert seen["mcp"] == too_big  # MCP's route reads its body as the REST routes do
    assert seen["httpx"] == [too_big] * 3
    assert seen["after"][0] == 200
    assert result.verdict == "passed", result.error
    assert [(c["tool"], c["ok"]) for c in result.calls] == [("book_load", True)]


def test_a_lone_surrogate_in_a_body_gets_the_tools_own_error(desk: st.Domain) -> None:
    seen: dict[str, Any] = {}

    def agent(turn: st.Turn) -> str:
        r = httpx.post(f"{turn.tools_url}/verify_carrier", content=b'{"mc_number": "\\ud800"}', headers=JSON)
        seen["served"] = (r.status_code, r.json())
        direct = turn.call_tool("verify_carrier", {"mc_number": "\ud800"})
        seen["direct"] = (direct.error, direct.message)
        return "Sorry."

    result = served(desk, agent)
    assert seen["served"] == (404, {"error": 404, "message": "carriers \ud800 not found"})
    assert seen["direct"] == (404, "carriers \ud800 not found")
    assert [(c["tool"], c["error"]["code"]) for c in result.calls] == [("verify_carrier", 404)] * 2
