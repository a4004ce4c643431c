"""``validate`` and ``lint``: check domain files without running an agent."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..domain.files import find_domain_files
from .exits import EXIT_ERROR, EXIT_OK


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def validate(args: argparse.Namespace) -> int:
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain

    files, status = _collect_files(args.paths)
    for path in files:
        try:
            domain = load_domain(path)
        except DomainError as e:
            for problem in e.problems:
                print(problem)
            status = EXIT_ERROR
            continue
        print(
            f"ok: {path} ({_plural(len(domain.tasks), 'task')}, {_plural(len(domain.tools), 'tool')}, "
            f"{_plural(len(domain.invariants), 'invariant')})"
        )
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


def lint(args: argparse.Namespace) -> int:
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain
    from ..engine.lint import ERROR, WARNING, lint_domain

    files, status = _collect_files(args.paths)
    flagged = False
    for path in files:
        try:
            domain = load_domain(path)
        except DomainError as e:
            for problem in e.problems:
                print(problem)
            status = EXIT_ERROR
            continue
        findings = lint_domain(domain)
        for f in findings:
            print(f)
        flagged = flagged or any(f.level in (ERROR, WARNING) for f in findings)
        if not findings:
            print(f"ok: {path} ({_plural(len(domain.tasks), 'task')} replayed)")
    if status == EXIT_OK and flagged:
        return 1
    return status
