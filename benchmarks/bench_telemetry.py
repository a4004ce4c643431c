"""What ``--sandtable-otel=json`` costs a run (issue 37, item 17): the bundled freight
example at ``--sandtable-k=K`` (60 by default: 1,020 trials, about 9,000 spans), run
without telemetry and with it, alternating, ``--rounds`` times after one unmeasured round
of each. Each run is a subprocess (``python -m pytest example_domains/freight
--sandtable-k=K -q -p no:cacheprovider``, the example's own in-house agent); its CPU is
user + system of the child (``os.times``), its peak memory the child's max RSS
(``resource.getrusage``, the largest so far, so measured in a fresh process per run).

Printed: each round's CPU seconds both ways and their ratio, then the median ratio and
the median extra CPU per trial. The goal is a ratio within 1.10.

    python benchmarks/bench_telemetry.py [--k 60] [--rounds 7] [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(k: int, otel: bool, root: Path = ROOT) -> tuple[float, int, str]:
    code = ("import resource, subprocess, sys, os\n"
            "t = os.times()\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "u = os.times()\n"
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "line = (p.stdout.strip().splitlines() or [''])[-1]\n"
            "print(u.children_user - t.children_user + u.children_system - t.children_system, rss, line, sep='\\t')\n")
    args = [sys.executable, "-m", "pytest", str(root / "example_domains" / "freight"), f"--sandtable-k={k}", "-q",
            "-p", "no:cacheprovider", *(["--sandtable-otel=json"] if otel else [])]
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=root)
    cpu, rss, line = out.stdout.rstrip("\n").split("\t")
    return float(cpu), int(rss), line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="the checkout whose example runs, from its folder (another commit's worktree, with a "
                         "Python whose package is that checkout's)")
    ns = ap.parse_args()
    _run(ns.k, False, ns.root), _run(ns.k, True, ns.root)  # warm-up
    ratios, extra, rss = [], [], []
    trials = 0
    for i in range(ns.rounds):
        plain, p_rss, line = _run(ns.k, False, ns.root)
        traced, t_rss, t_line = _run(ns.k, True, ns.root)
        trials = sum(int(w) for w, word in zip(line.split()[::2], line.split()[1::2]) if word.rstrip(",") in
                     ("passed", "failed", "error", "errors", "skipped")) or trials
        ratios.append(traced / plain)
        extra.append(traced - plain)
        rss.append((p_rss, t_rss))
        print(f"round {i + 1}: {plain:.2f} s without, {traced:.2f} s with --sandtable-otel=json: "
              f"{traced / plain:.3f}x; peak {p_rss / 1024:.0f} / {t_rss / 1024:.0f} MB   ({t_line})")
    per_trial = statistics.median(extra) / trials * 1e6 if trials else float("nan")
    print(f"\nfreight at k = {ns.k} ({trials:,} trials), {ns.rounds} rounds, load average {os.getloadavg()[0]:.2f}")
    print(f"median CPU ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"median extra CPU {per_trial:.0f} µs a trial; peak memory {statistics.median(r[0] for r in rss) / 1024:.0f}"
          f" MB without, {statistics.median(r[1] for r in rss) / 1024:.0f} MB with")


if __name__ == "__main__":
    main()
