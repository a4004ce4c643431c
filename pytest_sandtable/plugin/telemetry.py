"""--sandtable-otel in the run: the recording process's :class:`RunTelemetry`
(``telemetry.export``), fed each trial as it is recorded (plugin/artifacts.py), and its
outcome shown in one line at the run's end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import RunConfig

if TYPE_CHECKING:
    from ..telemetry.export import RunTelemetry


def run_telemetry(run: RunConfig, worker: bool) -> RunTelemetry | None:
    """The run's telemetry where trials are recorded (not on an xdist worker); None without
    --sandtable-otel."""
    if run.otel is None or worker:
        return None
    from ..report.safe import secret_values
    from ..telemetry.export import RunTelemetry

    return RunTelemetry(run.otel, run.otel_endpoint, secrets=secret_values(), agent=run.agent, user=run.user)


def ended_at(report: Any) -> float | None:
    """When the trial's test phase ended (seconds since the epoch), as its report says."""
    stop = getattr(report, "stop", 0)
    return float(stop) if isinstance(stop, (int, float)) and stop > 0 else None
