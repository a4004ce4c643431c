"""Load a domain file: YAML, then three stages, translate → check → build.

``load_domain`` either returns a complete :class:`~pytest_sandtable.domain.model.Domain`
or raises :class:`~pytest_sandtable.domain.errors.DomainError` listing every problem
found (not just the first), sorted by line, each pointing at the exact node.

After :mod:`.yaml_reader` has read the text (the data, and where each node is), and
the JSON Schema has been applied to it:

1. :mod:`.translate` words the schema's errors for a person: what was found where,
   and what was expected, each mistake once.
2. :mod:`.check` does what the schema cannot: names that must refer to something
   declared elsewhere in the file, unique ids and keys, values against a param's schema.
3. :mod:`.build` makes the model objects.

They are separate because they trust the data differently. Translate and check both
run on the raw data, even when the other finds mistakes, so one load reports every
problem (the schema's and the cross-references', merged and sorted by line); check
therefore reads the data warily. Build runs only when both found nothing, so it can
index the data without a test at every step. This module applies the schema and
runs the stages in order.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]

from .build import build
from .check import check
from .errors import DomainError, Problem
from .model import SPEC_VERSION, Domain
from .translate import translate
from .wording import clip
from .yaml_reader import Document, load_yaml

__all__ = ["SCHEMA_FILE", "domain_schema", "load_domain", "load_domain_text"]

SCHEMA_FILE = "schemas/domain.schema.json"  # inside the package; `schema` prints its path

# The largest domain file read (docs/spec.md, "Limits"): twice a τ-bench-sized domain
# (about 30 MB), and refused before it is read, so a wrong path to a log or a disk
# image costs nothing.
MAX_FILE_BYTES = 64 * 1024 * 1024


# --------------------------------------------------------------------------- entry points


def load_domain(path: str | Path) -> Domain:
    """Load and validate the domain file at ``path``.

    Raises :class:`DomainError` with every problem found, sorted by line.
    """
    filename = str(path)
    try:
        raw = _read_capped(Path(path), filename)
    except FileNotFoundError:
        raise DomainError([Problem(filename, None, None, "", "no such file")]) from None
    except IsADirectoryError:
        raise DomainError([Problem(filename, None, None, "", "is a directory, not a domain file")]) from None
    except OSError as exc:
        raise DomainError([Problem(filename, None, None, "", f"cannot read the file: {exc.strerror}")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DomainError([Problem(filename, line, None, "", "the file is not UTF-8 text")]) from None
    domain = _load(text, filename)
    domain.path = filename
    domain.sha256 = hashlib.sha256(raw).hexdigest()
    return domain


def _read_capped(path: Path, filename: str) -> bytes:
    """The file's bytes, or a problem when it holds more than :data:`MAX_FILE_BYTES`
    (told by its size before reading; by reading one byte more, for a file whose size
    says nothing, such as a pipe)."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(MAX_FILE_BYTES + 1) if size <= MAX_FILE_BYTES else b""
    if size <= MAX_FILE_BYTES and len(raw) <= MAX_FILE_BYTES:
        return raw
    shown = f"{size:,} bytes" if size > MAX_FILE_BYTES else f"more than {MAX_FILE_BYTES:,} bytes"
    raise DomainError(
        [
            Problem(
                filename,
                None,
                None,
                "",
                f"the file is {shown}; a domain file may be at most {MAX_FILE_BYTES // 2**20} MB "
                f"({MAX_FILE_BYTES:,} bytes)",
            )
        ]
    )


def load_domain_text(text: str, filename: str = "<string>") -> Domain:
    """Load and validate a domain from YAML ``text``; ``filename`` is used in problems.

    ``Domain.sha256`` is the hash of the text's UTF-8 bytes; ``Domain.path`` is None.
    """
    domain = _load(text, filename)
    domain.sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return domain


@lru_cache(maxsize=1)
def domain_schema() -> dict[str, Any]:
    """The JSON Schema of a domain file (draft 2020-12)."""
    text = resources.files("pytest_sandtable").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _load(text: str, filename: str) -> Domain:
    """YAML, the version, then translate → check → build (see the module docstring)."""
    doc = load_yaml(text, filename)
    _check_version(doc)
    problems = list(doc.problems)
    problems += translate(doc, _validator().iter_errors(_without_plain_rows(doc.data)))
    cross_problems, fields = check(doc)
    problems += cross_problems
    if problems:
        raise DomainError(_sorted_unique(problems))
    return build(doc, fields)


# --------------------------------------------------------------------------- the schema


@lru_cache(maxsize=1)
def _validator() -> Any:
    return jsonschema.Draft202012Validator(domain_schema())


# all the schema asks of a seed row, which _without_plain_rows checks in Python
_ROW_SCHEMA = {"type": "object", "propertyNames": {"minLength": 1}}


@lru_cache(maxsize=1)
def _rows_checked_here() -> bool:
    table = domain_schema().get("$defs", {}).get("table", {})
    return bool(table.get("properties", {}).get("rows", {}).get("items") == _ROW_SCHEMA)


def _without_plain_rows(data: Any) -> Any:
    """The document for the schema, with each table's seed rows left out when every
    row is what the schema asks of a row: a mapping with no empty key (the YAML
    reader makes every key a string). jsonschema takes seconds over 100,000 rows; this
    check takes milliseconds. When a row is anything else, the schema sees them all
    and words the problem as always."""
    world = data.get("world") if isinstance(data, dict) else None
    if not isinstance(world, dict) or not _rows_checked_here():
        return data
    view = dict(world)
    for name, table in world.items():
        rows = table.get("rows") if isinstance(table, dict) else None
        if isinstance(rows, list) and rows and all(type(r) is dict and "" not in r for r in rows):
            view[name] = {**table, "rows": []}
    return {**data, "world": view}


# --------------------------------------------------------------------------- before and after the stages


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-sandtable")
    except PackageNotFoundError:
        return None


def _check_version(doc: Document) -> None:
    """A file of a newer spec version stops here: what this version's schema and checks
    would say about it is noise, the remedy is an upgrade."""
    data = doc.data
    if not isinstance(data, dict):
        return
    v = data.get("version")
    if isinstance(v, int) and not isinstance(v, bool) and v > SPEC_VERSION:
        installed = _installed_version()
        who = f"pytest-sandtable {installed}" if installed else "this pytest-sandtable"
        raise DomainError(
            [
                doc.problem(
                    ("version",),
                    f"this file is spec version {clip(str(v))}; {who} reads version {SPEC_VERSION}. "
                    "Upgrade pytest-sandtable to load it.",
                )
            ]
        )


def _sorted_unique(problems: Iterable[Problem]) -> list[Problem]:
    """The problems by position, each once however often it was found."""
    seen: set[tuple[int | None, int | None, str, str]] = set()
    out: list[Problem] = []
    for p in sorted(problems, key=Problem.sort_key):
        k = (p.line, p.col, p.path, p.message)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out
