"""``compare`` on two runs of 20,000 trials each: seconds and peak memory.

Generates two results.json files into a temporary folder (the default: 2,500 tasks x
8 trials, 10 tags, each trial with a short transcript, two tool calls and its checks,
the second run with a few hundred tasks moved), then runs the real command
``python -m pytest_sandtable compare A B --format F`` in a subprocess for each format,
``--repeat`` times, printing the wall time of each run, the median, and the
subprocess's peak resident memory (``ru_maxrss``). Reading and checking the files
against the JSON Schema is part of the time, as it is for a user; the time of
:func:`~pytest_sandtable.report.compare.compare` alone is printed apart.

    python benchmarks/bench_compare.py [--tasks 2500] [--k 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.results_json import RunMeta, build_results, write_run


def trials(tasks: int, k: int, seed: int, shift: int) -> list[TrialResult]:
    """``tasks`` x ``k`` trials; each task has its own success rate, and ``shift`` tasks of
    the second run a lower one (so some changes are beyond chance and some are not)."""
    rng = random.Random(seed)
    rates = random.Random(0)
    out = []
    for i in range(tasks):
        rate = rates.choice([1.0, 1.0, 0.95, 0.9, 0.75, 0.5, 0.2])
        if i < shift:
            rate = max(0.0, rate - 0.5)
        task = f"task-{i:05d}"
        for n in range(1, k + 1):
            passed = rng.random() < rate
            checks = [Check("state", "state:bookings#1", passed, "" if passed else "bookings: no row matched"),
                      Check("invariant", f"rule-{i % 7}", passed or n % 2 == 0,
                            "" if passed or n % 2 == 0 else f"book_load broke rule-{i % 7}")]
            out.append(TrialResult(
                domain="freight", task=task, trial=n, k=k, seed=rng.randrange(2**32),
                verdict="passed" if passed else "failed", tags=[f"tag-{i % 10}"], critical=i % 50 == 0,
                agent="desk", user="scripted", turns=3,
                transcript=[{"role": "user", "text": "Hi, MC 100101 calling about L-1001.", "turn": 0},
                            {"role": "tool", "call": 0},
                            {"role": "agent", "text": "You're verified. L-1001 pays 1,800.", "turn": 1}],
                calls=[{"index": 0, "turn": 1, "tool": "verify_carrier", "args": {"mc_number": "100101"},
                        "ok": True, "result": {"mc_number": "100101", "name": "Blue Ridge Haulers"},
                        "error": None, "violations": []}],
                checks=checks, latency=[0.2, 0.4, 0.3], duration=1.2, location=f"freight/sandtable.yaml:{i + 1}",
                usage={"agent": {"claude-sonnet-4-5": {"input": 3000, "output": 200, "cache_read": 0,
                                                       "cache_write": 0, "calls": 3}}},
            ))
    return out


def write(folder: Path, ts: list[TrialResult], k: int) -> Path:
    meta = RunMeta(domains=[{"name": "freight", "path": "freight/sandtable.yaml", "sha256": "a" * 64}],
                   agent="desk", user="scripted", k=k, run_seed=0)
    write_run(build_results(ts, meta), folder)
    return folder / "results.json"


def timed(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and the peak RSS in KiB of one command in a fresh subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    # ru_maxrss of children is the largest of any child so far: compare needs more than the
    # generator's earlier children, which this script does not start
    return seconds, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2500)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        a = write(Path(tmp) / "a", trials(args.tasks, args.k, seed=1, shift=0), args.k)
        b = write(Path(tmp) / "b", trials(args.tasks, args.k, seed=2, shift=args.tasks // 10), args.k)
        print(f"generated 2 x {args.tasks * args.k:,} trials ({args.tasks:,} tasks x {args.k}) in "
              f"{time.perf_counter() - start:.1f} s; files {a.stat().st_size / 1e6:.1f} MB and "
              f"{b.stat().st_size / 1e6:.1f} MB")

        from pytest_sandtable.report.compare import RunDoc, compare
        from pytest_sandtable.report.results_json import read_results

        start = time.perf_counter()
        docs = [read_results(a), read_results(b)]
        read = time.perf_counter() - start
        start = time.perf_counter()
        cmp = compare(RunDoc("a", str(a), docs[0]), RunDoc("b", str(b), docs[1]))
        print(f"in-process: read_results both {read:.2f} s; compare() {time.perf_counter() - start:.2f} s "
              f"({sum(t.beyond_chance == 'regressed' for t in cmp.tasks)} tasks regressed beyond chance, "
              f"{len(cmp.tags)} tags)")

        for fmt in ("terminal", "markdown", "json"):
            argv = [sys.executable, "-m", "pytest_sandtable", "compare", str(a), str(b), "--format", fmt]
            runs = [timed(argv) for _ in range(args.repeat)]
            secs = [s for s, _ in runs]
            peak = max(m for _, m in runs)
            print(f"compare --format {fmt:8}: " + ", ".join(f"{s:.2f}" for s in secs)
                  + f" s; median {statistics.median(secs):.2f} s; peak RSS {peak / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
