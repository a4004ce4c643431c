"""``mutate PATH...``: how much each task's checks can be trusted (docs/mutate.md).

Every task's reference is rewritten into small faults and each replayed through the
engine (no model); the command prints, per domain, the mutants by operator and by
task, each survivor with an expectation that would catch it, the checks that
killed nothing, and the policy coverage of the references and the mutants that ran
(``--no-coverage``: not). ``--format`` text, json or github, as ``lint``.

Exit 2 on bad input (a path that names no domain file, a file that does not load, an
``accept:`` entry naming no generated mutant); else 1 when ``--fail-under`` or
``--fail-on-weak`` fails; else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..report.fmt import pct, plural
from .check import FORMATS, INVALID, MISSING, Diagnostic, FileResult, _from_problem, _load, _targets, workflow_command
from .exits import EXIT_ERROR, EXIT_FLAGGED, EXIT_OK

if TYPE_CHECKING:
    from ..domain.model import Domain
    from ..mutate.run import DomainReport

__all__ = ["add_subcommands"]

JSON_VERSION = 1


def _score_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a percentage from 0 to 100, got {text}")
    return value


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mutate`` to ``python -m pytest_sandtable``'s subcommands."""
    cmd = subparsers.add_parser(
        "mutate",
        help="rewrite each task's reference into faults and see which the task's checks catch",
        description="Rewrite every task's reference into small faults (mutants), replay each through the "
        "engine with the scripted user (no model), and report which the task's checks kill. "
        "Exits 2 on bad input, 1 when --fail-under or --fail-on-weak fails, else 0.",
    )
    cmd.add_argument("paths", nargs="+", metavar="PATH", help="a domain file or a folder")
    cmd.add_argument("--format", choices=FORMATS, default="text",
                     help="text: tables and one line per survivor (default); json: one document; "
                     "github: GitHub Actions annotations")
    cmd.add_argument("--fail-under", type=_score_arg, default=None, metavar="SCORE",
                     help="exit 1 when the mutation score of all files together is below SCORE percent")
    cmd.add_argument("--fail-on-weak", action="store_true",
                     help="exit 1 when a task lets a must-be-caught mutant survive")
    cmd.add_argument("--no-coverage", action="store_true",
                     help="leave out the policy coverage of the references and the mutants (faster: "
                     "coverage replays each trial's calls again)")
    cmd.set_defaults(func=mutate)


def _baselines(domain: Domain) -> Any:
    """The trivial-agent baselines, when this install has them (``mutate.baselines``)."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("pytest_sandtable.mutate.baselines") is None:
        return None
    module = importlib.import_module("pytest_sandtable.mutate.baselines")
    return module.baselines(domain)


def mutate(args: argparse.Namespace) -> int:
    from ..mutate.render import headline, text_lines
    from ..mutate.run import mutate_domain
    from .runs import _out

    missing, files = _targets(args.paths)
    results: list[FileResult] = list(missing)
    reports: list[DomainReport] = []
    docs: list[dict[str, Any]] = []
    for r in missing:
        if args.format == "text":
            for d in r.diagnostics:
                print(d.text, file=sys.stderr)
        elif args.format == "github":
            _out(workflow_command("mutate", d) for d in r.diagnostics)
        docs.append({"file": r.file, "status": r.status, "problems": [d.as_json() for d in r.diagnostics]})
    for path in files:
        loaded = _load(path)
        if isinstance(loaded, FileResult):
            results.append(loaded)
            if args.format == "text":
                _out(d.text for d in loaded.diagnostics)
            elif args.format == "github":
                _out(workflow_command("mutate", d) for d in loaded.diagnostics)
            docs.append({"file": loaded.file, "status": loaded.status,
                         "problems": [d.as_json() for d in loaded.diagnostics]})
            continue
        report = mutate_domain(loaded, coverage=not args.no_coverage)
        reports.append(report)
        base = _baselines(loaded)
        if report.problems:
            results.append(FileResult(str(path), INVALID))
        if args.format == "text":
            _out([*(str(p) for p in report.problems), *text_lines(report, base), ""])
        elif args.format == "github":
            _out(_annotations(report))
            _out([headline(report)])
        else:
            doc: dict[str, Any] = {"status": "invalid" if report.problems else "ok", **report.as_json()}
            if base is not None:
                doc["baselines"] = {"tasks": base.tasks, "do_nothing": list(base.do_nothing), "spam": list(base.spam)}
            docs.append(doc)
    code, verdict = _verdict(args, results, reports)
    summary = _summary(reports, verdict)
    if args.format == "json":
        from ..report.safe import safe_text

        whole = {"version": JSON_VERSION, "command": "mutate", "files": docs, "totals": _totals(reports),
                 "exit": code}
        _out([safe_text(json.dumps(whole, indent=2, ensure_ascii=False))])
    else:
        _out([summary])
    return code


def _counts(reports: list[DomainReport]) -> dict[str, int]:
    from ..mutate.run import STATES

    out = {s: 0 for s in (*STATES, "generated")}
    for r in reports:
        for k, v in r.counts.items():
            out[k] += v
    return out


def _totals(reports: list[DomainReport]) -> dict[str, Any]:
    from ..mutate.run import score_of

    counts = _counts(reports)
    return {**counts, "score": score_of(counts), "weak_tasks": sum(len(r.weak_tasks) for r in reports)}


def _verdict(args: argparse.Namespace, results: list[FileResult], reports: list[DomainReport]) -> tuple[int, str]:
    if any(r.status in (INVALID, MISSING) for r in results):
        return EXIT_ERROR, "bad input"
    t = _totals(reports)
    if args.fail_under is not None:
        if t["score"] is None:
            return EXIT_FLAGGED, f"no mutant was scored, so the score cannot reach --fail-under {args.fail_under:g}"
        if t["score"] * 100 < args.fail_under:
            return EXIT_FLAGGED, f"score {pct(t['score'])} is under --fail-under {args.fail_under:g}"
    if args.fail_on_weak and t["weak_tasks"]:
        return EXIT_FLAGGED, f"{plural(t['weak_tasks'], 'weak task')} with --fail-on-weak"
    return EXIT_OK, "ok"


def _summary(reports: list[DomainReport], verdict: str) -> str:
    """``sandtable mutate: 2 domains, 398 mutants: score 84.6% (250 killed of 295 scored); 14 weak tasks; ok``"""
    t = _totals(reports)
    scored = t["generated"] - t["invalid"] - t["equivalent"] - t["accepted"]
    return (f"sandtable mutate: {plural(len(reports), 'domain')}, {plural(t['generated'], 'mutant')}: "
            f"score {pct(t['score'])} ({t['killed']} killed of {scored} scored); "
            f"{plural(t['weak_tasks'], 'weak task')}; {verdict}")


def _annotations(report: DomainReport) -> list[str]:
    """A warning per survivor and per task not mutated, an error per bad ``accept:`` entry."""
    from ..mutate.render import _expected
    from ..report.safe import safe_text

    out = [workflow_command("mutate", _from_problem(p)) for p in report.problems]
    for t in report.tasks:
        if t.skipped is not None:
            out.append(workflow_command("mutate", Diagnostic(report.file, t.line or None, None, "", "warning",
                                                             f"not mutated: {t.skipped}", t.task, "")))
        for m in t.mutants:
            if m.state == "survived":
                message = f"mutant {m.id} survived ({_expected(m.expected)}): {m.diff}; {m.suggestion}"
                out.append(workflow_command("mutate", Diagnostic(report.file, t.line or None, None, "",
                                                                 "warning" if m.expected == "must" else "note",
                                                                 message, t.task, "")))
    return [safe_text(line) for line in out]
