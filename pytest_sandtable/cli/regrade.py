"""``regrade``: grade the stored trials of a run again against edited domain files.

``python -m pytest_sandtable regrade RESULTS [DOMAIN...] -o DIR`` calls no agent and no
model: it replays each trial's calls against the edited domain and grades them with
its expectations and rules (see :mod:`pytest_sandtable.report.regrade`). It refuses,
one ``error:`` line per reason and exit 2 with nothing written, when what the agent or
the simulated user was given changed, or a trial does not replay to what it recorded.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .exits import EXIT_ERROR
from .runs import _all_tasks_flag, _err, _merge_exit_code, _out, _prices, _summary_lines

if TYPE_CHECKING:
    from ..report.regrade import DomainFiles, Regraded

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``regrade`` to ``python -m pytest_sandtable``'s subcommands."""
    cmd = subparsers.add_parser(
        "regrade",
        help="grade a run's stored trials again against edited domain files (no agent, no model)",
        description="Replay the stored tool calls of every trial of a results.json against the edited "
        "domain files (by default those the run names, found here, in the run's rootdir or in the run folder) "
        "and grade them with their expectations and rules, without calling any agent or model. "
        "Refuses (exit 2, one line per reason, nothing written) when what "
        "the agent or the simulated user was given changed: description, policy, tools, the world, a task's "
        "given, user or max_turns. Exit 1 when a gate of the run fails or (without one) a regraded trial "
        "failed or errored, else 0.",
    )
    cmd.add_argument("file", metavar="RESULTS", help="a results.json, or a run folder holding one")
    cmd.add_argument("domains", nargs="*", metavar="DOMAIN",
                     help="an edited domain file, used for the run's domain of the same name "
                          "(default: the files the run names, found in the current directory, the run's rootdir "
                          "or the run folder)")
    cmd.add_argument("-o", "--out", metavar="DIR", required=True,
                     help="where the regraded results.json and report.html go")
    cmd.add_argument("--prices", metavar="FILE", default=None,
                     help="prices of models without built-in list prices, as the run's --sandtable-prices")
    cmd.add_argument("--judge", default=None, metavar="SPEC",
                     help="judge the regraded trials' judge: criteria with this panel (docs/judges.md); verdicts "
                          "the judge cache (.sandtable/judge-cache) holds cost no call")
    _all_tasks_flag(cmd)
    cmd.set_defaults(func=_regrade)


def _regrade(args: argparse.Namespace) -> int:
    """Regrade, write, and print what changed and the summary; every refusal is one line.
    The trials are read, regraded and written one at a time (``report.reading``, a
    spool), so memory does not grow with them."""
    from ..report.prices import PricesError
    from ..report.reading import open_results
    from ..report.regrade import RegradeError, domain_files, regrade_run, search_folders
    from ..report.results_json import ResultsError
    from ..report.safe import scrub_text, secret_values

    try:
        prices = _prices(args.prices)
        with open_results(args.file) as stored:
            files = domain_files(stored.doc, args.file, args.domains, search_folders(stored.path))
            regraded = regrade_run(stored, files, prices=prices, spool_in=_existing_folder(Path(args.out)))
    except PricesError as e:
        return _err(f"--prices: {e}")
    except ResultsError as e:
        return _err(str(e))
    except RegradeError as e:
        # a line may quote a stored or replayed value: never a key from the environment
        secrets = secret_values()
        for line in e.problems:
            _err(scrub_text(line, secrets))
        return EXIT_ERROR
    with regraded:
        if args.judge is not None:  # after the regrade: judged scores never reach its verdicts or gate
            from .judge import judge_regraded

            judged = judge_regraded(regraded.results, files, args.judge)
            if judged is None:
                return EXIT_ERROR
        return _written(regraded, files, args)


def _written(regraded: Regraded, files: Sequence[DomainFiles], args: argparse.Namespace) -> int:
    """Write the regraded run's files, then print what changed and the summary."""
    from ..report.results_json import write_run

    try:
        write_run(regraded.results, args.out)
    except OSError as e:
        return _err(f"cannot write the regraded results: {e}")
    summary = _summary_lines(regraded.results, f"sandtable: results in {args.out}", args.all_tasks)
    _out([_changed_line(regraded, files), *summary])
    return _merge_exit_code(regraded.results)


def _existing_folder(out: Path) -> Path | None:
    """Where the spool file goes: the output folder, or the nearest folder above it that
    exists (a refused regrade creates nothing); None (the system's temporary folder)
    when none does."""
    for folder in (out, *out.absolute().parents):
        if folder.is_dir():
            return folder
    return None


def _changed_line(regraded: Regraded, files: Sequence[DomainFiles]) -> str:
    """``sandtable: regraded 40 trials of freight against sandtable.yaml: 3 verdicts changed (...)``."""
    from ..report.fmt import plural

    against = ", ".join(f"{d.name} against {d.path}" for d in files)
    changes = regraded.changes
    total = sum(changes.values())
    how = ", ".join(f"{n} {a} → {b}" for (a, b), n in sorted(changes.items()))
    what = f"{plural(total, 'verdict')} changed ({how})" if total else "no verdict changed"
    return f"sandtable: regraded {plural(len(regraded.results['trials']), 'trial')} of {against}: {what}"
