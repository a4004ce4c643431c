"""The trial itself: CPU time per trial of each task of a domain, in-process.

Runs every task of DOMAIN_FILE (by default the freight example) with the built-in
reference agent and scripted user, driven the way the plugin drives a trial whose
agent and user run inline (``RunState._drive``: the coroutine sent once, no event
loop), with the arguments the plugin passes (k, the run's seed, names, location, the
default trial timeout). No pytest and no recording: only ``engine.trial.arun_trial``.
The tasks take turns, ``--rounds`` rounds of ``--reps`` trials each (trial numbers
1..k cycling, so the seeds vary as in a run); each round's CPU time (user + system,
``time.process_time``) per trial is a sample, and the median of a task's samples is
its figure. Prints µs per trial for each task, the mean over the tasks (what a run
of k trials a task pays per item) and the load average.

With ``--against DIR`` (a folder holding another copy of the ``pytest_sandtable``
package, e.g. one copied before a change), it runs itself in subprocesses, the two
copies alternating ``--runs`` times, and prints both copies' medians and the ratio
this copy / the other, per task and in all::

    python benchmarks/bench_trial.py [DOMAIN_FILE] [--rounds 15] [--reps 40] [--k 3]
    python benchmarks/bench_trial.py [DOMAIN_FILE] --against /tmp/before --runs 5

With ``--run-trial``, the public ``run_trial`` against ``arun_trial`` as the plugin drives
it, in one process, alternating round by round (each round: every task ``--reps`` times
one way, then the other): with the reference agent (inline: ``arun_trial``'s coroutine
sent once, no event loop) and with the same agent as an ``async def`` agent (not inline:
``arun_trial`` on one kept event loop, ``loop.run_until_complete``). Printed per agent:
the median CPU µs per trial of each way over all tasks and the ratio run_trial /
arun_trial (the goal: at most 1.2)::

    python benchmarks/bench_trial.py [DOMAIN_FILE] --run-trial [--rounds 15] [--reps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"


def drive(coro: Coroutine[Any, Any, Any]) -> Any:
    """The trial's coroutine run to its end without an event loop, as ``RunState._drive``
    runs a trial whose agent and user both run inline (they never await)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("an inline trial suspended")


def measure(domain_file: Path, rounds: int, reps: int, k: int) -> dict[str, Any]:
    """Median CPU µs per trial for each task, with every trial's verdict checked stable."""
    from pytest_sandtable.domain.loader import load_domain
    from pytest_sandtable.engine.reference import ReferenceAgent
    from pytest_sandtable.engine.scripted_user import ScriptedUser
    from pytest_sandtable.engine.trial import arun_trial

    domain = load_domain(domain_file)
    agent, user = ReferenceAgent(), ScriptedUser()
    tasks = list(domain.tasks)

    def one(task: Any, trial: int) -> str:
        result = drive(arun_trial(
            domain, task, agent, user, trial=trial, k=k, run_seed=1, agent_name="reference",
            user_name="scripted", trial_timeout=900.0, location=f"{domain_file}:1",
        ))
        return str(result.verdict)

    verdicts = {task.id: one(task, 1) for task in tasks}  # warm: lazy indexes, handler imports
    samples: dict[str, list[float]] = {task.id: [] for task in tasks}
    for r in range(rounds):
        for task in tasks:
            c0 = time.process_time()
            for i in range(reps):
                verdict = one(task, 1 + (r * reps + i) % k)
                if verdict != verdicts[task.id]:
                    raise SystemExit(f"{task.id}: verdict {verdict}, first {verdicts[task.id]}")
            samples[task.id].append((time.process_time() - c0) / reps * 1e6)
    per_task = {tid: statistics.median(s) for tid, s in samples.items()}
    return {"per_task": per_task, "verdicts": verdicts, "mean": statistics.fmean(per_task.values())}


def run_trial_cost(domain_file: Path, rounds: int, reps: int, k: int) -> None:
    """run_trial against arun_trial as the plugin drives it, alternating in this process."""
    import asyncio

    import pytest_sandtable as st
    from pytest_sandtable.domain.loader import load_domain
    from pytest_sandtable.engine.trial import arun_trial

    domain = load_domain(domain_file)
    reference = st.ReferenceAgent()

    async def async_reference(turn: st.Turn) -> Any:  # the same agent, not inline
        return reference(turn)

    loop = asyncio.new_event_loop()
    kw: dict[str, Any] = {"k": k, "run_seed": 1, "agent_name": "reference", "user_name": "scripted",
                          "trial_timeout": 900.0, "location": f"{domain_file}:1"}
    print(f"{domain_file}: {len(domain.tasks)} tasks, {rounds} rounds of {reps} trials a task each way; "
          f"load average {load_average()}")
    print(f"  {'agent':<28}{'arun_trial µs':>15}{'run_trial µs':>14}{'ratio':>8}")
    for label, agent in (("reference (inline)", reference), ("async def (on the loop)", async_reference)):
        user = st.ScriptedUser()

        def plugin(task: Any, trial: int, agent: Any = agent, user: Any = user) -> str:
            coro = arun_trial(domain, task, agent, user, trial=trial, **kw)
            result = drive(coro) if agent is reference else loop.run_until_complete(coro)
            return str(result.verdict)

        def public(task: Any, trial: int, agent: Any = agent, user: Any = user) -> str:
            return str(st.run_trial(domain, task, agent, user, trial=trial, **kw).verdict)

        want = {t.id: plugin(t, 1) for t in domain.tasks}
        if {t.id: public(t, 1) for t in domain.tasks} != want:
            raise SystemExit(f"{label}: run_trial's verdicts differ from arun_trial's")
        samples: dict[str, list[float]] = {"plugin": [], "public": []}
        for r in range(rounds):
            for name, way in (("plugin", plugin), ("public", public))[:: 1 if r % 2 == 0 else -1]:
                c0 = time.process_time()
                for task in domain.tasks:
                    for i in range(reps):
                        way(task, 1 + i % k)
                samples[name].append((time.process_time() - c0) / (reps * len(domain.tasks)) * 1e6)
        a, b = (statistics.median(samples[n]) for n in ("plugin", "public"))
        print(f"  {label:<28}{a:>15.1f}{b:>14.1f}{b / a:>8.2f}")
    loop.close()


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def show(result: dict[str, Any]) -> None:
    width = max(len(t) for t in result["per_task"])
    for tid, us in result["per_task"].items():
        print(f"  {tid:<{width}}  {result['verdicts'][tid]:<7}  {us:8.1f} µs")
    print(f"  {'mean per trial':<{width}}  {'':<7}  {result['mean']:8.1f} µs")


def against(args: argparse.Namespace) -> None:
    """This copy and the one in ``args.against``, alternating in subprocesses."""
    here = str(Path(__file__).resolve().parent.parent)
    copies = {"this": here, "other": str(Path(args.against).resolve())}
    runs: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
    for n in range(args.runs):
        for name in (("this", "other") if n % 2 == 0 else ("other", "this")):
            env = dict(os.environ, PYTHONPATH=copies[name])
            out = subprocess.run(
                [sys.executable, __file__, str(args.domain), "--rounds", str(args.rounds), "--reps", str(args.reps),
                 "--k", str(args.k), "--json"],
                env=env, check=True, capture_output=True, text=True,
            ).stdout
            runs[name].append(json.loads(out))
    this, other = (_medians(runs[name]) for name in ("this", "other"))
    if this["verdicts"] != other["verdicts"]:
        raise SystemExit(f"the verdicts differ: {this['verdicts']} against {other['verdicts']}")
    width = max(len(t) for t in this["per_task"])
    print(f"{args.runs} runs each, alternating; load average now {load_average()}")
    print(f"  {'task':<{width}}  {'this':>9}  {'other':>9}  this/other")
    for tid in this["per_task"]:
        a, b = this["per_task"][tid], other["per_task"][tid]
        print(f"  {tid:<{width}}  {a:7.1f}µs  {b:7.1f}µs  {a / b:.2f}x")
    a, b = this["mean"], other["mean"]
    print(f"  {'mean per trial':<{width}}  {a:7.1f}µs  {b:7.1f}µs  {a / b:.2f}x")


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each task's median over the runs, and the median of the runs' means."""
    per_task = {tid: statistics.median(r["per_task"][tid] for r in runs) for tid in runs[0]["per_task"]}
    return {"per_task": per_task, "verdicts": runs[0]["verdicts"], "mean": statistics.median(r["mean"] for r in runs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("domain", nargs="?", type=Path, default=FREIGHT)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--k", type=int, default=3, help="trial numbers cycle 1..k (the seed follows)")
    ap.add_argument("--against", metavar="DIR", help="a folder holding another copy of pytest_sandtable")
    ap.add_argument("--runs", type=int, default=5, help="with --against: subprocess runs of each copy")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-trial", action="store_true", help="run_trial against arun_trial, in this process")
    args = ap.parse_args()
    if args.run_trial:
        run_trial_cost(args.domain, args.rounds, args.reps, args.k)
        return
    if args.against:
        against(args)
        return
    result = measure(args.domain, args.rounds, args.reps, args.k)
    if args.json:
        print(json.dumps(result))
        return
    import pytest_sandtable

    print(f"{args.domain}: {len(result['per_task'])} tasks, {args.rounds} rounds of {args.reps} trials a task "
          f"(package {Path(pytest_sandtable.__file__).parent}); load average {load_average()}")
    show(result)


if __name__ == "__main__":
    main()
