"""A small agent service speaking sandtable's HTTP step protocol (``sandtable-step/1``).

Standard library only. Run it, then point a run at it::

    python examples/http_agent_service.py --port 8787
    pytest example_domains/... --sandtable-agent=http://127.0.0.1:8787/step

It plays a deliberately simple, rule-based agent, to show the protocol rather than
to be clever (docs/http-protocol.md describes every field):

1. When the customer asks for a person (manager, human, supervisor...), it calls the
   domain's handoff tool if it has one (a tool whose name mentions ``transfer`` or
   ``human``).
2. When the customer's latest message contains a reference such as ``O-1001`` and the
   domain has a look-up tool taking exactly one required string parameter (``get_*``,
   ``find_*``, ``lookup_*`` preferred), it calls that tool with the reference.
3. In the step after its tool calls it reads ``tool_results`` and replies with what
   it found, or with the error.
4. Otherwise it asks for a reference number.

It keeps no per-trial memory of its own: what it needs between steps travels in the
protocol's ``state`` field, which the run posts back unchanged. It answers a repeated
step (same ``Idempotency-Key``) with the answer it gave the first time.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROTOCOL = "sandtable-step/1"
REFERENCE = re.compile(r"\b[A-Z]{1,4}-\d{2,8}\b")
PERSON = re.compile(r"\b(manager|human|person|supervisor|someone else)\b", re.IGNORECASE)
LOOKUP_PREFIXES = ("get_", "find_", "lookup_", "look_up_", "verify_")


def _lookup_tool(tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A tool taking exactly one required string parameter, look-up names first."""
    fits = []
    for tool in tools:
        schema = tool.get("input_schema") or {}
        required = schema.get("required") or []
        props = schema.get("properties") or {}
        if len(required) == 1 and (props.get(required[0]) or {}).get("type") == "string":
            fits.append(tool)
    fits.sort(key=lambda t: not str(t["name"]).startswith(LOOKUP_PREFIXES))
    return fits[0] if fits else None


def _handoff_tool(tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((t for t in tools if "transfer" in t["name"] or "human" in t["name"]), None)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(_describe(v) for v in value) or "nothing"
    return str(value)


def answer(step: dict[str, Any]) -> dict[str, Any]:
    """The service's answer to one step (a pure function of the request)."""
    tools: list[dict[str, Any]] = step.get("tools") or []
    messages: list[dict[str, str]] = step.get("messages") or []
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    results: list[dict[str, Any]] = step.get("tool_results") or []
    state = dict(step.get("state") or {})
    state["steps"] = state.get("steps", 0) + 1

    if results:
        lines = []
        for r in results:
            if r["ok"]:
                lines.append(f"{r['name']}: {_describe(r['result'])}")
            else:
                lines.append(f"{r['name']} failed: {r['error']['message']}")
        if any(r["ok"] and r["name"] == state.get("handoff") for r in results):
            return {"protocol": PROTOCOL, "reply": "I've passed you to a colleague, who will be with you shortly.",
                    "state": state}
        return {"protocol": PROTOCOL, "reply": "Here is what I found. " + " ".join(lines), "state": state}

    handoff = _handoff_tool(tools)
    if handoff is not None and PERSON.search(last):
        state["handoff"] = handoff["name"]
        params = (handoff.get("input_schema") or {}).get("properties") or {}
        args = {"reason": f"The customer asked for a person: {last}"} if "reason" in params else {}
        return {"protocol": PROTOCOL, "tool_calls": [{"id": "call_1", "name": handoff["name"], "arguments": args}],
                "state": state}

    ref = REFERENCE.search(last)
    lookup = _lookup_tool(tools)
    if ref and lookup is not None:
        param = lookup["input_schema"]["required"][0]
        return {"protocol": PROTOCOL,
                "tool_calls": [{"id": "call_1", "name": lookup["name"], "arguments": {param: ref.group(0)}}],
                "state": state}

    return {"protocol": PROTOCOL, "reply": "Happy to help. What is your order or reference number?", "state": state}


class StepHandler(BaseHTTPRequestHandler):
    """POST <any path>: one step of the protocol."""

    server_version = "sandtable-example-agent/1"
    server: StepServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: dict[str, Any] | bytes) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        key = self.headers.get("Idempotency-Key")
        with self.server.lock:
            cached = self.server.seen.get(key) if key else None
        if cached is not None:
            self._send(200, cached)
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            step = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(400, {"error": "the body is not JSON"})
            return
        if not isinstance(step, dict) or step.get("protocol") != PROTOCOL:
            got = step.get("protocol") if isinstance(step, dict) else None
            self._send(400, {"error": f"unsupported protocol {got!r}; this service speaks {PROTOCOL}"})
            return
        data = json.dumps(answer(step)).encode()
        if key:
            with self.server.lock:
                self.server.seen[key] = data
                while len(self.server.seen) > 10_000:
                    self.server.seen.popitem(last=False)
        self._send(200, data)


class StepServer(ThreadingHTTPServer):
    """The HTTP server, with the answers already given, by Idempotency-Key."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], verbose: bool = False) -> None:
        super().__init__(address, StepHandler)
        self.verbose = verbose
        self.seen: OrderedDict[str, bytes] = OrderedDict()
        self.lock = threading.Lock()


def make_server(host: str = "127.0.0.1", port: int = 8787, verbose: bool = False) -> StepServer:
    """The service, not yet serving (call ``serve_forever``). Port 0 picks a free port."""
    return StepServer((host, port), verbose)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, args.verbose)
    print(f"{PROTOCOL} agent listening on http://{args.host}:{server.server_port}/step (Ctrl-C to stop)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
