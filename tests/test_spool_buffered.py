"""The spool writes its lines in batches (``report.spool``, ``_FLUSH_AT``): a trial's
line waits in memory with the others pending and they go to the file in one write, when
the next line would take them past 64 KiB, or before anything is read back. A write that
fails (a full disk, a vanished folder) moves the spool to memory with the lines pending,
and the run goes on: nothing already stored is lost, and every trial reads back at the
right place. These tests give the spool a real file that fills up or cannot be read.
The trials of the process that ran them (``add_fresh``) are stored as they come, in
that order. Last, two steps every trial takes on its way to the
spool, made cheaper: its dict (``TrialResult.to_dict``) and its strings held once
(``Alike.texts``)."""

from __future__ import annotations

import errno
import gc
import io
import json
import os
import weakref
from pathlib import Path
from typing import Any

from pytest_sandtable.engine.results import _FIELDS, TrialResult
from pytest_sandtable.report.spool import Alike, TrialSpool

LOST = "its transcript, calls and world diff were lost with the spool file (Input/output error)"


class FillingFile(io.FileIO):
    """A real file on a disk with ``room`` bytes left: a write past it takes what fits
    (as write(2) does), the next one fails with ENOSPC. With ``unreadable``, reading it
    back fails too (EIO), as a file on a vanished disk does."""

    def __init__(self, path: Path, room: int, unreadable: bool = False) -> None:
        super().__init__(path, "w+b")
        self.room, self.unreadable = room, unreadable
        self.writes: list[int] = []  # bytes each write call took

    def write(self, b: Any) -> int:
        data = bytes(b)
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        took = data[: self.room]
        self.room -= len(took)
        self.writes.append(len(took))
        return super().write(took) or 0

    def read(self, size: int | None = -1) -> bytes:
        if self.unreadable:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return super().read(size)


def _talk(trial: int, size: int, turns: int = 1) -> list[dict[str, Any]]:
    return [{"role": "agent", "text": f"{trial:03d}" + "x" * size, "turn": n} for n in range(1, turns + 1)]


def _trial(trial: int, size: int = 900, turns: int = 1) -> TrialResult:
    """Trials numbered 100 and up, so that every line of the same ``size`` has the same length."""
    return TrialResult(domain="d", task="t", trial=trial, k=999, seed=trial, verdict="passed", location="d.yaml:1",
                       agent="a", user="u", transcript=_talk(trial, size, turns))


def _spool(tmp_path: Path, room: int = 10**9, unreadable: bool = False) -> tuple[TrialSpool, FillingFile]:
    spool = TrialSpool(tmp_path, secrets=[])
    spool._file.close()
    spool._file = file = FillingFile(tmp_path / "spool.jsonl", room, unreadable)
    return spool, file


def _read_back(spool: TrialSpool) -> list[tuple[int, Any, Any]]:
    """Each stored trial: its number, transcript and error, in results.json's order."""
    return [(t["trial"], t["transcript"], t["error"]) for t in spool.ordered()[1]]


def test_lines_wait_in_memory_and_go_in_one_write_before_they_are_read(tmp_path: Path) -> None:
    spool, file = _spool(tmp_path)
    for i in range(100, 110):
        spool.add_fresh(_trial(i))
    assert file.writes == [] and os.path.getsize(tmp_path / "spool.jsonl") == 0
    lines = list(spool.ordered()[1].lines())
    assert file.writes == [sum(len(line) + 1 for line in lines)]  # one call for all ten
    assert (tmp_path / "spool.jsonl").read_bytes() == b"".join(line + b"\n" for line in lines)
    assert [(n, talk) for n, talk, _ in _read_back(spool)] == [(i, _talk(i, 900)) for i in range(100, 110)]
    spool.add_fresh(_trial(110))  # added after a read: written before the next
    assert [n for n, _, _ in _read_back(spool)] == list(range(100, 111))
    assert len(file.writes) == 2
    spool.close()


def test_the_lines_pending_are_written_before_a_line_takes_them_past_64_kib(tmp_path: Path) -> None:
    spool, file = _spool(tmp_path)
    for i in range(100, 120):  # lines of ~10 KB: six of them pending, the seventh would pass 64 KiB
        spool.add_fresh(_trial(i, size=10_000))
    line = len(next(iter(spool.ordered()[1].lines()))) + 1
    assert {len(x) + 1 for x in spool.ordered()[1].lines()} == {line} and 6 * line < 64 * 1024 <= 7 * line
    assert file.writes == [6 * line, 6 * line, 6 * line, 2 * line]  # the last two when read
    assert [(n, talk) for n, talk, _ in _read_back(spool)] == [(i, _talk(i, 10_000)) for i in range(100, 120)]
    spool.close()


def test_a_line_bigger_than_the_buffer_is_stored_whole(tmp_path: Path) -> None:
    spool, file = _spool(tmp_path)
    spool.add_fresh(_trial(100))
    spool.add_fresh(_trial(101, size=10_000, turns=20))  # ~200 KB, within the caps
    spool.add_fresh(_trial(102))
    assert [(n, talk) for n, talk, _ in _read_back(spool)] == [
        (100, _talk(100, 900)), (101, _talk(101, 10_000, turns=20)), (102, _talk(102, 900))]
    assert len(file.writes) == 3  # the first line, as the big one came; the big one, as the last came; the last
    spool.close()


def test_a_disk_that_fills_up_mid_run_moves_the_spool_to_memory_with_the_lines_pending(tmp_path: Path) -> None:
    spool, file = _spool(tmp_path, room=100_000)  # one batch of 6 lines of ~10 KB, then part of the next
    for i in range(100, 130):
        spool.add_fresh(_trial(i, size=10_000))
    assert type(spool._file) is io.BytesIO and file.closed
    assert file.writes[0] < 64 * 1024 and sum(file.writes) == 100_000  # the second write was cut short
    stored = _read_back(spool)
    assert stored == [(i, _talk(i, 10_000), None) for i in range(100, 130)]  # every trial whole, none noted
    assert [t.trial for t in spool.ordered()[0]] == list(range(100, 130))
    spool.close()


def test_a_disk_that_is_full_at_the_end_of_the_run_loses_nothing(tmp_path: Path) -> None:
    spool, file = _spool(tmp_path, room=0)
    for i in range(100, 105):
        spool.add_fresh(_trial(i))
    assert _read_back(spool) == [(i, _talk(i, 900), None) for i in range(100, 105)]
    assert type(spool._file) is io.BytesIO and file.writes == []
    spool.close()


def test_a_spool_file_that_neither_takes_nor_gives_back_keeps_the_pending_lines_whole(tmp_path: Path) -> None:
    """The lines written before are lost with the file: those trials keep their light form
    (verdict, checks, usage) with a note; the lines still pending are stored as they were."""
    spool, file = _spool(tmp_path, room=100_000, unreadable=True)
    spool.add_fresh(TrialResult(**{**vars(_trial(100, size=10_000)), "error": "the agent timed out"}))
    for i in range(101, 120):
        spool.add_fresh(_trial(i, size=10_000))
    assert type(spool._file) is io.BytesIO and sum(file.writes) == 100_000
    stored = _read_back(spool)
    written = 6  # the first batch, on the file before it failed
    line = len(list(spool.ordered()[1].lines())[-1]) + 1  # a pending line, as it was
    assert file.writes[0] == written * line + len('"the agent timed out"') - len("null")  # trial 100's error
    assert stored[0] == (100, [], f"the agent timed out; {LOST}")
    assert stored[1:written] == [(i, [], LOST) for i in range(101, 100 + written)]
    assert stored[written:] == [(i, _talk(i, 10_000), None) for i in range(100 + written, 120)]
    light = spool.ordered()[0]
    assert [(t.trial, t.error) for t in light[:2]] == [(100, f"the agent timed out; {LOST}"), (101, LOST)]
    assert [t.error for t in light[written:]] == [None] * (20 - written)
    assert [json.loads(line)["trial"] for line in spool.ordered()[1].lines()] == list(range(100, 120))
    spool.close()


def test_a_trial_renamed_after_a_full_disk_reads_back_renamed(tmp_path: Path) -> None:
    spool, _ = _spool(tmp_path, room=0, unreadable=True)
    spool.add_fresh(_trial(100))
    spool.add_fresh(TrialResult(**{**vars(_trial(101)), "agent": "", "user": ""}))
    named = [TrialResult(**{**vars(t), "agent": "a", "user": "u"}) for t in spool.trials()]
    spool.rename_sides(named)
    assert [(t["trial"], t["agent"], t["user"], t["error"]) for t in spool.ordered()[1]] == [
        (100, "a", "u", None), (101, "a", "u", None)]
    spool.close()


def test_a_trial_dict_has_its_fields_in_their_order_whatever_else_was_set_on_it() -> None:
    """``TrialResult.to_dict`` copies the trial's attributes when they are its fields in
    their order (the line on disk follows that order), and reads the fields one by one
    when anything else was set on it."""
    plain = _trial(100).to_dict()
    assert tuple(plain) == _FIELDS and plain["trial"] == 100 and plain["transcript"] == _talk(100, 900)
    marked = _trial(100)
    marked.note = "set by a plugin"  # type: ignore[attr-defined]
    assert marked.to_dict() == plain and tuple(marked.to_dict()) == _FIELDS
    reordered = _trial(100)
    del reordered.trial
    reordered.trial = 100  # now last of its attributes
    assert list(reordered.to_dict()) == list(_FIELDS)


def test_alike_texts_holds_each_string_once_and_leaves_the_rest() -> None:
    alike = Alike(limit=3)
    first = {"task": "".join(["ta", "sk"]), "verdict": "passed", "tags": ["a"], "agent": None}
    second = {"task": "".join(["ta", "sk"]), "verdict": "".join(["pass", "ed"]), "tags": ["a"], "agent": None}
    assert second["task"] is not first["task"]
    alike.texts(first, ("task", "verdict", "tags", "agent"))
    alike.texts(second, ("task", "verdict", "tags", "agent"))
    assert second["task"] is first["task"] and second["verdict"] is first["verdict"]
    assert second["tags"] is not first["tags"] and second["agent"] is None  # not strings: left as they were
    third = {"a": "x1", "b": "".join(["ta", "sk"])}
    alike.texts(third, ("a", "b"))  # a third string: the limit of 3 reached, not passed
    assert third["b"] is first["task"]
    fourth = {"a": "x2", "b": "".join(["ta", "sk"])}
    alike.texts(fourth, ("a", "b"))  # a fourth: held afresh, the first ones let go
    assert fourth["b"] == "task" and fourth["b"] is not first["task"]


def test_a_trial_of_this_process_is_stored_at_once_and_keeps_its_order(tmp_path: Path) -> None:
    """``add_fresh`` stores a trial as it comes, so the spool holds no whole trial (its
    line is on its way to the file, its light form in memory), and the spool's order is
    the order trials came in, whichever way each came."""
    spool, _ = _spool(tmp_path)
    held = []
    for i in range(100, 115):
        t = _trial(i)
        held.append(weakref.ref(t))
        spool.add_fresh(t)
        del t
    gc.collect()
    assert len(spool) == 15 and all(ref() is None for ref in held)  # stored, and let go
    spool.add_fresh(_trial(115))
    spool.add_fresh(_trial(116))
    spool.add(_trial(117))
    spool.add_fresh(_trial(118))
    spool.add_stored(_trial(119).to_dict())
    spool.add_fresh(_trial(120))
    assert len(spool) == 21
    assert [t.trial for t in spool.trials()] == list(range(100, 121))
    assert [(n, talk) for n, talk, _ in _read_back(spool)] == [(i, _talk(i, 900)) for i in range(100, 121)]
    spool.close()


class FailingAfterFirstWrite(FillingFile):
    """A disk that takes one write, then fails every write, and from then on every read."""

    def write(self, b: Any) -> int:
        if self.writes:
            self.unreadable = True
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(b)


def test_trials_renamed_one_after_another_while_the_disk_fails_all_read_back_renamed(tmp_path: Path) -> None:
    """Renaming a trial stores it again: the next read writes that line first, which fails
    here and stores every entry anew at other offsets; each trial is still read at its own."""
    spool = TrialSpool(tmp_path, secrets=[])
    spool._file.close()
    spool._file = FailingAfterFirstWrite(tmp_path / "spool.jsonl", 10**9)
    for i in range(100, 105):
        spool.add_fresh(TrialResult(**{**vars(_trial(i)), "agent": "", "user": ""}))
    spool.rename_sides([TrialResult(**{**vars(t), "agent": "a", "user": "u"}) for t in spool.trials()])
    assert [(t["trial"], t["agent"], t["user"]) for t in spool.ordered()[1]] == [
        (i, "a", "u") for i in range(100, 105)]
    spool.close()
