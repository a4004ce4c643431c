"""Hostile files where a results.json, a recording or a domain-cache entry is expected:
a named pipe (which blocks ``open()``), a link to ``/dev/zero`` (endless), a huge sparse
file, numbers and nesting Python will not read, a summary that does not count the
trials. Each is read boundedly or refused with one ``error:`` line naming the file.

The commands run in a child process with a timeout and a cap on its address space, so
that a regression fails the test (a timeout, a MemoryError) instead of hanging the
suite or eating the machine's memory. Huge files are sparse: nothing is written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _sandtable_shop import PLUGIN_ARGS, make_shop
from test_domain_cache import FREIGHT, padded
from test_recording import OPENING_ONLY
from test_regrade import make_run

from pytest_sandtable.cli import main
from pytest_sandtable.domain import cache
from pytest_sandtable.domain.files import FileRefused, read_at_most, read_regular, write_atomic

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                                reason="named pipes and /dev/zero are POSIX")

ADDRESS_SPACE = 3 * 2**30  # of a child: a reader that does not stop meets MemoryError there
TIMEOUT = 30  # seconds: a child blocked on a named pipe fails the test after this
HUGE = 5 * 2**30  # a sparse file of this size costs no disk
COMMANDS = {  # command -> its arguments around the results.json given
    "report": lambda f: ["report", f, "-o", "out"],
    "merge": lambda f: ["merge", f, "-o", "out"],
    "compare": lambda f: ["compare", "run/results.json", f],
    "regrade": lambda f: ["regrade", f, "-o", "out"],
}


def _capped() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def child(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python argv...`` in ``cwd``, capped and timed out (see the module docstring)."""
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=TIMEOUT, preexec_fn=_capped)


def cli(cwd: Path, *argv: str) -> tuple[int, str]:
    """``python -m pytest_sandtable argv...``: its exit status and its stderr."""
    proc = child(cwd, "-m", "pytest_sandtable", *argv)
    return proc.returncode, proc.stderr


def hostile(path: Path, kind: str) -> Path:
    """Make ``path`` a named pipe, a link to /dev/zero, or a 5 GiB sparse file."""
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        with path.open("wb") as f:
            f.truncate(HUGE)
    return path


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A folder holding ``run/results.json`` (three trials: one passed, two failed) and its domain."""
    make_run(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------- results.json

REFUSED = {
    "fifo": "not a regular file but a named pipe (FIFO): a results.json is read only from a regular file",
    "zero": "not a regular file but a character device: a results.json is read only from a regular file",
    "huge": "too big: 5 GiB, over the 4 GiB cap of a results.json",
}


@pytest.mark.parametrize("kind", list(REFUSED))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_results_json_that_is_no_regular_file_or_too_big_is_refused_in_one_line(
        run: Path, command: str, kind: str) -> None:
    hostile(run / "bad.json", kind)
    assert cli(run, *COMMANDS[command]("bad.json")) == (2, f"error: bad.json: {REFUSED[kind]}\n")
    assert not (run / "out").exists()


def _edited(run: Path, old: str, new: str) -> str:
    text = (run / "run" / "results.json").read_text(encoding="utf-8")
    assert old in text
    (run / "bad.json").write_text(text.replace(old, new, 1), encoding="utf-8")
    return text.replace(old, new, 1)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_k_no_run_has_is_refused_before_anything_is_counted(run: Path, command: str) -> None:
    _edited(run, '\n  "k": 3,', '\n  "k": 1000000000000,')  # run.k, the first of the document
    assert cli(run, *COMMANDS[command]("bad.json")) == (2, (
        "error: bad.json: does not match the results schema 1.6 (1 problem):\n"
        "  run.k: 1000000000000 is greater than the maximum of 100000\n"))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_integer_python_will_not_read_is_named_with_its_line(run: Path, command: str) -> None:
    text = _edited(run, '"seed":', '"seed":' + "7" * 5000 + ",\"was_seed\":")
    at = text.index("7" * 5000)
    line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    assert text.split("\n")[line - 1].startswith('  {"domain":')  # a trial's line
    assert cli(run, *COMMANDS[command]("bad.json")) == (2, (
        f"error: bad.json: not a results.json: an integer of 5,000 digits at line {line} column {column} "
        "(Python reads at most 4,300)\n"))


def _stdout(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.mark.parametrize("command", ["report", "merge", "regrade", "compare"])
def test_a_byte_order_mark_is_read_past(run: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.chdir(run)
    shutil.copytree(run / "run", run / "plain")
    shutil.copytree(run / "run", run / "bom")
    file = run / "bom" / "results.json"
    file.write_bytes(b"\xef\xbb\xbf" + file.read_bytes())
    plain = _stdout(capsys, *COMMANDS[command]("plain/results.json"))
    with_bom = _stdout(capsys, *COMMANDS[command]("bom/results.json"))
    assert with_bom[2] == plain[2] == ""
    assert with_bom[0] == plain[0] == (0 if command == "compare" else 1)  # two trials failed
    assert [ln.replace("bom", "plain") for ln in with_bom[1]] == plain[1]


# --------------------------------------------------------------------------- report: the summary and the exit


COUNTS = '\n  "trials": 3,\n  "passed": 1,\n  "failed": 2,'  # the summary's counts, as written


def test_report_warns_of_a_summary_that_does_not_count_the_trials(
        run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(run)
    _edited(run, COUNTS, '\n  "trials": 999,\n  "passed": 1,\n  "failed": 1000,')
    code, out, err = _stdout(capsys, "report", "bad.json", "-o", "out")
    assert err == (
        "warning: bad.json: the summary does not match the trials: it counts 999 trials (1 passed, 1000 failed, "
        "0 errored), the file holds 3 trials (1 passed, 2 failed, 0 errored); the summary below is as recorded, "
        "the exit status is the trials'\n")
    assert out[0].startswith("999 trials of 1 task: 1 passed, 1000 failed")  # as recorded
    assert code == 1
    # a summary claiming every trial passed does not make report exit 0
    _edited(run, COUNTS, '\n  "trials": 3,\n  "passed": 3,\n  "failed": 0,')
    code, out, err = _stdout(capsys, "report", "bad.json", "-o", "out")
    assert err.startswith("warning: bad.json: the summary does not match the trials: it counts 3 trials (3 passed, "
                          "0 failed, 0 errored), the file holds 3 trials (1 passed, 2 failed, 0 errored);")
    assert code == 1
    code, out, err = _stdout(capsys, "report", "run", "-o", "out")  # the file as written: no warning
    assert (code, err) == (1, "")


@pytest.mark.parametrize(("fail", "gate", "status"), [
    pytest.param("refund:2", ["--sandtable-fail-under=0"], 1, id="a-critical-task-failed-under-a-gate"),
    pytest.param("greet:2", ["--sandtable-fail-under=0"], 0, id="a-passing-gate-decides"),
    pytest.param("greet:2", [], 1, id="no-gate-a-trial-failed"),
    pytest.param("", [], 0, id="every-trial-passed"),
])
def test_report_exits_as_the_pytest_run_did(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str], fail: str, gate: list[str],
                                            status: int) -> None:
    for var in ("SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SHOP_FAIL", fail)
    make_shop(pytester)
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--sandtable-out=run", *gate)
    assert result.ret == status
    capsys.readouterr()
    code, out, err = _stdout(capsys, "report", "run")
    assert (code, err) == (status, "")
    if fail == "refund:2":
        assert "  failed: critical task refund failed 1 of 2 trials ([2])" in out


# --------------------------------------------------------------------------- recordings

RECORDING = "cassettes/shop/opening-fixed.json"
AGAIN = "; delete it, or record it again with --sandtable-record=all"
BAD_RECORDINGS = {
    "fifo": "cannot read the recording: not a regular file but a named pipe (FIFO): a recording is read only from "
            "a regular file" + AGAIN,
    "zero": "cannot read the recording: not a regular file but a character device: a recording is read only from "
            "a regular file" + AGAIN,
    "huge": "cannot read the recording: too big: 5 GiB, over the 512 MiB cap of a recording" + AGAIN,
    "nested": "not a recording: nested too deeply to read" + AGAIN,
}


@pytest.mark.parametrize("kind", list(BAD_RECORDINGS))
def test_a_recording_that_cannot_be_read_errors_its_trial_naming_the_file(tmp_path: Path, kind: str) -> None:
    (tmp_path / "shop.sandtable.yaml").write_text(OPENING_ONLY, encoding="utf-8")
    path = tmp_path / RECORDING
    if kind == "nested":
        path.parent.mkdir(parents=True)
        path.write_text("[" * 10_000 + "]" * 10_000, encoding="utf-8")
    else:
        hostile(path, kind)
    proc = child(tmp_path, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                 "--sandtable-record=none", "--sandtable-out=o")
    doc: dict[str, Any] = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    assert [t["error"] for t in doc["trials"]] == [f"{RECORDING}: {BAD_RECORDINGS[kind]}"], proc.stdout
    assert proc.returncode == 1


# --------------------------------------------------------------------------- the domain cache

_LOAD = """\
import sys
from pathlib import Path
from pytest_sandtable.domain import cache
from pytest_sandtable.domain.files import FileRefused, read_at_most, read_regular, write_atomic
print(cache.load_domain_cached(Path(sys.argv[1]), Path(sys.argv[2])).name)
"""


@pytest.mark.parametrize("kind", ["fifo", "zero", "huge"])
def test_a_cache_entry_that_is_no_regular_file_or_too_big_is_rebuilt_over(tmp_path: Path, kind: str) -> None:
    path = padded(FREIGHT, tmp_path / "sandtable.yaml")
    store = tmp_path / "cache"
    domain = cache.load_domain_cached(path, store)
    (entry,) = store.glob("*.domain")
    hostile(entry, kind)
    for _ in range(2):  # the first run rebuilds, the next reads what it wrote
        proc = child(tmp_path, "-c", _LOAD, str(path), str(store))
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{domain.name}\n", "")
        assert entry.is_file() and not entry.is_symlink()
        assert entry.stat().st_size < 2**24
    assert cache._read_entry(entry, domain.sha256) == domain


# --------------------------------------------------------------------------- the helper every reader uses


def test_read_regular_reads_a_file_within_its_cap_and_refuses_anything_else(tmp_path: Path) -> None:
    file = tmp_path / "a.json"
    file.write_bytes(b"x" * 10)
    assert read_regular(file, 10, "a thing") == b"x" * 10
    (tmp_path / "link.json").symlink_to(file)
    assert read_regular(tmp_path / "link.json", 10, "a thing") == b"x" * 10  # a link to a file is followed
    with pytest.raises(FileRefused) as e:
        read_regular(file, 9, "a thing")
    assert str(e.value) == "too big: 10 bytes, over the 9 bytes cap of a thing"
    with pytest.raises(FileRefused) as e:
        read_regular(tmp_path, 9, "a thing")
    assert str(e.value) == "not a regular file but a folder: a thing is read only from a regular file"
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "nope", 9, "a thing")


def test_read_at_most_reads_the_rest_or_one_byte_over_the_cap(tmp_path: Path) -> None:
    file = tmp_path / "a.json"
    file.write_bytes(b"x" * 10)
    with file.open("rb") as f, file.open("ab") as grow:
        f.read(4)
        grow.write(b"y" * 5)  # after it was opened: the rest is what it holds now
        grow.flush()
        assert read_at_most(f, 100) == b"x" * 6 + b"y" * 5
    with file.open("rb") as f:
        assert read_at_most(f, 3) == b"xxxx"  # one byte over: the caller can tell


def test_a_file_written_over_a_link_to_a_device_gets_the_umasks_mode(tmp_path: Path) -> None:
    entry = hostile(tmp_path / "entry", "zero")
    write_atomic(entry, b"fresh")
    mask = os.umask(0)
    os.umask(mask)
    assert not entry.is_symlink() and entry.read_bytes() == b"fresh"
    assert entry.stat().st_mode & 0o777 == 0o666 & ~mask  # not /dev/zero's 0666
