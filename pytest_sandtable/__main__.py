"""Command line: ``python -m pytest_sandtable <command>``.

``validate PATH...`` loads every domain file (a folder is searched for
``sandtable.yaml`` and ``*.sandtable.yaml``), prints each problem one per line
and exits 2 when there is any, else 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_ERROR = 2

# folders never searched for domain files
_SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox", ".sandtable"}


def is_domain_file(path: Path) -> bool:
    """``sandtable.yaml`` or ``*.sandtable.yaml``."""
    return path.name == "sandtable.yaml" or path.name.endswith(".sandtable.yaml")


def find_domain_files(folder: Path) -> Iterator[Path]:
    """Domain files under ``folder``, in sorted order, skipping tool and VCS folders."""
    entries = sorted(folder.iterdir(), key=lambda p: p.name)
    for entry in entries:
        if entry.is_dir():
            if entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                yield from find_domain_files(entry)
        elif is_domain_file(entry):
            yield entry


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _validate(args: argparse.Namespace) -> int:
    from ._errors import DomainError
    from ._loader import load_domain

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


def _lint(args: argparse.Namespace) -> int:
    from ._errors import DomainError
    from ._lint import ERROR, WARNING, lint_domain
    from ._loader import load_domain

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_sandtable",
        description="pytest-sandtable tools. Trials run under pytest; these commands help around them.",
    )
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
    validate.set_defaults(func=_validate)

    lint = commands.add_parser(
        "lint",
        help="replay each task's reference and flag tasks that would mislead a score",
        description="Replay every task's reference with the scripted user and report references that "
        "fail their own task, rules that did not apply, and tasks that pass when the agent does nothing. "
        "Exits 1 when there is an error or warning, 2 when a file does not load, else 0.",
    )
    lint.add_argument("paths", nargs="+", metavar="PATH", help="a domain file or a folder")
    lint.set_defaults(func=_lint)

    from ._cli_runs import add_subcommands

    add_subcommands(commands)
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


if __name__ == "__main__":
    sys.exit(main())
