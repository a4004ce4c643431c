"""``python -m pytest_sandtable merge`` and ``report``: shards of one run combined into one
results.json with pass^k over all trials, refusals with one clear line, re-rendering."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.cli.runs import add_subcommands
from pytest_sandtable.report.results_json import read_results

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, SHOP, make_shop, strip_timings


def cli(*argv: str) -> int:
    """The merge and report commands as ``python -m pytest_sandtable`` runs them."""
    parser = argparse.ArgumentParser(prog="python -m pytest_sandtable")
    add_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("SHOP_CRASH", "SHOP_SAY", "SHOP_USER_FAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SHOP_FAIL", "greet:2,refund:3")
    make_shop(pytester)
    monkeypatch.chdir(pytester.path)
    return pytester


def shard(pytester: pytest.Pytester, out: str, *args: str, k: int = 4) -> dict[str, Any]:
    pytester.runpytest(*PLUGIN_ARGS, f"--sandtable-k={k}", "--sandtable-out", out, *args)
    return read_results(pytester.path / out)


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """What a merge must reproduce of a single run: all but timings, the writer's command and the shard list."""
    doc = strip_timings(doc)
    doc["writer"].pop("command")
    doc["run"].pop("shards", None)
    return doc


@pytest.mark.parametrize(
    "selections",
    [
        pytest.param(("refund or greet", "order"), id="split-by-task"),
        pytest.param(("1-4 or 2-4", "3-4", "4-4"), id="split-by-trial-number"),
    ],
)
def test_merged_shards_equal_the_single_run(
    shop: pytest.Pytester, capsys: pytest.CaptureFixture[str], selections: tuple[str, ...]
) -> None:
    whole = shard(shop, "whole")
    parts = [f"part{i}" for i in range(len(selections))]
    for out, sel in zip(parts, selections):
        shard(shop, out, "-k", sel)
    capsys.readouterr()
    code = cli("merge", *(f"{p}/results.json" for p in parts), "-o", "merged")
    out = capsys.readouterr().out.splitlines()
    assert code == 1  # without a gate, as pytest: trials failed
    merged = read_results(shop.path / "merged")
    assert merged["summary"]["pass_hat"] == whole["summary"]["pass_hat"]
    assert merged["summary"]["pass_hat"]["4"] == pytest.approx(1 / 3)
    assert "coverage" not in merged  # merge does not load the domains (docs/results.md)
    assert comparable(merged) == comparable({k: v for k, v in whole.items() if k != "coverage"})
    assert merged["writer"]["command"] == "merge"
    assert [s["trials"] for s in merged["run"]["shards"]] == [len(read_results(shop.path / p)["trials"]) for p in parts]
    assert merged["run"]["started_at"] == min(read_results(shop.path / p)["run"]["started_at"] for p in parts)
    assert (shop.path / "merged" / "report.html").is_file()
    assert out[0] == (
        "12 trials of 3 tasks: 10 passed, 2 failed, 0 errored (left out of pass^k)   agent: shop-agent   user: scripted"
    )
    assert out[-2:] == [
        "sandtable: results in merged/",
        "sandtable gate failed: critical tasks fail the run even with no gate set: critical task refund failed "
        "1 of 4 trials ([3])",
    ]


def test_merge_with_a_gate(shop: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
                           ) -> None:
    monkeypatch.setenv("SHOP_FAIL", "greet:2")
    shard(shop, "a", "-k", "refund or greet")
    shard(shop, "b", "-k", "order")
    capsys.readouterr()
    assert cli("merge", "a", "b", "-o", "m1", "--fail-under", "60") == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "sandtable gate passed: pass^4 66.7% meets --sandtable-fail-under 60% with 6.7 points to spare"
    )
    assert cli("merge", "a", "b", "-o", "m2", "--floor", "chat=75") == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "sandtable gate failed: tag chat pass^4 50.0% is below --sandtable-floor chat=75% by 25.0 points"
    )
    gate = read_results(shop.path / "m2")["gate"]
    assert (gate["set"], gate["passed"], gate["floors"]) == (True, False, {"chat": 75.0})
    assert cli("merge", "a", "b", "--floor", "chat") == 2
    assert capsys.readouterr().err == "error: --floor: expected TAG=PCT, e.g. booking=90, got 'chat'\n"
    assert cli("merge", "a", "b", "--fail-under", "0.85") == 2
    assert capsys.readouterr().err == "error: --fail-under takes a percentage: did you mean 85?\n"
    assert cli("merge", "a", "b", "--floor", "chat=0.75") == 2
    assert capsys.readouterr().err == "error: --floor takes a percentage: did you mean chat=75?\n"


def test_merge_without_out_makes_a_run_folder(shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard(shop, "a", "-k", "refund")
    shard(shop, "b", "-k", "not refund")
    capsys.readouterr()
    cli("merge", "a", "b")
    (folder,) = (shop.path / ".sandtable" / "runs").iterdir()
    assert folder.name.endswith("-shop")
    assert capsys.readouterr().out.splitlines()[-2] == f"sandtable: results in .sandtable/runs/{folder.name}/"


def test_merge_refuses_a_domain_that_changed_between_shards(
    shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    a = shard(shop, "a", "-k", "refund")
    (shop.path / "sandtable.yaml").write_text(SHOP.replace("a fictional shop", "a made-up shop"), encoding="utf-8")
    b = shard(shop, "b", "-k", "not refund")
    capsys.readouterr()
    assert cli("merge", "a/results.json", "b/results.json", "-o", "merged") == 2
    sha_a, sha_b = a["run"]["domains"][0]["sha256"][:12], b["run"]["domains"][0]["sha256"][:12]
    assert capsys.readouterr().err == (
        f"error: cannot merge: domain 'shop' differs between a/results.json (sha256 {sha_a}) and b/results.json "
        f"(sha256 {sha_b}): shards must run the same domain files\n"
    )
    assert not (shop.path / "merged").exists()


def test_merge_refuses_a_path_that_is_another_domain(shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard(shop, "a", "-k", "refund")
    (shop.path / "sandtable.yaml").write_text(SHOP.replace("name: shop", "name: store"), encoding="utf-8")
    shard(shop, "b", "-k", "not refund")
    capsys.readouterr()
    assert cli("merge", "a", "b") == 2
    assert capsys.readouterr().err == (
        "error: cannot merge: sandtable.yaml is domain 'shop' in a but 'store' in b: shards must run the same "
        "domain files\n"
    )


def test_merge_refuses_a_trial_in_two_shards(shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard(shop, "a", "-k", "refund or greet")
    shard(shop, "b", "-k", "greet or order")
    capsys.readouterr()
    assert cli("merge", "a", "b") == 2
    assert capsys.readouterr().err == (
        "error: cannot merge: shop/greet trial 1 is in both a and b: shards must split the trials, not repeat them "
        "(a trial's number fixes its seed, so a repeat is the same trial twice)\n"
    )


def test_merge_refuses_shards_of_different_runs(shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard(shop, "a", "-k", "refund")
    shard(shop, "b", "-k", "greet", k=2)
    shard(shop, "c", "-k", "greet", "--sandtable-seed=5")
    capsys.readouterr()
    assert cli("merge", "a", "b") == 2
    assert capsys.readouterr().err == (
        "error: cannot merge: a and b ran with different k (4 and 2): shards of one run use the same --sandtable-k\n"
    )
    assert cli("merge", "a", "c") == 2
    assert capsys.readouterr().err == (
        "error: cannot merge: a and c ran with different run_seed (0 and 5): shards of one run use the same "
        "--sandtable-seed\n"
    )


def test_merge_refuses_shards_whose_trials_ran_another_agent(
    shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both shards record run.agent 'reference' (the option); in one a sandtable_agent fixture ran another agent."""
    a = shard(shop, "a", "-k", "refund")
    (shop.path / "conftest.py").unlink()  # no fixture: the option's reference agent runs
    b = shard(shop, "b", "-k", "not refund")
    assert a["run"]["agent"] == b["run"]["agent"] == "reference"
    assert (a["summary"]["agents"], b["summary"]["agents"]) == (["shop-agent"], ["reference"])
    capsys.readouterr()
    assert cli("merge", "a", "b", "-o", "merged") == 2
    assert capsys.readouterr().err == (
        "error: cannot merge: a and b ran domain 'shop' with different agents ('shop-agent' and 'reference'): "
        "shards of one run use the same agent\n"
    )
    assert not (shop.path / "merged").exists()


def test_merge_refuses_shards_whose_trials_ran_another_user(
    shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    shard(shop, "a", "-k", "refund")
    shard(shop, "b", "-k", "not refund")
    doc = json.loads((shop.path / "b" / "results.json").read_text(encoding="utf-8"))
    for t in doc["trials"]:
        t["user"] = "claude:claude-haiku-4-5"
    doc["summary"]["users"] = ["claude:claude-haiku-4-5"]
    (shop.path / "b" / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    capsys.readouterr()
    assert cli("merge", "a", "b") == 2
    assert capsys.readouterr().err == (
        "error: cannot merge: a and b ran domain 'shop' with different users ('scripted' and "
        "'claude:claude-haiku-4-5'): shards of one run use the same simulated user\n"
    )


def test_merge_carries_domain_files_that_did_not_load(
    shop: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_FAIL", "")
    (shop.path / "broken.sandtable.yaml").write_text("version: 1\nname: broken\n", encoding="utf-8")
    shard(shop, "a", "-k", "refund")
    shard(shop, "b", "-k", "not refund")
    capsys.readouterr()
    assert cli("merge", "a", "b", "-o", "merged", "--fail-under", "10") == 1
    merged = read_results(shop.path / "merged")
    assert [c["path"] for c in merged["run"]["collection_errors"]] == ["broken.sandtable.yaml"]  # once, not twice
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == [
        "sandtable: 1 domain file did not load, so its tasks are not in these results: broken.sandtable.yaml",
        "sandtable gate failed: domain file broken.sandtable.yaml did not load (a collection error), so none of its "
        "tasks ran",
        "  failed: domain file broken.sandtable.yaml did not load (a collection error), so none of its tasks ran",
        "  passed: pass^4 100.0% meets --sandtable-fail-under 10% with 90.0 points to spare",
    ]


def test_merge_refuses_a_bad_file(shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    shard(shop, "a", "-k", "refund")
    (shop.path / "broken.json").write_text("{", encoding="utf-8")
    capsys.readouterr()
    assert cli("merge", "a", "broken.json") == 2
    assert capsys.readouterr().err == (
        "error: broken.json: not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2\n"
    )


# --------------------------------------------------------------------------- report


def test_report_rerenders_the_html_and_prints_the_summary(
    shop: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = shard(shop, "run", "--sandtable-fail-under=50")
    html = shop.path / "run" / "report.html"
    first = html.read_text(encoding="utf-8")
    html.unlink()
    capsys.readouterr()
    assert cli("report", "run/results.json") == 1  # as the run's pytest: its gate failed
    assert html.read_text(encoding="utf-8") == first
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("12 trials of 3 tasks: 10 passed, 2 failed, 0 errored")
    assert "all tasks    3        83.3%     66.7%     50.0%     33.3%     100.0%" in out
    assert doc["gate"]["lines"] == [
        "sandtable gate failed: pass^4 33.3% is below --sandtable-fail-under 50% by 16.7 points (and 1 more failure)",
        "  failed: pass^4 33.3% is below --sandtable-fail-under 50% by 16.7 points",
        "  failed: critical task refund failed 1 of 4 trials ([3])",
    ]
    assert out[-4:] == [
        f"sandtable: report in {Path('run') / 'report.html'}",
        *doc["gate"]["lines"],
    ]
    assert cli("report", "run", "-o", "elsewhere") == 1
    assert (shop.path / "elsewhere" / "report.html").read_text(encoding="utf-8") == first


@pytest.mark.parametrize("command", ["merge", "report"])
def test_a_closed_pipe_ends_the_output_quietly(shop: pytest.Pytester, command: str) -> None:
    """``python -m pytest_sandtable merge ... | head -1``: no BrokenPipeError traceback."""
    shard(shop, "a", "-k", "refund")
    shard(shop, "b", "-k", "not refund")
    argv = ["merge", "a", "b", "-o", "merged"] if command == "merge" else ["report", "a"]
    proc = subprocess.Popen([sys.executable, "-m", "pytest_sandtable", *argv], cwd=shop.path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader went away before a line was written
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert err == ""
    assert code == 1  # what it would have been: trials failed
    assert (shop.path / ("merged" if command == "merge" else "a") / "report.html").is_file()
    # and through a shell pipe, as users type it
    shell = subprocess.run(f"{sys.executable} -m pytest_sandtable {' '.join(argv)} | head -1", shell=True,
                           cwd=shop.path, capture_output=True, text=True, check=False)
    assert shell.stderr == ""
    assert shell.stdout.startswith("12 trials of 3 tasks:") or shell.stdout.startswith("4 trials of 1 task:")


def test_report_of_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("report", str(tmp_path / "nope.json")) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope.json'}: no such file\n"


def test_the_commands_are_on_the_module_command_line(shop: pytest.Pytester) -> None:
    shard(shop, "run")
    proc = subprocess.run([sys.executable, "-m", "pytest_sandtable", "report", "run"], cwd=shop.path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr  # as the run's pytest: trials failed
    assert "sandtable: report in run" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "pytest_sandtable", "merge", "--help"], cwd=shop.path,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "--fail-under PCT" in proc.stdout


def test_merge_refuses_a_shard_that_stopped_early(tmp_path: Path) -> None:
    from pytest_sandtable.report.merge import MergeError, merge_results

    doc = {"run": {"stopped_early": "stopping after 1 failures", "k": 1, "agent": "a", "user": "u",
                   "run_seed": 0, "domains": []}}
    with pytest.raises(MergeError) as e:
        merge_results([("a/results.json", doc)])
    assert str(e.value) == (
        "a/results.json is a partial run (it stopped early: stopping after 1 failures); run that shard again in full"
    )


def test_merge_prices_models_from_a_prices_file() -> None:
    from pytest_sandtable.engine.results import TrialResult
    from pytest_sandtable.report.merge import merge_results
    from pytest_sandtable.report.results_json import RunMeta, build_results

    usage = {"agent": {"gpt-x": {"input": 1_000_000, "output": 500_000, "cache_read": 0, "cache_write": 0,
                                 "calls": 2}}, "user": {}}
    domains = [{"name": "shop", "path": "sandtable.yaml", "sha256": "0" * 64}]
    shards = []
    for trial in (1, 2):
        t = TrialResult(domain="shop", task="greet", trial=trial, k=2, seed=trial, verdict="passed",
                        agent="a", user="scripted", usage=usage, location="sandtable.yaml:3")
        shards.append((f"s{trial}/results.json",
                       build_results([t], RunMeta(domains=domains, agent="a", user="scripted", k=2, run_seed=0))))
    prices = {"gpt-x": {"input": 2.0, "output": 8.0}}
    without = merge_results(shards)["summary"]["cost"]
    priced = merge_results(shards, prices=prices)["summary"]["cost"]
    assert (without["agent"], without["unpriced"]) == ({"gpt-x": None}, ["gpt-x"])
    # 2 trials x (1M input x $2 + 0.5M output x $8) per million tokens
    assert priced["agent"] == {"gpt-x": 12.0}
    assert priced["total"] == 12.0
