"""What thousands of trial items hold alike is held once: their fixtures (resolved once
per domain file, as pytest does for a parametrized test), the parts of their reports
that pytest keeps to the end of the session (keywords, location, node id, and under
xdist every string read from a worker), and the light trials' repeated values. Nothing
anyone reads changes: only how many objects hold it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FREIGHT = Path(__file__).resolve().parent.parent / "example_domains" / "freight" / "sandtable.yaml"

FOLDER_CONFTEST = """
import pytest

SEEN = []


@pytest.fixture(autouse=True)
def count_trials(request):
    SEEN.append(request.node.nodeid)
    yield


@pytest.fixture(scope="session")
def sandtable_agent():
    def agent(turn):
        return "no booking from this desk (" + str(len(SEEN)) + " trials seen here)"
    agent.name = "folder-desk"
    return agent
"""


def test_each_folders_trials_get_that_folders_fixtures(pytester: pytest.Pytester) -> None:
    """The trial items of one domain file share one resolution of their fixtures: each
    folder's still get its conftest.py's agent and autouse fixtures, the others none
    (the plain folder's trials run first: its trials would count in SEEN)."""
    for folder in ("a_plain", "b_mine"):
        pytester.path.joinpath(folder).mkdir()
        shutil.copy(FREIGHT, pytester.path / folder / "sandtable.yaml")
    pytester.path.joinpath("b_mine", "conftest.py").write_text(FOLDER_CONFTEST, encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-k=2", "--sandtable-agent=reference",
                                "-k", "book-at-posted-rate", "-rA")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "sandtable: agent=fixture sandtable_agent (b_mine/conftest.py) where defined, else reference, "
        "user=scripted",
        "sandtable: --sandtable-agent=reference is ignored for the trials whose sandtable_agent fixture is "
        "overridden there",
    ])
    result.stdout.fnmatch_lines(["*[[]1] agent: no booking from this desk (1 trials seen here)"])
    result.stdout.fnmatch_lines(["*[[]1] agent: no booking from this desk (2 trials seen here)"])
    result.stdout.fnmatch_lines([
        "PASSED a_plain/sandtable.yaml::book-at-posted-rate[[]1-2]",
        "PASSED a_plain/sandtable.yaml::book-at-posted-rate[[]2-2]",
        "FAILED b_mine/sandtable.yaml::book-at-posted-rate[[]1-2]*",
        "FAILED b_mine/sandtable.yaml::book-at-posted-rate[[]2-2]*",
    ])


# after the run, on the controller (or the only process): the reports pytest keeps and
# the recorder's light trials, and how many objects hold what they hold
HOLDERS = """
def pytest_terminal_summary(terminalreporter):
    reports = [r for key in ("", "passed", "failed") for r in terminalreporter.stats.get(key, [])]
    by_item = {}
    for r in reports:
        by_item.setdefault(r.nodeid, []).append(r)
    first = by_item["sandtable.yaml::book-at-posted-rate[2-3]"]
    print("KEYWORDS", [sorted(r.keywords) for r in first])
    print("LOCATION", [r.location for r in first])
    print("PER ITEM", sorted({(len(rs), len({id(r.keywords) for r in rs}), len({id(r.location) for r in rs}))
                              for rs in by_item.values()}))
    print("OUTCOMES", len(reports), len({id(r.outcome) for r in reports}))
    print("PATHS", len({id(r.location[0]) for r in reports}))
    light = terminalreporter.config.pluginmanager.get_plugin("sandtable-recorder").spool.trials()
    print("LIGHT", len(light), len({id(t.task) for t in light}), len({id(t.soft) for t in light}),
          len({id(t.tags) for t in light}), len({id(t.usage) for t in light}),
          len({repr(t.soft) for t in light}), len({repr(t.tags) for t in light}))
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_the_reports_and_light_trials_of_a_run_hold_alike_parts_once(pytester: pytest.Pytester,
                                                                    workers: list[str]) -> None:
    if workers:
        pytest.importorskip("xdist")
    shutil.copy(FREIGHT, pytester.path / "sandtable.yaml")
    pytester.makeconftest(HOLDERS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sandtable-k=3", "--sandtable-agent=reference",
                                           "-s", *workers)
    result.assert_outcomes(passed=17 * 3)
    folder = pytester.path.name
    # what pytest gives each report, as it gives it: one dict and one tuple for the three
    keywords = sorted(["book-at-posted-rate[2-3]", "sandtable", "booking", "sandtable.yaml", folder, ""])
    line = next(i for i, text in enumerate(FREIGHT.read_text(encoding="utf-8").splitlines())
                if text.strip() == "- id: book-at-posted-rate")
    assert _printed(result, "KEYWORDS") == str([keywords] * 3)
    assert _printed(result, "LOCATION") == str([("sandtable.yaml", line, "book-at-posted-rate[2-3]")] * 3)
    assert _printed(result, "PER ITEM") == "[(3, 1, 1)]"
    # 153 reports: one "passed" string, one path; 51 light trials: one string per task,
    # one soft dict and one tags list per distinct value (soft differs by task, tags too)
    assert _printed(result, "OUTCOMES") == "153 1"
    assert _printed(result, "PATHS") == "1"
    n, tasks, softs, tags, usages, soft_values, tag_values = map(int, _printed(result, "LIGHT").split())
    assert (n, tasks, usages) == (51, 17, 1)
    assert (softs, tags) == (soft_values, tag_values) and softs < 17 and tags < 17


def _printed(result: pytest.RunResult, name: str) -> str:
    """What the HOLDERS conftest printed after ``name``."""
    (line,) = [text for text in result.outlines if text.startswith(name + " ")]
    return line[len(name) + 1:]
