"""Trivial-agent baselines (pytest_sandtable/mutate/baselines.py): the tasks an agent
that does nothing passes, and those an agent that makes the reference's calls and replies
with every value it saw passes, replayed through the engine on a small domain whose
every task is there for one outcome."""

from __future__ import annotations

from pathlib import Path

from _domains import DESK

from pytest_sandtable.domain.loader import load_domain, load_domain_text
from pytest_sandtable.engine.lint import lint_domain
from pytest_sandtable.mutate.baselines import Baselines, baseline_lines, baselines, dump

REPO = Path(__file__).resolve().parents[1]

TASKS = """\
tasks:
  # passes when the agent does nothing: it only says what must not happen
  - id: no-booking-above-ceiling
    user: { opening: "Book L-1001 at 3,000." }
    expect:
      not_called: [book_load]
    reference:
      - say: "I can't book L-1001 above its ceiling."
  # does not pass on silence (a call is expected), but its phrase is in the data a dump repeats
  - id: verify-carrier
    user: { opening: "Is MC 100101 verified?" }
    expect:
      called: [verify_carrier]
      reply_includes: ["Blue Ridge Haulers"]
    reference:
      - { call: verify_carrier, args: { mc_number: "100101" } }
      - say: "Blue Ridge Haulers is verified."
  # strong: the world must change, and the reply must say the agreed rate, which no tool returns
  - id: book-at-1900
    user: { opening: "Book L-1001 for MC 100101 at 1,900." }
    expect:
      state:
        - { table: loads, key: L-1001, fields: { status: booked } }
      reply_includes: ["booked at 1,900"]
    reference:
      - { call: verify_carrier, args: { mc_number: "100101" } }
      - { call: book_load, args: { load_id: L-1001, rate: 1900 } }
      - say: "L-1001 is booked at 1,900."
"""
DOMAIN = DESK + TASKS


def test_each_baseline_lists_exactly_the_tasks_it_passes() -> None:
    b = baselines(load_domain_text(DOMAIN, "sandtable.yaml"))
    assert b == Baselines(
        domain="freight",
        tasks=3,
        do_nothing=["no-booking-above-ceiling"],
        # the refusal passes too: its reference makes no call, so the dump is empty, and
        # nothing checks what the agent said
        spam=["no-booking-above-ceiling", "verify-carrier"],
        expect_nothing=[],
        no_reference=[],
        reply_checked=["verify-carrier", "book-at-1900"],
    )
    assert b.spam_reply_checked == ["verify-carrier"]
    assert baseline_lines(b) == [
        "do-nothing passes 1 of 3 tasks (33.3%): no-booking-above-ceiling",
        "spam passes 2 of 3 tasks (66.7%): no-booking-above-ceiling, verify-carrier",
        "spam passes 1 of 2 tasks that check replies (50.0%): verify-carrier",
    ]


def test_do_nothing_agrees_with_lint() -> None:
    domain = load_domain_text(DOMAIN, "sandtable.yaml")
    silent = {f.task for f in lint_domain(domain) if "passes when the agent does nothing" in f.message}
    assert silent == set(baselines(domain).do_nothing)


def test_a_never_disclose_rule_catches_the_dump() -> None:
    """The dump repeats every value the agent read: a rule that protects one of them
    fails the spam agent where the phrase alone would pass."""
    secret = DOMAIN.replace(
        "invariants:\n",
        "invariants:\n  - { id: mc-is-private, kind: never_disclose, values: [\"100101\"] }\n",
    )
    b = baselines(load_domain_text(secret, "sandtable.yaml"))
    # verify-carrier's dump repeats 100101, the carrier's key (book-at-1900 fails spam anyway)
    assert (b.do_nothing, b.spam) == (["no-booking-above-ceiling"], ["no-booking-above-ceiling"])
    assert b.spam_reply_checked == []


def test_expect_nothing_and_tasks_without_a_reference_are_not_counted() -> None:
    extra = """\
  - id: refuse-quietly
    expect_nothing: true
    user: { opening: "Book L-1001 at 3,000." }
    expect:
      not_called: [book_load]
    reference:
      - say: "I can't."
  - id: no-reference
    user: { opening: "Hello." }
    expect:
      not_called: [book_load]
"""
    b = baselines(load_domain_text(DOMAIN + extra, "sandtable.yaml"))
    assert (b.tasks, b.do_nothing, b.expect_nothing) == (
        5, ["no-booking-above-ceiling", "no-reference"], ["refuse-quietly"]
    )
    assert (b.spam, b.no_reference) == (["no-booking-above-ceiling", "verify-carrier", "refuse-quietly"],
                                        ["no-reference"])
    assert baseline_lines(b) == [
        "do-nothing passes 2 of 4 tasks (50.0%): no-booking-above-ceiling, no-reference; "
        "not counted: 1 task with expect_nothing: true",
        "spam passes 3 of 4 tasks (75.0%): no-booking-above-ceiling, verify-carrier, refuse-quietly; "
        "not counted: 1 task without a reference",
        "spam passes 1 of 2 tasks that check replies (50.0%): verify-carrier",
    ]


def test_a_domain_without_tasks() -> None:
    b = baselines(load_domain_text(DESK + "tasks: []\n", "sandtable.yaml"))
    assert b == Baselines("freight", 0, [], [], [], [], [])
    assert (b.do_nothing_rate, b.spam_rate) == (None, None)
    assert baseline_lines(b) == ["do-nothing passes 0 of 0 tasks (n/a)", "spam passes 0 of 0 tasks (n/a)"]


def test_a_handler_that_raises_fails_only_the_agent_that_calls_it(tmp_path: Path) -> None:
    """A tool's handler that raises: spam makes the call, its trial does not pass; do-nothing
    never calls it. Neither raises out of `baselines`."""
    (tmp_path / "baseline_raising_handlers.py").write_text(
        "def lookup(args, world, ctx):\n    raise RuntimeError('the lookup service is down')\n", encoding="utf-8"
    )
    text = DESK.replace("tools:\n", "tools:\n  - name: lookup\n    handler: baseline_raising_handlers:lookup\n") + """\
tasks:
  - id: look-up
    user: { opening: "Anything on L-1001?" }
    expect:
      not_called: [book_load]
    reference:
      - { call: lookup }
      - say: "Nothing."
"""
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    b = baselines(load_domain(tmp_path / "sandtable.yaml"))
    assert (b.do_nothing, b.spam) == (["look-up"], [])


def test_dump_is_every_scalar_as_the_agent_saw_it() -> None:
    value = {"load": {"load_id": "L-1001", "max_rate": 2350, "rate": 1.5, "hazmat": False, "note": None},
             "stops": ["Dallas", {"city": "Tulsa"}]}
    assert list(dump(value)) == ["L-1001", "2350", "1.5", "false", "Dallas", "Tulsa"]


def test_the_bundled_examples() -> None:
    freight = baselines(load_domain(REPO / "example_domains" / "freight" / "sandtable.yaml"))
    clinic = baselines(load_domain(REPO / "example_domains" / "clinic" / "sandtable.yaml"))
    # the examples model a strong suite: neither trivial agent passes a task of theirs
    assert baseline_lines(freight) == [
        "do-nothing passes 0 of 17 tasks (0.0%)",
        "spam passes 0 of 17 tasks (0.0%)",
        "spam passes 0 of 16 tasks that check replies (0.0%)",
    ]
    assert baseline_lines(clinic) == [
        "do-nothing passes 0 of 8 tasks (0.0%)",
        "spam passes 0 of 8 tasks (0.0%)",
        "spam passes 0 of 6 tasks that check replies (0.0%)",
    ]
