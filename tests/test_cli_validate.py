"""`python -m pytest_sandtable validate PATH...`: one line per problem, exit 2; else ok lines, exit 0.

``--format json`` and ``--format github`` print the same findings for editors and CI
(tests/test_cli_formats.py covers lint's and the escapes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _domains import LOADS_DESK

GOOD = LOADS_DESK + """\
tasks:
  - id: book-happy-path
    user: { opening: "Hi, about L-1001." }
"""

BROKEN = GOOD.replace("kind: limit, tool: book_load,", "kind: limit, tool: book_loads,").replace(
    "  - id: book-happy-path\n", "  - id: book-happy-path\n    critcal: true\n"
)


def validate(cwd: Path, *paths: str) -> tuple[int, list[str], list[str]]:
    code, out, err = validate_raw(cwd, *paths)
    return code, out.splitlines(), err.splitlines()


def validate_raw(cwd: Path, *args: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_sandtable", "validate", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "freight").mkdir()
    (tmp_path / "freight" / "sandtable.yaml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "returns.sandtable.yaml").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "broken" / "notes.yaml").write_text("not: a domain\n", encoding="utf-8")
    return tmp_path


def test_a_good_file_exits_0(project: Path) -> None:
    assert validate(project, "freight/sandtable.yaml") == (
        0, ["ok: freight/sandtable.yaml (1 task, 1 tool, 1 invariant)"], []
    )


def test_a_broken_file_prints_each_problem_and_exits_2(project: Path) -> None:
    assert validate(project, "broken/returns.sandtable.yaml") == (2, [
        "broken/returns.sandtable.yaml:14:44: invariants[0].tool: unknown tool 'book_loads'; did you mean 'book_load'?",
        "broken/returns.sandtable.yaml:17:5: tasks[0].critcal: unknown key 'critcal'; did you mean 'critical'?",
    ], [])


def test_a_folder_is_searched_for_domain_files(project: Path) -> None:
    code, out, _ = validate(project, ".")
    assert code == 2
    assert out == [
        "broken/returns.sandtable.yaml:14:44: invariants[0].tool: unknown tool 'book_loads'; did you mean 'book_load'?",
        "broken/returns.sandtable.yaml:17:5: tasks[0].critcal: unknown key 'critcal'; did you mean 'critical'?",
        "ok: freight/sandtable.yaml (1 task, 1 tool, 1 invariant)",
    ]


def test_several_good_paths(project: Path) -> None:
    (project / "freight" / "b.sandtable.yaml").write_text(GOOD, encoding="utf-8")
    assert validate(project, "freight") == (0, [
        "ok: freight/b.sandtable.yaml (1 task, 1 tool, 1 invariant)",
        "ok: freight/sandtable.yaml (1 task, 1 tool, 1 invariant)",
    ], [])


def test_a_missing_path_exits_2(project: Path) -> None:
    assert validate(project, "freight/sandtable.yaml", "nowhere.yaml") == (
        2, ["ok: freight/sandtable.yaml (1 task, 1 tool, 1 invariant)"], ["error: no such file or folder: nowhere.yaml"]
    )


def test_a_folder_without_domain_files_exits_2(project: Path) -> None:
    (project / "empty").mkdir()
    assert validate(project, "empty") == (2, [], ["error: no sandtable.yaml or *.sandtable.yaml under empty"])


# --------------------------------------------------------------------------- --format

PROBLEM_14 = {
    "file": "broken/returns.sandtable.yaml", "line": 14, "column": 44, "key": "invariants[0].tool",
    "severity": "error", "message": "unknown tool 'book_loads'; did you mean 'book_load'?", "task": None,
}
PROBLEM_17 = {
    "file": "broken/returns.sandtable.yaml", "line": 17, "column": 5, "key": "tasks[0].critcal",
    "severity": "error", "message": "unknown key 'critcal'; did you mean 'critical'?", "task": None,
}
NOWHERE = {
    "file": "nowhere.yaml", "line": None, "column": None, "key": "", "severity": "error",
    "message": "no such file or folder: nowhere.yaml", "task": None,
}


def test_format_text_is_the_default_output(project: Path) -> None:
    default = validate_raw(project, ".", "nowhere.yaml")
    assert validate_raw(project, "--format", "text", ".", "nowhere.yaml") == default
    assert default == (
        2,
        "broken/returns.sandtable.yaml:14:44: invariants[0].tool: unknown tool 'book_loads'; "
        "did you mean 'book_load'?\n"
        "broken/returns.sandtable.yaml:17:5: tasks[0].critcal: unknown key 'critcal'; did you mean 'critical'?\n"
        "ok: freight/sandtable.yaml (1 task, 1 tool, 1 invariant)\n",
        "error: no such file or folder: nowhere.yaml\n",
    )


def test_format_json_is_one_document_with_every_file(project: Path) -> None:
    code, out, err = validate_raw(project, ".", "nowhere.yaml", "--format", "json")
    expected = {
        "version": 1,
        "command": "validate",
        "files": [
            {"file": "nowhere.yaml", "status": "missing", "counts": None, "problems": [NOWHERE]},
            {"file": "broken/returns.sandtable.yaml", "status": "invalid", "counts": None,
             "problems": [PROBLEM_14, PROBLEM_17]},
            {"file": "freight/sandtable.yaml", "status": "ok",
             "counts": {"tasks": 1, "tools": 1, "invariants": 1}, "problems": []},
        ],
        "totals": {"files": 3, "ok": 1, "invalid": 1, "flagged": 0, "missing": 1,
                   "errors": 3, "warnings": 0, "notes": 0},
    }
    assert (code, err) == (2, "")
    assert out == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"


def test_format_json_of_a_clean_file_exits_0(project: Path) -> None:
    code, out, err = validate_raw(project, "freight", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["files"] == [{"file": "freight/sandtable.yaml", "status": "ok",
                             "counts": {"tasks": 1, "tools": 1, "invariants": 1}, "problems": []}]
    assert doc["totals"] == {"files": 1, "ok": 1, "invalid": 0, "flagged": 0, "missing": 0,
                             "errors": 0, "warnings": 0, "notes": 0}


def test_format_github_annotates_each_problem_then_sums_up(project: Path) -> None:
    assert validate_raw(project, "--format", "github", ".", "nowhere.yaml") == (
        2,
        "::error file=nowhere.yaml,title=sandtable validate::no such file or folder: nowhere.yaml\n"
        "::error file=broken/returns.sandtable.yaml,line=14,col=44,title=sandtable validate::"
        "invariants[0].tool: unknown tool 'book_loads'; did you mean 'book_load'?\n"
        "::error file=broken/returns.sandtable.yaml,line=17,col=5,title=sandtable validate::"
        "tasks[0].critcal: unknown key 'critcal'; did you mean 'critical'?\n"
        "sandtable validate: 3 files: 1 ok, 1 invalid, 1 missing; 3 errors, 0 warnings, 0 notes\n",
        "",
    )


def test_format_github_of_a_clean_folder_is_the_summary_alone(project: Path) -> None:
    assert validate_raw(project, "freight", "--format", "github") == (
        0, "sandtable validate: 1 file: 1 ok; 0 errors, 0 warnings, 0 notes\n", ""
    )


def test_format_github_escapes_a_file_name_and_a_message(project: Path) -> None:
    """`:` and `,` would end a property, `%` starts an escape: each is written as one."""
    name = "50%,a:b.sandtable.yaml"
    (project / name).write_text(GOOD.replace("arg: rate,", 'arg: "r%,te",'), encoding="utf-8")
    assert validate_raw(project, name, "--format", "github") == (
        2,
        "::error file=50%25%2Ca%3Ab.sandtable.yaml,line=14,col=60,title=sandtable validate::"
        "invariants[0].arg: found 'r%25,te', expected a name of letters, digits and _ "
        "that does not start with a digit\n"
        "::error file=50%25%2Ca%3Ab.sandtable.yaml,line=14,col=60,title=sandtable validate::"
        "invariants[0].arg: unknown param 'r%25,te' of tool book_load; did you mean 'rate'?\n"
        "sandtable validate: 1 file: 0 ok, 1 invalid; 2 errors, 0 warnings, 0 notes\n",
        "",
    )


def test_a_file_that_cannot_be_read_renders_without_a_line(project: Path) -> None:
    """The loader's problem about a whole file (here, not UTF-8) has no line or column in any format."""
    (project / "latin1.sandtable.yaml").write_bytes(b"version: 1\nname: caf\xe9\n")
    assert validate(project, "latin1.sandtable.yaml") == (
        2, ["latin1.sandtable.yaml:2: the file is not UTF-8 text"], []
    )
    code, out, _ = validate_raw(project, "latin1.sandtable.yaml", "--format", "json")
    assert code == 2
    assert json.loads(out)["files"][0]["problems"] == [{
        "file": "latin1.sandtable.yaml", "line": 2, "column": None, "key": "", "severity": "error",
        "message": "the file is not UTF-8 text", "task": None,
    }]
    assert validate_raw(project, "latin1.sandtable.yaml", "--format", "github")[1].splitlines()[0] == (
        "::error file=latin1.sandtable.yaml,line=2,title=sandtable validate::the file is not UTF-8 text"
    )


def test_an_unknown_format_is_a_usage_error(project: Path) -> None:
    code, out, err = validate_raw(project, "freight", "--format", "xml")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "python -m pytest_sandtable validate: error: argument --format: invalid choice: 'xml' "
        "(choose from 'text', 'json', 'github')"
    )


def test_docs_editor_md_shows_what_format_json_and_github_print(tmp_path: Path) -> None:
    """The examples of docs/editor.md, run: the freight example and a file with one typo."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "domains").mkdir()
    freight = root / "example_domains" / "freight" / "sandtable.yaml"
    (tmp_path / "domains" / "sandtable.yaml").write_bytes(freight.read_bytes())
    (tmp_path / "domains" / "returns.sandtable.yaml").write_text(
        GOOD.replace("  - id: book-happy-path\n", "  - id: book-happy-path\n    critcal: true\n"), encoding="utf-8"
    )
    docs = (root / "docs" / "editor.md").read_text(encoding="utf-8")
    shown = re.search(r"```json\n(\{\n  \"version\".*?)\n```", docs, re.S)
    assert shown is not None
    code, out, _ = validate_raw(tmp_path, "domains/", "gone.yaml", "--format", "json")
    assert (code, json.loads(out)) == (2, json.loads(shown.group(1)))
    _, out, _ = validate_raw(tmp_path, "domains/", "--format", "github")
    assert f"```text\n{out}```" in docs
