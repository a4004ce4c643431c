"""Our whole pytest run against τ-bench's own harness, on τ-bench's retail world, with a
reference agent that replays each task's gold actions (issue 26).

Three measures, alternating kind by kind for ``--repeat`` rounds after one unmeasured
warm-up round:

1. **τ-bench's harness, whole process.** A subprocess runs τ-bench's own ``run()``
   (``tau_bench/run.py``) with a ``RunConfig`` for the retail test split,
   ``max_concurrency=1`` and ``num_trials`` N (``--tau-trials N1,N2``, 115 trials per
   unit): per trial its ``get_env(...)`` (the env made and its data loaded as the harness
   does), the agent's ``solve(env, task_index)``, the checkpoint file rewritten, the
   metrics at the end. Two things are put in for a model: the agent (``agent_factory``
   in ``tau_bench.run`` is replaced by one returning :class:`GoldAgent`, which resets the
   env to the task, steps through its gold ``actions`` with ``env.step(Action(...))``
   and then responds with the reference reply, keeping the messages as τ-bench's
   tool-calling agent keeps them), and the user: τ-bench's own ``human`` user strategy
   (``HumanUserSimulationEnv``, which reads the user's lines from standard input), fed
   ``###STOP###`` lines on the subprocess's stdin, so the respond ends the conversation
   and τ-bench computes its reward (``Env.calculate_reward``). litellm is not installed:
   ``bench_tau_agreement.load_tau_bench``'s stand-in module is used, given the
   ``provider_list`` that ``run.py`` imports. Every trial's reward is checked against
   τ-bench's own reward for the same actions and reply computed apart
   (``bench_tau_agreement.TauOracle``).
2. **Ours, whole process.** The retail env imported with ``python -m pytest_sandtable
   import tau-bench`` into a temporary folder, then ``python -m pytest DIR
   --sandtable-agent=reference --sandtable-k=K -q -p no:randomly -p no:hypothesispytest``
   for K1 and K2 (``--k K1,K2``), with pytest's cache on, as a user's runs have it (the
   domain cache it holds is warm after the unmeasured round). Its exit code and its count
   line (``F failed, P passed``) are checked against the verdicts of the in-process
   trials.
3. **One trial in-process**, both: ours, ``arun_trial`` driven as the plugin drives an
   inline trial (``bench_handlers._drive``), each of the 115 tasks; τ-bench,
   ``get_env(..., task_index=i)`` then ``GoldAgent().solve(env, i)`` (env made, solved,
   rewarded), each task once a round, the human user reading from an in-memory stdin,
   with what this process held before (our domain among it) frozen out of the garbage
   collector's walks (``gc.freeze``), as a τ-bench process does not hold it. CPU ms per
   trial, median of the rounds (ours: each round the median of 9 passes of the tasks).

Both subprocesses' CPU is user + system (``resource.getrusage(RUSAGE_CHILDREN)`` around
the subprocess), wall time around it. Marginal per trial: τ-bench
``(t(N2) - t(N1)) / (115 (N2 - N1))``; ours ``(t(K2) - t(K1)) / (115 (K2 - K1))``. Whole
process per trial, at the larger sizes: τ-bench ``t(N2) / (115 N2)`` against ours
``t(K2) / (115 K2)``, scaled by trials (τ-bench at 115 K2 trials would take over 20
minutes a run, more as its checkpoint file grows); ``--tau-trials 1,20`` makes the sizes
equal. Ratios are τ-bench ÷ ours.

With ``--user-python PYTHON`` our run is also timed with that Python, alternating with the
rest: a venv holding pytest-sandtable and its dependencies only (``python -m venv V &&
V/bin/pip install -e .``), as a user's; this project's development venv adds the pytest
plugins its own tests need (pytest-rerunfailures, pytest-timeout, allure-pytest,
pytest-repeat, ...), each with its hooks on every item. Each venv's plugins are printed.

``--ours-runs N`` runs each of our sizes N times a round (seconds each, against τ-bench's
minutes) and takes their median, so one disturbed run of ours does not decide a round.

    python benchmarks/bench_tau_harness.py --tau-bench PATH [--tau-trials 1,3] [--k 4,20] [--repeat 3]
                                           [--user-python PYTHON] [--ours-runs N]

PATH is the folder holding ``tau_bench/`` (or set TAU_BENCH_PATH); it is read from there,
never copied. Run from the repository root with the project's Python.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import importlib
import io
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# pytest's cache is left on: it holds the domain cache, warm after the first round, as a
# user's second run finds it (hypothesis is this project's development dependency, not a user's)
PYTEST_ARGS = ["-q", "-p", "no:randomly", "-p", "no:hypothesispytest"]
STOP = "###STOP###"
ENV = "retail"
KINDS = {"tau": "τ-bench harness", "ours": "ours, pytest", "user": "ours, user venv"}
OURS_PASSES = 9  # our in-process round is the tasks this many times (a pass takes 0.1 s): the median pass


# -- τ-bench's side ----------------------------------------------------------------------------


def reply(outputs: list[str]) -> str:
    """The reference's last message: the importer's reference reply (what our reference
    agent says last), so both sides end their conversations with the same text."""
    if outputs:
        return "Here is what you asked for: " + "; ".join(outputs) + "."
    return "Done. Is there anything else?"


def tau_bench(root: Path) -> dict[str, Any]:
    """τ-bench imported from ``root`` with bench_tau_agreement's litellm stand-in, which
    ``run.py`` also asks for ``provider_list``; its modules the harness uses."""
    sys.path.insert(0, str(HERE))
    from bench_tau_agreement import load_tau_bench

    load_tau_bench(root)
    litellm = sys.modules["litellm"]
    if not hasattr(litellm, "provider_list"):
        litellm.provider_list = ["openai"]  # type: ignore[attr-defined]
    names = ("tau_bench.run", "tau_bench.envs", "tau_bench.types", "tau_bench.agents.base")
    return {name.rsplit(".", 1)[-1]: importlib.import_module(name) for name in names}


def gold_agent(tau: dict[str, Any]) -> type:
    """The reference agent as a τ-bench ``Agent``: ``solve`` is τ-bench's tool-calling
    agent's loop (reset, step, messages and info kept the same way) with each model
    answer replaced by the task's next gold action, then the reference reply."""
    types = tau["types"]
    respond = types.RESPOND_ACTION_NAME

    class GoldAgent(tau["base"].Agent):  # type: ignore[misc]
        def __init__(self, tools_info: list[dict[str, Any]], wiki: str) -> None:
            self.tools_info = tools_info
            self.wiki = wiki

        def solve(self, env: Any, task_index: int | None = None, max_num_steps: int = 30) -> Any:
            env_reset_res = env.reset(task_index=task_index)
            info = env_reset_res.info.model_dump()
            reward = 0.0
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": self.wiki},
                {"role": "user", "content": env_reset_res.observation},
            ]
            # what a model would answer: fresh arguments each time (json.loads in τ-bench)
            gold = [(a.name, copy.deepcopy(a.kwargs)) for a in env.task.actions]
            gold.append((respond, {"content": reply(env.task.outputs)}))
            for n, (name, kwargs) in enumerate(gold[:max_num_steps]):
                action = types.Action(name=name, kwargs=kwargs)
                env_response = env.step(action)
                reward = env_response.reward
                info = {**info, **env_response.info.model_dump()}
                if name != respond:
                    call = {"id": f"call_{n}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(kwargs)}}
                    messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                                 {"role": "tool", "tool_call_id": call["id"], "name": name,
                                  "content": env_response.observation}]
                else:
                    messages += [{"role": "assistant", "content": kwargs["content"]},
                                 {"role": "user", "content": env_response.observation}]
                if env_response.done:
                    break
            return types.SolveResult(reward=reward, info=info, messages=messages, total_cost=0.0)

    return GoldAgent


def run_config(tau: dict[str, Any], trials: int, log_dir: str) -> Any:
    return tau["types"].RunConfig(
        model_provider="openai", user_model_provider="openai", model="gold-actions", user_model="stdin",
        num_trials=trials, env=ENV, agent_strategy="tool-calling", task_split="test", log_dir=log_dir,
        max_concurrency=1, user_strategy="human")


def tau_child(root: Path, trials: int, result_file: Path) -> None:
    """The τ-bench subprocess: its own ``run()`` with the gold agent and the human user on
    stdin; every trial's (task, trial, reward) written to ``result_file``."""
    tau = tau_bench(root)
    agent = gold_agent(tau)
    tau["run"].agent_factory = lambda tools_info, wiki, config: agent(tools_info, wiki)
    with tempfile.TemporaryDirectory() as log_dir:
        results = tau["run"].run(run_config(tau, trials, log_dir))
    result_file.write_text(json.dumps([[r.task_id, r.trial, r.reward] for r in results]), encoding="utf-8")


def tau_expected(root: Path) -> dict[int, float]:
    """τ-bench's reward for each task's gold actions and the reference reply, computed
    apart from its harness (bench_tau_agreement's oracle: ``Env.step`` and
    ``Env.calculate_reward`` on a deep copy of the task)."""
    sys.path.insert(0, str(HERE))
    from bench_tau_agreement import TauOracle

    oracle = TauOracle(root, ENV)
    return {i: oracle.run(i, [(a.name, a.kwargs) for a in task.actions], reply(task.outputs))[0]
            for i, task in enumerate(oracle.tasks)}


# -- timing ------------------------------------------------------------------------------------


def timed(cmd: list[str], cwd: Path, stdin: str | None = None) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds (user + system) of one subprocess, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


class Tau:
    """τ-bench's harness in a subprocess, its rewards checked."""

    def __init__(self, root: Path, folder: Path, expected: dict[int, float]) -> None:
        self.root, self.folder, self.expected = root, folder, expected

    def __call__(self, trials: int) -> tuple[float, float]:
        out = self.folder / "tau-rewards.json"
        out.unlink(missing_ok=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--tau-bench", str(self.root),
               "--child", str(trials), str(out)]
        # two user lines a trial (the reset's and the respond's), and some spare
        wall, cpu, proc = timed(cmd, self.folder, stdin=f"{STOP}\n" * (3 * trials * len(self.expected) + 10))
        if proc.returncode != 0 or not out.is_file():
            raise SystemExit(f"τ-bench's harness ({trials} trials a task) failed, exit code {proc.returncode}:\n"
                             f"{proc.stderr[-2000:]}")
        got = json.loads(out.read_text(encoding="utf-8"))
        if len(got) != trials * len(self.expected):
            raise SystemExit(f"τ-bench's harness ran {len(got)} trials, not {trials * len(self.expected)}")
        for task, trial, reward in got:
            if reward != self.expected[task]:
                raise SystemExit(f"τ-bench's harness: task {task} trial {trial} reward {reward}, "
                                 f"τ-bench's own reward for its gold actions is {self.expected[task]}")
        return wall, cpu


COUNTS = re.compile(r"^(?:(\d+) failed, )?(\d+) passed in ")


class Ours:
    """Our whole pytest process over the imported domain, its verdicts checked."""

    def __init__(self, folder: Path, domain: Path, verdicts: dict[str, str], python: str = sys.executable) -> None:
        self.folder, self.domain, self.python = folder, domain, python
        self.failing = sum(v != "passed" for v in verdicts.values())
        self.passing = len(verdicts) - self.failing

    def __call__(self, k: int) -> tuple[float, float]:
        cmd = [self.python, "-m", "pytest", str(self.domain), "--sandtable-agent=reference",
               f"--sandtable-k={k}", *PYTEST_ARGS]
        wall, cpu, proc = timed(cmd, self.folder)
        last = proc.stdout.strip().splitlines()[-1:] or [""]
        counts = COUNTS.match(last[0])
        want = (k * self.failing, k * self.passing)
        got = (int(counts[1] or 0), int(counts[2])) if counts else None
        if proc.returncode != (1 if self.failing else 0) or got != want:
            raise SystemExit(f"pytest --sandtable-k={k}: exit code {proc.returncode}, last line {last[0]!r}; "
                             f"expected {want[0]} failed, {want[1]} passed\n{proc.stderr[-2000:]}")
        return wall, cpu


# -- in-process ----------------------------------------------------------------------------------


class InProcess:
    """One trial of each task in this process, ours and τ-bench's, CPU seconds per trial."""

    def __init__(self, root: Path, domain_file: Path, expected: dict[int, float]) -> None:
        from bench_handlers import _drive

        import pytest_sandtable as st
        from pytest_sandtable.engine.trial import arun_trial

        self.expected = expected
        domain = st.load_domain(domain_file)
        agent, user = st.ReferenceAgent(), st.ScriptedUser()

        def one(task: Any, trial: int) -> st.TrialResult:
            result: st.TrialResult = _drive(arun_trial(
                domain, task, agent, user, trial=trial, k=3, run_seed=1, agent_name="reference",
                user_name="scripted", trial_timeout=900.0, location="sandtable.yaml:1"))
            return result

        self.tasks, self.one = domain.tasks, one
        self.verdicts = {t.id: one(t, 1).verdict for t in domain.tasks}  # warm: handler imports, indexes
        tau = tau_bench(root)
        self.get_env = tau["envs"].get_env
        self.config = run_config(tau, 1, "unused")
        probe = self._env(0)
        self.agent = gold_agent(tau)(probe.tools_info, probe.wiki)

    def _env(self, index: int) -> Any:
        c = self.config
        return self.get_env(c.env, user_strategy=c.user_strategy, user_model=c.user_model,
                            task_split=c.task_split, user_provider=c.user_model_provider, task_index=index)

    def ours(self, r: int) -> float:
        c0 = time.process_time()
        for t in self.tasks:
            if self.one(t, 1 + r % 3).verdict != self.verdicts[t.id]:
                raise SystemExit(f"{t.id}: our verdict changed")
        return (time.process_time() - c0) / len(self.tasks)

    def tau(self) -> float:
        rewards: dict[int, float] = {}
        lines = io.StringIO(f"{STOP}\n" * (3 * len(self.expected)))
        # what this process holds before (our domain among it) set apart from the garbage
        # collector's walks, as a τ-bench process does not have it
        gc.collect()
        gc.freeze()
        try:
            with contextlib.redirect_stdout(io.StringIO()), _stdin(lines):
                c0 = time.process_time()
                for i in self.expected:
                    rewards[i] = self.agent.solve(self._env(i), task_index=i).reward
                took = time.process_time() - c0
        finally:
            gc.unfreeze()
        bad = [i for i in rewards if rewards[i] != self.expected[i]]
        if bad:
            raise SystemExit(f"τ-bench in-process: task {bad[0]} reward {rewards[bad[0]]}, "
                             f"expected {self.expected[bad[0]]}")
        return took / len(rewards)


@contextlib.contextmanager
def _stdin(stream: io.StringIO) -> Any:
    old, sys.stdin = sys.stdin, stream
    try:
        yield
    finally:
        sys.stdin = old


# -- the benchmark -----------------------------------------------------------------------------


def pair(text: str) -> tuple[int, int]:
    a, b = (int(x) for x in text.split(","))
    if not 0 < a < b:
        raise argparse.ArgumentTypeError(f"{text!r}: two sizes A,B with 0 < A < B")
    return a, b


def plugins(python: str) -> str:
    """The pytest plugins installed for ``python`` (their entry points' names)."""
    code = ("import importlib.metadata as m; "
            "print(' '.join(sorted({e.name for e in m.entry_points(group='pytest11')})))")
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=False).stdout.strip()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tau-bench", type=Path, default=os.environ.get("TAU_BENCH_PATH"),
                    help="the folder holding tau_bench/ (default: $TAU_BENCH_PATH)")
    ap.add_argument("--tau-trials", type=pair, default=(1, 3), help="τ-bench's num_trials, N1,N2 (default 1,3)")
    ap.add_argument("--k", type=pair, default=(4, 20), help="our --sandtable-k, K1,K2 (default 4,20)")
    ap.add_argument("--repeat", type=int, default=3, help="measured rounds after the warm-up (default 3)")
    ap.add_argument("--user-python", metavar="PYTHON",
                    help="also time our run with this Python: a venv holding pytest-sandtable and its dependencies "
                         "only, as a user's (this project's own venv adds its development plugins)")
    ap.add_argument("--ours-runs", type=int, default=1, metavar="N",
                    help="run each of our sizes N times a round, back to back, and take the median (default 1)")
    ap.add_argument("--child", nargs=2, metavar=("TRIALS", "FILE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.tau_bench is None:
        raise SystemExit("error: give --tau-bench PATH (the folder holding tau_bench/) or set TAU_BENCH_PATH")
    root = Path(a.tau_bench).resolve()
    if a.child:
        tau_child(root, int(a.child[0]), Path(a.child[1]))
        return
    if not (root / "tau_bench" / "envs" / ENV).is_dir():
        raise SystemExit(f"error: {root}: no tau_bench/envs/{ENV}/ in it")
    measure(root, a.tau_trials, a.k, a.repeat, a.user_python, a.ours_runs)


def measure(root: Path, tau_trials: tuple[int, int], ks: tuple[int, int], repeat: int,
            user_python: str | None = None, ours_runs: int = 1) -> None:
    sys.path.insert(0, str(HERE))
    import pytest_sandtable as st
    from pytest_sandtable.cli import main as cli

    print(f"pytest-sandtable {st.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} cores; "
          f"load average at start {load()}")
    expected = tau_expected(root)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        dom = folder / "tau-retail"
        with contextlib.redirect_stdout(io.StringIO()):
            if cli(["import", "tau-bench", str(root / "tau_bench" / "envs" / ENV), "-o", str(dom)]) != 0:
                raise SystemExit(f"error: could not import {root / 'tau_bench' / 'envs' / ENV}")
        inproc = InProcess(root, dom / "sandtable.yaml", expected)
        tasks = len(expected)
        if len(inproc.tasks) != tasks:
            raise SystemExit(f"imported {len(inproc.tasks)} tasks, τ-bench has {tasks}")
        ours_pass = sum(v == "passed" for v in inproc.verdicts.values())
        tau_pass = sum(r == 1.0 for r in expected.values())
        print(f"τ-bench retail, {tasks} test tasks, gold actions then the reference reply: τ-bench's reward 1.0 "
              f"for {tau_pass}, our verdict passed for {ours_pass}")
        tau, ours = Tau(root, folder, expected), Ours(folder, dom, inproc.verdicts)
        user = Ours(folder, dom, inproc.verdicts, user_python) if user_python else None
        if user_python:
            print(f"  user venv: {user_python}, pytest plugins: {plugins(user_python)}")
        print(f"  this venv: {sys.executable}, pytest plugins: {plugins(sys.executable)}")
        (n1, n2), (k1, k2) = tau_trials, ks
        sizes = [(f"tau {n1}", n1), (f"ours {k1}", k1), *([(f"user {k1}", k1)] if user else []),
                 (f"tau {n2}", n2), (f"ours {k2}", k2), *([(f"user {k2}", k2)] if user else [])]
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in sizes}
        one: dict[str, list[float]] = {"tau": [], "ours": []}
        for r in range(repeat + 1):
            head = "warm-up" if r == 0 else f"round {r}"
            took: dict[str, tuple[float, float]] = {}
            for name, size in sizes:
                side = tau if name.startswith("tau") else ours if name.startswith("ours") else user
                assert side is not None
                times = 1 if side is tau else ours_runs  # ours takes seconds: the median of a few runs
                each = [side(size) for _ in range(times)]
                took[name] = w, c = statistics.median(x for x, _ in each), statistics.median(x for _, x in each)
                runs_note = f"  (median of {times} runs: CPU {' '.join(f'{x:.2f}' for _, x in each)})" \
                    if times > 1 else ""
                print(f"  {head:<8} {KINDS[name.split()[0]]:<16}{size * tasks:>6} trials  wall {w:7.2f} s  "
                      f"CPU {c:7.2f} s{runs_note}", flush=True)
            one_tau = inproc.tau()
            one_ours = statistics.median(inproc.ours(r * OURS_PASSES + i) for i in range(OURS_PASSES))
            print(f"  {head:<8} one trial in-process, CPU: τ-bench {one_tau * 1e3:.2f} ms, "
                  f"ours {one_ours * 1e3:.3f} ms", flush=True)
            if r:
                for name, t in took.items():
                    runs[name].append(t)
                one["tau"].append(one_tau)
                one["ours"].append(one_ours)
    summary(runs, one, tasks, tau_trials, ks, repeat)


def summary(runs: dict[str, list[tuple[float, float]]], one: dict[str, list[float]], tasks: int,
            tau_trials: tuple[int, int], ks: tuple[int, int], repeat: int) -> None:
    """The medians, per trial, and the ratios τ-bench ÷ ours."""
    (n1, n2), (k1, k2) = tau_trials, ks
    med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in runs.items()}
    print(f"medians of {repeat} rounds (wall s, CPU s):")
    for name, (w, c) in med.items():
        kind, units = name.split()
        trials = int(units) * tasks
        print(f"  {KINDS[kind]:<16}{trials:>6} trials  wall {w:7.2f}  CPU {c:7.2f}   per trial wall "
              f"{w / trials * 1e3:8.2f} ms  CPU {c / trials * 1e3:8.2f} ms")
    for kind in [k for k in ("ours", "user") if f"{k} {k1}" in runs]:
        print(f"{KINDS[kind]:<30}{'ours':>12}{'τ-bench':>12}{'ratio':>9}")
        for i, what in enumerate(("wall", "CPU")):
            tau_m = (med[f"tau {n2}"][i] - med[f"tau {n1}"][i]) / ((n2 - n1) * tasks)
            ours_m = (med[f"{kind} {k2}"][i] - med[f"{kind} {k1}"][i]) / ((k2 - k1) * tasks)
            print(f"  {'marginal per trial, ' + what:<28}{ours_m * 1e3:9.2f} ms{tau_m * 1e3:9.2f} ms"
                  f"{tau_m / ours_m:8.0f}x")
        for i, what in enumerate(("wall", "CPU")):
            tau_w = med[f"tau {n2}"][i] / (n2 * tasks)
            ours_w = med[f"{kind} {k2}"][i] / (k2 * tasks)
            print(f"  {'whole process per trial, ' + what:<28}{ours_w * 1e3:9.2f} ms{tau_w * 1e3:9.2f} ms"
                  f"{tau_w / ours_w:8.0f}x")
        for i, what in enumerate(("wall", "CPU")):  # each round's own, for the spread under load
            each = [((t2[i] - t1[i]) / ((n2 - n1) * tasks), (o2[i] - o1[i]) / ((k2 - k1) * tasks))
                    for t1, o1, t2, o2 in zip(runs[f"tau {n1}"], runs[f"{kind} {k1}"], runs[f"tau {n2}"],
                                              runs[f"{kind} {k2}"], strict=True)]
            print(f"  {'  each round, ' + what:<28}" + "  ".join(
                f"{o * 1e3:.2f} / {t * 1e3:.1f} ms {t / o:.0f}x" for t, o in each))
    tau_1, ours_1 = statistics.median(one["tau"]), statistics.median(one["ours"])
    print(f"  {'one trial in-process, CPU':<28}{ours_1 * 1e3:9.3f} ms{tau_1 * 1e3:9.2f} ms{tau_1 / ours_1:8.0f}x")
    print(f"whole process: τ-bench at {n2 * tasks} trials, ours at {k2 * tasks}, each per trial (scaled by trials); "
          f"ratios τ-bench / ours;\n  in-process: median of {repeat} rounds, each the {tasks} tasks once (τ-bench) "
          f"and the median of {OURS_PASSES} passes of them (ours)")
    print(f"load average at end {load()}")


if __name__ == "__main__":
    main()
