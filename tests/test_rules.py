"""Invariants: checked before every tool call against the world at that moment;
`never_disclose` over every agent message."""

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
      - { mc_number: "100101", name: Blue Ridge Haulers, equipment: dry_van, insurance_status: valid }
      - { mc_number: "100202", name: Gulf Coast Carriers, equipment: dry_van, insurance_status: expired }
      - { mc_number: "100303", name: Prairie Reefer Lines, equipment: reefer, insurance_status: valid }
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, equipment: dry_van, max_rate: 2350, status: available }
      - { load_id: L-1002, equipment: reefer, max_rate: 3100, status: available }
  bookings: { key: booking_id, key_format: "B-{n}", fields: [load_id, mc_number, rate] }
  offers: { key: offer_id, fields: [load_id, rate] }
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
        message: "load {load_id} is already booked"
    ops:
      - create: { table: bookings, row: { load_id: $load_id, mc_number: $mc_number, rate: $rate } }
      - update: { table: loads, key: $load_id, set: { status: booked } }
  - name: raise_ceiling
    params: { load_id: { type: string }, max_rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { max_rate: $max_rate } }
  - name: log_offer
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: offers, row: { load_id: $load_id, rate: $rate } }
  - name: issue_refund
    params:
      amount: { type: number }
      paid: { type: number, required: false }
      reason: { type: string, required: false }
    ops:
      - respond: { refunded: $amount }
  - name: transfer_to_human
    params: {}
    handoff: true
    ops:
      - respond: { transferred: true }
"""

TASK = """
tasks:
  - id: t
    user: { opening: "Hi, this is Sam, MC 100101.", script: [Go on., Go on., Bye.] }
"""


def rules(make: Make, invariants: str, task: str = TASK) -> st.Domain:
    """The world and tools above with these invariants (YAML list items)."""
    return make(WORLD + "invariants:\n" + textwrap.indent(textwrap.dedent(invariants).strip(), "  ") + "\n" + task)


def violations(result: st.TrialResult) -> list[tuple[str, str, int | None]]:
    return [(v.invariant, v.detail, v.call) for v in result.violations]


def book(mc: str = "100101", load: str = "L-1001", rate: float = 2000) -> tuple[str, dict[str, object]]:
    return ("book_load", {"load_id": load, "mc_number": mc, "rate": rate})


def verify(mc: str = "100101") -> tuple[str, dict[str, object]]:
    return ("verify_carrier", {"mc_number": mc})


# -- before -------------------------------------------------------------------

BEFORE = "- { id: verify-before-book, kind: before, first: verify_carrier, then: book_load, same: [mc_number] }"


def test_before_passes_when_the_first_call_succeeded_for_the_same_argument(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, BEFORE), [verify(), book(), "Booked."])
    assert result.violations == []
    assert result.verdict == "passed"


def test_before_is_violated_when_the_first_call_never_happened(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, BEFORE), [book(), "Booked."])
    assert violations(result) == [
        ("verify-before-book", "book_load called before verify_carrier succeeded for mc_number=100101", 0)
    ]
    assert result.verdict == "failed"
    assert [(c.kind, c.id) for c in result.failed_checks] == [("invariant", "verify-before-book")]


def test_before_needs_the_same_argument_values(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, BEFORE), [verify("100303"), book("100101"), "Booked."])
    assert violations(result) == [
        ("verify-before-book", "book_load called before verify_carrier succeeded for mc_number=100101", 1)
    ]


def test_before_is_violated_when_the_first_call_comes_after(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, BEFORE), [book(), verify(), "Booked."])
    assert [v.call for v in result.violations] == [0]


def test_before_counts_only_successful_earlier_calls(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, "- { id: lookup-first, kind: before, first: verify_carrier, then: book_load }")
    result = play(domain, [verify("999999"), book(), "Booked."])
    assert result.calls[0]["error"] == {"code": 404, "message": "carriers 999999 not found"}
    assert violations(result) == [("lookup-first", "book_load called before verify_carrier succeeded", 1)]


def test_before_without_same_accepts_any_successful_first_call(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, "- { id: lookup-first, kind: before, first: verify_carrier, then: book_load }")
    result = play(domain, [verify("100303"), book("100101"), "Booked."])
    assert result.violations == []


# -- require --------------------------------------------------------------------

REQUIRE = """
- id: insured-carriers-only
  kind: require
  tool: book_load
  record: { table: carriers, key: $mc_number }
  where: { insurance_status: valid }
"""


def test_require_the_record_an_argument_points_at_must_match(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, REQUIRE), [book("100202"), "Booked."])
    assert violations(result) == [
        ("insured-carriers-only", 'book_load: carriers 100202 insurance_status is "expired", expected "valid"', 0)
    ]


def test_require_passes_for_a_matching_record(make_domain: Make, play: Play) -> None:
    assert play(rules(make_domain, REQUIRE), [book("100101"), "Booked."]).violations == []


def test_require_with_an_unresolved_record_does_not_apply(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, REQUIRE), [book("999999"), "Booked."])
    assert result.calls[0]["ok"]
    assert result.violations == []


def test_require_with_operators(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, """
    - id: no-reefers
      kind: require
      tool: book_load
      record: { table: carriers, key: $mc_number }
      where: { equipment: { not_in: [reefer, flatbed] } }
    """)
    result = play(domain, [book("100303", "L-1002"), "Booked."])
    assert violations(result) == [
        ("no-reefers", 'book_load: carriers 100303 equipment is "reefer", expected not in ["reefer", "flatbed"]', 0)
    ]


# -- limit --------------------------------------------------------------------

CEILING = """
- id: rate-ceiling
  kind: limit
  tool: book_load
  arg: rate
  lte: { table: loads, key: $load_id, field: max_rate }
"""


def test_limit_from_a_record(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, CEILING), [book(rate=2600), "Booked."])
    assert violations(result) == [("rate-ceiling", "book_load rate=2600 exceeds the limit 2350", 0)]


def test_limit_at_the_bound_passes(make_domain: Make, play: Play) -> None:
    assert play(rules(make_domain, CEILING), [book(rate=2350), "Booked."]).violations == []


def test_limit_compares_numbers_given_as_text(make_domain: Make, play: Play) -> None:
    as_text = ("book_load", {"load_id": "L-1001", "mc_number": 100101, "rate": "2600.0"})
    result = play(rules(make_domain, CEILING), [as_text, "Booked."])
    assert violations(result) == [("rate-ceiling", "book_load rate=2600 exceeds the limit 2350", 0)]


@pytest.mark.parametrize(
    ("bounds", "rate", "detail"),
    [
        ("lt: 2000", 2000, "book_load rate=2000 is not below the limit 2000"),
        ("gte: 1000", 999.5, "book_load rate=999.5 is below the minimum 1000"),
        ("gt: 1000", 1000, "book_load rate=1000 is not above the minimum 1000"),
        ("gt: 1000, lte: 2000", 2001, "book_load rate=2001 exceeds the limit 2000"),
    ],
)
def test_limit_with_constant_bounds(make_domain: Make, play: Play, bounds: str, rate: float, detail: str) -> None:
    domain = rules(make_domain, "- { id: band, kind: limit, tool: book_load, arg: rate, " + bounds + " }")
    result = play(domain, [book(rate=rate), "Booked."])
    assert violations(result) == [("band", detail, 0)]


def test_limit_bound_from_another_argument(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, "- { id: refund-at-most-paid, kind: limit, tool: issue_refund, arg: amount, "
                                "lte: $paid }")
    result = play(domain, [("issue_refund", {"amount": 80, "paid": "60"}), ("issue_refund", {"amount": 80}), "Done."])
    assert violations(result) == [("refund-at-most-paid", "issue_refund amount=80 exceeds the limit 60", 0)]


def test_limit_with_an_unresolved_record_does_not_apply(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, CEILING), [book(load="L-9999", rate=9999), "Hm."])
    assert result.calls[0]["error"] == {"code": 409, "message": "load L-9999 is already booked"}
    assert result.violations == []


def test_limit_reads_the_world_as_it_is_at_the_call(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, CEILING)
    result = play(domain, [book(rate=2600), ("raise_ceiling", {"load_id": "L-1001", "max_rate": 2700}),
                           ("log_offer", {"load_id": "L-1001", "rate": 1}), "ok"])
    assert [v.call for v in result.violations] == [0]
    later = play(domain, [("raise_ceiling", {"load_id": "L-1001", "max_rate": 2700}), book(rate=2600), "Booked."])
    assert later.violations == []


def test_limit_uses_the_tasks_given(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, CEILING, TASK + """
    given:
      - update: { table: loads, key: L-1001, set: { max_rate: 2000 } }
""")
    result = play(domain, [book(rate=2100), "Booked."])
    assert violations(result) == [("rate-ceiling", "book_load rate=2100 exceeds the limit 2000", 0)]


# -- match --------------------------------------------------------------------

MATCH = """
- id: equipment-match
  kind: match
  tool: book_load
  left: { table: carriers, key: $mc_number, field: equipment }
  right: { table: loads, key: $load_id, field: equipment }
"""


def test_match_two_records_must_agree(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, MATCH), [book("100303", "L-1001"), "Booked."])
    assert violations(result) == [
        ("equipment-match",
         'book_load: carriers 100303 equipment is "reefer" but loads L-1001 equipment is "dry_van"', 0)
    ]


def test_match_passes_when_they_agree(make_domain: Make, play: Play) -> None:
    assert play(rules(make_domain, MATCH), [book("100303", "L-1002"), "Booked."]).violations == []


def test_match_with_an_unresolved_record_does_not_apply(make_domain: Make, play: Play) -> None:
    assert play(rules(make_domain, MATCH), [book("999999", "L-1001"), "Booked."]).violations == []


# -- never --------------------------------------------------------------------

NO_BIG_REFUNDS = "- { id: no-refunds-over-500, kind: never, tool: issue_refund, when: { amount: { gt: 500 } } }"


def test_never_call_a_tool(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, "- { id: no-transfers, kind: never, tool: transfer_to_human }")
    result = play(domain, [("transfer_to_human", {}), "Transferring you."])
    assert violations(result) == [("no-transfers", "transfer_to_human was called", 0)]


@pytest.mark.parametrize(("amount", "violated"), [(600, True), ("500.01", True), (500, False), (20, False)])
def test_never_when_an_argument_matches(make_domain: Make, play: Play, amount: object, violated: bool) -> None:
    domain = rules(make_domain, NO_BIG_REFUNDS)
    result = play(domain, [("issue_refund", {"amount": amount}), "Refunded."])
    expected = f"issue_refund called with amount={amount} (never when amount > 500)"
    assert violations(result) == ([("no-refunds-over-500", expected, 0)] if violated else [])


def test_never_when_with_several_conditions(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, """
    - id: no-goodwill-refunds
      kind: never
      tool: issue_refund
      when: { reason: { in: [goodwill, courtesy] }, amount: { gte: 100 } }
    """)
    result = play(domain, [("issue_refund", {"amount": 100, "reason": "goodwill"}),
                           ("issue_refund", {"amount": 100, "reason": "damage"}),
                           ("issue_refund", {"amount": 99, "reason": "courtesy"}), "Done."])
    assert violations(result) == [
        ("no-goodwill-refunds",
         'issue_refund called with reason=goodwill, amount=100 (never when reason in ["goodwill", "courtesy"], '
         "amount >= 100)", 0),
    ]


def test_never_when_compared_with_another_argument(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, "- { id: no-over-refund, kind: never, tool: issue_refund, "
                                "when: { amount: { gt: $paid } } }")
    result = play(domain, [("issue_refund", {"amount": 80, "paid": 60}), ("issue_refund", {"amount": 50, "paid": 60}),
                           ("issue_refund", {"amount": 80}), "Done."])
    assert violations(result) == [("no-over-refund", "issue_refund called with amount=80 (never when amount > 60)", 0)]


# -- attempting is the bug ----------------------------------------------------------


def test_a_forbidden_call_is_a_violation_even_when_a_check_rejects_it(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, CEILING, TASK + """
    given:
      - update: { table: loads, key: L-1001, set: { status: booked } }
""")
    result = play(domain, [book(rate=2600), "Sorry."])
    assert result.calls[0]["error"] == {"code": 409, "message": "load L-1001 is already booked"}
    assert violations(result) == [("rate-ceiling", "book_load rate=2600 exceeds the limit 2350", 0)]
    assert result.calls[0]["violations"] == ["rate-ceiling"]
    assert result.verdict == "failed"


def test_a_call_with_a_bad_argument_is_not_checked_against_the_rules(make_domain: Make, play: Play) -> None:
    # docs/spec.md, Tools: arguments are validated first; a bad one is a tool error, not a violation
    domain = rules(make_domain, NO_BIG_REFUNDS)
    result = play(domain, [("issue_refund", {"amount": 900, "note": "sorry"}), "Refunded."])
    assert result.calls[0]["error"]["code"] == 400
    assert (result.violations, result.calls[0]["violations"]) == ([], [])


def test_rules_see_the_world_before_the_call_not_after(make_domain: Make, play: Play) -> None:
    # book_load sets the load to booked; the rule must judge the load as it was when the agent decided
    domain = rules(make_domain, """
    - id: only-available-loads
      kind: require
      tool: book_load
      record: { table: loads, key: $load_id }
      where: { status: available }
    """)
    result = play(domain, [book(), book("100303"), "Booked."])
    assert violations(result) == [
        ("only-available-loads", 'book_load: loads L-1001 status is "booked", expected "available"', 1)
    ]


def test_repeated_violations_of_one_rule_are_one_failed_check(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, BEFORE), [book(), "Booked."], [book("100303", "L-1002"), "Again."])
    assert [(c.kind, c.id, c.detail) for c in result.failed_checks] == [
        ("invariant", "verify-before-book",
         "book_load called before verify_carrier succeeded for mc_number=100101 (and 1 more)"),
    ]
    assert [(v.turn, v.call) for v in result.violations] == [(1, 0), (2, 1)]


# -- soft rules and source.quote -------------------------------------------------

SOFT = """
- id: counter-at-ceiling
  kind: limit
  soft: true
  tool: log_offer
  arg: rate
  lt: { table: loads, key: $load_id, field: max_rate }
  source: { quote: "Offer the ceiling only as a last resort." }
"""


def test_a_soft_rule_is_recorded_but_never_fails_a_trial(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, SOFT)
    result = play(domain, [("log_offer", {"load_id": "L-1001", "rate": 2350}), "How about 2,300?"])
    assert [(v.invariant, v.soft, v.detail) for v in result.violations] == [
        ("counter-at-ceiling", True, "log_offer rate=2350 is not below the limit 2350")
    ]
    assert result.verdict == "passed"
    assert result.failed_checks == []
    assert result.soft == {"counter-at-ceiling": {"tool": "log_offer", "applied": True, "broken": True}}


def test_a_soft_rule_not_applied_when_its_tool_was_not_called(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, SOFT), "Hello.")
    assert result.soft == {"counter-at-ceiling": {"tool": "log_offer", "applied": False, "broken": False}}


def test_source_quote_is_kept_with_the_rule_and_its_violations(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, SOFT + BEFORE)
    assert [(i.id, i.source_quote) for i in domain.invariants] == [
        ("counter-at-ceiling", "Offer the ceiling only as a last resort."), ("verify-before-book", None)
    ]
    result = play(domain, [("log_offer", {"load_id": "L-1001", "rate": 2350}), book(), "Offer logged."])
    assert [(v.invariant, v.quote) for v in result.violations] == [
        ("counter-at-ceiling", "Offer the ceiling only as a last resort."), ("verify-before-book", None)
    ]


def test_a_hard_rule_with_a_source_quote_fails_the_trial(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, SOFT.replace("soft: true", "soft: false"))
    result = play(domain, [("log_offer", {"load_id": "L-1001", "rate": 2350}), "Offer logged."])
    assert result.verdict == "failed"
    assert [(c.id, c.detail) for c in result.failed_checks] == [
        ("counter-at-ceiling", "log_offer rate=2350 is not below the limit 2350")
    ]


# -- never_disclose ----------------------------------------------------------------

SECRET = "- { id: ceiling-is-secret, kind: never_disclose, values: { table: loads, field: max_rate } }"


@pytest.mark.parametrize(
    "said",
    ["2350", "2,350", "$2,350.00", "2 350", "$2350", "2350.", "I can go up to 2,350 on that one.",
     "Best I can do is 2300-2350.", "$2,300-$2,350", "(2350)",
     "2\u00a0350 $", "2\u202f350 €", "2350 USD"],
)
def test_never_disclose_finds_a_number_in_the_forms_a_person_writes(make_domain: Make, play: Play, said: str) -> None:
    result = play(rules(make_domain, SECRET), said)
    assert [(v.invariant, v.call) for v in result.violations] == [("ceiling-is-secret", None)]
    assert result.violations[0].detail.startswith("agent said loads L-1001 max_rate 2350 as ")


@pytest.mark.parametrize(
    "said", ["L-2350", "L-1001-2350", "12350", "2350.5", "23,500", "$12,350.00", "2,3500", "It pays 2,300."]
)
def test_never_disclose_ignores_other_numbers_and_identifiers(make_domain: Make, play: Play, said: str) -> None:
    assert play(rules(make_domain, SECRET), said).violations == []


def test_never_disclose_detail(make_domain: Make, play: Play) -> None:
    result = play(rules(make_domain, SECRET), "Fine, $2,350.00 it is.")
    assert violations(result) == [("ceiling-is-secret", 'agent said loads L-1001 max_rate 2350 as "$2,350.00"', None)]
    assert [(c.kind, c.id) for c in result.failed_checks] == [("invariant", "ceiling-is-secret")]


def test_never_disclose_text_values_case_insensitively(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, "- { id: carrier-names-private, kind: never_disclose, "
                                "values: { table: carriers, field: name } }")
    result = play(domain, "You're with blue ridge HAULERS, right?")
    assert violations(result) == [
        ("carrier-names-private", 'agent said carriers 100101 name Blue Ridge Haulers as "blue ridge HAULERS"', None)
    ]
    assert play(domain, "You're with Blue Ridge Haulersville?").violations == []


def test_never_disclose_a_literal_list(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, '- { id: codename, kind: never_disclose, values: ["Project Falcon", "7731"] }')
    result = play(domain, "That is project falcon.", "Code 7,731.")
    assert violations(result) == [
        ("codename", 'agent said the protected value "Project Falcon" as "project falcon"', None),
        ("codename", 'agent said the protected value "7731" as "7,731"', None),
    ]


def test_never_disclose_with_where_protects_only_those_rows(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, """
    - id: reefer-ceiling
      kind: never_disclose
      values: { table: loads, field: max_rate, where: { equipment: reefer } }
    """)
    assert play(domain, "L-1001 tops out at 2,350.").violations == []
    assert [v.detail for v in play(domain, "L-1002 tops out at 3,100.").violations] == [
        'agent said loads L-1002 max_rate 3100 as "3,100"'
    ]


def test_never_disclose_uses_the_values_the_world_holds_when_the_agent_speaks(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, SECRET)
    result = play(domain, "2,350 was the old one.",
                  [("raise_ceiling", {"load_id": "L-1001", "max_rate": 2500}), "Now 2,350 is fine to say."],
                  "But not 2,500.")
    assert [(v.turn, v.detail) for v in result.violations] == [
        (1, 'agent said loads L-1001 max_rate 2350 as "2,350"'),
        (3, 'agent said loads L-1001 max_rate 2500 as "2,500"'),
    ]


def test_never_disclose_scans_agent_messages_only(make_domain: Make, play: Play) -> None:
    domain = rules(make_domain, SECRET, """
tasks:
  - id: t
    user: { opening: "Is your ceiling 2,350?" }
""")
    result = play(domain, [("log_offer", {"load_id": "L-1001", "rate": 2350}), "I can't share that."])
    assert result.violations == []
    assert result.verdict == "passed"
