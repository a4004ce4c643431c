"""``mutate``: each task's reference rewritten into faults and replayed (docs/mutate.md).

The small shop below is hand-counted: every operator's mutants are listed with the state
and the checks that killed each, as worked out from the rules and expectations by hand.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_sandtable.cli import main
from pytest_sandtable.domain.loader import load_domain, load_domain_text
from pytest_sandtable.domain.model import Pos
from pytest_sandtable.mutate.run import mutate_domain

SHOP = """\
version: 1
name: shop
description: A small shop.
policy: Look an item up before you order it.
world:
  items:
    key: sku
    rows:
      - { sku: A1, status: open, code: K-7731 }
      - { sku: B2, status: closed, code: K-8842 }
  orders:
    key: order_id
    key_format: "O-{n}"
    fields: [order_id, sku, qty, tier, note]
    rows: []
tools:
  - name: find_item
    params:
      sku: { type: string }
    ops:
      - get: { table: items, key: $sku }
  - name: place_order
    params:
      sku: { type: string }
      qty: { type: integer }
      tier: { type: string, enum: [std, rush] }
      note: { type: string }
    checks:
      - { require: { table: items, key: $sku }, error: 404, message: "no item {sku}" }
    ops:
      - create: { table: orders, row: { sku: $sku, qty: $qty, tier: $tier, note: $note } }
  - name: store_hours
    ops:
      - respond: { open: "9-17" }
  - name: refund
    params:
      amount: { type: number }
    ops:
      - respond: { refunded: $amount }
invariants:
  - { id: look-first, kind: before, first: find_item, then: place_order, same: [sku] }
  - { id: open-only, kind: require, tool: place_order, record: { table: items, key: $sku }, where: { status: open } }
  - { id: qty-cap, kind: limit, tool: place_order, arg: qty, lte: 5 }
  - { id: no-big-refund, kind: never, tool: refund, when: { amount: { gt: 50 } } }
  - { id: code-secret, kind: never_disclose, values: { table: items, field: code } }
tasks:
  - id: order
    user: { opening: "I want A1.", script: ["Two please, standard, as a gift."] }
    expect:
      state:
        - { table: orders, where: { sku: A1, qty: 2 }, count: 1 }
      called: [find_item]
      not_called: [refund]
    reference:
      - call: find_item
        args: { sku: A1 }
      - call: store_hours
      - say: "A1 is open. How many?"
      - call: place_order
        args: { sku: A1, qty: 2, tier: std, note: gift }
      - say: "Ordered two of A1."
  - id: closed-item
    user: { opening: "Is B2 open?" }
    expect:
      called: [find_item]
      reply_includes: [closed]
    reference:
      - call: find_item
        args: { sku: B2 }
      - say: "B2 is closed."
"""

ORDERS = "state:orders[where]#1"
# a reply_includes word the reference says in its own words: the suggestion says what it costs
WORDING = "ties the task to the reference's wording: an agent that says it otherwise fails"

# (task, mutant id, state, killed by), worked out by hand from SHOP
HAND_COUNT = [
    # the one write, place_order at step 3: each must be caught
    ("order", "drop-write@3", "killed", [ORDERS]),
    ("order", "change-arg@3.sku:key", "killed", ["look-first", "open-only", ORDERS]),  # B2: closed, not looked up
    ("order", "change-arg@3.qty:limit:qty-cap", "killed", ["qty-cap", ORDERS]),  # 5 + 1
    ("order", "change-arg@3.tier:enum", "survived", []),  # nothing checks the tier
    ("order", "change-arg@3.note:short", "survived", []),  # nor the note
    ("order", "repeat-write@3", "killed", [ORDERS]),  # two orders, count 1
    ("order", "skip-first@look-first", "killed", ["look-first", "called:find_item"]),
    ("order", "fail-require@open-only", "killed", ["look-first", "open-only", ORDERS]),
    ("order", "never@no-big-refund", "killed", ["no-big-refund", "not_called:refund"]),  # amount 51
    ("order", "not-called@refund", "killed", ["not_called:refund"]),
    ("order", "leak@code-secret", "killed", ["code-secret"]),  # K-7731, which find_item showed
    ("order", "stop-before@3", "killed", [ORDERS]),
    ("order", "spam", "killed", ["code-secret"]),
    # may survive
    ("order", "drop-read@0", "killed", ["look-first", "called:find_item"]),
    ("order", "drop-read@1", "equivalent", []),
    ("order", "repeat-read@0", "equivalent", []),
    ("order", "repeat-read@1", "equivalent", []),
    ("order", "reorder@0", "equivalent", []),
    ("order", "stop-after@3", "survived", []),
    # no write, no place_order, no not_called: only these
    ("closed-item", "never@no-big-refund", "killed", ["no-big-refund"]),
    ("closed-item", "leak@code-secret", "killed", ["code-secret"]),  # K-8842
    ("closed-item", "spam", "killed", ["code-secret"]),
    ("closed-item", "drop-read@0", "killed", ["called:find_item"]),
    ("closed-item", "repeat-read@0", "equivalent", []),
]


def test_every_operator_s_mutants_classified_exactly() -> None:
    report = mutate_domain(load_domain_text(SHOP))
    got = [(t.task, m.id, m.state, m.killed_by) for t in report.tasks for m in t.mutants]
    assert got == HAND_COUNT
    order, closed = report.tasks
    assert (order.score, order.weak) == (12 / 15, True)
    assert (closed.score, closed.weak) == (1.0, False)
    assert report.score == 16 / 19
    assert report.weak_tasks == ["order"]
    assert report.rules == {"look-first": 4, "open-only": 2, "qty-cap": 1, "no-big-refund": 2, "code-secret": 4}
    assert order.checks == {ORDERS: 6, "called:find_item": 2, "not_called:refund": 2}
    assert report.decorative() == ["closed-item: reply:closed"]


def test_each_survivor_has_its_diff_and_a_pasteable_expectation() -> None:
    import yaml

    report = mutate_domain(load_domain_text(SHOP))
    survivors = [(m.id, m.diff, m.suggestion) for m in report.mutants if m.state == "survived"]
    assert survivors == [
        ("change-arg@3.tier:enum", 'place_order tier: "std" -> "rush"', f"add where: {{tier: std}} to {ORDERS}"),
        ("change-arg@3.note:short", 'place_order note: "gift" -> "gif"', f"add where: {{note: gift}} to {ORDERS}"),
        ("stop-after@3", 'stopped after place_order(sku="A1", qty=2, tier="std", note="gift")',
         f"add reply_includes: [ordered] ({WORDING})"),
    ]
    # the YAML of each suggestion reads back as the value it names
    assert yaml.safe_load("{tier: std}") == {"tier": "std"}
    # a suggestion pasted into the task kills the survivor it was made for
    fixed = SHOP.replace("where: { sku: A1, qty: 2 }", "where: { sku: A1, qty: 2, tier: std, note: gift }")
    fixed = fixed.replace("      not_called: [refund]\n",
                          "      not_called: [refund]\n      reply_includes: [ordered]\n", 1)
    again = mutate_domain(load_domain_text(fixed))
    assert [m.id for m in again.mutants if m.state == "survived"] == []
    assert (again.score, again.weak_tasks) == (1.0, [])


def test_an_accepted_mutant_is_left_out_of_the_score_and_a_stray_entry_is_a_problem() -> None:
    domain = load_domain_text(SHOP)
    order = domain.tasks[0]
    order.accept = (  # type: ignore[attr-defined]
        SimpleNamespace(mutant="change-arg@3.note:short", reason="the note is free text", pos=Pos(40, 9)),
        SimpleNamespace(mutant="drop-write@9", reason="typo", pos=Pos(42, 9)),
    )
    report = mutate_domain(domain)
    note = next(m for m in report.mutants if m.id == "change-arg@3.note:short")
    assert (note.state, note.reason) == ("accepted", "the note is free text")
    assert report.tasks[0].score == 12 / 14
    assert [str(p) for p in report.problems] == [
        "<string>:42:9: tasks[0].accept[1].mutant: no mutant 'drop-write@9' was generated for task 'order'; "
        "the mutants are: " + ", ".join(i for t, i, _, _ in HAND_COUNT if t == "order")
    ]


HANDLERS = """\
def ship(args, world, ctx):
    if args["sku"] != "A1":
        raise KeyError(args["sku"])
    world.create("orders", {"sku": args["sku"], "qty": 1, "tier": "std", "note": ""})
    return {"shipped": args["sku"]}
"""


def test_a_handler_that_raises_makes_that_mutant_invalid_and_the_rest_go_on(tmp_path: Path) -> None:
    (tmp_path / "shop_mutate_handlers.py").write_text(HANDLERS, encoding="utf-8")
    text = SHOP.split("tasks:\n")[0].replace(
        "  - name: refund\n", "  - name: ship\n    params:\n      sku: { type: string }\n"
        "    handler: shop_mutate_handlers:ship\n  - name: refund\n") + """tasks:
  - id: ship
    user: { opening: "Ship A1." }
    expect:
      state:
        - { table: orders, where: { sku: A1 }, count: 1 }
    reference:
      - call: ship
        args: { sku: A1 }
      - say: "Shipped."
"""
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    report = mutate_domain(load_domain(path))
    got = [(m.id, m.state) for m in report.mutants]
    assert got == [
        ("drop-write@0", "killed"),
        ("change-arg@0.sku:short", "invalid"),  # "A": the handler raises
        ("repeat-write@0", "killed"),  # two orders
        ("never@no-big-refund", "killed"),
        ("leak@code-secret", "killed"),
        ("stop-before@0", "killed"),
        ("spam", "survived"),  # it says "A1", all the agent saw: no check reads the replies
        ("stop-after@0", "survived"),
    ]
    invalid = report.mutants[1]
    assert invalid.reason.startswith(
        "the domain failed running ship: its handler shop_mutate_handlers:ship raised KeyError: 'A'"
    ), invalid.reason


# --------------------------------------------------------------------------- the command


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """The exit code, stdout's lines and stderr. The baselines' line (and the blank line
    before it) is left out: it is there once ``mutate.baselines`` exists, which is built
    apart (its own tests; :func:`test_the_baselines_line` here)."""
    code = main(["mutate", *argv])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    for i in [i for i, line in enumerate(lines) if line.startswith("baselines: ")][::-1]:
        del lines[i - 1 : i + 1]
    return code, lines, err


def test_the_baselines_line() -> None:
    from pytest_sandtable.mutate.render import baseline_line

    b = SimpleNamespace(tasks=8, do_nothing=["phone-number-request"], spam=[])
    assert baseline_line(b) == (
        "baselines: doing nothing passes 1 of 8 tasks (phone-number-request); spam passes 0 of 8 tasks"
    )


def shop_file(tmp_path: Path, text: str = SHOP) -> str:
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


SURVIVED = [
    "survived (3):",
    '  order: change-arg@3.tier:enum (must be caught): place_order tier: "std" -> "rush"; '
    f"add where: {{tier: std}} to {ORDERS}",
    '  order: change-arg@3.note:short (must be caught): place_order note: "gift" -> "gif"; '
    f"add where: {{note: gift}} to {ORDERS}",
    '  order: stop-after@3 (may survive): stopped after place_order(sku="A1", qty=2, tier="std", note="gift"); '
    f"add reply_includes: [ordered] ({WORDING})",
]


def test_the_text_format_s_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shop_file(tmp_path)
    code, lines, _ = run(capsys, path)
    assert code == 0
    assert lines[0] == (f"shop ({path}): 2 tasks, 24 mutants: 16 killed, 3 survived, 5 equivalent, 0 accepted, "
                        "0 invalid; score 84.2%; 1 weak task")
    assert lines[2].split() == ["operator", "expected", "mutants", "killed", "survived", "equivalent", "accepted",
                                "invalid", "score"]
    assert lines[4].split() == ["drop-write", "must", "1", "1", "0", "0", "0", "0", "100.0%"]
    assert lines[5].split() == ["change-arg", "must", "4", "2", "2", "0", "0", "0", "50.0%"]
    task_rows = [line.split() for line in lines if line.startswith(("order ", "closed-item "))]
    assert task_rows == [["order", "19", "12", "3", "4", "0", "0", "80.0%", "weak"],
                         ["closed-item", "5", "4", "0", "1", "0", "0", "100.0%"]]
    start = lines.index("survived (3):")
    assert lines[start : start + 4] == SURVIVED
    end = lines.index("decorative checks, killed no mutant (1): closed-item: reply:closed")
    assert lines[end:] == [
        "decorative checks, killed no mutant (1): closed-item: reply:closed",
        "",
        *SHOP_COVERAGE,
        "",
        "sandtable mutate: 1 domain, 24 mutants: score 84.2% (16 killed of 19 scored); 1 weak task; ok",
    ]


# the policy coverage of the references and the mutants that ran (tests/test_mutate_coverage.py)
SHOP_COVERAGE = [
    "policy coverage: 5 rules: 5 both outcomes; 1 policy sentence quoted by no rule; 0 tasks exercise no rule",
    "  rule           kind            level            calls    applied    held    broken    tasks",
    "  -------------  --------------  -------------  -------  ---------  ------  --------  -------",
    "  look-first     before          both-outcomes       19         19      15         4        1",
    "  open-only      require         both-outcomes       19         19      17         2        1",
    "  qty-cap        limit           both-outcomes       19         19      18         1        1",
    "  no-big-refund  never           both-outcomes        3          3       1         2        2",
    "  code-secret    never_disclose  both-outcomes       46         46      41         5        2",
    "  quoted by no rule: Look an item up before you order it.",
]


@pytest.mark.parametrize(
    ("flags", "code", "verdict"),
    [
        (["--fail-under", "84"], 0, "ok"),
        (["--fail-under", "85"], 1, "score 84.2% is under --fail-under 85"),
        (["--fail-on-weak"], 1, "1 weak task with --fail-on-weak"),
    ],
)
def test_fail_under_and_fail_on_weak(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], code: int, verdict: str
) -> None:
    got, lines, _ = run(capsys, shop_file(tmp_path), *flags)
    assert (got, lines[-1]) == (
        code, f"sandtable mutate: 1 domain, 24 mutants: score 84.2% (16 killed of 19 scored); 1 weak task; {verdict}"
    )


def test_fail_on_weak_passes_a_suite_without_weak_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SHOP.replace("where: { sku: A1, qty: 2 }", "where: { sku: A1, qty: 2, tier: std, note: gift }")
    code, lines, _ = run(capsys, shop_file(tmp_path, text), "--fail-on-weak", "--fail-under", "90")
    # stop-after@3 still survives: it may, so the task is not weak
    assert (code, lines[-1]) == (
        0, "sandtable mutate: 1 domain, 24 mutants: score 94.7% (18 killed of 19 scored); 0 weak tasks; ok"
    )


def test_a_bad_score_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, shop_file(tmp_path), "--fail-under", "120")
    assert code == 2
    assert "argument --fail-under: a percentage from 0 to 100, got 120" in err


def test_json_and_github(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = shop_file(tmp_path)
    code, lines, _ = run(capsys, path, "--format", "json")
    doc = json.loads("\n".join(lines))
    assert (code, doc["version"], doc["command"], doc["exit"]) == (0, 1, "mutate", 0)
    assert doc["totals"] == {"killed": 16, "survived": 3, "equivalent": 5, "accepted": 0, "invalid": 0,
                             "generated": 24, "score": 16 / 19, "weak_tasks": 1}
    (f,) = doc["files"]
    assert (f["file"], f["status"], f["weak_tasks"]) == (path, "ok", ["order"])
    assert [(m["id"], m["state"]) for m in f["tasks"][0]["mutants"]][:2] == [
        ("drop-write@3", "killed"), ("change-arg@3.sku:key", "killed")]
    code, lines, _ = run(capsys, path, "--format", "github")
    line = SHOP.splitlines().index("  - id: order") + 1
    assert code == 0
    assert lines[0] == (f"::warning file={path},line={line},title=sandtable mutate::order: mutant "
                        'change-arg@3.tier:enum survived (must be caught): place_order tier: "std" -> "rush"; '
                        f"add where: {{tier: std}} to {ORDERS}")
    assert lines[2].startswith(f"::notice file={path},line={line},title=sandtable mutate::order: mutant stop-after@3")
    assert lines[-1] == "sandtable mutate: 1 domain, 24 mutants: score 84.2% (16 killed of 19 scored); 1 weak task; ok"


def test_bad_input_never_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nname: x\ntools: 3\n", encoding="utf-8")
    code, lines, err = run(capsys, str(broken), str(tmp_path / "nope.yaml"))
    assert code == 2
    assert err == f"error: no such file or folder: {tmp_path / 'nope.yaml'}\n"
    assert lines == [
        f"{broken}:1:1: missing required key 'tasks'",
        f"{broken}:3:8: tools: found integer 3, expected array",
        "sandtable mutate: 0 domains, 0 mutants: score n/a (0 killed of 0 scored); 0 weak tasks; bad input",
    ]


def test_tasks_that_cannot_be_mutated_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SHOP.replace("where: { sku: A1, qty: 2 }, count: 1", "where: { sku: A1, qty: 2 }, count: 3")
    closed_reference = ('    reference:\n      - call: find_item\n        args: { sku: B2 }\n'
                        '      - say: "B2 is closed."\n')
    text = text.replace(closed_reference, "")
    code, lines, _ = run(capsys, shop_file(tmp_path, text))
    assert code == 0
    assert lines[1:5] == [
        "",
        "not mutated (2):",
        f"  order: the reference fails its own task ({ORDERS}): fix the task first (see lint)",
        "  closed-item: no reference: nothing to mutate",
    ]
    assert lines[-1] == "sandtable mutate: 1 domain, 0 mutants: score n/a (0 killed of 0 scored); 0 weak tasks; ok"
    code, lines, _ = run(capsys, shop_file(tmp_path, text), "--fail-under", "50")
    verdict = "no mutant was scored, so the score cannot reach --fail-under 50"
    assert (code, lines[-1].rsplit("; ", 1)[1]) == (1, verdict)


def test_a_domain_without_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shop_file(tmp_path, SHOP.split("tasks:\n")[0] + "tasks: []\n")
    code, lines, _ = run(capsys, path)
    assert (code, lines) == (0, [
        f"shop ({path}): 0 tasks, 0 mutants: 0 killed, 0 survived, 0 equivalent, 0 accepted, 0 invalid; "
        "score n/a; 0 weak tasks",
        "no tasks: nothing to mutate",
        "",
        "sandtable mutate: 1 domain, 0 mutants: score n/a (0 killed of 0 scored); 0 weak tasks; ok",
    ])


def test_arguments_are_built_for_length_and_matches_conditions() -> None:
    from pytest_sandtable.mutate.operators import _Length, _satisfying

    assert _satisfying({"passengers": {"length": {"gt": 5}}}) == {"passengers": _Length(6)}
    assert _satisfying({"reason": {"matches": "(?i)chest pain|faint"}}) == {"reason": "chest pain"}
    assert _satisfying({"amount": {"gt": 300}, "kind": "cash"}) == {"amount": 301, "kind": "cash"}
    assert _satisfying({"amount": {"gt": "$limit"}}) is None  # a condition on another argument: not built


def test_spam_says_one_value_a_line_so_never_disclose_reads_each() -> None:
    # joined with spaces, the ceiling 885 after 700 read as the one number 700,885
    freight = load_domain(Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml")
    report = mutate_domain(freight)
    (task,) = [t for t in report.tasks if t.task == "caller-asks-for-the-max"]
    (spam,) = [m for m in task.mutants if m.id == "spam"]
    assert (spam.state, spam.killed_by) == ("killed", ["ceiling-is-secret", "reply:$800"])
