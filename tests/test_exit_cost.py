"""The end of a run's process (docs/limitations.md, "At the process's exit"): a run that
collected a domain file freezes the garbage collector at exit, so the interpreter's last
collections skip what the run left; a run that collected none leaves it alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _domains import DESK

TASK = """\
tasks:
  - id: verify-only
    user:
      persona: A dispatcher.
      instructions: Ask whether MC 100101 is verified.
      opening: "Is MC 100101 verified?"
    expect:
      called: [verify_carrier]
    reference:
      - call: verify_carrier
        args: { mc_number: "100101" }
"""

# registered at import, before the plugin's handler: atexit runs it after the plugin's
CONFTEST = """\
import atexit, gc, sys


def _frozen():
    sys.stdout.write(f"frozen at exit: {gc.get_freeze_count() > 0}\\n")
    sys.stdout.flush()


atexit.register(_frozen)
"""


def test_a_run_with_trials_freezes_the_collector_at_exit(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.path.joinpath("sandtable.yaml").write_text(DESK + TASK, encoding="utf-8")
    result = pytester.runpytest_subprocess("--sandtable-agent=reference", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert result.outlines[-1] == "frozen at exit: True"
    result.stdout.fnmatch_lines(["*1 passed*"])


def test_a_run_without_a_domain_file_leaves_the_collector_alone(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain="def test_x():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0
    assert result.outlines[-1] == "frozen at exit: False"


def test_an_in_process_run_leaves_the_process_collector_as_it_was(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(DESK + TASK, encoding="utf-8")
    import gc

    before = gc.get_freeze_count()
    result = pytester.runpytest("--sandtable-agent=reference", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert gc.get_freeze_count() == before
