"""``mutate`` over the bundled example domains and, given their folders, imported ones.

For each domain: the load time, then the wall and CPU seconds of
``mutate_domain`` (every task's reference replayed once, then each of its mutants,
through the engine, no model), the tasks and mutants, the mutants per second, and the
score; then the wall and CPU seconds of ``mutate_domain(coverage=True)`` (the same, with the
policy coverage of the references and the mutants: each trial's calls replayed again
by ``policy_coverage``, as ``mutate`` does by default) and how many hard rules that
coverage takes to "both outcomes" or "boundary"; then the totals. ``--no-coverage``
leaves the second run out. The issue's goal: the bundled domains plus τ-bench retail
and airline imported (about 190 tasks, about 5,000 mutants) in under 60 s on a 2-core
machine.

    python benchmarks/bench_mutate.py [--no-coverage] [DOMAIN_OR_FOLDER...]

An imported τ-bench env is made with ``python -m pytest_sandtable import tau-bench
PATH/tau_bench/envs/retail -o /tmp/tau-retail`` (docs/import.md); the τ-bench data is
not part of this project, so the benchmark takes the imported folder as an argument.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pytest_sandtable.domain.files import find_domain_files
from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.mutate.run import DomainReport, mutate_domain
from pytest_sandtable.report.fmt import pct

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = [ROOT / "example_domains" / "freight", ROOT / "example_domains" / "clinic"]


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out += list(find_domain_files(p)) if p.is_dir() else [p]
    return out


def _both(report: DomainReport) -> str:
    """``8/10``: the hard rules at both-outcomes or boundary, of the hard rules."""
    if report.coverage is None:
        return ""
    hard = [r for r in report.coverage.rules if not r.soft]
    return f"{sum(1 for r in hard if r.level in ('both-outcomes', 'boundary'))}/{len(hard)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="more domain files or folders (e.g. imported τ-bench envs)")
    parser.add_argument("--no-coverage", action="store_true", help="time mutate without the policy coverage only")
    args = parser.parse_args()
    tasks = mutants = 0
    wall = cpu = with_cov = cov_cpu = 0.0
    extra = "" if args.no_coverage else f" {'cov s':>7} {'cov cpu':>7} {'both':>6}"
    print(f"{'domain':<14} {'load s':>7} {'wall s':>7} {'cpu s':>7} {'tasks':>6} {'mutants':>8} {'mut/s':>7} "
          f"{'score':>7}{extra}")
    for path in _files(BUNDLED + args.paths):
        t0 = time.perf_counter()
        domain = load_domain(path)
        loaded = time.perf_counter() - t0
        w0, c0 = time.perf_counter(), time.process_time()
        report = mutate_domain(domain)
        w, c = time.perf_counter() - w0, time.process_time() - c0
        cov = ""
        if not args.no_coverage:
            v0, u0 = time.perf_counter(), time.process_time()
            report = mutate_domain(domain, coverage=True)
            v, u = time.perf_counter() - v0, time.process_time() - u0
            with_cov += v
            cov_cpu += u
            cov = f"{v:7.2f} {u:7.2f} {_both(report):>6}"
        n = report.counts["generated"]
        tasks += len(report.tasks)
        mutants += n
        wall += w
        cpu += c
        print(f"{domain.name:<14} {loaded:7.2f} {w:7.2f} {c:7.2f} {len(report.tasks):6d} {n:8d} {n / w:7.0f} "
              f"{pct(report.score):>7} {cov}".rstrip())
    total = f"{with_cov:7.2f} {cov_cpu:7.2f}" if not args.no_coverage else ""
    print(f"{'total':<14} {'':>7} {wall:7.2f} {cpu:7.2f} {tasks:6d} {mutants:8d} {mutants / max(wall, 1e-9):7.0f} "
          f"{'':>7} {total}".rstrip())


if __name__ == "__main__":
    main()
