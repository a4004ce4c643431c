"""`python -m pytest_sandtable validate PATH...`: one line per problem, exit 2; else ok lines, exit 0."""

from __future__ import annotations

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
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_sandtable", "validate", *paths],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )
    return proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines()


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
