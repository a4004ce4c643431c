"""Richer conditions (docs/spec.md, "Conditions and operators"): `any_of` / `all_of` /
`not`, `length`, `each`, a record's field as an operator's value, `each:` on checks and
`require` rules; the rules that could never fire, refused at load; state ids and the
closest row of a failed state check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

import pytest_sandtable as st
from pytest_sandtable.domain.conditions import describe_clause, resolve_where, row_matches
from pytest_sandtable.domain.conditions import test as holds
from pytest_sandtable.domain.errors import DomainError
from pytest_sandtable.domain.loader import load_domain_text

Make = Callable[[str], st.Domain]
Play = Callable[..., st.TrialResult]

AIR = """\
version: 1
name: air
world:
  users:
    key: user_id
    rows:
      - { user_id: U-1, zip: "10001", balance: 100, tags: [], name: Ann }
      - { user_id: U-2, zip: "94105", balance: 5.5, tags: [], name: Bob }
  payments:
    key: payment_id
    rows:
      - { payment_id: P-1, user_id: U-1, kind: card }
      - { payment_id: P-2, user_id: U-1, kind: gift_card }
      - { payment_id: P-3, user_id: U-2, kind: card }
  flights:
    key: flight_number
    rows:
      - { flight_number: HAT001, status: available }
      - { flight_number: HAT002, status: cancelled }
tools:
  - name: book
    params:
      user_id: { type: string }
      flights: { type: array, items: { type: object, properties: { flight_number: { type: string } } } }
      payment_ids: { type: array, items: { type: string } }
      zip: { type: string }
      amount: { type: number }
      cabin: { type: string, enum: [economy, business] }
    checks:
      - require: { table: flights, key: $item.flight_number }
        each: flights
        error: 404
        message: "no flight $item.flight_number"
    ops:
      - update: { table: users, key: $user_id, append: { tags: booked } }
  - name: find_users
    params: { zip: { type: string } }
    ops:
      - list:
          table: users
          where: { any_of: [{ zip: $zip }, { name: { eq: { table: users, key: U-2, field: name } } }] }
invariants:
  - id: flights-available
    kind: require
    tool: book
    each: flights
    record: { table: flights, key: $item.flight_number }
    where: { status: available }
  - id: own-payments
    kind: require
    tool: book
    each: payment_ids
    record: { table: payments, key: $item }
    where: { user_id: $user_id }
  - id: zip-matches
    kind: never
    tool: book
    when: { zip: { ne: { table: users, key: $user_id, field: zip } } }
  - id: one-to-four-flights
    kind: never
    tool: book
    when: { any_of: [{ flights: { length: 0 } }, { flights: { length: { gt: 4 } } }] }
  - id: business-costs-500
    kind: never
    tool: book
    when: { cabin: business, not: { amount: { gte: 500 } } }
tasks:
  - id: t
    user: { opening: Hi. }
"""


def problems(text: str) -> list[str]:
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "air.yaml")
    return str(info.value).splitlines()


def edit(old: str, new: str) -> str:
    assert AIR.count(old) == 1, old
    return AIR.replace(old, new)


def book(flights: Sequence[str] = ("HAT001",), payments: Sequence[str] = ("P-1",),
         **kw: Any) -> tuple[str, dict[str, Any]]:
    args = {"user_id": "U-1", "flights": [{"flight_number": f} for f in flights], "payment_ids": list(payments),
            "zip": "10001", "amount": 600, "cabin": "business", **kw}
    return ("book", args)


@pytest.fixture
def air() -> st.Domain:
    return load_domain_text(AIR, "air.yaml")


def violations(result: st.TrialResult) -> list[tuple[str, str]]:
    return [(v.invariant, v.detail) for v in result.violations]


# --------------------------------------------------------------------------- evaluation


def test_combinators_length_and_each_evaluate_as_documented() -> None:
    row = {"status": "open", "tags": ["a", "b"], "name": "Ann", "legs": [{"n": 1}, {"n": 3}]}
    assert row_matches(row, {"any_of": [{"status": "booked"}, {"tags": {"length": 2}}]})
    assert not row_matches(row, {"all_of": [{"status": "open"}, {"name": {"length": {"gt": 3}}}]})
    assert row_matches(row, {"not": {"status": "booked"}})
    assert not row_matches(row, {"not": {"status": "open", "name": "Ann"}})
    assert row_matches(row, {"legs": {"each": {"n": {"gte": 1}}}})
    assert not row_matches(row, {"legs": {"each": {"n": {"lt": 3}}}})
    assert row_matches(row, {"tags": {"each": {"in": ["a", "b"]}}})
    assert holds([], {"each": {"gt": 0}})  # an empty array holds
    assert not holds(5, {"length": 1})  # a number has no length
    assert not holds(None, {"length": 0}, present=False)


def test_ieq_holds_for_a_text_equal_with_case_set_aside() -> None:
    assert holds("Ann@Example.com", {"ieq": "ann@example.COM"})
    assert not holds("Ann", {"ieq": "Anne"})
    assert not holds(5, {"ieq": "5"}) and not holds("5", {"ieq": 5})  # texts only, both sides
    assert not holds(None, {"ieq": "x"}, present=False)
    assert describe_clause({"name": {"ieq": "ann"}, "balance": {"gt": 2}}) == (
        'name equals (any case) "ann", balance > 2')


def test_a_declarative_list_and_a_rule_take_ieq(make_domain: Make, play: Play) -> None:
    body = AIR.split("\n", 2)[2].replace(
        "where: { any_of: [{ zip: $zip }, { name: { eq: { table: users, key: U-2, field: name } } }] }",
        "where: { name: { ieq: $zip } }").replace(
        "when: { zip: { ne: { table: users, key: $user_id, field: zip } } }",
        "when: { cabin: { ieq: BUSINESS } }")
    dom = make_domain(body)
    result = play(dom, [("find_users", {"zip": "bOB"}), book(cabin="business"), "Found."])
    assert [r["user_id"] for r in result.calls[0]["result"]] == ["U-2"]
    assert violations(result) == [("zip-matches", 'book called with cabin=business (never when cabin equals (any case) '
                                                  '"BUSINESS")')]


def test_an_argument_not_given_drops_its_part_of_a_combinator() -> None:
    where = {"any_of": [{"zip": "$zip"}, {"name": "$name"}], "not": {"status": "$status"}}
    assert resolve_where(where, {"zip": "10001"}) == {"any_of": [{"zip": "10001"}]}
    assert resolve_where(where, {}) == {}


def test_a_record_field_that_does_not_resolve_is_like_an_argument_not_given() -> None:
    rows = {("users", "U-1"): {"zip": "10001"}}
    ref = {"ne": {"table": "users", "key": "$user_id", "field": "zip"}}
    assert resolve_where({"zip": ref}, {"user_id": "U-1"}, lambda t, k: rows.get((t, k))) == {"zip": {"ne": "10001"}}
    assert resolve_where({"zip": ref}, {"user_id": "U-9"}, lambda t, k: rows.get((t, k))) == {}
    assert resolve_where({"zip": ref}, {"user_id": "U-1"}) == {}  # no world to read


# --------------------------------------------------------------------------- in a trial


def test_each_require_names_the_first_element_that_breaks_the_rule(air: st.Domain, play: Play) -> None:
    result = play(air, [book(["HAT001", "HAT002"], ["P-1", "P-3"]), "Booked."])
    assert result.calls[0]["ok"]
    assert violations(result) == [
        ("flights-available", 'book: flights[1]: flights HAT002 status is "cancelled", expected "available"'),
        ("own-payments", 'book: payment_ids[1]: payments P-3 user_id is "U-2", expected "U-1"'),
    ]
    assert violations(play(air, [book(["HAT001"], ["P-1", "P-2"]), "Booked."])) == []


def test_each_check_answers_with_the_element_it_failed_for(air: st.Domain, play: Play) -> None:
    result = play(air, [book(["HAT001", "HAT404"]), "Sorry."])
    assert result.calls[0]["error"] == {"code": 404, "message": "no flight HAT404"}
    assert result.diff == {"created": [], "changed": []}


def test_a_condition_compares_an_argument_with_a_records_field(air: st.Domain, play: Play) -> None:
    result = play(air, [book(zip="94105"), "Booked."])
    assert violations(result) == [("zip-matches", 'book called with zip=94105 (never when zip != "10001")')]
    assert violations(play(air, [book(zip="10001"), "Booked."])) == []
    # a user that does not exist: the record does not resolve and the rule does not apply
    unknown_user = play(air, [book(user_id="U-9", zip="1"), "Hm."])
    assert [v for v in unknown_user.violations if v.invariant == "zip-matches"] == []


def test_length_any_of_and_not_in_never_rules(air: st.Domain, play: Play) -> None:
    result = play(air, [book([]), book(["HAT001"], amount=100), book(["HAT001"], amount=100, cabin="economy"), "Ok."])
    assert violations(result) == [
        ("one-to-four-flights",
         "book called with flights=[] (never when any_of (flights length 0 or flights length > 4))"),
        ("business-costs-500",
         'book called with cabin=business, amount=100 (never when cabin="business", not (amount >= 500))'),
    ]
    assert [v.call for v in result.violations] == [0, 1]


def test_a_list_where_reads_a_record_field_and_any_of(air: st.Domain, play: Play) -> None:
    result = play(air, [("find_users", {"zip": "10001"}), "Found."])
    assert [r["user_id"] for r in result.calls[0]["result"]] == ["U-1", "U-2"]


def test_state_expectations_with_combinators_and_each(make_domain: Make, play: Play) -> None:
    body = AIR.split("\n", 2)[2].replace("user: { opening: Hi. }", """user: { opening: Hi. }
    expect:
      state:
        - { table: users, key: U-1, fields: { tags: { each: booked, length: { gte: 1 } } } }
        - { table: users, where: { any_of: [{ zip: "10001" }, { zip: "0" }], not: { tags: { length: 0 } } }, count: 1 }
""")
    domain = make_domain(body)
    assert play(domain, [book(), "Booked."]).verdict == "passed"
    assert [(c.id, c.detail) for c in play(domain, "Hello.").checks if not c.passed] == [
        ("state:users[U-1]#1", 'users U-1: tags is [], expected each "booked" and length >= 1'),
        ("state:users[where]#2",
         'users where any_of (zip="10001" or zip="0"), not (tags length 0): 0 rows, expected 1; '
         'closest: users U-1: tags length 0 holds, expected it not to'),
    ]


# --------------------------------------------------------------------------- validation


def test_a_record_reference_as_a_bare_condition_says_to_use_an_operator() -> None:
    text = edit("where: { status: available }", "where: { status: { table: users, key: U-1, field: zip } }")
    assert problems(text) == [
        "air.yaml:48:22: invariants[0].where.status: found a {table, key, field} record reference, expected a "
        "value or an operator object: to compare with a record's field, make it an operator's value, "
        "e.g. { eq: {table, key, field} }"
    ]


def test_record_references_in_conditions_are_checked() -> None:
    assert problems(edit("field: zip } } }", "field: zipp } } }")) == [
        "air.yaml:58:62: invariants[2].when.zip.ne.field: unknown field 'zipp' of table users; did you mean 'zip'?"
    ]
    assert problems(edit("key: $user_id, field: zip", "key: $user, field: zip")) == [
        "air.yaml:58:45: invariants[2].when.zip.ne.key: unknown param '$user' of tool book; did you mean '$user_id'?"
    ]


def test_combinators_are_checked_inside() -> None:
    assert problems(edit("{ flights: { length: 0 } }", "{ flight: { length: 0 } }")) == [
        "air.yaml:62:24: invariants[3].when.any_of[0].flight: unknown param 'flight' of tool book; "
        "did you mean 'flights'?"
    ]
    assert problems(edit("{ any_of: [{ flights: { length: 0 } }, { flights: { length: { gt: 4 } } }] }",
                         "{ any_of: { flights: { length: 0 } } }")) == [
        "air.yaml:62:21: invariants[3].when.any_of: found an object, expected array"
    ]


def test_item_outside_each_and_each_on_a_non_array() -> None:
    assert problems(edit("        each: flights\n", "")) == [
        "air.yaml:30:41: tools[0].checks[0].require.key: '$item' is the element of `each`, and there is no "
        "`each` here; add each: <an array param> to the check or require rule",
        "air.yaml:32:18: tools[0].checks[0].message: '$item' is the element of `each`, and there is no "
        "`each` here; add each: <an array param> to the check or require rule",
    ]
    assert problems(edit("    each: payment_ids\n", "    each: zip\n")) == [
        "air.yaml:52:11: invariants[1].each: 'zip' is a param of type string; `each` takes an array param, "
        "whose elements it checks one by one"
    ]


# --------------------------------------------------------------------------- rules that can never fire


def test_a_whole_array_as_a_record_key_is_refused() -> None:
    assert problems(edit("key: $item }\n", "key: $payment_ids }\n")) == [
        "air.yaml:53:37: invariants[1].record.key: '$payment_ids' is a param of type array, and a key is one "
        "value, so no record is ever found; write each: payment_ids and key: $item (or $item.<field>)"
    ]


@pytest.mark.parametrize(("arg", "why"), [
    ("flights", "'flights' is a param of type array, never a number, so a limit on it never fires"),
    ("cabin", "'cabin' is a param whose enum has no number, so a limit on it never fires"),
])
def test_a_limit_on_a_param_that_is_never_a_number_is_refused(arg: str, why: str) -> None:
    rule = f"  - {{ id: cap, kind: limit, tool: book, arg: {arg}, lte: 4 }}\n"
    text = AIR.replace("invariants:\n", "invariants:\n" + rule)
    assert problems(text) == [f"air.yaml:{AIR.splitlines().index('invariants:') + 2}:46: invariants[0].arg: {why}; "
                              "bound a number or integer param"]


def test_a_limit_bound_from_a_param_that_is_never_a_number_is_refused() -> None:
    rule = "  - { id: cap, kind: limit, tool: book, arg: amount, lte: $cabin }\n"
    text = AIR.replace("invariants:\n", "invariants:\n" + rule)
    assert problems(text) == [
        "air.yaml:43:59: invariants[0].lte: 'cabin' is a param whose enum has no number, so the bound never "
        "applies; bound a number or integer param"
    ]


def test_never_conditions_no_argument_can_meet_are_refused() -> None:
    assert problems(edit("when: { cabin: business,", "when: { cabin: first,")) == [
        "air.yaml:66:20: invariants[4].when.cabin: found 'first', which param 'cabin' never takes: "
        "expected one of 'economy', 'business'"
    ]
    assert problems(edit("{ amount: { gte: 500 } }", "{ amount: { contains: 5 } }")) == [
        "air.yaml:66:47: invariants[4].when.not.amount.contains: `contains` never holds for param 'amount' of "
        "type number: it applies to strings and arrays, so the condition can never be met"
    ]
    assert problems(edit("{ flights: { length: 0 } }", "{ amount: { length: 0 } }")) == [
        "air.yaml:62:34: invariants[3].when.any_of[0].amount.length: `length` never holds for param 'amount' "
        "of type number: it applies to strings, arrays and objects, so the condition can never be met"
    ]
    assert problems(edit("{ amount: { gte: 500 } }", "{ amount: lots }")) == [
        "air.yaml:66:45: invariants[4].when.not.amount: found string 'lots', which param 'amount' of type "
        "number never is; the condition can never be met"
    ]
    assert problems(edit("{ amount: { gte: 500 } }", "{ amount: { ieq: five } }")) == [
        "air.yaml:66:47: invariants[4].when.not.amount.ieq: `ieq` never holds for param 'amount' of "
        "type number: it applies to strings, so the condition can never be met"
    ]
    assert problems(edit("{ flights: { length: 0 } }", "{ zip: { each: 1 } }")) == [
        "air.yaml:62:31: invariants[3].when.any_of[0].zip.each: `each` never holds for param 'zip' of type "
        "string: it applies to arrays, so the condition can never be met"
    ]


# --------------------------------------------------------------------------- state ids and the closest row


STATE = """
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1, status: open, rate: 1900, lane: ATL-DAL }
      - { load_id: L-2, status: open, rate: 2100, lane: ATL-HOU }
tools:
  - name: book
    params: { load_id: { type: string } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
tasks:
  - id: t
    user: { opening: Hi. }
    expect:
      state:
        - { id: booked-load, table: loads, key: L-2, fields: { status: booked, rate: { lte: 2000 } } }
        - { id: one-booked, table: loads, where: { status: booked, lane: ATL-HOU, rate: 2100 }, count: 1 }
        - { table: loads, where: { status: cancelled } }
"""


def test_a_state_id_names_the_check_and_a_failed_check_shows_what_differs(make_domain: Make, play: Play) -> None:
    result = play(make_domain(STATE), [("book", {"load_id": "L-1"}), "Booked."])
    assert [(c.id, c.passed, c.detail) for c in result.checks] == [
        ("state:booked-load", False, 'loads L-2: status is "open", expected "booked"; rate is 2100, expected <= 2000'),
        ("state:one-booked", False, 'loads where status="booked", lane="ATL-HOU", rate=2100: 0 rows, expected 1; '
                                    'closest: loads L-2: status is "open", expected "booked"'),
        ("state:loads[where]#3", False, 'loads where status="cancelled": 0 rows, expected at least 1; '
                                        'closest: loads L-1: status is "booked", expected "cancelled"'),
    ]


def test_the_closest_row_clips_a_long_value(make_domain: Make, play: Play) -> None:
    body = STATE.replace("lane: ATL-HOU }", f"lane: {'X' * 300} }}")
    detail = next(c.detail for c in play(make_domain(body), "Hello.").checks if c.id == "state:one-booked")
    assert detail.endswith('lane is "' + "X" * 79 + '... (302 characters), expected "ATL-HOU"')


def test_state_ids_are_unique_within_a_task(make_domain: Make) -> None:
    with pytest.raises(DomainError) as info:
        make_domain(STATE.replace("id: one-booked", "id: booked-load"))
    assert str(info.value).split(": ", 1)[1] == (
        "tasks[0].expect.state[1].id: duplicate state id 'booked-load' in this task (first at line 19)"
    )


def test_a_failing_state_check_reads_in_the_pytest_failure(pytester: pytest.Pytester) -> None:
    pytester.makefile(".sandtable.yaml", d="version: 1\nname: d\n" + STATE.lstrip("\n"))
    result = pytester.runpytest("--sandtable-agent=reference", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*state:booked-load*loads L-2: status is \"open\", expected \"booked\"; rate is 2100, expected <= 2000*",
    ])


def test_call_matchers_take_combinators_and_read_the_final_world(make_domain: Make, play: Play) -> None:
    body = AIR.split("\n", 2)[2].replace("user: { opening: Hi. }", """user: { opening: Hi. }
    expect:
      called:
        - { tool: book, args: { any_of: [{ cabin: economy }, { amount: { gte: 500 } }] } }
      not_called:
        - { tool: book, args: { zip: { ne: { table: users, key: U-1, field: zip } } } }
""")
    domain = make_domain(body)
    assert play(domain, [book(), "Booked."]).verdict == "passed"
    failed = play(domain, [book(amount=100, zip="94105"), "Booked."])
    assert [(c.id, c.detail) for c in failed.checks if not c.passed and c.kind != "invariant"] == [
        ("called:book", 'book was never called successfully with any_of (cabin="economy" or amount >= 500); '
                        'closest: book(user_id="U-1", flights=[{"flight_number": "HAT001"}], payment_ids=["P-1"], '
                        'zip="94105", amount=100, cabin="business"): none of any_of holds: cabin is "business", '
                        'expected "economy"; or amount is 100, expected >= 500'),
        ("not_called:book", 'book was called 1x with zip != "10001"'),
    ]


def test_an_expectation_has_no_call_for_a_record_key() -> None:
    text = AIR.replace("user: { opening: Hi. }", """user: { opening: Hi. }
    expect:
      not_called: [{ tool: book, args: { zip: { ne: { table: users, key: $user_id, field: zip } } } }]""")
    assert problems(text) == [
        "air.yaml:71:74: tasks[0].expect.not_called[0].args.zip.ne.key: '$user_id' refers to a call argument, "
        "but an expectation has none; write $$ for a literal $"
    ]
