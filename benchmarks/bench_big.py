"""A big run end to end: 20,000 trials with the reference agent, without and with
``-n 2``: wall per trial, peak memory of the controller and of each worker, the size
and write time of results.json and report.html, and how long headless Chromium takes
to open report.html.

    python benchmarks/bench_big.py [--tasks 2500] [--k 8] [--modes 0,2] [--no-browser]

The domain is the freight example with its tasks copied under new ids
(``book-at-posted-rate-c2``, ...) up to about ``--tasks`` tasks: 2,500 tasks make
20,000 trials at k = 8, each with its real transcript, calls and world diff. Each
mode runs ``python -m pytest -q -p no:cacheprovider -p no:hypothesispytest
--sandtable-k=K --sandtable-agent=reference [-n N]`` in a fresh process in a
temporary folder. A ``conftest.py`` there measures, from inside pytest: the test loop
(first item to last), the recorder's two steps at session finish (the summary and
the gate; writing results.json and report.html), the terminal summary, the resident
memory at the end of the test loop and its peak until then (``VmRSS``, ``VmHWM``;
Linux) and after each of the recorder's steps, and at exit each process's peak
(``VmHWM``; the controller's, and each xdist worker's; the controller's ``ru_maxrss``
is printed beside it: it also counts what the process held before its exec, the
memory of the process it was forked from). Chromium opens the
report with ``chromium --headless=new --dump-dom file://.../report.html``, timed from
start to exit (best of 3), against the same for an empty page (the browser's own
start-up).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight" / "sandtable.yaml"

# measures from inside pytest, in every process (controller and workers)
CONFTEST = '''
import json, os, resource, time
import pytest

_t = {}

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    _t["loop0"] = time.perf_counter()
    try:
        return (yield)
    finally:
        _t["loop"] = time.perf_counter() - _t["loop0"]
        _t["loop_mb"] = _status_mb("VmRSS:")  # what the run holds before the end-of-session work
        _t["loop_peak_mb"] = _status_mb("VmHWM:")  # the peak so far: during the test loop

def _status_mb(field):
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024
    except (OSError, StopIteration):
        return float("nan")

def _timed(name, fn):
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _t[name] = time.perf_counter() - t0
            _t[name + "_peak_mb"] = _status_mb("VmHWM:")  # the peak once this step is done
    return timed

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # the recorder's two steps at session finish: the summary and gate, then both files
    rec = config.pluginmanager.get_plugin("sandtable-recorder")
    rec._results = _timed("summary", rec._results)
    rec._write = _timed("write", rec._write)

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    t0 = time.perf_counter()
    try:
        return (yield)
    finally:
        _t["terminal"] = time.perf_counter() - t0
        _t["terminal_peak_mb"] = _status_mb("VmHWM:")

def pytest_unconfigure(config):
    who = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    # the peak of this process since it started pytest (VmHWM): ru_maxrss also counts what
    # the process held before its exec, a copy of the bench's own memory when it was forked
    _t["peak_mb"] = _status_mb("VmHWM:")
    _t["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(f"measure-{who}.json", "w") as f:
        json.dump(_t, f)
'''


def make_domain(folder: Path, want: int) -> int:
    """The freight domain with its tasks copied to about ``want`` tasks; returns how many."""
    text = FREIGHT.read_text(encoding="utf-8")
    head, sep, tasks = text.partition("\ntasks:\n")
    ids = re.findall(r"^  - id: (\S+)$", tasks, flags=re.M)
    copies = max(1, round(want / len(ids)))
    blocks = [tasks] + [re.sub(r"^  - id: (\S+)$", rf"  - id: \1-c{c}", tasks, flags=re.M)
                        for c in range(2, copies + 1)]
    (folder / "sandtable.yaml").write_text(head + sep + "\n".join(blocks), encoding="utf-8")
    return len(ids) * copies


def run(folder: Path, k: int, workers: int) -> dict[str, object]:
    for old in folder.glob("measure-*.json"):
        old.unlink()
    shutil.rmtree(folder / ".sandtable", ignore_errors=True)
    # hypothesis (a dev dependency here) prints its own terminal summary, importing itself: seconds
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
            f"--sandtable-k={k}", "--sandtable-agent=reference"]
    if workers:
        args += ["-n", str(workers)]
    t0 = time.perf_counter()
    done = subprocess.run(args, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (run_dir,) = (folder / ".sandtable" / "runs").iterdir()
    measures = {p.stem.removeprefix("measure-"): json.loads(p.read_text()) for p in folder.glob("measure-*.json")}
    return {"wall": wall, "trials": _trials(run_dir / "results.json"), "run_dir": run_dir, "measures": measures,
            "json_mb": (run_dir / "results.json").stat().st_size / 1e6,
            "html_mb": (run_dir / "report.html").stat().st_size / 1e6}


def _trials(results: Path) -> int:
    """The number of trials in results.json, counted by a child process: parsed here, the
    58 MB file would leave this process holding some 300 MB, which the next run's pytest,
    forked from it, would count in its ``ru_maxrss`` (its peak before its exec)."""
    code = "import json, sys; print(len(json.load(open(sys.argv[1], encoding='utf-8'))['trials']))"
    done = subprocess.run([sys.executable, "-c", code, str(results)], capture_output=True, text=True, check=True)
    return int(done.stdout)


def open_time(page: Path, repeat: int = 3) -> float:
    """Seconds for headless Chromium to load ``page`` and dump its DOM (best of ``repeat``)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom",
                        page.resolve().as_uri()], capture_output=True, timeout=300, check=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2500, help="about this many tasks (copies of freight's)")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--modes", default="0,2", help="xdist workers of each run (0: without xdist)")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        tasks = make_domain(folder, args.tasks)
        (folder / "conftest.py").write_text(CONFTEST, encoding="utf-8")
        size = (folder / "sandtable.yaml").stat().st_size / 1e6
        print(f"domain: {tasks:,} tasks ({size:.1f} MB), k={args.k}: {tasks * args.k:,} trials")
        blank = folder / "blank.html"
        blank.write_text("<!doctype html><title>blank</title>", encoding="utf-8")
        for workers in (int(w) for w in args.modes.split(",")):
            r = run(folder, args.k, workers)
            m = r["measures"]
            ctl = m["controller"]  # type: ignore[index]
            n = int(r["trials"])  # type: ignore[call-overload]
            label = f"-n {workers}" if workers else "-n 0"
            print(f"{label}: {n:,} trials in {r['wall']:.1f} s wall ({float(r['wall']) / n * 1e3:.2f} ms per trial; "
                  f"test loop {ctl['loop']:.1f} s); at session finish: summary {ctl['summary']:.2f} s, results.json "
                  f"and report.html {ctl['write']:.2f} s; terminal summary {ctl['terminal']:.2f} s")
            workers_peak = ", ".join(f"{w} {v['peak_mb']:.0f} MB" for w, v in sorted(m.items())  # type: ignore[attr-defined]
                                     if w != "controller")
            loop = (f"during the test loop {ctl['loop_peak_mb']:.0f} MB, {ctl['loop_mb']:.0f} MB at its end; "
                    f"after the summary {ctl['summary_peak_mb']:.0f} MB, the files {ctl['write_peak_mb']:.0f} MB, "
                    f"the terminal summary {ctl['terminal_peak_mb']:.0f} MB")
            print(f"    peak memory: controller {ctl['peak_mb']:.0f} MB ({loop}; ru_maxrss {ctl['maxrss_mb']:.0f} MB)"
                  + (f"; workers {workers_peak}" if workers_peak else ""))
            print(f"    results.json {r['json_mb']:.1f} MB, report.html {r['html_mb']:.1f} MB")
            if not args.no_browser and shutil.which("chromium"):
                page = Path(str(r["run_dir"])) / "report.html"
                print(f"    report.html opened in headless Chromium in {open_time(page):.2f} s "
                      f"(an empty page: {open_time(blank):.2f} s)")


if __name__ == "__main__":
    main()
