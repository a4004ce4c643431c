"""``judge calibrate LABELS --run RUN --judge SPEC``: Cohen's kappa per judge and for the
panel against planted human labels (computed by hand below), the test-retest flip rate,
"calibrated" only at kappa >= 0.6 on >= 30 labels, a run reading the calibration, and
bad labels files refused line by line."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _judges import fake_judges, verdict

from pytest_sandtable.__main__ import main
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.judge.calibrate import calibrated_criteria, cohen_kappa
from pytest_sandtable.report.results_json import RunMeta, build_results, write_run

DOMAIN = """\
version: 1
name: desk
policy: Confirm every booking.
world:
  loads: { key: id, rows: [{ id: L-1 }] }
tools:
  - name: book
    params: { id: { type: string } }
    ops: [{ get: { table: loads, key: $id } }]
judge:
  confirms: "Did the agent confirm the booking?"
tasks:
  - id: booking
    user: { opening: "Book L-1." }
    expect: { called: [book] }
"""
PANEL = "claude:judge-a,claude:judge-b,openai:judge-c"


def _trial(n: int, said: str) -> TrialResult:
    return TrialResult(domain="desk", task="booking", trial=n, k=8, seed=n, verdict="passed",
                       transcript=[{"role": "user", "text": f"Book L-1 (request {n}).", "turn": 0},
                                   {"role": "agent", "text": said, "turn": 1}],
                       location="desk.sandtable.yaml:12")


def _run(folder: Path, n: int = 8) -> Path:
    """A run of ``n`` trials: the agent confirms ("Booked L-1.") in the first half only."""
    text = DOMAIN
    (folder / "desk.sandtable.yaml").write_text(text, encoding="utf-8")
    sha = hashlib.sha256(text.encode()).hexdigest()
    trials = [_trial(i, "Booked L-1." if i <= n // 2 else "Noted.") for i in range(1, n + 1)]
    meta = RunMeta(domains=[{"name": "desk", "path": "desk.sandtable.yaml", "sha256": sha}], agent="a",
                   user="scripted", k=n, run_seed=0)
    write_run(build_results(trials, meta), folder / "run")
    return folder / "run"


def _request_number(message: str) -> int:
    return int(message.split("(request ", 1)[1].split(")", 1)[0])


class Script:
    """judge-a and judge-b say yes exactly when the agent said "Booked"; judge-c always says
    yes (quoting what the agent said). Asked again about request 8 (the retest), judge-b
    says yes."""

    def __init__(self) -> None:
        self.asked: dict[tuple[str, int], int] = {}

    def judge(self, name: str) -> Any:
        def answer(message: str) -> str:
            n = _request_number(message)
            times = self.asked[(name, n)] = self.asked.get((name, n), 0) + 1
            booked = "Booked L-1." in message
            if name == "judge-c":
                return verdict("yes", "Booked L-1." if booked else "Noted.")
            if name == "judge-b" and n == 8 and times == 2:
                return verdict("yes", "Noted.")
            return verdict("yes", "Booked L-1") if booked else verdict("no", "")
        return answer

    def all(self) -> dict[str, Any]:
        return {name: self.judge(name) for name in ("judge-a", "judge-b", "judge-c")}


def _labels(folder: Path, lines: list[str]) -> Path:
    path = folder / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# people say yes to trials 1, 2, 3 and 5; no to 4, 6, 7 and 8
HUMAN = {1: "yes", 2: "yes", 3: "yes", 4: "no", 5: "yes", 6: "no", 7: "no", 8: "no"}


def test_kappa_by_hand() -> None:
    # judge-a against the people: agree on 1, 2, 3, 6, 7, 8 (po = 6/8); each said yes to half (pe = 0.5):
    # kappa = (0.75 - 0.5) / (1 - 0.5) = 0.5
    judge_a = {n: "yes" if n <= 4 else "no" for n in HUMAN}
    assert cohen_kappa([(HUMAN[n], judge_a[n]) for n in HUMAN]) == 0.5
    # always yes: po = 4/8, pe = 0.5 * 1 + 0.5 * 0 = 0.5: kappa 0
    assert cohen_kappa([(HUMAN[n], "yes") for n in HUMAN]) == 0.0
    assert cohen_kappa([("yes", "yes"), ("yes", "yes")]) is None  # chance agreement is certain
    assert cohen_kappa([]) is None
    # 3 of 4 agree, people 2 yes, judge 3 yes: po = 0.75, pe = 0.5 * 0.75 + 0.5 * 0.25 = 0.5: kappa 0.5
    assert cohen_kappa([("yes", "yes"), ("yes", "yes"), ("no", "yes"), ("no", "no")]) == 0.5


def test_calibrate_on_planted_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path)
    labels = _labels(tmp_path, [json.dumps({"criterion": "confirms", "trial": f"booking/{n}", "label": v})
                                for n, v in HUMAN.items()])
    with fake_judges(monkeypatch, Script().all()) as fakes:
        code = main(["judge", "calibrate", str(labels), "--run", str(run), "--judge", PANEL])
        assert fakes.calls == 8 * 3 * 2  # each labelled trial judged twice by three judges
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    doc = json.loads((tmp_path / ".sandtable" / "judge-calibration.json").read_text())
    c = doc["criteria"]["desk/confirms"]
    # the panel's majority is judge-a's (judge-b says the same the first time)
    assert c["kappa"] == {"claude:judge-a": 0.5, "claude:judge-b": 0.5, "openai:judge-c": 0.0, "panel": 0.5}
    assert c["agreement"] == {"claude:judge-a": 0.75, "claude:judge-b": 0.75, "openai:judge-c": 0.5, "panel": 0.75}
    # judge-b answered request 8 otherwise the second time, and took the panel with it
    assert c["flip_rate"] == {"claude:judge-a": 0.0, "claude:judge-b": 0.125, "openai:judge-c": 0.0,
                              "panel": 0.125}
    assert (c["labels"], c["calibrated"], c["why"]) == (8, False, "8 labels, fewer than 30")
    assert out[0] == ("calibration of 1 criterion by claude:judge-a, claude:judge-b, openai:judge-c: 8 labels, "
                      "each judged twice (48 judge calls)")
    assert out[1].split() == ["criterion", "labels", "judge", "scored", "agree", "kappa", "flips"]
    assert out[3].split() == ["desk/confirms", "8", "claude:judge-a", "8", "75.0%", "0.50", "0.0%"]
    assert out[4].split() == ["claude:judge-b", "8", "75.0%", "0.50", "12.5%"]
    assert out[5].split() == ["openai:judge-c", "8", "50.0%", "0.00", "0.0%"]
    assert out[6].split() == ["panel", "8", "75.0%", "0.50", "12.5%"]
    assert out[7:] == ["desk/confirms: uncalibrated (8 labels, fewer than 30)",
                       "calibration written to .sandtable/judge-calibration.json"]


def test_thirty_agreeing_labels_calibrate_and_a_run_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path, 30)
    labels = _labels(tmp_path, [json.dumps({"criterion": "confirms", "trial": f"booking/{n}",
                                            "label": n <= 15}) for n in range(1, 31)])
    script = Script().all()
    with fake_judges(monkeypatch, {"judge-a": script["judge-a"]}):
        assert main(["judge", "calibrate", str(labels), "--run", str(run), "--judge", "claude:judge-a"]) == 0
    assert capsys.readouterr().out.splitlines()[-2] == "desk/confirms: calibrated (panel kappa 1.00 on 30 labels)"
    doc = json.loads((tmp_path / ".sandtable" / "judge-calibration.json").read_text())
    domain = load_domain_text(DOMAIN)
    assert calibrated_criteria(doc, {"desk": domain}, ["claude:judge-a"]) == {("desk", "confirms"): True}
    # another panel, or another question, is not calibrated by it
    assert calibrated_criteria(doc, {"desk": domain}, ["claude:judge-b"]) == {("desk", "confirms"): False}
    reworded = load_domain_text(DOMAIN.replace("confirm the booking?", "confirm it?"))
    assert calibrated_criteria(doc, {"desk": reworded}, ["claude:judge-a"]) == {("desk", "confirms"): False}


def test_a_bad_labels_file_is_refused_line_by_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path)
    labels = _labels(tmp_path, [
        "# criterion, trial, label",
        '{"criterion": "confirms", "trial": "booking/1", "label": "yes"}',
        '{"criterion": "confirms", "trial": "booking/1", "label": "no"}',
        '{"criterion": "confirms", "trial": "booking/2", "label": "maybe"}',
        "confirms,booking/3,yes",
        '{"criterion": "confirms", "label": "yes"}',
    ])
    assert main(["judge", "calibrate", str(labels), "--run", str(run), "--judge", PANEL]) == 2
    assert capsys.readouterr().err.replace(str(labels), "labels.jsonl").splitlines() == [
        "error: labels.jsonl:3: criterion 'confirms' of trial 'booking/1' is labelled twice (first at line 2)",
        'error: labels.jsonl:4: label "maybe": expected yes or no',
        "error: labels.jsonl:5: not a JSON object: 'confirms,booking/3,yes'",
        "error: labels.jsonl:6: missing 'trial'; a line is "
        '{"criterion": ID, "trial": "TASK/N", "label": "yes" or "no"}',
    ]
    labels = _labels(tmp_path, [
        '{"criterion": "confirms", "trial": "booking/9", "label": "yes"}',
        '{"criterion": "polite", "trial": "booking/2", "label": "yes"}',
        '{"criterion": "confirms", "trial": "desk/booking/3", "label": "no"}',
    ])
    assert main(["judge", "calibrate", str(labels), "--run", str(run), "--judge", PANEL]) == 2
    assert capsys.readouterr().err.replace(str(labels), "labels.jsonl").splitlines() == [
        "error: labels.jsonl:1: unknown trial 'booking/9'; the run has booking/1, booking/2, booking/3, "
        "booking/4, booking/5, ... (as TASK/N)",
        "error: labels.jsonl:2: unknown criterion 'polite' for trial 'booking/2'; its criteria: confirms",
    ]
    assert not (tmp_path / ".sandtable" / "judge-calibration.json").exists()


def test_a_bad_judge_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", "calibrate", "labels.jsonl", "--run", "run", "--judge", "openai"]) == 2
    assert capsys.readouterr().err == "error: --judge: judge 'openai' names no model; write openai:MODEL\n"
