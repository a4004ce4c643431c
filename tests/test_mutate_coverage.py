"""Policy coverage from the references and their mutants (issue 28): ``mutate`` prints it
with its own output, ``coverage --mutants`` alone; ``lint`` and ``coverage`` stay
references-only. References never break a rule, so only mutants take a rule to
``both-outcomes``, and a `limit` whose reference sits at its bound to ``boundary``
(``change-arg``'s step is coverage's, ``limit_step``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sandtable.cli import main
from pytest_sandtable.domain.loader import load_domain, load_domain_text
from pytest_sandtable.engine.results import ERRORED, TrialResult
from pytest_sandtable.mutate.run import mutate_domain
from pytest_sandtable.policy_coverage import coverage, coverage_json, reference_results

# the reference books at the cap exactly (99.5: a step of 0.1), after verifying an insured carrier
DESK = """\
version: 1
name: desk
description: A small booking desk.
policy: Verify a carrier before you book it. Book only insured carriers. Never pay above 99.5 a mile.
world:
  carriers:
    key: mc
    rows:
      - { mc: "100101", insured: valid }
      - { mc: "100202", insured: expired }
  bookings:
    key: id
    key_format: "B-{n}"
    fields: [id, mc, rate]
    rows: []
tools:
  - name: verify
    params: { mc: { type: string } }
    ops:
      - get: { table: carriers, key: $mc }
  - name: book
    params: { mc: { type: string }, rate: { type: number } }
    ops:
      - create: { table: bookings, row: { mc: $mc, rate: $rate } }
invariants:
  - id: verify-first
    kind: before
    first: verify
    then: book
    same: [mc]
    source: { quote: "Verify a carrier before you book it." }
  - id: insured
    kind: require
    tool: book
    record: { table: carriers, key: $mc }
    where: { insured: valid }
    source: { quote: "Book only insured carriers." }
  - id: rate-cap
    kind: limit
    tool: book
    arg: rate
    lte: 99.5
    source: { quote: "Never pay above 99.5 a mile." }
tasks:
  - id: book-at-cap
    user: { opening: "MC 100101 here, 99.5 a mile?", script: ["Deal."] }
    expect:
      state:
        - { table: bookings, where: { mc: "100101", rate: 99.5 }, count: 1 }
    reference:
      - call: verify
        args: { mc: "100101" }
      - say: "Verified."
      - call: book
        args: { mc: "100101", rate: 99.5 }
      - say: "Booked at 99.5."
"""

# counted by hand over the reference and its 11 mutants (all valid): book is called by
# all but drop-write@2 and stop-before@2, twice by repeat-write@2 (11 calls);
# verify-first broken by change-arg@2.mc:key (100202, not verified), skip-first,
# fail-require (100202) and drop-read@0; insured by change-arg@2.mc:key and fail-require;
# rate-cap by change-arg@2.rate:limit:rate-cap (99.6), held at 99.5 by the others
TABLE = [
    "  rule          kind     level            calls    applied    held    broken    tasks",
    "  ------------  -------  -------------  -------  ---------  ------  --------  -------",
    "  verify-first  before   both-outcomes       11         11       7         4        1",
    "  insured       require  both-outcomes       11         11       9         2        1",
    "  rate-cap      limit    boundary            11         11      10         1        1",
]
SUMMARY = ("policy coverage: 3 rules: 1 boundary, 2 both outcomes; 0 policy sentences quoted by no rule; "
           "0 tasks exercise no rule")


def desk_file(tmp_path: Path, text: str = DESK) -> str:
    path = tmp_path / "sandtable.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_mutants_take_each_rule_to_both_outcomes_and_the_limit_at_its_bound_to_boundary() -> None:
    domain = load_domain_text(DESK)
    report = mutate_domain(domain, coverage=True)
    assert report.coverage is not None
    got = {r.id: (r.level, r.reached, r.held, r.broken) for r in report.coverage.rules}
    assert got == {"verify-first": ("both-outcomes", 11, 7, 4), "insured": ("both-outcomes", 11, 9, 2),
                   "rate-cap": ("boundary", 11, 10, 1)}
    assert report.coverage.rules[2].boundary == {"lte": [True, True]}
    assert report.coverage.trials == 12  # the reference and its 11 mutants
    # the step past the bound is coverage's (one unit of 99.5's last decimal), not 1
    rate = next(m for m in report.mutants if m.id == "change-arg@2.rate:limit:rate-cap")
    assert (rate.diff, rate.state, rate.killed_by) == ("book rate: 99.5 -> 99.6", "killed",
                                                       ["rate-cap", "state:bookings[where]#1"])
    # the references alone reach neither
    alone = coverage(domain, reference_results(domain))
    assert [(r.id, r.level) for r in alone.rules] == [
        ("verify-first", "could-fire"), ("insured", "applied"), ("rate-cap", "applied")]
    # without coverage=True, none is computed
    assert mutate_domain(domain).coverage is None


def test_on_trial_is_given_each_replay_that_ran_as_it_is_made() -> None:
    domain = load_domain_text(DESK)
    trials: list[TrialResult] = []
    report = mutate_domain(domain, on_trial=trials.append, coverage=True)
    assert len(trials) == 12
    assert [t.verdict for t in trials].count("passed") == 4  # the reference, spam, repeat-read@0, stop-after@2
    assert report.coverage is not None
    assert coverage_json(coverage(domain, trials)) == coverage_json(report.coverage)


def test_mutate_prints_the_coverage_of_the_references_and_the_mutants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = desk_file(tmp_path)
    code, lines, _ = run(capsys, "mutate", path)
    assert code == 0
    start = lines.index(SUMMARY)
    assert lines[start - 1 :] == [
        "",
        SUMMARY,
        *TABLE,
        "",
        "sandtable mutate: 1 domain, 11 mutants: score 80.0% (8 killed of 10 scored); 1 weak task; ok",
    ]
    code, lines, _ = run(capsys, "mutate", path, "--format", "json")
    (f,) = json.loads("\n".join(lines))["files"]
    assert f["coverage"]["trials"] == 12
    assert f["coverage"]["levels"] == {"declared": 0, "applied": 0, "could-fire": 0, "both-outcomes": 2,
                                       "boundary": 1}
    assert [(r["id"], r["level"], r["held"], r["broken"]) for r in f["coverage"]["rules"]] == [
        ("verify-first", "both-outcomes", 7, 4), ("insured", "both-outcomes", 9, 2), ("rate-cap", "boundary", 10, 1)]
    # --no-coverage: neither the block nor the field
    code, lines, _ = run(capsys, "mutate", path, "--no-coverage")
    assert (code, [line for line in lines if line.startswith("policy coverage")]) == (0, [])
    assert lines[-1] == "sandtable mutate: 1 domain, 11 mutants: score 80.0% (8 killed of 10 scored); 1 weak task; ok"
    code, lines, _ = run(capsys, "mutate", path, "--format", "json", "--no-coverage")
    assert "coverage" not in json.loads("\n".join(lines))["files"][0]


def test_coverage_with_mutants_and_lint_and_coverage_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = desk_file(tmp_path)
    code, lines, _ = run(capsys, "coverage", "--mutants", path)
    assert (code, lines) == (0, [f"{path}: 12 trials of desk (1 reference, 11 mutants)", SUMMARY, *TABLE])
    code, lines, _ = run(capsys, "coverage", "--mutants", path, "--format", "json")
    (f,) = json.loads("\n".join(lines))["files"]
    domain = load_domain(path)
    report = mutate_domain(domain, coverage=True)
    assert report.coverage is not None
    assert (code, f["status"], f["coverage"]) == (0, "ok", coverage_json(report.coverage))
    # the references alone: what lint prints, and coverage without --mutants
    alone = ("policy coverage: 3 rules: 1 could fire, 2 applied; 0 policy sentences quoted by no rule; "
             "0 tasks exercise no rule")
    code, lines, _ = run(capsys, "coverage", path)
    assert (code, lines[:2]) == (0, [f"{path}: 1 trial of desk", alone])
    code, lines, _ = run(capsys, "lint", path)
    assert alone in lines
    # a run's trials or the mutants', not both
    code, _, err = run(capsys, "coverage", "--mutants", "--results", str(tmp_path / "results.json"), path)
    assert code == 2
    assert "argument --results: not allowed with argument --mutants" in err


HANDLERS = """\
def book(args, world, ctx):
    if args["mc"] != "100101" or world.list("bookings"):
        raise KeyError(args["mc"])
    world.create("bookings", {"mc": args["mc"], "rate": args["rate"]})
    return {"booked": args["mc"]}
"""


def test_invalid_mutants_are_not_counted(tmp_path: Path) -> None:
    """A mutant whose trial errors (the handler raises: another carrier, or a second
    booking) is invalid, and not one of the policy's trials: repeat-write@2's first
    booking, made before its second raised, is not counted."""
    (tmp_path / "desk_cov_handlers.py").write_text(HANDLERS, encoding="utf-8")
    text = DESK.replace("    ops:\n      - create: { table: bookings, row: { mc: $mc, rate: $rate } }\n",
                        "    handler: desk_cov_handlers:book\n")
    domain = load_domain(desk_file(tmp_path, text))
    trials: list[TrialResult] = []
    report = mutate_domain(domain, on_trial=trials.append, coverage=True)
    invalid = [m.id for m in report.mutants if m.state == "invalid"]
    assert invalid == ["change-arg@2.mc:key", "repeat-write@2", "fail-require@insured"]
    assert report.counts["generated"] == 11
    assert len(trials) == 1 + 11 - 3
    assert ERRORED not in [t.verdict for t in trials]
    assert report.coverage is not None
    assert (report.coverage.trials, report.coverage.notes) == (9, [])
    # book called once by the reference, change-arg@2.rate, skip-first, spam, drop-read@0,
    # repeat-read@0 and stop-after@2: 7 (8 with repeat-write@2's first booking)
    got = {r.id: (r.level, r.reached, r.held, r.broken) for r in report.coverage.rules}
    assert got == {"verify-first": ("both-outcomes", 7, 5, 2),  # skip-first, drop-read@0
                   "insured": ("applied", 7, 7, 0),  # the mutants that broke it are the invalid ones
                   "rate-cap": ("boundary", 7, 6, 1)}


EXAMPLES = Path(__file__).resolve().parent.parent / "example_domains"


@pytest.mark.parametrize("name", ["freight", "clinic"])
def test_every_hard_rule_of_the_examples_sees_both_outcomes_from_the_mutants(name: str) -> None:
    """The issue's goal for the bundled examples (docs/mutate.md, "Policy coverage from the mutants")."""
    report = mutate_domain(load_domain(EXAMPLES / name / "sandtable.yaml"), coverage=True)
    assert report.coverage is not None
    below = [(r.id, r.level) for r in report.coverage.rules
             if not r.soft and r.level not in ("both-outcomes", "boundary")]
    assert below == []
