"""Grading agreement with τ²-bench's own evaluator, and faithfulness of the imported tools.

For every task of τ²'s airline and retail domains (the split imported, ``base`` by
default), these action lists are replayed both through τ² (its orchestrator and
``evaluate_simulation``, by benchmarks/tau2_oracle.py under τ²'s own Python) and
through the domain ``import tau2`` writes:

- the gold actions (τ²'s ``evaluation_criteria.actions``), then the reference's reply;
- each list with one write dropped;
- each list with one argument of one write changed (and of the first lookup).

**Agreement**: our verdict (the reference agent playing the list against the imported
domain, graded by the engine) equals τ²'s reward, 1.0 ⇔ passed. A task whose basis has
``NL_ASSERTION`` with assertions (an LLM judge) is compared on the rest of its basis
(retail: its DB component), as the oracle grades it. **Faithfulness**: the final worlds
are equal field by field (ours, as τ²'s db.json holds it, against τ²'s DB after the
same list, dumped from its pydantic models), with the one normalisation τ²'s models
need: a field its model declares with a ``null`` default is absent in the data the
import reads (the row never had it), and is compared as absent.

Prints the counts and every disagreement, with its task, list and cause.

``--domain telecom`` (not in ``all``): τ²'s dual-control telecom. Each base task's lists
(the gold actions; each agent write dropped; each argument of each agent write changed;
each user action dropped) through τ² and, with ``--level engine`` (the default), an engine
trial of the domain ``import tau2`` writes: the task with its reference and its scripted
user's script made from the list as the importer makes them from the gold actions
(``tau2_telecom.played_actions``), the reference agent playing the agent's runs and the
scripted user the user's; our verdict is the trial's, under the task's basis (ENV_ASSERTION:
``expect.assert``; ACTION: ``expect.called``). The final worlds (the carrier's DB and the
phone) are read by an assertion the bench adds (:func:`final_worlds`) and compared with
τ²'s field by field; each reward component of τ²'s with our checks of that kind; each call
of the trial (its tool, its side, whether it failed) with τ²'s tool messages. ``--level
handlers``: the handlers and sync driven directly, graded on τ²'s basis by this script (no
engine).

    SANDTABLE_TAU2_PYTHON=/path/to/tau2-venv/bin/python \\
    python benchmarks/bench_tau2_agreement.py --tau2 PATH [--domain airline|retail|telecom|all]
        [--level engine|handlers] [--tasks N] [--task-ids A,B]

PATH is τ²-bench's checkout (holding ``data/tau2/domains`` and ``src/tau2``; default
``$TAU2_BENCH_PATH``). τ² is never imported here: only the oracle script runs it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_sandtable.domain.loader import load_domain
from pytest_sandtable.domain.model import Assertion, Domain, RefStep, Task
from pytest_sandtable.engine.handlers import ToolError
from pytest_sandtable.engine.reference import ReferenceAgent
from pytest_sandtable.engine.reference_world import reference_world
from pytest_sandtable.engine.scripted_user import ScriptedUser
from pytest_sandtable.engine.trial import apply_given, run_trial
from pytest_sandtable.importer.tau2 import import_tau2, read_domain, reference_reply, task_id, tau2_data

Action = tuple[str, dict[str, Any]]
DOMAINS = ("airline", "retail")
ORACLE = Path(__file__).resolve().parent / "tau2_oracle.py"
READ_PREFIXES = ("get_", "list_", "search_", "find_")
ANSWER_ONLY = ("calculate", "think", "transfer_to_human_agents")


def writes(name: str) -> bool:
    return not name.startswith(READ_PREFIXES) and name not in ANSWER_ONLY


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


def variants(actions: list[Action]) -> Iterator[tuple[str, list[Action]]]:
    """(label, list): the gold list; for each write, the list without it and the list
    with its first argument changed; the list with the first lookup's first argument
    changed."""
    yield "gold", actions
    first_read = next((i for i, (name, kwargs) in enumerate(actions) if not writes(name) and kwargs), None)
    for i, (name, kwargs) in enumerate(actions):
        if writes(name):
            yield f"drop {i + 1} {name}", actions[:i] + actions[i + 1:]
        if (writes(name) or i == first_read) and kwargs:
            key = next(iter(kwargs))
            yield f"change {i + 1} {name}.{key}", [*actions[:i], (name, {**kwargs, key: _changed(kwargs[key])}),
                                                   *actions[i + 1:]]


# -- τ², through the oracle ------------------------------------------------------------------


def oracle(python: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """τ²'s answers to ``requests``, in one run of the oracle script."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([python, str(ORACLE)], input=json.dumps(requests), capture_output=True, text=True,
                          env=env, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(f"error: the τ² oracle failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


# -- ours ----------------------------------------------------------------------------------


class PlayList(ReferenceAgent):
    """An agent that plays a given list of steps whatever task it is given."""

    def for_task(self, task: Task) -> PlayList:
        return self


@dataclass
class Ours:
    domain: Domain
    name: str

    def run(self, raw_id: str, actions: list[Action], reply: str) -> tuple[list[str], dict[str, Any]]:
        """The checks our trial failed for ``actions`` then ``reply`` (none: it passed)
        and our data after them."""
        expected = self.domain.task(task_id(self.name, raw_id))
        steps = [RefStep(call=name, args=copy.deepcopy(args)) for name, args in actions] + [RefStep(say=reply)]
        played = Task(id=expected.id, user=expected.user, expect=expected.expect, reference=steps,
                      given=expected.given, max_turns=expected.max_turns)
        result = run_trial(self.domain, expected, PlayList(played.reference), ScriptedUser())
        world = reference_world(self.domain, played, 0, apply_given)
        data = tau2_data(self.name, {t: world.rows(t) for t in self.domain.tables})
        if result.verdict not in ("passed", "failed"):
            return [f"errored: {result.error}"], data
        return [c.id for c in result.failed_checks], data


# -- comparing worlds ----------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    """A value with null fields dropped from mappings (τ²'s model defaults, see the
    docstring) and numbers compared by value (τ²'s ``float`` fields turn ``163`` into
    ``163.0``)."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(value)


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Every (table, key, field) that differs, as ``table key: field``."""
    out = []
    for table in sorted(set(ours) | set(theirs)):
        a_rows, b_rows = ours.get(table, {}), theirs.get(table, {})
        for key in sorted(set(a_rows) | set(b_rows)):
            a, b = _norm(a_rows.get(key)), _norm(b_rows.get(key))
            if a == b:
                continue
            if a is None or b is None:
                out.append(f"{table} {key}: row {'missing in ours' if a is None else 'missing in τ²'}")
                continue
            fields = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            out += [f"{table} {key}: {f} ours {json.dumps(a.get(f))[:80]} τ² {json.dumps(b.get(f))[:80]}"
                    for f in fields]
    return out


# -- where τ² is wrong ---------------------------------------------------------------------------


def tau2_item_bug(played: list[Action], ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Whether every difference is τ²'s ``modify_pending_order_items`` bug: its last
    loop sets ``item.price = variant.price`` and ``item.options = variant.options``
    with ``variant`` left over from the loop before, the *last* new item's, so every
    modified item of an order takes the price and options of the last one (τ-bench,
    and ours, give each item its own). Checked: the only differing rows are orders a
    ``modify_pending_order_items`` of the list changed, only their ``items`` differ,
    and there only in ``price``/``options``, τ²'s being the last new item's."""
    modified = {args.get("order_id"): args.get("new_item_ids") or [] for name, args in played
                if name == "modify_pending_order_items"}
    for table in set(ours) | set(theirs):
        for key in set(ours.get(table, {})) | set(theirs.get(table, {})):
            a, b = _norm(ours.get(table, {}).get(key)), _norm(theirs.get(table, {}).get(key))
            if a == b:
                continue
            if table != "orders" or key not in modified or a is None or b is None:
                return False
            if {f for f in set(a) | set(b) if a.get(f) != b.get(f)} != {"items"}:
                return False
            last = next((i for i in b["items"] if i["item_id"] == modified[key][-1]), None) if modified[key] else None
            for mine, its in zip(a["items"], b["items"]):
                if mine == its:
                    continue
                if last is None or mine["item_id"] not in modified[key] or {
                        f for f in set(mine) | set(its) if mine.get(f) != its.get(f)} - {"price", "options"}:
                    return False
                if (its["price"], its["options"]) != (last["price"], last["options"]):
                    return False
    return True


# -- the comparison ------------------------------------------------------------------------------


@dataclass
class Tally:
    lists: int = 0
    agree: int = 0
    same_data: int = 0
    passed: int = 0
    rewarded: int = 0
    judge_skipped: int = 0
    tau2_wrong: int = 0
    disagreements: list[str] = field(default_factory=list)
    # telecom: per component of τ²'s reward (its breakdown), [lists graded on it, ours the same]
    parts: dict[str, list[int]] = field(default_factory=dict)
    same_steps: int = 0  # telecom, engine: lists whose calls succeeded and failed as τ²'s did
    # telecom: per agent (agent_kind), [lists, verdict = τ² reward, ours passed, τ² gave 1.0]
    agents: dict[str, list[int]] = field(default_factory=dict)


def compare(python: str, ours: Ours, tasks: list[Any], tally: Tally) -> None:
    plan: list[tuple[str, str, list[Action], str]] = []
    for task in tasks:
        reply = reference_reply(task)
        for label, played in variants(task.actions):
            plan.append((task.id, label, played, reply))
    answers = oracle(python, [
        {"domain": ours.name, "task_id": tid, "reply": reply,
         "actions": [{"name": n, "arguments": a, "requestor": "assistant"} for n, a in played]}
        for tid, _, played, reply in plan
    ])
    for (tid, label, played, reply), answer in zip(plan, answers):
        where = f"{task_id(ours.name, tid)} [{label}]"
        if "error" in answer:
            tally.disagreements.append(f"{where}: τ² oracle: {answer['error']}")
            continue
        failed, mine = ours.run(tid, played, reply)
        tally.lists += 1
        passed, rewarded = not failed, answer["reward"] == 1.0
        tally.passed += passed
        tally.rewarded += rewarded
        tally.judge_skipped += bool(answer["judge_skipped"])
        if passed == rewarded:
            tally.agree += 1
        else:
            verdict = "passed" if passed else f"failed ({', '.join(failed)})"
            tally.disagreements.append(
                f"{where}: verdict {verdict}, τ² reward {answer['reward']:g} {answer['reward_breakdown']}")
        diff = differences(mine, answer["db"])
        if not diff:
            tally.same_data += 1
        elif tau2_item_bug(played, mine, answer["db"]):
            tally.tau2_wrong += 1
            tally.disagreements.append(f"{where}: final data differs where τ² is wrong: {diff[0][:160]}"
                                       + (f" (+{len(diff) - 1} more)" if len(diff) > 1 else ""))
        else:
            more = f" (+{len(diff) - 3} more)" if len(diff) > 3 else ""
            tally.disagreements.append(f"{where}: final data differs: {'; '.join(diff[:3])}{more}")


# -- telecom ---------------------------------------------------------------------------------------

TELECOM_READS = ("get_", "check_", "run_", "can_")
# τ²'s reward components in telecom, and the checks of ours that grade each
TELECOM_PARTS = {"ENV_ASSERTION": "assert:", "ACTION": "called:"}


def telecom_variants(actions: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The gold list; each agent write dropped; each argument of each agent write changed; each
    user action dropped (the lists of ``tau2_oracle.py --perturb``); then the lists of the two other
    agents: the do-nothing agent's (no call) and, for each user action, the list with it replaced by
    one wrong instruction (:func:`wrong_instruction`)."""
    yield "gold", actions
    for i, action in enumerate(actions):
        name = action["name"]
        if name.startswith(TELECOM_READS):
            continue
        rest = actions[:i] + actions[i + 1:]
        if action["requestor"] == "user":
            yield f"drop {i + 1} user {name}", rest
            continue
        yield f"drop {i + 1} {name}", rest
        for key, value in action["arguments"].items():
            yield f"change {i + 1} {name}.{key}", [*actions[:i], {**action, "arguments": {**action["arguments"],
                                                   key: _changed(value)}}, *actions[i + 1:]]
    yield DO_NOTHING, []
    for i, action in enumerate(actions):
        wrong = wrong_instruction(actions, i) if action["requestor"] == "user" else None
        if wrong is not None:
            yield (f"{WRONG} {i + 1} user {action['name']} -> {wrong['name']}"
                   f"{json.dumps(wrong['arguments']) if wrong['arguments'] else ''}",
                   [*actions[:i], wrong, *actions[i + 1:]])


DO_NOTHING = "do-nothing"  # the agent that only says DO_NOTHING_REPLY
DO_NOTHING_REPLY = "I cannot help with that."
WRONG = "wrong"  # the reference agent with one instruction to the user replaced by a wrong one


def wrong_instruction(actions: list[dict[str, Any]], i: int) -> dict[str, Any] | None:
    """The wrong instruction in place of user action ``i``: the next instruction the imported caller
    follows (``tau2_telecom.INSTRUCTIONS``, in order, from the one after action ``i``'s) that the
    list's user actions do not make; None when action ``i`` is no instruction of that table."""
    from pytest_sandtable.importer.tau2_telecom import INSTRUCTIONS

    table = [(name, args) for name, args, _, _ in INSTRUCTIONS]
    made = [(a["name"], a["arguments"]) for a in actions if a["requestor"] == "user"]
    here = (actions[i]["name"], actions[i]["arguments"])
    if here not in table:
        return None
    at = table.index(here)
    for step in range(1, len(table)):
        name, args = table[(at + step) % len(table)]
        if (name, args) not in made:
            return {"name": name, "arguments": dict(args), "requestor": "user"}
    return None


AGENTS = {"reference": "reference agent, each list: ", DO_NOTHING: "do-nothing agent:         ",
          WRONG: "one wrong instruction:     "}


def agent_kind(label: str) -> str:
    """Which agent plays a list of :func:`telecom_variants`: the reference agent playing the list,
    the do-nothing agent, or the reference agent with one wrong instruction."""
    return label if label == DO_NOTHING else WRONG if label.startswith(WRONG + " ") else "reference"


def telecom_world_text(read: Any) -> str:
    """Both sides' tables as one `world`, for the handlers alone (``--level handlers``)."""
    from pytest_sandtable.importer.templates import tau2_telecom_handlers as tel

    lines = ["version: 1", "name: telecom-handlers", "policy: Nothing.",
             'clock: {now: "2025-02-25T12:08:00-05:00"}', "world:"]
    tables = {**{t: (k, read.data[t]) for t, k in tel.AGENT_TABLES.items()},
              tel.DEVICE[0]: ("id", [{"id": tel.DEVICE[1], **read.user_data["device"]}]),
              tel.SURROUNDINGS[0]: ("id", [{"id": tel.SURROUNDINGS[1], **read.user_data["surroundings"]}])}
    for name, (key, rows) in tables.items():
        fields = list(dict.fromkeys(f for row in rows for f in row)) or [key]
        lines += [f"  {name}:", f"    key: {key}", f"    fields: {json.dumps(fields)}", "    rows:"]
        lines += [f"      - {json.dumps(row, ensure_ascii=False)}" for row in rows]
    lines += ["tools:", "  - name: noop", "    ops: [{respond: {ok: true}}]", "tasks:",
              "  - id: t", "    user: {opening: Hello.}", "    reference: [{say: Hello.}]"]
    return "\n".join(lines) + "\n"


def telecom_ours(domain: Domain, task: dict[str, Any], actions: list[dict[str, Any]]) -> tuple[list[str], Any]:
    """``--level handlers``: the handlers replaying the task's setup and ``actions`` (τ²'s sync after
    each step that did not fail), graded on the task's basis: ENV_ASSERTION, every assertion true;
    ACTION, every gold action made (by its side, its compared args) by a call that succeeded. The
    kinds that failed, and both DBs."""
    from pytest_sandtable.engine.handlers import HandlerContext, WorldHandle, _Shared
    from pytest_sandtable.engine.world import World, seed_for
    from pytest_sandtable.importer.templates import tau2_telecom_handlers as tel

    world = World(seed_for(domain))
    handle = WorldHandle(world, domain)
    shared = _Shared(0, domain.clock_now, None)
    made: list[dict[str, Any]] = []

    def step(name: str, args: dict[str, Any]) -> bool:
        try:
            getattr(tel, name)(copy.deepcopy(args), handle, HandlerContext(shared, name, 0))
        except ToolError:
            return False
        tel.sync(handle, HandlerContext(shared, "sync", 0))
        return True

    for setup in (task.get("initial_state") or {}).get("initialization_actions") or []:
        step(setup["func_name"], setup["arguments"])
    for action in actions:
        if step(action["name"], action["arguments"]):
            made.append(action)
    criteria = task["evaluation_criteria"]
    failed = []
    if "ENV_ASSERTION" in criteria["reward_basis"]:
        for check in criteria.get("env_assertions") or []:
            value = getattr(tel, check["func_name"])(handle, **check["arguments"])
            if not (value[0] if isinstance(value, tuple) else value):
                failed.append(f"assert:{check['func_name']}")
    if "ACTION" in criteria["reward_basis"]:
        for gold in criteria.get("actions") or []:
            keys = gold["arguments"].keys() if gold.get("compare_args") is None else gold["compare_args"]
            if not any(m["name"] == gold["name"] and m["requestor"] == gold["requestor"]
                       and all(m["arguments"].get(k) == gold["arguments"].get(k) for k in keys) for m in made):
                failed.append(f"called:{gold['name']}")
    agent = {t: json.loads(json.dumps(handle.list(t))) for t in tel.AGENT_TABLES}
    user = {part: {k: v for k, v in json.loads(json.dumps(handle.get(*where))).items() if k != "id"}
            for part, where in (("device", tel.DEVICE), ("surroundings", tel.SURROUNDINGS))}
    return failed, (agent, user)


def _new_bills(db: dict[str, Any], seed: set[str]) -> dict[str, Any]:
    text = json.dumps(db)
    for bill in db["bills"]:
        if bill["bill_id"] not in seed:
            text = text.replace(json.dumps(bill["bill_id"]), '"NEW"')
    return json.loads(text)  # type: ignore[no-any-return]


def telecom_plan(path: Path, ids: list[str]) -> tuple[dict[str, Any], list[tuple[str, str, list[dict[str, Any]]]]]:
    """τ²'s raw tasks by id, and (task id, label, list) for every list of ``telecom_variants``."""
    raw = {t["id"]: t for t in json.loads((path / "tasks.json").read_text(encoding="utf-8"))}
    return raw, [(tid, label, played) for tid in ids for label, played in telecom_variants(
        [{"name": a["name"], "arguments": a["arguments"], "requestor": a["requestor"]}
         for a in raw[tid]["evaluation_criteria"].get("actions") or []])]


# the final worlds of the engine's last trial, as final_worlds read them: (agent tables, phone)
FINAL: list[tuple[dict[str, Any], dict[str, Any]]] = []
CAPTURE = Assertion(function="bench_tau2_agreement:final_worlds", id="bench-final-worlds")


def final_worlds(world: Any) -> bool:
    """An ``expect.assert`` function the bench adds to each played task: the trial's final worlds
    read through the read-only handle the engine gives its assertions (both sides' tables), kept in
    :data:`FINAL`. Always true: it reads, never grades."""
    from pytest_sandtable.importer.templates import tau2_telecom_handlers as tel

    agent = {t: json.loads(json.dumps(world.list(t))) for t in tel.AGENT_TABLES}
    user = {part: {k: v for k, v in json.loads(json.dumps(world.get(*where))).items() if k != "id"}
            for part, where in (("device", tel.DEVICE), ("surroundings", tel.SURROUNDINGS))}
    FINAL.append((agent, user))
    return True


def _captured() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """:data:`FINAL` of the module the engine resolved ``final_worlds`` in (this one when imported as
    ``bench_tau2_agreement``; a second copy of it when this file runs as a script)."""
    import importlib

    return importlib.import_module("bench_tau2_agreement").FINAL  # type: ignore[no-any-return]


class DoNothing:
    """The do-nothing agent: no call, and "I cannot help with that." every turn."""

    name = "do-nothing"
    inline = True

    def __call__(self, turn: Any) -> str:
        return DO_NOTHING_REPLY


def telecom_engine(domain: Domain, task: Task, read: Any, actions: list[dict[str, Any]],
                   label: str = "gold") -> tuple[Any, Any]:
    """One engine trial of ``task`` as imported, its scripted user unchanged (it does what the agent
    asks), with the reference agent playing ``actions``: its reference replaced by the list's agent
    calls and, for each user action, its request, as the importer builds the reference from τ²'s
    gold actions (``played_actions``); the do-nothing agent for :data:`DO_NOTHING`. The task's
    expectations are its own (telecom's bases are ENV_ASSERTION and ACTION: none compares with the
    reference's world), plus :func:`final_worlds`. The trial's result, and its final worlds (None
    if the trial never reached its grading)."""
    from pytest_sandtable.importer.tau2_telecom import played_actions

    steps = played_actions(read, [(a["name"], a["arguments"], a["requestor"]) for a in actions])
    reference = [RefStep(call=s["call"], args=copy.deepcopy(s["args"])) if "call" in s else RefStep(say=s["say"])
                 for s in steps]
    expect = dataclasses.replace(task.expect, asserts=[*task.expect.asserts, CAPTURE])
    played = dataclasses.replace(task, reference=reference, expect=expect)
    final = _captured()
    final.clear()
    agent: Any = DoNothing() if label == DO_NOTHING else ReferenceAgent()
    result = run_trial(domain, played, agent, ScriptedUser())
    return result, (final[-1] if final else None)


def telecom_steps(calls: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str:
    """The first difference between the trial's conversation calls (each side's, in order; not its
    setup's, history's or sync's) and τ²'s tool messages: the tool, its side, and whether it failed.
    Empty when they are the same."""
    mine = [(c["tool"], "user" if c.get("by") == "user" else "assistant", not c["ok"]) for c in calls
            if c.get("by") in (None, "user")]
    its = [(r["name"], r["requestor"], bool(r["error"])) for r in theirs]
    for n, (a, b) in enumerate(zip(mine, its), 1):
        if a != b:
            return f"call {n}: ours {a[0]} by {a[1]}{' failed' if a[2] else ''}, τ² {b[0]} by {b[1]}" \
                   f"{' failed' if b[2] else ''}"
    return "" if len(mine) == len(its) else f"ours made {len(mine)} calls, τ² {len(its)}"


def _keyed(db: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from pytest_sandtable.importer.templates import tau2_telecom_handlers as tel

    return {t: {row[key]: row for row in db.get(t) or []} for t, key in tel.AGENT_TABLES.items()}


def telecom_differences(agent: dict[str, Any], user: dict[str, Any], answer: dict[str, Any],
                        seed: set[str]) -> list[str]:
    """Every field that differs between our final worlds and τ²'s (a bill made in the run compared
    without its id, which each side draws)."""
    out = differences(_keyed(_new_bills(agent, seed)), _keyed(_new_bills(answer["db"], seed)))
    theirs = answer["user_db"] or {}
    for part in ("device", "surroundings"):
        a, b = user.get(part) or {}, theirs.get(part) or {}
        out += [f"{part}: {f} ours {json.dumps(a.get(f))[:80]} τ² {json.dumps(b.get(f))[:80]}"
                for f in sorted(set(a) | set(b)) if a.get(f) != b.get(f)]
    return out


def compare_telecom(python: str, path: Path, split: str, wanted: list[str] | None, limit: int | None,
                    tally: Tally, level: str, out: Path) -> int:
    """τ²'s telecom: each list of each task (``telecom_variants``) through τ² (the oracle) and ours:
    at ``level`` ``engine``, an engine trial of the imported domain (:func:`telecom_engine`); at
    ``handlers``, the handlers alone graded on τ²'s basis (:func:`telecom_ours`). The verdicts
    against τ²'s rewards, the final worlds field by field. The number of tasks."""
    from pytest_sandtable.domain.loader import load_domain_text
    from pytest_sandtable.importer.tau2_telecom import import_telecom, read_telecom, reference_reply

    read = read_telecom(path, split)
    by_id = {t.raw_id: t for t in read.tasks}
    ids = [t.raw_id for t in read.tasks if wanted is None or t.raw_id in wanted][:limit]
    raw, plan = telecom_plan(path, ids)
    answers = oracle(python, [{"domain": "telecom", "task_id": tid, "actions": played,
                               "reply": DO_NOTHING_REPLY if label == DO_NOTHING else reference_reply(by_id[tid])}
                              for tid, label, played in plan])
    seed = {b["bill_id"] for b in read.data["bills"]}
    if level == "engine":
        domain = load_domain(import_telecom(path, out, split, force=True).domain_file)
    else:
        domain = load_domain_text(telecom_world_text(read))
    for (tid, label, played), answer in zip(plan, answers):
        where = f"{tid} [{label}]"
        if "error" in answer:
            tally.disagreements.append(f"{where}: τ² oracle: {answer['error']}")
            continue
        if level == "engine":
            result, worlds = telecom_engine(domain, domain.task(by_id[tid].id), by_id[tid], played, label)
            if result.verdict == "errored" or worlds is None:
                tally.lists += 1
                tally.disagreements.append(f"{where}: our trial errored: {result.error}")
                continue
            failed = [c.id for c in result.failed_checks]
            agent, user = worlds
            steps = telecom_steps(result.calls, answer["tool_results"])
            tally.same_steps += not steps
            if steps:
                tally.disagreements.append(f"{where}: calls differ: {steps}")
        else:
            failed, (agent, user) = telecom_ours(domain, raw[tid], played)
        tally.lists += 1
        passed, rewarded = not failed, answer["reward"] == 1.0
        tally.passed += passed
        tally.rewarded += rewarded
        by = tally.agents.setdefault(agent_kind(label), [0, 0, 0, 0])  # lists, agree, ours passed, τ² 1.0
        by[0] += 1
        by[1] += passed == rewarded
        by[2] += passed
        by[3] += rewarded
        if passed == rewarded:
            tally.agree += 1
        else:
            tally.disagreements.append(f"{where}: ours {'passed' if passed else 'failed ' + ', '.join(failed)}, "
                                       f"τ² reward {answer['reward']:g} {answer['reward_breakdown']}")
        for kind, prefix in TELECOM_PARTS.items():  # each component apart: one may hide another's slip
            if kind in answer["reward_breakdown"]:
                part = tally.parts.setdefault(kind, [0, 0])
                part[0] += 1
                mine = not any(f.startswith(prefix) for f in failed)
                if mine == (answer["reward_breakdown"][kind] == 1.0):
                    part[1] += 1
                else:
                    tally.disagreements.append(f"{where}: {kind} ours {'1' if mine else '0'}, τ² "
                                               f"{answer['reward_breakdown'][kind]:g}")
        diff = telecom_differences(agent, user, answer, seed)
        if not diff:
            tally.same_data += 1
        else:
            more = f" (+{len(diff) - 3} more)" if len(diff) > 3 else ""
            tally.disagreements.append(f"{where}: final data differs: {'; '.join(diff[:3])}{more}")
    return len(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tau2", type=Path, default=os.environ.get("TAU2_BENCH_PATH"),
                        help="τ²-bench's checkout (default: $TAU2_BENCH_PATH)")
    parser.add_argument("--python", default=os.environ.get("SANDTABLE_TAU2_PYTHON"),
                        help="the Python that has τ² installed (default: $SANDTABLE_TAU2_PYTHON)")
    parser.add_argument("--domain", choices=[*DOMAINS, "telecom", "all"], default="all",
                        help="all: airline and retail; telecom: τ²'s dual-control domain (not in all)")
    parser.add_argument("--level", choices=("engine", "handlers"), default="engine",
                        help="telecom: an engine trial of the imported domain per list (default), or its handlers "
                        "alone graded on τ²'s basis by this script")
    parser.add_argument("--split", default="base")
    parser.add_argument("--tasks", type=int, default=None, help="the first N tasks of each domain (default: all)")
    parser.add_argument("--task-ids", default=None, metavar="A,B,...", help="only these τ² task ids")
    args = parser.parse_args()
    if args.tau2 is None or args.python is None:
        print("error: give --tau2 PATH and --python PY (or set TAU2_BENCH_PATH and SANDTABLE_TAU2_PYTHON)",
              file=sys.stderr)
        return 2
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in DOMAINS if args.domain == "all" else (args.domain,):
            started = time.perf_counter()
            path = Path(args.tau2) / "data" / "tau2" / "domains" / name
            if name == "telecom":
                tally = Tally()
                count = compare_telecom(args.python, path, args.split, args.task_ids.split(",") if args.task_ids
                                        else None, args.tasks, tally, args.level, Path(tmp) / name)
                how = ("an engine trial each (reference agent, scripted user)" if args.level == "engine"
                       else "the handlers graded on τ²'s basis")
                print(f"telecom: {count} tasks ({args.split} split), {tally.lists} action lists "
                      f"({time.perf_counter() - started:.0f} s); {how}")
                print(f"  verdict = τ² reward: {tally.agree}/{tally.lists} "
                      f"(ours passed {tally.passed}, τ² gave 1.0 to {tally.rewarded})")
                print(f"  same final data:     {tally.same_data}/{tally.lists}")
                print("  per component:       " + ", ".join(f"{kind} {same}/{n}" for kind, (n, same)
                                                            in sorted(tally.parts.items())))
                if args.level == "engine":
                    print(f"  same calls:          {tally.same_steps}/{tally.lists} (each call's tool, side and "
                          "failure as τ²'s)")
                for kind, words in AGENTS.items():
                    lists, same, ours_passed, rewarded = tally.agents.get(kind, [0, 0, 0, 0])
                    print(f"  {words}{same}/{lists} (ours passed {ours_passed}, τ² gave 1.0 to {rewarded})")
                for line in tally.disagreements:
                    print(f"  - {line}")
                status |= bool(tally.disagreements)
                continue
            tasks = read_domain(path, args.split).tasks
            if args.task_ids:
                wanted = args.task_ids.split(",")
                tasks = [t for t in tasks if t.id in wanted]
            elif args.tasks is not None:
                tasks = tasks[: args.tasks]
            done = import_tau2(path, Path(tmp) / name, split=args.split, force=True)
            ours = Ours(load_domain(done.domain_file), name)
            tally = Tally()
            compare(args.python, ours, tasks, tally)
            took = time.perf_counter() - started
            print(f"{name}: {len(tasks)} tasks ({args.split} split), {tally.lists} action lists ({took:.0f} s); "
                  f"{tally.judge_skipped} lists graded without their NL assertions (DB component)")
            print(f"  verdict = τ² reward: {tally.agree}/{tally.lists} "
                  f"(ours passed {tally.passed}, τ² gave 1.0 to {tally.rewarded})")
            print(f"  same final data:     {tally.same_data}/{tally.lists}")
            if tally.tau2_wrong:
                print(f"  different where τ² is wrong: {tally.tau2_wrong}/{tally.lists} (modify_pending_order_items "
                      "gives every modified item the last new item's price and options)")
            for line in tally.disagreements:
                print(f"  - {line}")
            # τ²'s own bug is listed, not a failure
            status |= len(tally.disagreements) > tally.tau2_wrong
    return status


if __name__ == "__main__":
    sys.exit(main())
