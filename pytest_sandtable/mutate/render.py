"""A :class:`~.run.DomainReport` as terminal lines (docs/mutate.md, "Reading the output")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from ..policy_coverage import coverage_lines
from ..report.fmt import pct, plural
from ..report.safe import safe_text
from .run import ACCEPTED, EQUIVALENT, INVALID, KILLED, SURVIVED, DomainReport

COUNT_HEADERS = ("mutants", KILLED, SURVIVED, EQUIVALENT, ACCEPTED, INVALID, "score")


def _table(rows: list[list[str]], headers: Sequence[str]) -> list[str]:
    text: str = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    return text.splitlines()


def _cells(counts: dict[str, int], score: float | None) -> list[str]:
    return [str(counts["generated"]), *(str(counts[s]) for s in (KILLED, SURVIVED, EQUIVALENT, ACCEPTED, INVALID)),
            pct(score)]


def headline(r: DomainReport) -> str:
    """``freight (path): 17 tasks, 302 mutants: 195 killed, ...; score 84.1%; 2 weak tasks``"""
    c = r.counts
    states = ", ".join(f"{c[s]} {s}" for s in (KILLED, SURVIVED, EQUIVALENT, ACCEPTED, INVALID))
    weak = len(r.weak_tasks)
    return (f"{r.domain} ({r.file}): {plural(len(r.tasks), 'task')}, {plural(c['generated'], 'mutant')}: {states}; "
            f"score {pct(r.score)}; {plural(weak, 'weak task')}")


def text_lines(r: DomainReport, baselines: Any = None) -> list[str]:
    """Every line the text format prints for one domain."""
    lines = [headline(r)]
    if not r.tasks:
        lines.append("no tasks: nothing to mutate")
    ops = r.by_operator()
    if ops:
        lines.append("")
        rows = [[op, expected, *_cells(c, _score(c))] for op, expected, c in ops]
        lines += _table(rows, ("operator", "expected", *COUNT_HEADERS))
    mutated = [t for t in r.tasks if t.skipped is None]
    if mutated:
        lines.append("")
        rows = [[t.task, *_cells(t.counts, t.score), "weak" if t.weak else ""] for t in mutated]
        lines += _table(rows, ("task", *COUNT_HEADERS, ""))
    survivors = [(t.task, m) for t in r.tasks for m in t.mutants if m.state == SURVIVED]
    if survivors:
        lines += ["", f"survived ({len(survivors)}):"]
        lines += [f"  {task}: {m.id} ({_expected(m.expected)}): {m.diff}; {m.suggestion}" for task, m in survivors]
    invalid = [(t.task, m) for t in r.tasks for m in t.mutants if m.state == INVALID]
    if invalid:
        lines += ["", f"invalid ({len(invalid)}):"]
        lines += [f"  {task}: {m.id}: {m.reason}" for task, m in invalid]
    skipped = [t for t in r.tasks if t.skipped is not None]
    if skipped:
        lines += ["", f"not mutated ({len(skipped)}):"]
        lines += [f"  {t.task}: {t.skipped}" for t in skipped]
    decorative = r.decorative()
    if decorative:
        lines += ["", f"decorative checks, killed no mutant ({len(decorative)}): {', '.join(decorative)}"]
    if baselines is not None:
        lines += ["", baseline_line(baselines)]
    if r.coverage is not None and r.coverage.trials:  # from the references and the mutants that ran
        lines += ["", *coverage_lines(r.coverage)]
    return [safe_text(line) for line in lines]


def _expected(expected: str) -> str:
    return "must be caught" if expected == "must" else "may survive"


def _score(c: dict[str, int]) -> float | None:
    from .run import score_of

    return score_of(c)


def baseline_line(b: Any) -> str:
    """``baselines: doing nothing passes 1 of 8 tasks (a); spam passes 0 of 8 tasks``"""

    def part(what: str, ids: Sequence[str]) -> str:
        listed = f" ({', '.join(ids)})" if ids else ""
        return f"{what} passes {len(ids)} of {plural(b.tasks, 'task')}{listed}"

    return f"baselines: {part('doing nothing', list(b.do_nothing))}; {part('spam', list(b.spam))}"
