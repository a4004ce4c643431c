"""No trap for a newcomer: what a fresh clone run by the README and the docs meets.

A ``module:attr`` agent beside its domain is found by bare ``pytest`` (the console
script, which puts no folder on ``sys.path``, unlike ``python -m pytest``); the
agent and user that actually play are named once, after collection; the reference
agent playing because nothing named an agent says so; an implicit gate says it is
one; a misspelt ``--sandtable-*`` option gets a did-you-mean.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _domains import BOOKS_L1001, DESK

import pytest_sandtable

pytest_plugins = ["pytester"]

DOMAIN = DESK + """\
tasks:
  - id: book-happy-path
    critical: true
    user: { opening: "Hi, MC 100101 about L-1001.", script: ["Deal."] }
""" + BOOKS_L1001

# an agent module of the team's own: it replays each task's reference, so its trial passes
MY_AGENT = """\
from pytest_sandtable import ReferenceAgent

agent = ReferenceAgent()
"""

PYTEST = Path(sys.executable).parent / ("pytest.exe" if os.name == "nt" else "pytest")
# where this package is imported from, for a venv where it is not installed (PYTHONPATH in development)
PACKAGE_ROOT = str(Path(pytest_sandtable.__file__).resolve().parent.parent)


def bare_pytest(folder: Path, *args: str, timeout: float = 120) -> pytest.RunResult:
    """Run the venv's ``pytest`` console script in ``folder``, as a newcomer types it.

    Not ``pytester.run``: its ``popen`` prepends the current folder to PYTHONPATH, which
    is the very thing bare ``pytest`` does not do. PYTHONPATH here holds only what imports
    this package, when it is not installed."""
    env = os.environ.copy()
    env["PYTHONPATH"] = PACKAGE_ROOT
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    start = time.monotonic()
    done = subprocess.run([str(PYTEST), "-p", "no:cacheprovider", "-p", "no:randomly", *args], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                            time.monotonic() - start)


@pytest.fixture
def desk(pytester: pytest.Pytester) -> Path:
    """A project folder with no configuration of its own: ``desk/sandtable.yaml`` and the
    team's ``desk/my_agent.py`` beside it (as docs/agents.md shows)."""
    if not PYTEST.is_file():
        pytest.skip(f"no pytest console script beside {sys.executable}")
    folder = pytester.path / "desk"
    folder.mkdir()
    folder.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    folder.joinpath("my_agent.py").write_text(MY_AGENT, encoding="utf-8")
    return pytester.path


# -- 1. module:attr specs under bare pytest ----------------------------------------------------


def test_bare_pytest_finds_an_agent_module_beside_the_domain(desk: Path) -> None:
    result = bare_pytest(desk, "--sandtable-agent=my_agent:agent")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["sandtable: agent=my_agent:agent, user=scripted"])
    result.stdout.no_fnmatch_line("*the reference agent replays*")


def test_bare_pytest_finds_it_under_xdist_too(desk: Path) -> None:
    result = bare_pytest(desk, "--sandtable-agent=my_agent:agent", "-p", "xdist", "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


def test_a_module_found_nowhere_names_the_folders_searched(desk: Path) -> None:
    result = bare_pytest(desk, "--sandtable-agent=my_agen:agent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    sep = os.sep
    assert result.stderr.lines[0] == (
        "ERROR: --sandtable-agent: cannot import module 'my_agen' for agent 'my_agen:agent': No module named "
        f"'my_agen' (looked on sys.path, then in .{sep}, desk{sep}; put it beside the domain file or in the "
        "rootdir, or set `pythonpath` in pytest's configuration)"
    )
    result.stdout.no_fnmatch_line("sandtable: agent=*")


def test_a_misspelt_attribute_gets_a_did_you_mean(desk: Path) -> None:
    result = bare_pytest(desk, "--sandtable-agent=my_agent:agnet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: --sandtable-agent: module 'my_agent' has no attribute 'agnet' (agent 'my_agent:agnet'); "
        "did you mean 'agent'?"
    )


def test_an_attribute_like_none_of_the_modules_names_lists_them(tmp_path: Path) -> None:
    from pytest_sandtable.adapters.registry import load_object

    tmp_path.joinpath("harbor_desk_agents.py").write_text(
        "import json\n_hidden = 1\ndef reply(turn): return 'hi'\nclass Desk: pass\n", encoding="utf-8")
    assert callable(load_object("harbor_desk_agents:reply", folders=[tmp_path]))
    with pytest.raises(ValueError) as e:
        load_object("harbor_desk_agents:zzzzzz", "simulated user", folders=[tmp_path])
    assert str(e.value) == ("module 'harbor_desk_agents' has no attribute 'zzzzzz' (simulated user "
                            "'harbor_desk_agents:zzzzzz'); its public names are: Desk, json, reply")
    assert str(tmp_path) not in sys.path  # the folder was searched while the module imported, no longer


# -- 2. the agent and the user that play, named once ---------------------------------------------


REFERENCE_NOTICE = ("sandtable: the reference agent replays each task's reference: this checks the suite, "
                    "not an agent; point --sandtable-agent at yours (docs/agents.md)")


def test_a_run_that_names_no_agent_says_the_reference_agent_plays(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "sandtable: k=1, run seed=0",
        "*",
        "collected 1 item",
        "sandtable: agent=reference, user=scripted",
        REFERENCE_NOTICE,
    ], consecutive=False)
    assert result.stdout.str().count("agent=") == 1


def test_naming_the_reference_agent_is_not_told_off(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.makeini("[pytest]\nsandtable_agent = reference\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["sandtable: agent=reference, user=scripted"])
    result.stdout.no_fnmatch_line("*the reference agent replays*")


FIXTURES = """
import pytest

@pytest.fixture(scope="session")
def sandtable_agent():
    from pytest_sandtable import ReferenceAgent
    return ReferenceAgent()

@pytest.fixture(scope="session")
def sandtable_user():
    from pytest_sandtable import ScriptedUser
    return ScriptedUser()
"""


def test_a_fixture_agent_and_user_are_named_as_such(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.makeconftest(FIXTURES)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "sandtable: k=1, run seed=0",
        "sandtable: agent=fixture sandtable_agent (conftest.py), user=fixture sandtable_user (conftest.py)",
    ])
    assert result.stdout.str().count("agent=") == 1
    result.stdout.no_fnmatch_line("*the reference agent replays*")


def test_the_xdist_controller_names_the_options_and_what_overrides_them(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "sandtable: k=1, run seed=0",
        "sandtable: agent=reference, user=scripted where no conftest.py overrides the sandtable_agent / "
        "sandtable_user fixture (the workers collect; the summary names what played)",
        "sandtable: where no sandtable_agent fixture overrides it, the reference agent replays each task's "
        "reference: this checks the suite, not an agent; point --sandtable-agent at yours (docs/agents.md)",
    ])


# -- 3. an implicit gate says it is one ------------------------------------------------------------


def test_a_critical_task_failing_with_no_gate_set_says_that_rule_failed_the_run(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.makeconftest("""
import pytest

@pytest.fixture(scope="session")
def sandtable_agent():
    return lambda turn: "Hello."
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-out=out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = ("sandtable gate failed: critical tasks fail the run even with no gate set: critical task "
            "book-happy-path failed 1 of 1 trials ([1])")
    result.stdout.fnmatch_lines(["sandtable: results in out/", line], consecutive=True)
    # with a gate set, the same check is part of the gate: no "even with no gate set"
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-out=out", "--sandtable-fail-under=0")
    result.stdout.fnmatch_lines([
        "sandtable gate failed: critical task book-happy-path failed 1 of 1 trials ([1])",
        "  failed: critical task book-happy-path failed 1 of 1 trials ([1])",
        "  passed: pass^1 0.0% meets --sandtable-fail-under 0% exactly",
    ], consecutive=True)


# -- 4. a misspelt option gets a did-you-mean ----------------------------------------------------------


@pytest.mark.parametrize(("given", "meant"), [
    ("--sandtable-agnet=my_agent:agent", "--sandtable-agent"),
    ("--sandtable-K=4", "--sandtable-k"),
])
def test_a_misspelt_option_gets_a_did_you_mean(pytester: pytest.Pytester, given: str, meant: str) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == f"ERROR: unrecognized option {given.split('=')[0]}; did you mean {meant}?"
    assert not pytester.path.joinpath(".sandtable").exists()


def test_an_option_like_none_says_where_they_are_listed_and_a_conftests_own_is_known(
    pytester: pytest.Pytester,
) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.makeconftest("""
def pytest_addoption(parser):
    parser.addoption("--sandtable-desk-profile")
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-desk-profile=eu", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-zzz")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == ("ERROR: unrecognized option --sandtable-zzz; `pytest --help` lists the "
                                      "sandtable options under 'pytest-sandtable'")
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtabel-serve")
    assert result.stderr.lines[0] == "ERROR: unrecognized option --sandtabel-serve; did you mean --sandtable-serve?"
