"""Who likely owns a failed trial (engine/attribution.py): real trials of a small desk,
played by small agents and simulated users, each owner with its exact evidence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import pytest_sandtable as st
from pytest_sandtable.report.text import failure_text

pytest_plugins = ["pytester"]

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

DESK = """
world:
  carriers:
    key: mc_number
    rows:
      - { mc_number: "100101", name: Blue Ridge Haulers }
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, max_rate: 2350, status: available }
      - { load_id: L-1002, max_rate: 2460, status: available }
tools:
  - name: verify_carrier
    params: { mc_number: { type: string } }
    ops:
      - get: { table: carriers, key: $mc_number }
  - name: book_load
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
invariants:
  - { id: rate-ceiling, kind: limit, tool: book_load, arg: rate, lte: { table: loads, key: $load_id, field: max_rate } }
  - { id: ceiling-is-secret, kind: never_disclose, values: { table: loads, field: max_rate } }
tasks:
  - id: book
    user:
      persona: Sam, a dispatcher at Blue Ridge Haulers.
      instructions: You want L-1001 and need at least 2,000.
      opening: "MC 100101 about L-1001."
      script: ["Can you do 2,100?", "Deal."]
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
    reference:
      - call: verify_carrier
        args: { mc_number: "100101" }
      - say: "Verified. 2,100?"
      - call: book_load
        args: { load_id: L-1001, rate: 2100 }
      - say: "Booked."
"""

VERIFY = ("verify_carrier", {"mc_number": "100101"})


def book(load: str = "L-1001", rate: int = 2100) -> tuple[str, dict[str, object]]:
    return ("book_load", {"load_id": load, "rate": rate})


@pytest.fixture
def desk(make_domain: Make) -> st.Domain:
    return make_domain(DESK)


def says(*lines: str | st.UserReply) -> Callable[[st.UserTurn], str | st.UserReply]:
    """A simulated user that says ``lines`` in order, one per turn, then ends (goal_met)."""

    def user(turn: st.UserTurn) -> str | st.UserReply:
        n = sum(1 for m in turn.messages if m["role"] == "user")
        return lines[n] if n < len(lines) else st.UserReply("", "goal_met")

    return user


# -- agent ----------------------------------------------------------------------------------------


def test_a_passed_trial_has_no_owner(desk: st.Domain, play: Play) -> None:
    assert play(desk, [VERIFY, "Verified."], [book(), "Booked."]).attribution is None


def test_an_errored_trial_has_no_owner(desk: st.Domain, play: Play) -> None:
    def user(turn: st.UserTurn) -> str:
        raise st.UserError("529 overloaded")

    result = play(desk, "Hello.", user=user)
    assert (result.verdict, result.attribution) == ("errored", None)


def test_a_broken_rule_is_the_agents_with_the_rule_and_the_call(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified."], [book(rate=2600), "Booked."])
    assert result.attribution == {
        "owner": "agent",
        "evidence": "the agent broke rule rate-ceiling with call 2 (book_load) at turn 2: "
                    "book_load rate=2600 exceeds the limit 2350",
    }


def test_a_rule_broken_in_a_reply_names_the_turn(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified."], [book(), "Booked, though we could pay 2,350."])
    assert result.attribution == {
        "owner": "agent",
        "evidence": 'the agent broke rule ceiling-is-secret in its reply at turn 2: '
                    'agent said loads L-1001 max_rate 2350 as "2,350"',
    }


def test_a_rule_is_the_agents_whatever_the_user_said(desk: st.Domain, play: Play) -> None:
    # the user names a load it was never given; booking it over the ceiling is still the agent's
    result = play(desk, [VERIFY, "Verified."], [book("L-1002", 2600), "Booked."],
                  user=says("MC 100101 about L-1001.", "Make it L-1002 at 2,600."))
    assert result.attribution is not None
    assert result.attribution["owner"] == "agent"
    assert result.attribution["evidence"].startswith("the agent broke rule rate-ceiling with call 2")


def test_an_agent_that_raised_owns_the_failure(desk: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        raise RuntimeError("crashed")

    assert play(desk, agent=agent).attribution == {
        "owner": "agent", "evidence": "the agent failed at turn 1: the agent raised RuntimeError: crashed",
    }


def test_an_expectation_missed_with_every_turn_given_is_the_agents(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified."], "Let me see.", "Hmm.")
    assert result.attribution == {
        "owner": "agent",
        "evidence": 'the agent missed expectation state:loads[L-1001]#1, which the user made possible: '
                    'loads L-1001: status is "available", expected "booked"',
    }


def test_the_scripted_user_ending_its_script_is_not_its_fault(desk: st.Domain, play: Play) -> None:
    # the agent had the three turns the script gives; the reference books in its second
    result = play(desk, [VERIFY, "Verified. What rate?"], "Which load again?", "Any other loads?")
    assert (result.ended_by, result.turns) == ("script_end", 3)
    assert result.attribution is not None and result.attribution["owner"] == "agent"


# -- user -----------------------------------------------------------------------------------------


def test_a_user_who_hangs_up_before_the_reference_would_have_booked(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified. Can you do 2,100?"],
                  user=says("MC 100101 about L-1001.", st.UserReply("", "goal_met")))
    assert result.attribution == {
        "owner": "user",
        "evidence": "the user ended the conversation (goal_met) after 1 agent turn, before book_load was called "
                    "(the task's reference does it in turn 2); it last said: \"MC 100101 about L-1001.\"",
    }


def test_hanging_up_after_a_refusal_is_not_the_users(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Sorry, I can't book that load."],
                  user=says("MC 100101 about L-1001.", st.UserReply("", "goal_met")))
    assert result.attribution is not None
    assert result.attribution["owner"] == "agent"


def test_without_a_reference_hanging_up_on_a_question_is_the_users(make_domain: Make, play: Play) -> None:
    domain = make_domain(DESK.split("    reference:")[0])
    result = play(domain, [VERIFY, "Verified. Which rate do you need?"],
                  user=says("MC 100101 about L-1001.", st.UserReply("Never mind, bye.", "impossible")))
    assert result.attribution == {
        "owner": "user",
        "evidence": "the user ended the conversation (impossible) after 2 agent turns, before book_load was called "
                    "while the agent was asking \"Verified. Which rate do you need?\"; "
                    "it last said: \"Never mind, bye.\"",
    }


def test_a_user_who_names_another_load_than_its_instructions(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified."], [book("L-1002"), "Booked."],
                  user=says("MC 100101 about L-1001.", "Actually book L-1002 at 2,100."))
    assert result.attribution == {
        "owner": "user",
        "evidence": "the user contradicted its instructions at turn 1: it said L-1002 where its instructions "
                    "give L-1001, and the agent then called book_load with it: \"Actually book L-1002 at 2,100.\"",
    }


def test_a_user_who_invents_a_value_the_agent_acts_on(make_domain: Make, play: Play) -> None:
    domain = make_domain(DESK.replace("You want L-1001 and need", "You want the Atlanta load and need"))
    result = play(domain, [VERIFY, "Verified."], [book("L-1002"), "Booked."],
                  user=says("MC 100101 about L-1001.", "Actually book L-1002 at 2,100."))
    assert result.attribution == {
        "owner": "user",
        "evidence": "the user said L-1002 at turn 1, a value found neither in its persona, instructions, opening "
                    "or script nor earlier in the conversation or tool results, and the agent then called "
                    "book_load with it: \"Actually book L-1002 at 2,100.\"",
    }


def test_a_value_the_agent_said_first_is_not_invented(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified. L-1002 is open too."], [book("L-1002"), "Booked."],
                  user=says("MC 100101 about L-1001.", "Then book L-1002."))
    assert result.attribution is not None
    assert result.attribution["owner"] == "agent"


# -- task -----------------------------------------------------------------------------------------


def test_a_task_whose_reference_fails_its_own_expectation(make_domain: Make, play: Play) -> None:
    domain = make_domain(DESK.replace("fields: { status: booked }", "fields: { status: cancelled }"))
    result = play(domain, [VERIFY, "Verified."], [book(), "Booked."])
    assert result.attribution == {
        "owner": "task",
        "evidence": 'the task\'s own reference fails expectation state:loads[L-1001]#1 when replayed: '
                    'loads L-1001: status is "booked", expected "cancelled"',
    }


def test_an_expectation_that_contradicts_a_rule(make_domain: Make, play: Play) -> None:
    domain = make_domain(
        DESK.replace("rate: 2100 }\n      - say: \"Booked.\"", "rate: 2400 }\n      - say: \"Booked.\"")
        .replace("state: [{ table: loads, key: L-1001, fields: { status: booked } }]",
                 "called: [{ tool: book_load, args: { rate: { gte: 2400 } } }]"))
    result = play(domain, [VERIFY, "Verified."], [book(rate=2400), "Booked."])
    assert result.attribution == {
        "owner": "task",
        "evidence": "an expectation contradicts rule rate-ceiling: the task's reference meets every expectation "
                    "but breaks it: book_load rate=2400 exceeds the limit 2350",
    }


def test_a_broken_task_does_not_own_a_failure_it_did_not_cause(make_domain: Make, play: Play) -> None:
    # the reference fails the state expectation; this agent fails it too, but also breaks a rule
    # the reference keeps: it would fail on a sound task as well
    domain = make_domain(DESK.replace("fields: { status: booked }", "fields: { status: cancelled }"))
    result = play(domain, [VERIFY, "We could pay 2,350."], "Bye.")
    assert result.attribution is not None
    assert result.attribution["owner"] == "agent"
    assert result.attribution["evidence"].startswith("the agent broke rule ceiling-is-secret")


# -- where it shows -------------------------------------------------------------------------------


def test_the_failure_text_ends_with_the_likely_owner(desk: st.Domain, play: Play) -> None:
    result = play(desk, [VERIFY, "Verified."], [book(rate=2600), "Booked."])
    assert failure_text(result).splitlines()[-1] == (
        "  likely owner: agent — the agent broke rule rate-ceiling with call 2 (book_load) at turn 2: "
        "book_load rate=2600 exceeds the limit 2350"
    )


def test_pytest_prints_the_owner_and_results_json_keeps_it(pytester: pytest.Pytester) -> None:
    text = "version: 1\nname: desk\n" + DESK.replace("fields: { status: booked }", "fields: { status: cancelled }")
    pytester.path.joinpath("sandtable.yaml").write_text(text, encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-out=out")
    result.stdout.fnmatch_lines([
        '  likely owner: task — the task\'s own reference fails expectation state:loads[[]L-1001[]]#1 when '
        'replayed: loads L-1001: status is "booked", expected "cancelled"',
    ])
    doc = json.loads(Path(pytester.path, "out", "results.json").read_text(encoding="utf-8"))
    assert [t["attribution"] for t in doc["trials"]] == [{
        "owner": "task",
        "evidence": 'the task\'s own reference fails expectation state:loads[L-1001]#1 when replayed: '
                    'loads L-1001: status is "booked", expected "cancelled"',
    }]
