"""τ²-bench's own evaluator as an oracle: a list of actions replayed through τ²'s
orchestrator and graded by ``tau2.evaluator.evaluator.evaluate_simulation``, no model.

This script runs under the Python that has τ² installed (3.12 or 3.13; the package
refuses 3.11), never under the project's: the project never imports ``tau2``. The
project side finds that Python through ``SANDTABLE_TAU2_PYTHON`` and talks to this
script over stdin and stdout (benchmarks/bench_tau2_agreement.py, tests that skip
without it). Set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (this script sets it when it
is unset) so that importing litellm reads its bundled price map, not the network.

A request is one JSON object (or a JSON list of them; the answer is then a list)::

    {"domain": "airline", "task_id": "3",
     "actions": [{"name": "get_user_details", "arguments": {...}, "requestor": "assistant"}, ...],
     "reply": "the agent's last message (optional)",
     "gold": false}

``"gold": true`` plays the task's own gold actions (``evaluation_criteria.actions``)
and a reply made of its ``communicate_info``; ``actions`` is then ignored.

The replay: τ²'s ``Orchestrator`` (half duplex, not solo) with a scripted agent and a
scripted user sharing one queue of actions. The agent makes the ``assistant`` calls one
at a time; when the next action is the user's it asks the user to do it, and the user
makes its ``user`` calls one at a time (τ²'s guideline) and then tells the agent it is
done. When the queue is empty the agent sends ``reply`` and the user answers
``###STOP###``. The orchestrator initialises the environment from the task's
``initial_state`` and runs τ²'s ``sync_tools`` after every step, as in a real run.

The answer, per request::

    {"domain": ..., "task_id": ..., "reward": 1.0, "reward_basis": ["DB", "COMMUNICATE"],
     "reward_breakdown": {"DB": 1.0, "COMMUNICATE": 1.0}, "judge_skipped": false,
     "db_match": true, "termination": "user_stop", "errors": 0,
     "tool_results": [{"name": ..., "requestor": ..., "error": false, "content": "..."}],
     "db": {...the agent's DB after the run...}, "user_db": {...} or null}

A task whose basis has ``NL_ASSERTION`` with assertions to judge (an LLM judge, which
this never calls) is graded on the rest of its basis (``judge_skipped: true``; for
retail that is its DB component). ``"error"`` instead of a reward says why a request
could not be replayed (unknown domain or task).

Measuring (the figures in benchmarks/README.md)::

    $SANDTABLE_TAU2_PYTHON benchmarks/tau2_oracle.py --measure airline retail telecom

replays every task of each domain's default split twice, with its gold actions and
with a do-nothing agent (no call, a reply that says nothing), and prints the counts of
reward 1.0. ``--split NAME`` picks another split. ::

    $SANDTABLE_TAU2_PYTHON benchmarks/tau2_oracle.py --perturb telecom

replays each task's gold list with one agent write dropped, with one argument of one
agent write changed, and with one user action dropped (for telecom, whose users act),
and prints how many of each kind τ² still rewards 1.0 (and which).

A request with ``"probe": [[step, ...], ...]`` instead makes its calls straight on the
task's environment, without the orchestrator (:func:`probe`): the telecom handler tests
(tests/test_tau2_telecom_handlers.py) compare each step's text and the two DBs with
the handlers' own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# τ²'s default split per domain (the one its leaderboard reports on)
DEFAULT_SPLIT = {"airline": "base", "retail": "base", "telecom": "base", "mock": None}
OPENING = "Hi, I need some help."
ASK_USER = "Could you please do the next step on your side?"
USER_DONE = "Done. What next?"
DO_NOTHING_REPLY = "I am sorry, I cannot help with that."


def _quiet() -> None:
    from loguru import logger

    logger.remove()


class _Shared:
    """The queue both scripted participants read: the actions left, and the reply."""

    def __init__(self, actions: list[dict[str, Any]], reply: str) -> None:
        self.actions = list(actions)
        self.reply = reply
        self.replied = False
        self.counter = 0

    def next_requestor(self) -> str | None:
        return self.actions[0].get("requestor", "assistant") if self.actions else None

    def call(self, requestor: str) -> Any:
        from tau2.data_model.message import ToolCall

        action = self.actions.pop(0)
        self.counter += 1
        return ToolCall(id=f"call_{self.counter}", name=action["name"],
                        arguments=dict(action.get("arguments") or {}), requestor=requestor)


def _participants(shared: _Shared, tools: Any, policy: str) -> tuple[Any, Any]:
    from tau2.agent.base_agent import HalfDuplexAgent
    from tau2.data_model.message import AssistantMessage, UserMessage
    from tau2.user.user_simulator import UserState
    from tau2.user.user_simulator_base import HalfDuplexUser

    class ScriptedAgent(HalfDuplexAgent[None]):
        def get_init_state(self, message_history: Any = None) -> None:
            return None

        def generate_next_message(self, message: Any, state: None) -> tuple[Any, None]:
            who = shared.next_requestor()
            if who == "assistant":
                return AssistantMessage(role="assistant", tool_calls=[shared.call("assistant")], cost=0.0), state
            if who == "user":
                return AssistantMessage(role="assistant", content=ASK_USER, cost=0.0), state
            shared.replied = True
            return AssistantMessage(role="assistant", content=shared.reply, cost=0.0), state

    class ScriptedUser(HalfDuplexUser[UserState]):
        def __init__(self) -> None:
            super().__init__(instructions=None, tools=None)

        def get_init_state(self, message_history: Any = None) -> UserState:
            return UserState(messages=[], system_messages=[])

        @classmethod
        def is_stop(cls, message: Any) -> bool:
            return not message.is_tool_call() and "###STOP###" in (message.content or "")

        def generate_next_message(self, message: Any, state: UserState) -> tuple[Any, UserState]:
            if shared.next_requestor() == "user":
                return UserMessage(role="user", tool_calls=[shared.call("user")], cost=0.0), state
            if shared.replied:
                return UserMessage(role="user", content="###STOP###", cost=0.0), state
            return UserMessage(role="user", content=OPENING if shared.counter == 0 else USER_DONE,
                               cost=0.0), state

    return ScriptedAgent(tools=tools, domain_policy=policy), ScriptedUser()


_TASKS: dict[str, dict[str, Any]] = {}


def _task(domain: str, task_id: str) -> Any:
    from tau2.registry import registry

    if domain not in _TASKS:
        loader = registry.get_tasks_loader(domain)
        tasks = loader(None) if domain != "telecom" else loader("full")
        _TASKS[domain] = {t.id: t for t in tasks}
    return _TASKS[domain].get(task_id)


def gold_actions(task: Any) -> list[dict[str, Any]]:
    return [{"name": a.name, "arguments": dict(a.arguments), "requestor": a.requestor}
            for a in (task.evaluation_criteria.actions or [])] if task.evaluation_criteria else []


def gold_reply(task: Any) -> str:
    info = (task.evaluation_criteria.communicate_info or []) if task.evaluation_criteria else []
    return "Here is what you asked for: " + "; ".join(info) + "." if info else "Done. Is there anything else?"


def replay(request: dict[str, Any]) -> dict[str, Any]:
    from tau2.data_model.tasks import RewardType
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.registry import registry

    domain, task_id = str(request.get("domain")), str(request.get("task_id"))
    out: dict[str, Any] = {"domain": domain, "task_id": task_id}
    try:
        make_env = registry.get_env_constructor(domain)
    except KeyError:
        return {**out, "error": f"unknown domain {domain!r}"}
    task = _task(domain, task_id)
    if task is None:
        return {**out, "error": f"domain {domain!r} has no task {task_id!r}"}
    if request.get("gold"):
        actions, reply = gold_actions(task), gold_reply(task)
    else:
        actions = list(request.get("actions") or [])
        reply = str(request.get("reply") or DO_NOTHING_REPLY)
    env = make_env(solo_mode=False)
    shared = _Shared(actions, reply)
    agent, user = _participants(shared, env.get_tools(), env.get_policy())
    orchestrator = Orchestrator(domain=domain, agent=agent, user=user, environment=env, task=task,
                                max_steps=4 * len(actions) + 20, max_errors=len(actions) + 10)
    simulation = orchestrator.run()
    if domain == "telecom":  # each request as in a process of its own (τ²'s shared VPN details, below)
        _reset_shared_defaults()
    graded = task
    judge_skipped = False
    criteria = task.evaluation_criteria
    if criteria is not None and RewardType.NL_ASSERTION in criteria.reward_basis and criteria.nl_assertions:
        # an LLM judge would grade these: graded on the rest of the basis instead
        graded = task.model_copy(deep=True)
        graded.evaluation_criteria.reward_basis = [
            b for b in criteria.reward_basis if b != RewardType.NL_ASSERTION]
        judge_skipped = True
    info = evaluate_simulation(simulation=simulation, task=graded, evaluation_type=EvaluationType.ALL,
                               solo_mode=False, domain=domain)
    results = []
    for message in simulation.messages:
        if getattr(message, "role", None) == "tool":
            results.append({"name": _tool_name(simulation.messages, message.id), "requestor": message.requestor,
                            "error": bool(message.error), "content": message.content})
    return {
        **out,
        "reward": float(info.reward),
        "reward_basis": [str(getattr(b, "value", b)) for b in (info.reward_basis or [])],
        "reward_breakdown": {str(getattr(k, "value", k)): float(v) for k, v in (info.reward_breakdown or {}).items()},
        "judge_skipped": judge_skipped,
        "db_match": info.db_check.db_match if info.db_check is not None else None,
        "termination": str(getattr(simulation.termination_reason, "value", simulation.termination_reason)),
        "errors": sum(1 for r in results if r["error"]),
        "tool_results": results,
        "db": env.tools.db.model_dump(mode="json") if env.tools is not None else None,
        "user_db": env.user_tools.db.model_dump(mode="json") if env.user_tools is not None else None,
    }


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """Calls made straight on a task's environment, no orchestrator: for each list of
    ``probe``, a fresh environment set to the task's ``initial_state`` (τ²'s ``set_state``:
    its initialization data and actions, each action followed by its ``sync_tools``), then
    each step through ``Environment.get_response`` (the call, then ``sync_tools`` when it
    did not raise), as a run makes it. A step is a tool call ``{"name", "arguments",
    "requestor"}`` or an assertion ``{"assert": func_name, "env_type", "arguments"}`` (its
    raw value). The answer: per list, each step's ``content`` and ``error`` (or ``value``),
    and the two DBs after it, dumped as JSON."""
    from tau2.data_model.message import ToolCall
    from tau2.data_model.tasks import EnvFunctionCall
    from tau2.registry import registry

    domain, task_id = str(request.get("domain")), str(request.get("task_id"))
    task = _task(domain, task_id)
    if task is None:
        return {"domain": domain, "task_id": task_id, "error": f"domain {domain!r} has no task {task_id!r}"}
    make_env = registry.get_env_constructor(domain)
    out = []
    for steps in request.get("probe") or [[]]:
        env = make_env(solo_mode=False)
        state = task.initial_state
        if state is not None:
            env.set_state(state.initialization_data, state.initialization_actions, state.message_history or [])
        done = []
        for n, step in enumerate(steps):
            if "assert" in step:
                call = EnvFunctionCall(env_type=step.get("env_type", "user"), func_name=step["assert"],
                                       arguments=dict(step.get("arguments") or {}))
                try:
                    done.append({"value": env.run_env_function_call(call)})
                except Exception as e:
                    done.append({"raised": f"{type(e).__name__}: {e}"})
                continue
            message = env.get_response(ToolCall(id=f"probe_{n}", name=step["name"],
                                                arguments=dict(step.get("arguments") or {}),
                                                requestor=step.get("requestor", "assistant")))
            done.append({"content": message.content, "error": bool(message.error)})
        out.append({"steps": done, "db": env.tools.db.model_dump(mode="json"),
                    "user_db": env.user_tools.db.model_dump(mode="json")})
        _reset_shared_defaults()
    return {"domain": domain, "task_id": task_id, "probes": out}


def _reset_shared_defaults() -> None:
    """τ²'s ``connect_vpn`` hands the phone the toolkit class's own ``default_vpn_details``
    object, which ``break_vpn`` then changes in place: every later environment of the process
    would connect to a poor server. Put it back between probes (a run has one environment)."""
    from tau2.domains.telecom.user_data_model import PerformanceLevel
    from tau2.domains.telecom.user_tools import TelecomUserTools

    TelecomUserTools.default_vpn_details.server_performance = PerformanceLevel.EXCELLENT


def _tool_name(messages: list[Any], call_id: str) -> str | None:
    for message in messages:
        for call in getattr(message, "tool_calls", None) or []:
            if call.id == call_id:
                return str(call.name)
    return None


def measure(domains: list[str], split: str | None) -> int:
    from tau2.registry import registry

    for domain in domains:
        started = time.perf_counter()
        name = split or DEFAULT_SPLIT.get(domain)
        tasks = registry.get_tasks_loader(domain)(name)
        # counts of reward 1.0: (gold, do-nothing), for the tasks graded in full and
        # for those graded without their NL assertions
        full, partial = [0, 0, 0], [0, 0, 0]
        failed: list[str] = []
        for task in tasks:
            got = replay({"domain": domain, "task_id": task.id, "gold": True})
            empty = replay({"domain": domain, "task_id": task.id, "actions": [], "reply": DO_NOTHING_REPLY})
            tally = partial if got["judge_skipped"] else full
            tally[0] += 1
            tally[1] += got["reward"] == 1.0
            tally[2] += empty["reward"] == 1.0
            if got["reward"] != 1.0:
                failed.append(f"{task.id} ({got['reward_breakdown']}, {got['termination']})")
        took = time.perf_counter() - started
        print(f"{domain} ({name} split, {len(tasks)} tasks, {took:.0f} s): graded in full: gold actions "
              f"{full[1]}/{full[0]} reward 1.0, do-nothing agent {full[2]}/{full[0]}")
        if partial[0]:
            print(f"  graded without their NL assertions (an LLM judge): gold actions {partial[1]}/{partial[0]} "
                  f"reward 1.0, do-nothing agent {partial[2]}/{partial[0]}")
        for line in failed:
            print(f"  - gold not 1.0: {line}")
    return 0


READS = ("get_", "check_", "run_", "can_")
ANSWER_ONLY = ("calculate", "think")


def _changed(value: Any) -> Any:
    """One argument changed the way a slip changes it (as benchmarks/bench_tau2_agreement.py does)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("1" if value[-1:] != "1" else "2") if value else "x"
    return value


def perturbed(actions: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The gold list with one agent write dropped, one argument of one agent write changed,
    one user action dropped: each a (kind, list)."""
    out = []
    for i, action in enumerate(actions):
        if action["name"].startswith(READS) or action["name"] in ANSWER_ONLY:
            continue
        rest = actions[:i] + actions[i + 1:]
        if action.get("requestor", "assistant") == "user":
            out.append(("user action dropped", rest))
            continue
        out.append(("agent write dropped", rest))
        for key in action.get("arguments") or {}:
            args = {**action["arguments"], key: _changed(action["arguments"][key])}
            out.append(("agent argument changed", [*actions[:i], {**action, "arguments": args}, *actions[i + 1:]]))
    return out


def measure_perturbed(domain: str, split: str | None) -> int:
    """τ²'s rewards for every perturbed gold list of the split: how many lists of each kind,
    and how many τ² still rewards 1.0 (a perturbation its grading does not see)."""
    from tau2.registry import registry

    name = split or DEFAULT_SPLIT.get(domain)
    tasks = registry.get_tasks_loader(domain)(name)
    started = time.perf_counter()
    counts: dict[str, list[int]] = {}
    unseen: list[str] = []
    for task in tasks:
        for kind, actions in perturbed(gold_actions(task)):
            got = replay({"domain": domain, "task_id": task.id, "actions": actions, "reply": gold_reply(task)})
            tally = counts.setdefault(kind, [0, 0])
            tally[0] += 1
            tally[1] += got["reward"] == 1.0
            if got["reward"] == 1.0:
                unseen.append(f"{kind}: {task.id}")
    took = time.perf_counter() - started
    print(f"{domain} ({name} split, {len(tasks)} tasks, {took:.0f} s): perturbed gold lists, τ²'s reward 1.0")
    for kind, (lists, ones) in counts.items():
        print(f"  {kind}: {ones}/{lists} lists still reward 1.0")
    for line in unseen:
        print(f"  - still 1.0: {line}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", nargs="+", metavar="DOMAIN", help="replay every task's gold actions and "
                        "a do-nothing agent, print the counts")
    parser.add_argument("--perturb", metavar="DOMAIN", help="replay every gold list with one write dropped, one "
                        "argument changed, one user action dropped; print how many τ² still rewards 1.0")
    parser.add_argument("--split", default=None, help="the task split for --measure (default: τ²'s own per domain)")
    args = parser.parse_args()
    _quiet()
    if args.measure:
        return measure(args.measure, args.split)
    if args.perturb:
        return measure_perturbed(args.perturb, args.split)
    try:
        request = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        print(f"error: stdin: not valid JSON: {e}", file=sys.stderr)
        return 2
    def answer_one(r: dict[str, Any]) -> dict[str, Any]:
        return probe(r) if "probe" in r else replay(r)

    answer = [answer_one(r) for r in request] if isinstance(request, list) else answer_one(request)
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
