"""A trial is recorded on the cheapest path that gives the same results: in the process
that ran it, straight from its item to the spool with the report of the phase that tells
it (``Recorder.trial_ended``, ``Recorder.pytest_runtest_logreport``), its line made in one
pass of the C encoder (``report.safe.fresh_line``, ``TrialSpool.add_fresh``). The line on
disk and the light trial in memory are exactly those of the path a carried trial takes,
whatever the trial holds; a rerun trial counts once; the item, the report and every other
plugin are left holding nothing of it."""

from __future__ import annotations

import copy
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.safe import fresh_line, portable_trial

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, SHOP, make_shop, only_results

Spooled = Callable[..., tuple[list[bytes], list[TrialResult]]]  # the spooled fixture (conftest.py)
FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"
# secrets: found as written, only HTML-escaped (&amp;), with letters JSON escapes as ASCII
# (é), among a number's digits
SECRETS = ["sk-test-0123456789", "ab&cd-1234", "clé-secrète-42", "98765432"]



def _reply(t: TrialResult, text: str) -> None:
    t.transcript = [*t.transcript, {"role": "agent", "text": text, "turn": 9}]


def _circular(t: TrialResult) -> None:
    loop: list[object] = []
    loop.append(loop)
    t.calls = [{**t.calls[0], "result": loop}]


# (what a trial holds, how it is made from a usual one, whether the one pass stores it)
CASES: list[tuple[str, Callable[[TrialResult], None], bool]] = [
    ("a usual trial", lambda t: None, True),
    ("a model's usage as the engine records it",
     lambda t: setattr(t, "usage", {"agent": {"claude-x": {"input": 3, "output": 0}}, "user": {}}), True),
    ("usage of a side the walk does not name", lambda t: setattr(t, "usage", {"agent": {}, "user": {}, "x": (1,)}),
     False),
    ("usage of one side", lambda t: setattr(t, "usage", {"agent": {}}), True),
    ("counters that are not whole numbers", lambda t: setattr(t, "usage", {"agent": {"m": {"input": 3.0}}}), False),
    ("a counter below zero", lambda t: setattr(t, "usage", {"agent": {"m": {"input": -1}}}), False),
    ("a model with no name", lambda t: setattr(t, "usage", {"agent": {None: {"input": 1}}, "user": {}}), False),
    ("a model with a blank name", lambda t: setattr(t, "usage", {"agent": {" ": {"input": 1}}}), False),
    ("usage that is not a mapping", lambda t: setattr(t, "usage", None), False),
    ("a secret in a reply", lambda t: _reply(t, "the key is sk-test-0123456789"), False),
    ("a secret only in its HTML-escaped form", lambda t: _reply(t, "see ab&amp;cd-1234"), False),
    ("a secret with letters beyond ASCII", lambda t: _reply(t, "see clé-secrète-42"), False),
    ("a secret in the digits of a number", lambda t: t.calls[0].update(result=1987654321), False),
    ("a lone surrogate", lambda t: _reply(t, "half \ud800 a pair"), False),
    ("a surrogate pair in halves", lambda t: _reply(t, "a smile \ud83d\ude00"), False),
    ("a reply over the cap", lambda t: _reply(t, "x" * 30_000), False),
    ("many replies, together over the cap", lambda t: [_reply(t, "y" * 5_000) for _ in range(5)], False),
    ("a tool argument over the cap", lambda t: t.calls[0]["args"].update(note="z" * 25_000), False),
    ("a latency that is not a number", lambda t: setattr(t, "latency", [float("nan")]), False),
    ("a structure that contains itself", _circular, False),
    ("a value that is not JSON", lambda t: t.calls[0].update(result=object()), False),
]


@pytest.mark.parametrize(("case", "make", "one_pass"), CASES, ids=[c[0] for c in CASES])
def test_a_fresh_trial_is_stored_as_a_carried_one(
    freight_trials: list[TrialResult], spooled: Spooled, case: str, make: Callable[[TrialResult], None], one_pass: bool
) -> None:
    """``add_fresh(t)`` writes the bytes and keeps the light trial that ``add_stored`` of
    the dict a report would carry does (and that the walk gives), whether or not the one
    pass could take it."""
    made = []
    for t in freight_trials:
        fresh = TrialResult.from_dict(copy.deepcopy(t.to_dict()))
        make(fresh)
        made.append(fresh)
    carried = spooled("carried", lambda s: [s.add_stored(portable_trial(t)) for t in made], SECRETS)
    fresh = spooled("fresh", lambda s: [s.add_fresh(t) for t in made], SECRETS)
    assert fresh[0] == carried[0]  # byte for byte on disk
    assert fresh[1] == carried[1]  # the same light trials
    assert sorted(json.loads(line)["task"] for line in fresh[0]) == sorted(t.task for t in freight_trials)
    assert [fresh_line(t, SECRETS) is not None for t in made] == [one_pass] * len(made)


def test_a_secret_is_redacted_on_the_fresh_path(freight_trials: list[TrialResult], spooled: Spooled) -> None:
    """What makes the one pass give way is then redacted, in every form it takes."""
    t = TrialResult.from_dict(copy.deepcopy(freight_trials[0].to_dict()))
    _reply(t, "keys: sk-test-0123456789, ab&amp;cd-1234, clé-secrète-42")
    (line,), _ = spooled("fresh", lambda s: s.add_fresh(t), SECRETS)
    text = json.loads(line)["transcript"][-1]["text"]
    assert text == "keys: [redacted], [redacted], [redacted]"


# --------------------------------------------------------------------------- in pytest

# after the run, on the controller or the only process: what any report, any other
# plugin's logreport and any item still held of a trial
HOLDERS = """
import pytest

SEEN = []


@pytest.hookimpl(tryfirst=True)  # as early as a plugin can ask: the recorder, registered later, still comes first
def pytest_runtest_logreport(report):
    SEEN.append(hasattr(report, "sandtable"))


def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput"):
        return
    reports = [r for key in ("passed", "failed", "error", "skipped") for r in terminalreporter.stats.get(key, [])]
    carried = sum(hasattr(r, "sandtable") for r in reports)
    held = sum(getattr(it, "sandtable_result", None) is not None for it in terminalreporter._session.items)
    print(f"HOLDERS logged={len(SEEN)} seen-carrying={sum(SEEN)} kept-carrying={carried} items-holding={held}")
"""


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("SHOP_FAIL", "SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    path = make_shop(pytester)
    conftest = path.parent / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + HOLDERS, encoding="utf-8")
    return path


@pytest.mark.parametrize("workers", ["0", "2"])
def test_nothing_but_the_spool_holds_a_trial(
    pytester: pytest.Pytester, shop: Path, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """Each trial is recorded once, passed, failed and errored alike; no other plugin's
    logreport sees it on a report (the recorder's comes first), and neither the reports
    pytest keeps nor the items hold it after. Under xdist the worker's report carries it
    to the controller, which takes it off there."""
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    monkeypatch.setenv("SHOP_USER_FAIL", "refund:1")
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=3", "-n", workers)
    result.assert_outcomes(passed=7, failed=1, errors=1)
    result.stdout.fnmatch_lines(["HOLDERS logged=26 seen-carrying=0 kept-carrying=0 items-holding=0"])
    doc = only_results(pytester.path)
    verdicts = sorted((t["task"], t["trial"], t["verdict"]) for t in doc["trials"])
    assert verdicts == [("greet", 1, "passed"), ("greet", 2, "failed"), ("greet", 3, "passed"),
                        ("order-status", 1, "passed"), ("order-status", 2, "passed"), ("order-status", 3, "passed"),
                        ("refund", 1, "errored"), ("refund", 2, "passed"), ("refund", 3, "passed")]


def test_a_phase_that_never_comes_leaves_nothing_held(pytester: pytest.Pytester, shop: Path) -> None:
    """With --setup-only the trial runs (in setup) and the call phase that would tell it
    never comes: its teardown report takes the result off the item all the same."""
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--setup-only")
    result.stdout.fnmatch_lines(["HOLDERS logged=12 seen-carrying=0 kept-carrying=0 items-holding=0"])


# pytest-rerunfailures' protocol, as it runs an item (its 16.x ``pytest_runtest_protocol``):
# all three phases made, then logged; a failed phase logged as "rerun", and the item run again
RERUNS = """
from _pytest.runner import runtestprotocol

import pytest

FLAKY = {"greet:2", "refund:1"}  # fail the first time only
TRIED = set()


class FlakyAgent(ShopAgent):
    def for_task(self, task):
        return FlakyAgent(task.reference)

    def __call__(self, turn):
        key = f"{turn.trial.task_id}:{turn.trial.trial}"
        if key in FLAKY and key not in TRIED:
            TRIED.add(key)
            return "Sorry, I cannot help with that."
        return super().__call__(turn)


@pytest.fixture(scope="session")
def sandtable_agent():
    return FlakyAgent()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for run in (1, 2):
        for report in runtestprotocol(item, nextitem=nextitem, log=False):
            if run == 2 or not report.failed:
                item.ihook.pytest_runtest_logreport(report=report)
                continue
            report.outcome = "rerun"
            item.ihook.pytest_runtest_logreport(report=report)
            break
        else:
            break
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_report_teststatus(report):
    if report.outcome == "rerun":
        return "rerun", "R", "RERUN"
"""


def test_a_rerun_trial_counts_once_its_final_run(pytester: pytest.Pytester, shop: Path) -> None:
    """Under pytest-rerunfailures' protocol an item's reports are all made before any is
    logged, and a failed first run is logged as "rerun": each trial is recorded once, as
    its final run came out, and nothing is left held. (pytest-rerunfailures itself never
    reruns a trial, tests/test_plugin_interplay.py; the protocol here stands for any plugin
    that would, so the real one is left out.)"""
    conftest = shop.parent / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + RERUNS, encoding="utf-8")
    result = pytester.runpytest(*PLUGIN_ARGS, "-p", "no:rerunfailures", "--sandtable-k=2", "--junitxml=junit.xml")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*6 passed, 2 rerun*"])
    result.stdout.fnmatch_lines(["HOLDERS logged=22 seen-carrying=0 kept-carrying=0 items-holding=0"])
    doc = only_results(pytester.path)
    assert sorted((t["task"], t["trial"], t["verdict"]) for t in doc["trials"]) == [
        ("greet", 1, "passed"), ("greet", 2, "passed"), ("order-status", 1, "passed"), ("order-status", 2, "passed"),
        ("refund", 1, "passed"), ("refund", 2, "passed")]
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    verdicts = {c.get("name"): [p.get("value") for p in c.iter("property") if p.get("name") == "sandtable.verdict"]
                for c in cases}
    assert verdicts == {name: ["passed"] for name in (
        "greet[1-2]", "greet[2-2]", "order-status[1-2]", "order-status[2-2]", "refund[1-2]", "refund[2-2]")}


def test_junit_properties_come_from_the_workers(pytester: pytest.Pytester, shop: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Set on the item when its trial ends, the properties ride in the worker's reports."""
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=2", "-n", "2", "--junitxml=junit.xml")
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert props["greet[2-2]"] == {
        "sandtable.domain": "shop", "sandtable.task": "greet", "sandtable.trial": "2", "sandtable.tags": "chat",
        "sandtable.verdict": "failed", "sandtable.critical": "false",
    }
    assert sorted(p["sandtable.verdict"] for p in props.values()) == ["failed", *["passed"] * 5]


def test_without_the_recorder_the_trials_still_run(pytester: pytest.Pytester, shop: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With the recorder blocked nothing records the run, and nothing breaks for it."""
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "-p", "no:sandtable-recorder")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.no_fnmatch_line("*sandtable: results in*")
    assert not (pytester.path / ".sandtable").exists()


# what pytest-xdist's --dist loadgroup does to a grouped item's node id (on pytest 8; on
# pytest 9 its rename has no effect), here to every item
RENAMED = """
def pytest_collection_modifyitems(items):
    for item in items:
        parts = getattr(item, "_id", None)  # pytest 9 keeps a node id in parts, pytest 8 as text
        if parts is None or isinstance(parts, str):
            item._nodeid = item.nodeid + "@desk"
        else:
            item._id = type(parts).parse(item.nodeid + "@desk")
"""


def test_a_skipped_trial_is_recorded_under_its_items_final_node_id(pytester: pytest.Pytester) -> None:
    """A task the scripted user has nothing to say for is skipped, its trials held from
    collection on; a node id changed after that (as --dist loadgroup changes it) still
    finds them."""
    pytester.makeini("[pytest]\n")
    silent = SHOP.replace('    user: { opening: "Hello there!" }\n', '    user: { persona: "A quiet caller." }\n')
    assert silent != SHOP
    (pytester.path / "sandtable.yaml").write_text(silent, encoding="utf-8")
    (pytester.path / "conftest.py").write_text(RENAMED, encoding="utf-8")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--sandtable-agent=reference", "-rs")
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [[]2] sandtable.yaml: task 'greet' gives the scripted user nothing to say*"])
    doc = only_results(pytester.path)
    assert sorted((t["task"], t["trial"], t["verdict"]) for t in doc["trials"]) == [
        ("greet", 1, "errored"), ("greet", 2, "errored"), ("order-status", 1, "passed"), ("order-status", 2, "passed"),
        ("refund", 1, "passed"), ("refund", 2, "passed")]


def test_skipped_trials_of_a_file_collected_twice_are_each_recorded(pytester: pytest.Pytester) -> None:
    """With --keep-duplicates a file given twice is collected twice: its items share node
    ids, and the skipped trials held from collection on are each recorded, not one of a pair."""
    pytester.makeini("[pytest]\n")
    silent = SHOP.replace('    user: { opening: "Hello there!" }\n', '    user: { persona: "A quiet caller." }\n')
    (pytester.path / "sandtable.yaml").write_text(silent, encoding="utf-8")
    result = pytester.runpytest(*PLUGIN_ARGS, "--sandtable-k=2", "--sandtable-agent=reference", "--keep-duplicates",
                                "sandtable.yaml", "sandtable.yaml")
    result.assert_outcomes(passed=8, skipped=4)
    doc = only_results(pytester.path)
    assert sorted((t["task"], t["trial"], t["verdict"]) for t in doc["trials"]) == sorted(
        2 * [("greet", 1, "errored"), ("greet", 2, "errored"), ("order-status", 1, "passed"),
             ("order-status", 2, "passed"), ("refund", 1, "passed"), ("refund", 2, "passed")])
