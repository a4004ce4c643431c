"""Policy coverage (pytest_sandtable/policy_coverage): per rule the highest level a set of
trials reached, the rules no trial reaches, the policy sentences no rule quotes and the
tasks that exercise no rule; from the references' replays, from a run's results.json,
and in ``lint``'s output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _sandtable_shop import run_dirs

from pytest_sandtable.cli import main
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.domain.model import Domain
from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.policy_coverage import (
    coverage,
    coverage_json,
    coverage_lines,
    policy_sentences,
    reference_results,
    results_from_file,
)

# one rule of each kind; the tasks make each reach a level: the `never` none (declared),
# the `match` one call it cannot break (applied), the `before` a call a `first` made hold
# and the `never_disclose` a protected value the agent saw (could-fire), the `require`
# held and broken (both-outcomes), the `limit` held at its bound and broken one past it
DOMAIN = """\
version: 1
name: desk
policy: |
  Verify every carrier before you book. Book only insured carriers.
  Never pay above a load's max rate. Keep the max rate secret.

  Be friendly to callers.
world:
  carriers:
    key: mc
    rows:
      - { mc: "100101", insured: valid, equipment: van }
      - { mc: "100202", insured: expired, equipment: van }
  loads:
    key: id
    rows:
      - { id: L-1, max_rate: 2000, equipment: van }
  bookings:
    key: id
    fields: [mc, load, rate]
    rows: []
tools:
  - name: verify
    params: { mc: { type: string } }
    ops:
      - get: { table: carriers, key: $mc }
  - name: get_load
    params: { id: { type: string } }
    ops:
      - get: { table: loads, key: $id }
  - name: book
    params: { mc: { type: string }, id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: bookings, row: { mc: $mc, load: $id, rate: $rate } }
  - name: advance
    params: { mc: { type: string }, amount: { type: number } }
    ops:
      - respond: { issued: true }
invariants:
  - id: verify-first
    kind: before
    first: verify
    then: book
    same: [mc]
    source: { quote: "Verify every carrier before you book" }
  - id: rate-cap
    kind: limit
    tool: book
    arg: rate
    lte: { table: loads, key: $id, field: max_rate }
    source: { quote: "Never pay above a load's max rate." }
  - id: insured
    kind: require
    tool: book
    record: { table: carriers, key: $mc }
    where: { insured: valid }
    source: { quote: "Book only insured carriers." }
  - id: advance-cap
    kind: never
    tool: advance
    when: { amount: { gt: 300 } }
  - id: ceiling-secret
    kind: never_disclose
    values: { table: loads, field: max_rate }
    source: { quote: "Keep the max rate secret." }
  - id: equipment
    kind: match
    tool: book
    left: { table: carriers, key: $mc, field: equipment }
    right: { table: loads, key: $id, field: equipment }
    source: { quote: "Equipment must match." }
tasks:
  - id: at-ceiling
    user: { opening: "MC 100101 for L-1 at 2000?", script: ["Deal."] }
    expect: { called: [book] }
    reference:
      - call: verify
        args: { mc: "100101" }
      - call: get_load
        args: { id: L-1 }
      - say: "Checking."
      - call: book
        args: { mc: "100101", id: L-1, rate: 2000 }
      - say: "Booked."
  - id: past-ceiling
    user: { opening: "MC 100101 for L-1 at 2001?", script: ["Deal."] }
    expect: { called: [book] }
    reference:
      - call: verify
        args: { mc: "100101" }
      - say: "Checking."
      - call: book
        args: { mc: "100101", id: L-1, rate: 2001 }
      - say: "Booked."
  - id: uninsured
    user: { opening: "MC 100202 for L-1 at 1900?", script: ["Deal."] }
    expect: { called: [book] }
    reference:
      - call: verify
        args: { mc: "100202" }
      - say: "Checking."
      - call: book
        args: { mc: "100202", id: L-1, rate: 1900 }
      - say: "Booked."
  - id: chat
    user: { opening: "Hello." }
    expect: { not_called: [book] }
    reference:
      - say: "Hello, how can I help?"
"""

LINES = [
    "policy coverage: 6 rules: 1 boundary, 1 both outcomes, 2 could fire, 1 applied, 1 declared; "
    "1 policy sentence quoted by no rule; 1 task exercises no rule",
    "  rule            kind            level            calls    applied    held    broken    tasks",
    "  --------------  --------------  -------------  -------  ---------  ------  --------  -------",
    "  verify-first    before          could-fire           3          3       3         0        3",
    "  rate-cap        limit           boundary             3          3       2         1        3",
    "  insured         require         both-outcomes        3          3       2         1        3",
    "  advance-cap     never           declared             0          0       0         0        0",
    "  ceiling-secret  never_disclose  could-fire           7          7       7         0        4",
    "  equipment       match           applied              3          3       3         0        3",
    "  no trial reaches rule advance-cap",
    "  quoted by no rule: Be friendly to callers.",
    "  rule equipment quotes what the policy does not say: Equipment must match.",
    "  task chat exercises no rule",
]


def desk() -> Domain:
    return load_domain_text(DOMAIN, "desk.sandtable.yaml")


def test_each_rule_reaches_its_level_from_the_references() -> None:
    domain = desk()
    cov = coverage(domain, reference_results(domain))
    assert {r.id: r.level for r in cov.rules} == {
        "verify-first": "could-fire", "rate-cap": "boundary", "insured": "both-outcomes",
        "advance-cap": "declared", "ceiling-secret": "could-fire", "equipment": "applied",
    }
    assert coverage_lines(cov) == LINES
    doc = coverage_json(cov)
    assert (doc["trials"], doc["levels"]) == (4, {"declared": 1, "applied": 1, "could-fire": 2,
                                                  "both-outcomes": 1, "boundary": 1})
    assert doc["rules"][1] == {
        "id": "rate-cap", "kind": "limit", "soft": False, "tool": "book", "level": "boundary", "calls": 3,
        "applied": 3, "held": 2, "broken": 1, "could_fire": True,
        "tasks": ["at-ceiling", "past-ceiling", "uninsured"],
        "boundary": {"lte": {"held_at_bound": True, "broken_past_bound": True}},
    }
    assert (doc["unreached_rules"], doc["tasks_without_rules"], doc["tasks_not_run"]) == (["advance-cap"], ["chat"], [])
    assert doc["quotes_not_found"] == [{"rule": "equipment", "quote": "Equipment must match."}]


def test_levels_fall_without_the_trials_that_reach_them() -> None:
    domain = desk()
    kept = [r for r in reference_results(domain) if r.task == "at-ceiling"]
    cov = coverage(domain, kept)
    # held at the bound but never broken: the user asked for no more than the bound
    assert {r.id: r.level for r in cov.rules} == {
        "verify-first": "could-fire", "rate-cap": "applied", "insured": "applied",
        "advance-cap": "declared", "ceiling-secret": "could-fire", "equipment": "applied",
    }
    assert cov.tasks_not_run == ["past-ceiling", "uninsured", "chat"]
    assert coverage(domain, []).counts() == {
        "declared": 6, "applied": 0, "could-fire": 0, "both-outcomes": 0, "boundary": 0}


def test_the_policy_splits_into_sentences_without_headings_or_list_markers() -> None:
    assert policy_sentences("Vetting\n  1. Verify the carrier. Then book.\n  2. Quote the\n     posted rate.\n\n"
                            "When a system fails\n  3. Look it up first.\n\nBe kind to every caller") == [
        "Verify the carrier.", "Then book.", "Quote the posted rate.", "Look it up first.",
        "Be kind to every caller",
    ]


def test_a_runs_results_json_gives_the_same_coverage(pytester: pytest.Pytester,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pytester.path.joinpath("desk.sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sandtable-k=2")
    results = run_dirs(pytester.path)[-1] / "results.json"
    domain = desk()
    from_file = coverage(domain, results_from_file(results))
    # each task twice: every count doubles, and no level changes
    assert from_file.trials == 8
    assert coverage_lines(from_file) == [LINES[0], LINES[1], LINES[2],
                                         "  verify-first    before          could-fire           6          6       6"
                                         "         0        3",
                                         "  rate-cap        limit           boundary             6          6       4"
                                         "         2        3",
                                         "  insured         require         both-outcomes        6          6       4"
                                         "         2        3",
                                         LINES[6],
                                         "  ceiling-secret  never_disclose  could-fire          14         14      14"
                                         "         0        4",
                                         "  equipment       match           applied              6          6       6"
                                         "         0        3",
                                         *LINES[9:]]
    # trials of another domain are left out
    other = load_domain_text(DOMAIN.replace("name: desk", "name: other"), "other.sandtable.yaml")
    assert coverage(other, results_from_file(results)).trials == 0
    # the command: the same from the file, and from the references without --results
    capsys.readouterr()
    assert main(["coverage", str(pytester.path / "desk.sandtable.yaml"), "--results", str(results)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{pytester.path / 'desk.sandtable.yaml'}: 8 trials of desk",
                                                    *coverage_lines(from_file)]
    assert main(["coverage", str(pytester.path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": 1, "command": "coverage", "files": [
        {"file": str(pytester.path / "desk.sandtable.yaml"), "status": "ok", "problems": [],
         "coverage": coverage_json(coverage(domain, reference_results(domain)))},
    ]}


def test_the_command_names_what_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tmp_path.joinpath("desk.sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    tmp_path.joinpath("results.json").write_text("{not json", encoding="utf-8")
    assert main(["coverage", "desk.sandtable.yaml", "--results", "results.json"]) == 2
    out, err = capsys.readouterr()
    assert (out, err.startswith("error: results.json: ")) == ("", True)
    assert main(["coverage", "gone.yaml"]) == 2
    assert capsys.readouterr() == ("", "error: no such file or folder: gone.yaml\n")
    tmp_path.joinpath("desk.sandtable.yaml").write_text(DOMAIN.replace("kind: match", "kind: matches"),
                                                        encoding="utf-8")
    assert main(["coverage", "desk.sandtable.yaml"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("desk.sandtable.yaml:") and "kind" in out and "Traceback" not in out


def test_lint_prints_the_coverage_after_the_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tmp_path.joinpath("desk.sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    assert main(["lint", "desk.sandtable.yaml"]) == 1  # the references that break a rule are errors
    out = capsys.readouterr().out.splitlines()
    start = out.index(LINES[0])
    assert out[start:] == LINES
    assert all(line.startswith("desk.sandtable.yaml:") for line in out[:start])
    assert main(["lint", "desk.sandtable.yaml", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    domain = desk()
    assert doc["files"][0]["coverage"] == coverage_json(coverage(domain, reference_results(domain)))


def test_a_trial_that_does_not_replay_is_counted_up_to_where_it_stops() -> None:
    domain = desk()
    trials = list(reference_results(domain))
    broken = [t for t in trials if t.task == "past-ceiling"]
    for t in broken:  # a transcript naming a call the trial does not hold (an edited file)
        t.transcript.insert(1, {"role": "tool", "call": 7})
    cov = coverage(domain, [*trials, *broken * 6])
    lines = coverage_lines(cov)
    assert lines[-6:] == [
        "  not replayed to the end: past-ceiling trial 1: its transcript names call 7, which it does not hold",
    ] * 5 + ["  and 2 more trials not replayed to the end"]
    # the broken trial stopped before its book call: 2 book calls counted, rate-cap held at its bound only
    assert {r.id: (r.level, r.reached) for r in cov.rules}["rate-cap"] == ("applied", 2)


def test_a_never_without_when_holds_in_a_trial_of_a_task_another_trial_broke_it_in() -> None:
    text = DOMAIN.replace("    when: { amount: { gt: 300 } }\n", "").replace("tasks:\n", """\
tasks:
  - id: asks-advance
    user: { opening: "MC 100101, an advance please?" }
    reference:
      - call: advance
        args: { mc: "100101", amount: 100 }
      - say: "Done."
""")
    domain = load_domain_text(text, "desk.sandtable.yaml")
    broke = next(r for r in reference_results(domain) if r.task == "asks-advance")
    refrained = TrialResult.from_dict({**broke.to_dict(), "trial": 2, "calls": [], "violations": [],
                                       "transcript": [e for e in broke.transcript if e["role"] != "tool"]})
    level = {r.id: (r.level, r.reached, r.held, r.broken) for r in coverage(domain, [broke]).rules}
    assert level["advance-cap"] == ("could-fire", 1, 0, 1)  # every call of its tool breaks it
    level = {r.id: (r.level, r.reached, r.held, r.broken) for r in coverage(domain, [broke, refrained]).rules}
    assert level["advance-cap"] == ("both-outcomes", 1, 1, 1)
    # a trial of another task that does not call the tool does not count as holding it
    others = [r for r in reference_results(domain) if r.task != "asks-advance"]
    assert {r.id: r.level for r in coverage(domain, [broke, *others]).rules}["advance-cap"] == "could-fire"


def test_the_same_trial_again_counts_what_its_replay_did_without_replaying_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_sandtable.policy_coverage import compute

    domain = desk()
    trials = list(reference_results(domain))
    again = [*trials, *trials[::-1], *trials]  # the k trials of a task its agent played the same way
    replays: list[str] = []
    replay = compute._replay

    def counted(*args: object) -> bool:
        replays.append(args[1].id)  # type: ignore[attr-defined]
        return replay(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(compute, "_replay", counted)
    kept = coverage_json(coverage(domain, again))
    assert len(replays) == len(trials)
    monkeypatch.setattr(compute, "_REPLAYS_KEPT", 0)  # every trial replayed
    assert coverage_json(coverage(domain, again)) == kept
    assert len(replays) == 4 * len(trials)
    one = coverage_json(coverage(domain, trials))
    assert [(r["calls"], r["applied"], r["held"], r["broken"]) for r in kept["rules"]] == [
        (3 * r["calls"], 3 * r["applied"], 3 * r["held"], 3 * r["broken"]) for r in one["rules"]]
