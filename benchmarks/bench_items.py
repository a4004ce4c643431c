"""Per-item overhead: a trial item of the freight example against a trivial pytest test.

Runs, in subprocesses (``pytest -q -p no:cacheprovider -p no:hypothesispytest``: the
second is a development dependency's plugin, which users do not have and which adds
its own hooks to every item of both kinds), the freight example's
tasks k times each with the reference agent (the domain file is copied alone into
a temporary folder, because the example's conftest.py brings its own agent), and
the same number N of trivial tests::

    @pytest.mark.parametrize("i", range(N))
    def test_x(i): assert i >= 0

Each run is repeated ``--repeat`` times, the two kinds alternating; for each it
prints the test-loop time (first item to last, measured inside pytest by a small
timing conftest.py) and the whole process's, each as wall and CPU time (user +
system; the steadier figure on a busy machine), their medians per item and their
fastest (the run other work on the machine disturbed least), and the ratios
freight / trivial. Nothing is subtracted: the process
time includes start-up, collection (for freight: loading the domain) and the
report, which the per-item figure spreads over N.

    python benchmarks/bench_items.py DOMAIN_FILE [--items 1500] [--repeat 7]

DOMAIN_FILE is the example's sandtable.yaml (example_domains/freight/sandtable.yaml).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        return (yield)
    finally:
        _t["loop"] = time.perf_counter() - t0
        _t["loop_cpu"] = time.process_time() - c0


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    if "loop" in _t and not hasattr(session.config, "workerinput"):
        with open(os.environ["BENCH_TIMES"], "w") as f:
            json.dump({"loop": _t["loop"], "loop_cpu": _t["loop_cpu"], "items": len(session.items)}, f)
'''

TRIVIAL = """\
import pytest


@pytest.mark.parametrize("i", range({n}))
def test_x(i):
    assert i >= 0
"""


def compile_package() -> None:
    """Write the bytecode of the pytest_sandtable the runs import (the one on this
    Python's path: a copy given with PYTHONPATH too), as an installed package has it.
    An editable checkout whose source changed, with PYTHONDONTWRITEBYTECODE set, would
    otherwise compile every changed module again in every run, the lazily imported ones
    inside the timed test loop."""
    import compileall

    import pytest_sandtable

    compileall.compile_dir(str(Path(pytest_sandtable.__file__).parent), quiet=1)


def tasks_in(domain_file: Path) -> int:
    from pytest_sandtable import load_domain

    return len(load_domain(domain_file).tasks)


def run(folder: Path, args: list[str]) -> tuple[dict[str, float], int]:
    """The loop's and the process's wall and CPU seconds, and the items, of one pytest run
    in ``folder``."""
    times = folder / "times.json"
    times.unlink(missing_ok=True)
    env = dict(os.environ, BENCH_TIMES=str(times))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args],
        cwd=folder, env=env, capture_output=True, text=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-500:]]
        raise SystemExit(f"pytest failed in {folder.name}: {tail[0]}")
    t = json.loads(times.read_text())
    return {"loop": t["loop"], "loop_cpu": t["loop_cpu"], "wall": wall, "cpu": cpu}, int(t["items"])


def recorder_cost(domain_file: Path, repeat: int) -> None:
    """What the recorder costs a trial, apart from pytest and the trial itself: 5 trials
    of each task (reference agent) are run once, then recorded ``repeat`` rounds over,
    as ``plugin/artifacts.py`` records them, into a fresh spool each round. In one
    process: spooled straight from the TrialResult (``TrialSpool.add_fresh``). Under
    xdist: made portable on the worker (``report.safe.portable_trial``), carried through
    pytest-xdist's serialisation (execnet's), and spooled on the controller
    (``TrialSpool.add_stored``). The fastest round per step is printed, in µs per trial.
    An older commit's code is measured through its own path: without ``add_fresh``, in
    one process ``portable_encoded`` then ``add_stored`` with its JSON; without
    ``add_stored``, ``portable_trial`` then ``TrialSpool.add(TrialResult.from_dict(...))``."""
    import execnet.gateway_base as wire

    from pytest_sandtable import ReferenceAgent, ScriptedUser, load_domain, run_trial
    from pytest_sandtable.engine.results import TrialResult
    from pytest_sandtable.report import safe
    from pytest_sandtable.report.spool import TrialSpool

    domain = load_domain(domain_file)
    trials = [run_trial(domain, task.id, ReferenceAgent(), ScriptedUser(), trial=i, k=5, location="sandtable.yaml:1")
              for task in domain.tasks for i in range(1, 6)]
    fresh, one_pass = hasattr(TrialSpool, "add_fresh"), hasattr(TrialSpool, "add_stored")

    def portable(r: TrialResult, hop: bool) -> tuple[dict[str, object] | None, str | None]:
        if fresh and not hop:
            return None, None  # nothing made for a report: the spool takes the TrialResult
        if one_pass and not hop:
            return safe.portable_encoded(r)
        return safe.portable_trial(r), None

    def spooled(spool: TrialSpool, r: TrialResult, d: dict[str, object] | None, text: str | None) -> None:
        if d is None:
            spool.add_fresh(r)
        elif one_pass:
            spool.add_stored(d, text)
        else:
            spool.add(TrialResult.from_dict(d))

    path = "add_fresh / add_stored" if fresh else "add_stored" if one_pass else "walk (add)"
    print(f"python {sys.version.split()[0]}; {len(trials)} trials of {len(domain.tasks)} tasks; {path}; "
          f"fastest of {repeat} rounds, µs per trial")
    with tempfile.TemporaryDirectory() as d:
        for hop in (False, True):
            best = [float("inf"), float("inf")]
            for _ in range(repeat):
                spool = TrialSpool(Path(d), secrets=[])
                took = [0.0, 0.0]
                for r in trials:
                    t0 = time.process_time()
                    data, text = portable(r, hop)
                    t1 = time.process_time()
                    if hop:  # what the controller reads: a copy, and no JSON made here
                        data, text = wire.loads_internal(wire.dumps_internal(data)), None
                    t2 = time.process_time()
                    spooled(spool, r, data, text)
                    took[0] += t1 - t0
                    took[1] += time.process_time() - t2
                t3 = time.process_time()
                spool.ordered()  # what results.json reads first: the last held trials stored, the pending lines written
                took[1] += time.process_time() - t3
                spool.close()
                best = [min(b, x / len(trials) * 1e6) for b, x in zip(best, took, strict=True)]
            where = "under xdist (worker, controller)" if hop else "in one process"
            print(f"{where:<34} portable {best[0]:7.1f}   spooled {best[1]:7.1f}   both {sum(best):7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("domain", type=Path, help="the freight example's sandtable.yaml")
    ap.add_argument("--items", type=int, default=1500, help="about how many items each run has (default 1500)")
    ap.add_argument("--repeat", type=int, default=7, help="runs of each kind (the median is printed)")
    ap.add_argument("--recorder", action="store_true",
                    help="instead: the recorder's own cost per trial, in this process (see recorder_cost)")
    a = ap.parse_args()
    if not a.domain.is_file():
        raise SystemExit(f"no such domain file: {a.domain}")
    if a.recorder:
        recorder_cost(a.domain, a.repeat)
        return
    compile_package()
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
        print(f"{'run':>4} {'kind':<8} {'items':>6} {'loop s':>8} {'loop CPU s':>10} {'process s':>10} {'CPU s':>7}")
        res: dict[str, list[dict[str, float]]] = {name: [] for name in kinds}
        for i in range(1, a.repeat + 1):
            for name, (folder, args) in kinds.items():
                r, items = run(folder, args)
                if items != n:
                    raise SystemExit(f"{name}: {items} items, expected {n}")
                res[name].append(r)
                print(f"{i:>4} {name:<8} {items:>6} {r['loop']:>8.3f} {r['loop_cpu']:>10.3f} {r['wall']:>10.3f} "
                      f"{r['cpu']:>7.3f}")
            shutil.rmtree(freight / ".sandtable", ignore_errors=True)
        print()
        print(f"median of {a.repeat} runs, µs per item: loop (wall, CPU), process (wall, CPU)")
        med = {name: {key: statistics.median(r[key] for r in res[name]) / n * 1e6 for key in res[name][0]}
               for name in kinds}
        for name in kinds:
            m = med[name]
            print(f"{name:<22}{m['loop']:>9.1f} {m['loop_cpu']:>9.1f} {m['wall']:>10.1f} {m['cpu']:>9.1f}")
        f, t = med["freight"], med["trivial"]
        print(f"{'ratio freight/trivial':<22}{f['loop'] / t['loop']:>9.2f} {f['loop_cpu'] / t['loop_cpu']:>9.2f} "
              f"{f['wall'] / t['wall']:>10.2f} {f['cpu'] / t['cpu']:>9.2f}")
        # on a shared machine other work only ever adds time: the fastest run is the one it
        # disturbed least
        print(f"fastest of {a.repeat} runs, µs per item: loop (wall, CPU), process (wall, CPU)")
        low = {name: {key: min(r[key] for r in res[name]) / n * 1e6 for key in res[name][0]} for name in kinds}
        for name in kinds:
            m = low[name]
            print(f"{name:<22}{m['loop']:>9.1f} {m['loop_cpu']:>9.1f} {m['wall']:>10.1f} {m['cpu']:>9.1f}")
        f, t = low["freight"], low["trivial"]
        print(f"{'ratio freight/trivial':<22}{f['loop'] / t['loop']:>9.2f} {f['loop_cpu'] / t['loop_cpu']:>9.2f} "
              f"{f['wall'] / t['wall']:>10.2f} {f['cpu'] / t['cpu']:>9.2f}")
        spread = {name: (min(x["loop"] for x in r), max(x["loop"] for x in r)) for name, r in res.items()}
        print("loop spread (min-max s): " + ", ".join(f"{nm} {lo:.3f}-{hi:.3f}" for nm, (lo, hi) in spread.items()))


if __name__ == "__main__":
    main()
