"""Where a whole pytest run's time goes outside its trials (issue 37, item 16).

A run of a domain with ``--sandtable-agent=reference`` is timed in a subprocess, phase by
phase, from inside pytest: a small timing plugin (written to a temporary folder, loaded
with ``-p``) notes the wall clock and the process's CPU time at each boundary:

- **start-up**: from the subprocess's spawn to the end of ``pytest_configure`` (the
  interpreter, pytest, every plugin imported and configured; this package's plugin
  module among them);
- **collection**: ``pytest_collection`` (the domain files read; from the domain cache
  when it holds them);
- **trials**: ``pytest_runtestloop``, first item to last;
- **session end**: ``pytest_sessionfinish`` up to the terminal summary (this package's:
  the results built, the policy coverage, results.json and report.html written);
- **summary**: ``pytest_terminal_summary`` (the tables printed; pytest calls it from its
  terminal reporter's own ``pytest_sessionfinish``);
- **exit**: from the end of the summary to the process's end (unconfigure, atexit, the
  interpreter's teardown).

Besides, ``-X importtime`` in one extra run gives the self time of every module of this
package that the run imported (``pytest_sandtable.*``) and how many there were: what
"importing the plugin's modules" costs, wherever in the run it happens.

Every run's phases are printed, then the medians. The domain cache is warmed by one
unmeasured run first (``--cold`` empties pytest's cache before every run instead). With
``--compile`` the package's bytecode is written first (``compileall``): in an editable
checkout under ``PYTHONDONTWRITEBYTECODE=1`` (set on this workplace's machines) every run
compiles every module it imports again, which a user's installed package never does.

    python benchmarks/bench_fixed_cost.py DOMAIN_DIR [--k 1] [--repeat 5] [--python PY]
                                          [--cold] [--compile] [-- EXTRA PYTEST ARGS]

DOMAIN_DIR is a folder holding a domain (an imported τ-bench env, ``example_domains``);
it is copied to a temporary folder, so runs write nothing next to it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = r'''
import json, os, time
import pytest

_marks = {}

def _mark(name):
    _marks[name] = (time.time(), time.process_time())

@pytest.hookimpl(trylast=True)
def pytest_configure(config):  # the last configure hook: every plugin configured
    _mark("configured")

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection(session):
    _mark("collection_start")
    try:
        return (yield)
    finally:
        _mark("collection_end")

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    _mark("loop_start")
    try:
        return (yield)
    finally:
        _mark("loop_end")

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session):
    _mark("finish_start")
    try:
        return (yield)
    finally:
        _mark("finish_end")

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    _mark("summary_start")
    try:
        return (yield)
    finally:
        _mark("summary_end")

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _mark("unconfigured")
    with open(os.environ["BENCH_PHASES_OUT"], "w") as f:
        json.dump(_marks, f)
'''

PHASES = ("start-up", "collection", "trials", "session end", "summary", "exit")


def _run(py: str, folder: Path, args: list[str], env: dict[str, str], out: Path) -> dict[str, tuple[float, float]]:
    env = dict(env, BENCH_PHASES_OUT=str(out))
    before = os.times()
    spawned = time.time()
    proc = subprocess.run([py, "-m", "pytest", ".", "-p", "bench_phases", *args], cwd=folder, env=env,
                          capture_output=True, text=True)
    ended = time.time()
    after = os.times()
    if proc.returncode not in (0, 1):
        sys.exit(f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    import json

    marks = {k: tuple(v) for k, v in json.loads(out.read_text()).items()}
    cpu_total = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    wall = {
        "start-up": marks["configured"][0] - spawned,
        "collection": marks["collection_end"][0] - marks["collection_start"][0],
        "trials": marks["loop_end"][0] - marks["loop_start"][0],
        "session end": marks["summary_start"][0] - marks["finish_start"][0],
        "summary": marks["summary_end"][0] - marks["summary_start"][0],
        "exit": ended - marks["summary_end"][0],
    }
    cpu = {
        "start-up": marks["configured"][1],
        "collection": marks["collection_end"][1] - marks["collection_start"][1],
        "trials": marks["loop_end"][1] - marks["loop_start"][1],
        "session end": marks["summary_start"][1] - marks["finish_start"][1],
        "summary": marks["summary_end"][1] - marks["summary_start"][1],
        "exit": cpu_total - marks["summary_end"][1],
    }
    wall["whole"] = ended - spawned
    cpu["whole"] = cpu_total
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return {k: (wall[k], cpu[k]) for k in wall} | {"_line": tail}  # type: ignore[dict-item]


def _imports(py: str, folder: Path, args: list[str], env: dict[str, str], out: Path) -> tuple[int, float]:
    env = dict(env, BENCH_PHASES_OUT=str(out))
    proc = subprocess.run([py, "-X", "importtime", "-m", "pytest", ".", "-p", "bench_phases", *args], cwd=folder,
                          env=env, capture_output=True, text=True)
    count, self_us = 0, 0
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m and m.group(2).startswith("pytest_sandtable"):
            count += 1
            self_us += int(m.group(1))
    return count, self_us / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("domain_dir", type=Path)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--cold", action="store_true", help="empty pytest's cache (the domain cache) before every run")
    ap.add_argument("--compile", action="store_true", help="write the package's bytecode first (compileall)")
    ap.add_argument("extra", nargs="*", help="more pytest arguments, after --")
    ns = ap.parse_args()
    if not ns.domain_dir.is_dir():
        sys.exit(f"{ns.domain_dir}: not a folder")
    if ns.compile:  # the package that --python imports, wherever it is
        subprocess.run([ns.python, "-c", "import compileall, os, pytest_sandtable; "
                        "compileall.compile_dir(os.path.dirname(pytest_sandtable.__file__), quiet=1)"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "domain"
        skipped = shutil.ignore_patterns(".sandtable", ".pytest_cache", "__pycache__")
        shutil.copytree(ns.domain_dir, folder, ignore=skipped)
        plugin_dir = root / "plugin"
        plugin_dir.mkdir()
        (plugin_dir / "bench_phases.py").write_text(PLUGIN)
        env = dict(os.environ, PYTHONPATH=str(plugin_dir))
        args = ["-q", "--sandtable-agent=reference", f"--sandtable-k={ns.k}", *ns.extra]
        out = root / "phases.json"
        _run(ns.python, folder, args, env, out)  # warm-up: the domain cache, the OS's file cache
        rows = []
        for i in range(ns.repeat):
            if ns.cold:
                shutil.rmtree(folder / ".pytest_cache", ignore_errors=True)
            r = _run(ns.python, folder, args, env, out)
            rows.append(r)
            shown = "  ".join(f"{p} {r[p][0] * 1000:.0f}/{r[p][1] * 1000:.0f}" for p in (*PHASES, "whole"))
            print(f"run {i + 1} (wall/CPU ms): {shown}   ({r['_line']})")
        count, imp = _imports(ns.python, folder, args, env, out)
    print(f"\n{ns.domain_dir.name}, k = {ns.k}, {ns.repeat} runs, {'cold' if ns.cold else 'warm'} domain cache;"
          f" PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    print(f"{'phase':<14}{'wall ms':>10}{'CPU ms':>10}{'share of CPU':>14}")
    whole_cpu = statistics.median(r["whole"][1] for r in rows)
    for p in (*PHASES, "whole"):
        w = statistics.median(r[p][0] for r in rows)
        c = statistics.median(r[p][1] for r in rows)
        print(f"{p:<14}{w * 1000:>10.0f}{c * 1000:>10.0f}{c / whole_cpu:>13.0%}")
    print(f"this package's modules imported: {count}, {imp * 1000:.0f} ms of import self time (one run, -X importtime)")


if __name__ == "__main__":
    main()
