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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from .spans import record_trial

__all__ = ["EXTRA_HINT", "MODES", "TRACES_FILE", "RunTelemetry", "TelemetryError", "check_available",
           "check_endpoint", "otlp_json", "traces_url"]

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
        # None: the spans are kept here and exported at finish; else (tests) each goes to it as it ends
        self.collected = InMemorySpanExporter() if exporter is None else None
        self.provider = TracerProvider(shutdown_on_exit=False, resource=Resource.create({
            "service.name": "pytest-sandtable", "service.version": __version__}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.collected or exporter))
        self.tracer = self.provider.get_tracer(SCOPE, __version__)
        self.failed: str | None = None  # why a trial's spans could not be made (the first such trial)

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

    def spans(self) -> tuple[Any, ...]:
        return self.collected.get_finished_spans() if self.collected is not None else ()

    def finish(self, out_dir: Path | None) -> list[str]:
        """Write or send the collected spans; the lines to show (none when all went well,
        and a line saying where they went)."""
        lines = []
        if self.failed is not None:
            lines.append(f"sandtable: telemetry: a trial's spans could not be made: {self.failed}")
        spans = self.spans()
        try:
            if self.mode == "json":
                lines.append(self._write(spans, out_dir))
            else:
                lines.append(self._send(spans))
        finally:
            self.provider.shutdown()
        return lines

    def _write(self, spans: Sequence[Any], out_dir: Path | None) -> str:
        from ..domain.files import write_atomic

        if out_dir is None:
            return f"sandtable: telemetry: {TRACES_FILE} not written: the run folder was not written"
        path = out_dir / TRACES_FILE
        try:
            data = orjson.dumps(otlp_json(spans))
            write_atomic(path, data)
        except (OSError, ValueError, TypeError) as e:  # orjson.JSONEncodeError is a TypeError
            return f"sandtable: telemetry: could not write {path}: {e}"
        return f"sandtable: telemetry: {len(spans):,} spans in {TRACES_FILE}"

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
