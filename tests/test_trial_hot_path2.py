"""The trial loop's second round of shortcuts keeps every behaviour: an inline agent's
or user's turn runs without a coroutine, and falls back to the loop when it must (an
awaitable, latency owed); what its tool calls raise ends the trial as before (a domain
bug errors it, a tool loop fails it); the result is built positionally with every field
where it belongs; ToolResult and TrialInfo, set without the frozen dataclass's
``object.__setattr__``, stay frozen, equal, hashable and replaceable."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.engine.api import ToolResult, TrialInfo, UserReply, UserTurn
from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.engine.trial import trial_seed

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"


def test_the_result_fields_are_in_the_order_the_trial_passes_them() -> None:
    # _graded_trial passes these positionally: a field moved or added before them must fail here
    assert [f.name for f in dataclasses.fields(TrialResult)][:26] == [
        "domain", "task", "trial", "k", "seed", "verdict", "tags", "critical", "error", "ended_by", "turns",
        "agent", "user", "transcript", "calls", "checks", "violations", "diff", "usage", "latency", "duration",
        "location", "traceback", "soft", "shared_tags", "pending",
    ]


def test_every_field_of_a_result_holds_what_it_names() -> None:
    domain = st.load_domain(FREIGHT)
    task = domain.task("damage-claim-handoff")
    r = st.run_trial(domain, task, st.ReferenceAgent(), st.ScriptedUser(), trial=2, k=3, run_seed=7,
                     agent_name="reference", user_name="scripted", trial_timeout=60.0, location="f.yaml:9")
    assert (r.domain, r.task, r.trial, r.k) == ("freight", "damage-claim-handoff", 2, 3)
    assert r.seed == trial_seed(7, "freight", "damage-claim-handoff", 2)
    assert (r.verdict, r.error, r.ended_by, r.turns) == ("passed", None, "handoff", 1)
    assert (r.agent, r.user, r.location, r.traceback) == ("reference", "scripted", "f.yaml:9", None)
    assert r.tags == list(task.tags) and r.critical is task.critical
    assert r.shared_tags == [t for t in task.tags if t in domain.shared_tags] and r.pending == []
    assert [e["role"] for e in r.transcript] == ["user", "tool", "agent"]
    assert [c["tool"] for c in r.calls] == ["transfer_to_human"] and r.violations == []
    assert [(c.id, c.passed) for c in r.checks] == [
        ("called:transfer_to_human", True), ("not_called:book_load", True), ("not_called:log_offer", True),
        ("reply:transfer", True)]
    assert r.diff == {"created": [], "changed": []}
    assert r.usage == {"agent": {}, "user": {}}
    assert len(r.latency) == 1 and r.duration >= 0
    assert r.soft == {"counter-at-ceiling": {"tool": "log_offer", "applied": False, "broken": False}}
    assert r.attribution is None and r.replayed is False


def test_a_tool_result_and_a_trial_info_stay_frozen_values() -> None:
    r = ToolResult(False, error=404, message="no such load")
    assert (r.ok, r.value, r.error, r.message) == (False, None, 404, "no such load")
    assert r == ToolResult(False, None, 404, "no such load") and hash(r) == hash(ToolResult(False, None, 404,
                                                                                             "no such load"))
    assert dataclasses.replace(r, ok=True) == ToolResult(True, None, 404, "no such load")
    assert pickle.loads(pickle.dumps(r)) == r
    assert repr(r) == "ToolResult(ok=False, value=None, error=404, message='no such load')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.ok = True  # type: ignore[misc]
    info = TrialInfo("freight", "book", 1, 2, 3)
    assert dataclasses.asdict(info) == {"domain": "freight", "task_id": "book", "trial": 1, "k": 2, "seed": 3,
                                        "trial_id": "freight/book/1"}
    assert info.trial_id == "freight/book/1" and info == TrialInfo("freight", "book", 1, 2, 3)
    named = TrialInfo("freight", "book", 1, 2, 3, "desk/sandtable.yaml::book/1@0a1b2c3d")
    assert named.trial_id == "desk/sandtable.yaml::book/1@0a1b2c3d" and named != info
    assert pickle.loads(pickle.dumps(named)) == named
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.seed = 4  # type: ignore[misc]


class _Inline:
    """An inline agent playing ``calls`` in its first turn, then saying ``reply``."""

    inline = True

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], reply: str) -> None:
        self.calls, self.reply = calls, reply

    def __call__(self, turn: st.Turn) -> str:
        if not turn.state:
            turn.state["done"] = True
            for tool, args in self.calls:
                turn.call_tool(tool, args)
        return self.reply


def _desk(tmp_path: Path, broken: bool = False) -> st.Domain:
    """The desk domain; with ``broken``, a handler tool that raises (its module is imported
    once in the process, so one test only has it)."""
    text = DESK
    if broken:
        (tmp_path / "turns2_desk_handlers.py").write_text(HANDLERS, encoding="utf-8")
        text = text.replace("tools:\n", "tools:\n  - name: broken\n    handler: turns2_desk_handlers:broken\n")
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    return st.load_domain(tmp_path / "sandtable.yaml")


def test_an_inline_agents_call_that_meets_a_domain_bug_errors_the_trial(tmp_path: Path) -> None:
    domain = _desk(tmp_path, broken=True)
    r = st.run_trial(domain, "book", _Inline([("look", {}), ("broken", {})], "Done."), st.ScriptedUser())
    assert (r.verdict, r.ended_by, r.turns) == ("errored", "domain_error", 1)
    assert r.error is not None and r.error.startswith(
        "the domain failed running broken: its handler turns2_desk_handlers:broken raised KeyError: 'nope'\n")
    assert [c["tool"] for c in r.calls] == ["look"]  # the failed call is not logged
    assert [e["role"] for e in r.transcript] == ["user", "tool"]  # nor is a reply said


def test_an_inline_agents_latency_is_waited_on_the_loop_and_timed(tmp_path: Path) -> None:
    domain = _desk(tmp_path)
    r = st.run_trial(domain, "slow", _Inline([("look", {})], "Checked."), st.ScriptedUser())
    assert (r.verdict, r.ended_by) == ("passed", "script_end")
    assert r.calls[0]["fault"] == {"fault": 1, "kind": None, "latency_ms": 60}
    assert len(r.latency) == 2 and r.latency[0] >= 0.06 and r.latency[1] < 0.06


def test_an_inline_agents_latency_past_the_trial_timeout_fails_it(tmp_path: Path) -> None:
    domain = _desk(tmp_path)
    r = st.run_trial(domain, "slow", _Inline([("look", {})], "Checked."), st.ScriptedUser(), trial_timeout=0.02)
    assert (r.verdict, r.ended_by) == ("failed", "agent_error")
    assert [c.detail for c in r.failed_checks] == [
        "the agent did not answer before the trial timeout of 0.02s (turn 1)"]


def test_an_inline_user_that_raises_a_timeout_is_reported_as_no_answer(tmp_path: Path) -> None:
    domain = _desk(tmp_path)

    class Late:
        inline = True

        def __call__(self, turn: UserTurn) -> UserReply:
            raise TimeoutError("its own")

    r = st.run_trial(domain, "greet", st.ReferenceAgent(), Late(), trial_timeout=5.0)
    assert (r.verdict, r.error) == ("errored", "simulated user failed: TimeoutError: no answer before the trial "
                                               "timeout of 5s")


def test_an_inline_agent_and_user_finish_a_trial_with_no_event_loop(tmp_path: Path) -> None:
    # what the plugin does for them (RunState._drive): one send, no loop; nothing may suspend
    domain = _desk(tmp_path)
    coro = st.arun_trial(domain, "book", st.ReferenceAgent(), st.ScriptedUser(), trial_timeout=60.0)
    with pytest.raises(StopIteration) as done:
        coro.send(None)
    r = done.value.value
    assert (r.verdict, r.ended_by, r.turns) == ("passed", "script_end", 2)
    assert [e.get("text") for e in r.transcript if e["role"] != "tool"] == [
        "I want the van.", "Checked.", "Book it.", "Booked."]


def test_an_async_agent_still_runs_on_the_loop_with_its_calls(tmp_path: Path) -> None:
    domain = _desk(tmp_path)

    async def agent(turn: st.Turn) -> str:
        await asyncio.sleep(0)
        if not turn.state:
            turn.state["done"] = True
            await turn.acall_tool("look", {})
            await turn.acall_tool("book", {"load_id": "L-1", "rate": 1000})
        return "Booked."

    r = st.run_trial(domain, "book", agent, st.ScriptedUser())
    assert (r.verdict, r.ended_by, r.turns) == ("passed", "script_end", 2)
    assert [c["tool"] for c in r.calls] == ["look", "book"]


HANDLERS = '''
def broken(args, world, ctx):
    return {}["nope"]
'''

DESK = """
version: 1
name: desk
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, status: open }
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id, rate] }
tools:
  - name: look
    ops:
      - list: { table: loads, where: {} }
  - name: book
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: bookings, row: { load_id: $load_id, rate: $rate } }
tasks:
  - id: book
    user:
      opening: "I want the van."
      script: ["Book it."]
    expect:
      called: [look, book]
    reference:
      - { call: look }
      - { say: "Checked." }
      - { call: book, args: { load_id: L-1, rate: 1000 } }
      - { say: "Booked." }
  - id: greet
    user:
      instructions: Say hello.
    reference:
      - { say: "Hello." }
  - id: slow
    user:
      opening: "Look it up."
      script: ["Thanks."]
    faults:
      - { tool: look, latency_ms: 60 }
"""
