"""The terminal summary of a big suite: how many lines, and how wide.

Builds the trials of a τ-bench-retail-sized run in memory (``--tasks`` tasks x ``--k``
trials, default 115 x 174 = 20,010; 9 tags, each task in two; a task passes always,
never, or at its own random rate; a failed trial fails one of ``--modes`` checks, so
the run has that many failure modes), summarizes them with
:func:`pytest_sandtable.summarize` and renders the summary as pytest's ``sandtable``
section prints it (:func:`~pytest_sandtable.report.terminal.render_terminal`), once as
by default and once listing every task (``-v`` / ``--sandtable-all-tasks``). Prints, for
each, the number of lines, the widest line's width and the lines of each part.

    python benchmarks/bench_terminal.py [--tasks 115] [--k 174] [--modes 40] [--show]

``--show`` prints the default rendering itself.
"""

from __future__ import annotations

import argparse
import inspect
import random
import time

from pytest_sandtable import TrialResult, summarize
from pytest_sandtable.engine.results import Check
from pytest_sandtable.report.terminal import render_terminal


def trials(tasks: int, k: int, modes: int) -> list[TrialResult]:
    """``tasks`` x ``k`` trials with a fixed seed, as described above."""
    rng = random.Random(1)
    out = []
    for i in range(tasks):
        rate = rng.choice([1.0, 1.0, 0.0, rng.random()])
        for n in range(1, k + 1):
            passed = rng.random() < rate
            check = f"state:orders#{(i * 7 + n) % modes}"
            out.append(TrialResult(
                domain="retail", task=f"task-{i:03d}", trial=n, k=k, seed=n, verdict="passed" if passed else "failed",
                tags=[f"tag{i % 6}", f"group{i % 3}"], agent="reference", user="scripted",
                checks=[] if passed else [Check("state", check, False, f"orders: no row matched {check}")],
                location=f"retail.sandtable.yaml:{i + 1}"))
    return out


def parts(lines: list[str]) -> dict[str, int]:
    """Lines per part: the parts are separated by blank lines."""
    sizes: dict[str, int] = {}
    for block in "\n".join(lines).split("\n\n"):
        rows = block.split("\n")
        sizes[rows[0][:40]] = len(rows)
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=115)
    ap.add_argument("--k", type=int, default=174)
    ap.add_argument("--modes", type=int, default=40)
    ap.add_argument("--show", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    s = summarize(trials(args.tasks, args.k, args.modes), k=args.k)
    print(f"{s['trials']} trials of {len(s['tasks'])} tasks, k={args.k}, {len(s['tags'])} tags, "
          f"{len(s['failure_modes'])} failure modes (summarized in {time.perf_counter() - started:.1f} s)")
    # a build without the option renders every task always: measure it as it is
    listing = "all_tasks" in inspect.signature(render_terminal).parameters
    renderings = {"default": render_terminal(s, [])}
    if listing:
        renderings["all tasks listed"] = render_terminal(s, [], all_tasks=True)
    for name, lines in renderings.items():
        print(f"{name}: {len(lines)} lines, widest {max(map(len, lines))} characters")
        for head, n in parts(lines).items():
            print(f"  {n:5d}  {head}")
    if args.show:
        print()
        print("\n".join(renderings["default"]))


if __name__ == "__main__":
    main()
