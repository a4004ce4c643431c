"""OpenTelemetry export of a run's trials (``--sandtable-otel``, docs/telemetry.md).

``spans.py`` makes a finished trial's spans (the trial, its turns, its tool calls, its
model use) after the fact, from the trial's own recorded times; ``export.py`` collects
a run's spans and writes them as OTLP/JSON (``traces.json``) or sends them over
OTLP/HTTP. OpenTelemetry is an optional extra (``pytest-sandtable[otel]``): it is
imported only here, and only inside the functions that need it.
"""
