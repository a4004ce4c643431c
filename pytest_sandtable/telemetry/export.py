"""A run's spans, collected as its trials are recorded and exported at its end.

:class:`RunTelemetry` is made by the process that records the trials (the xdist
controller under ``-n``, from the trial dicts the workers send): :meth:`RunTelemetry.add`
makes a trial's spans (``spans.record_trial``), :meth:`RunTelemetry.finish` writes them
to ``traces.json`` in the run folder (OTLP/JSON: one resource, the spans) or sends them
to an OTLP/HTTP endpoint, and says in one line what went wrong, if anything: telemetry
is a report, never the run's end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from .spans import record_trial

__all__ = ["EXTRA_HINT", "MODES", "TRACES_FILE", "JsonTracer", "RunTelemetry", "TelemetryError",
           "check_available", "check_endpoint", "otlp_json", "traces_url"]

MODES = ("json", "otlp")
TRACES_FILE = "traces.json"
DEFAULT_ENDPOINT = "http://localhost:4318"  # the OTLP/HTTP exporter's own default
EXTRA_HINT = "needs the 'otel' extra: pip install 'pytest-sandtable[otel]'"
SCOPE = "pytest_sandtable"
_BATCH = 512  # spans per OTLP request


class TelemetryError(Exception):
    """An --sandtable-otel setting that cannot work (the extra missing, a bad endpoint)."""


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing
        return False


def check_available(mode: str) -> None:
    """Raise :class:`TelemetryError` when what ``mode`` needs is not installed."""
    needed = ["opentelemetry.sdk.trace"]
    if mode == "otlp":
        needed.append("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    if not all(_importable(m) for m in needed):
        raise TelemetryError(f"--sandtable-otel={mode} {EXTRA_HINT}")


def check_endpoint(url: str, source: str = "--sandtable-otel-endpoint") -> str:
    """``url`` stripped, when it is an http(s) URL with a host; else :class:`TelemetryError`
    naming where it came from (``source``)."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        ok = False
    if not ok:
        raise TelemetryError(f"{source}: {url!r} is not an http:// or https:// URL "
                             f"(an OTLP/HTTP collector, e.g. {DEFAULT_ENDPOINT})")
    return url


def traces_url(base: str) -> str:
    """The traces path of an OTLP/HTTP endpoint (``<base>/v1/traces``), unless given."""
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


class RunTelemetry:
    """The spans of a run's trials, made as each is recorded, kept until :meth:`finish`."""

    def __init__(self, mode: str, endpoint: str | None = None, *, exporter: Any = None,
                 secrets: Sequence[str] = (), agent: str = "", user: str = "", sender: Any = None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from .. import __version__

        self.mode = mode
        self.endpoint = endpoint  # the base URL; None: the exporter's own (its environment variables)
        self.secrets = secrets
        # otlp: the SDK SpanExporter the spans are sent with at finish; None: the OTLP/HTTP one
        self.sender = sender
        self.sides = {"agent": agent, "user": user}  # the run's specs, for a trial that names neither
        self.failed: str | None = None  # why a trial's spans could not be made (the first such trial)
        resource = Resource.create({"service.name": "pytest-sandtable", "service.version": __version__})
        # json: the spans made as OTLP/JSON straight away, each trial's kept as its encoded bytes
        # (the SDK's span objects cost most of a traced run: benchmarks/README.md, "Telemetry")
        self.json = JsonTracer(resource.attributes) if mode == "json" and exporter is None else None
        self.tracer: Any = self.json
        self.collected: Any = None
        self.provider: Any = None
        if self.json is None:
            # None: the spans are kept here and exported at finish; else (tests) each goes to it as it ends
            self.collected = InMemorySpanExporter() if exporter is None else None
            self.provider = TracerProvider(shutdown_on_exit=False, resource=resource)
            self.provider.add_span_processor(SimpleSpanProcessor(self.collected or exporter))
            self.tracer = self.provider.get_tracer(SCOPE, __version__)

    def add(self, trial: Mapping[str, Any], ended: float | None = None) -> None:
        """Make the spans of a recorded ``trial`` (a trial dict) that ended at ``ended``
        (seconds since the epoch; now if None or 0)."""
        if not trial.get("agent") or not trial.get("user"):
            trial = {**trial, **{k: v for k, v in self.sides.items() if v and not trial.get(k)}}
        try:
            record_trial(self.tracer, trial, round((ended or time.time()) * 1e9), self.secrets)
        except Exception as e:  # a report: a trial it cannot trace is said once, at the end
            if self.failed is None:
                which = f"{trial.get('domain')}/{trial.get('task')}[{trial.get('trial')}]"
                self.failed = f"{which}: {type(e).__name__}: {e}"
        finally:
            if self.json is not None:
                self.json.flush()  # the spans it ended, as the SDK's exporter keeps them

    def spans(self) -> tuple[Any, ...]:
        """The SDK spans kept (none under ``json``, which keeps them as OTLP/JSON)."""
        return self.collected.get_finished_spans() if self.collected is not None else ()

    def finish(self, out_dir: Path | None) -> list[str]:
        """Write or send the collected spans; the lines to show (none when all went well,
        and a line saying where they went)."""
        lines = []
        if self.failed is not None:
            lines.append(f"sandtable: telemetry: a trial's spans could not be made: {self.failed}")
        if self.json is not None:
            lines.append(self._write(self.json.document, self.json.count, out_dir))
            return lines
        spans = self.spans()
        try:
            if self.mode == "json":
                lines.append(self._write(lambda: orjson.dumps(otlp_json(spans)), len(spans), out_dir))
            else:
                lines.append(self._send(spans))
        finally:
            self.provider.shutdown()
        return lines

    def _write(self, document: Callable[[], bytes], count: int, out_dir: Path | None) -> str:
        from ..domain.files import write_atomic

        if out_dir is None:
            return f"sandtable: telemetry: {TRACES_FILE} not written: the run folder was not written"
        path = out_dir / TRACES_FILE
        try:
            write_atomic(path, document())
        except (OSError, ValueError, TypeError) as e:  # orjson.JSONEncodeError is a TypeError
            return f"sandtable: telemetry: could not write {path}: {e}"
        return f"sandtable: telemetry: {count:,} spans in {TRACES_FILE}"

    def _send(self, spans: Sequence[Any]) -> str:
        from opentelemetry.sdk.trace.export import SpanExportResult

        from ..report.results_json import safe_url

        url = traces_url(self.endpoint or DEFAULT_ENDPOINT)
        shown = safe_url(url)
        quiet = logging.getLogger("opentelemetry.exporter.otlp")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL + 1)  # its retries' warnings: our one line says it
        try:
            exporter = self.sender
            if exporter is None:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                    OTLPSpanExporter,
                )

                exporter = OTLPSpanExporter(endpoint=url, timeout=10)
            try:
                sent = 0
                for batch in _batches(spans):
                    if exporter.export(batch) is not SpanExportResult.SUCCESS:
                        return (f"sandtable: telemetry: could not send spans to {shown} "
                                f"({sent:,} of {len(spans):,} sent): the collector refused them or is not there")
                    sent += len(batch)
            finally:
                exporter.shutdown()
        except Exception as e:  # an exporter that raises: one line, never the run's end
            return f"sandtable: telemetry: could not send spans to {shown}: {type(e).__name__}: {e}"
        finally:
            quiet.setLevel(level)
        return f"sandtable: telemetry: {len(spans):,} spans sent to {shown}"


def _batches(spans: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(spans), _BATCH):
        yield spans[i:i + _BATCH]


# -- OTLP/JSON (the protobuf messages' JSON mapping: ids as hex, 64-bit integers as strings) --

# The SDK's default span limits (``SpanLimits``), which the spans made through it meet: of
# more events or attributes, the last this many are kept (events) or the first (attributes).
_MAX_EVENTS = 128
_MAX_ATTRIBUTES = 128


def _bounded(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    return attributes if len(attributes) <= _MAX_ATTRIBUTES else dict(list(attributes.items())[:_MAX_ATTRIBUTES])


class _JsonSpan:
    """A span of :class:`JsonTracer`: what ``record_trial`` calls on an SDK span
    (``add_event``, an error status, ``end``), kept as its OTLP/JSON form."""

    __slots__ = ("attributes", "events", "ids", "name", "parent", "start", "status", "tracer")

    def __init__(self, tracer: JsonTracer, name: str, ids: tuple[str, str], parent: str | None, start: int,
                 attributes: Mapping[str, Any]) -> None:
        self.tracer, self.name, self.ids, self.parent, self.start = tracer, name, ids, parent, start
        self.attributes = _kvs(_bounded(attributes))
        self.events: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {"code": 0}

    def add_event(self, name: str, attributes: Mapping[str, Any], timestamp: int) -> None:
        self.events.append({"timeUnixNano": str(timestamp), "name": name, "attributes": _kvs(_bounded(attributes))})
        if len(self.events) > _MAX_EVENTS:
            del self.events[0]

    def set_error(self, message: str) -> None:
        self.status = {"code": _STATUS["ERROR"], "message": message} if message else {"code": _STATUS["ERROR"]}

    def end(self, end_time: int) -> None:
        d: dict[str, Any] = {
            "traceId": self.ids[0],
            "spanId": self.ids[1],
            "name": self.name,
            "kind": _KIND["INTERNAL"],
            "startTimeUnixNano": str(self.start),
            "endTimeUnixNano": str(end_time),
            "attributes": self.attributes,
        }
        if self.parent is not None:
            d["parentSpanId"] = self.parent
        if self.events:
            d["events"] = self.events
        d["status"] = self.status
        self.tracer.ended.append(d)


class JsonTracer:
    """The tracer ``record_trial`` makes a trial's spans with under ``--sandtable-otel=json``:
    each span straight into the OTLP/JSON that :func:`otlp_json` makes of the SDK's spans
    (the same keys in the same order, random ids as the SDK's default generator draws them,
    its default span limits), a finished trial's spans kept as their encoded bytes. The
    SDK's span objects, their attribute checks and their conversion cost most of a traced
    run; this makes the same document without them (tests/test_telemetry.py compares the
    two)."""

    def __init__(self, resource: Mapping[str, Any]) -> None:
        import random

        from .. import __version__

        self._bits = random.getrandbits
        self.resource = dict(resource)
        self.version = __version__
        self.ended: list[dict[str, Any]] = []  # the spans ended since the last flush
        self.chunks: list[bytes] = []  # per trial, its spans encoded, without the brackets
        self.count = 0

    def _id(self, bits: int) -> int:
        value = 0
        while value == 0:  # the SDK's RandomIdGenerator: never the invalid id 0
            value = self._bits(bits)
        return value

    def start_span(self, name: str, context: Any = None, start_time: int = 0,
                   attributes: Mapping[str, Any] | None = None) -> _JsonSpan:
        parent: _JsonSpan | None = context
        trace_id = parent.ids[0] if parent is not None else f"{self._id(128):032x}"
        return _JsonSpan(self, name, (trace_id, f"{self._id(64):016x}"), parent.ids[1] if parent is not None else None,
                         start_time, attributes or {})

    def context_of(self, span: _JsonSpan) -> _JsonSpan:
        return span

    def flush(self) -> None:
        if self.ended:
            self.chunks.append(orjson.dumps(self.ended)[1:-1])
            self.count += len(self.ended)
            self.ended = []

    def document(self) -> bytes:
        """The whole ``ExportTraceServiceRequest``, as :func:`otlp_json` and orjson make it."""
        self.flush()
        if not self.count:
            return orjson.dumps(otlp_json(()))
        head = orjson.dumps({"resourceSpans": [{
            "resource": {"attributes": _kvs(self.resource)},
            "scopeSpans": [{"scope": {"name": SCOPE, "version": self.version}, "spans": []}],
        }]})
        cut = head.rindex(b"[]")
        return b"".join((head[:cut + 1], b",".join(self.chunks), head[cut + 1:]))

_KIND = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    """An OTLP ``ExportTraceServiceRequest`` in its JSON form: the spans (SDK
    ``ReadableSpan``\\ s) under one resource, by instrumentation scope."""
    resource: Any = spans[0].resource if spans else None
    scopes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for span in spans:
        scope = span.instrumentation_scope
        key = (scope.name if scope else SCOPE, (scope.version or "") if scope else "")
        scopes.setdefault(key, []).append(_span(span))
    return {"resourceSpans": [{
        "resource": {"attributes": _kvs(resource.attributes if resource is not None else {})},
        "scopeSpans": [{"scope": {"name": name, "version": version}, "spans": found}
                       for (name, version), found in scopes.items()],
    }]}


def _span(span: Any) -> dict[str, Any]:
    ctx = span.context
    d: dict[str, Any] = {
        "traceId": f"{ctx.trace_id:032x}",
        "spanId": f"{ctx.span_id:016x}",
        "name": span.name,
        "kind": _KIND.get(span.kind.name, 1),
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": _kvs(span.attributes or {}),
    }
    if span.parent is not None:
        d["parentSpanId"] = f"{span.parent.span_id:016x}"
    if span.events:
        d["events"] = [{"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _kvs(e.attributes or {})}
                       for e in span.events]
    status = {"code": _STATUS.get(span.status.status_code.name, 0)}
    if span.status.description:
        status["message"] = span.status.description
    d["status"] = status
    return d


def _kvs(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any(v)} for k, v in attributes.items()]


def _any(v: Any) -> dict[str, Any]:
    make = _BY_TYPE.get(type(v))  # the attributes' own types, by exact type: a span has thousands
    if make is not None:
        return make(v)
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_any(x) for x in v]}}
    return {"stringValue": str(v)}


_BY_TYPE: dict[type, Callable[[Any], dict[str, Any]]] = {
    str: lambda v: {"stringValue": v},
    bool: lambda v: {"boolValue": v},
    int: lambda v: {"intValue": str(v)},
    float: lambda v: {"doubleValue": v},
}
