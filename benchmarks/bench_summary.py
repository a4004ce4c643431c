"""The end-of-run summary: CPU seconds of ``summarize`` (pass^j and pass@j for every j,
with their bootstrap intervals, per task, tag and domain) at growing run sizes.

    python benchmarks/bench_summary.py

Trials are built directly (no engine), with half of the tasks always passing, a sixth
always failing and the rest flaky, six tags plus three groups, and an owner on every
failure. CPU time (``time.process_time``), best of 3 (one run for the largest), so a
busy machine inflates it less than wall time.
"""

from __future__ import annotations

import random
import time

from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.summary import summarize


def make(tasks: int, k: int, domains: tuple[str, ...] = ("shop",), seed: int = 1) -> list[TrialResult]:
    rng = random.Random(seed)
    out = []
    for t in range(tasks):
        u = rng.random()
        p = 1.0 if u < 0.5 else (0.0 if u < 0.65 else rng.random())
        dom = domains[t % len(domains)]
        for i in range(1, k + 1):
            verdict = "passed" if rng.random() < p else "failed"
            failed = verdict == "failed"
            out.append(TrialResult(
                domain=dom, task=f"task-{t}", trial=i, k=k, seed=i, verdict=verdict,
                tags=[f"tag{t % 6}", f"grp{t % 3}"], location=f"{dom}.yaml:{t + 1}", agent="a", user="u",
                checks=[Check("state", f"state:x#{t % 5}", False, "no")] if failed else [],
                attribution={"owner": rng.choice(["agent", "task", "user"]), "evidence": "e"} if failed else None,
                latency=[0.1, 0.2]))
    return out


def main() -> None:
    for tasks, k, domains in [(50, 4, ("shop",)), (115, 32, ("shop",)), (115, 32, ("shop", "bank")),
                              (115, 174, ("shop",))]:
        trials = make(tasks, k, domains)
        best = float("inf")
        for _ in range(3 if len(trials) < 5000 else 1):
            t0 = time.process_time()
            summary = summarize(trials, k=k)
            best = min(best, time.process_time() - t0)
        print(f"{len(trials):>6} trials ({tasks} tasks x k={k}, {len(domains)} domain(s)): "
              f"summarize {best:.3f} s CPU, {summary['intervals']['resamples']} resamples")


if __name__ == "__main__":
    main()
