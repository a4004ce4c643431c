"""Commands over finished runs: ``merge`` (shards into one run) and ``report`` (re-render).

``python -m pytest_sandtable merge a/results.json b/results.json -o merged/`` combines
the results of shards (a CI matrix that ran a share of the trials each, or several
hosts) into one results.json and report.html, with pass^k over all their trials.

``python -m pytest_sandtable report results.json [-o DIR]`` writes report.html anew
from a results.json and prints the terminal summary; it exits as the pytest run that
wrote the file did (1 when its gate failed, or without a gate when a trial failed or
errored), and warns when the recorded summary does not count the file's trials.

Both exit 2 for a bad or mismatched file, with one clear line saying which file and what.
Output cut short by a closed pipe (``... | head -1``) ends quietly: the files are
written all the same, and the exit status is what it would have been.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .exits import EXIT_ERROR, EXIT_GATE_FAILED, EXIT_OK

if TYPE_CHECKING:
    from ..report.merge import Shard
    from ..report.prices import Prices
    from ..report.types import Results

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``merge`` and ``report`` to ``python -m pytest_sandtable``'s subcommands."""
    merge = subparsers.add_parser(
        "merge",
        help="combine the results.json of shards into one run",
        description="Combine the results.json files of shards of one run (the same domain files, agent, user, "
        "k and run seed; each trial in exactly one shard) into one results.json and report.html with pass^k "
        "over all trials. Exit 2 when the shards do not match, 1 when a gate given here fails, else 0 "
        "(without a gate: 1 when any trial failed or errored, as pytest would).",
    )
    merge.add_argument("files", nargs="+", metavar="RESULTS", help="a results.json, or a run folder holding one")
    merge.add_argument("-o", "--out", metavar="DIR",
                       help="where the merged results.json and report.html go "
                            "(default .sandtable/runs/<timestamp>-<domain>/ here)")
    merge.add_argument("--fail-under", metavar="PCT", default=None,
                       help="gate: exit 1 when the merged highest pass^k is below PCT percent")
    merge.add_argument("--floor", metavar="TAG=PCT", action="append", default=[],
                       help="gate: exit 1 when a tag's merged highest pass^k is below PCT percent (repeatable)")
    merge.add_argument("--prices", metavar="FILE", default=None,
                       help="prices of models without built-in list prices, as the shards' --sandtable-prices")
    _all_tasks_flag(merge)
    merge.set_defaults(func=_merge)

    report = subparsers.add_parser(
        "report",
        help="re-render report.html from a results.json and print its summary",
        description="Write report.html anew from a results.json (beside it, or into DIR) and print the "
        "terminal summary and the gate's outcome as recorded. Exit as the pytest run that wrote it: 1 when its "
        "gate failed (critical tasks and domain files that did not load are always checked), or without a "
        "gate when a trial failed or errored; 2 for a file that cannot be read; else 0.",
    )
    report.add_argument("file", metavar="RESULTS", help="a results.json, or a run folder holding one")
    report.add_argument("-o", "--out", metavar="DIR", help="where report.html goes (default: beside the results.json)")
    _all_tasks_flag(report)
    report.set_defaults(func=_report)


ALL_TASKS_FLAG = "--all-tasks"


def _all_tasks_flag(command: argparse.ArgumentParser) -> None:
    """``--all-tasks``, as pytest's ``--sandtable-all-tasks``: the summary of a run of
    many tasks lists the passed ones too."""
    command.add_argument(ALL_TASKS_FLAG, action="store_true", default=False,
                         help="list every task in the summary; a run of more than 20 tasks lists only those "
                              "that did not pass without it")


def _err(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _out(lines: Iterable[str]) -> None:
    """Print lines to stdout. A reader that went away (``| head -1``) ends the output
    quietly: no traceback, and nothing more is written to the closed pipe."""
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that flush cannot fail
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
            pass


def _summary_lines(doc: Mapping[str, Any], where: str | None, all_tasks: bool) -> list[str]:
    """The terminal summary of a results.json (every task listed with ``all_tasks``):
    figures, where the files are, domain files that did not load, and the gate's lines
    as recorded."""
    from ..report.gates import collection_errors_line
    from ..report.terminal import render_terminal

    lines = [*render_terminal(doc["summary"], all_tasks=all_tasks, all_tasks_hint=ALL_TASKS_FLAG), ""]
    if where is not None:
        lines.append(where)
    errors = doc["run"].get("collection_errors") or []
    if errors:
        lines.append(collection_errors_line(errors))
    lines += doc["gate"]["lines"]
    return lines


def _merge(args: argparse.Namespace) -> int:
    """``merge``: write the merged run and print its summary; each core error becomes one line."""
    from ..report.gates import GateError
    from ..report.merge import MergeError
    from ..report.prices import PricesError
    from ..report.results_json import ResultsError, default_run_dir, write_run

    try:
        doc = _merged(args)
    except (GateError, ResultsError) as e:
        return _err(str(e))
    except PricesError as e:
        return _err(f"--prices: {e}")
    except MergeError as e:
        return _err(f"cannot merge: {e}")
    try:
        out = Path(args.out) if args.out else default_run_dir(Path.cwd(), (d["name"] for d in doc["run"]["domains"]))
        folder = write_run(doc, out)
    except OSError as e:
        return _err(f"cannot write the merged results: {e}")
    shown = Path(args.out) if args.out else folder.relative_to(Path.cwd())
    _out(_summary_lines(doc, f"sandtable: results in {Path(str(shown).rstrip('/'))}/", args.all_tasks))
    return _merge_exit_code(doc)


def _merged(args: argparse.Namespace) -> Results:
    """The merged document, checking the options before reading any file. Raises the
    core errors (GateError, PricesError, ResultsError, MergeError) for :func:`_merge` to word."""
    from ..report.gates import parse_fail_under, parse_floor
    from ..report.merge import merge_results

    fail_under = parse_fail_under(args.fail_under, "--fail-under")
    floors = dict(parse_floor(f, "--floor") for f in args.floor)
    prices = _prices(args.prices)
    return merge_results(_read_shards(args.files), fail_under=fail_under, floors=floors, prices=prices)


def _prices(path: str | None) -> Prices | None:
    """The built-in prices with ``--prices FILE``'s on top; None without the option (built-in only)."""
    if not path:
        return None
    from ..report.prices import all_prices

    return all_prices(path)


def _read_shards(files: Sequence[str]) -> list[Shard]:
    """Each file (a results.json or a run folder) as a shard named as the user gave it."""
    from ..report.results_json import read_results

    return [(f, read_results(f)) for f in files]


def _merge_exit_code(doc: Mapping[str, Any]) -> int:
    """With a gate given to merge, its verdict. Without one, as pytest would: 1 when any
    trial failed or errored, or a check that applies without a gate failed (a domain file
    that did not load)."""
    gate = doc["gate"]
    if gate["set"]:
        return EXIT_OK if gate["passed"] else EXIT_GATE_FAILED
    s = doc["summary"]
    return EXIT_GATE_FAILED if (s["failed"] or s["errored"] or not gate["passed"]) else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    """``report``: write report.html anew, print the summary as recorded (with a warning
    when it does not count the file's trials) and exit as the run's pytest did."""
    from ..report.results_json import RESULTS_FILE, ResultsError, read_results, write_report

    try:
        doc = read_results(args.file)
    except ResultsError as e:
        return _err(str(e))
    src = Path(args.file)
    out = Path(args.out) if args.out else (src if src.is_dir() else src.parent)
    try:
        path = write_report(doc, out)
    except OSError as e:
        return _err(f"cannot write report.html: {e}")
    mismatch = _summary_mismatch(doc)
    if mismatch:
        print(f"warning: {src / RESULTS_FILE if src.is_dir() else src}: {mismatch}", file=sys.stderr)
    _out(_summary_lines(doc, f"sandtable: report in {path}", args.all_tasks))
    return _report_exit_code(doc)


_COUNTED = ("passed", "failed", "errored")


def _counts(trials: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``trials`` and each verdict's count among the stored trials, as summarize counts them."""
    counts = dict.fromkeys(("trials", *_COUNTED), 0)
    for t in trials:
        counts["trials"] += 1
        counts[t["verdict"]] += 1  # the schema allows only the three verdicts
    return counts


def _counts_text(c: Mapping[str, int]) -> str:
    from ..report.fmt import plural

    return f"{plural(c['trials'], 'trial')} ({', '.join(f'{c[v]} {v}' for v in _COUNTED)})"


def _summary_mismatch(doc: Mapping[str, Any]) -> str | None:
    """What is wrong when the recorded summary does not count the file's trials (a file
    edited by hand or by another tool), or None."""
    held = _counts(doc["trials"])
    said = {key: doc["summary"][key] for key in held}
    if said == held:
        return None
    return (f"the summary does not match the trials: it counts {_counts_text(said)}, the file holds "
            f"{_counts_text(held)}; the summary below is as recorded, the exit status is the trials'")


def _report_exit_code(doc: Mapping[str, Any]) -> int:
    """The exit status of the pytest run that wrote ``doc`` (plugin/artifacts.py): with a
    gate, its verdict; without one, 1 when a trial failed or errored (its test failed),
    or when a check that applies without a gate failed (a critical task's trial did not
    pass, a domain file did not load, the run stopped early). The trials are counted
    from the file, not taken from its summary."""
    gate = doc["gate"]
    if gate["set"]:
        return EXIT_OK if gate["passed"] else EXIT_GATE_FAILED
    counts = _counts(doc["trials"])
    return EXIT_GATE_FAILED if (counts["failed"] or counts["errored"] or not gate["passed"]) else EXIT_OK
