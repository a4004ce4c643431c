"""Many trials in flight (--sandtable-concurrency): overlap, order, output attribution,
-x, Ctrl-C, and composition with xdist."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest_plugins = ["pytester"]

DOMAIN = """\
version: 1
name: waits
world:
  notes:
    key: id
    rows:
      - { id: n-1, text: hello }
tools:
  - name: read_note
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
""" + "".join(
    f"""\
  - id: t{i}
    user: {{ opening: "Read note n-1 please.", script: ["Thanks."] }}
    expect:
      called: [read_note]
"""
    for i in range(6)
)

# An agent module: every turn waits, records how many turns are in flight at once,
# prints which trial it is, and fails task t3 on purpose.
AGENTS = """\
import asyncio, json, os, threading, time

_lock = threading.Lock()
_now = 0
_peak = 0

def _enter():
    global _now, _peak
    with _lock:
        _now += 1
        _peak = max(_peak, _now)
        with open(os.environ["PEAK_FILE"], "w") as f:
            f.write(str(_peak))

def _leave():
    global _now
    with _lock:
        _now -= 1

async def agent(turn):
    _enter()
    try:
        print(f"agent output of {turn.trial.task_id}[{turn.trial.trial}]")
        await asyncio.sleep(float(os.environ.get("TURN_SECONDS", "0.05")))
        if turn.trial.task_id == "t3":
            return "I will not read it."
        if len(turn.messages) == 1:
            turn.call_tool("read_note", {"id": "n-1"})
            return "It says hello."
        return "Bye."
    finally:
        _leave()

def sync_agent(turn):
    _enter()
    try:
        print(f"agent output of {turn.trial.task_id}[{turn.trial.trial}]")
        time.sleep(float(os.environ.get("TURN_SECONDS", "0.05")))
        if len(turn.messages) == 1:
            turn.call_tool("read_note", {"id": "n-1"})
            return "It says hello."
        return "Bye."
    finally:
        _leave()
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("wait_agents.py").write_text(AGENTS, encoding="utf-8")
    monkeypatch.setenv("PEAK_FILE", str(pytester.path / "peak.txt"))
    monkeypatch.syspath_prepend(str(pytester.path))
    return pytester


def peak(pytester: pytest.Pytester) -> int:
    return int(pytester.path.joinpath("peak.txt").read_text())


def test_up_to_n_trials_are_in_flight_and_items_report_in_order(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "-v", "--sandtable-k=2", "--sandtable-agent=wait_agents:agent", "--sandtable-concurrency=4"
    )
    result.assert_outcomes(passed=10, failed=2)
    assert peak(project) == 4
    names = [line.split(" ")[0] for line in result.outlines if line.startswith("sandtable.yaml::")]
    assert names == [f"sandtable.yaml::t{i}[{j}-2]" for i in range(6) for j in (1, 2)]


def test_concurrency_one_runs_one_trial_at_a_time(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--sandtable-k=2", "--sandtable-agent=wait_agents:agent")
    result.assert_outcomes(passed=10, failed=2)
    assert peak(project) == 1


def test_sync_agents_run_in_threads_and_overlap_too(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--sandtable-agent=wait_agents:sync_agent", "--sandtable-concurrency=3", "-k", "not t3"
    )
    result.assert_outcomes(passed=5, deselected=1)
    assert peak(project) == 3


def test_what_a_trial_prints_is_shown_with_its_own_item(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--sandtable-k=2", "--sandtable-agent=wait_agents:agent", "--sandtable-concurrency=4", "-rA"
    )
    result.assert_outcomes(passed=10, failed=2)
    text = result.stdout.str()
    # each item's captured stdout names that item's trial only
    for i in range(6):
        for j in (1, 2):
            block = text.split(f"_ t{i}[{j}-2] _", 1)[1].split("\n_", 1)[0]
            said = {line for line in block.splitlines() if line.startswith("agent output of")}
            assert said == {f"agent output of t{i}[{j}]"}, (i, j, said)


def test_x_stops_at_the_first_failure_and_cancels_pending_trials(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "-x", "--sandtable-k=2", "--sandtable-agent=wait_agents:agent", "--sandtable-concurrency=4"
    )
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])


def test_maxfail_counts_failed_trials(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--maxfail=2", "--sandtable-k=2", "--sandtable-agent=wait_agents:agent", "--sandtable-concurrency=4"
    )
    result.assert_outcomes(passed=6, failed=2)


def test_composes_with_xdist(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--sandtable-k=2", "--sandtable-agent=wait_agents:agent",
        "--sandtable-concurrency=3",
    )
    result.assert_outcomes(passed=10, failed=2)
    result.stdout.fnmatch_lines(["12 trials of 6 tasks: 10 passed, 2 failed, 0 errored*"])


def test_ctrl_c_stops_the_run_promptly(project: pytest.Pytester) -> None:
    env = dict(os.environ, TURN_SECONDS="30", PYTHONPATH=str(project.path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sandtable-agent=wait_agents:agent",
         "--sandtable-concurrency=4"],
        cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 20
    while not project.path.joinpath("peak.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert project.path.joinpath("peak.txt").exists(), "no trial started"
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("pytest did not stop within 15 s of Ctrl-C")
    assert "KeyboardInterrupt" in out
    assert proc.returncode == 2
