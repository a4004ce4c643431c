"""``regrade`` on a big run: seconds, CPU and peak memory to regrade 20,000 stored trials.

Generates the run with the real engine: the freight example's tasks, played by its
in-house desk agent (``example_domains/freight/desk_agent.py``, flaw rate 0.5, so a
good share of trials fail and carry an attribution) and the scripted user, in-process,
``--trials`` trials spread evenly over the 15 tasks; writes results.json with the real
writer. Then edits the domain the way a task author would after reading the failures
(``verify-before-book`` made soft, one more ``reply_includes`` phrase on one task) and runs
the real command ``python -m pytest_sandtable regrade run edited.yaml -o regraded`` in a
fresh process, ``--repeat`` times, reporting each one's wall time, CPU time (user +
system) and peak resident memory (``ru_maxrss``, from ``os.wait4``).

``--data DIR`` keeps the generated run in DIR and reuses it on the next call (the
generation takes minutes), so that two versions of the package can be measured in
alternation on the same files: the command runs with the ``PYTHONPATH`` it is given.

    python benchmarks/bench_regrade.py [--trials 20000] [--repeat 3] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight"
COMMAND = [sys.executable, "-m", "pytest_sandtable", "regrade", "run", "edited.yaml", "-o", "regraded"]


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


def run_measured(argv: list[str], cwd: Path | None = None) -> tuple[float, float, float, str]:
    """One command in a fresh process: its wall seconds, CPU seconds (user + system) and
    peak resident MB, both its own (``os.wait4``, not the largest of all children so far),
    and its stdout. Exits on a status other than 0 or 1 (1: a gate or trial failed).
    Give a ``cwd`` outside the repository when comparing versions: ``-m`` puts the
    current folder first on ``sys.path``, ahead of ``PYTHONPATH``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{err.read().decode()}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read().decode()


def measure(folder: Path) -> dict[str, float | str]:
    """One regrade by the real command: wall and CPU seconds, peak MB, trials regraded,
    and the line that says how many verdicts changed."""
    wall, cpu, peak, out = run_measured(COMMAND, folder)
    changed = out.splitlines()[0]
    trials = re.search(r"regraded ([\d,]+) trial", changed)
    assert trials is not None, changed
    return {"wall": wall, "cpu": cpu, "peak_mb": peak, "trials": int(trials.group(1).replace(",", "")),
            "changed": changed}


def prepare(folder: Path, trials: int) -> None:
    """The generated run in ``folder``, made when it is not there yet: in a process of its
    own, as this one's size would count in the measured children's peak (a child forked
    from a big process has that process's pages until its exec, and Linux keeps that
    high-water mark in the child's ``ru_maxrss``)."""
    results = folder / "run" / "results.json"
    if not results.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, __file__, "--generate-into", str(folder), "--trials", str(trials)],
                       check=True)
    print(f"results.json {results.stat().st_size / 2**20:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="keep the generated run here and reuse it (default: a temporary folder)")
    parser.add_argument("--generate-into", metavar="DIR", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate_into:
        n, seconds = generate(Path(args.generate_into), args.trials)
        edit(Path(args.generate_into))
        print(f"generated {n:,} trials in {seconds:.1f} s")
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.data) if args.data else Path(tmp)
        prepare(folder, args.trials)
        runs = []
        for i in range(args.repeat):
            r = measure(folder)
            runs.append(r)
            print(f"run {i + 1}: wall {r['wall']:.1f} s, CPU {r['cpu']:.1f} s; peak {r['peak_mb']:.0f} MB; "
                  f"{r['changed']}")
        n = int(runs[0]["trials"])
        med = {key: statistics.median(float(r[key]) for r in runs) for key in ("wall", "cpu", "peak_mb")}
        print(f"median: wall {med['wall']:.1f} s, CPU {med['cpu']:.1f} s ({med['cpu'] / n * 1e6:.0f} µs per trial); "
              f"peak {med['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
