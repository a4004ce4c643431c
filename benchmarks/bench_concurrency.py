"""Many trials in flight: wall time of 200 trials against the ideal, at N = 1, 8, 32.

Every agent turn waits 100 ms (as a model call would), so a trial of T agent
turns ideally takes T x 0.1 s and N trials in flight ideally take
trials x T x 0.1 / N. Prints the measured test-loop time (first item to last,
from inside pytest) and the whole pytest process, each against the ideal; and
the loop against the "slots" bound, ceil(trials / N) x T x 0.1 s, the least time
equal trials can take in N slots (200 trials do not divide into 32).

    python benchmarks/bench_concurrency.py [--trials 200] [--levels 1,8,32] [--sync] [--workers W]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TURN_SECONDS = 0.1

DOMAIN_HEAD = """\
version: 1
name: waits
description: A desk whose agent takes 100 ms per turn.
policy: Answer politely.
world:
  notes:
    key: id
    rows:
      - { id: n-1, text: hello }
tools:
  - name: read_note
    description: Read a note.
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
invariants: []
tasks:
"""

TASK = """\
  - id: t{i:03d}
    user:
      persona: A caller.
      instructions: Ask for the note.
      opening: "Hi, can you read me note n-1?"
      script: ["Thanks."]
    expect:
      called: [read_note]
"""

AGENTS = '''\
import asyncio
import time


async def async_agent(turn):
    await asyncio.sleep({turn})
    if len(turn.messages) == 1:
        turn.call_tool("read_note", {{"id": "n-1"}})
        return "It says hello."
    return "Bye."


def sync_agent(turn):
    time.sleep({turn})
    if len(turn.messages) == 1:
        turn.call_tool("read_note", {{"id": "n-1"}})
        return "It says hello."
    return "Bye."
'''

TIMER = '''\
import json, os, time
import pytest

_t = {}


# the test loop: from the first item's start to the end of the loop (not start-up,
# collection, xdist's workers booting, or the results written at session end, which
# the process time includes)
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    try:
        return (yield)
    finally:
        _t["end"] = time.perf_counter()


def pytest_runtest_logstart(nodeid, location):
    _t.setdefault("start", time.perf_counter())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if "end" in _t and "start" in _t and not hasattr(session.config, "workerinput"):
        with open(os.environ["BENCH_TIMES"], "w") as f:
            json.dump({"loop": _t["end"] - _t["start"]}, f)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--sync", action="store_true", help="use a sync agent (runs in threads) instead of async")
    ap.add_argument("--workers", type=int, default=0,
                    help="pytest-xdist workers (-n W); trials in flight are W x N, so the ideal divides by W x N")
    a = ap.parse_args()
    k = 4
    tasks = a.trials // k
    turns = 2  # opening + one script line
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "sandtable.yaml").write_text(DOMAIN_HEAD + "".join(TASK.format(i=i) for i in range(tasks)))
        (root / "bench_agents.py").write_text(AGENTS.format(turn=TURN_SECONDS))
        (root / "conftest.py").write_text(TIMER)
        agent = "bench_agents:sync_agent" if a.sync else "bench_agents:async_agent"
        workers = f", {a.workers} xdist workers x N" if a.workers else ""
        print(f"{tasks * k} trials x {turns} agent turns x {TURN_SECONDS * 1000:.0f} ms, agent {agent}{workers}")
        print(f"{'N':>4} {'ideal s':>8} {'loop s':>8} {'loop/ideal':>10} {'process s':>9} {'process/ideal':>13} "
              f"{'slots s':>8} {'loop/slots':>10}")
        for n in [int(x) for x in a.levels.split(",")]:
            flight = n * max(1, a.workers)
            ideal = tasks * k * turns * TURN_SECONDS / flight
            # equal trials fill N slots in waves: ceil(trials / N) trial-lengths at the least
            slots = -(-tasks * k // flight) * turns * TURN_SECONDS
            times = root / "times.json"
            env = dict(os.environ, BENCH_TIMES=str(times), PYTHONPATH=str(root))
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--sandtable-k={k}",
                 f"--sandtable-agent={agent}", f"--sandtable-concurrency={n}", str(root),
                 *(["-p", "xdist", "-n", str(a.workers)] if a.workers else [])],
                cwd=root, env=env, capture_output=True, text=True,
            )
            wall = time.perf_counter() - t0
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
            if proc.returncode != 0:
                raise SystemExit(f"pytest failed at N={n}: {last}")
            loop = json.loads(times.read_text())["loop"]
            print(f"{n:>4} {ideal:>8.2f} {loop:>8.2f} {loop / ideal:>10.3f} {wall:>9.2f} {wall / ideal:>13.3f} "
                  f"{slots:>8.2f} {loop / slots:>10.3f}")


if __name__ == "__main__":
    main()
