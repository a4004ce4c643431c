"""``regrade`` on a big run: seconds and peak memory to regrade 20,000 stored trials.

Generates the run with the real engine: the freight example's tasks, played by its
in-house desk agent (``example_domains/freight/desk_agent.py``, flaw rate 0.5, so a
good share of trials fail and carry an attribution) and the scripted user, in-process,
``--trials`` trials spread evenly over the 15 tasks; writes results.json with the real
writer. Then edits the domain the way a task author would after reading the failures
(``verify-before-book`` made soft, one more ``reply_includes`` phrase on one task) and runs
``python -m pytest_sandtable regrade RUN EDITED -o OUT`` in a fresh process, ``--repeat``
times. Each process reports its phases (read and check results.json; load the domain
files and find the original; replay and grade every trial; write results.json and
report.html), its wall time, and its peak resident memory (``ru_maxrss``).

    python benchmarks/bench_regrade.py [--trials 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight"

# one regrade in a fresh process, timing its phases as the command runs them
MEASURE = """
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from pytest_sandtable.report.regrade import domain_files, regrade_run
from pytest_sandtable.report.results_json import read_results, write_run
t1 = time.perf_counter()
doc = read_results("run")
t2 = time.perf_counter()
files = domain_files(doc, "run", ["edited.yaml"], Path.cwd())
t3 = time.perf_counter()
out = regrade_run(doc, "run", files)
t4 = time.perf_counter()
write_run(out, "regraded")
t5 = time.perf_counter()
changed = sum(a["verdict"] != b["verdict"] for a, b in zip(doc["trials"], out["trials"]))
print(json.dumps({"import": t1 - t0, "read": t2 - t1, "domains": t3 - t2, "regrade": t4 - t3,
                  "write": t5 - t4, "total": t5 - t0, "trials": len(out["trials"]), "changed": changed,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def generate(folder: Path, trials: int) -> tuple[int, float]:
    """Run the trials and write folder/run/results.json; (trials written, seconds)."""
    sys.path.insert(0, str(FREIGHT))
    from desk_agent import DeskAgent  # type: ignore[import-not-found]

    import pytest_sandtable as st
    from pytest_sandtable.report.results_json import RunMeta, build_results, write_run

    path = folder / "sandtable.yaml"
    path.write_bytes((FREIGHT / "sandtable.yaml").read_bytes())
    domain = st.load_domain(path)
    k = -(-trials // len(domain.tasks))
    agent, user = DeskAgent(flaw_rate=0.5), st.ScriptedUser()
    t0 = time.perf_counter()
    results = [st.run_trial(domain, task.id, agent, user, trial=i, k=k, agent_name="DeskAgent",
                            user_name="scripted", location=f"sandtable.yaml:{task.pos.line if task.pos else 0}")
               for task in domain.tasks for i in range(1, k + 1)]
    meta = RunMeta(domains=[{"name": domain.name, "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="DeskAgent", user="scripted", k=k, run_seed=0)
    write_run(build_results(results, meta), folder / "run")
    return len(results), time.perf_counter() - t0


def edit(folder: Path) -> None:
    """What a task author changes after reading the failures: a rule made soft, a new expectation."""
    text = (folder / "sandtable.yaml").read_text(encoding="utf-8")
    new = text.replace("  - id: verify-before-book\n    kind: before\n",
                       "  - id: verify-before-book\n    kind: before\n    soft: true\n", 1)
    new = new.replace("reply_includes: [", "reply_includes: [booked, ", 1)
    assert new.count("soft: true") == text.count("soft: true") + 1 and "reply_includes: [booked, " in new
    (folder / "edited.yaml").write_text(new, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        n, seconds = generate(folder, args.trials)
        size = (folder / "run" / "results.json").stat().st_size
        print(f"generated {n:,} trials in {seconds:.1f} s; results.json {size / 2**20:.1f} MB")
        edit(folder)
        runs = []
        for i in range(args.repeat):
            done = subprocess.run([sys.executable, "-c", MEASURE], cwd=folder, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"regrade failed:\n{done.stderr}")
            r = json.loads(done.stdout)
            runs.append(r)
            print(f"run {i + 1}: total {r['total']:.1f} s (import {r['import']:.2f}, read {r['read']:.1f}, "
                  f"domains {r['domains']:.2f}, regrade {r['regrade']:.1f}, write {r['write']:.1f}); "
                  f"peak {r['peak_mb']:.0f} MB; {r['trials']:,} trials, {r['changed']:,} verdicts changed")
        med = {key: statistics.median(r[key] for r in runs) for key in ("total", "read", "regrade", "write", "peak_mb")}
        print(f"median: total {med['total']:.1f} s (read {med['read']:.1f}, regrade {med['regrade']:.1f}, "
              f"write {med['write']:.1f}); peak {med['peak_mb']:.0f} MB; "
              f"{med['regrade'] / n * 1e6:.0f} µs per trial regraded")


if __name__ == "__main__":
    main()
