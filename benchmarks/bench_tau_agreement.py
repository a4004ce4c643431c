"""Grading agreement with τ-bench, and faithfulness of the imported tools.

For every test task of τ-bench's retail and airline environments, three kinds of action
list are replayed both through τ-bench's own code and through the imported domain:

- the reference (τ-bench's ground-truth actions), followed by the reference's reply;
- each list with one action dropped;
- each list with one argument of one action changed.

**Agreement**: our trial's verdict (the reference agent playing the list against the
imported domain, graded by the engine) equals τ-bench's reward (its own ``Env.step``
and ``Env.calculate_reward``: 1 ⇔ passed). **Faithfulness**: after the same list, the
final data is identical (our world's tables, as τ-bench's dict of dicts, hashed with
τ-bench's own ``consistent_hash(to_hashable(...))``), and every call showed the agent
the same thing (τ-bench's observation string against our result: ``json.dumps`` of the
value, or ``Error: <message>`` for a tool error).

Prints the counts and every disagreement, with its task, list and why.

τ-bench is the oracle here: it is imported from the folder given (its package's
parent), never copied. Importing it pulls ``litellm`` in through its user simulator
(``tau_bench.envs.user``), which the reward never calls; when litellm is not installed
a placeholder module stands in for it (``completion`` raises), so only the model
client of the user simulator is missing, nothing the reward runs.

    python benchmarks/bench_tau_agreement.py --tau-bench PATH [--env retail|airline|all] [--tasks N] [--task-ids I,J]

PATH is the folder holding ``tau_bench/`` (or set TAU_BENCH_PATH). ``--tasks N``
takes the first N tasks of each env (all by default), ``--task-ids`` only those
(tests/test_import.py runs a sample this way).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.domain.model import Domain, RefStep, Task
from pytest_sandtable.engine.reference import ReferenceAgent
from pytest_sandtable.engine.reference_world import reference_world
from pytest_sandtable.engine.scripted_user import ScriptedUser
from pytest_sandtable.engine.trial import apply_given, run_trial
from pytest_sandtable.importer.tau_bench import import_tau_bench, read_env, task_id, tau_data

Action = tuple[str, dict[str, Any]]
ENVS = ("retail", "airline")


# -- τ-bench, the oracle ------------------------------------------------------------------


def load_tau_bench(root: Path) -> types.ModuleType:
    """Import the ``tau_bench`` package found in ``root`` (with a stand-in for litellm
    when it is not installed: see the module's docstring)."""
    if not (root / "tau_bench").is_dir():
        raise SystemExit(f"error: {root}: no tau_bench/ package folder in it")
    try:
        importlib.import_module("litellm")
    except ImportError:
        placeholder = types.ModuleType("litellm")

        def completion(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the τ-bench oracle never calls a model")

        placeholder.completion = completion  # type: ignore[attr-defined]
        sys.modules["litellm"] = placeholder
    sys.path.insert(0, str(root))
    return importlib.import_module("tau_bench")


class _StopUser:
    """τ-bench's simulated user, answered at once: the list's final reply ends it (the
    reward is computed the way τ-bench computes it at the end of a conversation)."""

    def step(self, content: str) -> str:
        return "###STOP###"

    def get_total_cost(self) -> float:
        return 0.0


class TauOracle:
    """One τ-bench environment: its tools, data and tasks, driven by its own Env code."""

    def __init__(self, root: Path, env: str) -> None:
        load_tau_bench(root)
        base = importlib.import_module("tau_bench.envs.base")
        tau_types = importlib.import_module("tau_bench.types")
        tools = importlib.import_module(f"tau_bench.envs.{env}.tools")
        tasks = importlib.import_module(f"tau_bench.envs.{env}.tasks_test")
        data_dir = root / "tau_bench" / "envs" / env / "data"
        # the data's text, read once; each reset parses it again (cheaper than deepcopy)
        texts = {p.stem: p.read_text(encoding="utf-8") for p in data_dir.glob("*.json")}
        self.load_data: Callable[[], dict[str, Any]] = lambda: {k: json.loads(t) for k, t in texts.items()}
        self.base = base
        self.Action = tau_types.Action
        self.respond = tau_types.RESPOND_ACTION_NAME
        self.tasks = next(v for k, v in vars(tasks).items() if k.startswith("TASKS"))
        self.tools = tools.ALL_TOOLS
        self.terminate = ["transfer_to_human_agents"]

    def _env(self, index: int) -> Any:
        env = object.__new__(self.base.Env)  # Env.__init__ only adds the model-backed user
        env.data_load_func = self.load_data
        env.data = self.load_data()
        env.tools_map = {t.get_info()["function"]["name"]: t for t in self.tools}
        env.terminate_tools = self.terminate
        # a deep copy: τ-bench stores action arguments in its data by reference, so a
        # later call (a cancellation extending payment_history) would change the task
        env.task = self.tasks[index].model_copy(deep=True)
        env.user = _StopUser()
        env.actions = []
        return env

    def run(self, index: int, actions: list[Action], reply: str) -> tuple[float, str, list[str]]:
        """τ-bench's reward for ``actions`` then ``reply``; the data after the actions
        (see :func:`canonical`); and each tool call's observation."""
        env = self._env(index)
        observations: list[str] = []
        for name, kwargs in actions:
            if name in self.terminate:  # the conversation ends with it; its data is the data now
                data = canonical(env.data)
                response = env.step(self.Action(name=name, kwargs=copy.deepcopy(kwargs)))
                observations.append(response.observation)
                return float(response.reward), data, observations
            observations.append(env.step(self.Action(name=name, kwargs=copy.deepcopy(kwargs))).observation)
        data = canonical(env.data)
        reward = env.step(self.Action(name=self.respond, kwargs={"content": reply})).reward
        return float(reward), data, observations


def canonical(data: dict[str, Any]) -> str:
    """The data as JSON text with sorted keys: two datas have the same text exactly when
    τ-bench's ``consistent_hash(to_hashable(...))`` is the same for both (sorted mapping
    keys, lists in order, ``1``, ``1.0`` and ``true`` all different), at a fraction of
    its cost (the reward already hashes the data twice per list)."""
    return json.dumps(data, sort_keys=True)


# -- ours ----------------------------------------------------------------------------------


class PlayList(ReferenceAgent):
    """An agent that plays a given list of steps whatever task it is given (the
    reference agent binds itself to the task's own reference)."""

    def for_task(self, task: Task) -> PlayList:
        return self


@dataclass
class Ours:
    domain: Domain
    env: str

    def task(self, index: int, actions: list[Action], reply: str) -> Task:
        base = self.domain.task(task_id(self.env, index))
        steps = [RefStep(call=name, args=copy.deepcopy(args)) for name, args in actions] + [RefStep(say=reply)]
        return Task(id=base.id, user=base.user, expect=base.expect, reference=steps, given=base.given,
                    max_turns=base.max_turns)

    def run(self, index: int, actions: list[Action], reply: str) -> tuple[list[str], str, list[str]]:
        """The checks our trial failed for ``actions`` then ``reply`` (none: it passed);
        our data after them; what each call showed."""
        played = self.task(index, actions, reply)
        expected = self.domain.task(played.id)
        # graded against the task's own reference, played by an agent doing `actions`
        result = run_trial(self.domain, expected, PlayList(played.reference), ScriptedUser())
        results: list[Any] = []
        world = reference_world(self.domain, played, 0, apply_given, results=results)
        data = tau_data(self.env, {t: world.rows(t) for t in self.domain.tables})
        if result.verdict not in ("passed", "failed"):
            return [f"errored: {result.error}"], canonical(data), [_observation(r) for r in results]
        failed = [c.id for c in result.failed_checks]
        return failed, canonical(data), [_observation(r) for r in results]


def _observation(result: Any) -> str:
    """What τ-bench's agent would read for one of our call results."""
    if not result.ok:
        return f"Error: {result.message}"
    if isinstance(result.value, str):
        return result.value
    return json.dumps(result.value)


# -- action lists --------------------------------------------------------------------------


def _changed(value: Any) -> Any:
    """One argument, changed the way a slip would change it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("1" if value[-1:] != "1" else "2") if value else "x"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else [_changed(value[0])] if value else ["x"]
    if isinstance(value, dict):
        key = next(iter(value), None)
        return {**value, key: _changed(value[key])} if key is not None else {"x": 1}
    return value


def writes(name: str) -> bool:
    """Whether a τ-bench tool may change the data (the others only read or answer)."""
    return not name.startswith(READ_PREFIXES) and name not in ANSWER_ONLY


READ_PREFIXES = ("get_", "list_", "search_", "find_")
ANSWER_ONLY = ("calculate", "think", "transfer_to_human_agents")


def variants(actions: list[Action]) -> Iterator[tuple[str, list[Action]]]:
    """(label, list): the reference; for each action that may change the data, the
    list without it and the list with its first argument changed; and the list with
    the first argument of its first other action changed (a lookup gone wrong that
    the rest of the list does not depend on in τ-bench's grading)."""
    yield "reference", actions
    first_read = next((i for i, (name, kwargs) in enumerate(actions) if not writes(name) and kwargs), None)
    for i, (name, kwargs) in enumerate(actions):
        if writes(name):
            yield f"drop {i + 1} {name}", actions[:i] + actions[i + 1:]
        if (writes(name) or i == first_read) and kwargs:
            key = next(iter(kwargs))
            changed = {**kwargs, key: _changed(kwargs[key])}
            yield f"change {i + 1} {name}.{key}", [*actions[:i], (name, changed), *actions[i + 1:]]


# -- the comparison ------------------------------------------------------------------------


@dataclass
class Tally:
    lists: int = 0
    agree: int = 0
    same_data: int = 0
    calls: int = 0
    same_observation: int = 0
    disagreements: list[str] = field(default_factory=list)


def _first_difference(mine: str, tau: str) -> str:
    ours, theirs = json.loads(mine), json.loads(tau)
    for table in theirs:
        for key in sorted(set(theirs[table]) | set(ours.get(table, {}))):
            a, b = ours.get(table, {}).get(key), theirs[table].get(key)
            if a != b or json.dumps(a) != json.dumps(b):
                one, two = a or {}, b or {}
                fields = sorted(f for f in set(one) | set(two) if json.dumps(one.get(f)) != json.dumps(two.get(f)))
                return f"{table} {key}: fields {', '.join(fields) or '(row missing)'} differ"
    return "(no row differs)"


def compare_task(oracle: TauOracle, ours: Ours, index: int, tally: Tally, lists: str = "all") -> None:
    tau_task = oracle.tasks[index]
    actions = [(a.name, dict(a.kwargs)) for a in tau_task.actions if a.name != oracle.respond]
    reply = ours.domain.task(task_id(ours.env, index)).reference[-1].say or ""
    for label, played in variants(actions):
        if lists == "reference" and label != "reference":
            continue
        reward, theirs, tau_obs = oracle.run(index, played, reply)
        failed, mine, our_obs = ours.run(index, played, reply)
        passed = not failed
        tally.lists += 1
        where = f"{task_id(ours.env, index)} [{label}]"
        if passed == (reward == 1.0):
            tally.agree += 1
        else:
            verdict = "passed" if passed else f"failed ({', '.join(failed)})"
            tally.disagreements.append(f"{where}: verdict {verdict}, τ-bench reward {reward:g}")
        if mine == theirs:
            tally.same_data += 1
        else:
            tally.disagreements.append(f"{where}: final data differs: {_first_difference(mine, theirs)}")
        for n, (a, b) in enumerate(zip(our_obs, tau_obs)):
            tally.calls += 1
            if a == b:
                tally.same_observation += 1
            else:
                shown = f"call {n + 1} {played[n][0]} shows {a[:100]!r}, τ-bench {b[:100]!r}"
                tally.disagreements.append(f"{where}: {shown}")


def imported(tau_root: Path, env: str, out: Path) -> Ours:
    result = import_tau_bench(tau_root / "tau_bench" / "envs" / env, out / env, force=True)
    return Ours(load_domain(result.domain_file), env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tau-bench", type=Path, default=os.environ.get("TAU_BENCH_PATH"),
                        help="the folder holding tau_bench/ (default: $TAU_BENCH_PATH)")
    parser.add_argument("--env", choices=[*ENVS, "all"], default="all")
    parser.add_argument("--tasks", type=int, default=None, help="the first N tasks of each env (default: all)")
    parser.add_argument("--task-ids", default=None, metavar="I,J,...",
                        help="only these task indices (0-based, comma-separated), for a sample")
    parser.add_argument("--progress", action="store_true", help="a line per task as it is done")
    args = parser.parse_args()
    if args.tau_bench is None:
        print("error: give --tau-bench PATH or set TAU_BENCH_PATH", file=sys.stderr)
        return 2
    root = Path(args.tau_bench)
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for env in ENVS if args.env == "all" else (args.env,):
            started = time.perf_counter()
            read_env(root / "tau_bench" / "envs" / env)  # a bad PATH fails here with a clear message
            ours = imported(root, env, Path(tmp))
            oracle = TauOracle(root, env)
            tally = Tally()
            count = len(oracle.tasks) if args.tasks is None else min(args.tasks, len(oracle.tasks))
            indices = [int(i) for i in args.task_ids.split(",")] if args.task_ids else list(range(count))
            count = len(indices)
            for index in indices:
                before = (tally.lists, tally.agree, tally.same_data, tally.calls, tally.same_observation)
                compare_task(oracle, ours, index, tally)
                if args.progress:
                    lists, agree, same, calls, seen = (now - then for now, then in zip(
                        (tally.lists, tally.agree, tally.same_data, tally.calls, tally.same_observation), before))
                    print(f"  {task_id(env, index)}: {agree}/{lists} verdicts, {same}/{lists} data, "
                          f"{seen}/{calls} observations", flush=True)
            took = time.perf_counter() - started
            print(f"{env}: {count} tasks, {tally.lists} action lists ({took:.0f} s)")
            print(f"  verdict = τ-bench reward: {tally.agree}/{tally.lists}")
            print(f"  same final data:          {tally.same_data}/{tally.lists}")
            print(f"  same observation:         {tally.same_observation}/{tally.calls} calls")
            for line in tally.disagreements:
                print(f"  - {line}")
            status |= bool(tally.disagreements)
    return status


if __name__ == "__main__":
    sys.exit(main())
