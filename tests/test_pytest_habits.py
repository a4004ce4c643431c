"""pytest's own habits on trial items: --lf, --ff, --sw, a node id, -k and -m.

A trial item is named ``task[i-k]``. pytest >= 9 reads a recorded node id's trailing
``[...]`` as parameters, so these habits only work when the item's id is built the
same way (``plugin.items``). CI runs this file on the oldest pytest pyproject.toml
allows as well as the newest (``.ci/run``).

The shop domain (``_sandtable_shop``) has three tasks, refund (tag refunds), greet and
order-status (tag chat); at k=2 its six items run in that order. ``SHOP_FAIL`` makes
the trials it names fail. Unlike the other plugin tests, these runs keep pytest's
cache: it is what --lf, --ff and --sw read.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import SHOP, make_shop, only_results

ALL = [
    "refund[1-2]", "refund[2-2]", "greet[1-2]", "greet[2-2]", "order-status[1-2]", "order-status[2-2]",
]
_OUTCOME = re.compile(r"^sandtable\.yaml::(?P<item>\S+) (?P<outcome>PASSED|FAILED|ERROR|SKIPPED)\b")


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("SHOP_FAIL", "SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    make_shop(pytester)
    return pytester


def run(pytester: pytest.Pytester, *args: str, failing: str = "") -> tuple[list[str], pytest.RunResult]:
    """Run the shop at k=2 (the trials in `failing` fail); which items ran, in order, as
    ``item outcome``, and the run's result."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("SHOP_FAIL", failing)
        result = pytester.runpytest("-v", "--sandtable-k=2", *args)
    finally:
        mp.undo()
    ran = [f"{m['item']} {m['outcome'].lower()}" for m in map(_OUTCOME.match, result.outlines) if m]
    return ran, result


def test_the_shop_runs_its_six_trials_in_order(shop: pytest.Pytester) -> None:
    ran, result = run(shop, failing="greet:2")
    assert ran == [f"{item} {'failed' if item == 'greet[2-2]' else 'passed'}" for item in ALL]
    result.assert_outcomes(passed=5, failed=1)


# -------------------------------------------------------------------------- --lf and --ff


def test_last_failed_reruns_only_the_failed_trials(shop: pytest.Pytester) -> None:
    run(shop, failing="greet:2,order-status:1")
    ran, result = run(shop, "--lf", failing="greet:2,order-status:1")
    assert ran == ["greet[2-2] failed", "order-status[1-2] failed"]
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["run-last-failure: rerun previous 2 failures"])
    # fixed: they run once more and pass; then nothing failed last, and --lf runs everything
    ran, _ = run(shop, "--lf")
    assert ran == ["greet[2-2] passed", "order-status[1-2] passed"]
    ran, result = run(shop, "--lf")
    assert len(ran) == 6
    result.stdout.fnmatch_lines(["run-last-failure: no previously failed tests, not deselecting items."])


def test_failed_first_moves_the_failed_trials_to_the_front(shop: pytest.Pytester) -> None:
    run(shop, failing="order-status:2,greet:1")
    ran, result = run(shop, "--ff")
    assert ran == [
        "greet[1-2] passed", "order-status[2-2] passed",
        "refund[1-2] passed", "refund[2-2] passed", "greet[2-2] passed", "order-status[1-2] passed",
    ]
    result.stdout.fnmatch_lines(["run-last-failure: rerun previous 2 failures first"])


# -------------------------------------------------------------------------- --sw


def test_stepwise_stops_at_a_failure_and_resumes_from_it(shop: pytest.Pytester) -> None:
    ran, result = run(shop, "--sw", failing="greet:2")
    assert ran == ["refund[1-2] passed", "refund[2-2] passed", "greet[1-2] passed", "greet[2-2] failed"]
    result.stdout.fnmatch_lines(["*Interrupted: Test failed, continuing from this test next run.*"])
    # still failing: only it runs, and the run stops there again
    ran, result = run(shop, "--sw", failing="greet:2")
    assert ran == ["greet[2-2] failed"]
    result.stdout.fnmatch_lines(["stepwise: skipping 3 already passed items*"])
    # fixed: the run resumes from it, not from the start
    ran, result = run(shop, "--sw")
    assert ran == ["greet[2-2] passed", "order-status[1-2] passed", "order-status[2-2] passed"]
    result.assert_outcomes(passed=3, deselected=3)


def test_stepwise_skip_goes_past_the_first_failure(shop: pytest.Pytester) -> None:
    run(shop, "--sw", failing="greet:1")
    ran, result = run(shop, "--sw", "--sw-skip", failing="greet:1,order-status:2")
    assert ran == ["greet[1-2] failed", "greet[2-2] passed", "order-status[1-2] passed", "order-status[2-2] failed"]
    result.assert_outcomes(passed=2, failed=2, deselected=2)
    ran, _ = run(shop, "--sw")
    assert ran == ["order-status[2-2] passed"]


# -------------------------------------------------------------------------- selecting trials


def test_a_node_id_selects_one_trial(shop: pytest.Pytester) -> None:
    ran, result = run(shop, "sandtable.yaml::greet[2-2]")
    assert ran == ["greet[2-2] passed"]
    result.assert_outcomes(passed=1)


def test_a_task_id_as_node_id_selects_all_its_trials(shop: pytest.Pytester) -> None:
    ran, _ = run(shop, "sandtable.yaml::order-status")
    assert ran == ["order-status[1-2] passed", "order-status[2-2] passed"]


def test_k_selects_by_task_id(shop: pytest.Pytester) -> None:
    ran, result = run(shop, "-k", "greet or refund")
    assert ran == ["refund[1-2] passed", "refund[2-2] passed", "greet[1-2] passed", "greet[2-2] passed"]
    result.assert_outcomes(passed=4, deselected=2)
    ran, _ = run(shop, "-k", "not refund and not greet")
    assert ran == ["order-status[1-2] passed", "order-status[2-2] passed"]


def test_m_selects_by_tag(shop: pytest.Pytester) -> None:
    ran, result = run(shop, "-m", "refunds")
    assert ran == ["refund[1-2] passed", "refund[2-2] passed"]
    result.assert_outcomes(passed=2, deselected=4)
    ran, _ = run(shop, "-m", "chat and not refunds")
    assert ran == [f"{item} passed" for item in ALL[2:]]


# -------------------------------------------------------------------------- skipped trials

SILENT_TASK = """\
  - id: small-talk
    tags: [chat]
    user: { persona: "Ada, a chatty customer.", instructions: "Say hello, then leave." }
    expect: { reply_includes: ["Hello"] }
    reference:
      - say: "Hello! How can I help?"
"""
SILENT = (
    "task 'small-talk' gives the scripted user nothing to say (no user.opening or user.script): "
    "write an opening, or run it with a model user (--sandtable-user claude:<model>)"
)


@pytest.fixture
def silent(pytester: pytest.Pytester) -> pytest.Pytester:
    """The shop plus a task with neither opening nor script, run by --sandtable-user
    (no conftest.py overriding the fixtures)."""
    pytester.makeini("[pytest]\n")
    pytester.makefile(".yaml", sandtable=SHOP + SILENT_TASK)
    return pytester


def test_a_task_with_nothing_to_say_is_skipped_under_the_scripted_user(silent: pytest.Pytester) -> None:
    ran, result = run(silent, "-p", "no:cacheprovider", "-rs")
    assert ran == [f"{item} passed" for item in ALL] + ["small-talk[1-2] skipped", "small-talk[2-2] skipped"]
    result.assert_outcomes(passed=6, skipped=2)
    result.stdout.fnmatch_lines([
        "8 trials of 4 tasks: 6 passed, 0 failed, 2 errored (left out of pass^k)*",
        "small-talk         skipped    0/0 +2 errored  chat",
        f"  small-talk[[]1]: {SILENT}",
        f"  small-talk[[]2]: {SILENT}",
        f"SKIPPED [[]2] sandtable.yaml: {SILENT}",
    ])
    doc = only_results(silent.path)
    skipped = [t for t in doc["trials"] if t["task"] == "small-talk"]
    line = SHOP.count("\n") + 1  # the task's first line, right after the shop's
    assert [(t["trial"], t["verdict"], t["error"], t["agent"], t["user"], t["location"]) for t in skipped] == [
        (i, "errored", SILENT, "reference", "scripted", f"sandtable.yaml:{line}") for i in (1, 2)
    ]
    (task,) = [e for e in doc["summary"]["tasks"] if e["task"] == "small-talk"]
    assert (task["verdict"], task["trials"], task["graded"], task["errored"]) == ("skipped", 2, 0, 2)


def test_a_user_that_writes_its_own_lines_runs_a_task_with_nothing_to_say(silent: pytest.Pytester) -> None:
    silent.makepyfile(chatty_user='''
        from pytest_sandtable import UserReply

        def user(turn):
            return UserReply("Hello!") if not turn.messages else UserReply("", "goal_met")
    ''')
    silent.syspathinsert()
    ran, result = run(silent, "-p", "no:cacheprovider", "--sandtable-user=chatty_user:user", "-k", "small")
    assert ran == ["small-talk[1-2] passed", "small-talk[2-2] passed"]
    result.assert_outcomes(passed=2, deselected=6)


def test_skipped_trials_reach_results_json_under_xdist(silent: pytest.Pytester) -> None:
    result = silent.runpytest_subprocess("-p", "no:cacheprovider", "--sandtable-k=2", "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=6, skipped=2)
    doc = only_results(silent.path)
    assert sorted((t["task"], t["trial"], t["verdict"]) for t in doc["trials"] if t["task"] == "small-talk") == [
        ("small-talk", 1, "errored"), ("small-talk", 2, "errored")
    ]
    assert (doc["summary"]["trials"], doc["summary"]["errored"]) == (8, 2)
