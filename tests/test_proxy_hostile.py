"""The model proxy against hostile requests and targets (issue 37, items 10 and 15): a
Content-Length that is not a number of bytes is a 400, never a traceback or a body read
to the connection's end; a chunked body is read, and past the cap refused with 413; a
request from a foreign Host or Origin is refused as the served world refuses it; an
answer carries one Server and one Date header; a target that trickles its answer, or
holds it, is cut off at the proxy's deadline with an error counted for the trial."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import openai
import pytest
from fakes import FakeAnthropic, FakeOpenAI, Trickle, openai_stream, openai_text

from pytest_sandtable.proxy import MAX_BODY, ModelProxy

BODY = json.dumps({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}).encode()


def raw(port: int, head: str, body: bytes = b"", *, half_close: bool = True) -> tuple[int, dict[str, list[str]],
                                                                                      bytes]:
    """Send ``head`` (the request line and headers, ``\\n`` for ``\\r\\n``) and ``body`` as they
    are; the answer's status, headers (lower-cased, every value) and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data:
                top, _, rest = data.partition(b"\r\n\r\n")
                length = [ln for ln in top.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if length and len(rest) >= int(length[0].split(b":")[1]):
                    break
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode().split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    return int(lines[0].split()[1]), headers, rest


def head(proxy: ModelProxy, path: str, *lines: str) -> str:
    return "\n".join([f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{proxy.port}", "Content-Type: application/json",
                      "Connection: close", *lines]) + "\n"


def message(body: bytes) -> str:
    return str(json.loads(body)["error"]["message"])


@pytest.mark.parametrize("length", ["-1", "abc", "12, 13", " +5"])
def test_a_content_length_that_is_not_a_number_of_bytes_is_a_400(length: str,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI([openai_text("never")]) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        path = trial.base_url("openai").removeprefix(proxy.url) + "/chat/completions"
        status, headers, body = raw(proxy.port, head(proxy, path, f"Content-Length: {length}"), BODY)
    assert status == 400
    assert message(body) == (f"sandtable model proxy: the Content-Length header {length.strip()!r} "
                             "is not a number of bytes")
    assert headers["connection"] == ["close"]
    assert srv.requests == []  # nothing was forwarded
    assert capfd.readouterr().err == ""  # no traceback


def test_two_content_lengths_that_differ_are_a_400() -> None:
    with FakeOpenAI([]) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        path = trial.base_url("openai").removeprefix(proxy.url) + "/chat/completions"
        status, _, body = raw(proxy.port, head(proxy, path, "Content-Length: 5", "Content-Length: 7"), BODY[:7])
    assert (status, message(body)) == (400, "sandtable model proxy: the Content-Length header '5', '7' "
                                            "is not a number of bytes")
    assert srv.requests == []


def test_a_chunked_body_is_forwarded_whole_and_past_the_cap_refused_with_413() -> None:
    with FakeOpenAI([openai_text("Shipped.")]) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        path = trial.base_url("openai").removeprefix(proxy.url) + "/chat/completions"
        chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, BODY[:10], len(BODY) - 10, BODY[10:])
        status, _, body = raw(proxy.port, head(proxy, path, "Transfer-Encoding: chunked"), chunks)
        assert (status, json.loads(body)["choices"][0]["message"]["content"]) == (200, "Shipped.")
        assert srv.bodies == [json.loads(BODY)]
        # one chunk that says it is past the cap: refused before a byte of it is read
        status, _, body = raw(proxy.port, head(proxy, path, "Transfer-Encoding: chunked"),
                              b"%x\r\n" % (MAX_BODY + 1), half_close=False)
        assert (status, message(body)) == (413, "sandtable model proxy: the request body is over "
                                                "33,554,432 bytes")
        # many chunks, together past it
        status, _, body = raw(proxy.port, head(proxy, path, "Transfer-Encoding: chunked"),
                              b"%x\r\n%s\r\n" % (1 << 20, b"x" * (1 << 20)) * 32 + b"1\r\n", half_close=False)
        assert status == 413
        status, _, body = raw(proxy.port, head(proxy, path, "Transfer-Encoding: chunked"), b"zz\r\n")
        assert (status, message(body)) == (400, "sandtable model proxy: the request's chunked body is malformed")
        status, _, body = raw(proxy.port, head(proxy, path, "Transfer-Encoding: chunked", "Content-Length: 4"),
                              b"4\r\nabcd\r\n0\r\n\r\n")
        assert (status, message(body)) == (400, "sandtable model proxy: the request has both a Content-Length "
                                                "and chunks (Transfer-Encoding: chunked)")
    assert len(srv.requests) == 1


def test_a_foreign_host_or_origin_is_refused_as_the_served_world_refuses_it() -> None:
    with FakeAnthropic([]) as srv, ModelProxy({"anthropic": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        url = trial.base_url("anthropic") + "/v1/messages"
        rebound = httpx.post(url, content=BODY, headers={"host": f"evil.example:{proxy.port}"})
        page = httpx.post(url, content=BODY, headers={"origin": "https://evil.example"})
        local = httpx.post(url, content=BODY, headers={"origin": f"http://127.0.0.1:{proxy.port}"})
    assert rebound.status_code == 421
    assert rebound.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": (
        f"sandtable model proxy: the Host header 'evil.example:{proxy.port}' is not this proxy "
        f"(127.0.0.1:{proxy.port})")}}
    assert page.status_code == 403
    assert page.json()["error"] == {"type": "permission_error", "message": (
        "sandtable model proxy: requests from the origin 'https://evil.example' are refused: only the run's "
        "agents may use the proxy")}
    assert local.status_code == 500  # the same origin passes: the fake, whose script is empty, answered
    assert len(srv.requests) == 1


@pytest.mark.parametrize("answer", [openai_text("Shipped."), openai_stream("It ships.")])
def test_an_answer_has_one_server_and_one_date_header(answer: Any) -> None:
    with FakeOpenAI([answer]) as srv, ModelProxy({"openai": srv.base_url}) as proxy:
        trial = proxy.open_trial("t")
        path = trial.base_url("openai").removeprefix(proxy.url) + "/chat/completions"
        status, headers, _ = raw(proxy.port, head(proxy, path, f"Content-Length: {len(BODY)}"), BODY)
    assert status == 200
    assert len(headers["server"]) == len(headers["date"]) == 1
    assert headers["server"][0].startswith("BaseHTTP/")  # the target's own, passed on


def test_a_target_that_trickles_its_answer_is_cut_off_at_the_deadline_and_counted() -> None:
    # a byte every 0.05 s: no read ever waits a second, the answer never ends
    with FakeOpenAI([Trickle(0.05)]) as srv, ModelProxy({"openai": srv.base_url}, timeout=1.0) as proxy:
        trial = proxy.open_trial("t")
        with pytest.raises(openai.InternalServerError) as late:
            client = openai.OpenAI(api_key="k", base_url=trial.base_url("openai"), max_retries=0, timeout=5)
            client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    said = f"http://{srv.host} did not finish its answer in 1 s (the model proxy's deadline): the answer was cut off"
    assert late.value.status_code == 504
    assert late.value.message == f"Error code: 504 - sandtable model proxy: {said}"
    assert trial.errors == [said]


def test_a_stream_that_trickles_is_cut_and_one_whose_trial_ended_is_cut_too() -> None:
    chunk = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[]}\n\n'

    with FakeOpenAI([Trickle(0.05, stream=chunk), Trickle(0.05, stream=chunk)]) as srv, \
            ModelProxy({"openai": srv.base_url}, timeout=1.0) as proxy:
        trial = proxy.open_trial("t")
        url = trial.base_url("openai") + "/chat/completions"
        with pytest.raises(httpx.RemoteProtocolError), httpx.stream("POST", url, content=BODY) as answer:
            assert answer.status_code == 200
            for n, _ in enumerate(answer.iter_raw()):
                assert n < 100, "the stream went on past the deadline"
        ended = proxy.open_trial("u")
        with pytest.raises(httpx.RemoteProtocolError), \
                httpx.stream("POST", ended.base_url("openai") + "/chat/completions", content=BODY) as answer:
            for n, _ in enumerate(answer.iter_raw()):
                if n == 2:
                    ended.close()
                assert n < 100, "the stream went on after its trial ended"
    assert trial.errors == [f"http://{srv.host} did not finish its answer in 1 s (the model proxy's deadline): "
                            "the answer was cut off"]
    assert ended.errors == [f"http://{srv.host} was still answering when the trial ended: the answer was cut off"]
