"""``python -m pytest_sandtable compare BASE NEW [MORE...]``: did the agent get better or worse?

Reads two or more results.json files (or run folders), compares every run after the
first with the first (the baseline) task by task, and prints the comparison as a
terminal table, ``--format markdown`` (for a pull-request comment; also appended to
the file ``$GITHUB_STEP_SUMMARY`` names, when set) or ``--format json``. With three
or more runs a leaderboard comes first. The work is in :mod:`pytest_sandtable.report.compare`.

Exit status: 0; 1 with ``--fail-on-regression`` when a run regressed (the rule of the
pytest gate ``--sandtable-fail-on-regression``); 2 for a bad file, runs that cannot be
compared or a bad option, with one ``error: ...`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .exits import EXIT_ERROR, EXIT_GATE_FAILED, EXIT_OK
from .runs import _out

__all__ = ["add_subcommands"]

_FORMATS = ("terminal", "markdown", "json")
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``compare`` to ``python -m pytest_sandtable``'s subcommands."""
    p = subparsers.add_parser(
        "compare",
        help="compare runs: which tasks regressed or improved beyond chance",
        description="Compare results.json files (or run folders) task by task: each run after the first "
        "against the first (the baseline). Per task: passes before and after, the verdict's change and whether "
        "it is beyond chance (one-sided Fisher exact test); pass^j changes with 95%% intervals, overall and by "
        "tag; new and vanished failure modes; usage and cost. With three or more runs, a leaderboard first. "
        "Exit 1 with --fail-on-regression when a run regressed, 2 for files that cannot be compared.",
    )
    p.add_argument("files", nargs="+", metavar="RESULTS",
                   help="BASE NEW [MORE...]: results.json files or run folders, the baseline first")
    p.add_argument("--format", choices=_FORMATS, default="terminal",
                   help="terminal tables (default), GitHub markdown for a pull-request comment (also appended "
                        f"to ${STEP_SUMMARY} when set), or JSON")
    p.add_argument("--alpha", metavar="A", default=None,
                   help="significance level of the per-task test (default 0.05)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a task's drop is beyond chance, a critical task dropped at all, or pass^k "
                        "dropped more than --max-drop points")
    p.add_argument("--max-drop", metavar="PCT", default=None,
                   help="a regression: overall pass^k (tasks in both runs) dropping more than PCT points")
    p.set_defaults(func=_compare)


def _err(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _compare(args: argparse.Namespace) -> int:
    from ..report import compare as core
    from ..report.gates import parse_pct
    from ..report.results_json import ResultsError
    from ..report.safe import for_terminal, secret_values

    if len(args.files) < 2:
        return _err("compare needs at least two results: BASE NEW [MORE...]")
    try:
        alpha = core.parse_alpha(args.alpha, "--alpha")
        max_drop = parse_pct(args.max_drop, "--max-drop") if args.max_drop is not None else None
        runs = core.read_runs(args.files)
        comparisons = core.compare_all(runs, alpha)
        board = core.leaderboard(runs) if len(runs) > 2 else None
    except (core.CompareError, ResultsError, ValueError) as e:  # ValueError: parse_pct, naming --max-drop
        return _err(str(e))
    checks = [core.regression_checks(c, max_drop, "--max-drop") for c in comparisons]
    secrets = secret_values()
    if args.format == "json":
        doc = core.as_json(runs, comparisons, checks, board, max_drop)
        text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)
    elif args.format == "markdown":
        text = "\n".join(core.markdown(runs, comparisons, checks, board))
    else:
        text = "\n".join(core.terminal_lines(runs, comparisons, checks, board))
    text = for_terminal(text, secrets)
    _out(text.split("\n"))
    if args.format == "markdown" and os.environ.get(STEP_SUMMARY):
        problem = _append_step_summary(os.environ[STEP_SUMMARY], text)
        if problem:
            return _err(problem)
    regressed = any(not c.passed for cs in checks for c in cs)
    return EXIT_GATE_FAILED if args.fail_on_regression and regressed else EXIT_OK


def _append_step_summary(path: str, text: str) -> str | None:
    """Append the markdown to GitHub's job summary file; why it could not be, or None."""
    from ..report.safe import utf8

    try:
        with open(path, "ab") as f:
            f.write(utf8(text + "\n"))
    except OSError as e:
        return f"cannot append to ${STEP_SUMMARY} ({path}): {e.strerror or e}"
    return None
