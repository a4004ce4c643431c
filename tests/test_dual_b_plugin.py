"""Issue 22, part B, through real pytest runs: `expect.assert` and `basis` as a user of
the plugin sees them (the failure text, the terminal's failure modes, results.json and
report.html), and `regrade` grading assertions from a stored trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pytest_sandtable as st
from pytest_sandtable.cli import main

pytest_plugins = ["pytester"]

DOMAIN = """\
version: 1
name: lines
world:
  lines:
    key: line
    rows:
      - { line: L-1, status: suspended }
tools:
  - name: resume_line
    params: { line: { type: string } }
    ops:
      - update: { table: lines, key: $line, set: { status: active } }
tasks:
  - id: resume
    user: { opening: "My line L-1 is down." }
    expect:
      reply_includes: [sorry]
      assert:
        - line_checks:active
        - { function: line_checks:status_is, args: { want: gone }, id: gone }
      basis: [assert]
    reference:
      - { call: resume_line, args: { line: L-1 } }
      - say: "Done, L-1 is active."
"""

CHECKS = """\
def active(world):
    return world.get("lines", "L-1")["status"] == "active"


def status_is(world, want):
    status = world.get("lines", "L-1")["status"]
    return status == want, f"L-1 is {status}, expected {want}"
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("line_checks.py").write_text(CHECKS, encoding="utf-8")
    return pytester


def test_not_counted_checks_are_shown_and_never_fail_or_cluster(project: pytest.Pytester) -> None:
    result = project.runpytest("--sandtable-out=out", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "resume trial 1 of 1 failed (seed *, ended by script_end after 1 agent turn)",
        "  assert  assert:gone  L-1 is active, expected gone",
        "  not counted (kinds the task's basis leaves out; never fail a trial):",
        '    reply  reply:sorry  agent never said "sorry"',
    ])
    result.stdout.fnmatch_lines([
        "Failure modes (failed checks across trials, most frequent first)",
        "kind    check        trials    example",
        "*",
        "assert  assert:gone  1         resume[1]: L-1 is active, expected gone",
        "likely owners of 1 failed trial: task 1",
    ])
    assert "reply:sorry  1" not in result.stdout.str()
    trial = json.loads((project.path / "out" / "results.json").read_text(encoding="utf-8"))["trials"][0]
    assert trial["checks"] == [
        {"kind": "reply", "id": "reply:sorry", "passed": False, "detail": 'agent never said "sorry"',
         "counted": False},
        {"kind": "assert", "id": "assert:active", "passed": True, "detail": ""},
        {"kind": "assert", "id": "assert:gone", "passed": False, "detail": "L-1 is active, expected gone"},
    ]
    html = (project.path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<h4>Failed checks, not counted</h4>" in html


def test_regrade_grades_assertions_from_the_stored_final_world(
        project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    project.runpytest("--sandtable-out=run", "-p", "no:randomly").assert_outcomes(failed=1)
    monkeypatch.chdir(project.path)
    edited = DOMAIN.replace("want: gone", "want: active")
    Path("edited.yaml").write_text(edited, encoding="utf-8")
    capsys.readouterr()
    assert main(["regrade", "run", "edited.yaml", "-o", "regraded"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "sandtable: regraded 1 trial of lines against edited.yaml: 1 verdict changed (1 failed → passed)"
    trial = st.report.results_json.read_results(Path("regraded"))["trials"][0]
    assert [(c["id"], c["passed"], c.get("counted", True)) for c in trial["checks"]] == [
        ("reply:sorry", False, False), ("assert:active", True, True), ("assert:gone", True, True)]
