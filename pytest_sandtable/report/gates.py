"""CI gates: decide a run's outcome from its summary.

Four gates, all read from the same summary the terminal and the reports show:

- ``--sandtable-fail-under PCT``: the highest pass^k computed (j = k) must be at
  least PCT percent;
- ``--sandtable-floor TAG=PCT`` (repeatable): the tag's pass^k must be at least PCT;
- critical tasks (``critical: true``): any trial of one that did not pass fails the run,
  with or without a gate set (the verdict line says so when none is set);
- ``--sandtable-fail-on-regression``: the comparison with ``--sandtable-baseline`` must
  find no regression (its checks come from :mod:`.compare`, which the caller runs).

Errored trials never count as passes: pass^k leaves them out (they were not
graded), and with a gate set any errored trial fails the gate, so a run whose
measurement is incomplete never passes a gate. A domain file that did not load
(a collection error) always fails the outcome: its tasks are missing from every
figure, so the figures must never look like a pass.

The outcome is told as one verdict line first (``sandtable gate failed: ...`` or
``sandtable gate passed: ...``), then, when more than one thing was checked, one
line per check saying whether it passed and by how much.

This module is pure (no pytest objects, no I/O). :func:`parse_floor` and
:func:`parse_fail_under` raise :class:`GateError` for a bad value, naming the
option as the caller spells it (``--sandtable-floor`` under pytest, ``--floor``
for ``merge``); the shells turn it into a usage error or an exit code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.results import ERRORED, PASSED, TrialResult
from .fmt import fraction_as_percent, number, pct, plural, points
from .summary import find_tag

__all__ = [
    "GateCheck",
    "GateError",
    "GateOutcome",
    "collection_errors_line",
    "evaluate",
    "gate_is_set",
    "parse_fail_under",
    "parse_floor",
    "verdict_lines",
]

PREFIX_FAILED = "sandtable gate failed: "
PREFIX_PASSED = "sandtable gate passed: "
DETAIL_FAILED = "  failed: "
DETAIL_PASSED = "  passed: "

# the checks made whether or not a gate is set, and the rule each says with no gate set
RULE_CRITICAL = "critical tasks fail the run"
RULE_DOMAIN_FILES = "a domain file that did not load fails the run"
RULE_STOPPED_EARLY = "a run that stopped early fails"


@dataclass(frozen=True)
class GateCheck:
    """One thing the gate checked: whether it passed, and a sentence saying how."""

    passed: bool
    text: str
    # for a check made with no gate set (critical tasks, domain files that did not load, a
    # run that stopped early): the rule that makes it fail the run, which the verdict line
    # says (results.json's checks carry only passed and text)
    rule: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "text": self.text}


def verdict_lines(checks: Sequence[GateCheck], gate_set: bool = True) -> list[str]:
    """The lines the terminal prints for these checks: the verdict first, then (when
    there is more than one check) one line per check, failures first.

    The verdict is the first failure (``sandtable gate failed: pass^4 62.5% is below
    --sandtable-fail-under 85% by 22.5 points``, with ``(and N more failures)`` when
    there are more), or ``sandtable gate passed:`` and the one check, or ``all N gates met``.
    With no gate set, a failure says the rule that makes it fail the run all the same
    (``sandtable gate failed: critical tasks fail the run even with no gate set: critical
    task refund failed 1 of 2 trials ([1])``), as report.html does.
    """
    if not checks:
        return []
    bad = [c for c in checks if not c.passed]
    good = [c for c in checks if c.passed]
    if bad:
        more = len(bad) - 1
        rule = f"{bad[0].rule} even with no gate set: " if bad[0].rule and not gate_set else ""
        head = PREFIX_FAILED + rule + bad[0].text + (f" (and {plural(more, 'more failure')})" if more else "")
    elif len(good) == 1:
        head = PREFIX_PASSED + good[0].text
    else:
        head = f"{PREFIX_PASSED}all {len(good)} gates met"
    if len(checks) == 1:
        return [head]
    return [head] + [DETAIL_FAILED + c.text for c in bad] + [DETAIL_PASSED + c.text for c in good]


@dataclass
class GateOutcome:
    """What the gates decided.

    ``passed`` is False when any gate (or a critical task, or a domain file that did
    not load) failed. ``checks`` holds every check, failures first; ``lines`` the
    lines users see (see :func:`verdict_lines`): the verdict line, starting with
    ``sandtable gate passed:`` or ``sandtable gate failed:``, then one line per check
    when there are several. ``gate_set`` tells whether ``--sandtable-fail-under`` or
    a ``--sandtable-floor`` was given (only then does the gate decide the exit status).
    """

    passed: bool
    lines: list[str] = field(default_factory=list)
    gate_set: bool = False
    checks: list[GateCheck] = field(default_factory=list)

    def to_dict(self, fail_under: float | None, floors: Mapping[str, float]) -> dict[str, Any]:
        """The ``gate`` object of results.json."""
        return {
            "set": self.gate_set,
            "passed": self.passed,
            "fail_under": fail_under,
            "floors": dict(floors),
            "lines": list(self.lines),
            "checks": [c.to_dict() for c in self.checks],
        }


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


def _looks_like_a_fraction(value: float) -> bool:
    """0 < value <= 1: almost surely a fraction (0.85 for 85%), not a threshold of at most one percent."""
    return 0 < value <= 1


class GateError(ValueError):
    """A gate option's value is not usable; the message names the option."""


def parse_floor(s: str, option: str = "--sandtable-floor") -> tuple[str, float]:
    """Parse one floor value, ``TAG=PCT`` (e.g. ``booking=90``).

    A PCT above 0 and at most 1 is refused as a likely fraction, with a did-you-mean.
    Raises :class:`GateError` with a message naming ``option`` and the value.
    """
    tag, sep, raw = s.partition("=")
    tag = tag.strip()
    if not sep or not tag or not raw.strip():
        raise GateError(f"{option}: expected TAG=PCT, e.g. booking=90, got {s!r}")
    try:
        value = parse_pct(raw, f"{option} {tag}")
    except ValueError as e:
        raise GateError(str(e)) from None
    if _looks_like_a_fraction(value):
        raise GateError(f"{option} takes a percentage: did you mean {tag}={fraction_as_percent(value)}?")
    return tag, value


def parse_fail_under(value: float | str | None, option: str = "--sandtable-fail-under") -> float | None:
    """Check a fail-under value (0..100). A value above 0 and at most 1 is refused as
    a likely fraction (``0.85`` for 85%), with a did-you-mean; 0 is allowed. Raises
    :class:`GateError` naming ``option``."""
    if value is None:
        return None
    try:
        percent = parse_pct(str(value), option)
    except ValueError as e:
        raise GateError(str(e)) from None
    if _looks_like_a_fraction(percent):
        raise GateError(f"{option} takes a percentage: did you mean {fraction_as_percent(percent)}?")
    return percent


def gate_is_set(fail_under: float | None, floors: Mapping[str, float], regression: bool = False) -> bool:
    """True when a gate decides the exit status (fail-under, any floor, or
    ``--sandtable-fail-on-regression`` given)."""
    return fail_under is not None or bool(floors) or regression


def _top_j(summary: Mapping[str, Any]) -> str:
    """The j of 'the highest pass^k computed': the run's k (the largest j when k is missing)."""
    k = summary.get("k")
    js = list(summary.get("pass_hat") or {})
    if k is not None and str(k) in js:
        return str(k)
    return max(js, key=int) if js else str(k or 1)


def _compare(label: str, value: float | None, threshold: float, gate: str, j: str) -> GateCheck:
    """One threshold gate; `gate` is how the user wrote it, e.g. '--sandtable-fail-under 85%'."""
    if value is None:
        return GateCheck(False, f"{label}pass^{j} is n/a (no task has {j} graded trials), so {gate} is not met")
    # compare in percent, rounded, so 0.875 * 100 is 87.5 and not 87.49999999999999
    got = round(value * 100, 9)
    if got < threshold:
        return GateCheck(False, f"{label}pass^{j} {pct(value)} is below {gate} by {points(threshold - got)} points")
    if got == threshold:
        return GateCheck(True, f"{label}pass^{j} {pct(value)} meets {gate} exactly")
    spare = points(got - threshold)
    return GateCheck(True, f"{label}pass^{j} {pct(value)} meets {gate} with {spare} points to spare")


def evaluate(
    summary: Mapping[str, Any],
    fail_under: float | None,
    floors: Mapping[str, float],
    trials: Iterable[TrialResult],
    collection_errors: Iterable[Mapping[str, Any]] = (),
    stopped_early: str | None = None,
    regression: Sequence[GateCheck] | None = None,
) -> GateOutcome:
    """Check every gate against a run's summary (from :func:`~pytest_sandtable.report.summary.summarize`),
    its trials (for critical tasks and errored trials) and the domain files that did
    not load (``{path, message}``, see ``run.collection_errors`` in results.json).

    Critical tasks and domain files that did not load are always checked. The
    fail-under and floor gates are checked when given; with either given, any
    errored trial also fails the outcome. ``regression`` holds the checks of the
    comparison with a baseline (``--sandtable-fail-on-regression``, see
    :func:`~pytest_sandtable.report.compare.regression_checks`): given, they are part of
    the gate, and the gate is set.
    """
    trials = list(trials)
    gate_set = gate_is_set(fail_under, floors, regression is not None)
    checks: list[GateCheck] = []
    j = _top_j(summary)
    multi = len({t.domain for t in trials}) > 1

    def name(domain: str, task: str) -> str:
        return f"{domain}/{task}" if multi else task

    if stopped_early:
        checks.append(GateCheck(False, f"the run stopped early ({stopped_early}), so these results cover only "
                                       "the trials that ran", rule=RULE_STOPPED_EARLY))
    for err in collection_errors:
        checks.append(GateCheck(False, f"domain file {err.get('path', '?')} did not load (a collection error), "
                                       "so none of its tasks ran", rule=RULE_DOMAIN_FILES))

    if fail_under is not None:
        checks.append(_compare("", (summary.get("pass_hat") or {}).get(j), fail_under,
                               f"--sandtable-fail-under {number(fail_under)}%", j))
    tags: Mapping[str, Any] = summary.get("tags") or {}
    for tag, threshold in floors.items():
        key, scoped = find_tag(tags, tag)
        if key is None and scoped:
            checks.append(GateCheck(False, f"--sandtable-floor {tag}={number(threshold)}: tag {tag!r} is scored per "
                                           f"domain in this run: give one of {', '.join(scoped)}"))
            continue
        if key is None:
            known = ", ".join(sorted(tags)) or "(none: no task has a tag)"
            checks.append(GateCheck(False, f"--sandtable-floor {tag}={number(threshold)}: no task is tagged {tag!r}; "
                                           f"the tags are {known}"))
            continue
        checks.append(_compare(f"tag {key} ", (tags[key].get("pass_hat") or {}).get(j), threshold,
                               f"--sandtable-floor {tag}={number(threshold)}%", j))
    checks.extend(regression or ())

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
        checks.append(GateCheck(False, f"critical task {name(domain, task)} {' and '.join(parts)}",
                                rule=RULE_CRITICAL))

    if gate_set:
        errored_all = [t for t in trials if t.verdict == ERRORED and not t.critical]
        if errored_all:
            shown = ", ".join(f"{name(t.domain, t.task)}[{t.trial}]" for t in errored_all[:5])
            more = f" and {len(errored_all) - 5} more" if len(errored_all) > 5 else ""
            n = len(errored_all)
            checks.append(GateCheck(False, f"{plural(n, 'trial')} errored and "
                                           f"{'were' if n != 1 else 'was'} not graded (errored trials never count "
                                           f"as passes): {shown}{more}"))
    ordered = [c for c in checks if not c.passed] + [c for c in checks if c.passed]
    return GateOutcome(passed=all(c.passed for c in checks), lines=verdict_lines(ordered, gate_set),
                       gate_set=gate_set, checks=ordered)


def collection_errors_line(errors: list[dict[str, str]]) -> str:
    """``sandtable: 1 domain file did not load, so its tasks are not in these results: x.sandtable.yaml``."""
    n = len(errors)
    their = "their" if n != 1 else "its"
    return (f"sandtable: {plural(n, 'domain file')} did not load, so {their} tasks are not in these results: "
            f"{', '.join(c['path'] for c in errors)}")
