"""``coverage PATH... [--results FILE]... [--mutants] [--format text|json]``: how much of
each domain's policy the trials exercise (docs/grading.md, "Policy coverage").

Without ``--results``, the trials are each task's reference replayed as ``lint`` replays
it; with it, the trials of those results.json files (each read one trial at a time);
with ``--mutants``, the references' replays and those of their mutants (``mutate``'s,
each counted as it is made; an invalid mutant's not).
Exits 2 when a path names no domain file, a file does not load or a results.json does
not read, else 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..report.fmt import plural
from .check import INVALID, MISSING, OK, FileResult, _load, _targets
from .exits import EXIT_ERROR, EXIT_OK
from .runs import _err, _out

if TYPE_CHECKING:
    from ..domain.model import Domain
    from ..engine.results import TrialResult
    from ..policy_coverage import DomainCoverage

__all__ = ["add_subcommands"]

JSON_VERSION = 1


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = subparsers.add_parser(
        "coverage",
        help="how much of each domain's policy the references, or a run's trials, exercise",
        description="Per rule the highest level the trials reach (declared, applied, could-fire, "
        "both-outcomes, boundary), the rules no trial reaches, the policy sentences no rule quotes and the "
        "tasks that exercise no rule. The trials are the tasks' references replayed (with --mutants, and their "
        "mutants), or those of --results. "
        "Exits 2 when a path names no domain file, a file does not load or a results.json does not read.",
    )
    cmd.add_argument("paths", nargs="+", metavar="PATH", help="a domain file or a folder")
    source = cmd.add_mutually_exclusive_group()
    source.add_argument("--results", action="append", default=[], metavar="FILE",
                        help="a results.json (or its run folder) whose trials to count in place of the "
                             "references; may be given more than once")
    source.add_argument("--mutants", action="store_true",
                        help="count the references' mutants too (as mutate makes them): rules reach "
                             "both-outcomes and boundary, which references alone never break")
    cmd.add_argument("--format", choices=("text", "json"), default="text",
                     help="text: the summary line and the table per file (default); json: one document")
    cmd.set_defaults(func=coverage_command)


def _trials(domain: Domain, results: Sequence[str]) -> Iterator[TrialResult]:
    from ..policy_coverage import reference_results, results_from_file

    if not results:
        return reference_results(domain)
    return itertools.chain.from_iterable(results_from_file(path) for path in results)


def _with_mutants(domain: Domain) -> tuple[DomainCoverage, int, int]:
    """The coverage of the references' and their valid mutants' replays, and how many of each."""
    from ..mutate.run import mutate_domain

    report = mutate_domain(domain, coverage=True)
    assert report.coverage is not None
    counts = report.counts
    mutants = counts["generated"] - counts["invalid"]
    return report.coverage, report.coverage.trials - mutants, mutants


def coverage_command(args: argparse.Namespace) -> int:
    from ..policy_coverage import coverage, coverage_json, coverage_lines
    from ..report.results_json import ResultsError
    from ..report.safe import safe_text

    missing, files = _targets(args.paths)
    code = EXIT_ERROR if missing else EXIT_OK
    docs: list[dict[str, Any]] = []
    for m in missing:
        if args.format == "text":
            _err(m.diagnostics[0].message)
        docs.append({"file": m.file, "status": MISSING, "problems": [d.as_json() for d in m.diagnostics]})
    for path in files:
        loaded = _load(path)
        if isinstance(loaded, FileResult):  # a file that does not load
            code = EXIT_ERROR
            problems = loaded.diagnostics
            if args.format == "text":
                _out(d.text for d in problems)
            docs.append({"file": str(path), "status": INVALID, "problems": [d.as_json() for d in problems]})
            continue
        what = ""
        if args.mutants:
            cov, references, mutants = _with_mutants(loaded)
            what = f" ({plural(references, 'reference')}, {plural(mutants, 'mutant')})"
        else:
            try:
                cov = coverage(loaded, _trials(loaded, args.results))
            except ResultsError as e:
                return _err(str(e))
        if args.format == "text":
            _out([f"{path}: {plural(cov.trials, 'trial')} of {loaded.name}{what}", *coverage_lines(cov)])
        docs.append({"file": str(path), "status": OK, "problems": [], "coverage": coverage_json(cov)})
    if args.format == "json":
        doc = {"version": JSON_VERSION, "command": "coverage", "files": docs}
        _out([safe_text(json.dumps(doc, indent=2, ensure_ascii=False))])
    return code
