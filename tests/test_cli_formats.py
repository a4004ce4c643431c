"""`lint --format text|json|github`, and the escapes of GitHub workflow commands.

validate's formats are in tests/test_cli_validate.py; both commands gather what they
find the same way, so these tests pin what lint adds: warnings and notes, the task,
and messages that hold newlines, `%` and commas (a reference's text is the user's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _domains import BOOKS_L1001, DESK

from pytest_sandtable.cli.check import Diagnostic, escape_data, escape_property, workflow_command

CLEAN = DESK + """\
tasks:
  - id: book
    user: { opening: "MC 100101 about L-1001.", script: ["Deal."] }
""" + BOOKS_L1001

# a reference that fails its own expectation, whose text holds `%`, a comma and a newline;
# and a task with no reference whose expectations only say what must not happen (two notes)
FLAGGED = CLEAN + """\
  - id: quote
    user: { opening: "Rate for L-1001?" }
    expect:
      reply_includes: ["100%,\\nfinal"]
    reference:
      - say: "It is 2,100."
  - id: chat
    user: { opening: "Hello." }
    expect:
      not_called: [book_load]
"""

QUOTE_LINE = FLAGGED.splitlines().index("  - id: quote") + 1
CHAT_LINE = FLAGGED.splitlines().index("  - id: chat") + 1
QUOTE_MESSAGE = 'the reference fails its own expectation reply:100%,\nfinal: agent never said "100%,\nfinal"'
NO_REFERENCE = "no reference: the reference agent cannot rehearse this task and lint cannot check it"
ONLY_NEGATIVE = ("passes when the agent does nothing (every expectation says what must not happen); "
                 "a `called` expectation would check the agent engaged")


# the policy coverage of each file's reference replays, after its findings (text)
_RULE_TABLE = """\
  rule          kind    level      calls    applied    held    broken    tasks
  ------------  ------  -------  -------  ---------  ------  --------  -------
  rate-ceiling  limit   applied        1          1       1         0        1
"""
QUOTE_COVERAGE = ("policy coverage: 1 rule: 1 applied; 0 policy sentences quoted by no rule; 1 task exercises no "
                  "rule\n" + _RULE_TABLE + "  task quote exercises no rule\n  1 task with no trial: chat\n")
CLEAN_COVERAGE = ("policy coverage: 1 rule: 1 applied; 0 policy sentences quoted by no rule; 0 tasks exercise no "
                  "rule\n" + _RULE_TABLE)


def lint(cwd: Path, *args: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "pytest_sandtable", "lint", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "sandtable.yaml").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "quote.sandtable.yaml").write_text(FLAGGED, encoding="utf-8")
    return tmp_path


def test_text_is_the_default(project: Path) -> None:
    default = lint(project, ".")
    assert lint(project, ".", "--format", "text") == default
    assert default == (
        1,
        f"quote.sandtable.yaml:{QUOTE_LINE}: error: quote: {QUOTE_MESSAGE}\n"
        f"quote.sandtable.yaml:{CHAT_LINE}: note: chat: {NO_REFERENCE}\n"
        f"quote.sandtable.yaml:{CHAT_LINE}: note: chat: {ONLY_NEGATIVE}\n"
        + QUOTE_COVERAGE +
        "ok: sandtable.yaml (1 task replayed)\n"
        + CLEAN_COVERAGE,
        "",
    )


def _finding(line: int, key: str, severity: str, message: str, task: str) -> dict[str, object]:
    return {"file": "quote.sandtable.yaml", "line": line, "column": None, "key": key,
            "severity": severity, "message": message, "task": task}


def test_json_holds_every_finding_with_its_task_and_key(project: Path) -> None:
    code, out, err = lint(project, ".", "--format", "json")
    coverage = [f["coverage"] for f in json.loads(out)["files"]]  # its fields: test_policy_coverage.py
    assert [(c["domain"], c["trials"], c["levels"]["applied"], c["tasks_without_rules"]) for c in coverage] == [
        ("freight", 2, 1, ["quote"]), ("freight", 1, 1, []),
    ]
    expected = {
        "version": 1,
        "command": "lint",
        "files": [
            {"file": "quote.sandtable.yaml", "status": "flagged",
             "counts": {"tasks": 3, "tools": 2, "invariants": 1}, "problems": [
                 _finding(QUOTE_LINE, "tasks[1]", "error", QUOTE_MESSAGE, "quote"),
                 _finding(CHAT_LINE, "tasks[2]", "note", NO_REFERENCE, "chat"),
                 _finding(CHAT_LINE, "tasks[2]", "note", ONLY_NEGATIVE, "chat"),
             ], "coverage": coverage[0]},
            {"file": "sandtable.yaml", "status": "ok",
             "counts": {"tasks": 1, "tools": 2, "invariants": 1}, "problems": [], "coverage": coverage[1]},
        ],
        "totals": {"files": 2, "ok": 1, "invalid": 0, "flagged": 1, "missing": 0,
                   "errors": 1, "warnings": 0, "notes": 2},
    }
    assert (code, err) == (1, "")
    assert out == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"


def test_github_escapes_percent_and_newlines_in_messages(project: Path) -> None:
    assert lint(project, ".", "--format", "github") == (
        1,
        f"::error file=quote.sandtable.yaml,line={QUOTE_LINE},title=sandtable lint::quote: the reference fails "
        'its own expectation reply:100%25,%0Afinal: agent never said "100%25,%0Afinal"\n'
        f"::notice file=quote.sandtable.yaml,line={CHAT_LINE},title=sandtable lint::chat: {NO_REFERENCE}\n"
        f"::notice file=quote.sandtable.yaml,line={CHAT_LINE},title=sandtable lint::chat: {ONLY_NEGATIVE}\n"
        "sandtable lint: 2 files: 1 ok, 1 flagged; 1 error, 0 warnings, 2 notes\n",
        "",
    )


def test_notes_alone_exit_0_in_every_format(tmp_path: Path) -> None:
    text = FLAGGED.replace(FLAGGED[FLAGGED.index("  - id: quote"):FLAGGED.index("  - id: chat")], "")
    (tmp_path / "sandtable.yaml").write_text(text, encoding="utf-8")
    assert lint(tmp_path, "sandtable.yaml")[0] == 0
    code, out, _ = lint(tmp_path, "sandtable.yaml", "--format", "json")
    assert (code, json.loads(out)["files"][0]["status"]) == (0, "ok")
    code, out, _ = lint(tmp_path, "sandtable.yaml", "--format", "github")
    assert (code, out.splitlines()[-1]) == (0, "sandtable lint: 1 file: 1 ok; 0 errors, 0 warnings, 2 notes")


def test_a_file_that_does_not_load_exits_2_in_every_format(project: Path) -> None:
    broken = CLEAN.replace("tool: book_load,", "tool: book_loads,")
    (project / "quote.sandtable.yaml").write_text(broken, encoding="utf-8")
    rule = next(text for text in broken.splitlines() if "rate-ceiling" in text)
    line, col = broken.splitlines().index(rule) + 1, rule.index("book_loads") + 1
    code, out, _ = lint(project, "quote.sandtable.yaml", "--format", "json")
    doc = json.loads(out)
    assert (code, doc["files"][0]["status"], doc["totals"]["invalid"]) == (2, "invalid", 1)
    assert doc["files"][0]["problems"] == [{
        "file": "quote.sandtable.yaml", "line": line, "column": col, "key": "invariants[0].tool",
        "severity": "error", "message": "unknown tool 'book_loads'; did you mean 'book_load'?", "task": None,
    }]
    assert lint(project, "quote.sandtable.yaml", "--format", "github") == (
        2,
        f"::error file=quote.sandtable.yaml,line={line},col={col},title=sandtable lint::"
        "invariants[0].tool: unknown tool 'book_loads'; did you mean 'book_load'?\n"
        "sandtable lint: 1 file: 0 ok, 1 invalid; 1 error, 0 warnings, 0 notes\n",
        "",
    )


def test_a_missing_path_is_a_problem_without_a_line(project: Path) -> None:
    assert lint(project, "gone/", "--format", "github") == (
        2,
        "::error file=gone/,title=sandtable lint::no such file or folder: gone/\n"
        "sandtable lint: 1 file: 0 ok, 1 missing; 1 error, 0 warnings, 0 notes\n",
        "",
    )
    assert lint(project, "gone/") == (2, "", "error: no such file or folder: gone/\n")


# --------------------------------------------------------------------------- the escapes


def test_escape_data_writes_percent_cr_and_lf_as_escapes() -> None:
    assert escape_data("50% off,\r\nnow: yes") == "50%25 off,%0D%0Anow: yes"
    assert escape_data("%0A") == "%250A"  # an escape in the text stays text


def test_escape_property_also_writes_colon_and_comma() -> None:
    assert escape_property("C:\\dom,ains\\50%.sandtable.yaml\n") == "C%3A\\dom%2Cains\\50%25.sandtable.yaml%0A"


def test_a_problem_without_a_line_or_key_names_the_file_only() -> None:
    d = Diagnostic("a.sandtable.yaml", None, None, "", "error", "no such file", None, "a.sandtable.yaml: no such file")
    assert workflow_command("validate", d) == "::error file=a.sandtable.yaml,title=sandtable validate::no such file"


def test_a_line_without_a_column_leaves_col_out() -> None:
    d = Diagnostic("a.yaml", 3, None, "tasks[0]", "warning", "x", "t1", "")
    assert workflow_command("lint", d) == "::warning file=a.yaml,line=3,title=sandtable lint::t1: x"
