"""Adaptive trials (issue 25) on a τ-bench-sized suite: trials spent against a fixed k,
the share of tasks decided, wrong verdicts, and how fast a regression is caught.

The suite: ``--tasks`` (165, τ-bench retail's 115 plus airline's 50) with a planted mix
of pass rates, drawn once from ``--seed``: 55% near-always passing (1.0, 0.995 or 0.99),
20% near-always failing (uniform in 0 to 0.1), 20% flaky (uniform in 0.3 to 0.75) and 5%
borderline (uniform in 0.82 to 0.95, between p0 and p1, where either verdict is right
and the cap is often reached). The agent is a stats agent: whether trial t of task i
passes is a seeded hash of (seed, i, t) below the task's rate, and ``--errored`` of the
trials (by a second hash) error instead; an errored trial is spent but never counted.

The scheduler is the one the plugin runs, simulated: rounds of ``--concurrency`` trials,
each round one trial to each of the open tasks nearest a boundary
(`TaskSequence.distance`, ties by task), a settled task getting no more, the cap
``--cap`` graded trials, an optional ``--max-trials`` budget. Verdicts are checked at
concurrency 1, 8 and 32: a task's outcomes depend on its own (task, trial) only, so they
must be the same.

"wrong" counts "reliable" for a task below p0 and "unreliable" for one at or above p1.
The fixed-k line is what k = cap trials per task spend, and how many tasks their
Wilson interval decides (entirely above p0: reliable; entirely below p1: unreliable).

Regression: every task falls from always passing to passing half the time (the same
hash, so a pair's two trials share their seed); the mean paired trials until
`PairedRegression` says "regressed", over ``--repeats`` seeds; and the same against a
stored baseline of 32/32 (`StoredRegression`); a milder fall, 0.9 to 0.6; a fall from
0.8 to 0.6 where the two trials of a pair draw independently (no shared seed); and no
fall at all (0.8 to 0.8, independent: every "regressed" there is a false one).

The stored test runs as the plugin runs it, at alpha over m, m = ``--tasks`` (the
baseline's tasks; ``report.adaptive.paired_alpha``), and also at alpha itself (the test
before issue 25's fix) for comparison; for each, how often e-BH at alpha across the m
tasks flags the fallen task when it is the only one that fell (the other m - 1 stay at
1.0 against their 32/32).

    python benchmarks/bench_adaptive.py [--tasks 165] [--seed 25] [--concurrency 8]
                                        [--cap 32] [--errored 0.03] [--max-trials N]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from dataclasses import dataclass

from pytest_sandtable.report.adaptive import paired_alpha
from pytest_sandtable.report.stats import wilson
from pytest_sandtable.sequential import Design, PairedRegression, StoredRegression, TaskSequence, e_bh


def unit(*parts: object) -> float:
    """A uniform draw in [0, 1) from a hash of the parts: the same (seed, task, trial) always
    gives the same outcome, whatever order trials run in."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0 ** 64


def planted_rates(tasks: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    rates = []
    for i in range(tasks):
        share = i / tasks
        if share < 0.55:
            rates.append(rng.choice((1.0, 0.995, 0.99)))
        elif share < 0.75:
            rates.append(rng.uniform(0.0, 0.1))
        elif share < 0.95:
            rates.append(rng.uniform(0.3, 0.75))
        else:
            rates.append(rng.uniform(0.82, 0.95))
    rng.shuffle(rates)
    return rates


@dataclass
class Outcome:
    spent: int
    verdicts: list[str]
    trials: list[int]
    rounds: int


def run_adaptive(design: Design, rates: list[float], seed: int, concurrency: int, errored: float,
                 max_trials: int | None = None) -> Outcome:
    seqs = [TaskSequence(design) for _ in rates]
    next_trial = [0] * len(rates)
    spent = rounds = 0
    while True:
        open_tasks = [i for i, s in enumerate(seqs) if s.open]
        if not open_tasks or (max_trials is not None and spent >= max_trials):
            break
        open_tasks.sort(key=lambda i: (seqs[i].distance(), i))
        batch = open_tasks[:concurrency]
        if max_trials is not None:
            batch = batch[:max_trials - spent]
        rounds += 1
        for i in batch:  # each a trial in flight; graded outcomes go to their task in trial order
            t = next_trial[i]
            next_trial[i] += 1
            spent += 1
            if unit(seed, "error", i, t) < errored:
                continue  # errored: spent, never counted
            seqs[i].observe(unit(seed, i, t) < rates[i])
    verdicts: list[str] = [s.verdict or "open" for s in seqs]
    return Outcome(spent, verdicts, [s.n for s in seqs], rounds)


def wrong(design: Design, rate: float, verdict: str) -> bool:
    return (verdict == "reliable" and rate < design.p0) or (verdict == "unreliable" and rate >= design.p1)


def fixed_k(design: Design, rates: list[float], seed: int, errored: float) -> tuple[int, int]:
    """Trials spent and tasks decided by k = cap trials each, judged by the Wilson interval."""
    decided = 0
    for i, rate in enumerate(rates):
        graded = [unit(seed, i, t) < rate for t in range(design.cap) if unit(seed, "error", i, t) >= errored]
        w = wilson(sum(graded), len(graded))
        if w is not None and (w[0] > design.p0 or w[1] < design.p1):
            decided += 1
    return design.cap * len(rates), decided


def paired_catch(tasks: int, repeats: int, base_rate: float, new_rate: float, cap: int,
                 coupled: bool = True) -> tuple[list[int | None], int]:
    """Pairs until "regressed" per (task, repeat), None when not caught by the cap; and how
    many ended "no-regression". ``coupled``: a pair's two trials share one draw (the same
    seed decides both), else each build draws its own."""
    caught: list[int | None] = []
    missed = 0
    for r in range(repeats):
        for i in range(tasks):
            test = PairedRegression(cap=cap)
            t = 0
            while test.open:
                u = unit("paired", r, i, t)  # one seed, both builds
                v = u if coupled else unit("paired-new", r, i, t)
                test.observe(u < base_rate, v < new_rate)
                t += 1
            caught.append(test.n if test.verdict == "regressed" else None)
            missed += test.verdict == "no-regression"
    return caught, missed


def stored_run(alpha: float, cap: int, draws: object, new_rate: float) -> StoredRegression:
    """One task's stored test against 32/32 at ``alpha``, fed until settled."""
    test = StoredRegression(32, 32, alpha=alpha, cap=cap)
    t = 0
    while test.open:
        test.observe(unit("stored", draws, t) < new_rate)
        t += 1
    return test


def stored_catch(tasks: int, repeats: int, new_rate: float, cap: int,
                 alpha: float) -> tuple[list[int | None], int]:
    """Trials until "regressed" per (task, repeat) at ``alpha`` (None: not caught by the
    cap); and how many times e-BH at 0.05 across the ``tasks`` flags the task when it alone
    fell (the others always pass; their stopped e-values are all the same)."""
    steady = stored_run(alpha, cap, "steady", 1.0).e_value
    caught: list[int | None] = []
    flagged = 0
    for r in range(repeats):
        for i in range(tasks):
            test = stored_run(alpha, cap, f"{r}:{i}", new_rate)
            caught.append(test.n if test.verdict == "regressed" else None)
            e_values = {"fell": test.e_value, **{f"t{j}": steady for j in range(tasks - 1)}}
            flagged += "fell" in e_bh(e_values, 0.05)
    return caught, flagged


def catch_line(name: str, caught: list[int | None], missed: int | None = None) -> str:
    hits = [n for n in caught if n is not None]
    mean = statistics.fmean(hits) if hits else float("nan")
    said = "" if missed is None else f", said no-regression {missed}"
    return (f"{name:<38} caught {len(hits):>5}/{len(caught)} ({len(hits) / len(caught):6.1%}), "
            f"mean {mean:5.2f} trials, max {max(hits) if hits else 0}{said}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=165)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--cap", type=int, default=32)
    parser.add_argument("--errored", type=float, default=0.03)
    parser.add_argument("--max-trials", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    started = time.process_time()
    rates = planted_rates(args.tasks, args.seed)
    print(f"{args.tasks} tasks, seed {args.seed}, cap {args.cap}, {args.errored:.0%} of trials errored, "
          f"concurrency {args.concurrency}")
    print(f"{'p0':>5} {'p1':>5} {'spent':>6} {'k=cap':>6} {'ratio':>6} {'decided':>8} {'reliable':>9} "
          f"{'unreliable':>11} {'inconcl.':>9} {'wrong':>6} {'per task':>9}")
    for p1 in (0.9, 0.95, 0.97, 0.99):
        design = Design(p0=0.8, p1=p1, cap=args.cap)
        design.check()
        out = run_adaptive(design, rates, args.seed, args.concurrency, args.errored, args.max_trials)
        fixed, _ = fixed_k(design, rates, args.seed, args.errored)
        counts = {v: out.verdicts.count(v) for v in ("reliable", "unreliable", "inconclusive", "open")}
        decided = counts["reliable"] + counts["unreliable"]
        bad = sum(wrong(design, r, v) for r, v in zip(rates, out.verdicts))
        mark = "  (default)" if p1 == Design().p1 else ""
        print(f"{design.p0:5.2f} {p1:5.2f} {out.spent:6d} {fixed:6d} {fixed / out.spent:5.2f}x "
              f"{decided / len(rates):8.1%} {counts['reliable']:9d} {counts['unreliable']:11d} "
              f"{counts['inconclusive'] + counts['open']:9d} {bad:6d} {out.spent / len(rates):9.1f}{mark}")
    design = Design(cap=args.cap)
    fixed, fixed_decided = fixed_k(design, rates, args.seed, args.errored)
    print(f"fixed k={args.cap}: {fixed} trials, Wilson decides {fixed_decided}/{len(rates)} "
          f"({fixed_decided / len(rates):.1%})")
    base = run_adaptive(design, rates, args.seed, 1, args.errored)
    same = all(run_adaptive(design, rates, args.seed, c, args.errored).verdicts == base.verdicts for c in (8, 32))
    print(f"same verdicts and trial counts at concurrency 1, 8 and 32: {'yes' if same else 'NO'}")
    inconclusive = base.verdicts.count("inconclusive")
    print(f"summary line: spent {base.spent:,} trials where k={args.cap} would take {fixed:,} "
          f"({fixed / base.spent:.1f}x fewer); {inconclusive} tasks inconclusive at the cap")
    print()
    print(f"regression, {args.tasks} tasks x {args.repeats} seeds, cap {args.cap}:")
    for name, base_rate, new_rate, coupled in (("paired 1.0 -> 0.5", 1.0, 0.5, True),
                                                ("paired 0.9 -> 0.6", 0.9, 0.6, True),
                                                ("paired 0.8 -> 0.6, independent pairs", 0.8, 0.6, False),
                                                ("paired 0.8 -> 0.8, independent pairs", 0.8, 0.8, False)):
        caught, missed = paired_catch(args.tasks, args.repeats, base_rate, new_rate, args.cap, coupled)
        print(catch_line(name, caught, missed))
    for name, alpha in ((f"stored 32/32 -> 0.5, alpha/{args.tasks}", paired_alpha(0.05, args.tasks)),
                        ("stored 32/32 -> 0.5, alpha (before)", 0.05)):
        caught, flagged = stored_catch(args.tasks, args.repeats, 0.5, args.cap, alpha)
        print(catch_line(name, caught) + f", alone flagged by e-BH {flagged}")
    print(f"cpu {time.process_time() - started:.1f} s")


if __name__ == "__main__":
    main()
