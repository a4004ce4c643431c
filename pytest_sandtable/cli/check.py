"""``validate`` and ``lint``: check domain files without running an agent.

``validate PATH...`` loads every domain file (a folder is searched for
``sandtable.yaml`` and ``*.sandtable.yaml``), prints each problem one per line
and exits 2 when there is any, else 0.

``lint PATH...`` replays every task's reference with the scripted user and prints
what would mislead a score; it exits 1 when there is an error or a warning, 2 when
a file does not load.

Both gather what they find the same way, into one :class:`FileResult` per path
(:func:`_check_files`), and hand each to a renderer chosen by ``--format``:
``text`` (the lines above, for people), ``json`` (one document, for editors and
scripts) or ``github`` (GitHub Actions workflow commands, which become annotations on
the pull request). The format changes what is printed, never the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..domain.files import find_domain_files
from ..report.fmt import plural
from .exits import EXIT_ERROR, EXIT_FLAGGED, EXIT_OK

if TYPE_CHECKING:
    from ..domain.errors import Problem
    from ..domain.model import Domain
    from ..engine.lint import Finding

__all__ = ["add_subcommands"]

FORMATS = ("text", "json", "github")
JSON_VERSION = 1  # of the ``--format json`` document; docs/editor.md describes it

# a file's status
OK = "ok"  # loaded; for lint, no error or warning either (notes may remain)
INVALID = "invalid"  # did not load: the problems say why
FLAGGED = "flagged"  # lint: loaded, with an error or a warning
MISSING = "missing"  # the path does not exist, or a folder holds no domain file
STATUSES = (OK, INVALID, FLAGGED, MISSING)
SEVERITIES = ("error", "warning", "note")


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
    _add_format(validate_cmd)
    validate_cmd.set_defaults(func=validate)

    lint_cmd = subparsers.add_parser(
        "lint",
        help="replay each task's reference and flag tasks that would mislead a score",
        description="Replay every task's reference with the scripted user and report references that "
        "fail their own task, rules that did not apply, and tasks that pass when the agent does nothing. "
        "Exits 1 when there is an error or warning, 2 when a file does not load, else 0.",
    )
    lint_cmd.add_argument("paths", nargs="+", metavar="PATH", help="a domain file or a folder")
    _add_format(lint_cmd)
    lint_cmd.set_defaults(func=lint)


def _add_format(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: one line per problem (default); json: one document for editors and scripts; "
        "github: GitHub Actions annotations (see docs/editor.md)",
    )


# --------------------------------------------------------------------------- what is found


@dataclass(frozen=True)
class Diagnostic:
    """One problem of a file, or one lint finding, in the fields every format shows.

    ``text`` is the line the text format prints, taken from the problem or finding
    itself, so that ``--format text`` stays exactly what it always was.
    """

    file: str
    line: int | None  # 1-based; None when the problem is about the whole file
    column: int | None
    key: str  # the key path (``tasks[0].expect``); "" for the whole file
    severity: str  # error | warning | note
    message: str
    task: str | None  # lint: the task's id
    text: str

    @property
    def subject(self) -> str:
        """What the message is about, as the text line names it: the task for lint, else the key."""
        return self.task if self.task is not None else self.key

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "key": self.key,
            "severity": self.severity,
            "message": self.message,
            "task": self.task,
        }


@dataclass
class FileResult:
    """What one path on the command line (or one file found under a folder) came to."""

    file: str
    status: str  # one of STATUSES
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # loaded files: how many tasks, tools and invariants (what the text format's ok line says)
    counts: dict[str, int] | None = None
    # lint: the policy coverage of the references' replays (policy_coverage.coverage_json)
    coverage: dict[str, Any] | None = None
    coverage_lines: list[str] = field(default_factory=list)


def _from_problem(p: Problem) -> Diagnostic:
    return Diagnostic(p.file, p.line, p.col, p.path, "error", p.message, None, str(p))


def _from_finding(f: Finding, domain: Domain) -> Diagnostic:
    index = next((i for i, t in enumerate(domain.tasks) if t.id == f.task), None)
    key = f"tasks[{index}]" if index is not None else ""
    return Diagnostic(f.file, f.line or None, None, key, f.level, f.message, f.task, str(f))


def _missing(path: str, message: str) -> FileResult:
    # the message names the path, as the text format's `error:` line always has
    return FileResult(path, MISSING, [Diagnostic(path, None, None, "", "error", message, None, f"error: {message}")])


def _targets(raw_paths: Sequence[str]) -> tuple[list[FileResult], list[Path]]:
    """The paths that name nothing to check, and the domain files to check, in argument order
    (a folder's files sorted by path)."""
    missing: list[FileResult] = []
    files: list[Path] = []
    for raw in raw_paths:
        path = Path(raw)
        if path.is_dir():
            found = list(find_domain_files(path))
            if not found:
                missing.append(_missing(raw, f"no sandtable.yaml or *.sandtable.yaml under {raw}"))
            files += found
        elif path.exists():
            files.append(path)
        else:
            missing.append(_missing(raw, f"no such file or folder: {raw}"))
    return missing, files


def _load(path: Path) -> Domain | FileResult:
    """The domain in ``path``, or the result of a file that does not load."""
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain

    try:
        return load_domain(path)
    except DomainError as e:
        return FileResult(str(path), INVALID, [_from_problem(p) for p in e.problems])


def _counts(domain: Domain) -> dict[str, int]:
    return {"tasks": len(domain.tasks), "tools": len(domain.tools), "invariants": len(domain.invariants)}


def _validated(path: Path, domain: Domain) -> FileResult:
    return FileResult(str(path), OK, counts=_counts(domain))


def _linted(path: Path, domain: Domain) -> FileResult:
    from ..engine.lint import lint_domain
    from ..policy_coverage import coverage, coverage_json, coverage_lines, reference_results

    diagnostics = [_from_finding(f, domain) for f in lint_domain(domain)]
    flagged = any(d.severity != "note" for d in diagnostics)
    cov = coverage(domain, reference_results(domain))
    return FileResult(str(path), FLAGGED if flagged else OK, diagnostics, _counts(domain),
                      coverage_json(cov), coverage_lines(cov))


def _check_files(raw_paths: Sequence[str], check: Callable[[Path, Domain], FileResult]) -> Iterator[FileResult]:
    """Each path's result, one at a time so that text and annotations show as each file
    is done: first the paths that name nothing to check, then each domain file."""
    missing, files = _targets(raw_paths)
    yield from missing
    for path in files:
        loaded = _load(path)
        yield loaded if isinstance(loaded, FileResult) else check(path, loaded)


def _exit_code(results: Sequence[FileResult]) -> int:
    statuses = {r.status for r in results}
    if statuses & {INVALID, MISSING}:
        return EXIT_ERROR
    return EXIT_FLAGGED if FLAGGED in statuses else EXIT_OK


# --------------------------------------------------------------------------- commands


def validate(args: argparse.Namespace) -> int:
    return _run("validate", args, _validated)


def lint(args: argparse.Namespace) -> int:
    return _run("lint", args, _linted)


def _run(command: str, args: argparse.Namespace, check: Callable[[Path, Domain], FileResult]) -> int:
    from .runs import _out

    renderer = _RENDERERS[args.format](command)
    results: list[FileResult] = []
    for result in _check_files(args.paths, check):
        results.append(result)
        _out(renderer.file(result))
    _out(renderer.end(results))
    return _exit_code(results)


# --------------------------------------------------------------------------- renderers


class _Renderer:
    """Results in one format: :meth:`file`'s lines as each is done, :meth:`end`'s once.
    They go to stdout, where a reader that went away (``| head -1``) ends the output
    quietly (:func:`.runs._out`) and the checks go on to the same exit code."""

    def __init__(self, command: str) -> None:
        self.command = command

    def file(self, result: FileResult) -> list[str]:
        return []

    def end(self, results: Sequence[FileResult]) -> list[str]:
        return []


class _Text(_Renderer):
    """One line per problem or finding; ``ok: ...`` for a clean file; a path that names
    nothing to check is an ``error:`` line on stderr."""

    def file(self, result: FileResult) -> list[str]:
        if result.status == MISSING:
            for d in result.diagnostics:
                print(d.text, file=sys.stderr)
            return []
        lines = [d.text for d in result.diagnostics]
        if result.counts is not None and not result.diagnostics:
            lines.append(f"ok: {result.file} ({self._ok_counts(result.counts)})")
        return lines + result.coverage_lines

    def _ok_counts(self, counts: dict[str, int]) -> str:
        if self.command == "lint":
            return f"{plural(counts['tasks'], 'task')} replayed"
        return (
            f"{plural(counts['tasks'], 'task')}, {plural(counts['tools'], 'tool')}, "
            f"{plural(counts['invariants'], 'invariant')}"
        )


def totals(results: Sequence[FileResult]) -> dict[str, int]:
    """How many files, by status, and how many problems, by severity."""
    out = {"files": len(results)}
    for status in STATUSES:
        out[status] = sum(1 for r in results if r.status == status)
    for severity in SEVERITIES:
        out[severity + "s"] = sum(1 for r in results for d in r.diagnostics if d.severity == severity)
    return out


class _Json(_Renderer):
    """One JSON document once every file is done (docs/editor.md describes it)."""

    def end(self, results: Sequence[FileResult]) -> list[str]:
        from ..report.safe import safe_text

        doc = {
            "version": JSON_VERSION,
            "command": self.command,
            "files": [
                {
                    "file": r.file,
                    "status": r.status,
                    "counts": r.counts,
                    "problems": [d.as_json() for d in r.diagnostics],
                    **({"coverage": r.coverage} if r.coverage is not None else {}),
                }
                for r in results
            ],
            "totals": totals(results),
        }
        return [safe_text(json.dumps(doc, indent=2, ensure_ascii=False))]


# GitHub's workflow-command escapes (actions/toolkit, command.ts): a message may not hold
# `%`, CR or LF; a property value not `:` or `,` either, which separate the properties.
_DATA_ESCAPES = str.maketrans({"%": "%25", "\r": "%0D", "\n": "%0A"})
_PROPERTY_ESCAPES = str.maketrans({"%": "%25", "\r": "%0D", "\n": "%0A", ":": "%3A", ",": "%2C"})
_COMMANDS = {"error": "error", "warning": "warning", "note": "notice"}


def escape_data(text: str) -> str:
    """``text`` as the message of a workflow command."""
    return text.translate(_DATA_ESCAPES)


def escape_property(text: str) -> str:
    """``text`` as a property value (``file=``, ``title=``) of a workflow command."""
    return text.translate(_PROPERTY_ESCAPES)


def workflow_command(command: str, d: Diagnostic) -> str:
    """One annotation: ``::error file=F,line=L,col=C,title=T::MESSAGE``, leaving out the
    line and column a problem about the whole file does not have."""
    props = [f"file={escape_property(d.file)}"]
    if d.line is not None:
        props.append(f"line={d.line}")
        if d.column is not None:
            props.append(f"col={d.column}")
    props.append(f"title={escape_property(f'sandtable {command}')}")
    message = f"{d.subject}: {d.message}" if d.subject else d.message
    return f"::{_COMMANDS.get(d.severity, 'error')} {','.join(props)}::{escape_data(message)}"


def summary_line(command: str, results: Sequence[FileResult]) -> str:
    """``sandtable validate: 3 files: 1 ok, 1 invalid, 1 missing; 3 errors, 0 warnings, 0 notes``."""
    t = totals(results)
    by_status = ", ".join(f"{t[s]} {s}" for s in STATUSES if t[s] or s == OK)
    by_severity = ", ".join(plural(t[s + "s"], s) for s in SEVERITIES)
    return f"sandtable {command}: {plural(t['files'], 'file')}: {by_status}; {by_severity}"


class _Github(_Renderer):
    """A workflow command per problem as each file is done, then one plain summary line."""

    def file(self, result: FileResult) -> list[str]:
        from ..report.safe import safe_text

        return [safe_text(workflow_command(self.command, d)) for d in result.diagnostics]

    def end(self, results: Sequence[FileResult]) -> list[str]:
        return [summary_line(self.command, results)]


_RENDERERS: dict[str, type[_Renderer]] = {"text": _Text, "json": _Json, "github": _Github}
