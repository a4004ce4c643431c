"""The paired regression design (issue 25) in real pytest runs of the plugin: how many
paired trials a regressed task takes to be flagged, and the trials the run spends.

A planted suite of ``--tasks`` tasks (20) in one domain file; the planted agent passes
every trial, except that in the candidate build task t00 passes only where its trial seed
is even (from 1.0 to about 0.5; the pair's two trials share the seed, so the pair's
outcome depends on it as a model user's or a fault's would). For each of ``--seeds`` run
seeds: a baseline run, fixed k = ``--cap`` (32), written to results.json; then the
candidate, ``--sandtable-adaptive --sandtable-baseline=... --sandtable-paired`` with the
same run seed; or with ``--in-job``, no baseline run: the candidate run with
``--sandtable-baseline-agent=planted:baseline``, the baseline build's trial of each seed
run in the same items. Read from the candidate's results.json: whether t00 was flagged (e-BH at
0.05), the pairs its test took, any other task flagged (a false one), and the trials spent
against the fixed k = cap. Each run is its own ``python -m pytest`` process.

    python benchmarks/bench_paired_plugin.py [--tasks 20] [--seeds 8] [--cap 32] [--in-job]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = """\
  - id: {id}
    user: {{ opening: "Read note n-1 please.", script: ["Thanks."] }}
    expect: {{ called: [read_note] }}
"""

DOMAIN = """\
version: 1
name: planted
world:
  notes:
    key: id
    rows:
      - {{ id: n-1, text: hello }}
tools:
  - name: read_note
    params: {{ id: {{ type: string }} }}
    ops:
      - get: {{ table: notes, key: $id }}
tasks:
{tasks}"""

AGENT = """\
import os


def play(turn, build):
    dropped = build == "candidate" and turn.trial.task_id == "t00"
    if len(turn.messages) == 1 and (not dropped or turn.trial.seed % 2 == 0):
        turn.call_tool("read_note", {"id": "n-1"})
    return "Done."


def agent(turn):
    return play(turn, os.environ.get("PLANTED_BUILD"))


def baseline(turn):
    return play(turn, "baseline")


agent.inline = baseline.inline = True
"""


def pytest_run(folder: Path, build: str, args: list[str]) -> float:
    env = dict(os.environ, PLANTED_BUILD=build, PYTHONPATH=os.pathsep.join(
        [str(folder), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--sandtable-agent=planted:agent", *args], cwd=folder, env=env,
                          capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--cap", type=int, default=32)
    parser.add_argument("--in-job", action="store_true", help="the baseline agent in the same job, no stored run")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-paired-") as tmp:
        folder = Path(tmp)
        folder.joinpath("sandtable.yaml").write_text(
            DOMAIN.format(tasks="".join(TASK.format(id=f"t{i:02d}") for i in range(opts.tasks))), encoding="utf-8")
        folder.joinpath("planted.py").write_text(AGENT, encoding="utf-8")
        pairs, spent, false_flags, missed, seconds = [], [], 0, 0, []
        fixed = opts.cap * opts.tasks
        for seed in range(opts.seeds):
            if opts.in_job:
                against = ["--sandtable-baseline-agent=planted:baseline"]
            else:
                pytest_run(folder, "baseline", [f"--sandtable-k={opts.cap}", f"--sandtable-seed={seed}",
                                                "--sandtable-out=base"])
                against = ["--sandtable-baseline=base", "--sandtable-paired"]
            seconds.append(pytest_run(folder, "candidate", [
                "--sandtable-adaptive", f"--sandtable-k={opts.cap}", f"--sandtable-seed={seed}", *against,
                "--sandtable-out=cand"]))
            doc = json.loads(folder.joinpath("cand", "results.json").read_text(encoding="utf-8"))
            section = doc["adaptive"]
            flagged = section["regression"]["flagged"]
            t00 = next(t for t in section["tasks"] if t["task"] == "t00")
            if "t00" in flagged:
                pairs.append(t00["regression"]["graded"])
            else:
                missed += 1
            false_flags += sum(name != "t00" for name in flagged)
            spent.append(section["spent"])
            print(f"seed {seed}: t00 {t00['regression']['verdict']} after {t00['regression']['graded']} pairs "
                  f"({t00['regression']['pairs'][0]} drops), flagged {flagged}, spent {section['spent']} of "
                  f"{fixed}, {seconds[-1]:.1f}s", flush=True)
        task_alpha = section["regression"]["task_alpha"]
        how = "the baseline agent in the same job" if opts.in_job else "a stored baseline run, --sandtable-paired"
        print(f"\n{how}: {opts.tasks} tasks, cap {opts.cap}, {opts.seeds} run seeds; each task's paired test at "
              f"alpha {task_alpha:g} (0.05 over {opts.tasks})")
        if pairs:
            print(f"t00 (1.0 -> 0.5) flagged in {len(pairs)} of {opts.seeds} runs, after {statistics.mean(pairs):.1f} "
                  f"paired trials on average (min {min(pairs)}, max {max(pairs)}); missed {missed}")
        print(f"other tasks flagged (false): {false_flags}")
        print(f"trials spent: {statistics.mean(spent):.1f} on average where k={opts.cap} takes {fixed} "
              f"({fixed / statistics.mean(spent):.2f}x fewer{'; as many baseline trials again' * opts.in_job}); "
              f"candidate run {statistics.median(seconds):.1f}s median")


if __name__ == "__main__":
    main()
