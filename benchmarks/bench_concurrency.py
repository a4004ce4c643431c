"""Many trials in flight: how much each agent turn stretches, and the run against its bound.

Every agent turn waits 100 ms (as a model call would), so a turn the engine times
(``latency`` of each trial in results.json: from the call to the reply) ideally
takes 100 ms whatever the number in flight; what it takes beyond that is the
engine's and the plugin's overhead (event-loop scheduling, threads, the per-turn
work of the trial loop, pytest's per-item work competing for the interpreter).
Prints, per level N (``--sandtable-concurrency``):

- the agent turn as the engine timed it (median and mean), the agent's own latency
  (the mean of what its 100 ms wait took as the agent itself timed it: on a busy
  machine the loop wakes late for the agent too), and the stretch: the engine's mean
  over the agent's own (the aim is at most 1.02), then over the nominal 100 ms;
- the test loop (first item to last, from inside pytest) against the "slots" bound,
  ceil(trials / (W x N)) x turns x 0.1 s, the least equal trials can take in W x N
  slots (200 trials do not divide into 32), and against the ideal trials x turns x
  0.1 / (W x N);
- the whole pytest process: wall seconds and CPU seconds (user + system of pytest
  and its xdist workers).

Each level runs ``--repeat`` times (levels alternating); the medians are printed.

    python benchmarks/bench_concurrency.py [--trials 200] [--turns 5] [--levels 1,8,32]
                                           [--sync] [--workers W] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
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
      script: {script}
    expect:
      called: [read_note]
"""

AGENTS = '''\
import asyncio
import atexit
import os
import time


_pending = []


def _flush():
    # written at exit only: a write between the agent's reply and the engine's clock would
    # count as the engine's time on a busy machine
    if _pending:
        with open(os.environ["BENCH_OWN"], "a") as f:
            f.write("".join(f"{{x:.6f}}\\n" for x in _pending))


atexit.register(_flush)


def _reply(turn):
    if len(turn.messages) == 1:
        turn.call_tool("read_note", {{"id": "n-1"}})
        return "It says hello."
    return "Anything else?"


async def async_agent(turn):
    t0 = time.perf_counter()
    await asyncio.sleep({turn})
    _pending.append(time.perf_counter() - t0)  # the agent's own latency, as it sees it
    return _reply(turn)


def sync_agent(turn):
    t0 = time.perf_counter()
    time.sleep({turn})
    _pending.append(time.perf_counter() - t0)
    return _reply(turn)
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
        _t["end_at"] = time.time()


def pytest_runtest_logstart(nodeid, location):
    if "start" not in _t:
        _t["start"], _t["start_at"] = time.perf_counter(), time.time()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if "end" in _t and "start" in _t and not hasattr(session.config, "workerinput"):
        with open(os.environ["BENCH_TIMES"], "w") as f:
            json.dump({"loop": _t["end"] - _t["start"], "start_at": _t["start_at"], "end_at": _t["end_at"]}, f)
'''


def run_once(root: Path, agent: str, k: int, n: int, workers: int) -> dict[str, float]:
    """One pytest process: loop, wall and CPU seconds, and every agent turn's latency."""
    times, out, own = root / "times.json", root / "out", root / "own.txt"
    own.unlink(missing_ok=True)
    env = dict(os.environ, BENCH_TIMES=str(times), BENCH_OWN=str(own), PYTHONPATH=str(root))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, t0_at = time.perf_counter(), time.time()
    proc = subprocess.run(
        # hypothesis is this project's development dependency, not a user's: its plugin imports
        # it at every process's terminal summary (1.2 s a process here), xdist's workers too
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
         f"--sandtable-k={k}", f"--sandtable-agent={agent}", f"--sandtable-concurrency={n}",
         f"--sandtable-out={out}", str(root),
         *(["-p", "xdist", "-n", str(workers)] if workers else [])],
        cwd=root, env=env, capture_output=True, text=True,
    )
    wall, t1_at = time.perf_counter() - t0, time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed at N={n} (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-3000:]}")
    trials = json.loads((out / "results.json").read_text())["trials"]
    turns = [x for t in trials for x in t["latency"]]
    own_turns = [float(line) for line in own.read_text().split()]
    timed = json.loads(times.read_text())
    return {
        "loop": timed["loop"],
        "before_loop": timed["start_at"] - t0_at,  # start-up, collection, xdist's workers booting
        "after_loop": t1_at - timed["end_at"],  # the run's end: results, report, workers stopping
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "turn_median": statistics.median(turns),
        "turn_mean": statistics.fmean(turns),
        "own_mean": statistics.fmean(own_turns),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--turns", type=int, default=5, help="agent turns per trial (default 5)")
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--sync", action="store_true", help="use a sync agent (runs in threads) instead of async")
    ap.add_argument("--workers", type=int, default=0,
                    help="pytest-xdist workers (-n W); trials in flight are W x N, so the bounds divide by W x N")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each level (the medians are printed)")
    ap.add_argument("--xdist-ratio", type=int, default=0, metavar="W",
                    help="instead: at each level, alternate -n 0 and -n W runs and print -n W's wall over -n 0's "
                         "(the same per-process concurrency N in both)")
    a = ap.parse_args()
    k = 4
    tasks = a.trials // k
    script = json.dumps(["Go on."] * (a.turns - 2) + ["Thanks."]) if a.turns > 1 else "[]"
    levels = [int(x) for x in a.levels.split(",")]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "sandtable.yaml").write_text(
            DOMAIN_HEAD + "".join(TASK.format(i=i, script=script) for i in range(tasks))
        )
        (root / "bench_agents.py").write_text(AGENTS.format(turn=TURN_SECONDS))
        (root / "conftest.py").write_text(TIMER)
        agent = "bench_agents:sync_agent" if a.sync else "bench_agents:async_agent"
        if a.xdist_ratio:
            xdist_ratio(root, agent, k, tasks * k, a.turns, levels, a.xdist_ratio, a.repeat)
            return
        workers = f", {a.workers} xdist workers x N" if a.workers else ""
        print(f"{tasks * k} trials x {a.turns} agent turns x {TURN_SECONDS * 1000:.0f} ms, agent {agent}{workers}; "
              f"median of {a.repeat} runs")
        runs: dict[int, list[dict[str, float]]] = {n: [] for n in levels}
        for i in range(a.repeat):
            for n in levels:
                r = run_once(root, agent, k, n, a.workers)
                runs[n].append(r)
                print(f"  run {i + 1} N={n}: turn mean {r['turn_mean'] * 1000:.1f} ms (the agent's own "
                      f"{r['own_mean'] * 1000:.1f} ms), loop {r['loop']:.2f} s, "
                      f"wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s", flush=True)
        print(f"{'N':>4} {'turn p50':>9} {'turn mean':>9} {'own mean':>9} {'stretch':>8} {'/100ms':>7} "
              f"{'slots s':>8} {'loop s':>7} "
              f"{'loop/slots':>10} {'loop/ideal':>10} {'wall s':>7} {'CPU s':>6}")
        for n in levels:
            flight = n * max(1, a.workers)
            ideal = tasks * k * a.turns * TURN_SECONDS / flight
            # equal trials fill the slots in waves: ceil(trials / slots) trial-lengths at the least
            slots = -(-tasks * k // flight) * a.turns * TURN_SECONDS
            m = {key: statistics.median(r[key] for r in runs[n]) for key in runs[n][0]}
            print(f"{n:>4} {m['turn_median'] * 1000:>7.1f}ms {m['turn_mean'] * 1000:>7.1f}ms "
                  f"{m['own_mean'] * 1000:>7.1f}ms {m['turn_mean'] / m['own_mean']:>8.3f} "
                  f"{m['turn_mean'] / TURN_SECONDS:>7.3f} {slots:>8.2f} {m['loop']:>7.2f} {m['loop'] / slots:>10.3f} "
                  f"{m['loop'] / ideal:>10.3f} {m['wall']:>7.2f} {m['cpu']:>6.2f}")


def xdist_ratio(root: Path, agent: str, k: int, trials: int, turns: int, levels: list[int], workers: int,
                repeat: int) -> None:
    """-n W against -n 0 at the same per-process concurrency, runs alternating: the wall ratio (the aim
    for agents that wait on a model: at most 0.55 with W = 2) and the bound it is held to, the slot
    bound of W x N trials in flight over that of N."""
    print(f"{trials} trials x {turns} agent turns x {TURN_SECONDS * 1000:.0f} ms, agent {agent}; "
          f"-n {workers} against -n 0 at the same N, alternating, medians of {repeat}")
    print(f"{'N':>4} {'-n 0 wall':>10} {'-n W wall':>10} {'ratio':>6} {'loop ratio':>10} "
          f"{'slot bound':>10}  every ratio")
    for n in levels:
        walls: dict[int, list[float]] = {0: [], workers: []}
        loops: dict[int, list[float]] = {0: [], workers: []}
        outside: dict[int, list[tuple[float, float]]] = {0: [], workers: []}
        for _ in range(repeat):
            for w in (0, workers):
                r = run_once(root, agent, k, n, w)
                walls[w].append(r["wall"])
                loops[w].append(r["loop"])
                outside[w].append((r["before_loop"], r["after_loop"]))
        ratios = [b / a for a, b in zip(walls[0], walls[workers], strict=True)]
        bound = -(-trials // (n * workers)) / -(-trials // n)
        print(f"{n:>4} {statistics.median(walls[0]):>9.2f}s {statistics.median(walls[workers]):>9.2f}s "
              f"{statistics.median(walls[workers]) / statistics.median(walls[0]):>6.3f} "
              f"{statistics.median(loops[workers]) / statistics.median(loops[0]):>10.3f} {bound:>10.3f}  "
              + " ".join(f"{x:.3f}" for x in ratios), flush=True)
        for w in (0, workers):
            print(f"{'':>4} -n {w}: loop {statistics.median(loops[w]):.2f}s, before the loop "
                  f"{statistics.median(b for b, _ in outside[w]):.2f}s, after it "
                  f"{statistics.median(a for _, a in outside[w]):.2f}s (medians)", flush=True)


if __name__ == "__main__":
    main()
