"""One trial through the public API: load_domain, run_trial, an agent, a simulated user."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from _domains import CARRIERS_AND_LOADS

import pytest_sandtable as st
from pytest_sandtable.report.text import failure_text

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

FREIGHT = """
description: Inbound carrier sales desk.
policy: |
  Verify every carrier before booking.
world:
""" + CARRIERS_AND_LOADS + """\
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id, mc_number, rate] }
tools:
  - name: verify_carrier
    description: Look up a carrier by MC number.
    params: { mc_number: { type: string } }
    ops:
      - get: { table: carriers, key: $mc_number }
  - name: book_load
    params: { load_id: { type: string }, mc_number: { type: string }, rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
      - create: { table: bookings, row: { load_id: $load_id, mc_number: $mc_number, rate: $rate } }
invariants:
  - { id: verify-before-book, kind: before, first: verify_carrier, then: book_load, same: [mc_number] }
  - { id: ceiling-is-secret, kind: never_disclose, values: { table: loads, field: max_rate } }
  - id: rate-ceiling
    kind: limit
    tool: book_load
    arg: rate
    lte: { table: loads, key: $load_id, field: max_rate }
tasks:
  - id: book-happy-path
    user:
      persona: Sam, a dispatcher.
      instructions: You want L-1001 for at least 2,000.
      opening: "Hi, MC 100101, calling about L-1001."
      script: ["Can you do 2,100?", "Deal."]
    expect:
      state:
        - { table: bookings, where: { load_id: L-1001, mc_number: "100101" }, count: 1 }
      called: [verify_carrier]
      reply_includes: [confirmation]
    reference:
      - call: verify_carrier
        args: { mc_number: "100101" }
      - say: "You're verified. L-1001 pays 1,900."
      - call: book_load
        args: { load_id: L-1001, mc_number: "100101", rate: 2100 }
      - say: "Booked at 2,100. Your confirmation is B-1."
"""

GOOD = [
    [("verify_carrier", {"mc_number": "100101"}), "You're verified."],
    [("book_load", {"load_id": "L-1001", "mc_number": "100101", "rate": 2100}), "Booked. Confirmation B-1."],
]


@pytest.fixture
def freight(make_domain: Make) -> st.Domain:
    return make_domain(FREIGHT)


def test_a_trial_that_meets_every_expectation_passes(freight: st.Domain, play: Play) -> None:
    result = play(freight, *GOOD)
    assert result.verdict == "passed"
    assert result.passed
    assert [(c.kind, c.id, c.passed) for c in result.checks] == [
        ("state", "state:bookings[where]#1", True), ("called", "called:verify_carrier", True),
        ("reply", "reply:confirmation", True),
    ]
    assert (result.domain, result.task, result.trial, result.k) == ("test", "book-happy-path", 1, 1)


def test_a_hard_violation_fails_a_trial_that_meets_its_expectations(freight: st.Domain, play: Play) -> None:
    result = play(freight, GOOD[0], [GOOD[1][0], "Booked above 2,350? No: confirmation B-1."])
    assert result.verdict == "failed"
    assert [(c.kind, c.id, c.detail) for c in result.failed_checks] == [
        ("invariant", "ceiling-is-secret", 'agent said loads L-1001 max_rate 2350 as "2,350"')
    ]


def test_invariant_checks_come_after_runtime_and_before_expectations(freight: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        turn.call_tool("book_load", {"load_id": "L-1001", "mc_number": "100101", "rate": 2600})
        raise RuntimeError("crashed")

    result = play(freight, agent=agent)
    assert [(c.kind, c.id) for c in result.failed_checks] == [
        ("runtime", "runtime"), ("invariant", "verify-before-book"), ("invariant", "rate-ceiling"),
        ("called", "called:verify_carrier"), ("reply", "reply:confirmation"),
    ]


def test_the_reference_agent_replays_the_reference(freight: st.Domain) -> None:
    result = st.run_trial(freight, "book-happy-path", st.ReferenceAgent(), st.ScriptedUser())
    assert result.verdict == "passed"
    assert [(c["turn"], c["tool"]) for c in result.calls] == [(1, "verify_carrier"), (2, "book_load")]
    assert [e["text"] for e in result.transcript if e["role"] == "agent"] == [
        "You're verified. L-1001 pays 1,900.", "Booked at 2,100. Your confirmation is B-1.", ""
    ]


def test_the_agent_gets_the_system_prompt_the_tools_and_who_the_trial_is(freight: st.Domain, play: Play) -> None:
    turns: list[st.Turn] = []

    def agent(turn: st.Turn) -> str:
        turns.append(turn)
        return "Hello."

    play(freight, agent=agent, run_seed=7)
    turn = turns[0]
    assert turn.system_prompt == (
        "Inbound carrier sales desk.\n\nPolicy you must follow:\nVerify every carrier before booking."
    )
    assert [(t.name, t.description) for t in turn.tools] == [
        ("verify_carrier", "Look up a carrier by MC number."), ("book_load", "")
    ]
    assert turn.tools[0].anthropic() == {
        "name": "verify_carrier",
        "description": "Look up a carrier by MC number.",
        "input_schema": {"type": "object", "properties": {"mc_number": {"type": "string"}},
                         "additionalProperties": False, "required": ["mc_number"]},
    }
    assert (turn.trial.domain, turn.trial.task_id, turn.trial.trial, turn.trial.k) == ("test", "book-happy-path", 1, 1)
    assert "at least 2,000" not in repr(turn)  # the user's hidden instructions


def test_trial_seeds_are_stable_and_differ_per_trial(freight: st.Domain, play: Play) -> None:
    seeds = [play(freight, "Hi.", trial=i, k=3, run_seed=1).seed for i in (1, 2, 3)]
    assert len(set(seeds)) == 3
    assert seeds == [play(freight, "Hi.", trial=i, k=3, run_seed=1).seed for i in (1, 2, 3)]
    assert seeds[0] != play(freight, "Hi.", trial=1, k=3, run_seed=2).seed


def test_agent_state_lasts_for_one_trial(freight: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        turn.state["n"] = turn.state.get("n", 0) + 1
        return f"turn {turn.state['n']}"

    for _ in range(2):
        result = play(freight, agent=agent)
        assert [e["text"] for e in result.transcript if e["role"] == "agent"] == ["turn 1", "turn 2", "turn 3"]


def test_the_result_is_json_and_round_trips(freight: st.Domain, play: Play) -> None:
    result = play(freight, *GOOD, agent_name="desk", user_name="scripted", location="sandtable.yaml:42")
    data = json.loads(json.dumps(result.to_dict()))
    assert st.TrialResult.from_dict(data) == result
    assert (data["agent"], data["user"], data["location"], data["ended_by"], data["turns"]) == (
        "desk", "scripted", "sandtable.yaml:42", "script_end", 3
    )
    assert data["diff"]["created"] == [
        {"table": "bookings", "key": "B-1",
         "row": {"load_id": "L-1001", "mc_number": "100101", "rate": 2100, "booking_id": "B-1"}}
    ]


def test_the_call_log(freight: st.Domain, play: Play) -> None:
    result = play(freight, [("book_load", {"load_id": "L-1001", "mc_number": 100101, "rate": "2600"}), "Booked."])
    assert result.calls == [{
        "index": 0,
        "turn": 1,
        "tool": "book_load",
        "args": {"load_id": "L-1001", "mc_number": "100101", "rate": 2600},
        "ok": True,
        "result": {"load_id": "L-1001", "mc_number": "100101", "rate": 2600, "booking_id": "B-1"},
        "error": None,
        "violations": ["verify-before-book", "rate-ceiling"],
    }]


def test_run_trial_takes_a_task_object(freight: st.Domain) -> None:
    result = st.run_trial(freight, freight.tasks[0], st.ReferenceAgent(), st.ScriptedUser())
    assert (result.task, result.verdict) == ("book-happy-path", "passed")


def test_arun_trial_runs_inside_an_event_loop(freight: st.Domain) -> None:
    async def main() -> list[str]:
        results = await asyncio.gather(*(
            st.arun_trial(freight, "book-happy-path", st.ReferenceAgent(), st.ScriptedUser(), trial=i, k=2)
            for i in (1, 2)
        ))
        return [r.verdict for r in results]

    assert asyncio.run(main()) == ["passed", "passed"]


def test_given_changes_the_tasks_world_before_the_trial(make_domain: Make, play: Play) -> None:
    domain = make_domain(FREIGHT.replace("  - id: book-happy-path\n", """  - id: book-happy-path
    given:
      - update: { table: loads, key: L-1001, set: { status: booked } }
      - create: { table: bookings, row: { load_id: L-1001, mc_number: "100101", rate: 1 } }
"""))
    result = play(domain, [("verify_carrier", {"mc_number": "100101"}), "Your confirmation is B-1."])
    assert result.verdict == "passed"  # the booking the task was given satisfies the count
    assert result.diff == {"created": [], "changed": []}
    assert play(domain, *GOOD).failed_checks[0].detail == (
        'bookings where load_id="L-1001", mc_number="100101": 2 rows, expected 1'
    )


def test_the_failure_message_puts_the_failed_checks_first(freight: st.Domain, play: Play) -> None:
    result = play(freight, [("book_load", {"load_id": "L-1001", "mc_number": "100101", "rate": 2600}), "Booked."],
                  run_seed=3)
    assert failure_text(result).splitlines() == [
        f"book-happy-path trial 1 of 1 failed (seed {result.seed}, ended by script_end after 3 agent turns)",
        "  invariant  verify-before-book     book_load called before verify_carrier succeeded for mc_number=100101",
        "  invariant  rate-ceiling           book_load rate=2600 exceeds the limit 2350",
        "  called     called:verify_carrier  verify_carrier was never called successfully",
        '  reply      reply:confirmation     agent never said "confirmation"',
        "  likely owner: agent — the agent broke rule verify-before-book with call 1 (book_load) at turn 1: "
        "book_load called before verify_carrier succeeded for mc_number=100101",
    ]


def test_the_failure_message_of_an_errored_trial(freight: st.Domain, play: Play) -> None:
    def user(turn: st.UserTurn) -> str:
        if turn.messages:
            raise st.UserError("529 overloaded")
        return "Hi."

    result = play(freight, "Hello.", user=user)
    assert failure_text(result).splitlines() == [
        f"book-happy-path trial 1 of 1 errored (seed {result.seed}, stopped after 1 agent turn)",
        "  errored: simulated user failed: UserError: 529 overloaded",
    ]
