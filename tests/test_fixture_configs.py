"""The default `sandtable_agent` / `sandtable_user` fixtures take no argument (pytest
resolves a fixture's arguments again for every item): they read the config of the
innermost pytest run of the process. A run inside a test of another run (pytester)
must leave the outer run's fixtures its own."""

from __future__ import annotations

import textwrap

import pytest
from test_plugin import DOMAIN

pytest_plugins = ["pytester"]

NESTED = textwrap.dedent('''\
    from pathlib import Path

    pytest_plugins = ["pytester"]


    def test_a_run_inside_this_one(pytester):
        domain = (Path(__file__).parent / "z" / "sandtable.yaml").read_text(encoding="utf-8")
        pytester.path.joinpath("sandtable.yaml").write_text(domain, encoding="utf-8")
        inner = pytester.inline_run("-p", "no:cacheprovider", "--sandtable-agent=reference")
        # the reference books the happy path, and breaks the ceiling rule in the other task
        inner.assertoutcome(passed=1, failed=1)
''')


def test_a_run_inside_a_test_leaves_the_outer_runs_agent_to_its_trials(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("z").mkdir()
    pytester.path.joinpath("z", "sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.makepyfile(test_a=NESTED, agents="def silent(turn):\n    return ''\n")
    pytester.syspathinsert()
    # test_a.py runs first (before z/): the outer run's fixtures are set up after the inner run ended
    result = pytester.runpytest("-p", "no:cacheprovider", "--sandtable-agent=agents:silent", "-v")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "test_a.py::test_a_run_inside_this_one PASSED*",
        "z/sandtable.yaml::book-happy-path[[]1-1[]] FAILED*",
        "z/sandtable.yaml::over-the-ceiling[[]1-1[]] FAILED*",
    ])
