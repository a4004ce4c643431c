"""The one data type that flows from a trial to every report: :class:`TrialResult`.

Everything in it is JSON-compatible (dicts, lists, strings, numbers), so it
travels unchanged inside pytest-xdist reports and into results.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

PASSED = "passed"
FAILED = "failed"
ERRORED = "errored"


@dataclass
class Check:
    kind: str  # invariant | state | called | not_called | reply | assert | runtime
    id: str
    passed: bool
    detail: str = ""
    # (issue 22) False for an expectation of a kind the task's `basis` leaves out: checked and
    # shown as "not counted", never in the verdict; results.json has the key only when False
    counted: bool = True


@dataclass
class Violation:
    invariant: str
    kind: str
    soft: bool
    detail: str
    turn: int
    call: int | None = None  # index into TrialResult.calls; None for what the agent said
    quote: str | None = None  # the policy sentence behind the rule (source.quote)


@dataclass
class TrialResult:
    domain: str
    task: str
    trial: int
    k: int
    seed: int
    verdict: str  # passed | failed | errored
    tags: list[str] = field(default_factory=list)
    critical: bool = False
    error: str | None = None  # why an errored trial errored
    ended_by: str = ""  # goal_met | impossible | handoff | script_end | reference_end | max_turns | agent_error | ...
    turns: int = 0
    agent: str = ""
    user: str = ""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    diff: dict[str, Any] = field(default_factory=lambda: {"created": [], "changed": []})
    usage: dict[str, Any] = field(default_factory=dict)
    latency: list[float] = field(default_factory=list)  # seconds per agent turn
    duration: float = 0.0
    location: str = ""  # file:line of the task
    # where the agent raised, when it did (its own frames; not ours)
    traceback: str | None = None
    # soft rule id -> {"tool": tool or None, "applied": its tool was attempted, "broken": violated}
    soft: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (schema 1.2) the task's tags its domain declares shared across domains; the others
    # are scored per domain when a run has several domains
    shared_tags: list[str] = field(default_factory=list)
    # (schema 1.2) drafted items nobody has accepted yet that this trial ran under:
    # {"kind": "task" | "rule", "id": ...}; any makes the run provisional
    pending: list[dict[str, str]] = field(default_factory=list)
    # (schema 1.2) who likely owns a failure: {"owner": "agent" | "task" | "user",
    # "evidence": why}; None for a trial that passed or errored
    attribution: dict[str, str] | None = None
    # every model call of the trial was replayed from a recording (--sandtable-record,
    # docs/recording.md): its usage is as recorded, and it cost nothing now
    replayed: bool = False

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    @property
    def failed_checks(self) -> list[Check]:
        """The failed checks that count (a check the task's `basis` leaves out never fails it)."""
        return [c for c in self.checks if not c.passed and c.counted]

    @property
    def uncounted_failed_checks(self) -> list[Check]:
        """The failed checks of kinds the task's `basis` leaves out (shown as "not counted")."""
        return [c for c in self.checks if not c.passed and not c.counted]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict. Shallow: it shares the (finished) trial's lists and
        dicts, so copy before mutating it."""
        d = dict(vars(self))  # its fields in their order, as __init__ set them...
        if tuple(d) != _FIELDS:  # ...unless something else was set on it: the fields alone
            d = {f: getattr(self, f) for f in _FIELDS}
        d["checks"] = [
            {"kind": c.kind, "id": c.id, "passed": c.passed, "detail": c.detail} if c.counted else dict(c.__dict__)
            for c in self.checks
        ]
        d["violations"] = [dict(v.__dict__) for v in self.violations]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialResult:
        kw = {k: v for k, v in d.items() if k in _FIELDS}
        kw["checks"] = [Check(**c) for c in d.get("checks", [])]
        kw["violations"] = [Violation(**v) for v in d.get("violations", [])]
        return cls(**kw)


_FIELDS = tuple(f.name for f in fields(TrialResult))
