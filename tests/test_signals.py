"""SIGTERM (a CI job cancelled, ``timeout``, ``docker stop``, Kubernetes) stops a run as
Ctrl-C does: the trials that finished are written, the run is marked interrupted and
exits 2; with and without pytest-xdist (where the controller alone gets it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name == "nt", reason="POSIX signals")

DOMAIN = """\
version: 1
name: sig
world:
  notes:
    key: id
    rows:
      - { id: N-1, text: hello }
tools:
  - name: read_note
    description: Read a note.
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
  - id: hello
    user: { opening: "Hello" }
    expect: { reply_includes: ["Hello"] }
"""

# the agent answers the first trials at once, then hangs: a run stopped in the middle;
# each answered trial leaves a file, the evidence the test waits for
CONFTEST = """\
import os
import time
from pathlib import Path

import pytest

DONE = Path(os.environ["SIG_DONE"])


@pytest.fixture(scope="session")
def sandtable_agent():
    def agent(turn):
        if len(list(DONE.iterdir())) >= 3:
            time.sleep(60)
        (DONE / f"{os.getpid()}-{time.monotonic_ns()}").write_text("")
        return "Hello!"
    return agent
"""


def stopped_by_sigterm(pytester: pytest.Pytester, *args: str) -> tuple[int, str, Path]:
    """Start the run in a process of its own, wait for three answered trials, send SIGTERM
    to it (only to it: under xdist, the controller); its exit status, output and the
    folder of answered trials."""
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("conftest.py").write_text(CONFTEST, encoding="utf-8")
    done = pytester.path / "done"
    done.mkdir()
    env = dict(os.environ, SIG_DONE=str(done))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--sandtable-k=6",
         "--sandtable-out=out", *args],
        cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(done.iterdir())) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before its third trial"
            time.sleep(0.05)
        time.sleep(0.3)  # the third trial's report reaches the recorder
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, done


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["one-process", "xdist-2"])
def test_sigterm_writes_the_finished_trials_and_marks_the_run_interrupted(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    if args:
        pytest.importorskip("xdist")
    status, out, done = stopped_by_sigterm(pytester, *args)
    assert status == 2, out  # pytest's exit status for an interrupted run, as with Ctrl-C
    lines = out.splitlines()
    answered = len(list(done.iterdir()))
    assert f"{answered} trials of 1 task: {answered} passed, 0 failed, 0 errored (left out of pass^k)   " \
           "agent: conftest:agent   user: scripted" in lines, out
    assert "sandtable: results in out/" in lines
    assert ("sandtable gate failed: a run that stopped early fails even with no gate set: the run stopped early "
            "(interrupted), so these results cover only the trials that ran") in lines
    assert any(line.strip("! ") == "KeyboardInterrupt: SIGTERM: the run stops as with Ctrl-C" for line in lines), out
    doc = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))
    assert [t["verdict"] for t in doc["trials"]] == ["passed"] * answered
    assert doc["run"]["stopped_early"] == "interrupted"
    assert doc["gate"]["passed"] is False
    assert (pytester.path / "out" / "report.html").is_file()
