"""A results.json read one trial at a time, so that reading a run of 20,000 trials
does not hold them all in memory (``regrade``, ``compare``).

:func:`~pytest_sandtable.report.results_json.write_run` writes results.json with one
trial per line between the document's head and tail::

    {
     "schema_version": "1.3",
     ...
     "trials": [
      {"domain":"freight",...},
      {"domain":"freight",...}
     ],
     "tasks": [
     ...
    }

:func:`open_results` reads such a file in one pass, line by line: each trial line is
parsed on its own and checked against the schema of ``trials[]``, the head and tail
are parsed as the document without its trials and checked against the document's
schema (the same JSON Schema, and together the same checks, that
:func:`~pytest_sandtable.report.results_json.read_results` makes of the whole file),
and only where each trial line is kept. :meth:`StoredRun.trials` then reads the trials
again, one at a time, as often as asked.

Any other layout (a file pretty-printed or rewritten by another tool, trials spread
over several lines, a byte-order mark), and any file that fails a check, is read whole
by ``read_results`` instead: the same document, and the same error naming the file and
the field, as ever, at the memory cost of the whole file (at most
:data:`~pytest_sandtable.report.results_json.MAX_RESULTS_BYTES`).

Only a regular file is read: a named pipe, a device (``/dev/zero``) or a folder is
refused before anything is read (:func:`~pytest_sandtable.domain.files.open_regular`).
A file read a trial at a time has no cap on its size, but no line of it is read past
:data:`MAX_LINE_BYTES` (the lines before ``"trials"``, past ``_HEAD_MAX`` together):
a longer one sends the file to ``read_results``, which reads it whole within its cap.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from array import array
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from ..domain.files import FileRefused, open_regular, read_at_most
from .results_json import (
    MAX_RESULTS_BYTES,
    RESULTS_FILE,
    SCHEMA_VERSION,
    ResultsError,
    _schema,
    read_results,
    validate_results,
)

__all__ = ["MAX_LINE_BYTES", "StoredRun", "open_results"]

_TRIALS = b' "trials": [\n'  # write_run's line before the first trial
_NO_TRIALS = b' "trials": [],\n'  # ... or in place of them all
_TRIAL = b"  {"  # how a trial line starts
_LAST = (b" ],\n", b" ]\n")  # the line after the last trial: more keys follow, or none
_PLACE = b"[trials of results.json read one at a time]"  # stands for them in the document parsed without them
_HEAD_MAX = 16 * 2**20  # bytes before "trials" beyond which a file is not in write_run's layout
MAX_LINE_BYTES = 256 * 2**20
"""The longest line of a results.json read a trial at a time (a trial's line: its
strings and values are clipped when stored, so a real one is far shorter)."""
_MAJOR, _MINOR = (int(x) for x in SCHEMA_VERSION.split("."))


class _NotStreamable(Exception):
    """The file is not in write_run's layout, or a check failed: it is read whole."""


class StoredRun:
    """A checked results.json: :attr:`doc` is its document with ``trials`` empty,
    :meth:`trials` its trials (read from the file one at a time, or from memory for a
    file that was read whole), :attr:`sha256` the file's hash, :attr:`source` the path
    as given (a results.json or its folder) and :attr:`path` the file's. Close it, or
    use it in a ``with`` block, to close the file."""

    def __init__(self, source: str | os.PathLike[str], path: Path, doc: dict[str, Any], sha256: str, *,
                 file: IO[bytes] | None = None, spans: array[int] | None = None,
                 trials: list[dict[str, Any]] | None = None) -> None:
        self.source = str(source)
        self.path = path
        self.doc = doc
        self.sha256 = sha256
        self._file = file
        self._spans = spans if spans is not None else array("q")  # offset and size of each trial line
        self._whole = trials
        self._stamp = _stamp(file) if file is not None else None

    @property
    def streamed(self) -> bool:
        """True when the trials are read from the file one at a time (write_run's layout)."""
        return self._whole is None

    def __len__(self) -> int:
        return len(self._whole) if self._whole is not None else len(self._spans) // 2

    def trials(self) -> Iterator[dict[str, Any]]:
        """Each stored trial as results.json holds it, in the file's order. Raises
        :class:`ResultsError` when the file changed since it was checked."""
        if self._whole is not None:
            yield from self._whole
            return
        assert self._file is not None
        spans = self._spans
        for i in range(0, len(spans), 2):
            yield self._read(spans[i], spans[i + 1])

    def _read(self, offset: int, size: int) -> dict[str, Any]:
        assert self._file is not None
        if _stamp(self._file) != self._stamp:
            raise self._changed()
        self._file.seek(offset)
        try:
            trial: dict[str, Any] = json.loads(self._file.read(size).decode("utf-8"))
        except ValueError:  # not UTF-8, or not JSON: the file was written over since
            raise self._changed() from None
        return trial

    def _changed(self) -> ResultsError:
        return ResultsError(self.path, "it changed while it was being read: run the command again")

    def close(self) -> None:
        """Close the file (the trials can no longer be read)."""
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> StoredRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stamp(f: IO[bytes]) -> tuple[int, int]:
    """The file's size and modification time: what changes when it is written over."""
    st = os.fstat(f.fileno())
    return st.st_size, st.st_mtime_ns


def open_results(path: str | os.PathLike[str]) -> StoredRun:
    """Open and check a results.json (a folder means its results.json) as
    :func:`~pytest_sandtable.report.results_json.read_results` does, without holding
    its trials when it is in write_run's layout. Raises :class:`ResultsError` exactly as
    ``read_results`` does."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    try:
        f = open_regular(p, None, "a results.json")
    except FileRefused as e:  # a named pipe, a device: nothing of it is read
        raise ResultsError(p, e.problem) from None
    except OSError:
        return _whole(path, p)  # read_results words why: no such file, cannot read it
    try:
        before = _stamp(f)
        scanned = _scanned(f)
        # written over while it was checked: the lines kept may not be the ones checked
        moved = _stamp(f) != before
    except BaseException:
        f.close()
        raise
    if scanned is None or moved:
        f.close()
        return _whole(path, p)
    doc, spans, sha256 = scanned
    return StoredRun(path, p, doc, sha256, file=f, spans=spans)


def _scanned(f: IO[bytes]) -> tuple[dict[str, Any], array[int], str] | None:
    """:func:`_scan`, or None when the file is to be read whole (and then nothing of
    the scan is held: no traceback keeps its frames while the whole file is read)."""
    try:
        return _scan(f)
    except _NotStreamable:
        return None


def _whole(path: str | os.PathLike[str], p: Path) -> StoredRun:
    """The file read whole by ``read_results``: the same document, or error, as ever."""
    doc = read_results(path)
    trials: list[dict[str, Any]] = doc["trials"]
    return StoredRun(path, p, {**doc, "trials": []}, _sha256_of(p), trials=trials)


def _sha256_of(p: Path) -> str:
    digest = hashlib.sha256()
    try:
        with p.open("rb") as f:
            for chunk in iter(lambda: f.read(2**20), b""):
                digest.update(chunk)
    except OSError:
        return ""
    return digest.hexdigest()


def _scan(f: IO[bytes]) -> tuple[dict[str, Any], array[int], str]:
    """One pass over a file in write_run's layout: the document without its trials,
    where each trial line is, and the file's sha256, everything checked. Raises
    :class:`_NotStreamable` for another layout or a failed check."""
    digest = hashlib.sha256()
    head, marker = _head(f, digest)
    check = _trial_check(_relaxed(head))
    spans: array[int] = array("q")
    closing = _trial_lines(f, len(head) + len(marker), digest, spans, check) if marker == _TRIALS else b""
    rest = read_at_most(f, MAX_RESULTS_BYTES)
    if len(rest) > MAX_RESULTS_BYTES:
        raise _NotStreamable  # read_results refuses it, naming its size
    digest.update(rest)
    glue = b' "trials": "' + _PLACE + (b'",\n' if marker == _NO_TRIALS or closing == _LAST[0] else b'"\n')
    doc = _parsed(head + glue + rest)
    if not isinstance(doc, dict) or doc.get("trials") != _PLACE.decode():  # "trials" given again further on
        raise _NotStreamable
    doc["trials"] = []
    try:
        validate_results(doc)
    except ResultsError:
        raise _NotStreamable from None
    return doc, spans, digest.hexdigest()


def _parsed(raw: bytes) -> Any:
    """JSON of UTF-8 bytes, decoded strictly as ``read_results`` decodes the file."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError):
        raise _NotStreamable from None


def _head(f: IO[bytes], digest: Any) -> tuple[bytes, bytes]:
    """The lines before the ``"trials"`` line, and that line."""
    head = bytearray()
    for line in _lines(f, _HEAD_MAX):
        digest.update(line)
        if line in (_TRIALS, _NO_TRIALS):
            return bytes(head), line
        head += line
        if len(head) > _HEAD_MAX:
            break
    raise _NotStreamable


def _relaxed(head: bytes) -> bool:
    """Whether the file is of a newer minor version of the schema (whose extra fields
    this version does not know), from its head; another major is read whole (refused)."""
    doc = _parsed(head + b' "trials": []\n}')
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    m = re.fullmatch(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    if m is None or int(m.group(1)) != _MAJOR:
        raise _NotStreamable
    return int(m.group(2)) > _MINOR


def _trial_lines(f: IO[bytes], offset: int, digest: Any, spans: array[int],
                 check: Callable[[Any], None]) -> bytes:
    """Check each trial line after ``"trials": [`` (starting at ``offset``) and note
    where it is; returns the line that closes the list. Every trial but the last ends
    with a comma."""
    comma = True
    for line in _lines(f, MAX_LINE_BYTES):
        digest.update(line)
        if line in _LAST and not comma:
            return line
        if not (comma and line.startswith(_TRIAL) and line.endswith(b"\n")):
            raise _NotStreamable
        comma = line.endswith(b",\n")
        body = line[2:-2] if comma else line[2:-1]
        check(_parsed(body))
        spans.append(offset + 2)
        spans.append(len(body))
        offset += len(line)
    raise _NotStreamable


def _lines(f: IO[bytes], most: int) -> Iterator[bytes]:
    """The file's lines from where it is, none read past ``most`` bytes: a longer one (a
    file of no newlines) is not write_run's layout."""
    while line := f.readline(most + 1):
        if len(line) > most:
            raise _NotStreamable
        yield line


@lru_cache(maxsize=2)
def _trial_check(relaxed: bool) -> Callable[[Any], None]:
    """The schema of one item of ``trials[]`` compiled by fastjsonschema, as
    results_json's whole-file check compiles the document's; raises
    :class:`_NotStreamable` for a trial that does not match it."""
    import fastjsonschema

    schema = _schema(relaxed)
    compiled = fastjsonschema.compile({"$schema": schema["$schema"], "$defs": schema["$defs"],
                                       **schema["properties"]["trials"]["items"]})
    invalid = fastjsonschema.JsonSchemaException

    def check(trial: Any) -> None:
        try:
            compiled(trial)
        except invalid:
            raise _NotStreamable from None

    return check
