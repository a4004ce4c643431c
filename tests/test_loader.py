"""Loading a domain file: the dataclasses it becomes, and the exact problems users see."""

from __future__ import annotations

import hashlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from pytest_sandtable.__main__ import main
from pytest_sandtable.domain.errors import DomainError, Problem, format_path
from pytest_sandtable.domain.loader import load_domain, load_domain_text
from pytest_sandtable.domain.model import MISSING, CallMatcher, Check, Op, Pos, RefStep, StateExpectation

# The spec's example, with every table and tool it refers to declared.
DOMAIN = """\
version: 1
name: freight
description: Inbound carrier sales desk of a freight brokerage.
policy: |
  Verify every carrier before booking. Never book above a load's ceiling.
tags:
  booking: Carriers booking loads.
world:
  carriers:
    key: mc_number
    rows:
      - { mc_number: "100101", name: Blue Ridge Haulers, equipment: dry_van, insurance_status: valid }
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, origin: Atlanta GA, equipment: dry_van, max_rate: 2350, status: available }
  bookings:
    key: booking_id
    key_format: "B-{n}"
    fields: [load_id, mc_number, rate]
  offers:
    key: offer_id
tools:
  - name: verify_carrier
    description: Look up a carrier by MC number.
    params:
      mc_number: { type: string, description: The carrier's MC number. }
    ops:
      - get: { table: carriers, key: $mc_number }
  - name: search_loads
    params:
      origin: { type: string }
      equipment: { type: string, required: false, enum: [dry_van, reefer] }
    ops:
      - list: { table: loads, where: { origin: $origin, equipment: $equipment }, order_by: -max_rate, limit: 5 }
  - name: book_load
    params:
      load_id: { type: string }
      mc_number: { type: string }
      rate: { type: number }
    checks:
      - { require: { table: loads, key: $load_id }, error: 404, message: "no load {load_id}" }
      - { forbid: { table: bookings, where: { load_id: $load_id } }, error: 409, message: "$load_id is booked" }
    ops:
      - create: { table: bookings, row: { load_id: $load_id, mc_number: $mc_number, rate: $rate } }
      - update: { table: loads, key: $load_id, set: { status: booked } }
  - name: log_offer
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: offers, row: { load_id: $load_id, rate: $rate } }
  - name: issue_refund
    params: { booking_id: { type: string }, amount: { type: number } }
    ops:
      - respond: { refunded: $amount, note: "costs $$5" }
  - name: transfer_to_human
    params: { reason: { type: string } }
    handoff: true
    ops:
      - respond: { transferred: true }
invariants:
  - { id: verify-before-book, kind: before, first: verify_carrier, then: book_load, same: [mc_number] }
  - id: insured-carriers-only
    kind: require
    tool: book_load
    record: { table: carriers, key: $mc_number }
    where: { insurance_status: valid }
  - { id: rate-ceiling, kind: limit, tool: book_load, arg: rate, lte: { table: loads, key: $load_id, field: max_rate } }
  - id: equipment-match
    kind: match
    tool: book_load
    left: { table: carriers, key: $mc_number, field: equipment }
    right: { table: loads, key: $load_id, field: equipment }
  - { id: no-refunds-over-500, kind: never, tool: issue_refund, when: { amount: { gt: 500 } } }
  - { id: ceiling-is-secret, kind: never_disclose, values: { table: loads, field: max_rate } }
  - id: counter-at-ceiling
    kind: limit
    soft: true
    tool: log_offer
    arg: rate
    lt: { table: loads, key: $load_id, field: max_rate }
    source: { quote: "Offer the ceiling only as a last resort." }
tasks:
  - id: book-happy-path
    description: A verified, insured carrier books L-1001.
    tags: [booking]
    critical: true
    max_turns: 12
    given:
      - update: { table: loads, key: L-1001, set: { max_rate: 2400 } }
    user:
      persona: Sam, a dispatcher at Blue Ridge Haulers (MC 100101).
      instructions: You want L-1001 at 2,000 or more.
      opening: "Hi, this is Sam, MC 100101, calling about L-1001."
      script: ["Can you do 2,100?", "Deal. Please book it."]
    expect:
      state:
        - { table: bookings, where: { load_id: L-1001, mc_number: "100101" }, count: 1 }
        - { table: loads, key: L-1001, fields: { status: booked } }
        - { table: bookings, count: 1 }
      called: [verify_carrier, { tool: book_load, args: { load_id: L-1001, rate: { lte: 2350 } } }]
      not_called: [transfer_to_human]
      reply_includes: ["confirmation"]
    reference:
      - call: verify_carrier
        args: { mc_number: "100101" }
      - say: "You're verified."
      - call: book_load
        args: { load_id: L-1001, mc_number: "100101", rate: "2100" }
      - say: "Booked. Your confirmation is B-1."
  - id: just-asking
    user: { instructions: Ask what loads leave Atlanta. }
"""


def problems(text: str) -> list[str]:
    """The problems a user sees for a domain text, one string per line."""
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "sandtable.yaml")
    return str(info.value).splitlines()


def edit(old: str, new: str) -> str:
    """DOMAIN with one exact piece of text replaced."""
    assert DOMAIN.count(old) == 1, old
    return DOMAIN.replace(old, new)


# --------------------------------------------------------------------------- a valid domain


def test_valid_domain_loads_into_dataclasses() -> None:
    d = load_domain_text(DOMAIN, "sandtable.yaml")

    assert (d.name, d.version, d.path) == ("freight", 1, None)
    assert d.sha256 == hashlib.sha256(DOMAIN.encode()).hexdigest()
    assert d.tags == {"booking": "Carriers booking loads."}
    assert d.system_prompt().startswith("Inbound carrier sales desk")

    assert list(d.tables) == ["carriers", "loads", "bookings", "offers"]
    assert d.tables["loads"].rows[0]["max_rate"] == 2350
    assert d.tables["bookings"].key_format == "B-{n}"
    assert d.tables["bookings"].fields == {"booking_id", "load_id", "mc_number", "rate"}
    # offers has no rows and no `fields:`: its fields come from the create in log_offer
    assert d.tables["offers"].fields == {"offer_id", "load_id", "rate"}
    assert d.tables["loads"].fields == {"load_id", "origin", "equipment", "max_rate", "status"}

    assert list(d.tools) == [
        "verify_carrier",
        "search_loads",
        "book_load",
        "log_offer",
        "issue_refund",
        "transfer_to_human",
    ]
    verify = d.tools["verify_carrier"]
    assert verify.pos == Pos(24, 5)
    assert verify.params["mc_number"].schema == {"type": "string", "description": "The carrier's MC number."}
    search = d.tools["search_loads"]
    equipment = search.params["equipment"]
    assert (equipment.required, equipment.default, equipment.enum) == (False, MISSING, ["dry_van", "reefer"])
    assert search.input_schema() == {
        "type": "object",
        "properties": {"origin": {"type": "string"}, "equipment": {"type": "string", "enum": ["dry_van", "reefer"]}},
        "additionalProperties": False,
        "required": ["origin"],
    }
    assert search.ops == [
        Op(
            "list",
            {
                "table": "loads",
                "where": {"origin": "$origin", "equipment": "$equipment"},
                "order_by": "-max_rate",
                "limit": 5,
            },
        )
    ]
    book = d.tools["book_load"]
    assert book.checks == [
        Check("require", "loads", key="$load_id", error=404, message="no load {load_id}"),
        Check("forbid", "bookings", where={"load_id": "$load_id"}, error=409, message="$load_id is booked"),
    ]
    assert [op.kind for op in book.ops] == ["create", "update"]
    assert d.tools["issue_refund"].ops == [Op("respond", {"value": {"refunded": "$amount", "note": "costs $$5"}})]
    assert d.tools["transfer_to_human"].handoff is True

    by_id = {inv.id: inv for inv in d.invariants}
    assert by_id["verify-before-book"].spec == {"first": "verify_carrier", "then": "book_load", "same": ["mc_number"]}
    assert by_id["verify-before-book"].tool == "book_load"
    assert by_id["ceiling-is-secret"].tool is None
    assert by_id["no-refunds-over-500"].spec == {"tool": "issue_refund", "when": {"amount": {"gt": 500}}}
    soft = by_id["counter-at-ceiling"]
    assert (soft.soft, soft.source_quote, soft.kind) == (True, "Offer the ceiling only as a last resort.", "limit")
    assert soft.spec == {
        "tool": "log_offer",
        "arg": "rate",
        "lt": {"table": "loads", "key": "$load_id", "field": "max_rate"},
    }

    task = d.task("book-happy-path")
    assert (task.critical, task.max_turns, task.tags) == (True, 12, ["booking"])
    assert task.given == [Op("update", {"table": "loads", "key": "L-1001", "set": {"max_rate": 2400}})]
    assert task.user.opening == "Hi, this is Sam, MC 100101, calling about L-1001."
    assert [(line.say, line.when, line.end) for line in task.user.script] == [
        ("Can you do 2,100?", None, False),
        ("Deal. Please book it.", None, False),
    ]
    assert (task.user.say_unknown, task.pending, task.expect_nothing) == (None, False, False)
    assert task.expect.state == [
        StateExpectation("bookings", where={"load_id": "L-1001", "mc_number": "100101"}, count=1, index=1),
        StateExpectation("loads", key="L-1001", fields={"status": "booked"}, index=1),
        StateExpectation("bookings", count=1, index=2),
    ]
    assert task.expect.called == [
        CallMatcher("verify_carrier"),
        CallMatcher("book_load", {"load_id": "L-1001", "rate": {"lte": 2350}}),
    ]
    assert task.expect.not_called == [CallMatcher("transfer_to_human")]
    assert task.expect.reply_includes == ["confirmation"]
    assert task.reference[:2] == [
        RefStep(call="verify_carrier", args={"mc_number": "100101"}),
        RefStep(say="You're verified."),
    ]

    plain = d.task("just-asking")
    assert (plain.max_turns, plain.critical, plain.tags, plain.given) == (20, False, [], [])
    assert plain.user.instructions == "Ask what loads leave Atlanta."
    assert plain.user.opening is None


def test_load_domain_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "sandtable.yaml"
    path.write_text(DOMAIN, encoding="utf-8")
    d = load_domain(path)
    assert d.path == str(path)
    assert d.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_yaml_1_2_scalars_dates_and_times_stay_strings() -> None:
    d = load_domain_text(
        edit("status: available }", "status: available, pickup: 10:30, ready: 2027-03-01, hazmat: no }"),
        "sandtable.yaml",
    )
    row = d.tables["loads"].rows[0]
    assert (row["pickup"], row["ready"], row["hazmat"]) == ("10:30", "2027-03-01", "no")


# --------------------------------------------------------------------------- schema problems


def test_unknown_key_with_did_you_mean() -> None:
    assert problems(edit("- get: { table: carriers", "- gett: { table: carriers")) == [
        "sandtable.yaml:29:9: tools[0].ops[0].gett: unknown key 'gett'; did you mean 'get'?"
    ]


def test_unknown_key_without_a_close_match_lists_the_allowed_keys() -> None:
    assert problems(DOMAIN + "faults: []\n") == [
        "sandtable.yaml:112:1: faults: unknown key 'faults'; expected one of: "
        "version, name, description, policy, tags, world, tools, invariants, judge, tasks, clock, user_world, ..."
    ]


def test_text_cut_at_a_comma_in_a_flow_mapping() -> None:
    assert problems(
        edit("{ type: number }\n    checks", "{ type: number, description: Rate, in dollars. }\n    checks")
    ) == [
        "sandtable.yaml:40:48: tools[2].params.rate[\"in dollars.\"]: unknown key 'in dollars.'; "
        "inside { }, a comma ends a value; put text that contains commas in quotes"
    ]


def test_wrong_param_type_name() -> None:
    assert problems(edit("rate: { type: number }\n    checks", "rate: { type: numbr }\n    checks")) == [
        "sandtable.yaml:40:21: tools[2].params.rate.type: found 'numbr', expected one of "
        "string, number, integer, boolean, object, array; did you mean 'number'?"
    ]


def test_wrong_type() -> None:
    assert problems(edit("max_turns: 12", "max_turns: many")) == [
        "sandtable.yaml:87:16: tasks[0].max_turns: found string 'many', expected integer"
    ]


def test_a_record_key_is_one_value() -> None:
    assert problems(edit("- get: { table: carriers, key: $mc_number }", "- get: { table: carriers, key: [1, 2] }")) == [
        "sandtable.yaml:29:38: tools[0].ops[0].get.key: found an array, expected string or number"
    ]


def test_two_ops_in_one_item() -> None:
    two = "- { get: { table: carriers, key: $mc_number }, list: { table: carriers } }"
    assert problems(edit("- get: { table: carriers, key: $mc_number }", two)) == [
        "sandtable.yaml:29:9: tools[0].ops[0]: found 'get' and 'list', expected exactly one of "
        "get, list, create, update, delete, respond"
    ]


def test_missing_required_key() -> None:
    assert problems(edit("first: verify_carrier, then: book_load", "first: verify_carrier")) == [
        "sandtable.yaml:61:5: invariants[0]: missing required key 'then'"
    ]


def test_check_needs_require_or_forbid() -> None:
    assert problems(edit("- { require: { table: loads, key: $load_id }, error: 404", "- { error: 404")) == [
        "sandtable.yaml:42:9: tools[2].checks[0]: missing required key: one of 'require', 'forbid'"
    ]


def test_unknown_operator() -> None:
    assert problems(edit("{ amount: { gt: 500 } }", "{ amount: { gtt: 500 } }")) == [
        "sandtable.yaml:73:83: invariants[4].when.amount.gtt: unknown key 'gtt'; did you mean 'gt'?"
    ]


def test_unknown_invariant_kind() -> None:
    assert problems(edit("kind: never,", "kind: nevr,")) == [
        "sandtable.yaml:73:38: invariants[4].kind: found 'nevr', expected one of "
        "before, require, limit, match, never, never_disclose; did you mean 'never'?"
    ]


def test_limit_needs_a_bound() -> None:
    assert problems(
        edit("    arg: rate\n    lt: { table: loads, key: $load_id, field: max_rate }\n", "    arg: rate\n")
    ) == ["sandtable.yaml:75:5: invariants[6]: missing required key: at least one of 'lt', 'lte', 'gt', 'gte'"]


# --------------------------------------------------------------------------- cross-references


def test_unknown_table() -> None:
    assert problems(edit("create: { table: offers,", "create: { table: offer,")) == [
        "sandtable.yaml:50:26: tools[3].ops[0].create.table: unknown table 'offer'; did you mean 'offers'?"
    ]


def test_unknown_field() -> None:
    assert problems(edit("where: { insurance_status: valid }", "where: { insurance: valid }")) == [
        "sandtable.yaml:66:14: invariants[1].where.insurance: unknown field 'insurance' of table carriers; "
        "did you mean 'insurance_status'?"
    ]


def test_declared_fields_close_a_table() -> None:
    assert problems(edit("row: { load_id: $load_id, mc_number", "row: { load: $load_id, mc_number")) == [
        "sandtable.yaml:45:43: tools[2].ops[0].create.row.load: unknown field 'load' of table bookings; "
        "did you mean 'load_id'?"
    ]


def test_unknown_tool() -> None:
    assert problems(edit("called: [verify_carrier,", "called: [verify_carier,")) == [
        "sandtable.yaml:100:16: tasks[0].expect.called[0]: unknown tool 'verify_carier'; did you mean 'verify_carrier'?"
    ]


def test_unknown_param_reference() -> None:
    text = edit("key: $mc_number }\n  - name: search", "key: $mc_numbr }\n  - name: search")
    text = text.replace('message: "no load {load_id}"', 'message: "no load {load}"')
    assert problems(text) == [
        "sandtable.yaml:29:38: tools[0].ops[0].get.key: unknown param '$mc_numbr' of tool verify_carrier; "
        "did you mean '$mc_number'?",
        "sandtable.yaml:42:74: tools[2].checks[0].message: unknown param '{load}' of tool book_load; "
        "did you mean '{load_id}'?",
    ]


def test_unknown_param_in_an_invariant() -> None:
    assert problems(edit("same: [mc_number]", "same: [mc_num]")) == [
        "sandtable.yaml:61:92: invariants[0].same[0]: unknown param 'mc_num' of tool book_load; "
        "did you mean 'mc_number'?",
        "sandtable.yaml:61:92: invariants[0].same[0]: unknown param 'mc_num' of tool verify_carrier; "
        "did you mean 'mc_number'?",
    ]


def test_given_takes_literal_values_and_existing_keys() -> None:
    assert problems(edit("key: L-1001, set: { max_rate: 2400 }", "key: L-1002, set: { max_rate: $rate }")) == [
        "sandtable.yaml:89:38: tasks[0].given[0].update.key: no row of table loads has the key 'L-1002'; "
        "did you mean 'L-1001'?",
        "sandtable.yaml:89:63: tasks[0].given[0].update.set.max_rate: '$rate' refers to a call argument, "
        "but given has none; write $$ for a literal $",
    ]


def test_undeclared_tag() -> None:
    assert problems(edit("tags: [booking]", "tags: [bookings]")) == [
        "sandtable.yaml:85:12: tasks[0].tags[0]: unknown tag 'bookings'; did you mean 'booking'?"
    ]


def test_duplicate_ids() -> None:
    text = edit("  - name: search_loads", "  - name: verify_carrier")
    text = text.replace("- { id: rate-ceiling,", "- { id: verify-before-book,")
    text = text.replace("  - id: just-asking", "  - id: book-happy-path")
    assert problems(text) == [
        "sandtable.yaml:30:11: tools[1].name: duplicate tool name 'verify_carrier' (first at line 24)",
        "sandtable.yaml:67:11: invariants[2].id: duplicate invariant id 'verify-before-book' (first at line 61)",
        "sandtable.yaml:110:9: tasks[1].id: duplicate task id 'book-happy-path' (first at line 83)",
    ]


def test_duplicate_yaml_key() -> None:
    assert problems(edit("    critical: true\n", "    critical: true\n    critical: false\n")) == [
        "sandtable.yaml:87:5: tasks[0].critical: duplicate key 'critical' (first at line 86)"
    ]


def test_bad_reference_steps() -> None:
    text = edit(
        'args: { load_id: L-1001, mc_number: "100101", rate: "2100" }',
        "args: { load_id: L-1001, mc_num: 100101, rate: lots }",
    )
    text = text.replace('- say: "You\'re verified."', '- { call: verify_carrier, say: "You\'re verified." }')
    assert problems(text) == [
        "sandtable.yaml:106:9: tasks[0].reference[1]: found 'call' and 'say', expected only one of 'call', 'say'",
        "sandtable.yaml:108:15: tasks[0].reference[2].args: missing required param 'mc_number' of tool book_load",
        "sandtable.yaml:108:34: tasks[0].reference[2].args.mc_num: unknown param 'mc_num' of tool book_load; "
        "did you mean 'mc_number'?",
        "sandtable.yaml:108:56: tasks[0].reference[2].args.rate: found string 'lots', expected number",
    ]


def test_state_entry_shape() -> None:
    assert problems(edit("- { table: bookings, count: 1 }", "- { table: bookings, key: B-1, count: 1 }")) == [
        "sandtable.yaml:99:11: tasks[0].expect.state[2]: found 'key' with 'count'; use key (with fields) or where/count"
    ]


# --------------------------------------------------------------------------- files and versions


def test_newer_spec_version() -> None:
    try:
        who = f"pytest-sandtable {version('pytest-sandtable')}"
    except PackageNotFoundError:
        who = "this pytest-sandtable"
    assert problems(edit("version: 1", "version: 2")) == [
        f"sandtable.yaml:1:10: version: this file is spec version 2; {who} reads version 1. "
        "Upgrade pytest-sandtable to load it."
    ]


def test_yaml_syntax_error() -> None:
    assert problems(edit("same: [mc_number] }", "same: [mc_number }")) == [
        "sandtable.yaml:61:102: invalid YAML: this '}' comes before the ']' that closes the '[' at column 91"
    ]


def test_tabs() -> None:
    assert problems("version: 1\n\tname: x\n") == [
        "sandtable.yaml:2:1: invalid YAML: a tab in the indentation: YAML indents with spaces only; "
        "replace the tab with spaces"
    ]


def test_empty_file() -> None:
    assert problems("# nothing yet\n") == ["sandtable.yaml: the file is empty; a domain starts with 'version: 1'"]


def test_not_a_mapping() -> None:
    assert problems("- version: 1\n") == [
        "sandtable.yaml:1:1: found an array, expected object; a domain file is a mapping that starts with 'version: 1'"
    ]


def test_every_problem_is_reported_in_line_order() -> None:
    text = edit("kind: never,", "kind: nevr,").replace("- gett", "- get").replace("- get: {", "- gett: {")
    text = text.replace("max_turns: 12", "max_turns: many")
    assert problems(text) == [
        "sandtable.yaml:29:9: tools[0].ops[0].gett: unknown key 'gett'; did you mean 'get'?",
        "sandtable.yaml:73:38: invariants[4].kind: found 'nevr', expected one of "
        "before, require, limit, match, never, never_disclose; did you mean 'never'?",
        "sandtable.yaml:87:16: tasks[0].max_turns: found string 'many', expected integer",
    ]


def test_missing_file() -> None:
    with pytest.raises(DomainError) as info:
        load_domain("nowhere/sandtable.yaml")
    assert str(info.value) == "nowhere/sandtable.yaml: no such file"


def test_problem_and_path_format() -> None:
    assert format_path(("tasks", 3, "expect", "state", 0, "table")) == "tasks[3].expect.state[0].table"
    assert format_path(("world", "my table")) == 'world["my table"]'
    p = Problem("d.yaml", 42, 7, "tools[2].params.rate.type", "found 'numbr'")
    assert str(p) == "d.yaml:42:7: tools[2].params.rate.type: found 'numbr'"
    assert str(Problem("d.yaml", None, None, "", "no such file")) == "d.yaml: no such file"


# --------------------------------------------------------------------------- pending items, shared tags, expect_nothing


def test_pending_tasks_and_rules_load_and_a_trial_runs_under_them() -> None:
    d = load_domain_text(
        edit("  - id: just-asking\n", "  - id: just-asking\n    pending: true\n    expect_nothing: true\n").replace(
            "  - { id: no-refunds-over-500, kind: never,", "  - { id: no-refunds-over-500, pending: true, kind: never,"
        )
    )
    assert [(inv.id, inv.pending) for inv in d.invariants if inv.pending] == [("no-refunds-over-500", True)]
    # `pending` is no part of the rule's kind-specific spec
    assert "pending" not in d.invariants[3].spec
    asking, happy = d.task("just-asking"), d.task("book-happy-path")
    assert (asking.pending, asking.expect_nothing, happy.pending, happy.expect_nothing) == (True, True, False, False)
    rule = {"kind": "rule", "id": "no-refunds-over-500"}
    assert d.pending_for(asking) == [{"kind": "task", "id": "just-asking"}, rule]
    assert d.pending_for(happy) == [rule]


def test_pending_and_expect_nothing_are_booleans() -> None:
    text = edit("  - id: just-asking\n", "  - id: just-asking\n    pending: yes\n    expect_nothing: 1\n")
    assert problems(text.replace("kind: never,", "kind: never, pending: maybe,")) == [
        "sandtable.yaml:73:54: invariants[4].pending: found string 'maybe', expected boolean",
        "sandtable.yaml:111:14: tasks[1].pending: found string 'yes', expected boolean",
        "sandtable.yaml:112:21: tasks[1].expect_nothing: found integer 1, expected boolean",
    ]


def test_a_tag_may_be_declared_shared() -> None:
    d = load_domain_text(
        edit("  booking: Carriers booking loads.\n", "  booking: Carriers booking loads.\n"
             "  safety: { description: Safety rules every desk has., shared: true }\n  misc: {}\n")
    )
    assert d.tags == {"booking": "Carriers booking loads.", "safety": "Safety rules every desk has.", "misc": ""}
    assert d.shared_tags == {"safety"}
    assert load_domain_text(DOMAIN).shared_tags == set()


def test_a_shared_tag_is_a_description_and_a_boolean() -> None:
    assert problems(edit("  booking: Carriers booking loads.\n", "  booking: { description: 1, shard: true }\n")) == [
        "sandtable.yaml:7:27: tags.booking.description: found integer 1, expected string; "
        "put it in quotes to make it a string",
        "sandtable.yaml:7:30: tags.booking.shard: unknown key 'shard'; did you mean 'shared'?",
    ]


# --------------------------------------------------------------------------- messages that point at the real mistake


# τ-bench airline's reservations, ported without `fields:`: the fields are what rows and writes use.
AIRLINE = """\
version: 1
name: airline
world:
  reservations:
    key: reservation_id
    rows:
      - { reservation_id: NO6JO3, user_id: mia_li_3668 }
tools:
  - name: cancel_reservation
    params: { reservation_id: { type: string } }
    ops:
      - update: { table: reservations, key: $reservation_id, set: { statsu: cancelled } }
  - name: active_reservations
    params: {}
    ops:
      - list: { table: reservations, where: { status: active } }
tasks:
  - id: cancel
    user: { opening: Cancel NO6JO3. }
    expect:
      state: [{ table: reservations, key: NO6JO3, fields: { status: cancelled } }]
  - id: keep
    user: { opening: Keep it. }
    expect:
      state: [{ table: reservations, where: { status: cancelled }, count: 0 }]
"""


def test_a_typo_in_a_write_is_reported_at_the_write_not_at_every_correct_read() -> None:
    with pytest.raises(DomainError) as info:
        load_domain_text(AIRLINE, "airline.yaml")
    assert str(info.value).splitlines() == [
        "airline.yaml:12:69: tools[0].ops[0].update.set.statsu: unknown field 'statsu' of table reservations; "
        "did you mean 'status'? (no seed row has either; 'status' is read in 3 places, first at line 16, "
        "'statsu' is only written)"
    ]
    load_domain_text(AIRLINE.replace("statsu:", "status:"))


def test_a_typo_in_one_read_is_reported_at_that_read() -> None:
    text = AIRLINE.replace("statsu:", "status:").replace("where: { status: active }", "where: { stauts: active }")
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "airline.yaml")
    assert str(info.value).splitlines() == [
        "airline.yaml:16:47: tools[1].ops[0].list.where.stauts: unknown field 'stauts' of table reservations; "
        "did you mean 'status'?"
    ]


def test_a_write_that_only_looks_like_a_read_field_is_no_typo_when_it_is_read_too() -> None:
    # `statsu` read somewhere makes it a field of its own: the reads of `status` are the mistake
    text = AIRLINE.replace("fields: { status: cancelled }", "fields: { statsu: cancelled }")
    with pytest.raises(DomainError) as info:
        load_domain_text(text, "airline.yaml")
    assert str(info.value).splitlines() == [
        "airline.yaml:16:47: tools[1].ops[0].list.where.status: unknown field 'status' of table reservations; "
        "did you mean 'statsu'?",
        "airline.yaml:25:47: tasks[1].expect.state[0].where.status: unknown field 'status' of table "
        "reservations; did you mean 'statsu'?",
    ]


def test_a_json_schema_keyword_in_a_param_says_what_a_param_takes() -> None:
    text = edit("rate: { type: number }\n    checks", "rate: { type: number, minimum: 0 }\n    checks").replace(
        "params: { load_id: { type: string }, rate: { type: number } }",
        "params: { load_id: { type: array, items: { type: string }, maxItems: 3 }, rate: { type: number } }",
    )
    hint = (
        "a param takes this subset of JSON Schema: type, description, required, default, enum, properties, "
        "items; state any other limit in the param's description, which the agent reads"
    )
    assert problems(text) == [
        f"sandtable.yaml:40:29: tools[2].params.rate.minimum: unknown key 'minimum'; {hint}",
        f"sandtable.yaml:48:64: tools[3].params.load_id.maxItems: unknown key 'maxItems'; {hint}",
    ]


def test_a_record_reference_in_a_where_points_at_an_operator() -> None:
    text = edit(
        "where: { insurance_status: valid }",
        "where: { insurance_status: { table: loads, key: $load_id, field: status } }",
    )
    assert problems(text) == [
        "sandtable.yaml:66:32: invariants[1].where.insurance_status: found a {table, key, field} record "
        "reference, expected a value or an operator object: to compare with a record's field, make it an "
        "operator's value, e.g. { eq: {table, key, field} }"
    ]


def test_param_keys_are_the_schemas() -> None:
    from pytest_sandtable.domain.loader import domain_schema
    from pytest_sandtable.domain.translate import PARAM_KEYS

    assert set(PARAM_KEYS) == set(domain_schema()["$defs"]["param"]["properties"])


# --------------------------------------------------------------------------- python -m pytest_sandtable validate


def test_cli_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    (tmp_path / "bad.sandtable.yaml").write_text(edit("max_turns: 12", "max_turns: many"), encoding="utf-8")
    (tmp_path / "notes.yaml").write_text("not: a domain\n", encoding="utf-8")

    assert main(["validate", "good"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ok: {Path('good', 'sandtable.yaml')} (2 tasks, 6 tools, 7 invariants)"
    ]

    assert main(["validate", "."]) == 2
    assert capsys.readouterr().out.splitlines() == [
        "bad.sandtable.yaml:87:16: tasks[0].max_turns: found string 'many', expected integer",
        f"ok: {Path('good', 'sandtable.yaml')} (2 tasks, 6 tools, 7 invariants)",
    ]


def test_cli_nonexistent_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "no/such/place"]) == 2
    assert capsys.readouterr().err == "error: no such file or folder: no/such/place\n"


def test_world_matches_reference_needs_reference_calls() -> None:
    text = edit(
        "  - id: just-asking\n    user: { instructions: Ask what loads leave Atlanta. }\n",
        "  - id: just-asking\n    user: { instructions: Ask what loads leave Atlanta. }\n"
        "    expect: { world_matches_reference: true }\n",
    )
    assert problems(text) == [
        "sandtable.yaml:112:15: tasks[1].expect.world_matches_reference: world_matches_reference needs the task's "
        "`reference` (its calls make the expected world; `reference: []` when nothing should change)"
    ]
    assert load_domain_text(text.replace("world_matches_reference: true }", "world_matches_reference: true }\n"
                                         "    reference: []"), "sandtable.yaml").task("just-asking").reference == []
