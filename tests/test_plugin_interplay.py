"""Trials beside other pytest plugins: pytest-rerunfailures never launders a failed
attempt, trial ids are unique, pytest-timeout's timeout fails a hung agent's trial as the
trial timeout does, allure-pytest reads a failed trial as failed with the task's own
description and duration, pytest-repeat's --count says it does not repeat trials."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from _sandtable_shop import PLUGIN_ARGS, only_results, run_dirs

pytest_plugins = ["pytester"]

DOMAIN = """\
version: 1
name: freight
world:
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, max_rate: 2350, status: available }
tools:
  - name: book_load
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
tasks:
  - id: book
    description: A carrier books L-1001 at an acceptable rate.
    critical: true
    user: { opening: "Book L-1001 at 2100 please." }
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
"""

# An agent that fails the first attempt of every trial and books on any later one; it
# writes each trial id it is given to ids.txt. HANG makes it hang (a sync agent, in a thread).
CONFTEST = """\
import os
import threading

import pytest

SEEN = set()


def agent(turn):
    with open("ids.txt", "a", encoding="utf-8") as f:
        f.write(turn.trial.trial_id + "\\n")
    if os.environ.get("HANG"):
        threading.Event().wait(float(os.environ["HANG"]))
    key = (turn.trial.task_id, turn.trial.trial)
    if key not in SEEN:
        SEEN.add(key)
        return "No."
    turn.call_tool("book_load", {"load_id": "L-1001", "rate": 2100})
    return "Booked."


@pytest.fixture(scope="session")
def sandtable_agent():
    return agent
"""

NOT_RERUN = (
    "sandtable: pytest-rerunfailures reran no trial (3 asked for by --reruns or a flaky marker): "
    "every attempt of a task is a trial and counts; for more attempts use --sandtable-k"
)
ID = re.compile(r"^(?P<file>.+)::(?P<task>[^/]+)/(?P<trial>\d+)@(?P<run>[0-9a-f]{8})(?P<attempt>\.\d+)?$")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("conftest.py").write_text(CONFTEST, encoding="utf-8")
    return pytester


def ids(root: Path) -> list[str]:
    return root.joinpath("ids.txt").read_text(encoding="utf-8").splitlines()


def verdicts(root: Path) -> list[tuple[int, str]]:
    return sorted((t["trial"], t["verdict"]) for t in only_results(root)["trials"])


def assert_every_attempt_counted(result: pytest.RunResult, root: Path, **outcomes: int) -> None:
    assert result.ret == 1
    assert result.parseoutcomes() == (outcomes or {"failed": 3})  # no "rerun": each trial ran once
    assert result.outlines.count(NOT_RERUN) == 1
    result.stdout.fnmatch_lines(["book (critical)  failed     0/3*"])
    assert verdicts(root) == [(1, "failed"), (2, "failed"), (3, "failed")]
    assert len(ids(root)) == 3


# -- pytest-rerunfailures -------------------------------------------------------------


def test_reruns_never_rerun_a_trial(project: pytest.Pytester) -> None:
    """--reruns 2 used to show R.R.R., the critical task passed 3/3 and exit 0. A test
    function of the same run is still rerun."""
    project.makepyfile(test_other="""
        TRIES = []

        def test_flaky_function():
            TRIES.append(1)
            assert len(TRIES) > 1
    """)
    result = project.runpytest(*PLUGIN_ARGS, "-p", "no:randomly", "--sandtable-k=3", "--reruns=2")
    assert_every_attempt_counted(result, project.path, failed=3, passed=1, rerun=1)


def test_a_flaky_marker_from_a_conftest_hook_never_reruns_a_trial(project: pytest.Pytester) -> None:
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + textwrap.dedent("""
        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.flaky(reruns=2))
    """), encoding="utf-8")
    result = project.runpytest(*PLUGIN_ARGS, "-p", "no:randomly", "--sandtable-k=3")
    assert_every_attempt_counted(result, project.path)


def test_reruns_never_rerun_a_trial_under_xdist_with_a_timeout(project: pytest.Pytester) -> None:
    """xdist's worker runs the same protocol hook; pytest-timeout's wrapper still wraps it."""
    result = project.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:randomly", "--sandtable-k=3", "--reruns=2",
                                          "-n", "2", "--timeout=60")
    assert_every_attempt_counted(result, project.path)
    runs = {ID.match(i).group("run") for i in ids(project.path)}  # type: ignore[union-attr]
    assert len(runs) == 1, "the workers share the run's id"


# -- trial ids ----------------------------------------------------------------------------


def test_trial_ids_name_the_file_the_trial_and_the_run(project: pytest.Pytester) -> None:
    """The same domain in two folders, run twice: every id differs, each names its file."""
    project.path.joinpath("sandtable.yaml").unlink()
    for folder in ("east", "west"):
        project.path.joinpath(folder).mkdir()
        project.path.joinpath(folder, "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    for _ in range(2):
        project.runpytest(*PLUGIN_ARGS, "-p", "no:randomly", "--sandtable-k=2")
    seen = ids(project.path)
    assert len(seen) == 8 and len(set(seen)) == 8
    parts = [ID.match(i).groupdict() for i in seen]  # type: ignore[union-attr]
    assert [(p["file"], p["task"], p["trial"], p["attempt"]) for p in parts[:4]] == [
        ("east/sandtable.yaml", "book", "1", None), ("east/sandtable.yaml", "book", "2", None),
        ("west/sandtable.yaml", "book", "1", None), ("west/sandtable.yaml", "book", "2", None)]
    assert len({p["run"] for p in parts[:4]}) == 1 and parts[0]["run"] != parts[4]["run"]


def test_a_trial_run_again_by_another_plugin_is_a_new_attempt(project: pytest.Pytester) -> None:
    """A plugin that runs an item twice (here a conftest.py protocol, without
    pytest-rerunfailures) gives the second run an id of its own: nothing keyed on the
    first attempt's id carries into it."""
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + textwrap.dedent("""
        from _pytest.runner import runtestprotocol


        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_protocol(item, nextitem):
            runtestprotocol(item, nextitem=nextitem, log=False)
            runtestprotocol(item, nextitem=nextitem, log=False)
            return True
    """), encoding="utf-8")
    project.runpytest(*PLUGIN_ARGS, "-p", "no:randomly", "-p", "no:rerunfailures")
    first, second = ids(project.path)
    assert ID.match(first).group("attempt") is None  # type: ignore[union-attr]
    assert second == first + ".2"


# -- pytest-timeout -------------------------------------------------------------------------


HUNG = "the agent did not answer before the trial timeout of 1.5s, pytest-timeout's 2s less 0.5s to grade the trial"


def test_pytest_timeout_fails_a_hung_agent_naming_its_turn(project: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """--timeout 2 used to make the trial errored ("not graded", "stopped before the first
    agent turn"); now the trial's own deadline comes first: failed, as with
    --sandtable-trial-timeout, turn named, results.json written."""
    monkeypatch.setenv("HANG", "6")
    result = project.runpytest(*PLUGIN_ARGS, "--timeout=2")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"  runtime  runtime  * {HUNG} (turn 1)"])
    (trial,) = only_results(project.path)["trials"]
    assert trial["verdict"] == "failed"
    assert [c["detail"] for c in trial["checks"] if c["kind"] == "runtime"] == [f"{HUNG} (turn 1)"]


def test_pytest_timeouts_deadline_counts_from_the_items_start_not_the_trials(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-timeout's timer starts with the item, before its fixtures. A second spent
    setting up the agent used to leave the trial its whole 1.5 s after that, so
    pytest-timeout's 2 s came first: errored, "not graded". Now the trial's deadline is
    the item's start plus 1.5 s: failed, turn named, with the same words."""
    monkeypatch.setenv("HANG", "6")
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + textwrap.dedent("""
        import time


        @pytest.fixture(scope="session")
        def sandtable_agent():
            time.sleep(1.0)
            return agent
    """), encoding="utf-8")
    result = project.runpytest(*PLUGIN_ARGS, "--timeout=2")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    assert "Timeout" not in result.stdout.str()
    (trial,) = only_results(project.path)["trials"]
    assert trial["verdict"] == "failed"
    assert [c["detail"] for c in trial["checks"] if c["kind"] == "runtime"] == [f"{HUNG} (turn 1)"]
    assert 0.35 < trial["duration"] < 0.9  # the 0.5 s left of 1.5 s, not 1.5 s


def test_the_trials_deadline_is_what_is_left_of_pytest_timeouts_less_the_margin() -> None:
    from pytest_sandtable.plugin.interplay import ItemTimeout, trial_deadline

    assert trial_deadline(ItemTimeout(2.0), 100.0) == (1.5, 1.5)  # no start known: the whole of it
    assert trial_deadline(ItemTimeout(2.0, 100.0), 100.3) == (1.5, 1.2)
    assert trial_deadline(ItemTimeout(300.0, 100.0), 101.0) == (295.0, 294.0)  # a margin of at most 5 s
    assert trial_deadline(ItemTimeout(2.0, 100.0), 102.5) == (1.5, 0.001)  # setup took it all


def test_pytest_timeouts_thread_method_keeps_the_artefacts(project: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Its thread method used to kill the process: no summary, no results.json."""
    monkeypatch.setenv("HANG", "6")
    result = project.runpytest_subprocess(*PLUGIN_ARGS, "--timeout=2", "--timeout-method=thread")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["book (critical)  failed     0/1*", "*1 failed in *"])
    (run,) = run_dirs(project.path)
    assert (run / "results.json").is_file() and (run / "report.html").is_file()
    assert "Timeout" not in result.stdout.str()


def test_a_timeout_marker_sets_the_trials_deadline(project: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANG", "3")
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + textwrap.dedent("""
        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.timeout(1))
    """), encoding="utf-8")
    result = project.runpytest(*PLUGIN_ARGS, "--sandtable-trial-timeout=30")
    result.assert_outcomes(failed=1)
    (trial,) = only_results(project.path)["trials"]
    assert [c["detail"] for c in trial["checks"] if c["kind"] == "runtime"] == [
        "the agent did not answer before the trial timeout of 0.5s, pytest-timeout's 1s less 0.5s to grade the "
        "trial (turn 1)"]


# -- allure-pytest, pytest-repeat ------------------------------------------------------------


def test_allure_reads_a_failed_trial_as_failed_with_the_tasks_description_and_time(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to read "broken", the stand-in function's docstring, and 0 ms."""
    monkeypatch.setenv("HANG", "0.2")
    project.runpytest(*PLUGIN_ARGS, "--alluredir=allure")
    (path,) = project.path.joinpath("allure").glob("*-result.json")
    test = json.loads(path.read_text(encoding="utf-8"))
    assert (test["name"], test["status"]) == ("book[1-1]", "failed")
    assert test["description"] == "A carrier books L-1001 at an acceptable rate."
    assert test["statusDetails"]["message"].startswith("pytest_sandtable.plugin.items.TrialFailed: book")
    assert test["stop"] - test["start"] >= 200


def test_count_says_it_does_not_repeat_trials(project: pytest.Pytester) -> None:
    result = project.runpytest(*PLUGIN_ARGS, "--count=2")
    result.assert_outcomes(failed=1)
    assert result.outlines.count(
        "sandtable: --count 2 (pytest-repeat) repeats test functions, not trials; "
        "for 2 times the 1 trial of each task use --sandtable-k 2") == 1
    result = project.runpytest(*PLUGIN_ARGS, "--count=3", "--sandtable-k=2")
    result.assert_outcomes(failed=2)
    assert result.outlines.count(
        "sandtable: --count 3 (pytest-repeat) repeats test functions, not trials; "
        "for 3 times the 2 trials of each task use --sandtable-k 6") == 1
