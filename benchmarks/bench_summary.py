"""The end of a run: CPU seconds of ``summarize`` (pass^j and pass@j for every j, with
their bootstrap intervals, per task, tag and domain) at growing run sizes, and of the
whole end of a run of real trials (summary, results.json, report.html, terminal).

    python benchmarks/bench_summary.py [--end-of-run 200] [--profile K]
    python benchmarks/bench_summary.py --finish K [--repeat 4]

``summarize``: trials are built directly (no engine), with half of the tasks always
passing, a sixth always failing and the rest flaky, six tags plus three groups, and an
owner on every failure. CPU time (``time.process_time``), best of 3 (one run for the
largest), so a busy machine inflates it less than wall time.

``--end-of-run N``: N trials of the freight example played in-process by its desk
agent (flaw rate 0.5, so trials fail and carry transcripts and attributions) and the
scripted user, spooled as a run's recorder spools them (``report.spool``); then what
the recorder does at session finish, timed: name the sides, build the summary and the
gate (``build_spooled``), write results.json and report.html (``write_run``) and render
the terminal summary. CPU and wall seconds, best of 5. ``--profile K`` prints the top
of a cProfile of that end of run with K trials per task.

``--finish K``: instead, the freight example's domain file alone (its conftest.py
brings its own agent) run by pytest in a subprocess with the reference agent at K
trials per task, ``--repeat`` times: the CPU seconds of ``pytest_sessionfinish`` (the
summary with its bootstrap intervals, results.json, report.html), timed by a
conftest.py hook wrapper; best and median. At K = 88 nearly all of it used to be the
bootstrap.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.results_json import RunMeta, build_spooled, write_run
from pytest_sandtable.report.spool import TrialSpool
from pytest_sandtable.report.summary import summarize
from pytest_sandtable.report.terminal import render_terminal

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight"


def make(tasks: int, k: int, domains: tuple[str, ...] = ("shop",), seed: int = 1) -> list[TrialResult]:
    rng = random.Random(seed)
    out = []
    for t in range(tasks):
        u = rng.random()
        p = 1.0 if u < 0.5 else (0.0 if u < 0.65 else rng.random())
        dom = domains[t % len(domains)]
        for i in range(1, k + 1):
            verdict = "passed" if rng.random() < p else "failed"
            failed = verdict == "failed"
            out.append(TrialResult(
                domain=dom, task=f"task-{t}", trial=i, k=k, seed=i, verdict=verdict,
                tags=[f"tag{t % 6}", f"grp{t % 3}"], location=f"{dom}.yaml:{t + 1}", agent="a", user="u",
                checks=[Check("state", f"state:x#{t % 5}", False, "no")] if failed else [],
                attribution={"owner": rng.choice(["agent", "task", "user"]), "evidence": "e"} if failed else None,
                latency=[0.1, 0.2]))
    return out


def summaries() -> None:
    for tasks, k, domains in [(50, 4, ("shop",)), (115, 32, ("shop",)), (115, 32, ("shop", "bank")),
                              (115, 174, ("shop",))]:
        trials = make(tasks, k, domains)
        best = float("inf")
        for _ in range(3 if len(trials) < 5000 else 1):
            t0 = time.process_time()
            summary = summarize(trials, k=k)
            best = min(best, time.process_time() - t0)
        print(f"{len(trials):>6} trials ({tasks} tasks x k={k}, {len(domains)} domain(s)): "
              f"summarize {best:.3f} s CPU, {summary['intervals']['resamples']} resamples")


def freight_trials(folder: Path, tasks: int, k: int) -> tuple[list[TrialResult], dict[str, str]]:
    """k trials of each of ``tasks`` tasks, played on the freight example: its tasks in
    turn, each copy a task of its own (``id~2``, ...), and the domain's ref."""
    sys.path.insert(0, str(FREIGHT))
    from desk_agent import DeskAgent  # type: ignore[import-not-found]

    import pytest_sandtable as st

    path = folder / "sandtable.yaml"
    path.write_bytes((FREIGHT / "sandtable.yaml").read_bytes())
    domain = st.load_domain(path)
    agent, user = DeskAgent(flaw_rate=0.5), st.ScriptedUser()
    out = []
    for n in range(tasks):
        task, copy = domain.tasks[n % len(domain.tasks)], n // len(domain.tasks)
        line = (task.pos.line if task.pos else 0) + 100_000 * copy
        for i in range(1, k + 1):
            t = st.run_trial(domain, task.id, agent, user, trial=i, k=k, agent_name="DeskAgent", user_name="scripted")
            out.append(dataclasses.replace(t, task=f"{task.id}~{copy}" if copy else task.id,
                                           location=f"sandtable.yaml:{line}"))
    return out, {"name": domain.name, "path": "sandtable.yaml", "sha256": domain.sha256}


def spooled(trials: list[TrialResult], folder: Path) -> TrialSpool:
    """The trials as a run's recorder holds them at session finish: spooled as they finished."""
    spool = TrialSpool(folder)
    for t in trials:
        spool.add(t)
    return spool


def end_of_run(spool: TrialSpool, k: int, ref: dict[str, str], out: Path) -> dict[str, float]:
    """What the recorder does at session finish: (phase -> CPU seconds, and the wall)."""
    t0, w0 = time.process_time(), time.perf_counter()
    spool.rename_sides(spool.trials())
    meta = RunMeta(domains=[ref], agent="DeskAgent", user="scripted", k=k, run_seed=0)
    results = build_spooled(spool, meta)
    t1 = time.process_time()
    write_run(results, out / "run")
    t2 = time.process_time()
    render_terminal(results["summary"])
    t3, w3 = time.process_time(), time.perf_counter()
    return {"summary": t1 - t0, "write": t2 - t1, "terminal": t3 - t2, "cpu": t3 - t0, "wall": w3 - w0}


FINISH_TIMER = '''\
import os
import time

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session):
    c0 = time.process_time()
    try:
        return (yield)
    finally:
        with open(os.environ["BENCH_FINISH_OUT"], "a") as f:
            f.write(f"{time.process_time() - c0}\\n")
'''


def session_finish(k: int, repeat: int) -> None:
    """``--finish``: CPU seconds of the session finish of a freight run at k, ``repeat`` times."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "sandtable.yaml").write_bytes((FREIGHT / "sandtable.yaml").read_bytes())
        (folder / "conftest.py").write_text(FINISH_TIMER)
        times = folder / "finish.txt"
        env = {**os.environ, "BENCH_FINISH_OUT": str(times)}
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                "sandtable.yaml", f"--sandtable-k={k}", "--sandtable-agent=reference",
                f"--sandtable-out={folder / 'run'}"]
        for _ in range(repeat):
            subprocess.run(args, cwd=folder, env=env, capture_output=True, check=False)
        cpu = [float(line) for line in times.read_text().split()] if times.exists() else []
    if len(cpu) != repeat:
        sys.exit(f"{repeat - len(cpu)} of {repeat} runs did not reach the session finish")
    print(f"session finish, freight k={k} (reference agent, {repeat} runs): {min(cpu):.3f} s CPU best, "
          f"{statistics.median(cpu):.3f} median")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--end-of-run", type=int, default=200, metavar="N", help="trials of the end-of-run timing")
    parser.add_argument("--k", type=int, default=4, help="trials per task of the end-of-run timing")
    parser.add_argument("--profile", type=int, default=0, metavar="K",
                        help="instead: profile the end of a run of 115 tasks at k = K")
    parser.add_argument("--finish", type=int, default=0, metavar="K",
                        help="instead: CPU of pytest_sessionfinish of the freight example at k = K")
    parser.add_argument("--repeat", type=int, default=4, help="runs of --finish")
    args = parser.parse_args()
    if args.finish:
        session_finish(args.finish, args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.profile:
            trials, ref = freight_trials(folder, 115, args.profile)
            spool = spooled(trials, folder)
            cProfile.runctx("end_of_run(spool, args.profile, ref, folder)", globals(), locals(), str(folder / "prof"))
            print(f"end of run, {len(trials)} freight trials (k={args.profile}):")
            pstats.Stats(str(folder / "prof")).sort_stats("tottime").print_stats(12)
            return
        summaries()
        trials, ref = freight_trials(folder, args.end_of_run // args.k, args.k)
        spool = spooled(trials, folder)
        runs = [end_of_run(spool, args.k, ref, folder) for _ in range(5)]
        best = min(runs, key=lambda r: r["cpu"])
        size = (folder / "run" / "results.json").stat().st_size + (folder / "run" / "report.html").stat().st_size
        print(f"end of run, {len(trials)} freight trials (k={args.k}): {best['cpu']:.3f} s CPU (summary "
              f"{best['summary']:.3f}, results.json + report.html {best['write']:.3f}, terminal "
              f"{best['terminal']:.3f}), {min(r['wall'] for r in runs):.3f} s wall; files {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
