"""Replaying recorded model calls against calling a slow model: wall time of 50 trials.

A local server speaking the Anthropic Messages format (``tests/fakes.py``'s
``FakeAnthropic``, driven by the real anthropic SDK) answers every request after
``--latency`` seconds (default 0.1 s, a fast model). The shop domain's
``opening-fixed`` task is run ``--trials`` times (``--sandtable-k``) with
``claude:claude-sonnet-4-6`` as the agent and the scripted user, three model calls a
trial, in subprocesses:

1. live, recording off (as every run was before ``--sandtable-record``);
2. live, recording (``--sandtable-record=all``): what a scheduled re-record costs;
3. replayed (``--sandtable-record=none``) with the server stopped.

Each is run ``--repeat`` times (the recording is made again before each replay);
printed are every run's wall time (the whole pytest process: start-up, importing the
anthropic SDK and collection included) and its test-loop time (first trial to last,
recorded by a small ``conftest.py``), the medians and the ratios live / replayed.

    python benchmarks/bench_replay.py [--trials 50] [--latency 0.1] [--repeat 3] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fakes import SHOP, Delay, FakeAnthropic, Reply, Request, claude_text, claude_tools

ONE_TASK = SHOP[: SHOP.index("tasks:")] + "tasks:\n" + SHOP[SHOP.index("  - id: opening-fixed"):]


def desk(latency: float) -> object:
    """Answers a trial's three calls from their content (trials may interleave)."""

    def answer(req: Request) -> Delay:
        last = req.json["messages"][-1]["content"]
        reply: Reply
        if last[0]["type"] == "tool_result":
            reply = claude_text("Your order O-1001 was delivered.")
        elif last[0]["text"].startswith("Hi, where is my order"):
            reply = claude_tools(("toolu_1", "get_order", {"order_id": "O-1001"}))
        else:
            reply = claude_text("Glad to help!")
        return Delay(latency, reply)

    return answer


TIMING_CONFTEST = """\
import time
from pathlib import Path

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    t0 = time.perf_counter()
    try:
        return (yield)
    finally:
        Path("loop.txt").write_text(str(time.perf_counter() - t0))
"""


def run(folder: Path, base_url: str, trials: int, concurrency: int, *record: str) -> tuple[float, float]:
    """One pytest process: its wall time and its test-loop time, in seconds."""
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-bench-0000", "ANTHROPIC_BASE_URL": base_url}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
           f"--sandtable-k={trials}", f"--sandtable-concurrency={concurrency}",
           "--sandtable-agent=claude:claude-sonnet-4-6", "--sandtable-out=out", *record]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0 or f"{trials} passed" not in done.stdout:
        sys.exit(f"the run failed ({' '.join(record) or 'live'}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return took, float((folder / "loop.txt").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=1)
    args = ap.parse_args()
    times: dict[str, list[tuple[float, float]]] = {"live": [], "live, recording": [], "replayed": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "shop.sandtable.yaml").write_text(ONE_TASK, encoding="utf-8")
        (folder / "conftest.py").write_text(TIMING_CONFTEST, encoding="utf-8")
        for i in range(args.repeat):
            with FakeAnthropic(responder=desk(args.latency)) as server:  # type: ignore[arg-type]
                url = server.base_url
                times["live"].append(run(folder, url, args.trials, args.concurrency))
                times["live, recording"].append(run(folder, url, args.trials, args.concurrency,
                                                    "--sandtable-record=all"))
                calls = len(server.requests)
            times["replayed"].append(run(folder, url, args.trials, args.concurrency, "--sandtable-record=none"))
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1][0]:.2f} s (loop {v[-1][1]:.2f} s)"
                                                 for k, v in times.items()) + f"; {calls} model calls live")
    wall = {k: statistics.median(t[0] for t in v) for k, v in times.items()}
    loop = {k: statistics.median(t[1] for t in v) for k, v in times.items()}
    print(f"\n{args.trials} trials, {args.latency * 1000:g} ms per model call, concurrency {args.concurrency}, "
          f"median of {args.repeat}:")
    print(f"  {'':16} {'wall':>8} {'loop':>8}")
    for k in times:
        print(f"  {k:16} {wall[k]:7.2f}s {loop[k]:7.2f}s")
    print(f"  live / replayed: {wall['live'] / wall['replayed']:.1f}x wall, "
          f"{loop['live'] / loop['replayed']:.1f}x loop; "
          f"recording adds {loop['live, recording'] / loop['live'] - 1:+.1%} to the live loop")


if __name__ == "__main__":
    main()
