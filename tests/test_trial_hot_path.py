"""The trial loop's shortcuts give what the general paths give: the engine's reference
agent and scripted user share one turn each for a whole trial (every other agent or user
gets a fresh turn with copies), an inline agent or user is called without `invoke`
(an awaitable it gives is still awaited), each task's parts and each expectation's
check ids and clauses are made once, and a result's lists are its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest_sandtable as st
from pytest_sandtable.engine.api import UserReply, UserTurn

Make = Callable[[str], st.Domain]

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"


def _timeless(result: st.TrialResult) -> dict[str, Any]:
    """A result as results.json holds it, without what the clock decides."""
    d = result.to_dict()
    d.pop("duration")
    d["latency"] = len(d["latency"])
    return d


class _CopiedUser(st.ScriptedUser):
    """The scripted user under another class: the trial gives it a fresh turn, with copies,
    on every call, as it gives any user that is not the engine's own."""


class _OwnAgent(st.ReferenceAgent):
    """The reference agent under another class: a fresh turn on every call."""

    def for_task(self, task: Any) -> _OwnAgent:
        return _OwnAgent(task.reference)


def test_the_shared_turns_give_what_fresh_turns_give_on_every_freight_task() -> None:
    domain = st.load_domain(FREIGHT)
    for task in domain.tasks:
        for trial in (1, 2):
            kw: dict[str, Any] = {"trial": trial, "k": 2, "run_seed": 7, "agent_name": "reference",
                                  "user_name": "scripted", "trial_timeout": 60.0}
            shared = st.run_trial(domain, task, st.ReferenceAgent(), st.ScriptedUser(), **kw)
            fresh = st.run_trial(domain, task, _OwnAgent(), _CopiedUser(), **kw)
            assert _timeless(shared) == _timeless(fresh), task.id
            assert shared.verdict == "passed", task.id


def test_a_user_that_changes_its_turn_changes_nothing_of_the_trial(make_domain: Make) -> None:
    domain = make_domain(DESK)
    seen: list[int] = []

    class Meddling:
        inline = True

        def __init__(self) -> None:
            self.user = st.ScriptedUser()

        def __call__(self, turn: UserTurn) -> UserReply:
            reply = self.user(turn)
            seen.append(len(turn.calls))
            turn.messages.append({"role": "assistant", "content": "planted"})
            turn.calls.clear()
            turn.script.clear()
            turn.lines.clear()
            return reply

    result = st.run_trial(domain, "book", st.ReferenceAgent(), Meddling())
    assert result.verdict == "passed"
    assert seen == [1, 2]  # (the user's third call ends it: script_end)
    assert [e["role"] for e in result.transcript] == ["user", "tool", "agent", "user", "tool", "agent"]
    assert [c["tool"] for c in result.calls] == ["look", "book"]
    assert "planted" not in str(result.transcript)
    again = st.run_trial(domain, "book", st.ReferenceAgent(), st.ScriptedUser())
    assert _timeless(again) == _timeless(result)


def test_an_agent_that_changes_its_messages_changes_nothing_of_the_trial(make_domain: Make) -> None:
    domain = make_domain(DESK)
    reference = st.ReferenceAgent(domain.task("book").reference)

    def meddling(turn: st.Turn) -> str:
        reply = reference(turn)
        turn.messages.clear()
        return reply

    result = st.run_trial(domain, "book", meddling, st.ScriptedUser())
    assert result.verdict == "passed"
    assert [e.get("text") for e in result.transcript if e["role"] != "tool"] == [
        "I want the van.", "Checked.", "Book it.", "Booked: confirmation B-1."]


class _InlineButAsync:
    """Says it runs inline, yet gives an awaitable: the trial awaits it all the same."""

    inline = True

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls = 0

    def __call__(self, turn: Any) -> Any:
        self.calls += 1

        async def answer() -> Any:
            await asyncio.sleep(0)
            return self.reply

        return answer()


def test_an_inline_agent_that_gives_an_awaitable_is_awaited(make_domain: Make) -> None:
    domain = make_domain(DESK)
    agent = _InlineButAsync("Booked: confirmation B-1.")
    result = st.run_trial(domain, "book", agent, st.ScriptedUser())
    assert agent.calls == 2
    assert [e["text"] for e in result.transcript if e["role"] == "agent"] == ["Booked: confirmation B-1."] * 2
    assert result.ended_by == "script_end" and len(result.latency) == 2


def test_an_inline_user_that_gives_an_awaitable_is_awaited(make_domain: Make) -> None:
    domain = make_domain(DESK)
    user = _InlineButAsync(UserReply("Thanks, bye.", "goal_met"))
    result = st.run_trial(domain, "greet", st.ReferenceAgent(), user)
    assert user.calls == 1
    assert [(e["role"], e["text"]) for e in result.transcript] == [
        ("user", "Thanks, bye."), ("agent", "Hello.")]
    assert result.ended_by == "goal_met" and result.verdict == "passed"


def test_an_inline_user_that_answers_none_errors_the_trial(make_domain: Make) -> None:
    domain = make_domain(DESK)

    class Silent:
        inline = True

        def __call__(self, turn: UserTurn) -> None:
            return None

    result = st.run_trial(domain, "greet", st.ReferenceAgent(), Silent())
    assert result.verdict == "errored"
    assert result.error == ("simulated user failed: TypeError: the simulated user returned NoneType, "
                            "expected UserReply or str")


def test_an_inline_agent_that_answers_no_text_fails_the_trial(make_domain: Make) -> None:
    domain = make_domain(DESK)

    class Numeric:
        inline = True

        def __call__(self, turn: st.Turn) -> Any:
            return 42

    result = st.run_trial(domain, "book", Numeric(), st.ScriptedUser())
    assert result.verdict == "failed"
    assert [c.detail for c in result.failed_checks] == [
        "the agent returned int, expected a str reply", "look was never called successfully",
        "book was never called successfully"]


def test_an_inline_agents_system_exit_fails_its_trial_only(make_domain: Make) -> None:
    domain = make_domain(DESK)

    class Quitting:
        inline = True

        def __call__(self, turn: st.Turn) -> str:
            raise SystemExit(3)

    result = st.run_trial(domain, "book", Quitting(), st.ScriptedUser())
    assert result.verdict == "failed" and result.ended_by == "agent_error"
    assert [c.detail for c in result.failed_checks] == [
        "the agent called sys.exit(3)", "look was never called successfully", "book was never called successfully"]


def test_a_clause_that_reads_the_world_is_resolved_on_each_trials_world(make_domain: Make) -> None:
    domain = make_domain(DESK)
    lowered = st.run_trial(domain, "cap", _playing([("lower", {"load_id": "L-1", "to": 900}), ("book", {
        "load_id": "L-1", "rate": 1000})], "Done."), st.ScriptedUser())
    kept = st.run_trial(domain, "cap", _playing([("book", {"load_id": "L-1", "rate": 1000})], "Done."),
                        st.ScriptedUser())
    lowered_again = st.run_trial(domain, "cap", _playing([("lower", {"load_id": "L-1", "to": 900}), ("book", {
        "load_id": "L-1", "rate": 1000})], "Done."), st.ScriptedUser())
    assert [(c.id, c.passed, c.detail) for c in kept.checks] == [("state:within-ceiling", True, "")]
    for result in (lowered, lowered_again):
        assert [(c.id, c.passed, c.detail) for c in result.checks] == [(
            "state:within-ceiling", False,
            "bookings where rate <= 900: 0 rows, expected 1; closest: bookings B-1: rate is 1000, expected <= 900")]


def test_check_ids_and_fixed_clauses_are_the_same_in_every_trial(make_domain: Make) -> None:
    domain = make_domain(DESK)
    agent = _playing([("look", {}), ("book", {"load_id": "L-1", "rate": 1000}),
                      ("book", {"load_id": "L-1", "rate": 1000})], "Booked: confirmation B-1.")
    first, second = (st.run_trial(domain, "ids", agent, st.ScriptedUser()) for _ in range(2))
    expected = [
        ("state:bookings[where]#1", False, "bookings where load_id=\"L-1\": 2 rows, expected 1"),
        ("state:loads[L-1]#1", True, ""),
        ("called:look", True, ""),
        ("called:book", True, ""),
        ("called:book#2", False, "book was never called successfully with rate=5; closest: "
                                  "book(load_id=\"L-1\", rate=1000): rate is 1000, expected 5"),
        ("not_called:look", False, "look was called 1x"),
        ("not_called:book", True, ""),
        ("reply:Confirmation", True, ""),
        ("reply:refund", False, "agent never said \"refund\""),
    ]
    for result in (first, second):
        assert [(c.id, c.passed, c.detail) for c in result.checks] == expected


def test_each_result_has_lists_of_its_own(make_domain: Make) -> None:
    domain = make_domain(DESK)
    first = st.run_trial(domain, "book", st.ReferenceAgent(), st.ScriptedUser())
    first.tags.append("planted")
    first.shared_tags.append("planted")
    first.pending.append({"kind": "rule", "id": "planted"})
    first.latency.append(9.0)
    second = st.run_trial(domain, "book", st.ReferenceAgent(), st.ScriptedUser())
    assert second.tags == ["desk"] and second.shared_tags == [] and second.pending == []
    assert len(second.latency) == 2


def test_a_domain_loaded_again_gets_parts_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "sandtable.yaml"
    path.write_text("version: 1\nname: test\n" + DESK.lstrip("\n"), encoding="utf-8")
    first = st.load_domain(path)
    assert st.run_trial(first, "book", st.ReferenceAgent(), st.ScriptedUser()).verdict == "passed"
    path.write_text(path.read_text(encoding="utf-8").replace('"Booked: confirmation B-1."', '"Booked."'),
                    encoding="utf-8")
    second = st.load_domain(path)
    result = st.run_trial(second, "book", st.ReferenceAgent(), st.ScriptedUser())
    assert [e["text"] for e in result.transcript if e["role"] == "agent"] == ["Checked.", "Booked."]
    assert result.verdict == "passed"


def test_the_tool_budget_ends_a_looping_agents_turn(make_domain: Make) -> None:
    domain = make_domain(DESK)
    looping = _playing([("look", {})] * 101, "never")
    result = st.run_trial(domain, "book", looping, st.ScriptedUser())
    assert result.verdict == "failed" and len(result.calls) == 100
    assert [c.detail for c in result.failed_checks] == [
        "the agent made more than 100 tool calls in one turn", "book was never called successfully"]


def _playing(calls: list[tuple[str, dict[str, Any]]], reply: str) -> Callable[[st.Turn], str]:
    """An inline agent making ``calls`` in its first turn and saying ``reply`` in each."""

    class Playing:
        inline = True

        def __call__(self, turn: st.Turn) -> str:
            if not turn.state:
                turn.state["done"] = True
                for tool, args in calls:
                    turn.call_tool(tool, args)
            return reply

    return Playing()


DESK = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, status: open, max_rate: 1200 }
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id, rate] }
tools:
  - name: look
    ops:
      - list: { table: loads, where: {} }
  - name: lower
    params: { load_id: { type: string }, to: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { max_rate: $to } }
  - name: book
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: bookings, row: { load_id: $load_id, rate: $rate } }
tasks:
  - id: book
    tags: [desk]
    user:
      opening: "I want the van."
      script: ["Book it."]
    expect:
      called: [look, book]
    reference:
      - { call: look }
      - { say: "Checked." }
      - { call: book, args: { load_id: L-1, rate: 1000 } }
      - { say: "Booked: confirmation B-1." }
  - id: greet
    user:
      instructions: Say hello.
    reference:
      - { say: "Hello." }
  - id: cap
    user:
      opening: "Book L-1."
    expect:
      state:
        - id: within-ceiling
          table: bookings
          where: { rate: { lte: { table: loads, key: L-1, field: max_rate } } }
          count: 1
  - id: ids
    user:
      opening: "Book L-1."
    expect:
      state:
        - { table: bookings, where: { load_id: L-1 }, count: 1 }
        - { table: loads, key: L-1, fields: { status: open } }
      called: [look, book, { tool: book, args: { rate: 5 } }]
      not_called: [look, { tool: book, args: { rate: 5 } }]
      reply_includes: [Confirmation, refund]
"""
