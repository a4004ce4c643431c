"""``compare``: a critical task that lost one trial (8/8 -> 7/8) is a regression by the
critical rule, and its own entry says so in every format, not only the check lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_compare import run_cli, trials_for, write

from pytest_sandtable.report.compare import RunDoc, compare, regression_checks, summary_lines
from pytest_sandtable.report.results_json import read_results

HEADLINE = "regression: critical task refund regressed from 8/8 to 7/8 (p=0.5; a critical task may not drop at all)"


@pytest.fixture
def one_lost(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs that differ by one failed trial of the critical task refund."""
    base = write(tmp_path / "base", trials_for({"refund": (8, 8), "greet": (8, 8)}, critical=["refund"]))
    new = write(tmp_path / "new", trials_for({"refund": (7, 8), "greet": (8, 8)}, critical=["refund"]))
    return base, new


def test_the_json_task_entry_names_the_critical_rule(one_lost: tuple[Path, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    base, new = one_lost
    code, out, err = run_cli(capsys, str(base), str(new), "--format", "json", "--fail-on-regression")
    assert (code, err) == (1, "")
    cmp = json.loads(out)["comparisons"][0]
    assert cmp["regression"] is True and cmp["headline"] == HEADLINE
    tasks = {t["task"]: t for t in cmp["tasks"]}
    assert {k: tasks["refund"][k] for k in ("critical", "change", "beyond_chance", "regression")} == {
        "critical": True, "change": "newly flaky", "beyond_chance": None, "regression": "critical"}
    assert tasks["refund"]["p_drop"] == pytest.approx(0.5)
    assert (tasks["greet"]["beyond_chance"], tasks["greet"]["regression"]) == (None, None)


def test_the_terminal_and_markdown_rows_name_the_critical_rule(one_lost: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    base, new = one_lost
    code, out, err = run_cli(capsys, str(base), str(new))
    assert (code, err) == (0, "")  # reported; only --fail-on-regression exits 1
    lines = out.splitlines()
    assert lines[1] == HEADLINE
    table = [re.split(r"\s{2,}", line) for line in lines[3:6]]
    assert table[0] == ["task", "before", "after", "change", "p drop", "p rise", "beyond chance", "regression"]
    assert table[2] == ["refund (critical)", "8/8", "7/8", "newly flaky", "0.5", "1", "no", "critical"]
    assert lines[6] == "1 task unchanged (still passing 1)"
    code, out, err = run_cli(capsys, str(base), str(new), "--format", "markdown")
    assert (code, err) == (0, "")
    rows = [re.sub(r" +", " ", line) for line in out.splitlines()]
    assert rows.count("| refund (critical) | 8/8 | 7/8 | newly flaky | 0.5 | 1 | no | critical |") == 2  # changed, all


def test_pytests_baseline_summary_names_the_critical_rule(one_lost: tuple[Path, Path]) -> None:
    base, new = one_lost
    cmp = compare(RunDoc("b", "b", read_results(base)), RunDoc("n", "n", read_results(new)))
    assert summary_lines(cmp, regression_checks(cmp))[1:] == [
        "  regressed (critical task): refund 8/8 -> 7/8 (p=0.5)",
        f"  {HEADLINE}",
    ]
