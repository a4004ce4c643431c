"""``schema``: where the domain file's JSON Schema is, for editors and CI.

``python -m pytest_sandtable schema`` prints the absolute path of the JSON Schema
that ships in the package (the one the loader validates against), for an editor's
``yaml.schemas`` setting or a ``# yaml-language-server: $schema=`` line;
``schema --print`` prints the schema itself, for a tool that wants a copy.
docs/editor.md shows both in use.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ..domain.loader import SCHEMA_FILE
from .exits import EXIT_OK

__all__ = ["add_subcommands", "schema_path"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``schema`` to ``python -m pytest_sandtable``'s subcommands."""
    cmd = subparsers.add_parser(
        "schema",
        help="print the path of the domain file's JSON Schema, for editors",
        description="Print the absolute path of the JSON Schema of domain files (sandtable.yaml) that ships "
        "with the package, for an editor's yaml.schemas setting or a `# yaml-language-server: $schema=` line. "
        "With --print, print the schema itself. See docs/editor.md.",
    )
    cmd.add_argument("--print", dest="print_schema", action="store_true", help="print the schema, not its path")
    cmd.set_defaults(func=schema)


def schema_path() -> Path | None:
    """The schema's absolute path; None when the package is not on the file system (a zip import)."""
    where = resources.files("pytest_sandtable").joinpath(SCHEMA_FILE)
    return Path(str(where)).resolve() if isinstance(where, Path) else None


def schema(args: argparse.Namespace) -> int:
    from .runs import _err, _out

    if args.print_schema:
        text = resources.files("pytest_sandtable").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
        _out([text.removesuffix("\n")])  # print adds the one newline the file ends with
        return EXIT_OK
    path = schema_path()
    if path is None:
        return _err("the package is imported from an archive, so the schema has no path; use `schema --print`")
    _out([str(path)])
    return EXIT_OK
