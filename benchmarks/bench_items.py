"""Per-item overhead: a trial item of the freight example against a trivial pytest test.

Runs, in subprocesses (``pytest -q -p no:cacheprovider``), the freight example's
tasks k times each with the reference agent (the domain file is copied alone into
a temporary folder, because the example's conftest.py brings its own agent), and
the same number N of trivial tests::

    @pytest.mark.parametrize("i", range(N))
    def test_x(i): assert i >= 0

Each run is repeated ``--repeat`` times, the two kinds alternating; for each it
prints the test-loop time (first item to last, measured inside pytest by a small
timing conftest.py) and the whole process's wall time, their medians, the time
per item, and the ratio freight / trivial. Nothing is subtracted: the process
time includes start-up, collection (for freight: loading the domain) and the
report, which the per-item figure spreads over N.

    python benchmarks/bench_items.py DOMAIN_FILE [--items 1500] [--repeat 7]

DOMAIN_FILE is the example's sandtable.yaml (example_domains/freight/sandtable.yaml).
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
import time
from pathlib import Path

TIMER = '''\
import json, os, time
import pytest

_t = {}


# the test loop alone: first item to last (not start-up, collection or the
# results.json/report.html written at session end, which the process time includes)
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    t0 = time.perf_counter()
    try:
        return (yield)
    finally:
        _t["loop"] = time.perf_counter() - t0


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if "loop" in _t and not hasattr(session.config, "workerinput"):
        with open(os.environ["BENCH_TIMES"], "w") as f:
            json.dump({"loop": _t["loop"], "items": len(session.items)}, f)
'''

TRIVIAL = """\
import pytest


@pytest.mark.parametrize("i", range({n}))
def test_x(i):
    assert i >= 0
"""


def tasks_in(domain_file: Path) -> int:
    from pytest_sandtable import load_domain

    return len(load_domain(domain_file).tasks)


def run(folder: Path, args: list[str]) -> tuple[float, float, int]:
    """(loop seconds, process seconds, items) of one pytest run in ``folder``."""
    times = folder / "times.json"
    times.unlink(missing_ok=True)
    env = dict(os.environ, BENCH_TIMES=str(times))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder, env=env, capture_output=True, text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-500:]]
        raise SystemExit(f"pytest failed in {folder.name}: {tail[0]}")
    t = json.loads(times.read_text())
    return t["loop"], wall, int(t["items"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("domain", type=Path, help="the freight example's sandtable.yaml")
    ap.add_argument("--items", type=int, default=1500, help="about how many items each run has (default 1500)")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each kind (the median is printed)")
    a = ap.parse_args()
    if not a.domain.is_file():
        raise SystemExit(f"no such domain file: {a.domain}")
    tasks = tasks_in(a.domain)
    k = max(1, round(a.items / tasks))
    n = tasks * k
    with tempfile.TemporaryDirectory() as d:
        freight, trivial = Path(d) / "freight", Path(d) / "trivial"
        for folder in (freight, trivial):
            folder.mkdir()
            (folder / "conftest.py").write_text(TIMER)
        shutil.copy(a.domain, freight / "sandtable.yaml")
        (trivial / "test_trivial.py").write_text(TRIVIAL.format(n=n))
        kinds = {
            "freight": (freight, [f"--sandtable-k={k}", "--sandtable-agent=reference", "."]),
            "trivial": (trivial, ["test_trivial.py"]),
        }
        print(f"python {sys.version.split()[0]}; freight: {tasks} tasks x k={k} = {n} items; trivial: {n} items")
        print(f"{'run':>4} {'kind':<8} {'items':>6} {'loop s':>8} {'process s':>10}")
        res: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
        for i in range(1, a.repeat + 1):
            for name, (folder, args) in kinds.items():
                loop, wall, items = run(folder, args)
                if items != n:
                    raise SystemExit(f"{name}: {items} items, expected {n}")
                res[name].append((loop, wall))
                print(f"{i:>4} {name:<8} {items:>6} {loop:>8.3f} {wall:>10.3f}")
            shutil.rmtree(freight / ".sandtable", ignore_errors=True)
        print()
        print(f"median of {a.repeat} runs      {'loop s':>8} {'µs/item':>9} {'process s':>10} {'µs/item':>9}")
        med = {}
        for name in kinds:
            loop = statistics.median(x for x, _ in res[name])
            wall = statistics.median(w for _, w in res[name])
            med[name] = (loop, wall)
            print(f"{name:<22}{loop:>8.3f} {loop / n * 1e6:>9.1f} {wall:>10.3f} {wall / n * 1e6:>9.1f}")
        (fl, fw), (tl, tw) = med["freight"], med["trivial"]
        print(f"{'ratio freight/trivial':<22}{fl / tl:>8.2f} {'':>9} {fw / tw:>10.2f}")
        spread = {name: (min(x for x, _ in r), max(x for x, _ in r)) for name, r in res.items()}
        print("loop spread (min-max s): " + ", ".join(f"{nm} {lo:.3f}-{hi:.3f}" for nm, (lo, hi) in spread.items()))


if __name__ == "__main__":
    main()
