"""Trials kept on disk as they finish, so that a run's memory does not grow with its
trials' transcripts.

The recorder (``plugin/artifacts.py``) hands every finished trial to a :class:`TrialSpool`,
which keeps two things of it:

- **on disk**, the trial as results.json stores it: within the size caps, secrets
  redacted, encoded once by the C JSON encoder as one UTF-8 line, in an anonymous
  temporary file (``tempfile.TemporaryFile``: on POSIX it has no name, so nothing is
  left behind even when the process is killed) in the folder the run writes to. Lines
  wait in a small buffer (up to :data:`_FLUSH_AT` bytes) and go in one write: a write
  call for each trial cost some 20 µs an item inside pytest;
- **in memory**, what the summary, the gate and the terminal read
  (:func:`summary_view`): the trial without its transcript, calls, violations, world
  diff, passing checks and traceback, a few hundred bytes, and of those the values that
  many trials have alike (their task, tags and soft rules) held once (:class:`Alike`).

A trial given as a dict (:meth:`TrialSpool.add_stored`): one pass of the C
encoder makes its line and shows that it needs no bounding, the usual case; only a
trial that does is read into a :class:`TrialResult` and bounded (:meth:`TrialSpool.add`).
A trial this process ran (:meth:`TrialSpool.add_fresh`) is stored from its
:class:`TrialResult` itself, in one pass as well.

Under pytest-xdist a trial crosses from its worker to the controller as its line
(:func:`trial_line`, made on the worker with the same functions, secrets redacted
there): one string, which execnet writes as it is, with no walk over nested values.
The controller stores it as it came (:meth:`TrialSpool.add_line`), never encoding it
again, and reads from it only its light trial.

At the end :meth:`TrialSpool.ordered` gives both in results.json's order: the light
trials for :func:`~pytest_sandtable.report.summary.summarize`, and a
:class:`SpooledTrials` sequence that reads the stored trials back one at a time (for
report.html) or hands their lines over unparsed (for results.json).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, overload

import orjson

from ..engine.results import _FIELDS as _TRIAL_KEYS
from ..engine.results import Check, TrialResult
from .safe import (
    encoded_trial,
    fresh_line,
    portable_trial,
    scrubbed_line,
    secret_values,
    shown_trial,
    stored_line,
    utf8,
)
from .summary import trial_order_key
from .types import StoredTrial

__all__ = ["Alike", "SpooledTrials", "TrialSpool", "spool_folder", "summary_view", "trial_line"]

# what a light trial holds in place of what nothing reads: shared by all of them (20,000
# trials would otherwise hold 80,000 empty lists), never mutated
_NONE: list[Any] = []
_NO_DIFF: dict[str, Any] = {"created": _NONE, "changed": _NONE}
# what a light trial holds in place of the fields nothing reads (and it keeps the failed checks)
_LIGHT: dict[str, Any] = {"transcript": _NONE, "calls": _NONE, "violations": _NONE, "diff": _NO_DIFF, "traceback": None}


def summary_view(t: TrialResult) -> TrialResult:
    """``t`` with only what the summary, the gate and the terminal read: no transcript,
    calls, violations, diff or traceback, and of its checks the failed ones (failure
    modes). What remains is small and bounded by the caps ``t`` is already within. Read
    only: its empty lists are shared."""
    failed = [c for c in t.checks if not c.passed]
    # dataclasses.replace, without its walk over the fields: a TrialResult's fields are its attributes
    return TrialResult(**{**vars(t), **_LIGHT, "checks": failed or _NONE})


class Alike:
    """Equal values held once: the first of them stands for each that follows. Thousands
    of light trials (and the pytest reports of their items) repeat a few values, their
    task's name, tags and soft rules, their domain's file, an agent's empty usage: each
    would otherwise be a copy of its own, made when it arrived (from an xdist worker,
    every string is).

    ``key`` is what tells equal values apart: the string itself, or the ``repr()`` of a
    small container (which tells 1, 1.0 and True, or a list and a tuple, apart, as
    JSON would). Bounded: past ``limit`` values it starts afresh, so that values that are
    each of their own (a model agent's token counts) cost nothing lasting. What it
    returns is shared: never to be changed."""

    def __init__(self, limit: int = 4096) -> None:
        self._held: dict[Any, Any] = {}
        self._limit = limit

    def __call__(self, key: Any, value: Any) -> Any:
        held = self._held.get(key, self)
        if held is not self:
            return held
        if len(self._held) >= self._limit:
            self._held.clear()
        self._held[key] = value
        return value

    def text(self, value: Any) -> Any:
        """``value`` itself, or the equal string held before it (``value`` when it is not a string)."""
        return self(value, value) if type(value) is str else value

    def texts(self, fields: dict[str, Any], names: Sequence[str]) -> None:
        """:meth:`text` of each ``fields[name]``, in place: a trial's few strings in one
        call (this runs for every trial, and two calls a string cost more than the lookup)."""
        held = self._held
        for name in names:
            value = fields[name]
            if type(value) is not str:
                continue
            same = held.get(value)
            if same is not None:
                fields[name] = same
                continue
            if len(held) >= self._limit:
                held.clear()
            held[value] = value


# a light trial's fields that many trials have alike: strings, and small containers
_TEXTS = ("domain", "task", "verdict", "ended_by", "agent", "user", "location")
_VALUES = ("tags", "usage", "soft", "shared_tags", "pending")
_ALIKE_KEY_LIMIT = 2_000  # characters of repr(): a bigger value is rarely repeated, and its key would cost

# lines held in memory before they are written in one call: a few dozen usual trials, a
# bound on what the buffer adds to a run's memory (a bigger line waits alone, until the
# next line comes or the spool is read)
_FLUSH_AT = 64 * 1024


def _held_once(light: TrialResult, alike: Alike) -> TrialResult:
    """``light`` (a light trial of this spool's own making, so free to change) holding,
    of the values other light trials hold alike, the one held first: of a trial's few
    hundred bytes, most are such values."""
    fields = vars(light)
    alike.texts(fields, _TEXTS)
    for name in _VALUES:
        value = fields[name]
        if type(value) is list and not value:
            fields[name] = _NONE
        elif value and len(key := repr(value)) <= _ALIKE_KEY_LIMIT:
            fields[name] = alike((name, key), value)
    return light


# the fields summary_view leaves out, or keeps the failed ones of
_LEFT_OUT = frozenset({*_LIGHT, "checks"})


def _light_trial(stored: dict[str, Any]) -> TrialResult:
    """``summary_view(TrialResult.from_dict(stored))`` for a stored trial that has a
    trial's fields in their order (:func:`~pytest_sandtable.report.safe.stored_line`),
    made without building what it leaves out: the transcript, calls and diff are never
    read, the passed checks never made."""
    kw = {name: value for name, value in stored.items() if name not in _LEFT_OUT}
    failed = [Check(**c) for c in stored["checks"] if not c["passed"]]
    return TrialResult(**kw, **_LIGHT, checks=failed or _NONE)


@dataclasses.dataclass(slots=True)
class _Entry:
    light: TrialResult
    offset: int  # where its line starts in the spool file
    size: int  # bytes, without the newline


class SpooledTrials(Sequence[StoredTrial]):
    """The stored trials of a spool in results.json's order, read from disk when asked
    for: ``len()``, iteration (one trial parsed at a time, any number of times) and
    indexing. :meth:`lines` gives each trial's JSON line as written, unparsed."""

    def __init__(self, spool: TrialSpool, entries: Sequence[_Entry]) -> None:
        self._spool = spool
        self._entries = list(entries)
        self.secrets: Sequence[str] = spool.secrets  # redacted from every line already

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, i: int) -> StoredTrial: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[StoredTrial]: ...

    def __getitem__(self, i: int | slice) -> StoredTrial | Sequence[StoredTrial]:
        if isinstance(i, slice):
            return SpooledTrials(self._spool, self._entries[i])
        trial: StoredTrial = _parsed(self._spool.read(self._entries[i]))
        return trial

    def __iter__(self) -> Iterator[StoredTrial]:
        for e in self._entries:
            trial: StoredTrial = _parsed(self._spool.read(e))
            yield trial

    def domains(self) -> set[str]:
        """The ``domain`` of every stored trial, as iterating would give them, reading
        one line for each domain of the light trials (a stored line's domain is a function
        of its light trial's: the same caps and secrets made every line)."""
        first: dict[str, _Entry] = {}
        for e in self._entries:
            first.setdefault(e.light.domain, e)
        return {str(_parsed(self._spool.read(e))["domain"]) for e in first.values()}

    def lines(self) -> Iterator[bytes]:
        """Each trial's JSON line (UTF-8, no newline), as the C encoder wrote it."""
        for e in self._entries:
            yield self._spool.read(e)


class TrialSpool:
    """Finished trials: stored on disk, summarised in memory (see the module docstring).

    ``folder`` is where the anonymous spool file goes (created if needed; the system's
    temporary folder when it cannot be, and memory when neither can hold a file).
    ``secrets`` are redacted from every line (default: :func:`secret_values` now)."""

    def __init__(self, folder: Path | None = None, secrets: Sequence[str] | None = None) -> None:
        self.secrets = list(secret_values() if secrets is None else secrets)
        self._file = _spool_file(folder)
        self._end = 0  # where the next line starts: lines written, then those pending
        self._written = 0  # bytes on file; the pending lines follow from here
        self._pending: list[bytes] = []  # lines not yet written, each followed by its newline
        self._pending_size = 0
        self._entries: list[_Entry] = []
        self._alike = Alike()  # what the light trials hold alike, held once

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, t: TrialResult) -> None:
        """Store one finished trial (bounded by the caps, secrets redacted) and keep its
        light form."""
        shown = shown_trial(t, self.secrets)
        self._entries.append(self._append(shown))

    def add_stored(self, d: dict[str, Any], text: str | None = None) -> None:
        """:meth:`add` of ``TrialResult.from_dict(d)``, for a trial as a report carries it
        (``TrialResult.to_dict()``, or ``report.safe.portable_trial``): the same line and
        light trial, made from ``d`` in one pass of the C encoder when that shows there
        is nothing to bound or redact in it (the usual trial), without reading it into a
        TrialResult, bounding it and writing it back twice. ``text`` is ``d``'s JSON when
        ``report.safe.portable_encoded`` made it in this process: that pass is spared."""
        quick = stored_line(d, self.secrets, text)
        if quick is None:
            self.add(TrialResult.from_dict(d))
            return
        stored, line = quick
        self._entries.append(self._store(line, _light_trial(stored)))

    def add_fresh(self, t: TrialResult) -> None:
        """:meth:`add_stored` of ``report.safe.portable_trial(t)``, for a trial this process
        ran and nothing else holds: the same line and light trial, the line made in one
        pass of the C encoder (:func:`~pytest_sandtable.report.safe.fresh_line`) and the
        light trial from ``t`` itself, which it shares values with. A trial that pass does
        not show clean takes the path of a carried one."""
        data = fresh_line(t, self.secrets)
        if data is None:
            self.add_stored(portable_trial(t))
        else:
            self._entries.append(self._keep(data, summary_view(t)))

    def add_line(self, line: str | bytes) -> dict[str, Any]:
        """Store a trial's line as :func:`trial_line` made it (in another process: an
        xdist worker) as it is, and keep its light trial, read from it; the stored trial
        is returned (what the xdist controller's decider and telemetry read). Never
        encoded again: a secret of this process's (which the worker may not have had)
        is redacted in the text, as :meth:`_store` does."""
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        if self.secrets:
            text = scrubbed_line(text, self.secrets)
        data = utf8(text)
        stored: dict[str, Any] = _parsed(data)
        light = _light_trial(stored) if tuple(stored) == _TRIAL_KEYS else summary_view(TrialResult.from_dict(stored))
        self._entries.append(self._keep(data, light))
        return stored

    def trials(self) -> list[TrialResult]:
        """The light trials, in the order they were added."""
        return [e.light for e in self._entries]

    def rename_sides(self, renamed: Sequence[TrialResult]) -> None:
        """Give the trials their agent and user as ``renamed`` (the light trials, in the
        order of :meth:`trials`) names them: a trial that never reached its agent or user
        names those the others used. Such a trial is stored again (rare, and small)."""
        if len(renamed) != len(self._entries):
            raise ValueError(f"{len(renamed)} trials renamed, {len(self._entries)} stored")
        for i, r in enumerate(renamed):
            # a trial stored again leaves its line pending, and the write of it may fail
            # and store every entry anew, at other offsets: each entry is read after that
            self._flush()
            e = self._entries[i]
            if (e.light.agent, e.light.user) != (r.agent, r.user):
                stored = TrialResult.from_dict(_parsed(self.read(e)))
                self._entries[i] = self._append(dataclasses.replace(stored, agent=r.agent, user=r.user))

    def ordered(self) -> tuple[list[TrialResult], SpooledTrials]:
        """The light trials and the stored ones, both in results.json's stable order
        (:func:`~pytest_sandtable.report.summary.order_trials`)."""
        self._flush()  # a failed write moves the spool to memory now, not while results.json is written
        entries = sorted(self._entries, key=lambda e: trial_order_key(e.light))
        return [e.light for e in entries], SpooledTrials(self, entries)

    def read(self, e: _Entry) -> bytes:
        if self._pending:
            self._flush()
        self._file.seek(e.offset)
        return self._file.read(e.size)

    def close(self) -> None:
        """Delete the spool file; the trials can no longer be read (lines still pending
        are let go: nothing could read them)."""
        self._pending.clear()
        self._pending_size = 0
        self._file.close()

    def _append(self, shown: TrialResult) -> _Entry:
        _, line = encoded_trial(shown.to_dict(), self.secrets)
        return self._store(line, summary_view(shown))

    def _store(self, line: str, light: TrialResult) -> _Entry:
        """Write a trial's JSON ``line`` (secrets redacted in every form, lone surrogates
        replaced) and keep ``light`` with where the line is."""
        return self._keep(utf8(scrubbed_line(line, self.secrets)), light)

    def _keep(self, data: bytes, light: TrialResult) -> _Entry:
        """Keep a trial's line ``data`` (as :meth:`_store` makes it), to be written with
        the lines pending, and ``light``. The lines pending are written first when this
        one would take them past :data:`_FLUSH_AT`: before its entry is made, since a
        failed write may store every entry anew (:meth:`_in_memory`)."""
        if self._pending_size + len(data) >= _FLUSH_AT:
            self._flush()
        entry = _Entry(_held_once(light, self._alike), self._end, len(data))
        self._pending += (data, b"\n")  # not data + b"\n": the join copies it once, at the write
        self._end += len(data) + 1
        self._pending_size += len(data) + 1
        return entry

    def _flush(self) -> None:
        """Write the pending lines at the end of the file, in one call. A full disk or a
        vanished folder is found here, at the trial that would overfill the buffer (or
        when the trials are read, at the end of the run): the spool then moves to
        memory, with the lines written and those pending, and the run goes on."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        try:
            self._write_at(self._written, data)
        except OSError:
            self._file = self._in_memory()  # holds the pending lines too
            return
        self._pending.clear()
        self._pending_size = 0
        self._written = self._end

    def _write_at(self, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` of the file, all of it or an OSError (the file is
        unbuffered: an error is raised by this call, not by a later one)."""
        self._file.seek(offset)
        view = memoryview(data)
        while view:
            written = self._file.write(view)
            if not written:  # never for a regular file, but it must not loop
                raise OSError(errno.ENOSPC, "the spool file took nothing")
            view = view[written:]

    def _in_memory(self) -> IO[bytes]:
        """The spool so far, moved to memory: the lines written, read back, and those
        pending. Should the file not read back, each trial whose line was written keeps
        its light form, with a note in ``error`` that the rest of it was lost (its
        verdict, checks and usage still count); the pending lines are whole."""
        old, memory = self._file, io.BytesIO()
        lost: OSError | None = None
        try:
            old.seek(0)
            memory.write(old.read(self._written))
        except OSError as exc:
            lost = exc
        with contextlib.suppress(OSError):
            old.close()
        pending, self._pending, self._pending_size = self._pending, [], 0
        if lost is None:
            memory.writelines(pending)
            self._written = self._end
            return memory
        return self._rebuilt(memory, b"".join(pending), lost)

    def _rebuilt(self, memory: io.BytesIO, pending: bytes, lost: OSError) -> io.BytesIO:
        """``memory`` holding the spool again, its file lost: each trial whose line was
        written, stored anew from its light form with a note that the rest was lost; each
        whose line was pending (in ``pending``, which starts at ``self._written``), as it was."""
        entries, written = self._entries[:], self._written
        # the same list, refilled: a caller may hold it (``self._entries.append(self._keep(...))``)
        self._entries.clear()
        self._end, self._written, self._file = 0, 0, memory
        note = f"its transcript, calls and world diff were lost with the spool file ({lost.strerror or lost})"
        for e in entries:
            if e.offset >= written:
                self._entries.append(self._keep(pending[e.offset - written:e.offset - written + e.size], e.light))
                continue
            error = f"{e.light.error}; {note}" if e.light.error else note
            self._entries.append(self._append(dataclasses.replace(e.light, error=error)))
        self._flush()  # to memory: it cannot fail
        return memory


# how every line orjson writes starts (a trial's first field, compact); the json module
# writes the lines orjson cannot (report.safe), with a space after the colon
_COMPACT_START = b'{"domain":"'


def _parsed(line: bytes) -> Any:
    """A stored line read as the json module reads it, by orjson (a few times as fast) when
    orjson wrote it. A line the json module wrote may hold an integer past 64 bits, which
    orjson would read as a float (and never writes)."""
    if line.startswith(_COMPACT_START):
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)


def trial_line(t: TrialResult, secrets: Sequence[str]) -> bytes:
    """The line :meth:`TrialSpool.add_fresh` stores for ``t`` with these ``secrets``
    (UTF-8, no newline), made by the same functions: in the one pass of
    :func:`~pytest_sandtable.report.safe.fresh_line` for the usual trial, else as a
    carried trial's (:meth:`TrialSpool.add_stored`), bounded by the walk if it must be.
    What an xdist worker sends the controller, which stores it with
    :meth:`TrialSpool.add_line`."""
    data = fresh_line(t, secrets)
    if data is not None:
        return data
    d = portable_trial(t)
    quick = stored_line(d, secrets)
    if quick is not None:
        line = quick[1]
    else:
        _, line = encoded_trial(shown_trial(TrialResult.from_dict(d), secrets).to_dict(), secrets)
    return utf8(scrubbed_line(line, secrets))


def _spool_file(folder: Path | None) -> IO[bytes]:
    """An anonymous file for the spool: in ``folder``, else in the system's temporary
    folder, else in memory (a run that cannot write a temporary file still finishes,
    and says so when it writes its results)."""
    for where in (folder, None):
        try:
            if where is not None:
                where.mkdir(parents=True, exist_ok=True)
            return tempfile.TemporaryFile(dir=where, prefix=".sandtable-spool-", suffix=".jsonl", buffering=0)
        except OSError:
            continue
    return io.BytesIO()


def spool_folder(out_dir: str | os.PathLike[str] | None, rootdir: str | os.PathLike[str]) -> Path:
    """Where a run's spool goes: the folder results.json will go to when it is given,
    else the folder the run folders are made in (``.sandtable/runs``)."""
    return Path(out_dir) if out_dir is not None else Path(rootdir) / ".sandtable" / "runs"
