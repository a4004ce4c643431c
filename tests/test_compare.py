"""``python -m pytest_sandtable compare``: planted runs with known counts, what is beyond
chance and what is not, the verdict changes, pass^j changes, failure modes, domain
changes, spend, the leaderboard, the three formats, refusals with one line each, and the
worked GitHub Actions example of docs/ci.md run command by command on the freight example."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_sandtable.cli import main
from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.compare import RunDoc, compare, parse_alpha, regression_checks
from pytest_sandtable.report.results_json import RunMeta, build_results, read_results, write_run

ROOT = Path(__file__).resolve().parent.parent
SHA_A, SHA_B = "a" * 64, "b" * 64

# (passed, graded) per task; a count may add errored trials as a third number
Plan = Mapping[str, tuple[int, ...]]


def trials_for(plan: Plan, *, domain: str = "freight", critical: Sequence[str] = (),
               tags: Mapping[str, list[str]] | None = None, agent: str = "desk",
               usage: Mapping[str, Any] | None = None, fail_check: str = "state:bookings") -> list[TrialResult]:
    """Trials with exactly these counts: the first ``passed`` pass, the rest fail with one
    failed check ``fail_check`` (the task id when it is ``{task}``); errored trials last."""
    out = []
    for line, (task, counts) in enumerate(plan.items(), start=1):
        passed, graded, errored = (*counts, 0)[:3]
        for n in range(1, graded + errored + 1):
            verdict = "passed" if n <= passed else "failed" if n <= graded else "errored"
            checks = [Check("state", fail_check.format(task=task), False, f"{task} trial {n} went wrong")] \
                if verdict == "failed" else [Check("state", "state:ok", True)]
            out.append(TrialResult(
                domain=domain, task=task, trial=n, k=graded + errored, seed=n, verdict=verdict,
                tags=list((tags or {}).get(task, [])), critical=task in critical, agent=agent, user="scripted",
                checks=checks, error="the user hung up" if verdict == "errored" else None,
                location=f"{domain}/sandtable.yaml:{line}", usage=dict(usage or {}), latency=[0.01 * n],
            ))
    return out


def write(folder: Path, trials: list[TrialResult], *, k: int = 8, sha: str = SHA_A,
          domains: Sequence[str] = ("freight",)) -> Path:
    meta = RunMeta(domains=[{"name": d, "path": f"{d}/sandtable.yaml", "sha256": sha} for d in domains],
                   agent="reference", user="scripted", k=k, run_seed=0)
    write_run(build_results(trials, meta), folder)
    return folder / "results.json"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """The measured case of issue 10: book-happy-path 8/8 -> 2/8 (p=0.0035), negotiate-then-book
    4/8 -> 3/8 (p=0.5), expired-insurance 8/8 -> 8/8."""
    base = write(tmp_path / "base", trials_for({"book-happy-path": (8, 8), "negotiate-then-book": (4, 8),
                                                "expired-insurance": (8, 8)}, agent="desk-v1"))
    new = write(tmp_path / "new", trials_for({"book-happy-path": (2, 8), "negotiate-then-book": (3, 8),
                                              "expired-insurance": (8, 8)}, agent="desk-v2"))
    return base, new


def test_planted_runs_flag_the_drop_from_8_of_8_to_2_of_8_and_not_4_of_8_to_3_of_8(
        planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    base, new = planted
    code, out, err = run_cli(capsys, str(base), str(new), "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    tasks = {t["task"]: t for t in doc["comparisons"][0]["tasks"]}
    book, nego, ins = tasks["book-happy-path"], tasks["negotiate-then-book"], tasks["expired-insurance"]
    assert round(book["p_drop"], 4) == 0.0035 and book["beyond_chance"] == "regressed"
    assert nego["p_drop"] == pytest.approx(0.5) and nego["beyond_chance"] is None
    assert ins["p_drop"] == 1.0 and ins["beyond_chance"] is None
    assert (book["base"], book["new"]) == ({"passed": 8, "graded": 8, "errored": 0, "verdict": "passed"},
                                           {"passed": 2, "graded": 8, "errored": 0, "verdict": "flaky"})
    assert [book["change"], nego["change"], ins["change"]] == ["newly flaky", "still flaky", "still passing"]
    assert doc["regression"] is True
    assert doc["comparisons"][0]["headline"] == (
        "regression: task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)")
    assert doc["comparisons"][0]["checks"] == [
        {"passed": False, "text": "task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)"}]

    # without --fail-on-regression it reports; with it, exit 1
    assert run_cli(capsys, str(base), str(new))[0] == 0
    code, out, err = run_cli(capsys, str(base), str(new), "--fail-on-regression")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == f"{new} (desk-v2, 24 trials, k=8) against {base} (desk-v1, 24 trials, k=8): 3 tasks in common"
    assert lines[1] == "regression: task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 < 0.05)"
    # only the task that changed is listed; 4/8 -> 3/8 is counted among the unchanged
    table = [re.split(r"\s{2,}", line) for line in lines[3:6]]
    assert table[0] == ["task", "before", "after", "change", "p drop", "p rise", "beyond chance", "regression"]
    assert table[2] == ["book-happy-path", "8/8", "2/8", "newly flaky", "0.0035", "1", "regressed", "beyond chance"]
    assert lines[6] == "2 tasks unchanged (still flaky 1, still passing 1)"


def test_a_lower_alpha_lets_the_same_drop_through(planted: tuple[Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base, new = planted
    code, out, _ = run_cli(capsys, str(base), str(new), "--alpha", "0.001", "--fail-on-regression")
    assert code == 0
    assert out.splitlines()[1] == (
        "no regression from the baseline: 3 tasks in common, none dropped beyond chance "
        "(one-sided Fisher exact test, p < 0.001) and no critical task dropped")


def test_rises_are_tested_too_and_verdict_changes_are_named(tmp_path: Path) -> None:
    base = {"a": (0, 8), "b": (8, 8), "c": (3, 8), "d": (0, 4), "e": (8, 8), "f": (4, 8), "g": (2, 4, 2)}
    new = {"a": (8, 8), "b": (0, 8), "c": (0, 8), "d": (2, 4), "e": (8, 8), "f": (8, 8), "g": (0, 0, 6)}
    cmp = compare(RunDoc("b", "b", read_results(write(tmp_path / "b", trials_for(base)))),
                  RunDoc("n", "n", read_results(write(tmp_path / "n", trials_for(new)))))
    got = {t.task: (t.change, t.beyond_chance) for t in cmp.tasks}
    assert got == {
        "a": ("fixed", "improved"), "b": ("newly failing", "regressed"), "c": ("now always failing", None),
        "d": ("partly fixed", None), "e": ("still passing", None), "f": ("fixed", "improved"),
        "g": ("not graded", None),
    }


def test_a_critical_task_regresses_on_any_drop_and_max_drop_gates_pass_k(tmp_path: Path) -> None:
    base = write(tmp_path / "b", trials_for({"refund": (8, 8), "greet": (8, 8)}, critical=["refund"]))
    new = write(tmp_path / "n", trials_for({"refund": (7, 8), "greet": (6, 8)}, critical=["refund"]))
    cmp = compare(RunDoc("b", "b", read_results(base)), RunDoc("n", "n", read_results(new)))
    assert [(c.passed, c.text) for c in regression_checks(cmp, max_drop=10)] == [
        (False, "critical task refund regressed from 8/8 to 7/8 (p=0.5; a critical task may not drop at all)"),
        # pass^8: refund 0 (7/8), greet 0 (6/8), against 1 and 1
        (False, "pass^8 dropped 100.0 points from the baseline (100.0% to 0.0%), more than --sandtable-max-drop 10"),
    ]
    same = compare(RunDoc("b", "b", read_results(base)), RunDoc("b2", "b2", read_results(base)))
    assert [(c.passed, c.text) for c in regression_checks(same, max_drop=0, max_drop_option="--max-drop")] == [
        (True, "no regression from the baseline: 2 tasks in common, none dropped beyond chance "
               "(one-sided Fisher exact test, p < 0.05) and no critical task dropped"),
        (True, "pass^8 100.0% against the baseline's 100.0% did not drop (--max-drop 0)"),
    ]


def test_pass_j_changes_have_paired_intervals_over_tasks_in_both_runs(tmp_path: Path) -> None:
    tags = {"a": ["booking"], "b": ["booking", "chat"], "c": ["chat"]}
    base = write(tmp_path / "b", trials_for({"a": (4, 4), "b": (4, 4), "c": (2, 4)}, tags=tags), k=4)
    new = write(tmp_path / "n", trials_for({"a": (2, 4), "b": (4, 4), "c": (2, 4), "d": (4, 4)}, tags=tags), k=4)
    cmp = compare(RunDoc("b", "b", read_results(base)), RunDoc("n", "n", read_results(new)))
    one = cmp.overall.js[1]
    assert (one.tasks, one.base, one.new) == (3, pytest.approx(10 / 12), pytest.approx(8 / 12))
    assert one.change == pytest.approx(-2 / 12)
    assert one.interval is not None and one.interval[0] < one.change < one.interval[1]
    assert set(cmp.tags) == {"booking", "chat"} and cmp.tags["booking"].tasks == 2
    # the same files always give the same interval (fixed seed)
    again = compare(RunDoc("b", "b", read_results(base)), RunDoc("n", "n", read_results(new)))
    assert again.overall.js[4].interval == cmp.overall.js[4].interval
    assert [t.task for t in cmp.added] == ["d"] and cmp.removed == []


def test_failure_modes_that_appear_or_vanish(tmp_path: Path) -> None:
    base = write(tmp_path / "b", trials_for({"a": (2, 4), "b": (4, 4)}, fail_check="state:{task}"), k=4)
    new = write(tmp_path / "n", trials_for({"a": (4, 4), "b": (1, 4)}, fail_check="state:{task}"), k=4)
    cmp = compare(RunDoc("b", "b", read_results(base)), RunDoc("n", "n", read_results(new)))
    assert [(m.id, m.base, m.new, m.example) for m in cmp.modes] == [
        ("state:b", 0, 3, "b[2]: b trial 2 went wrong"),
        ("state:a", 2, 0, "a[3]: a trial 3 went wrong"),
    ]


def test_a_changed_domain_is_compared_task_by_task_and_says_what_was_added_or_removed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "b", trials_for({"a": (4, 4), "old": (4, 4)}), k=4, sha=SHA_A)
    new = write(tmp_path / "n", trials_for({"a": (4, 4), "fresh": (1, 4)}), k=4, sha=SHA_B)
    code, out, _ = run_cli(capsys, str(base), str(new))
    assert code == 0
    assert (f"domain freight changed between the runs (sha256 {'a' * 12} -> {'b' * 12}): "
            "compared task by task where ids match") in out.splitlines()
    assert "tasks added in freight: fresh" in out.splitlines()
    assert "tasks removed from freight: old" in out.splitlines()
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines()]
    assert ["fresh", "-", "1/4", "added"] in rows and ["old", "4/4", "-", "removed"] in rows


def test_usage_and_cost_deltas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    usage = {"agent": {"claude-sonnet-4-5": {"input": 1000, "output": 100, "cache_read": 0, "cache_write": 0,
                                             "calls": 1}}}
    base = write(tmp_path / "b", trials_for({"a": (4, 4)}, usage=usage), k=4)
    twice = {"agent": {"claude-sonnet-4-5": {**usage["agent"]["claude-sonnet-4-5"], "input": 2000}}}
    new = write(tmp_path / "n", trials_for({"a": (4, 4)}, usage=twice), k=4)
    code, out, _ = run_cli(capsys, str(base), str(new), "--format", "json")
    assert code == 0
    spend = json.loads(out)["comparisons"][0]["spend"]
    assert spend["base"]["tokens"] == {"input": 4000, "output": 400, "cache_read": 0, "cache_write": 0}
    assert spend["new"]["tokens"]["input"] == 8000
    b, n = read_results(base)["summary"]["cost"]["total"], read_results(new)["summary"]["cost"]["total"]
    assert (spend["base"]["cost"], spend["new"]["cost"]) == (b, n) and n > b > 0
    assert spend["new"]["cost_per_trial"] == pytest.approx(n / 4)
    code, out, _ = run_cli(capsys, str(base), str(new))
    assert code == 0
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines()]
    assert ["input tokens", "4,000", "8,000", "+4,000"] in rows


def test_markdown_for_a_pull_request_and_the_step_summary(
        planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    base, new = planted
    code, out, err = run_cli(capsys, str(base), str(new), "--format", "markdown")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "## sandtable: regression"
    assert lines[2] == "❌ **regression: task book-happy-path regressed from 8/8 to 2/8 (p=0.0035 &lt; 0.05)**"
    assert "| book-happy-path | 8/8 | 2/8 | newly flaky | 0.0035 | 1 | regressed | beyond chance |" in [
        re.sub(r" +", " ", line) for line in lines]
    assert lines.count("<details>") == lines.count("</details>") >= 3
    assert "<summary>pass^j overall and by tag</summary>" in lines
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + out


def test_markdown_escapes_what_a_domain_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "b", trials_for({"a|<b>": (4, 4)}), k=4)
    new = write(tmp_path / "n", trials_for({"a|<b>": (0, 4)}), k=4)
    _, out, _ = run_cli(capsys, str(base), str(new), "--format", "markdown")
    assert "a\\|&lt;b&gt;" in out and "<b>" not in out


def test_a_leaderboard_of_three_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [write(tmp_path / name, trials_for(plan, agent=name), k=4) for name, plan in (
        ("reference", {"a": (4, 4), "b": (4, 4)}), ("claude", {"a": (3, 4), "b": (4, 4)}),
        ("gpt", {"a": (0, 4), "b": (2, 4)}))]
    code, out, err = run_cli(capsys, *map(str, paths), "--format", "json", "--fail-on-regression")
    doc = json.loads(out)
    assert (code, err) == (1, "")  # gpt: a 4/4 -> 0/4 (p=0.014)
    board = doc["leaderboard"]
    assert [r["label"] for r in board] == ["reference", "claude", "gpt"]
    assert [r["pass_hat"]["1"]["value"] for r in board] == [1.0, 7 / 8, 2 / 8]
    assert board[0]["pass_hat"]["4"]["interval"] == [0.269, 1.0]  # two tasks at 4/4 say little about pass^4
    assert [c["regression"] for c in doc["comparisons"]] == [False, True]
    code, out, _ = run_cli(capsys, *map(str, paths))
    assert out.splitlines()[0] == (
        "Leaderboard (pass^j over the 2 tasks every run has; cost and latency of whole runs)")
    assert re.split(r"\s{2,}", out.splitlines()[3])[:3] == ["reference", "8", "100.0% (72-100%)"]


def test_runs_of_the_same_agent_are_labelled_by_their_folders(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    paths = [write(tmp_path / name, trials_for({"a": (4, 4)}), k=4) for name in ("mon", "tue", "wed")]
    _, out, _ = run_cli(capsys, *map(str, paths), "--format", "json")
    assert [r["label"] for r in json.loads(out)["leaderboard"]] == ["mon", "tue", "wed"]


# --------------------------------------------------------------------------- bad input: one line, exit 2


def test_a_missing_file(planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, str(tmp_path / "nope.json"), str(planted[1]))
    assert (code, out, err) == (2, "", f"error: {tmp_path / 'nope.json'}: no such file\n")


def test_a_file_of_another_schema_major(planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    doc = json.loads(planted[1].read_text(encoding="utf-8"))
    doc["schema_version"] = "2.0"
    doc["writer"]["version"] = "2.1.0"
    other = tmp_path / "v2.json"
    other.write_text(json.dumps(doc), encoding="utf-8")
    from pytest_sandtable import __version__

    code, out, err = run_cli(capsys, str(planted[0]), str(other))
    assert (code, out) == (2, "")
    assert err == (f"error: {other}: written with results schema 2.0 by pytest-sandtable 2.1.0; this "
                   f"pytest-sandtable ({__version__}) reads schema 1.x only: upgrade pytest-sandtable to read it\n")


def test_unrelated_domains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a", trials_for({"book": (4, 4)}, domain="freight"), k=4, domains=["freight"])
    b = write(tmp_path / "b", trials_for({"visit": (4, 4)}, domain="clinic"), k=4, domains=["clinic"])
    code, out, err = run_cli(capsys, str(a), str(b))
    assert (code, out) == (2, "")
    assert err == f"error: {a} and {b} have no domain in common ({a}: freight; {b}: clinic)\n"


def test_no_overlapping_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a", trials_for({"book": (4, 4), "vet": (4, 4)}), k=4)
    b = write(tmp_path / "b", trials_for({"haggle": (4, 4)}), k=4)
    code, out, err = run_cli(capsys, str(a), str(b))
    assert (code, out) == (2, "")
    assert err == (f"error: {a} and {b} have no task in common (domain freight: {a} ran book, vet; "
                   f"{b} ran haggle)\n")


@pytest.mark.parametrize(("argv", "message"), [
    (("--alpha", "5"), "--alpha takes a level between 0 and 1: did you mean 0.05?"),
    (("--alpha", "0"), "--alpha: expected a level between 0 and 1, e.g. 0.05, got '0'"),
    (("--alpha", "x"), "--alpha: expected a level between 0 and 1, e.g. 0.05, got 'x'"),
    (("--max-drop", "120"), "--max-drop: expected a percentage from 0 to 100, got '120'"),
])
def test_bad_options(planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                     message: str) -> None:
    code, out, err = run_cli(capsys, str(planted[0]), str(planted[1]), *argv)
    assert (code, out, err) == (2, "", f"error: {message}\n")


def test_one_file_is_not_a_comparison(planted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, str(planted[0]))
    assert (code, out, err) == (2, "", "error: compare needs at least two results: BASE NEW [MORE...]\n")


def test_parse_alpha_default() -> None:
    assert parse_alpha(None, "--alpha") == 0.05 and parse_alpha("0.01", "--alpha") == 0.01


# --------------------------------------------------------------------------- docs/ci.md, run locally


def _workflow() -> dict[str, Any]:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(# \.github/workflows/agent\.yml\n.*?)```", text, re.S)
    assert block is not None
    doc: dict[str, Any] = yaml.safe_load(block.group(1))
    return doc


def _ours(step: Mapping[str, Any]) -> bool:
    return "pytest" in str(step.get("run", ""))


def test_the_github_actions_example_runs_on_the_freight_example(tmp_path: Path) -> None:
    """Every sandtable command of docs/ci.md's workflow, in order: both shards (matrix values
    substituted), merge, then compare against a stored baseline (a run of the example's
    in-house agent, made with the page's local commands), and the markdown it writes."""
    wf = _workflow()
    shutil.copytree(ROOT / "example_domains" / "freight", tmp_path / "example_domains" / "freight")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("GITHUB_STEP_SUMMARY", None)

    def bash(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    stored = bash("python -m pytest example_domains/freight -p no:cacheprovider --sandtable-k=4 "
                  "--sandtable-out=baseline")
    assert stored.returncode == 1, stored.stdout[-2000:]  # the in-house agent slips by design

    commands = []
    for entry in wf["jobs"]["shard"]["strategy"]["matrix"]["include"]:
        for step in filter(_ours, wf["jobs"]["shard"]["steps"]):
            commands.append(re.sub(r"\$\{\{ matrix\.(\w+) \}\}", lambda m, e=entry: str(e[m.group(1)]), step["run"]))
    commands += [step["run"] for step in wf["jobs"]["compare"]["steps"] if _ours(step)]
    assert [c.split(" -")[0] for c in commands] == [
        "python", "python", "python", "python"] and len(commands) == 4
    for command in commands:
        assert "${{" not in command
        done = bash(command)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])

    merged = read_results(tmp_path / "merged")
    assert merged["summary"]["trials"] == 68 and merged["summary"]["passed"] == 68
    assert sorted(merged["run"]["shards"][i]["trials"] for i in range(2)) == [32, 36]
    md = (tmp_path / "comparison.md").read_text(encoding="utf-8").splitlines()
    assert md[0] == "## sandtable: no regression"
    assert md[2] == ("✅ **no regression from the baseline: 17 tasks in common, none dropped beyond chance "
                     "(one-sided Fisher exact test, p &lt; 0.05) and no critical task dropped**")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md if line.startswith("| ")]
    fixed = {r[0]: r[1:4] for r in rows if r[3:4] == ["fixed"]}
    baseline = {t["task"]: t for t in read_results(tmp_path / "baseline")["tasks"]}
    assert fixed and all(baseline[name.removesuffix(" (critical)")]["verdict"] != "passed" for name in fixed)
    assert all(after == "4/4" for _, after, _ in fixed.values())


# -- read a trial at a time, each kept light ------------------------------------------------------


def test_runs_read_light_compare_as_the_whole_documents_do(tmp_path: Path) -> None:
    """``read_runs`` keeps of each trial only what a comparison reads: every rendering is
    the same as of the documents read whole, in both the writer's layout (read a trial at
    a time) and another (read whole)."""
    from pytest_sandtable.report.compare import as_json, leaderboard, light_trial, markdown, read_runs, terminal_lines

    plans = [{"a": (8, 8), "b": (4, 8), "c": (2, 4, 2)}, {"a": (2, 8), "b": (4, 8), "c": (0, 0, 6)},
             {"a": (5, 8), "b": (8, 8), "d": (1, 8)}]
    paths = [write(tmp_path / f"r{i}", trials_for(plan, critical=["b"], tags={"a": ["deals"]}, agent=f"v{i}",
                                                   fail_check="{task}-check"))
             for i, plan in enumerate(plans)]
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(read_results(paths[2]), indent=2), encoding="utf-8")
    paths.append(pretty)
    light = read_runs([str(p) for p in paths])
    whole = [RunDoc(r.label, r.path, read_results(r.path)) for r in light]
    assert [len(r.doc["trials"]) for r in light] == [len(r.doc["trials"]) for r in whole] == [22, 22, 24, 24]
    assert light[0].doc["trials"][12] == {
        "domain": "freight", "task": "b", "trial": 5, "verdict": "failed", "critical": True, "tags": [],
        "shared_tags": [], "checks": [{"kind": "state", "id": "b-check", "passed": False,
                                       "detail": "b trial 5 went wrong"}]}
    assert light[0].doc["trials"][12] == light_trial(whole[0].doc["trials"][12])
    assert {k: v for k, v in light[0].doc.items() if k != "trials"} == {
        k: v for k, v in whole[0].doc.items() if k != "trials"}

    def rendered(runs: list[RunDoc]) -> tuple[Any, ...]:
        cmps = [compare(runs[0], r) for r in runs[1:]]
        checks = [regression_checks(c, 5.0) for c in cmps]
        board = leaderboard(runs)
        return (as_json(runs, cmps, checks, board, 5.0), markdown(runs, cmps, checks, board),
                terminal_lines(runs, cmps, checks, board))

    assert rendered(light) == rendered(whole)
