"""Expectations, graded at the end of a trial against the final world and the call log."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest

import pytest_sandtable as st

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

WORLD = """
world:
  carriers:
    key: mc_number
    rows:
      - { mc_number: "100101", name: Blue Ridge Haulers }
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, status: available, note: "" }
      - { load_id: L-1002, status: available }
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id, mc_number, rate] }
tools:
  - name: verify_carrier
    params: { mc_number: { type: string } }
    ops:
      - get: { table: carriers, key: $mc_number }
  - name: book_load
    params: { load_id: { type: string }, mc_number: { type: string }, rate: { type: number } }
    checks:
      - require: { table: loads, key: $load_id, where: { status: available } }
        error: 409
        message: "{load_id} is taken"
    ops:
      - create: { table: bookings, row: { load_id: $load_id, mc_number: $mc_number, rate: $rate } }
      - update: { table: loads, key: $load_id, set: { status: booked } }
  - name: transfer_to_human
    params: { reason: { type: string } }
    handoff: true
    ops:
      - respond: { transferred: true }
"""


def task(make: Make, expect: str) -> st.Domain:
    """One task with this `expect:` block."""
    body = textwrap.indent(textwrap.dedent(expect).strip(), "      ")
    return make(WORLD + f"""
tasks:
  - id: t
    user: {{ opening: "Hi, MC 100101 here, calling about L-1001.", script: [Go on., Go on.] }}
    expect:
{body}
""")


def checks(result: st.TrialResult) -> list[tuple[str, str, bool, str]]:
    return [(c.kind, c.id, c.passed, c.detail) for c in result.checks]


def book(load: str = "L-1001", mc: str = "100101", rate: object = 2100) -> tuple[str, dict[str, object]]:
    return ("book_load", {"load_id": load, "mc_number": mc, "rate": rate})


# -- state --------------------------------------------------------------------------


def test_state_record_fields_match(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "state: [{ table: loads, key: L-1001, fields: { status: booked } }]")
    assert checks(play(domain, [book(), "Booked."])) == [("state", "state:loads[L-1001]#1", True, "")]
    assert checks(play(domain, "Hello.")) == [
        ("state", "state:loads[L-1001]#1", False, 'loads L-1001: status is "available", expected "booked"')
    ]


def test_state_record_that_does_not_exist(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "state: [{ table: bookings, key: B-1, fields: { load_id: L-1001 } }]")
    assert checks(play(domain, "Hello.")) == [("state", "state:bookings[B-1]#1", False, "bookings B-1: no such row")]
    assert play(domain, [book(), "Booked."]).verdict == "passed"


def test_state_record_without_fields_must_exist(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "state: [{ table: bookings, key: B-1 }]")
    assert checks(play(domain, [book(), "Booked."])) == [("state", "state:bookings[B-1]#1", True, "")]
    assert checks(play(domain, "Hello.")) == [("state", "state:bookings[B-1]#1", False, "bookings B-1: no such row")]


def test_state_record_fields_with_operators(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, """
    state:
      - { table: bookings, key: B-1, fields: { rate: { gte: 2000, lte: 2350 }, mc_number: { in: ["100101"] } } }
    """)
    assert play(domain, [book(rate="2100.00"), "Booked."]).verdict == "passed"
    assert checks(play(domain, [book(rate=2400), "Booked."])) == [
        ("state", "state:bookings[B-1]#1", False, "bookings B-1: rate is 2400, expected >= 2000 and <= 2350")
    ]


def test_state_count_of_rows_matching(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, """
    state:
      - { table: bookings, where: { load_id: L-1001, mc_number: "100101" }, count: 1 }
      - { table: bookings, where: { load_id: L-1002 }, count: 0 }
    """)
    assert play(domain, [book(), "Booked."]).verdict == "passed"
    assert checks(play(domain, [book("L-1002"), "Booked."])) == [
        ("state", "state:bookings[where]#1", False,
         'bookings where load_id="L-1001", mc_number="100101": 0 rows, expected 1; '
         'closest: bookings B-1: load_id is "L-1002", expected "L-1001"'),
        ("state", "state:bookings[where]#2", False, 'bookings where load_id="L-1002": 1 row, expected 0'),
    ]


def test_state_count_without_where_and_without_count(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, """
    state:
      - { table: bookings, count: 0 }
      - { table: bookings, where: { rate: { gt: 5000 } } }
    """)
    assert checks(play(domain, [book(), book("L-1002", rate=6000), "Booked."])) == [
        ("state", "state:bookings[where]#1", False, "bookings: 2 rows, expected 0"),
        ("state", "state:bookings[where]#2", True, ""),
    ]
    assert checks(play(domain, "Hello.")) == [
        ("state", "state:bookings[where]#1", True, ""),
        ("state", "state:bookings[where]#2", False, "bookings where rate > 5000: 0 rows, expected at least 1"),
    ]


def test_state_ids_count_per_table(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, """
    state:
      - { table: loads, key: L-1001, fields: { status: available } }
      - { table: bookings, count: 0 }
      - { table: loads, key: L-1002, fields: { status: available } }
      - { table: loads, where: { status: booked }, count: 0 }
    """)
    assert [c.id for c in play(domain, "Hello.").checks] == [
        "state:loads[L-1001]#1", "state:bookings[where]#1", "state:loads[L-1002]#2", "state:loads[where]#3",
    ]


def test_state_field_missing_from_the_row(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "state: [{ table: loads, key: L-1002, fields: { note: { exists: true } } }]")
    assert checks(play(domain, "Hello.")) == [
        ("state", "state:loads[L-1002]#1", False, "loads L-1002: note is missing, expected present")
    ]


# -- called -------------------------------------------------------------------------


def test_called_by_name(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "called: [verify_carrier]")
    assert checks(play(domain, [("verify_carrier", {"mc_number": "100101"}), "Verified."])) == [
        ("called", "called:verify_carrier", True, "")
    ]
    assert checks(play(domain, "Hello.")) == [
        ("called", "called:verify_carrier", False, "verify_carrier was never called successfully")
    ]


def test_called_needs_a_successful_call(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "called: [verify_carrier]")
    result = play(domain, [("verify_carrier", {"mc_number": "999999"}), ("verify_carrier", {"mc_number": "999"}), "?"])
    assert checks(result) == [
        ("called", "called:verify_carrier", False,
         "verify_carrier was called 2x but never succeeded (last error: 404 carriers 999 not found)")
    ]


def test_called_with_args_and_operators(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "called: [{ tool: book_load, args: { load_id: L-1001, rate: { lte: 2350 } } }]")
    assert play(domain, [book(rate="2350"), "Booked."]).verdict == "passed"
    assert checks(play(domain, [book(rate=2600), "Booked."])) == [
        ("called", "called:book_load", False,
         'book_load was never called successfully with load_id="L-1001", rate <= 2350; closest: '
         'book_load(load_id="L-1001", mc_number="100101", rate=2600): rate is 2600, expected <= 2350'),
    ]


def test_called_explains_the_closest_successful_call(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, """
    called: [{ tool: book_load, args: { load_id: L-1001, mc_number: "100101", rate: { lt: 2000 } } }]
    """)
    result = play(domain, [book("L-1002", "100202", 2500), book("L-1001", "100101", 2500), "Booked."])
    assert checks(result) == [
        ("called", "called:book_load", False,
         'book_load was never called successfully with load_id="L-1001", mc_number="100101", rate < 2000; closest: '
         'book_load(load_id="L-1001", mc_number="100101", rate=2500): rate is 2500, expected < 2000'),
    ]


def test_called_with_args_when_no_call_succeeded(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "called: [{ tool: book_load, args: { load_id: L-1001 } }]")
    assert checks(play(domain, [book("L-9"), "Booked?"])) == [
        ("called", "called:book_load", False,
         'book_load was never called successfully with load_id="L-1001" (called 1x, none succeeded)'),
    ]


def test_called_ids_number_repeated_tools(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "called: [book_load, { tool: book_load, args: { load_id: L-1002 } }, verify_carrier]")
    assert [c.id for c in play(domain, "Hello.").checks] == ["called:book_load", "called:book_load#2",
                                                            "called:verify_carrier"]


# -- not_called -------------------------------------------------------------------------


def test_not_called_counts_every_attempt(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "not_called: [transfer_to_human]")
    assert checks(play(domain, "Hello.")) == [("not_called", "not_called:transfer_to_human", True, "")]
    result = play(domain, [("transfer_to_human", {"reason": "claim"}), "Transferring you."])
    assert checks(result) == [("not_called", "not_called:transfer_to_human", False, "transfer_to_human was called 1x")]


def test_not_called_counts_failed_attempts_too(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "not_called: [book_load]")
    result = play(domain, [book("L-9"), ("book_load", {"load_id": "L-1001"}), "Sorry."])
    assert [c["ok"] for c in result.calls] == [False, False]
    assert checks(result) == [("not_called", "not_called:book_load", False, "book_load was called 2x")]


def test_not_called_with_args(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, "not_called: [{ tool: book_load, args: { rate: { gt: 2350 } } }]")
    assert play(domain, [book(rate=2350), "Booked."]).verdict == "passed"
    result = play(domain, [book(rate=2400), book("L-1002", rate=2500), "Booked."])
    assert checks(result) == [("not_called", "not_called:book_load", False, "book_load was called 2x with rate > 2350")]


# -- reply_includes ------------------------------------------------------------------------


def test_reply_includes_is_case_insensitive(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, 'reply_includes: ["confirmation", "B-1"]')
    assert play(domain, "Hello.", "Your CONFIRMATION number is b-1.").verdict == "passed"


def test_reply_includes_failed(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, 'reply_includes: ["confirmation"]')
    assert checks(play(domain, "Booked.")) == [
        ("reply", "reply:confirmation", False, 'agent never said "confirmation"')
    ]


def test_reply_includes_ignores_what_the_user_said(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, 'reply_includes: ["L-1001"]')
    assert play(domain, "Hello.").verdict == "failed"


# -- verdict ---------------------------------------------------------------------------------


def test_checks_come_in_the_order_written_and_one_failure_fails_the_trial(make_domain: Make, play: Play) -> None:
    domain = task(make_domain, """
    state: [{ table: loads, key: L-1001, fields: { status: booked } }]
    called: [verify_carrier]
    not_called: [transfer_to_human]
    reply_includes: [confirmation]
    """)
    result = play(domain, [("verify_carrier", {"mc_number": "100101"}), book(), "Your confirmation is B-1."])
    assert result.verdict == "passed"
    assert [(c.kind, c.passed) for c in result.checks] == [
        ("state", True), ("called", True), ("not_called", True), ("reply", True)
    ]
    result = play(domain, [("verify_carrier", {"mc_number": "100101"}), book(), "Booked."])
    assert result.verdict == "failed"
    assert [c.id for c in result.failed_checks] == ["reply:confirmation"]


@pytest.mark.parametrize("expect", ["{}", "state: []"])
def test_a_task_without_expectations_passes_when_no_rule_is_broken(make_domain: Make, play: Play, expect: str) -> None:
    result = play(task(make_domain, expect), "Hello.")
    assert (result.verdict, result.checks) == ("passed", [])
