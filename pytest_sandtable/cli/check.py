"""``validate`` and ``lint``: check domain files without running an agent.

``validate PATH...`` loads every domain file (a folder is searched for
``sandtable.yaml`` and ``*.sandtable.yaml``), prints each problem one per line
and exits 2 when there is any, else 0.

``lint PATH...`` replays every task's reference with the scripted user and prints
what would mislead a score; it exits 1 when there is an error or a warning, 2 when
a file does not load.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..domain.files import find_domain_files
from ..report.fmt import plural
from .exits import EXIT_ERROR, EXIT_FLAGGED, EXIT_OK

if TYPE_CHECKING:
    from ..domain.model import Domain

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``validate`` and ``lint`` to ``python -m pytest_sandtable``'s subcommands."""
    validate_cmd = subparsers.add_parser(
        "validate",
        help="check domain files without running anything",
        description="Load each domain file and print every problem found, one per line "
        "(FILE:LINE:COL: PATH: MESSAGE). Exit 2 when there is any problem, else 0.",
    )
    validate_cmd.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a domain file, or a folder searched for sandtable.yaml and *.sandtable.yaml",
    )
    validate_cmd.set_defaults(func=validate)

    lint_cmd = subparsers.add_parser(
        "lint",
        help="replay each task's reference and flag tasks that would mislead a score",
        description="Replay every task's reference with the scripted user and report references that "
        "fail their own task, rules that did not apply, and tasks that pass when the agent does nothing. "
        "Exits 1 when there is an error or warning, 2 when a file does not load, else 0.",
    )
    lint_cmd.add_argument("paths", nargs="+", metavar="PATH", help="a domain file or a folder")
    lint_cmd.set_defaults(func=lint)


def validate(args: argparse.Namespace) -> int:
    files, status = _collect_files(args.paths)
    for path in files:
        domain = _load(path)
        if domain is None:
            status = EXIT_ERROR
            continue
        print(
            f"ok: {path} ({plural(len(domain.tasks), 'task')}, {plural(len(domain.tools), 'tool')}, "
            f"{plural(len(domain.invariants), 'invariant')})"
        )
    return status


def lint(args: argparse.Namespace) -> int:
    from ..engine.lint import ERROR, WARNING, lint_domain

    files, status = _collect_files(args.paths)
    flagged = False
    for path in files:
        domain = _load(path)
        if domain is None:
            status = EXIT_ERROR
            continue
        findings = lint_domain(domain)
        for f in findings:
            print(f)
        flagged = flagged or any(f.level in (ERROR, WARNING) for f in findings)
        if not findings:
            print(f"ok: {path} ({plural(len(domain.tasks), 'task')} replayed)")
    if status == EXIT_OK and flagged:
        return EXIT_FLAGGED
    return status


def _collect_files(raw_paths: Sequence[str]) -> tuple[list[Path], int]:
    files: list[Path] = []
    status = EXIT_OK
    for raw in raw_paths:
        path = Path(raw)
        if path.is_dir():
            found = list(find_domain_files(path))
            if not found:
                print(f"error: no sandtable.yaml or *.sandtable.yaml under {raw}", file=sys.stderr)
                status = EXIT_ERROR
            files += found
        elif path.exists():
            files.append(path)
        else:
            print(f"error: no such file or folder: {raw}", file=sys.stderr)
            status = EXIT_ERROR
    return files, status


def _load(path: Path) -> Domain | None:
    """The domain in ``path``; None, with each problem printed one per line, when it does not load."""
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain

    try:
        return load_domain(path)
    except DomainError as e:
        for problem in e.problems:
            print(problem)
        return None
