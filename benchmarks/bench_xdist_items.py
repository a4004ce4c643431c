"""What pytest-xdist costs a run of many fast trials, against what it costs bare pytest.

Default: the freight example's tasks k times each with the reference agent (the domain
file copied alone into a temporary folder: the example's conftest.py brings its own
agent), about ``--items`` items, with ``-n 0`` and ``-n 2``; and the same number of
trivial tests (``@pytest.mark.parametrize("i", range(N)) def test_x(i): assert i >= 0``)
with ``-n 0`` and ``-n 2``. Each in a fresh ``python -m pytest -q -p no:cacheprovider
-p no:hypothesispytest`` subprocess (hypothesis is a development dependency of this
project that prints its own summary in every process), the four alternating,
``--repeat`` times after one unmeasured round. Prints every run's wall and CPU seconds
(user + system of pytest and its workers), the medians, ``-n 2 / -n 0`` of each kind
and ours / bare's: the goal is within 10% of bare pytest (1.10 at most).

``--controller``: what one trial costs on the xdist hop, in this process, without
pytest's run: a trial's call report as pytest makes it, with the trial attached as the
worker's recorder attaches it, made serializable as pytest-xdist does
(``pytest_report_to_serializable``: ``TestReport._to_json``) and written by execnet
(worker); read by execnet, made a report again (``TestReport._from_json``) and recorded
(controller). Two ways, alternating, fastest of ``--repeat`` rounds, µs per trial:

- ``dict`` (the transport before issue 26): ``report.safe.portable_trial`` on the
  worker, ``TrialSpool.add_stored`` of the dict on the controller;
- ``line``: ``report.spool.trial_line`` on the worker, one string;
  ``TrialSpool.add_line`` on the controller, which stores it as it came.

    python benchmarks/bench_xdist_items.py DOMAIN_FILE [--items 3000] [--repeat 3]
    python benchmarks/bench_xdist_items.py DOMAIN_FILE --controller [--repeat 20]

DOMAIN_FILE is the example's sandtable.yaml (example_domains/freight/sandtable.yaml).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

TRIVIAL = """\
import pytest


@pytest.mark.parametrize("i", range({n}))
def test_x(i):
    assert i >= 0
"""

BASE_ARGS = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]


def run(folder: Path, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process and its children) of one pytest run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", *BASE_ARGS, *args], cwd=folder,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-500:]]
        raise SystemExit(f"pytest {' '.join(args)} failed in {folder.name}: {tail[0]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def wall_ratio(domain_file: Path, items: int, repeat: int) -> None:
    import pytest_sandtable
    from pytest_sandtable import load_domain

    tasks = len(load_domain(domain_file).tasks)
    k = max(1, round(items / tasks))
    n = tasks * k
    where = Path(pytest_sandtable.__file__).parent.parent.name
    print(f"python {sys.version.split()[0]}; pytest_sandtable from {where}; "
          f"{tasks} tasks x k={k} = {n} items against {n} trivial tests; load average "
          f"{os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        ours, bare = Path(tmp, "ours"), Path(tmp, "bare")
        ours.mkdir()
        bare.mkdir()
        shutil.copy(domain_file, ours / "sandtable.yaml")
        (bare / "test_trivial.py").write_text(TRIVIAL.format(n=n), encoding="utf-8")
        ours_args = [f"--sandtable-k={k}", "--sandtable-agent=reference", f"--sandtable-out={ours / 'out'}"]
        kinds: dict[str, tuple[Path, list[str]]] = {
            "ours -n 0": (ours, [*ours_args, "-n", "0"]),
            "ours -n 2": (ours, [*ours_args, "-n", "2"]),
            "bare -n 0": (bare, ["-n", "0"]),
            "bare -n 2": (bare, ["-n", "2"]),
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
        for r in range(repeat + 1):
            for name, (folder, args) in kinds.items():
                took = run(folder, args)
                if r:  # the first round is unmeasured: bytecode, caches
                    times[name].append(took)
                    print(f"  round {r}  {name}  wall {took[0]:6.2f} s  CPU {took[1]:6.2f} s", flush=True)
    med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}
    for name, (w, c) in med.items():
        print(f"{name:<10} median wall {w:6.2f} s ({w / n * 1e6:7.1f} µs/item)  CPU {c:6.2f} s")
    ours_w, bare_w = med["ours -n 2"][0] / med["ours -n 0"][0], med["bare -n 2"][0] / med["bare -n 0"][0]
    ours_c, bare_c = med["ours -n 2"][1] / med["ours -n 0"][1], med["bare -n 2"][1] / med["bare -n 0"][1]
    print(f"-n 2 / -n 0, wall: ours {ours_w:.2f}x, bare pytest {bare_w:.2f}x, ours / bare {ours_w / bare_w:.2f}")
    print(f"-n 2 / -n 0, CPU:  ours {ours_c:.2f}x, bare pytest {bare_c:.2f}x, ours / bare {ours_c / bare_c:.2f}")


def controller_cost(domain_file: Path, repeat: int) -> None:
    import execnet.gateway_base as wire
    from _pytest.reports import TestReport

    from pytest_sandtable import ReferenceAgent, ScriptedUser, load_domain, run_trial
    from pytest_sandtable.engine.results import TrialResult
    from pytest_sandtable.report import safe, spool

    domain = load_domain(domain_file)
    trials = [run_trial(domain, task.id, ReferenceAgent(), ScriptedUser(), trial=i, k=5,
                        location=f"sandtable.yaml:{task.pos.line if task.pos else 1}")
              for task in domain.tasks for i in range(1, 6)]

    def report(t: TrialResult) -> TestReport:
        """A trial item's call report, as pytest makes it (its keywords: the item's name,
        the marker, the file, the folder and the task's tags)."""
        name = f"{t.task}[{t.trial}-{t.k}]"
        keywords: dict[str, Literal[1]] = {name: 1, "sandtable": 1, "sandtable.yaml": 1, "bench": 1, "": 1}
        keywords.update((tag, 1) for tag in t.tags)
        return TestReport(f"sandtable.yaml::{name}", ("sandtable.yaml", 10, name), keywords, "passed", None,
                          "call", [], 0.0002, time.time(), time.time(), [])

    ways: dict[str, tuple[Callable[[TrialResult], Any], Callable[[spool.TrialSpool, Any], Any]]] = {
        "dict": (safe.portable_trial, lambda s, data: s.add_stored(data)),
    }
    if hasattr(spool, "trial_line"):
        ways["line"] = (lambda t: spool.trial_line(t, []).decode("utf-8"), lambda s, data: s.add_line(data))
    best = {name: [float("inf"), float("inf")] for name in ways}
    sizes: dict[str, int] = {}
    print(f"python {sys.version.split()[0]}; {len(trials)} trials of {len(domain.tasks)} tasks; "
          f"fastest of {repeat} rounds, CPU µs per trial; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            for name, (carried, stored) in ways.items():
                sp = spool.TrialSpool(Path(tmp), secrets=[])
                took = [0.0, 0.0]
                size = 0
                for t in trials:
                    rep = report(t)
                    t0 = time.process_time()
                    rep.sandtable = carried(t)  # type: ignore[attr-defined]
                    sent = wire.dumps_internal(("testreport", {"data": rep._to_json()}))
                    t1 = time.process_time()
                    _, kwargs = wire.loads_internal(sent)
                    got = TestReport._from_json(kwargs["data"])
                    stored(sp, vars(got).pop("sandtable"))
                    t2 = time.process_time()
                    took[0] += t1 - t0
                    took[1] += t2 - t1
                    size += len(sent)
                t3 = time.process_time()
                sp.ordered()  # the pending lines written
                took[1] += time.process_time() - t3
                sp.close()
                sizes[name] = size // len(trials)
                best[name] = [min(b, x / len(trials) * 1e6) for b, x in zip(best[name], took, strict=True)]
    for name in ways:
        w, c = best[name]
        print(f"{name:<5} worker {w:7.1f}   controller {c:7.1f}   bytes on the wire {sizes[name]:,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("domain", type=Path, help="the freight example's sandtable.yaml")
    ap.add_argument("--items", type=int, default=3000, help="about how many items each run has (default 3000)")
    ap.add_argument("--repeat", type=int, default=3, help="measured rounds (the median is printed)")
    ap.add_argument("--controller", action="store_true", help="instead: one trial's cost on the xdist hop, in-process")
    a = ap.parse_args()
    if not a.domain.is_file():
        raise SystemExit(f"no such domain file: {a.domain}")
    if a.controller:
        controller_cost(a.domain, a.repeat)
    else:
        wall_ratio(a.domain, a.items, a.repeat)


if __name__ == "__main__":
    main()
