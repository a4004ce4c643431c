"""The scripted user that reacts: script lines with `when`, `say_unknown`, `end`, and
the order in which it says them (docs/spec.md, "A scripted user that reacts")."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.engine.scripted_user import MAX_UNKNOWN_IN_A_ROW

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

# A τ-bench-style task imported with only a goal, made runnable by a few lines.
DOMAIN = """
world:
  reservations:
    key: reservation_id
    rows:
      - { reservation_id: NO6JO3, user_id: mia_li_3668, status: active }
tools:
  - name: get_reservation
    params: { reservation_id: { type: string } }
    ops:
      - get: { table: reservations, key: $reservation_id }
  - name: cancel_reservation
    params: { reservation_id: { type: string } }
    ops:
      - update: { table: reservations, key: $reservation_id, set: { status: cancelled } }
tasks:
  - id: cancel
    user:
      instructions: You are mia_li_3668 and want to cancel reservation NO6JO3 because of a change of plan.
      opening: I'd like to cancel a reservation.
      say_unknown: I don't have that.
      script:
        - { say: "My user id is mia_li_3668.", when: { reply_matches: "user ?id" } }
        - { say: "It's NO6JO3.", when: { reply_includes: reservation, not_called: get_reservation } }
        - { say: "Change of plan.", when: { reply_includes: [reason, cancel] } }
        - { say: "Yes, go ahead.", when: { reply_includes: confirm, called: get_reservation } }
        - { say: "Thanks, that's all.", when: { called: cancel_reservation }, end: true }
  - id: agenda
    user:
      script:
        - First plain line.
        - { say: "Answer to the question.", when: { reply_includes: "?" } }
        - Second plain line.
"""


@pytest.fixture
def domain(make_domain: Make) -> st.Domain:
    return make_domain(DOMAIN)


def user_lines(result: st.TrialResult) -> list[str]:
    return [e["text"] for e in result.transcript if e["role"] == "user"]


def test_the_user_answers_what_the_agent_asks_in_any_order(domain: st.Domain, play: Play) -> None:
    result = play(
        domain,
        "Sure. What is the reservation number?",
        "And your user id?",
        [("get_reservation", {"reservation_id": "NO6JO3"}), "What is the reason? Please confirm you want to cancel."],
        [("cancel_reservation", {"reservation_id": "NO6JO3"}), "Cancelled. Please confirm again?"],
        "Anything else?",
        "Goodbye.",
        "Never said.",
        task="cancel",
    )
    assert user_lines(result) == [
        "I'd like to cancel a reservation.",
        "It's NO6JO3.",
        "My user id is mia_li_3668.",
        # two lines hold: the first in file order is said, the other waits for the next reply
        "Change of plan.",
        # `confirm` holds for line 4 again but it was said; `called: cancel_reservation` ends
        "Yes, go ahead.",
        "Thanks, that's all.",
    ]
    assert (result.ended_by, result.verdict) == ("script_end", "passed")
    # a closing line still gets one last agent turn
    assert [e["text"] for e in result.transcript if e["role"] == "agent"][-1] == "Goodbye."


def test_a_condition_on_a_tool_counts_only_calls_that_succeeded(domain: st.Domain, play: Play) -> None:
    result = play(
        domain,
        [("cancel_reservation", {"reservation_id": "NOPE"}), "I tried to cancel it."],
        task="cancel",
    )
    # the failed call is no `called: cancel_reservation`, and line 3 wants both "reason" and "cancel"
    assert user_lines(result)[1] == "I don't have that."


def test_say_unknown_is_said_twice_in_a_row_at_most_then_the_user_ends(domain: st.Domain, play: Play) -> None:
    result = play(domain, "Hm.", "Hm?", "Hmm.", "Never heard.", task="cancel")
    assert MAX_UNKNOWN_IN_A_ROW == 2
    assert user_lines(result) == ["I'd like to cancel a reservation.", "I don't have that.", "I don't have that."]
    assert result.ended_by == "script_end"
    assert [e["text"] for e in result.transcript if e["role"] == "agent"] == ["Hm.", "Hm?", "Hmm."]


def test_a_line_said_resets_the_count_of_unknowns(domain: st.Domain, play: Play) -> None:
    result = play(domain, "Hm.", "Your reservation?", "Hm.", "Hm.", "Hm.", task="cancel")
    assert user_lines(result) == [
        "I'd like to cancel a reservation.",
        "I don't have that.",
        "It's NO6JO3.",
        "I don't have that.",
        "I don't have that.",
    ]


def test_plain_lines_are_said_in_order_when_no_reaction_applies(domain: st.Domain, play: Play) -> None:
    result = play(domain, "Hello.", "Anything else?", "Anything else?", "Bye.", task="agenda")
    # no opening: the first plain line opens; a question gets its answer once, then the agenda goes on
    assert user_lines(result) == ["First plain line.", "Second plain line.", "Answer to the question."]
    assert result.ended_by == "script_end"


def test_a_script_of_strings_is_said_as_it_always_was(make_domain: Make, play: Play) -> None:
    d = make_domain(DOMAIN.split("tasks:")[0] + "tasks:\n  - id: t\n    user: { opening: Hi., script: [One., Two.] }\n")
    result = play(d, "a", "b", "c", "d")
    assert user_lines(result) == ["Hi.", "One.", "Two."]
    assert result.ended_by == "script_end"


def test_a_user_turn_carries_the_lines_and_the_calls_so_far(domain: st.Domain, play: Play) -> None:
    seen: list[st.UserTurn] = []

    def spy(turn: st.UserTurn) -> st.UserReply:
        seen.append(turn)
        return st.UserReply("", "goal_met")

    play(domain, [("get_reservation", {"reservation_id": "NO6JO3"}), "Found it."], task="cancel", user=spy)
    (turn,) = seen
    assert turn.script[0] == "My user id is mia_li_3668."
    assert turn.lines[1].when == {"reply_includes": ["reservation"], "not_called": ["get_reservation"]}
    assert turn.say_unknown == "I don't have that."
    assert [(c["tool"], c["ok"]) for c in turn.calls] == [("get_reservation", True)]


def test_the_model_keeps_each_line_with_its_conditions_and_line(domain: st.Domain) -> None:
    task = domain.task("cancel")
    # the file has `version` and `name` before DOMAIN's first line
    first = DOMAIN.lstrip("\n").splitlines().index('        - { say: "My user id is mia_li_3668.", '
                                                    'when: { reply_matches: "user ?id" } }') + 3
    assert [(line.when, line.end, line.pos.line if line.pos else None) for line in task.user.script] == [
        ({"reply_matches": "user ?id"}, False, first),
        ({"reply_includes": ["reservation"], "not_called": ["get_reservation"]}, False, first + 1),
        ({"reply_includes": ["reason", "cancel"]}, False, first + 2),
        ({"reply_includes": ["confirm"], "called": ["get_reservation"]}, False, first + 3),
        ({"called": ["cancel_reservation"]}, True, first + 4),
    ]
    assert domain.task("agenda").user.say_unknown is None


# --------------------------------------------------------------------------- the mistakes validation reports

TOOLS = """\
version: 1
name: t
tools:
  - name: verify_patient
    params: {}
    ops: [{ respond: ok }]
tasks:
  - id: t
    user:
      opening: Hi.
"""


def problems(text: str) -> list[str]:
    with pytest.raises(DomainError) as e:
        load_domain_text(text, "d.yaml")
    return [str(p) for p in e.value.problems]


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (
            "      script: [{ say: Hi., when: { reply_include: birth } }]\n",
            "d.yaml:11:36: tasks[0].user.script[0].when.reply_include: unknown key 'reply_include'; "
            "did you mean 'reply_includes'?",
        ),
        (
            "      script: [{ say: Hi., when: { called: verify_patiant } }]\n",
            "d.yaml:11:44: tasks[0].user.script[0].when.called: unknown tool 'verify_patiant'; "
            "did you mean 'verify_patient'?",
        ),
        (
            "      script: [{ say: Hi., when: { not_called: [verify_patient, book] } }]\n",
            "d.yaml:11:65: tasks[0].user.script[0].when.not_called[1]: unknown tool 'book'; "
            "expected one of: verify_patient",
        ),
        (
            '      script: [{ say: "", when: { called: verify_patient } }]\n',
            "d.yaml:11:23: tasks[0].user.script[0].say: found an empty string, expected text",
        ),
        (
            "      script: [{ say: Hi., when: {} }]\n",
            "d.yaml:11:34: tasks[0].user.script[0].when: found an empty mapping, expected at least 1 key",
        ),
        (
            "      script: [{ say: Hi., when: { reply_matches: \"(\" } }]\n",
            "d.yaml:11:51: tasks[0].user.script[0].when.reply_matches: not a valid regular expression: "
            "missing ), unterminated subpattern at position 0",
        ),
        (
            "      script: [{ when: { called: verify_patient } }]\n",
            "d.yaml:11:16: tasks[0].user.script[0]: missing required key 'say'",
        ),
        (
            "      script: [{ say: Hi., end: yes }]\n",
            "d.yaml:11:33: tasks[0].user.script[0].end: found string 'yes', expected boolean",
        ),
        (
            "      script: [42]\n",
            "d.yaml:11:16: tasks[0].user.script[0]: found integer 42, expected string or object",
        ),
        (
            '      say_unknown: ""\n',
            "d.yaml:11:20: tasks[0].user.say_unknown: found an empty string, expected text",
        ),
    ],
)
def test_each_mistake_in_a_script_is_reported_at_its_line(user: str, expected: str) -> None:
    assert problems(TOOLS + user) == [expected]


def test_a_script_with_only_reactions_needs_an_opening() -> None:
    text = TOOLS.replace("      opening: Hi.\n", "")
    text += "      script: [{ say: Hi., when: { called: verify_patient } }]\n"
    assert problems(text) == [
        "d.yaml:10:15: tasks[0].user.script: every line has `when`, so the scripted user has nothing to start "
        "the conversation with: give user.opening, or a line without `when`"
    ]
