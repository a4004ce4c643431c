"""The conversation: who speaks when, how it ends, and what happens when a side fails."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

import pytest_sandtable as st

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

DOMAIN = """
world:
  notes: { key: id, fields: [text] }
tools:
  - name: take_note
    params: { text: { type: string } }
    ops:
      - create: { table: notes, row: { text: $text } }
  - name: transfer_to_human
    params: {}
    handoff: true
    ops:
      - respond: { transferred: true }
tasks:
  - id: scripted
    user: { opening: "Hi, I'm calling about L-1001.", script: ["Can you do 2,100?", "Deal."] }
  - id: no-opening
    user: { script: ["First line.", "Second line."] }
  - id: short
    max_turns: 2
    user: { opening: "Hi.", script: [One., Two., Three.] }
    expect:
      reply_includes: [confirmation]
  - id: silent
    user: { persona: "Sam, a dispatcher.", instructions: Book L-1001. }
"""


@pytest.fixture
def domain(make_domain: Make) -> st.Domain:
    return make_domain(DOMAIN)


def said(result: st.TrialResult) -> list[tuple[str, int, str]]:
    """(role, turn, text) of every message, tool calls left out."""
    return [(e["role"], e["turn"], e["text"]) for e in result.transcript if e["role"] != "tool"]


def test_the_user_opens_then_says_one_script_line_per_agent_reply(domain: st.Domain, play: Play) -> None:
    result = play(domain, "Hello.", "2,000 is my best.", "Booked.", "Never said.", task="scripted")
    assert said(result) == [
        ("user", 0, "Hi, I'm calling about L-1001."),
        ("agent", 1, "Hello."),
        ("user", 1, "Can you do 2,100?"),
        ("agent", 2, "2,000 is my best."),
        ("user", 2, "Deal."),
        ("agent", 3, "Booked."),
    ]
    assert (result.ended_by, result.turns, result.verdict) == ("script_end", 3, "passed")


def test_without_an_opening_the_script_starts_the_conversation(domain: st.Domain, play: Play) -> None:
    result = play(domain, "A.", "B.", task="no-opening")
    assert said(result) == [("user", 0, "First line."), ("agent", 1, "A."), ("user", 1, "Second line."),
                            ("agent", 2, "B.")]


def test_the_agent_sees_the_conversation_so_far(domain: st.Domain, play: Play) -> None:
    seen: list[list[dict[str, str]]] = []

    def agent(turn: st.Turn) -> str:
        seen.append(list(turn.messages))
        return f"reply {len(seen)}"

    play(domain, agent=agent, task="scripted")
    assert seen[2] == [
        {"role": "user", "content": "Hi, I'm calling about L-1001."},
        {"role": "assistant", "content": "reply 1"},
        {"role": "user", "content": "Can you do 2,100?"},
        {"role": "assistant", "content": "reply 2"},
        {"role": "user", "content": "Deal."},
    ]


def test_the_agent_may_call_tools_as_often_as_it_likes_before_replying(domain: st.Domain, play: Play) -> None:
    notes = [("take_note", {"text": str(i)}) for i in range(5)]
    result = play(domain, [*notes, "Noted."], task="scripted")
    assert [(c["turn"], c["tool"], c["ok"]) for c in result.calls] == [(1, "take_note", True)] * 5
    assert [e["role"] for e in result.transcript[:7]] == ["user"] + ["tool"] * 5 + ["agent"]


def test_a_handoff_ends_the_conversation_after_the_agents_reply(domain: st.Domain, play: Play) -> None:
    result = play(domain, [("transfer_to_human", {}), "Transferring you now."], "Never said.", task="scripted")
    assert said(result)[-1] == ("agent", 1, "Transferring you now.")
    assert (result.ended_by, result.turns) == ("handoff", 1)


def test_a_failed_handoff_does_not_end_it(domain: st.Domain, play: Play) -> None:
    result = play(domain, [("transfer_to_human", {"why": "x"}), "Hm."], "Still here.", task="scripted")
    assert result.calls[0]["ok"] is False
    assert said(result)[3] == ("agent", 2, "Still here.")


def test_max_turns_cuts_the_trial_off_and_it_is_graded(domain: st.Domain, play: Play) -> None:
    result = play(domain, "One.", "Two.", "Your confirmation is B-1.", task="short")
    assert (result.ended_by, result.turns) == ("max_turns", 2)
    assert [(c.id, c.detail) for c in result.failed_checks] == [
        ("reply:confirmation", 'agent never said "confirmation"')
    ]
    assert result.verdict == "failed"


def _user(*replies: st.UserReply) -> Callable[[st.UserTurn], st.UserReply]:
    """A simulated user that says these, one per turn."""

    def user(turn: st.UserTurn) -> st.UserReply:
        return replies[sum(m["role"] == "user" for m in turn.messages)]

    return user


def test_a_closing_message_with_content_gets_one_last_agent_turn(domain: st.Domain, play: Play) -> None:
    user = _user(st.UserReply("Hi, book L-1001."), st.UserReply("Great, thanks. Bye!", "goal_met"))
    result = play(domain, "Booked.", "You're welcome, bye.", "Never said.", task="silent", user=user)
    assert said(result)[-2:] == [("user", 1, "Great, thanks. Bye!"), ("agent", 2, "You're welcome, bye.")]
    assert (result.ended_by, result.turns) == ("goal_met", 2)


def test_an_empty_closing_message_ends_at_once(domain: st.Domain, play: Play) -> None:
    user = _user(st.UserReply("Hi, book L-1001."), st.UserReply("", "impossible"))
    result = play(domain, "We have nothing.", "Never said.", task="silent", user=user)
    assert said(result)[-1] == ("agent", 1, "We have nothing.")
    assert (result.ended_by, result.turns, result.verdict) == ("impossible", 1, "passed")


def test_the_simulated_user_gets_its_persona_and_instructions(domain: st.Domain, play: Play) -> None:
    turns: list[st.UserTurn] = []

    def user(turn: st.UserTurn) -> st.UserReply:
        turns.append(turn)
        return st.UserReply("Hi.") if not turn.messages else st.UserReply("", "goal_met")

    play(domain, "Hello.", task="silent", user=user)
    assert [(t.persona, t.instructions, t.opening) for t in turns] == [("Sam, a dispatcher.", "Book L-1001.", None)] * 2
    assert turns[1].messages == [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}]


# -- failures --------------------------------------------------------------------------


def test_an_agent_exception_fails_the_trial_with_a_runtime_check(domain: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        raise ValueError("model overloaded")

    result = play(domain, agent=agent, task="scripted")
    assert (result.verdict, result.ended_by, result.error) == ("failed", "agent_error", None)
    assert [(c.kind, c.id, c.detail) for c in result.failed_checks] == [
        ("runtime", "runtime", "the agent raised ValueError: model overloaded")
    ]


def test_an_agent_error_carries_its_message(domain: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        raise st.AgentError("the agent endpoint returned 500: upstream timeout")

    result = play(domain, agent=agent, task="scripted")
    assert [c.detail for c in result.failed_checks] == ["the agent endpoint returned 500: upstream timeout"]


def test_an_agent_that_returns_something_else_than_text(domain: st.Domain, play: Play) -> None:
    result = play(domain, agent=lambda turn: {"reply": "hi"}, task="scripted")
    assert [c.detail for c in result.failed_checks] == ["the agent returned dict, expected a str reply"]


def test_an_agent_returning_none_says_nothing(domain: st.Domain, play: Play) -> None:
    result = play(domain, agent=lambda turn: None, task="scripted")
    assert said(result)[1] == ("agent", 1, "")
    assert result.verdict == "passed"


def test_an_agent_stuck_in_a_tool_loop_is_stopped(domain: st.Domain, play: Play) -> None:
    def agent(turn: st.Turn) -> str:
        while True:
            try:
                turn.call_tool("take_note", {"text": "again"})
            except Exception:  # the stop must get through an agent's own error handling
                pass

    result = play(domain, agent=agent, task="scripted")
    assert len(result.calls) == 100
    assert [c.detail for c in result.failed_checks] == ["the agent made more than 100 tool calls in one turn"]


def test_a_user_failure_makes_the_trial_errored_and_ungraded(domain: st.Domain, play: Play) -> None:
    def user(turn: st.UserTurn) -> str:
        if turn.messages:
            raise st.UserError("user model failed: 529 overloaded")
        return "Hi."

    result = play(domain, "Hello.", task="short", user=user)
    assert (result.verdict, result.error) == (
        "errored", "simulated user failed: UserError: user model failed: 529 overloaded"
    )
    assert result.checks == []


def test_a_scripted_user_with_nothing_to_say_is_a_domain_bug(domain: st.Domain, play: Play) -> None:
    result = play(domain, "Hello.", task="silent")
    assert (result.verdict, result.turns, result.transcript) == ("errored", 0, [])
    assert result.error == (
        "simulated user failed: ScriptError: task 'silent' has no user.opening and no user.script to say"
    )


def test_a_user_returning_something_else(domain: st.Domain, play: Play) -> None:
    result = play(domain, "Hello.", task="silent", user=lambda turn: 7)
    assert result.error == (
        "simulated user failed: TypeError: the simulated user returned int, expected UserReply or str"
    )


# -- sync, async, hanging ------------------------------------------------------------------


def test_an_async_agent_and_user(domain: st.Domain, play: Play) -> None:
    async def agent(turn: st.Turn) -> str:
        await asyncio.sleep(0)
        turn.call_tool("take_note", {"text": turn.last_user_message})
        return "noted: " + turn.last_user_message

    async def user(turn: st.UserTurn) -> st.UserReply:
        await asyncio.sleep(0)
        return st.UserReply("Hi.") if not turn.messages else st.UserReply("", "goal_met")

    result = play(domain, agent=agent, user=user, task="silent")
    assert said(result) == [("user", 0, "Hi."), ("agent", 1, "noted: Hi.")]
    assert result.verdict == "passed"


def test_an_object_with_an_async_call_method(domain: st.Domain, play: Play) -> None:
    class Agent:
        async def __call__(self, turn: st.Turn) -> str:
            return "async object"

    assert said(play(domain, agent=Agent(), task="scripted"))[1] == ("agent", 1, "async object")


def test_a_hung_sync_agent_fails_at_the_trial_timeout(domain: st.Domain, play: Play) -> None:
    release = threading.Event()

    def agent(turn: st.Turn) -> str:
        release.wait(10)
        return "too late"

    started = time.monotonic()
    try:
        result = play(domain, agent=agent, task="scripted", trial_timeout=0.2)
    finally:
        release.set()
    assert time.monotonic() - started < 5  # not the 10 s the agent would hang
    assert result.verdict == "failed"
    assert [c.detail for c in result.failed_checks] == [
        "the agent did not answer before the trial timeout of 0.2s (turn 1)"
    ]


def test_a_hung_async_agent_fails_at_the_trial_timeout(domain: st.Domain, play: Play) -> None:
    async def agent(turn: st.Turn) -> str:
        await asyncio.sleep(10)
        return "too late"

    result = play(domain, agent=agent, task="scripted", trial_timeout=0.1)
    assert [c.detail for c in result.failed_checks] == [
        "the agent did not answer before the trial timeout of 0.1s (turn 1)"
    ]


def test_a_hung_user_errors_the_trial_at_the_timeout(domain: st.Domain, play: Play) -> None:
    release = threading.Event()

    def user(turn: st.UserTurn) -> str:
        if turn.messages:
            release.wait(10)
        return "Hi."

    try:
        result = play(domain, "Hello.", task="silent", user=user, trial_timeout=0.2)
    finally:
        release.set()
    assert (result.verdict, result.error) == (
        "errored", "simulated user failed: TimeoutError: no answer before the trial timeout of 0.2s"
    )


def test_a_timed_out_agent_cannot_act_after_the_trial_ended(domain: st.Domain, play: Play) -> None:
    woke = threading.Event()

    def agent(turn: st.Turn) -> str:
        time.sleep(0.3)
        turn.call_tool("take_note", {"text": "late"})
        woke.set()
        return "late"

    result = play(domain, agent=agent, task="scripted", trial_timeout=0.1)
    woke.wait(2)
    assert result.calls == []
    assert [e["role"] for e in result.transcript] == ["user"]


# -- failures that are not the agent's, and agents that misbehave badly ----------------------------


def test_a_rule_that_raises_makes_the_trial_errored_not_failed(make_domain: Make, play: Play) -> None:
    d = make_domain("""
        world:
          notes: { key: id, rows: [{ id: n-1, text: hi }] }
        tools:
          - name: read
            params: { id: { type: string }, pattern: { type: string, required: false } }
            ops: [{ get: { table: notes, key: $id } }]
        invariants:
          - { id: text-pattern, kind: require, tool: read, record: { table: notes, key: $id },
              where: { text: { matches: $pattern } } }
        tasks:
          - id: t
            user: { opening: "read n-1" }
    """)
    result = play(d, [("read", {"id": "n-1", "pattern": "(unclosed"}), "done"])
    assert result.verdict == "errored"
    assert result.error == (
        "the domain failed running read: error: missing ), unterminated subpattern at position 0"
    )


def test_an_agent_calling_sys_exit_fails_its_trial_and_the_run_goes_on(domain: st.Domain, play: Play) -> None:
    def quits(turn: st.Turn) -> str:
        raise SystemExit(3)

    result = play(domain, agent=quits)
    assert result.verdict == "failed"
    assert [c.detail for c in result.failed_checks if c.kind == "runtime"] == ["the agent called sys.exit(3)"]


def test_an_async_agent_that_blocks_the_loop_fails_at_the_timeout_after_the_fact(
    domain: st.Domain, play: Play
) -> None:
    async def blocks(turn: st.Turn) -> str:
        time.sleep(0.3)  # blocks the event loop: it cannot be interrupted
        return "late"

    result = play(domain, agent=blocks, trial_timeout=0.1)
    assert result.verdict == "failed"
    assert [c.detail for c in result.failed_checks if c.kind == "runtime"] == [
        "the agent did not answer before the trial timeout of 0.1s (turn 1; it blocked the event loop, "
        "so it could not be stopped earlier)"
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_agent_raising_keyboardinterrupt_or_exit_fails_only_its_trial(
    domain: st.Domain, play: Play, kind: str
) -> None:
    def sync_quits(turn: st.Turn) -> str:
        raise SystemExit(3)

    async def async_quits(turn: st.Turn) -> str:
        raise SystemExit(3)

    result = play(domain, agent=sync_quits if kind == "sync" else async_quits, trial_timeout=5)
    assert result.verdict == "failed"
    assert [c.detail for c in result.failed_checks if c.kind == "runtime"] == ["the agent called sys.exit(3)"]
