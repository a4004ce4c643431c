"""``compare`` on two runs of 20,000 trials each: seconds and peak memory.

Generates, in a process of its own, two results.json files into a temporary folder
(the default: 2,500 tasks x 8 trials, 10 tags, each trial with a short transcript, two
tool calls and its checks, the second run with a few hundred tasks moved), then runs
the real command
``python -m pytest_sandtable compare A B --format F`` in a subprocess for each format,
``--repeat`` times, printing the wall time of each run, the median wall and CPU time
(user + system), and the largest peak resident memory of the runs (each one's own
``ru_maxrss``, from ``os.wait4``). Reading and checking the files against the JSON
Schema is part of the time, as it is for a user; reading both files
(:func:`~pytest_sandtable.report.compare.read_runs`) and
:func:`~pytest_sandtable.report.compare.compare` alone are timed apart, in-process.

    python benchmarks/bench_compare.py [--tasks 2500] [--k 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_regrade import run_measured

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2500)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--generate-into", metavar="DIR", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate_into:
        generate(Path(args.generate_into), args.tasks, args.k)
        return
    with tempfile.TemporaryDirectory() as tmp:
        # in a process of its own: this one's size would count in the measured children's
        # peak (a forked child has the parent's pages until its exec, and Linux keeps that
        # high-water mark in the child's ru_maxrss)
        subprocess.run([sys.executable, __file__, "--generate-into", tmp, "--tasks", str(args.tasks),
                        "--k", str(args.k)], check=True)
        a, b = Path(tmp) / "a" / "results.json", Path(tmp) / "b" / "results.json"
        for fmt in ("terminal", "markdown", "json"):
            argv = [sys.executable, "-m", "pytest_sandtable", "compare", str(a), str(b), "--format", fmt]
            # run elsewhere than the repository: `-m` puts the current folder first on sys.path
            measured = [run_measured(argv, Path(tmp)) for _ in range(args.repeat)]
            print(f"compare --format {fmt:8}: " + ", ".join(f"{m[0]:.2f}" for m in measured)
                  + f" s; median {statistics.median(m[0] for m in measured):.2f} s, "
                  f"CPU {statistics.median(m[1] for m in measured):.2f} s; "
                  f"peak RSS {max(m[2] for m in measured):.0f} MiB")

        from pytest_sandtable.report.compare import compare, read_runs

        start, cpu = time.perf_counter(), time.process_time()
        runs = read_runs([str(a), str(b)])
        read, read_cpu = time.perf_counter() - start, time.process_time() - cpu
        start = time.perf_counter()
        cmp = compare(*runs)
        print(f"in-process: read_runs both {read:.2f} s (CPU {read_cpu:.2f} s); compare() "
              f"{time.perf_counter() - start:.2f} s ({sum(t.beyond_chance == 'regressed' for t in cmp.tasks)} "
              f"tasks regressed beyond chance, {len(cmp.tags)} tags)")


def generate(folder: Path, tasks: int, k: int) -> None:
    """The two runs, as folder/a/results.json and folder/b/results.json."""
    start = time.perf_counter()
    a = write(folder / "a", trials(tasks, k, seed=1, shift=0), k)
    b = write(folder / "b", trials(tasks, k, seed=2, shift=tasks // 10), k)
    print(f"generated 2 x {tasks * k:,} trials ({tasks:,} tasks x {k}) in {time.perf_counter() - start:.1f} s; "
          f"files {a.stat().st_size / 1e6:.1f} MB and {b.stat().st_size / 1e6:.1f} MB")

if __name__ == "__main__":
    main()
