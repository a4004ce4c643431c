"""Command line: ``python -m pytest_sandtable <command>``.

One module per group of commands: :mod:`.check` (validate, lint), :mod:`.runs`
(merge, report), :mod:`.authoring` (init, review), :mod:`.compare` (compare), :mod:`.regrade` (regrade),
:mod:`.mutate` (mutate), :mod:`.policy_coverage` (coverage) and :mod:`.schema` (schema). Each command turns
core errors into a message and an exit code.
May import anything in the package except :mod:`pytest_sandtable.plugin`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import authoring, check, compare, importer, judge, mutate, policy_coverage, regrade, runs, schema
from .exits import EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_sandtable",
        description="pytest-sandtable tools. Trials run under pytest; these commands help around them.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check.add_subcommands(commands)
    runs.add_subcommands(commands)
    authoring.add_subcommands(commands)
    compare.add_subcommands(commands)
    regrade.add_subcommands(commands)
    schema.add_subcommands(commands)
    importer.add_subcommands(commands)
    mutate.add_subcommands(commands)
    policy_coverage.add_subcommands(commands)
    judge.add_subcommands(commands)
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
