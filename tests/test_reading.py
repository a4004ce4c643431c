"""``report.reading.open_results``: a results.json read one trial at a time when it is in
the layout ``write_run`` writes, and whole (by ``read_results``) otherwise, with the same
document and the same errors either way. The runs are made by the real engine and
written by the real writer (``test_regrade.make_run``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_regrade import make_run

from pytest_sandtable.report.reading import StoredRun, open_results
from pytest_sandtable.report.results_json import ResultsError, read_results


def stored_as_read(path: Path) -> tuple[StoredRun, dict[str, Any]]:
    """The file opened streamed, and read whole."""
    return open_results(path), read_results(path)


def assert_same(stored: StoredRun, whole: dict[str, Any], file: Path) -> None:
    assert stored.doc == {**whole, "trials": []}
    assert list(stored.trials()) == whole["trials"]
    assert list(stored.trials()) == whole["trials"]  # as often as asked
    assert len(stored) == len(whole["trials"])
    assert stored.sha256 == hashlib.sha256(file.read_bytes()).hexdigest()


def the_error(path: Path) -> str:
    with pytest.raises(ResultsError) as e:
        open_results(path)
    with pytest.raises(ResultsError) as whole:
        read_results(path)
    assert str(e.value) == str(whole.value)
    return str(e.value)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def test_a_file_write_run_wrote_is_read_a_trial_at_a_time(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    stored, whole = stored_as_read(run)
    with stored:
        assert stored.streamed
        assert (stored.source, stored.path) == (str(run), run / "results.json")
        assert_same(stored, whole, run / "results.json")
        assert [t["trial"] for t in stored.trials()] == [1, 2, 3]


def test_a_run_without_trials(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    doc = read_results(run)
    file = run / "results.json"
    text = file.read_text(encoding="utf-8")
    start, end = text.index(' "trials": [\n'), text.index("\n ],\n") + len("\n ],\n")
    file.write_text(text[:start] + ' "trials": [],\n' + text[end:], encoding="utf-8")
    with open_results(run) as stored:
        assert stored.streamed
        assert stored.doc == {**doc, "trials": []}
        assert (len(stored), list(stored.trials())) == (0, [])


@pytest.mark.parametrize("indent", [None, 1, 2])
def test_another_layout_is_read_whole_to_the_same_trials(tmp_path: Path, indent: int | None) -> None:
    run = make_run(tmp_path)
    file = run / "results.json"
    file.write_text(json.dumps(read_results(run), indent=indent), encoding="utf-8")
    stored, whole = stored_as_read(file)
    assert not stored.streamed
    assert_same(stored, whole, file)


def test_a_byte_order_mark_is_read_past_by_read_results(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    doc = read_results(run)
    file = run / "results.json"
    file.write_bytes(b"\xef\xbb\xbf" + file.read_bytes())
    stored, whole = stored_as_read(file)
    assert not stored.streamed
    assert_same(stored, whole, file)
    assert whole == doc


def test_a_trial_that_breaks_the_schema_is_named_with_its_field(tmp_path: Path) -> None:
    file = make_run(tmp_path) / "results.json"
    text = lines(file)
    text[text.index(' "trials": [') + 2] = text[text.index(' "trials": [') + 2].replace(
        '"verdict":"failed"', '"verdict":"maybe"', 1)
    file.write_text("\n".join(text), encoding="utf-8")
    assert the_error(file) == (
        f"{file}: does not match the results schema 1.5 (1 problem):\n"
        "  trials[1].verdict: 'maybe' is not one of ['passed', 'failed', 'errored']")


def test_a_trial_line_that_is_not_utf8(tmp_path: Path) -> None:
    file = make_run(tmp_path) / "results.json"
    raw = file.read_bytes()
    at = raw.index(b'"task":"book"', raw.index(b' "trials": [\n'))
    assert at < raw.index(b"\n ],\n")  # in a trial's line
    file.write_bytes(raw[:at] + b'"task":"b\xff"' + raw[at + len(b'"task":"book"'):])
    assert the_error(file) == f"{file}: not a results.json: the file is not UTF-8 text"


def test_a_file_of_another_major_is_refused(tmp_path: Path) -> None:
    file = make_run(tmp_path) / "results.json"
    file.write_text(file.read_text(encoding="utf-8").replace('"schema_version": "1.6"', '"schema_version": "2.0"', 1),
                    encoding="utf-8")
    assert "written with results schema 2.0 by pytest-sandtable" in the_error(file)


def test_a_newer_minor_with_a_new_trial_field_is_still_read_a_trial_at_a_time(tmp_path: Path) -> None:
    file = make_run(tmp_path) / "results.json"
    text = file.read_text(encoding="utf-8").replace('"schema_version": "1.6"', '"schema_version": "1.99"', 1)
    file.write_text(text.replace('{"domain":"desk",', '{"domain":"desk","mood":"fine",'), encoding="utf-8")
    stored, whole = stored_as_read(file)
    with stored:
        assert stored.streamed
        assert_same(stored, whole, file)
        assert {t["mood"] for t in stored.trials()} == {"fine"}


def test_trials_given_again_after_the_list_are_read_as_json_reads_them(tmp_path: Path) -> None:
    file = make_run(tmp_path) / "results.json"
    text = file.read_text(encoding="utf-8")
    file.write_text(text.replace('\n "tasks": [', '\n "trials": [],\n "tasks": [', 1), encoding="utf-8")
    stored, whole = stored_as_read(file)
    assert not stored.streamed
    assert_same(stored, whole, file)
    assert len(stored) == 0


def test_a_file_written_over_while_it_is_read(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    file = run / "results.json"
    with open_results(run) as stored:
        trials = stored.trials()
        assert next(trials)["trial"] == 1
        file.write_text(file.read_text(encoding="utf-8").replace('"booked"', '"held"'), encoding="utf-8")
        os.utime(file, ns=(0, 0))  # a new modification time even on a coarse clock
        with pytest.raises(ResultsError) as e:
            next(trials)
    assert str(e.value) == f"{file}: it changed while it was being read: run the command again"


def test_a_missing_file(tmp_path: Path) -> None:
    assert the_error(tmp_path / "nowhere.json") == f"{tmp_path / 'nowhere.json'}: no such file"
