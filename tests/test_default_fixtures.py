"""A trial item whose fixtures are only the plugin's two session-scoped defaults takes
their set-up values without pytest's per-item lookup (plugin/items.py,
``_plugin_defaults_only``). Whatever else takes part (an autouse fixture, an override in
a conftest.py or a plugin, an option that shows or replaces fixture set-up) sends every
item of the file the usual way. What a trial sees is the same either way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"
ONE_TASK = ["-k", "book-at-posted-rate", "--sandtable-agent=reference", "-p", "no:cacheprovider"]

# every trial item's fixture values, and how each came: the file's defaults, if it has them
WATCH = """
import pytest

SEEN = []


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    if getattr(item, "is_sandtable_trial", False):
        defaults = item.parent.sandtable_defaults is not None
        SEEN.append((item.name, type(item.funcargs["sandtable_agent"]).__name__,
                     type(item.funcargs["sandtable_user"]).__name__, defaults))


def pytest_terminal_summary(terminalreporter):
    for line in SEEN:
        terminalreporter.write_line(f"seen {line}")
"""


def _domain(pytester: pytest.Pytester) -> None:
    shutil.copy(FREIGHT, pytester.path / "sandtable.yaml")


def _seen(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("seen ")]


def test_the_defaults_reach_every_trial_as_pytest_set_them_up(pytester: pytest.Pytester) -> None:
    _domain(pytester)
    pytester.makeconftest(WATCH)
    result = pytester.runpytest("--sandtable-k=3", "--setup-show", *ONE_TASK)
    result.assert_outcomes(passed=3)
    # --setup-show: pytest's own way, which sets each default up once for the session
    assert result.stdout.str().count("SETUP    S sandtable_agent") == 1
    assert result.stdout.str().count("SETUP    S sandtable_user") == 1
    assert _seen(result) == [
        f"seen ('book-at-posted-rate[{i}-3]', 'ReferenceAgent', 'ScriptedUser', False)" for i in (1, 2, 3)
    ]
    result = pytester.runpytest("--sandtable-k=3", *ONE_TASK)
    result.assert_outcomes(passed=3)
    assert _seen(result) == [
        f"seen ('book-at-posted-rate[{i}-3]', 'ReferenceAgent', 'ScriptedUser', True)" for i in (1, 2, 3)
    ]


def test_an_autouse_fixture_runs_for_every_trial(pytester: pytest.Pytester) -> None:
    _domain(pytester)
    pytester.makeconftest(WATCH + """

RAN = []


@pytest.fixture(autouse=True)
def around_each(request):
    RAN.append(request.node.name)
    yield
    RAN.append("after " + request.node.name)


def pytest_sessionfinish(session):
    print("ran", RAN)
""")
    result = pytester.runpytest("--sandtable-k=2", "-s", *ONE_TASK)
    result.assert_outcomes(passed=2)
    assert ("ran ['book-at-posted-rate[1-2]', 'after book-at-posted-rate[1-2]', "
            "'book-at-posted-rate[2-2]', 'after book-at-posted-rate[2-2]']") in result.stdout.str()
    assert _seen(result)[-1] == "seen ('book-at-posted-rate[2-2]', 'ReferenceAgent', 'ScriptedUser', False)"


@pytest.mark.parametrize("scope", ["session", "function"])
def test_an_agent_from_a_plugin_replaces_the_default(pytester: pytest.Pytester, scope: str) -> None:
    """An override that is not a conftest.py's own fixture (a plugin module a conftest.py
    names in ``pytest_plugins``), of either scope: each trial gets it."""
    _domain(pytester)
    pytester.makepyfile(desk_plugin=f"""
import pytest


class Desk:
    name = "plugin-desk"

    def __call__(self, turn):
        return "no booking from the plugin's desk"


@pytest.fixture(scope={scope!r})
def sandtable_agent():
    return Desk()
""")
    pytester.makeconftest('pytest_plugins = ["desk_plugin"]\n' + WATCH)
    pytester.syspathinsert()
    result = pytester.runpytest("--sandtable-k=2", *ONE_TASK)
    result.assert_outcomes(failed=2)
    assert _seen(result) == [
        f"seen ('book-at-posted-rate[{i}-2]', 'Desk', 'ScriptedUser', False)" for i in (1, 2)
    ]



def test_a_fixture_added_to_the_items_after_collection_runs_for_every_trial(pytester: pytest.Pytester) -> None:
    """Appending to ``item.fixturenames`` in a hook (an idiom of plugins) reaches every
    trial, not only the first of the file."""
    _domain(pytester)
    pytester.makeconftest(WATCH + """

CALLS = []


@pytest.fixture
def track(request):
    CALLS.append("setup " + request.node.name)
    yield


def pytest_collection_modifyitems(items):
    for item in items:
        if "track" not in item.fixturenames:
            item.fixturenames.append("track")


def pytest_sessionfinish(session):
    print("calls", CALLS)
""")
    result = pytester.runpytest("--sandtable-k=3", "-s", *ONE_TASK)
    result.assert_outcomes(passed=3)
    assert "calls ['setup book-at-posted-rate[1-3]', 'setup book-at-posted-rate[2-3]', " \
           "'setup book-at-posted-rate[3-3]']" in result.stdout.str()
