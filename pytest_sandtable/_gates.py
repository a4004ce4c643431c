"""CI gates: decide a run's outcome from its summary.

Three gates, all read from the same summary the terminal and the reports show:

- ``--sandtable-fail-under PCT``: the highest pass^k computed (j = k) must be at
  least PCT percent;
- ``--sandtable-floor TAG=PCT`` (repeatable): the tag's pass^k must be at least PCT;
- critical tasks (``critical: true``): any trial of one that did not pass fails the run.

Errored trials never count as passes: pass^k leaves them out (they were not
graded), and with a gate set any errored trial fails the gate, so a run whose
measurement is incomplete never passes a gate.

This module is pure (no pytest objects, no I/O) except :func:`parse_floor`, which
raises :class:`pytest.UsageError` for a malformed ``--sandtable-floor`` value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from ._results import ERRORED, PASSED, TrialResult

__all__ = ["GateOutcome", "evaluate", "gate_is_set", "parse_fail_under", "parse_floor"]

PREFIX_FAILED = "sandtable gate failed: "
PREFIX_PASSED = "sandtable gate passed: "


@dataclass
class GateOutcome:
    """What the gates decided.

    ``passed`` is False when any gate (or a critical task) failed. ``lines`` holds
    one line per gate checked, each starting with ``sandtable gate passed:`` or
    ``sandtable gate failed:``, failures first. ``gate_set`` tells whether
    ``--sandtable-fail-under`` or a ``--sandtable-floor`` was given (only then does
    the gate decide the exit status).
    """

    passed: bool
    lines: list[str] = field(default_factory=list)
    gate_set: bool = False

    def to_dict(self, fail_under: float | None, floors: Mapping[str, float]) -> dict[str, Any]:
        """The ``gate`` object of results.json."""
        return {
            "set": self.gate_set,
            "passed": self.passed,
            "fail_under": fail_under,
            "floors": dict(floors),
            "lines": list(self.lines),
        }


def _num(x: float) -> str:
    """85.0 -> '85', 62.5 -> '62.5' (thresholds as the user typed them)."""
    return f"{x:g}"


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def parse_pct(raw: str, what: str) -> float:
    """A percentage 0..100 (a trailing % is allowed). Raises ValueError with a message."""
    text = raw.strip().removesuffix("%").strip()
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what}: expected a percentage from 0 to 100, got {raw!r}") from None
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise ValueError(f"{what}: expected a percentage from 0 to 100, got {raw!r}")
    return value


def parse_floor(s: str) -> tuple[str, float]:
    """Parse one ``--sandtable-floor`` value, ``TAG=PCT`` (e.g. ``booking=90``).

    Raises :class:`pytest.UsageError` with a message naming the option and the value.
    """
    tag, sep, raw = s.partition("=")
    tag = tag.strip()
    if not sep or not tag or not raw.strip():
        raise pytest.UsageError(f"--sandtable-floor: expected TAG=PCT, e.g. booking=90, got {s!r}")
    try:
        return tag, parse_pct(raw, f"--sandtable-floor {tag}")
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def parse_fail_under(value: float | str | None) -> float | None:
    """Check a ``--sandtable-fail-under`` value (0..100). Raises :class:`pytest.UsageError`."""
    if value is None:
        return None
    try:
        return parse_pct(str(value), "--sandtable-fail-under")
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def gate_is_set(fail_under: float | None, floors: Mapping[str, float]) -> bool:
    """True when a gate decides the exit status (fail-under or any floor given)."""
    return fail_under is not None or bool(floors)


def _top_j(summary: Mapping[str, Any]) -> str:
    """The j of 'the highest pass^k computed': the run's k (the largest j when k is missing)."""
    k = summary.get("k")
    js = list(summary.get("pass_hat") or {})
    if k is not None and str(k) in js:
        return str(k)
    return max(js, key=int) if js else str(k or 1)


def _compare(
    label: str, value: float | None, threshold: float, gate: str, j: str, lines_ok: list[str], lines_bad: list[str]
) -> None:
    """One threshold gate; `gate` is how the user wrote it, e.g. '--sandtable-fail-under 85%'."""
    if value is None:
        lines_bad.append(f"{PREFIX_FAILED}{label}pass^{j} is n/a (no task has {j} graded trials), so {gate} is not met")
        return
    # compare in percent, rounded, so 0.875 * 100 is 87.5 and not 87.49999999999999
    got = round(value * 100, 9)
    if got < threshold:
        lines_bad.append(
            f"{PREFIX_FAILED}{label}pass^{j} {_pct(value)} is below {gate} by {threshold - got:.1f} points"
        )
    else:
        lines_ok.append(f"{PREFIX_PASSED}{label}pass^{j} {_pct(value)} meets {gate}")


def evaluate(
    summary: Mapping[str, Any],
    fail_under: float | None,
    floors: Mapping[str, float],
    trials: Iterable[TrialResult],
) -> GateOutcome:
    """Check every gate against a run's summary (from :func:`~pytest_sandtable._summary.summarize`)
    and its trials (for critical tasks and errored trials).

    Critical tasks are always checked. The fail-under and floor gates are checked
    when given; with either given, any errored trial also fails the outcome.
    """
    trials = list(trials)
    gate_set = gate_is_set(fail_under, floors)
    ok: list[str] = []
    bad: list[str] = []
    j = _top_j(summary)
    multi = len({t.domain for t in trials}) > 1

    def name(domain: str, task: str) -> str:
        return f"{domain}/{task}" if multi else task

    if fail_under is not None:
        _compare("", (summary.get("pass_hat") or {}).get(j), fail_under,
                 f"--sandtable-fail-under {_num(fail_under)}%", j, ok, bad)
    tags: Mapping[str, Any] = summary.get("tags") or {}
    for tag, threshold in floors.items():
        if tag not in tags:
            known = ", ".join(sorted(tags)) or "(none: no task has a tag)"
            bad.append(f"{PREFIX_FAILED}--sandtable-floor {tag}={_num(threshold)}: no task is tagged {tag!r}; "
                       f"the tags are {known}")
            continue
        _compare(f"tag {tag} ", (tags[tag].get("pass_hat") or {}).get(j), threshold,
                 f"--sandtable-floor {tag}={_num(threshold)}%", j, ok, bad)

    # critical tasks: any trial that did not pass (failed or errored) fails the run
    critical: dict[tuple[str, str], list[TrialResult]] = {}
    for t in trials:
        if t.critical:
            critical.setdefault((t.domain, t.task), []).append(t)
    for (domain, task), ts in critical.items():
        not_passed = sorted((t for t in ts if t.verdict != PASSED), key=lambda t: t.trial)
        if not not_passed:
            continue
        failed = [t for t in not_passed if t.verdict != ERRORED]
        errored = [t for t in not_passed if t.verdict == ERRORED]
        parts = []
        if failed:
            parts.append(f"failed {len(failed)} of {len(ts)} trials ({', '.join(f'[{t.trial}]' for t in failed)})")
        if errored:
            parts.append(f"errored in {len(errored)} ({', '.join(f'[{t.trial}]' for t in errored)}; "
                         f"errored trials never count as passes)")
        bad.append(f"{PREFIX_FAILED}critical task {name(domain, task)} {' and '.join(parts)}")

    if gate_set:
        errored_all = [t for t in trials if t.verdict == ERRORED and not t.critical]
        if errored_all:
            shown = ", ".join(f"{name(t.domain, t.task)}[{t.trial}]" for t in errored_all[:5])
            more = f" and {len(errored_all) - 5} more" if len(errored_all) > 5 else ""
            n = len(errored_all)
            bad.append(f"{PREFIX_FAILED}{n} trial{'s' if n != 1 else ''} errored and "
                       f"{'were' if n != 1 else 'was'} not graded (errored trials never count as passes): "
                       f"{shown}{more}")
    return GateOutcome(passed=not bad, lines=bad + ok, gate_set=gate_set)
