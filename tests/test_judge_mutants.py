"""Judge mutants (``judge mutants RUN``): passing transcripts with the quoted evidence
removed must be caught, the detection rate shown; and ``regrade --judge`` of a judged
run answering every question from the judge cache, with the servers stopped."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _judges import fake_judges, verdict
from test_judge_plugin import DESK

from pytest_sandtable import ReferenceAgent, ScriptedUser, run_trial
from pytest_sandtable.__main__ import main
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.judge.mutants import drop_evidence
from pytest_sandtable.judge.panel import Panel, PanelOptions
from pytest_sandtable.judge.run import judge_trials
from pytest_sandtable.judge.spec import parse_panel
from pytest_sandtable.report.results_json import RunMeta, build_results, read_results, write_run

TEXT = DESK.replace('say: "Booked L-1 at 2000."', 'say: "Booked L-1 at 2000. Thanks for calling."').replace(
    '  confirms: "Did the agent confirm the booking?"\n',
    '  confirms: "Did the agent confirm the booking?"\n  thanks: "Did the agent thank the caller?"\n')


def _careful(message: str) -> str:
    """Says yes only to what the transcript holds."""
    transcript = message.split("Transcript:\n", 1)[1]
    if "(confirms)" in message:
        return verdict("yes", "Booked L-1") if "Booked L-1" in transcript else verdict("no", "")
    if "(thanks)" in message:
        return verdict("yes", "Thanks for calling") if "Thanks for calling" in transcript else verdict("no", "")
    return verdict("yes", "at 2001")


def _sloppy(message: str) -> str:
    """Says yes to anything, quoting the agent's first words."""
    transcript = message.split("Transcript:\n", 1)[1]
    line = next(ln for ln in transcript.splitlines() if "] agent: " in ln)
    return verdict("yes", line.split("] agent: ", 1)[1][:10])


def _judged_run(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (folder / "desk.sandtable.yaml").write_text(TEXT, encoding="utf-8")
    domain = load_domain_text(TEXT, "desk.sandtable.yaml")
    trials = [run_trial(domain, task.id, ReferenceAgent(), ScriptedUser(), trial=1, k=1,
                        location=f"desk.sandtable.yaml:{task.pos.line if task.pos else 1}") for task in domain.tasks]
    meta = RunMeta(domains=[{"name": "desk", "path": "desk.sandtable.yaml",
                             "sha256": hashlib.sha256(TEXT.encode()).hexdigest()}],
                   agent="reference", user="scripted", k=1, run_seed=0)
    results: dict[str, Any] = dict(build_results(trials, meta))
    with fake_judges(monkeypatch, {"judge-a": _careful}):
        panel = Panel(parse_panel("claude:judge-a"), PanelOptions(cache_dir=folder / ".sandtable" / "judge-cache"))
        results["judged"] = judge_trials(results["trials"], lambda t: domain, panel)
    write_run(results, folder / "run")  # type: ignore[arg-type]
    return folder / "run"


def test_drop_evidence() -> None:
    trial = {"transcript": [{"role": "user", "text": "Hi. Fee?"},
                            {"role": "agent", "text": "Sorry for the wait. The $35 fee is refunded. Bye!"}]}
    mutant = drop_evidence(trial, ["$35 fee"])
    assert mutant is not None and mutant["transcript"][1]["text"] == "Sorry for the wait. Bye!"
    assert trial["transcript"][1]["text"] == "Sorry for the wait. The $35 fee is refunded. Bye!"  # left as it was
    assert drop_evidence(trial, ["Fee?"]) is None  # the user's words are not the agent's evidence
    assert drop_evidence(trial, ["Sorry", "$35", "Bye"]) is None  # the agent would say nothing


def test_the_panel_catches_the_evidence_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run = _judged_run(tmp_path, monkeypatch)
    with fake_judges(monkeypatch, {"judge-a": _careful, "judge-c": _sloppy}) as fakes:
        assert main(["judge", "mutants", str(run)]) == 0
        assert fakes.calls == 2  # at-ceiling passed, with two yes verdicts: one mutant each
        careful = capsys.readouterr().out.splitlines()
        assert main(["judge", "mutants", str(run), "--judge", "openai:judge-c"]) == 0
        sloppy = capsys.readouterr().out.splitlines()
    assert careful[0] == ("judge mutants: 2 of 2 caught (100.0%) by claude:judge-a (drop-evidence: each quoted "
                          "sentence removed from a passing trial; 2 judge calls)")
    assert [line.split() for line in careful[1:2] + careful[3:]] == [
        ["criterion", "mutants", "caught", "detection"],
        ["desk/confirms", "1", "1", "100.0%"], ["desk/thanks", "1", "1", "100.0%"]]
    assert sloppy[0].startswith("judge mutants: 0 of 2 caught (0.0%) by openai:judge-c ")
    assert sloppy[-2:] == ["survived: at-ceiling[1] confirms: the panel said yes",
                           "survived: at-ceiling[1] thanks: the panel said yes"]


def test_a_run_without_judged_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = _judged_run(tmp_path, monkeypatch)
    doc = json.loads((run / "results.json").read_text())
    del doc["judged"]
    (run / "results.json").write_text(json.dumps(doc))
    assert main(["judge", "mutants", str(run)]) == 2
    assert capsys.readouterr().err == (f"error: {run}: no judged scores in this run: run it with --sandtable-judge "
                                       "first\n")


def test_regrade_judges_from_the_cache_with_no_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run = _judged_run(tmp_path, monkeypatch)
    first = read_results(run / "results.json")["judged"]
    # the servers are stopped: a call would be refused and void its verdict
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    code = main(["regrade", str(run), "-o", str(tmp_path / "regraded"), "--judge", "claude:judge-a"])
    out = capsys.readouterr().out
    assert code == 1  # past-ceiling still fails
    judged = read_results(tmp_path / "regraded" / "results.json")["judged"]
    assert (judged["calls"], judged["cached"]) == (0, first["calls"]) and first["calls"] == 5  # 2 + 3 criteria
    assert judged["criteria"] == first["criteria"]
    assert "Judges: 0 judge calls, 0 input and 0 output tokens, $0.00 (apart from the agent's and the user's); " \
           "5 verdicts from the judge cache; " in out
