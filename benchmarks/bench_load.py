"""Domain load time against table size: a freight-like domain whose `loads` table has
100, 10,000 and 100,000 rows (fictional, one flow mapping of 10 fields per row).

For each size, prints the file size, the median time of ``load_domain`` (read,
YAML with positions, schema, cross-references, building the Domain), the median
time of the YAML step alone (``_yaml.load_yaml``, timed right after each load)
and the median of the rest (load minus YAML, per load), over ``--repeat``
loads, then every load time. ``--profile N`` prints the top of a cProfile of one load of N rows.

``--big MB`` measures big files instead, each case in a fresh process (for its peak
memory): the same domain grown to about MB megabytes (tables first, tasks last),
valid and with one mistake near the end (a task's reference calls an unknown tool),
then written with anchors and aliases (a status written once and aliased in 90,000
rows, a row merged with `<<` into every 1,000th), valid and with one mistake in an
aliased row near the end (a duplicate key of the table). For each: the time from
``load_domain`` to the problem (or the Domain), the problem as a user sees it (its
line and column), and the process's peak resident memory. ``--slow`` adds, for the
aliased file, the pure-Python YAML path alone (what every file with an alias took
before; minutes at 30 MB).

    python benchmarks/bench_load.py [--rows 100,10000,100000] [--repeat 3] [--profile 100000]
    python benchmarks/bench_load.py --big 30 [--repeat 3] [--slow]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.domain.yaml_reader import _slow_load, load_yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_world import freight_text

# about 200 bytes a padded row
_BYTES_PER_ROW = 200.5
# the mistake near the end: the last task's reference calls a tool that does not exist
_CALL = "{ call: search_loads, args: { origin: Memphis TN } }"
# aliased rows: the first padded row is the merge template, the status of the first
# real row is the anchor
_ALIASED_ROWS = 90_000
_MERGE_EVERY = 1_000


def big_text(mb: float, *, aliases: bool, mistake: bool) -> str:
    """The freight-like domain grown to about ``mb`` MB (see the module docstring)."""
    rows = max(int(mb * 1e6 / _BYTES_PER_ROW), 4)
    text = freight_text(rows, carriers=3)
    if aliases:
        text = _with_aliases(text, rows, mistake)
    elif mistake:
        at = text.rindex(_CALL)
        text = text[:at] + _CALL.replace("search_loads", "search_lodas") + text[at + len(_CALL) :]
    return text


def _with_aliases(text: str, rows: int, mistake: bool) -> str:
    lines = text.split("\n")
    first = next(i for i, line in enumerate(lines) if "load_id: L-1001" in line)
    lines[first + 1] = lines[first + 1].replace("status: available", "status: &available available")
    aliased = 0
    for i, line in enumerate(lines):
        if not line.startswith("      - { load_id: P-"):
            continue
        n = int(line[len("      - { load_id: P-") :].split(",")[0])
        if n == 0:
            lines[i] = line.replace("- {", "- &row {", 1)
        elif n % _MERGE_EVERY == 0:
            lines[i] = line.replace("- { load_id:", "- { <<: *row, load_id:", 1)
        elif aliased < _ALIASED_ROWS and n >= rows - 4 - _ALIASED_ROWS - 1:
            lines[i] = line.replace("status: available", "status: *available")
            aliased += 1
            if mistake and n == rows - 6:  # an aliased row near the end repeats a key
                lines[i] = lines[i].replace(f"load_id: P-{n},", "load_id: P-7,")
    return "\n".join(lines)


def _one(case: str, mb: float, repeat: int) -> None:
    """Measure one case in this process and print it as JSON (see --big)."""
    aliases, mistake = case in ("aliases", "aliases+mistake", "slow"), case.endswith("mistake")
    text = big_text(mb, aliases=aliases, mistake=mistake)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.sandtable.yaml"
        path.write_text(text, encoding="utf-8")
        times, said = [], ""
        for _ in range(0 if case == "slow" else repeat):
            t0 = time.perf_counter()
            try:
                load_domain(path)
                said = "loaded"
            except DomainError as exc:
                said = str(exc).replace(str(path), "big.sandtable.yaml")
            times.append(time.perf_counter() - t0)
        out = {"mb": len(text.encode()) / 1e6, "times": times, "said": said}
        if case == "slow":
            t0 = time.perf_counter()
            _slow_load(text, str(path))
            out["times"] = [time.perf_counter() - t0]
        out["load_average"] = os.getloadavg()[0]
        out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _big(mb: float, repeat: int, slow: bool) -> None:
    cases = ["valid", "mistake", "aliases", "aliases+mistake"] + (["slow"] if slow else [])
    print(f"python {sys.version.split()[0]}, PyYAML {yaml.__version__}, libyaml {yaml.__with_libyaml__}")
    for case in cases:
        run = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                case,
                "--big",
                str(mb),
                "--repeat",
                str(1 if case == "slow" else repeat),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(run.stdout.strip().splitlines()[-1])
        every = " ".join(f"{t:.2f}" for t in got["times"])
        name = "aliases, pure-Python YAML path" if case == "slow" else case
        print(
            f"{name:<32}{got['mb']:>6.1f} MB  median {statistics.median(got['times']):>6.2f} s  "
            f"peak {got['peak_mb']:>6.0f} MB   all s: {every}   (load average {got['load_average']:.1f})"
        )
        if case != "slow":
            print(f"    {got['said']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="100,10000,100000", help="comma-separated sizes of the loads table")
    ap.add_argument("--repeat", type=int, default=3, help="loads per size (the median is printed)")
    ap.add_argument("--profile", type=int, metavar="N", help="profile one load of N rows instead")
    ap.add_argument("--big", type=float, metavar="MB", help="measure files of about MB megabytes instead")
    ap.add_argument("--slow", action="store_true", help="with --big: also the aliased file on the pure-Python path")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # one --big case, in a fresh process
    a = ap.parse_args()
    if a.one:
        _one(a.one, a.big, a.repeat)
        return
    if a.big:
        _big(a.big, a.repeat, a.slow)
        return
    with tempfile.TemporaryDirectory() as d:
        if a.profile:
            path = Path(d) / "sandtable.yaml"
            path.write_text(freight_text(a.profile, carriers=3), encoding="utf-8")
            prof = cProfile.Profile()
            prof.runcall(load_domain, path)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
            return
        print(f"python {sys.version.split()[0]}, PyYAML {yaml.__version__}, libyaml {yaml.__with_libyaml__}")
        print(f"{'rows':>9}{'MB':>8}{'load s':>9}{'yaml s':>9}{'rest s':>9}{'µs/row':>9}   all loads s")
        for n in [int(x) for x in a.rows.split(",")]:
            path = Path(d) / f"rows{n}.sandtable.yaml"
            text = freight_text(n, carriers=3)
            path.write_text(text, encoding="utf-8")
            loads, yamls, rests = [], [], []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                load_domain(path)
                t1 = time.perf_counter()
                load_yaml(text, str(path))
                t2 = time.perf_counter()
                loads.append(t1 - t0)
                yamls.append(t2 - t1)
                rests.append((t1 - t0) - (t2 - t1))
            lm = statistics.median(loads)
            mb = len(text.encode()) / 1e6
            every = " ".join(f"{x:.2f}" for x in loads)
            print(
                f"{n:>9,}{mb:>8.1f}{lm:>9.2f}{statistics.median(yamls):>9.2f}{statistics.median(rests):>9.2f}"
                f"{lm / n * 1e6:>9.1f}   {every}"
            )


if __name__ == "__main__":
    main()
