"""``mutate``, round three (issue 37): the scores it gives are not too kind.

The user's side of a dual-control domain is mutated; a handler that only reads is a read;
a ``never`` mutant whose added call fails the tool's schema is invalid; a suggestion is
checked by replaying its mutant; every bundled example scores 95% or more with no weak task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sandtable.cli import main
from pytest_sandtable.domain.loader import load_domain, load_domain_text
from pytest_sandtable.mutate.run import mutate_domain

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "example_domains"


def states(report: object) -> list[tuple[str, str, str, list[str]]]:
    return [(t.task, m.id, m.state, m.killed_by) for t in report.tasks for m in t.mutants]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- item 1: the examples, the user's side


@pytest.mark.parametrize("name", ["clinic", "device_desk", "freight"])
def test_every_bundled_example_scores_95_or_more_with_no_weak_task(name: str) -> None:
    report = mutate_domain(load_domain(EXAMPLES / name / "sandtable.yaml"))
    assert report.weak_tasks == []
    assert report.score is not None and report.score >= 0.95, report.score


def test_the_ci_gate_on_the_examples_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["mutate", str(EXAMPLES), "--fail-on-weak", "--fail-under", "95", "--no-coverage"])
    out = capsys.readouterr().out
    assert code == 0, out.splitlines()[-1]
    assert out.splitlines()[-1].endswith("; 0 weak tasks; ok")


def test_ci_runs_the_mutation_gate_right_after_mypy() -> None:
    lines = [line for line in (HERE.parent / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    at = lines.index("mypy")
    assert lines[at + 1:at + 3] == [
        'echo "== mutate example_domains"',
        "python -m pytest_sandtable mutate example_domains --fail-on-weak --fail-under 95",
    ]


PHONE = """\
version: 1
name: phone
description: A carrier's help desk; the caller has a phone of their own.
policy: Look the line up first.
world:
  lines:
    key: id
    rows:
      - { id: L-1, status: active }
user_world:
  device:
    key: id
    rows:
      - { id: phone, airplane_mode: true }
tools:
  - name: get_line
    params: { line: { type: string } }
    ops: [{ get: { table: lines, key: $line } }]
user_tools:
  - name: check_phone
    ops: [{ get: { table: device, key: phone } }]
  - name: toggle_airplane_mode
    params: { on: { type: boolean } }
    ops: [{ update: { table: device, key: phone, set: { airplane_mode: $on } } }]
tasks:
  - id: airplane
    user:
      opening: "No data. Line L-1."
      script:
        - { call: check_phone, when: { reply_includes: check your phone } }
        - { say: "Airplane mode is on.", when: { result_includes: "true" } }
        - { call: toggle_airplane_mode, args: { on: false }, when: { reply_includes: airplane mode off } }
        - { say: "It works, thanks.", when: { user_called: toggle_airplane_mode }, end: true }
    expect:
      called: [get_line]
      EXPECT
    reference:
      - { call: get_line, args: { line: L-1 } }
      - { say: "Your line is fine. Please check your phone." }
      - { say: "Thanks. Please turn airplane mode off. Then tell me." }
      - { say: "Good." }
"""


def test_the_user_s_side_is_mutated_and_a_task_that_does_not_look_at_the_phone_is_weak() -> None:
    # the task checks only the agent's call: the user's own fix could be left undone unnoticed
    weak = mutate_domain(load_domain_text(PHONE.replace("      EXPECT\n", "")))
    user_side = [(m.id, m.state, m.diff, m.suggestion) for m in weak.mutants
                 if m.operator in ("drop-user-call", "drop-instruction")]
    assert user_side == [
        ("drop-user-call@2", "survived", "the user never called toggle_airplane_mode(on=false)",
         "add state: {table: device, key: phone, fields: {airplane_mode: false}}"),
        ("drop-instruction@2", "survived",
         'the reply "Thanks. Please turn airplane mode off. Then tell me." said "Thanks. Then tell me.", '
         "so the user never called toggle_airplane_mode(on=false)",
         "add state: {table: device, key: phone, fields: {airplane_mode: false}}"),
    ]
    assert weak.weak_tasks == ["airplane"]
    # the check the suggestion names kills both
    strong = mutate_domain(load_domain_text(PHONE.replace(
        "      EXPECT\n", "      state: [{ table: device, key: phone, fields: { airplane_mode: false } }]\n")))
    assert [(m.id, m.state, m.killed_by) for m in strong.mutants
            if m.operator in ("drop-user-call", "drop-instruction")] == [
        ("drop-user-call@2", "killed", ["state:device[phone]#1"]),
        ("drop-instruction@2", "killed", ["state:device[phone]#1"]),
    ]
    assert strong.weak_tasks == []


def test_a_not_called_expectation_on_the_user_is_mutated_by_the_user_calling_it() -> None:
    text = PHONE.replace("      EXPECT\n", "      not_called: [{ tool: toggle_airplane_mode, by: user }]\n")
    text = text.replace("        - { call: toggle_airplane_mode, args: { on: false }, "
                        "when: { reply_includes: airplane mode off } }\n", "")
    report = mutate_domain(load_domain_text(text))
    added = next(m for m in report.mutants if m.operator == "not-called")
    assert (added.id, added.state, added.diff, added.killed_by) == (
        "not-called@user:toggle_airplane_mode", "killed",
        "the user called toggle_airplane_mode(on=true) on their first reply",
        ["not_called:user:toggle_airplane_mode"])


def test_device_desk_s_user_side_mutants_are_all_killed() -> None:
    report = mutate_domain(load_domain(EXAMPLES / "device_desk" / "sandtable.yaml"))
    got = [(t, i, s) for t, i, s, _ in states(report) if i.startswith(("drop-user-call", "drop-instruction"))]
    assert got == [
        ("airplane-mode-left-on", "drop-user-call@2", "killed"),
        ("airplane-mode-left-on", "drop-instruction@2", "killed"),
        ("mobile-data-switched-off", "drop-user-call@2", "killed"),
        ("mobile-data-switched-off", "drop-instruction@2", "killed"),
        ("wrong-apn-after-sim-swap", "drop-user-call@4", "killed"),
        ("wrong-apn-after-sim-swap", "drop-instruction@3", "killed"),
    ]


# --------------------------------------------------------------------------- item 4: mislabelled mutants

DESK_HANDLERS = """\
def lookup(args, world, ctx):
    return world.get("items", args["sku"])


def ship(args, world, ctx):
    world.create("orders", {"sku": args["sku"]})
    return {"shipped": args["sku"]}
"""

DESK = """\
version: 1
name: desk
description: A shop whose tools are handlers.
policy: Look an item up before you ship it. Never book more than five seats.
world:
  items:
    key: sku
    rows:
      - { sku: A1, status: open }
  orders:
    key: order_id
    key_format: "O-{n}"
    fields: [order_id, sku]
    rows: []
tools:
  - name: lookup
    params: { sku: { type: string } }
    handler: desk_mutate_handlers:lookup
  - name: ship
    params: { sku: { type: string } }
    handler: desk_mutate_handlers:ship
  - name: book
    params:
      seats:
        type: array
        items: { type: object, properties: { name: { type: string } } }
    ops: [{ respond: { booked: true } }]
invariants:
  - { id: five-seats, kind: never, tool: book, when: { seats: { length: { gt: 5 } } } }
tasks:
  - id: ship
    user: { opening: "Ship A1." }
    expect:
      state:
        - { table: orders, where: { sku: A1 }, count: 1 }
    reference:
      - { call: lookup, args: { sku: A1 } }
      - { call: ship, args: { sku: A1 } }
      - say: "Shipped."
"""


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    (tmp_path / "desk_mutate_handlers.py").write_text(DESK_HANDLERS, encoding="utf-8")
    path = tmp_path / "sandtable.yaml"
    path.write_text(DESK, encoding="utf-8")
    return path


def test_a_handler_that_wrote_nothing_in_the_reference_replay_is_a_read(desk: Path) -> None:
    report = mutate_domain(load_domain(desk))
    ids = [m.id for m in report.mutants]
    # lookup (step 0) reads: no drop-write@0, and the first write is ship at step 1
    assert [i for i in ids if i.startswith(("drop-", "stop-before", "repeat-"))] == [
        "drop-write@1", "repeat-write@1", "stop-before@1", "drop-read@0", "repeat-read@0"]
    assert next(m for m in report.mutants if m.id == "stop-before@1").state == "killed"


def test_a_never_mutant_whose_call_fails_the_tool_s_schema_is_invalid_not_equivalent(desk: Path) -> None:
    report = mutate_domain(load_domain(desk))
    never = next(m for m in report.mutants if m.operator == "never")
    assert (never.id, never.state, never.reason) == (
        "never@five-seats", "invalid",
        "the call built fails book's schema: seats[5]: 'x' is not of type 'object'")
    # a call that could never have run is not one that behaves as the reference
    assert [m.id for m in report.mutants if m.state == "equivalent"] == ["drop-read@0", "repeat-read@0", "reorder@0"]


# --------------------------------------------------------------------------- item 5: suggestions checked


def test_a_reply_suggestion_prefers_a_word_no_tool_result_holds_and_says_it_ties_the_wording(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "device_desk"
    shutil.copytree(EXAMPLES / "device_desk", folder)
    path = folder / "sandtable.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("      reply_includes: [resumed]\n", ""), encoding="utf-8")
    report = mutate_domain(load_domain(path))
    survivors = {m.id: m.suggestion for m in report.mutants if m.state == "survived"}
    # before: "add reply_includes: [suspended]", which get_line's result holds, so spam still passed
    assert survivors == {
        "spam": "add reply_includes: [resumed] (ties the task to the reference's wording: "
                "an agent that says it otherwise fails)",
        "stop-after@1": "add reply_includes: [resumed] (ties the task to the reference's wording: "
                        "an agent that says it otherwise fails)",
    }
