"""--sandtable-otel (docs/telemetry.md): a trial's spans, checked with the SDK's in-memory
exporter; traces.json of a run, under xdist too; secrets; the missing extra; a bad
endpoint and a failing exporter, each one line."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pytest_sandtable as st
from pytest_sandtable.telemetry.export import RunTelemetry

sys.path.insert(0, str(Path(__file__).parent))
from _domains import DESK

TASKS = """\
tasks:
  - id: over-the-ceiling
    faults:
      - { tool: book_load, kind: timeout, calls: 1, after_commit: true }
    events:
      - after: { tool: verify_carrier, call: 1 }
        update: { table: carriers, key: "100101", set: { name: Blue Ridge Freight } }
    user:
      persona: A dispatcher at Blue Ridge Haulers.
      instructions: Book L-1001.
      opening: "MC 100101 here. Is L-1001 open?"
      script:
        - "Fine, book it."
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
"""

# the agent: verifies the carrier (with $DESK_ARG as the MC number when set), then books
# L-1001 above its ceiling; each turn records one model call of usage
AGENT = """\
import os


def agent(turn):
    n = turn.state.get("n", 0)
    turn.state["n"] = n + 1
    turn.usage.add("claude-sonnet-4-5", input_tokens=1200, output_tokens=80)
    if n == 0:
        turn.call_tool("verify_carrier", {"mc_number": os.environ.get("DESK_ARG", "100101")})
        return "Verified. 2,400?"
    turn.call_tool("book_load", {"load_id": "L-1001", "rate": 2400})
    return "Booked."


agent.inline = True
"""

SECRET = "sk-fictional-desk-0123456789abcdef"
EXPORTER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


def _has_exporter() -> bool:
    try:
        return importlib.util.find_spec(EXPORTER) is not None
    except ImportError:
        return False


@pytest.fixture
def desk(tmp_path: Path) -> st.Domain:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DESK + TASKS, encoding="utf-8")
    return st.load_domain(path)


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    """The agent the pytester runs plant, imported from its file."""
    path = tmp_path / "desk_otel.py"
    path.write_text(AGENT, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("desk_otel_unit", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.agent


def _project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    pytester.path.joinpath("sandtable.yaml").write_text(DESK + TASKS, encoding="utf-8")
    pytester.path.joinpath("desk_otel.py").write_text(AGENT, encoding="utf-8")
    return pytester


def _spans_of(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    (resource,) = doc["resourceSpans"]
    return [span for scope in resource["scopeSpans"] for span in scope["spans"]]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


# --------------------------------------------------------------------------- the span tree


def test_the_span_tree_of_a_trial(desk: st.Domain, agent: Any) -> None:
    trial = st.run_trial(desk, "over-the-ceiling", agent, st.ScriptedUser(), trial=2, k=3)
    memory = InMemorySpanExporter()
    telemetry = RunTelemetry("json", exporter=memory, agent="desk_otel:agent", user="scripted")
    ended = 1_780_000_000.0  # the trial's end, as its report says (seconds since the epoch)
    telemetry.add(trial.to_dict(), ended)
    spans = memory.get_finished_spans()
    by_name = {s.name: s for s in spans}
    root = by_name["sandtable.trial freight/over-the-ceiling[2]"]
    user0, agent1, user1, agent2 = sorted((s for s in spans if s.parent is not None and s.parent.span_id
                                           == root.context.span_id and not s.name.startswith("chat")),
                                          key=lambda s: s.start_time)
    verify, book = by_name["execute_tool verify_carrier"], by_name["execute_tool book_load"]
    chat = by_name["chat claude-sonnet-4-5"]
    depth = {root.context.span_id: 0, agent1.context.span_id: 1, agent2.context.span_id: 1}
    in_order = sorted(spans, key=lambda s: (s.start_time, depth.get(s.parent.span_id if s.parent else 0, -1)))
    assert [(s.name, s.parent.span_id if s.parent else None) for s in in_order if s is not chat] == [
        ("sandtable.trial freight/over-the-ceiling[2]", None),
        ("sandtable.user_turn", root.context.span_id),
        ("invoke_agent desk_otel:agent", root.context.span_id),
        ("execute_tool verify_carrier", agent1.context.span_id),
        ("sandtable.user_turn", root.context.span_id),
        ("invoke_agent desk_otel:agent", root.context.span_id),
        ("execute_tool book_load", agent2.context.span_id),
    ]
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert dict(root.attributes) == {
        "sandtable.domain": "freight", "sandtable.task": "over-the-ceiling", "sandtable.trial": 2, "sandtable.k": 3,
        "sandtable.seed": trial.seed, "sandtable.verdict": "failed", "sandtable.failed_checks": ("rate-ceiling",),
        "sandtable.agent": "desk_otel:agent", "sandtable.user": "scripted", "sandtable.ended_by": trial.ended_by,
        "sandtable.turns": 2, "sandtable.tags": (), "sandtable.critical": False, "sandtable.replayed": False,
        "gen_ai.agent.name": "desk_otel:agent", "gen_ai.usage.input_tokens": 2400,
        "gen_ai.usage.output_tokens": 160, "sandtable.user.usage.input_tokens": 0,
        "sandtable.user.usage.output_tokens": 0,
    }
    assert root.status.status_code.name == "ERROR" and root.status.description == "failed: rate-ceiling"
    assert [(e.name, dict(e.attributes)["sandtable.check.id"], dict(e.attributes)["sandtable.check.passed"])
            for e in root.events] == [("sandtable.check", c.id, c.passed) for c in trial.checks]
    assert dict(user0.attributes) == {"sandtable.turn": 0, "sandtable.user": "scripted",
                                      "sandtable.text": "MC 100101 here. Is L-1001 open?"}
    assert dict(agent2.attributes) == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "desk_otel:agent",
                                       "sandtable.turn": 2, "sandtable.text": "Booked."}
    assert dict(verify.attributes) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "verify_carrier", "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call-0", "gen_ai.tool.call.arguments": '{"mc_number": "100101"}',
        "sandtable.call.index": 0, "sandtable.tool.ok": True, "sandtable.time.estimated": True,
    }
    assert [(e.name, dict(e.attributes)) for e in verify.events] == [
        ("sandtable.event", {"sandtable.event.index": 1, "sandtable.event.op": "update",
                             "sandtable.event.table": "carriers", "sandtable.event.key": "100101"})]
    assert verify.status.status_code.name == "UNSET"
    book_attrs = dict(book.attributes)
    assert (book_attrs["sandtable.tool.ok"], book_attrs["error.type"]) == (False, "504")
    assert book.status.status_code.name == "ERROR"
    assert [(e.name, dict(e.attributes)) for e in book.events] == [
        ("sandtable.rule", {"sandtable.rule.id": "rate-ceiling", "sandtable.rule.kind": "limit",
                            "sandtable.rule.soft": False, "sandtable.rule.passed": False,
                            "sandtable.rule.detail": trial.violations[0].detail}),
        ("sandtable.fault", {"sandtable.fault.index": 1, "sandtable.fault.kind": "timeout",
                             "sandtable.fault.latency_ms": 0, "sandtable.fault.landed": True}),
    ]
    assert dict(chat.attributes) == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.usage.input_tokens": 2400, "gen_ai.usage.output_tokens": 160,
        "gen_ai.usage.cache_read.input_tokens": 0, "gen_ai.usage.cache_creation.input_tokens": 0,
        "sandtable.side": "agent", "sandtable.model.calls": 2,
    }
    # times: the trial's own, every span within it, the agent turns as long as their latency
    end = round(ended * 1e9)
    assert (root.start_time, root.end_time) == (end - round(trial.duration * 1e9), end)
    for span in spans:
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time, span.name
        for event in span.events:
            assert span.start_time <= event.timestamp <= span.end_time, (span.name, event.name)
    assert [s.end_time - s.start_time for s in (agent1, agent2)] == [round(x * 1e9) for x in trial.latency]
    assert user0.end_time == agent1.start_time and agent1.end_time <= user1.start_time
    assert verify.start_time == agent1.start_time and book.end_time == agent2.end_time


def _without_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with each trace and span id replaced by its order of first use."""
    names: dict[str, str] = {}

    def rename(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: names.setdefault(v, f"id{len(names)}") if k in ("traceId", "spanId", "parentSpanId")
                    else rename(v) for k, v in x.items()}
        return [rename(v) for v in x] if isinstance(x, list) else x

    return rename(doc)


def test_json_mode_writes_the_document_the_sdks_spans_make(desk: st.Domain, agent: Any, tmp_path: Path) -> None:
    """--sandtable-otel=json makes its spans without the SDK's span objects
    (export.JsonTracer): the same traces.json the SDK's spans gave, ids aside; a trial
    with more checks than the SDK keeps events of (128) included, and an empty run."""
    trials = [st.run_trial(desk, "over-the-ceiling", agent, st.ScriptedUser(), trial=i, k=2).to_dict()
              for i in (1, 2)]
    crowded = dict(trials[1], checks=[{"kind": "state", "id": f"c{i}", "passed": i % 2 == 0, "detail": "d"}
                                      for i in range(140)])
    for n, batch in enumerate(([], [*trials, crowded])):
        memory = InMemorySpanExporter()
        through_sdk = RunTelemetry("json", exporter=memory, agent="desk_otel:agent", user="scripted")
        direct = RunTelemetry("json", agent="desk_otel:agent", user="scripted")
        assert direct.json is not None and through_sdk.json is None
        for i, trial in enumerate(batch):
            through_sdk.add(trial, 1_780_000_000.0 + i)
            direct.add(trial, 1_780_000_000.0 + i)
        (tmp_path / str(n)).mkdir()
        assert direct.finish(tmp_path / str(n)) == [f"sandtable: telemetry: {len(memory.get_finished_spans())} "
                                                    f"spans in traces.json"]
        from pytest_sandtable.telemetry.export import otlp_json

        wanted = json.loads(json.dumps(otlp_json(memory.get_finished_spans())))
        written = json.loads((tmp_path / str(n) / "traces.json").read_text(encoding="utf-8"))
        assert _without_ids(written) == _without_ids(wanted)
    spans = _spans_of(tmp_path / "1" / "traces.json")
    assert len({s["traceId"] for s in spans}) == 3  # a trace per trial
    assert max(len(s.get("events", ())) for s in spans) == 128


def test_a_secret_in_a_tool_argument_never_reaches_a_span(desk: st.Domain, agent: Any) -> None:
    trial = st.run_trial(desk, "over-the-ceiling", agent, st.ScriptedUser()).to_dict()
    trial["calls"][0]["args"] = {"mc_number": SECRET, "note": "x" * 50_000}
    trial["transcript"][0]["text"] = f"my key is {SECRET}"
    memory = InMemorySpanExporter()
    RunTelemetry("json", exporter=memory, secrets=[SECRET]).add(trial, 1_780_000_000.0)
    shown = json.dumps([json.loads(s.to_json()) for s in memory.get_finished_spans()])
    assert SECRET not in shown and SECRET[:12] not in shown
    (verify,) = [s for s in memory.get_finished_spans() if s.name == "execute_tool verify_carrier"]
    arguments = dict(verify.attributes)["gen_ai.tool.call.arguments"]
    assert arguments.startswith('{"mc_number": "[redacted]", "note": "xxx')
    assert arguments.endswith("… [clipped: 50,039 characters]") and len(arguments) == 1_000


def test_an_errored_trial_is_an_error_span_saying_why(desk: st.Domain, agent: Any) -> None:
    trial = st.run_trial(desk, "over-the-ceiling", agent, st.ScriptedUser()).to_dict()
    why = "the domain failed running book_load: KeyError: 'rate'"
    trial.update(verdict="errored", error=why)
    memory = InMemorySpanExporter()
    RunTelemetry("json", exporter=memory).add(trial, 1_780_000_000.0)
    (root,) = [s for s in memory.get_finished_spans() if s.parent is None]
    assert (root.status.status_code.name, root.status.description) == ("ERROR", f"errored: {why}")
    assert dict(root.attributes)["sandtable.error"] == why


# --------------------------------------------------------------------------- a run's traces.json


def test_a_run_writes_its_spans_to_traces_json_without_a_secret(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(pytester)
    monkeypatch.setenv("DESK_API_KEY", SECRET)
    monkeypatch.setenv("DESK_ARG", SECRET)
    result = project.runpytest("-p", "no:cacheprovider", "--sandtable-agent=desk_otel:agent",
                               "--sandtable-otel=json", "--sandtable-out=out")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["sandtable: results in out*", "sandtable: telemetry: 8 spans in traces.json"])
    text = (project.path / "out" / "traces.json").read_text(encoding="utf-8")
    assert SECRET not in text and "[redacted]" in text
    spans = _spans_of(project.path / "out" / "traces.json")
    (root,) = [s for s in spans if "parentSpanId" not in s]
    assert _attrs(root)["sandtable.agent"] == "desk_otel:agent"
    assert root["status"] == {"code": 2, "message": "failed: rate-ceiling"}
    assert root["kind"] == 1 and len(root["traceId"]) == 32 and len(root["spanId"]) == 16


def test_under_xdist_the_controller_writes_every_trials_spans(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "xdist", "-n", "2", "--sandtable-k=3",
                                          "--sandtable-agent=desk_otel:agent", "--sandtable-otel=json",
                                          "--sandtable-out=out")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["sandtable: telemetry: 24 spans in traces.json"])
    spans = _spans_of(project.path / "out" / "traces.json")
    roots = sorted(s["name"] for s in spans if "parentSpanId" not in s)
    assert roots == [f"sandtable.trial freight/over-the-ceiling[{i}]" for i in (1, 2, 3)]
    ids = {s["spanId"] for s in spans}
    assert all(s["parentSpanId"] in ids for s in spans if "parentSpanId" in s)
    assert len({s["traceId"] for s in spans}) == 3


# --------------------------------------------------------------------------- the option's errors


@pytest.mark.skipif(_has_exporter(), reason="the OTLP exporter is installed here")
def test_otlp_without_the_extra_says_what_to_install(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest("-p", "no:cacheprovider", "--sandtable-otel=otlp")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines == [
        "ERROR: --sandtable-otel=otlp needs the 'otel' extra: pip install 'pytest-sandtable[otel]'", ""]


def test_a_bad_endpoint_is_one_line(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(pytester)
    result = project.runpytest("-p", "no:cacheprovider", "--sandtable-otel=otlp",
                               "--sandtable-otel-endpoint=localhost:4318")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines == [
        "ERROR: --sandtable-otel-endpoint: 'localhost:4318' is not an http:// or https:// URL "
        "(an OTLP/HTTP collector, e.g. http://localhost:4318)", ""]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector")
    result = project.runpytest("-p", "no:cacheprovider", "--sandtable-otel=otlp")
    assert result.stderr.lines[0] == ("ERROR: OTEL_EXPORTER_OTLP_ENDPOINT: 'collector' is not an http:// or "
                                      "https:// URL (an OTLP/HTTP collector, e.g. http://localhost:4318)")
    result = project.runpytest("-p", "no:cacheprovider", "--sandtable-otel=json",
                               "--sandtable-otel-endpoint=http://localhost:4318")
    assert result.stderr.lines[0] == "ERROR: --sandtable-otel-endpoint needs --sandtable-otel=otlp"


class _Refusing(SpanExporter):
    """A collector that is not there: every export fails (or raises, with ``why``)."""

    def __init__(self, why: Exception | None = None) -> None:
        self.why = why
        self.batches: list[int] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.batches.append(len(spans))
        if self.why is not None:
            raise self.why
        return SpanExportResult.FAILURE


def test_a_failing_exporter_is_one_line_never_the_runs_end(desk: st.Domain, agent: Any) -> None:
    trial = st.run_trial(desk, "over-the-ceiling", agent, st.ScriptedUser()).to_dict()
    refusing = _Refusing()
    telemetry = RunTelemetry("otlp", "http://127.0.0.1:9", sender=refusing)
    telemetry.add(trial, 1_780_000_000.0)
    assert telemetry.finish(None) == [
        "sandtable: telemetry: could not send spans to http://127.0.0.1:9/v1/traces (0 of 8 sent): "
        "the collector refused them or is not there"]
    assert refusing.batches == [8]  # tried once, not once a batch
    raising = RunTelemetry("otlp", "https://user:pw@collector.example/v1/traces",
                           sender=_Refusing(ConnectionError("connection refused")))
    raising.add(trial, 1_780_000_000.0)
    assert raising.finish(None) == [
        "sandtable: telemetry: could not send spans to https://collector.example/v1/traces: "
        "ConnectionError: connection refused"]


@pytest.mark.skipif(not _has_exporter(), reason="needs the 'otel' extra (opentelemetry-exporter-otlp-proto-http)")
def test_an_unreachable_collector_is_one_line(pytester: pytest.Pytester) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    project = _project(pytester)
    result = project.runpytest("-p", "no:cacheprovider", "--sandtable-agent=desk_otel:agent", "--sandtable-otel=otlp",
                               f"--sandtable-otel-endpoint=http://127.0.0.1:{port}")
    result.assert_outcomes(failed=1)
    lines = [line for line in result.stdout.lines if "telemetry" in line]
    assert len(lines) == 1 and lines[0].startswith(
        f"sandtable: telemetry: could not send spans to http://127.0.0.1:{port}/v1/traces")
