"""`validate` and `lint` skip a virtual environment whatever it is called, as pytest's
collection does (issue 23): a folder holding `pyvenv.cfg`, or a conda environment's
`conda-meta/history`, is never searched for domain files."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_validate import BROKEN, GOOD, validate


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "freight").mkdir()
    (tmp_path / "freight" / "sandtable.yaml").write_text(GOOD, encoding="utf-8")
    # an installed package's test data inside two environments not named venv
    for env, marker in (("myenv", "pyvenv.cfg"), ("condaenv", "conda-meta/history")):
        (tmp_path / env / marker).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / env / marker).write_text("home = /usr/bin\n", encoding="utf-8")
        data = tmp_path / env / "lib" / "site-packages" / "shop" / "data"
        data.mkdir(parents=True)
        (data / "sandtable.yaml").write_text(BROKEN, encoding="utf-8")
    return tmp_path


def test_validate_skips_a_folder_holding_pyvenv_cfg(project: Path) -> None:
    assert validate(project, ".") == (0, ["ok: freight/sandtable.yaml (1 task, 1 tool, 1 invariant)"], [])


def test_lint_skips_it_too(project: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "pytest_sandtable", "lint", "."],
        cwd=project, capture_output=True, text=True, timeout=60,
    )
    lines = proc.stdout.splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("policy coverage: "))
    assert lines[:start] == [  # freight's own findings only, none from an environment
        "freight/sandtable.yaml:16: note: book-happy-path: no reference: the reference agent cannot rehearse "
        "this task and lint cannot check it",
        "freight/sandtable.yaml:16: warning: book-happy-path: has no expectations: any agent that breaks no rule "
        "passes it",
    ]
    assert proc.returncode == 1  # a warning


def test_validate_agrees_with_what_pytest_collects(project: Path, pytester: pytest.Pytester) -> None:
    for path in sorted(project.rglob("*")):
        target = pytester.path / path.relative_to(project)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.write_bytes(path.read_bytes())
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert [line for line in result.outlines if "sandtable.yaml" in line] == [
        "freight/sandtable.yaml::book-happy-path[1-1]"
    ]
    assert result.ret == pytest.ExitCode.OK
