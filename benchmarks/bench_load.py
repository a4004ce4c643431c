"""Domain load time against table size: a freight-like domain whose `loads` table has
100, 10,000 and 100,000 rows (fictional, one flow mapping of 10 fields per row).

For each size, prints the file size, the median time of ``load_domain`` (read,
YAML with positions, schema, cross-references, building the Domain), the median
time of the YAML step alone (``_yaml.load_yaml``, timed right after each load)
and the median of the rest (load minus YAML, per load), over ``--repeat``
loads, then every load time. ``--profile N`` prints the top of a cProfile of one load of N rows.

    python benchmarks/bench_load.py [--rows 100,10000,100000] [--repeat 3] [--profile 100000]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.domain.yaml_reader import load_yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_world import freight_text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="100,10000,100000", help="comma-separated sizes of the loads table")
    ap.add_argument("--repeat", type=int, default=3, help="loads per size (the median is printed)")
    ap.add_argument("--profile", type=int, metavar="N", help="profile one load of N rows instead")
    a = ap.parse_args()
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
            print(f"{n:>9,}{mb:>8.1f}{lm:>9.2f}{statistics.median(yamls):>9.2f}{statistics.median(rests):>9.2f}"
                  f"{lm / n * 1e6:>9.1f}   {every}")


if __name__ == "__main__":
    main()
