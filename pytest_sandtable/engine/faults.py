"""A task's faults and events in one trial (docs/spec.md, "Faults and events").

:class:`TrialFaults` counts the calls of each tool that reach it (valid arguments) and
says which fault, if any, the n-th one gets and which events follow it. A fault drawn by
``fraction`` is decided by a hash of the trial's seed, the fault and the call number, so
a rerun with the same ``--sandtable-seed`` (and a regrade, which replays the stored seed)
meets the same faults, whatever order trials run in.

A task without faults or events gets no :class:`TrialFaults` at all (``for_task``
returns None): its calls pay one ``is None`` test.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..domain.model import Event, Fault, Task
from .api import ToolResult
from .world import Conflict, NotFound, World

INVALID_ARGS = "invalid arguments for "
"""How the engine's message for a call refused for its arguments starts (such a call
never reaches the tool, so it is not counted)."""


class TrialFaults:
    """Which call of each tool this is, and what it meets."""

    def __init__(self, task: Task, seed: int) -> None:
        self.seed = seed
        self.faults: dict[str, list[Fault]] = {}
        self.events: dict[str, list[Event]] = {}
        for f in task.faults:
            self.faults.setdefault(f.tool, []).append(f)
        for e in task.events:
            self.events.setdefault(e.tool, []).append(e)
        self.counts: dict[str, int] = {}

    @classmethod
    def for_task(cls, task: Task, seed: int) -> TrialFaults | None:
        return cls(task, seed) if task.faults or task.events else None

    def count(self, tool: str) -> int:
        """Count one more call of ``tool`` that reaches it; its number, from 1."""
        n = self.counts.get(tool, 0) + 1
        self.counts[tool] = n
        return n

    def fault(self, tool: str, n: int) -> Fault | None:
        """The first listed fault of ``tool`` that takes its ``n``-th call."""
        for f in self.faults.get(tool, ()):
            if f.every or n in f.calls or (f.fraction is not None and self._drawn(f, n) < f.fraction):
                return f
        return None

    def _drawn(self, f: Fault, n: int) -> float:
        """A number in [0, 1) fixed by the trial's seed, the fault and the call number."""
        h = hashlib.sha256(f"{self.seed}\x1f{f.tool}\x1f{f.index}\x1f{n}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64

    def events_after(self, tool: str, n: int) -> list[Event]:
        return [e for e in self.events.get(tool, ()) if e.call == n]


def fault_error(fault: Fault) -> ToolResult:
    """The error the agent sees for a fault with a kind."""
    return ToolResult(False, error=fault.status, message=fault.message)


def fault_record(fault: Fault, landed: bool | None) -> dict[str, Any]:
    """The call's ``fault`` in results.json: which fault of the task (``fault``, from 1),
    its kind (None for latency alone), the latency, and for ``after_commit`` whether the
    tool's own run succeeded, its writes landing (``landed``)."""
    record: dict[str, Any] = {"fault": fault.index, "kind": fault.kind, "latency_ms": fault.latency_ms}
    if fault.kind == "rate_limit":
        record["retry_after"] = fault.retry_after
    if fault.after_commit:
        record["after_commit"] = True
        record["landed"] = bool(landed)
    return record


def apply_event(world: World, event: Event) -> str | None:
    """Make the event's change in the world; why it was skipped (its row gone, its key
    taken), or None when it was made."""
    s = event.spec
    try:
        if event.op == "update":
            world.update(s["table"], s["key"], s["set"])
        elif event.op == "create":
            world.create(s["table"], s["row"])
        else:
            world.delete(s["table"], s["key"])
    except (NotFound, Conflict) as e:
        return str(e)
    return None


def event_entry(event: Event, after_call: int, turn: int, skipped: str | None) -> dict[str, Any]:
    """The event's entry in the trial's transcript."""
    entry: dict[str, Any] = {"role": "event", "turn": turn, "after_call": after_call, "event": event.index,
                             "op": event.op, "table": event.spec["table"]}
    if "key" in event.spec:
        entry["key"] = event.spec["key"]
    if event.op in ("update", "create"):
        entry["values"] = dict(event.spec["set" if event.op == "update" else "row"])
    if skipped is not None:
        entry["skipped"] = skipped
    return entry


def counted(call: dict[str, Any]) -> bool:
    """Whether a call of the call log reached its tool (faults and events count those)."""
    error = call.get("error") or {}
    return not (error.get("code") == 400 and str(error.get("message", "")).startswith(INVALID_ARGS))
