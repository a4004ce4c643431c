"""Command line: ``python -m pytest_sandtable <command>``.

One module per group of commands: :mod:`.check` (validate, lint) and :mod:`.runs`
(merge, report). Each command turns core errors into a message and an exit code.
May import anything in the package except :mod:`pytest_sandtable.plugin`.

``validate PATH...`` loads every domain file (a folder is searched for
``sandtable.yaml`` and ``*.sandtable.yaml``), prints each problem one per line
and exits 2 when there is any, else 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .exits import EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_sandtable",
        description="pytest-sandtable tools. Trials run under pytest; these commands help around them.",
    )
    from . import check, runs

    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    validate = commands.add_parser(
        "validate",
        help="check domain files without running anything",
        description="Load each domain file and print every problem found, one per line "
        "(FILE:LINE:COL: PATH: MESSAGE). Exit 2 when there is any problem, else 0.",
    )
    validate.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a domain file, or a folder searched for sandtable.yaml and *.sandtable.yaml",
    )
    validate.set_defaults(func=check.validate)

    lint = commands.add_parser(
        "lint",
        help="replay each task's reference and flag tasks that would mislead a score",
        description="Replay every task's reference with the scripted user and report references that "
        "fail their own task, rules that did not apply, and tasks that pass when the agent does nothing. "
        "Exits 1 when there is an error or warning, 2 when a file does not load, else 0.",
    )
    lint.add_argument("paths", nargs="+", metavar="PATH", help="a domain file or a folder")
    lint.set_defaults(func=check.lint)

    runs.add_subcommands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on a usage error, 0 for --help
        return int(e.code) if isinstance(e.code, int) else EXIT_ERROR
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    code: int = args.func(args)
    return code

