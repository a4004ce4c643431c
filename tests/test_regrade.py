"""``python -m pytest_sandtable regrade``: stored trials graded again against edited domain
files, without any agent; refused, one line per reason, when what the agent or the
simulated user was given changed. Runs are made by the real engine and written by the
real writer; the command runs as ``main`` does."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import pytest_sandtable as st
from conftest import Playbook
from pytest_sandtable.cli import main
from pytest_sandtable.report.results_json import RunMeta, build_results, read_results, write_run

DOMAIN = """\
version: 1
name: desk
description: A freight desk.
policy: Verify every carrier before booking.
world:
  carriers:
    key: mc_number
    rows:
      - { mc_number: "100101", name: Blue Ridge Haulers }
  loads:
    key: load_id
    rows:
      - { load_id: L-1001, max_rate: 2350, status: available }
tools:
  - name: verify_carrier
    params: { mc_number: { type: string } }
    ops:
      - get: { table: carriers, key: $mc_number }
  - name: book_load
    params: { load_id: { type: string }, rate: { type: number } }
    ops:
      - update: { table: loads, key: $load_id, set: { status: booked } }
invariants:
  - id: rate-ceiling
    kind: limit
    tool: book_load
    arg: rate
    lte: { table: loads, key: $load_id, field: max_rate }
tasks:
  - id: book
    tags: [booking]
    user:
      persona: Sam, a dispatcher.
      opening: "MC 100101 about L-1001."
      script: ["Can you do 2,100?", "Deal."]
    expect:
      state: [{ table: loads, key: L-1001, fields: { status: booked } }]
    reference:
      - call: verify_carrier
        args: { mc_number: "100101" }
      - say: "Verified. 2,100?"
      - call: book_load
        args: { load_id: L-1001, rate: 2100 }
      - say: "Booked, confirmation L-1001."
"""

TASK_LINE = DOMAIN.splitlines().index("  - id: book") + 1
TOOL_LINE = DOMAIN.splitlines().index("  - name: book_load") + 1
ARG_LINE = DOMAIN.splitlines().index("    arg: rate") + 1
VERIFY = ("verify_carrier", {"mc_number": "100101"})
AGENTS = [
    Playbook([VERIFY, "Verified."], [("book_load", {"load_id": "L-1001", "rate": 2100}), "Booked."]),
    Playbook([VERIFY, "Verified."], [("book_load", {"load_id": "L-1001", "rate": 2400}), "Booked."]),
    Playbook([VERIFY, "Verified."], "Let me see.", "Hmm."),
]


def make_run(folder: Path, text: str = DOMAIN) -> Path:
    """Write the domain as sandtable.yaml and a run of it (three trials: passed, over the
    ceiling, never booked) into folder/run; returns the run folder."""
    path = folder / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    domain = st.load_domain(path)
    trials = [st.run_trial(domain, "book", agent, st.ScriptedUser(), trial=i, k=3, agent_name="desk",
                           user_name="scripted", location=f"sandtable.yaml:{TASK_LINE}")
              for i, agent in enumerate(AGENTS, 1)]
    meta = RunMeta(domains=[{"name": "desk", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="desk", user="scripted", k=3, run_seed=0)
    return write_run(build_results(trials, meta), folder / "run")


def regrade(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["regrade", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, the current directory (the run's domain paths are relative to it)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def edited(folder: Path, old: str, new: str, name: str = "edited.yaml") -> str:
    text = DOMAIN.replace(old, new)
    assert text != DOMAIN
    (folder / name).write_text(text, encoding="utf-8")
    return name


# -- what may change ------------------------------------------------------------------------------


def test_a_rule_made_soft_passes_the_trial_it_failed(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    name = edited(here, "    arg: rate\n", "    arg: rate\n    soft: true\n")
    code, out, err = regrade(capsys, "run", name, "-o", "regraded")
    assert (code, err) == (1, [])  # trial 3 still fails, as pytest would exit
    assert out[0] == "sandtable: regraded 3 trials of desk against edited.yaml: 1 verdict changed (1 failed → passed)"
    assert out[-1] == "sandtable: results in regraded"
    doc = read_results(here / "regraded")
    assert [t["verdict"] for t in doc["trials"]] == ["passed", "passed", "failed"]
    assert doc["trials"][1]["soft"] == {"rate-ceiling": {"tool": "book_load", "applied": True, "broken": True}}
    assert doc["trials"][1]["attribution"] is None
    assert doc["writer"]["command"] == "regrade"
    regraded = doc["run"]["regraded"]
    assert regraded["from"] == "run"
    assert regraded["from_sha256"] == hashlib.sha256((run / "results.json").read_bytes()).hexdigest()
    assert regraded["domains"] == [{"name": "desk", "path": "edited.yaml",
                                    "sha256": hashlib.sha256((here / name).read_bytes()).hexdigest()}]
    # the trials ran against the original file, which the run still names
    assert doc["run"]["domains"] == read_results(run)["run"]["domains"]
    assert (here / "regraded" / "report.html").is_file()


def test_a_new_expectation_fails_a_passed_trial_with_its_owner(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    name = edited(here, "    reference:\n", "      reply_includes: [confirmation]\n    reference:\n")
    code, out, _ = regrade(capsys, "run", name, "-o", "regraded")
    assert code == 1
    assert out[0] == "sandtable: regraded 3 trials of desk against edited.yaml: 1 verdict changed (1 passed → failed)"
    first = read_results(here / "regraded")["trials"][0]
    assert [c["id"] for c in first["checks"] if not c["passed"]] == ["reply:confirmation"]
    assert first["attribution"] == {
        "owner": "agent",
        "evidence": 'the agent missed expectation reply:confirmation, which the user made possible: '
                    'agent never said "confirmation"',
    }


def test_an_unchanged_domain_regrades_to_the_same_verdicts(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    code, out, err = regrade(capsys, "run", "-o", "regraded")
    assert (code, err) == (1, [])
    assert out[0] == "sandtable: regraded 3 trials of desk against sandtable.yaml: no verdict changed"
    before, after = read_results(run), read_results(here / "regraded")
    for old, new in zip(before["trials"], after["trials"]):
        assert {k: v for k, v in old.items() if k != "duration"} == {k: v for k, v in new.items() if k != "duration"}


def test_tags_and_critical_follow_the_edit(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    name = edited(here, "    tags: [booking]\n", "    tags: [deals]\n    critical: true\n")
    assert regrade(capsys, "run", name, "-o", "regraded")[0] == 1
    trials = read_results(here / "regraded")["trials"]
    assert {(tuple(t["tags"]), t["critical"]) for t in trials} == {(("deals",), True)}


# -- what may not ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "line"), [
    ("policy: Verify every carrier before booking.", "policy: Verify every carrier.",
     "policy changed (edited.yaml): the agent was given the old one"),
    ("description: A freight desk.", "description: A desk.",
     "description changed (edited.yaml): the agent was given the old one"),
    ("params: { load_id: { type: string }, rate: { type: number } }",
     "params: { load_id: { type: string }, rate: { type: integer } }",
     f"tools[book_load].params changed (edited.yaml:{TOOL_LINE}): the agent was given the old one"),
    ("max_rate: 2350, status: available", "max_rate: 2350, status: held",
     "world.loads: row L-1001 changed: the agent's calls ran against the old rows"),
    ('opening: "MC 100101 about L-1001."', 'opening: "MC 100101 here."',
     f"tasks[book].user.opening changed (edited.yaml:{TASK_LINE}): the simulated user was given the old one"),
    ('script: ["Can you do 2,100?", "Deal."]', 'script: ["Can you do 2,200?", "Deal."]',
     f"tasks[book].user.script changed (edited.yaml:{TASK_LINE}): the simulated user was given the old one"),
    ("persona: Sam, a dispatcher.", "persona: Sam.",
     f"tasks[book].user.persona changed (edited.yaml:{TASK_LINE}): the simulated user was given the old one"),
    ("  - id: book\n", "  - id: book-load\n",
     "tasks[book] is not in edited.yaml: its trials have nothing to be graded against"),
])
def test_a_change_to_what_the_agent_or_user_was_given_is_refused(
    here: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, line: str
) -> None:
    make_run(here)
    name = edited(here, old, new)
    assert regrade(capsys, "run", name, "-o", "regraded") == (2, [], [f"error: cannot regrade desk: {line}"])
    assert not (here / "regraded").exists()


def test_every_refusal_is_a_line(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    text = DOMAIN.replace("policy: Verify every carrier before booking.", "policy: Be nice.").replace(
        "      - { load_id: L-1001, max_rate: 2350, status: available }\n",
        "      - { load_id: L-1001, max_rate: 2350, status: available }\n"
        "      - { load_id: L-1002, max_rate: 900, status: available }\n")
    (here / "edited.yaml").write_text(text, encoding="utf-8")
    assert regrade(capsys, "run", "edited.yaml", "-o", "regraded")[2] == [
        "error: cannot regrade desk: policy changed (edited.yaml): the agent was given the old one",
        "error: cannot regrade desk: world.loads: 1 row(s) added: the agent's calls ran against the old rows",
    ]


def test_a_trial_whose_calls_do_not_replay_is_refused(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    doc["trials"][1]["calls"][1]["result"]["status"] = "held"
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    assert regrade(capsys, "run", "-o", "regraded")[::2] == (2, [
        'error: cannot regrade desk/book trial 2: call 2 book_load gives result {"load_id": "L-1001", '
        '"max_rate": 2350, "status": "booked"} when replayed, {"load_id": "L-1001", "max_rate": 2350, '
        '"status": "held"} in the run',
    ])


def test_a_trial_with_a_clipped_value_is_not_regradable(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    doc["trials"][0]["calls"][0]["result"] = '{"mc_number": "1001… [clipped: 52,000 characters of JSON]'
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    assert regrade(capsys, "run", "-o", "regraded")[::2] == (2, [
        "error: cannot regrade desk/book trial 1: calls[0].result was cut when stored (a value over the size cap), "
        "so its world cannot be rebuilt",
    ])


# -- finding the file the run used ----------------------------------------------------------------


def test_a_file_edited_in_place_needs_the_original(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    sha = read_results(run)["run"]["domains"][0]["sha256"]
    edited(here, "    arg: rate\n", "    arg: rate\n    soft: true\n", name="sandtable.yaml")
    assert regrade(capsys, "run", "-o", "regraded")[::2] == (2, [
        f"error: cannot regrade desk: sandtable.yaml is not the domain file the run used (sha256 {sha[:12]}) and "
        "no git history holds that one, so what the agent was given cannot be compared: save the edit as a copy, "
        "put the file the run used back at sandtable.yaml (or in git), and regrade with the copy: "
        "regrade run COPY.yaml -o DIR",
    ])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_original_is_found_in_git_history(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=here, check=True)
    subprocess.run([*git, "add", "sandtable.yaml"], cwd=here, check=True)
    subprocess.run([*git, "commit", "-qm", "desk"], cwd=here, check=True)
    edited(here, "    arg: rate\n", "    arg: rate\n    soft: true\n", name="sandtable.yaml")
    subprocess.run([*git, "add", "sandtable.yaml"], cwd=here, check=True)  # the index holds the edit now
    code, out, err = regrade(capsys, "run", "-o", "regraded")
    assert (code, err, out[0]) == (
        1, [], "sandtable: regraded 3 trials of desk against sandtable.yaml: 1 verdict changed (1 failed → passed)"
    )


# -- bad input ------------------------------------------------------------------------------------


def test_a_results_file_of_another_major(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    doc: dict[str, Any] = json.loads((run / "results.json").read_text(encoding="utf-8"))
    doc["schema_version"] = "2.0"
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = regrade(capsys, "run", "-o", "regraded")
    assert (code, out) == (2, [])
    assert err == [f"error: run/results.json: written with results schema 2.0 by pytest-sandtable "
                   f"{doc['writer']['version']}; this pytest-sandtable ({st.__version__}) reads schema 1.x only: "
                   "upgrade pytest-sandtable to read it"]


def test_a_missing_results_file(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert regrade(capsys, "nowhere", "-o", "regraded") == (2, [], ["error: nowhere: no such file"])


def test_a_domain_file_that_no_longer_loads(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    name = edited(here, "    arg: rate\n", "    arg: rate\n    sof: true\n")
    assert regrade(capsys, "run", name, "-o", "regraded") == (2, [], [
        f"error: edited.yaml:{ARG_LINE + 1}:5: invariants[0].sof: unknown key 'sof'; did you mean 'soft'?",
    ])


def test_a_domain_the_run_did_not_have(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    name = edited(here, "name: desk\n", "name: clinic\n")
    assert regrade(capsys, "run", name, "-o", "regraded") == (2, [], [
        "error: edited.yaml: domain 'clinic' is not in run (it ran 'desk')",
    ])


def test_a_missing_domain_file(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(here)
    (here / "sandtable.yaml").unlink()
    assert regrade(capsys, "run", "-o", "regraded") == (2, [], [
        "error: sandtable.yaml: no such file in the current directory or run (the domain file of 'desk' that run "
        "names; give the edited file as an argument)",
    ])
    assert regrade(capsys, "run", "gone.yaml", "-o", "regraded") == (2, [], ["error: gone.yaml: no such file"])


def test_a_trial_whose_record_is_inconsistent(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    doc["trials"][2]["transcript"][1]["call"] = 9
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    assert regrade(capsys, "run", "-o", "regraded")[::2] == (2, [
        "error: cannot regrade desk/book trial 3: its record is inconsistent (IndexError: list index out of range)",
    ])


# -- read, regraded and written one trial at a time -----------------------------------------------


def test_the_files_are_those_the_regraded_trials_make_when_written_whole(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trials are spooled as they are regraded and the files written from the spool:
    byte for byte what the writer makes of the same trials and run held in memory."""
    make_run(here)
    name = edited(here, "    arg: rate\n", "    arg: rate\n    soft: true\n")
    assert regrade(capsys, "run", name, "-o", "regraded")[0] == 1
    after = read_results(here / "regraded")
    meta = RunMeta(domains=after["run"]["domains"], agent="desk", user="scripted", k=3, run_seed=0,
                   command="regrade")
    whole = build_results(after["trials"], meta)
    whole["run"] = after["run"]
    write_run(whole, here / "whole")
    for file in ("results.json", "report.html"):
        assert (here / "whole" / file).read_bytes() == (here / "regraded" / file).read_bytes()


def test_a_results_file_in_another_layout_regrades_the_same(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    (here / "pretty").mkdir()
    (here / "pretty" / "results.json").write_text(json.dumps(read_results(run), indent=2), encoding="utf-8")
    name = edited(here, "    arg: rate\n", "    arg: rate\n    soft: true\n")
    first = regrade(capsys, "run", name, "-o", "regraded")
    again = regrade(capsys, "pretty", name, "-o", "regraded2")
    assert (first[0], first[1][0], first[2]) == (again[0], again[1][0], again[2])
    one, two = read_results(here / "regraded"), read_results(here / "regraded2")
    assert (one["trials"], one["summary"], one["gate"]) == (two["trials"], two["summary"], two["gate"])
    assert two["run"]["regraded"]["from"] == "pretty"
    assert two["run"]["regraded"]["from_sha256"] == hashlib.sha256(
        (here / "pretty" / "results.json").read_bytes()).hexdigest()


def test_a_bad_trial_in_the_writers_layout_is_named_with_its_field(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(here)
    text = (run / "results.json").read_text(encoding="utf-8")
    assert text.count('"verdict":"failed"') == 2  # the trials' lines
    (run / "results.json").write_text(text.replace('"verdict":"failed"', '"verdict":"maybe"', 1), encoding="utf-8")
    assert regrade(capsys, "run", "-o", "regraded") == (2, [], [
        "error: run/results.json: does not match the results schema 1.6 (1 problem):",
        "  trials[1].verdict: 'maybe' is not one of ['passed', 'failed', 'errored']",
    ])
    assert not (here / "regraded").exists()


def test_a_trial_refused_in_the_writers_layout_leaves_nothing(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(here)
    text = (run / "results.json").read_text(encoding="utf-8")
    (run / "results.json").write_text(text.replace('"status":"booked"}', '"status":"held"}', 1), encoding="utf-8")
    code, _, err = regrade(capsys, "run", "-o", "out/regraded")
    assert (code, len(err)) == (2, 1)
    assert err[0].startswith("error: cannot regrade desk/book trial 1: call 2 book_load gives result")
    assert sorted(p.name for p in here.iterdir()) == ["run", "sandtable.yaml"]
