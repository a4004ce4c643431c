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


MID_WAY = """\
version: 1
name: mid
world:
  lines:
    key: line
    rows:
      - { line: L-1, status: active }
tools:
  - name: suspend_line
    params: { line: { type: string } }
    ops:
      - update: { table: lines, key: $line, set: { status: suspended } }
  - name: resume_line
    params: { line: { type: string } }
    ops:
      - update: { table: lines, key: $line, set: { status: active } }
  - name: get_line
    params: { line: { type: string } }
    ops:
      - get: { table: lines, key: $line }
tasks:
  - id: resume
    setup:
      - { call: suspend_line, args: { line: L-1 } }
    history:
      - { role: user, say: "My line L-1 is down." }
      - { role: agent, say: "Let me look.", calls: [{ call: get_line, args: { line: L-1 } }] }
      - { role: user, say: "Well?" }
    user: { script: ["Thanks."] }
    expect:
      state: [{ table: lines, key: L-1, fields: { status: active } }]
      reply_includes: [resumed]
    reference:
      - say: "It is suspended; I can't change that."
  - id: ticket
    solo: true
    ticket: "Resume line L-1."
    expect:
      called: [resume_line]
    reference:
      - say: "Nothing done."
"""


def test_a_trial_that_starts_mid_way_as_the_terminal_shows_it(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("sandtable.yaml").write_text(MID_WAY, encoding="utf-8")
    result = pytester.runpytest("-p", "no:randomly", "--sandtable-out=out")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "resume trial 1 of 1 failed (seed *, ended by script_end after 2 agent turns)",
        '  state  state:lines[L-1]#1  lines L-1: status is "suspended", expected "active"',
        '  reply  reply:resumed       agent never said "resumed"',
        "*- Captured sandtable transcript call -*",
        '[[]0] setup -> suspend_line(line="L-1")',
        '        = {"line": "L-1", "status": "suspended"}',
        "[[]0] user : My line L-1 is down.",
        '[[]0] history -> get_line(line="L-1")',
        '        = {"line": "L-1", "status": "suspended"}',
        "[[]0] agent: Let me look.",
        "[[]0] user : Well?",
        "[[]1] agent: It is suspended; I can't change that.",
        "[[]1] user : Thanks.",
        "[[]2] agent: ",
    ])
    result.stdout.fnmatch_lines([
        "ticket trial 1 of 1 failed (seed *, ended by solo after 1 agent turn)",
        "  called  called:resume_line  resume_line was never called successfully",
        "*- Captured sandtable transcript call -*",
        "[[]0] user : Resume line L-1.",
        "[[]1] agent: Nothing done.",
    ])
    trials = json.loads((pytester.path / "out" / "results.json").read_text(encoding="utf-8"))["trials"]
    assert [(c["tool"], c.get("by")) for c in trials[0]["calls"]] == [("suspend_line", "setup"),
                                                                      ("get_line", "history")]
