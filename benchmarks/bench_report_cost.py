"""report.html's share of a reference-agent run's CPU at about 5,000 trials.

    python benchmarks/bench_report_cost.py [--trials 5000] [--repeat 3]

Each run is a fresh ``python -m pytest -q -p no:randomly -p no:cacheprovider
--sandtable-agent=reference --sandtable-k=K`` in a temporary folder holding the
freight example's ``sandtable.yaml`` (its 17 tasks; K chosen to give about
``--trials`` trial items: 295 for 5,015). A ``conftest.py`` there times, from inside
the process, every call of ``write_report_html`` and of results.json's writer
(``time.process_time`` and wall around each), and at ``pytest_unconfigure`` the
process's whole CPU time so far (user + system, from its start: imports, collection,
the trials, the summary, both files and the terminal). It prints, per run, report.html's
share of the process's CPU, results.json's, the whole CPU and report.html's size, then
the median share over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight" / "sandtable.yaml"

# times the writers from inside pytest; the figures go to the file named by COST_OUT
CONFTEST = '''
import json, os, time

import pytest_sandtable.report.html as _html
import pytest_sandtable.report.results_json as _rj

_t = {"html_cpu": 0.0, "html_wall": 0.0, "json_cpu": 0.0, "json_wall": 0.0}


def _timed(fn, key):
    def timed(*args, **kwargs):
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _t[key + "_cpu"] += time.process_time() - c0
            _t[key + "_wall"] += time.perf_counter() - w0
    return timed


_html.write_report_html = _timed(_html.write_report_html, "html")
_rj._write_json = _timed(_rj._write_json, "json")


def pytest_unconfigure(config):
    _t["process_cpu"] = time.process_time()
    with open(os.environ["COST_OUT"], "w") as f:
        json.dump(_t, f)
'''


def one_run(tmp: Path, k: int) -> dict[str, float]:
    """One pytest run in ``tmp``; the conftest's figures, and report.html's size."""
    out = tmp / "cost.json"
    runs = tmp / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    env = {**os.environ, "COST_OUT": str(out), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "--sandtable-agent=reference", f"--sandtable-k={k}",
           f"--sandtable-out={runs}"]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(out.read_text())
    figures["html_mb"] = (runs / "report.html").stat().st_size / 1e6
    figures["items"] = float(_passed(proc.stdout))
    return figures


def _passed(stdout: str) -> int:
    """Trial items pytest reports (passed and failed) on its last line."""
    import re

    last = stdout.strip().splitlines()[-1]
    return sum(int(n) for n in re.findall(r"(\d+) (?:passed|failed)", last))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from pytest_sandtable import load_domain

    tasks = len(load_domain(FREIGHT).tasks)
    k = -(-args.trials // tasks)
    shares = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        shutil.copy(FREIGHT, tmp / "sandtable.yaml")
        (tmp / "conftest.py").write_text(CONFTEST, encoding="utf-8")
        for n in range(args.repeat):
            f = one_run(tmp, k)
            share = f["html_cpu"] / f["process_cpu"]
            shares.append(share)
            print(f"run {n + 1}: {int(f['items']):,} trials ({tasks} tasks x k={k}); process CPU "
                  f"{f['process_cpu']:.2f} s; report.html {f['html_cpu']:.2f} s CPU ({f['html_wall']:.2f} s wall), "
                  f"{share:.1%} of it, {f['html_mb']:.1f} MB; results.json {f['json_cpu']:.2f} s CPU "
                  f"({f['json_cpu'] / f['process_cpu']:.1%})", flush=True)
    print(f"report.html's share of the process's CPU, median of {len(shares)}: {statistics.median(shares):.1%} "
          f"(goal: at most 10%)")


if __name__ == "__main__":
    main()
