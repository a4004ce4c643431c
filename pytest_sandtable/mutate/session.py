"""``--sandtable-mutate``: the mutation run of a pytest session's domains, for its end.

The plugin hands over the domains whose trials ran, each with the ids of its tasks in
the run; :func:`mutate_run` mutates those tasks (:func:`~.run.mutate_domain`) and
replays the trivial-agent baselines (:mod:`.baselines`), and returns what the run's
end needs: the ``mutation`` object of results.json (docs/results.md), the terminal's
lines, and the gate's checks when ``--sandtable-mutate-fail-under`` or
``--sandtable-mutate-fail-on-weak`` are given. No model is called.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.model import Domain
from ..report.fmt import pct, plural
from ..report.gates import GateCheck
from ..report.safe import safe_text
from .baselines import Baselines, baselines
from .render import _expected, baseline_line, headline
from .run import ACCEPTED, EQUIVALENT, INVALID, KILLED, STATES, SURVIVED, DomainReport, mutate_domain, score_of

__all__ = ["MAX_SURVIVOR_LINES", "MutationRun", "mutate_run"]

MAX_SURVIVOR_LINES = 20  # survivors the terminal lists; every one is in results.json and report.html


@dataclass(frozen=True)
class Target:
    """One domain file of the run: its built domain, its path as results.json writes it,
    and the ids of its tasks that ran."""

    domain: Domain
    path: str
    tasks: Collection[str]


@dataclass
class MutationRun:
    doc: dict[str, Any]  # results.json's ``mutation``
    lines: list[str]  # the terminal's
    checks: list[GateCheck] = field(default_factory=list)  # the gate's, when a mutation gate is given


def _domain_doc(report: DomainReport, path: str, base: Baselines) -> dict[str, Any]:
    return {
        "domain": report.domain,
        "path": path,
        "counts": report.counts,
        "score": report.score,
        "weak_tasks": report.weak_tasks,
        "operators": [{"operator": op, "expected": ex, "counts": c} for op, ex, c in report.by_operator()],
        "tasks": [{"task": t.task, "counts": t.counts, "score": t.score, "weak": t.weak, "skipped": t.skipped}
                  for t in report.tasks],
        "survivors": [{"task": t.task, "id": m.id, "operator": m.operator, "expected": m.expected, "diff": m.diff,
                       "suggestion": m.suggestion or None}
                      for t in report.tasks for m in t.mutants if m.state == SURVIVED],
        "invalid": [{"task": t.task, "id": m.id, "reason": m.reason}
                    for t in report.tasks for m in t.mutants if m.state == INVALID],
        "decorative": report.decorative(),
        "problems": [{"line": p.line, "key": p.path, "message": p.message} for p in report.problems],
        "baselines": {"tasks": base.tasks, "do_nothing": list(base.do_nothing), "spam": list(base.spam),
                      "do_nothing_rate": base.do_nothing_rate, "spam_rate": base.spam_rate},
    }


def _totals(reports: Sequence[DomainReport]) -> dict[str, Any]:
    counts = {s: 0 for s in (*STATES, "generated")}
    for r in reports:
        for k, v in r.counts.items():
            counts[k] += v
    return {**counts, "score": score_of(counts), "weak_tasks": sum(len(r.weak_tasks) for r in reports)}


def _lines(report: DomainReport, base: Baselines) -> list[str]:
    """A domain's terminal lines: its headline, the baselines, the survivors (the first
    :data:`MAX_SURVIVOR_LINES`), what could not be mutated, the decorative checks."""
    out = [f"mutation {headline(report)}", f"  {baseline_line(base)}"]
    out += [f"  {p}" for p in report.problems]
    survivors = [(t.task, m) for t in report.tasks for m in t.mutants if m.state == SURVIVED]
    if survivors:
        out.append(f"  survived ({len(survivors)}):")
        out += [f"    {task}: {m.id} ({_expected(m.expected)}): {m.diff}; {m.suggestion}"
                for task, m in survivors[:MAX_SURVIVOR_LINES]]
        if len(survivors) > MAX_SURVIVOR_LINES:
            out.append(f"    ... and {len(survivors) - MAX_SURVIVOR_LINES} more (results.json, report.html)")
    skipped = [t for t in report.tasks if t.skipped is not None]
    if skipped:
        out.append(f"  not mutated ({len(skipped)}): " + "; ".join(f"{t.task}: {t.skipped}" for t in skipped))
    decorative = report.decorative()
    if decorative:
        out.append(f"  decorative checks, killed no mutant ({len(decorative)}): {', '.join(decorative)}")
    return out


def _checks(reports: Sequence[DomainReport], totals: dict[str, Any], fail_under: float | None,
            fail_on_weak: bool) -> list[GateCheck]:
    checks: list[GateCheck] = []
    for r in reports:
        if r.problems:
            checks.append(GateCheck(False, f"mutation of {r.domain} could not be checked: {r.problems[0].message}"))
    if fail_under is not None:
        gate = f"--sandtable-mutate-fail-under {fail_under:g}%"
        score = totals["score"]
        if score is None:
            checks.append(GateCheck(False, f"mutation score is n/a (no mutant was scored), so {gate} is not met"))
        else:
            got = round(score * 100, 9)
            if got < fail_under:
                checks.append(GateCheck(False, f"mutation score {pct(score)} is below {gate} by "
                                               f"{round(fail_under - got, 1):g} points"))
            else:
                checks.append(GateCheck(True, f"mutation score {pct(score)} meets {gate}"))
    if fail_on_weak:
        weak = [f"{r.domain}/{t}" if len(reports) > 1 else t for r in reports for t in r.weak_tasks]
        if weak:
            checks.append(GateCheck(False, f"--sandtable-mutate-fail-on-weak: {plural(len(weak), 'weak task')} "
                                           f"({', '.join(weak)})"))
        else:
            checks.append(GateCheck(True, "--sandtable-mutate-fail-on-weak: no weak task"))
    return checks


def mutate_run(targets: Sequence[Target], *, fail_under: float | None = None,
               fail_on_weak: bool = False) -> MutationRun:
    """Mutate each target's tasks of the run; see the module's docstring."""
    reports: list[DomainReport] = []
    domains: list[dict[str, Any]] = []
    lines: list[str] = []
    for target in targets:
        report = mutate_domain(target.domain, tasks=target.tasks)
        report.file = target.path  # as the run's other lines name it, relative to the root
        base = baselines(target.domain, target.tasks)
        reports.append(report)
        domains.append(_domain_doc(report, target.path, base))
        lines += _lines(report, base)
    totals = _totals(reports)
    if len(reports) > 1:
        scored = totals["generated"] - totals[INVALID] - totals[EQUIVALENT] - totals[ACCEPTED]
        lines.append(f"mutation, all {len(reports)} domains: score {pct(totals['score'])} "
                     f"({totals[KILLED]} killed of {scored} scored); {plural(totals['weak_tasks'], 'weak task')}")
    doc = {"domains": domains, "totals": totals, "fail_under": fail_under, "fail_on_weak": fail_on_weak}
    return MutationRun(doc, [safe_text(line) for line in lines], _checks(reports, totals, fail_under, fail_on_weak))
