"""Policy coverage shown by every pytest run: one line per domain in the sandtable terminal
summary, computed at the end from the run's stored trials (on the xdist controller too)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, only_results

# one limit rule and two tasks: the reference agent holds it in one (at the bound, 2000)
# and breaks it one past it (2001) in the other: the rule reaches its boundary
DESK = """\
version: 1
name: desk
policy: |
  Never pay above a load's max rate.
world:
  loads:
    key: id
    rows:
      - { id: L-1, max_rate: 2000 }
  bookings:
    key: id
    fields: [load, rate]
    rows: []
tools:
  - name: book
    params: { id: { type: string }, rate: { type: number } }
    ops:
      - create: { table: bookings, row: { load: $id, rate: $rate } }
invariants:
  - id: rate-cap
    kind: limit
    tool: book
    arg: rate
    lte: { table: loads, key: $id, field: max_rate }
    source: { quote: "Never pay above a load's max rate." }
tasks:
  - id: at-ceiling
    user: { opening: "L-1 at 2000?", script: ["Deal."] }
    expect: { called: [book] }
    reference:
      - call: book
        args: { id: L-1, rate: 2000 }
      - say: "Booked."
  - id: past-ceiling
    user: { opening: "L-1 at 2001?", script: ["Deal."] }
    expect: { called: [book] }
    reference:
      - call: book
        args: { id: L-1, rate: 2001 }
      - say: "Booked."
"""

LINE = ("policy coverage desk: 1 rule: 1 boundary; 0 policy sentences quoted by no rule; "
        "0 tasks exercise no rule")


@pytest.mark.parametrize("workers", [None, "2"], ids=["one-process", "xdist"])
def test_a_run_shows_its_policy_coverage_per_domain(pytester: pytest.Pytester, workers: str | None) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    xdist = ("-n", workers) if workers else ()
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=1", *xdist)
    result.assert_outcomes(passed=1, failed=1)  # the trial past the ceiling broke the rule
    lines = result.outlines
    assert LINE in lines
    assert not [line for line in lines if "policy coverage not computed" in line]
    # in the sandtable section, before where the files went
    assert lines.index(LINE) < next(i for i, line in enumerate(lines) if line.startswith("sandtable: results in"))
    doc = only_results(pytester.path)  # read_results checks it against the schema
    assert doc["schema_version"] == "1.6"
    [cov] = doc["coverage"]
    assert {k: cov[k] for k in ("domain", "path", "trials", "levels")} == {
        "domain": "desk", "path": "desk.sandtable.yaml", "trials": 2,
        "levels": {"declared": 0, "applied": 0, "could-fire": 0, "both-outcomes": 0, "boundary": 1},
    }
    [rule] = cov["rules"]
    assert rule == {
        "id": "rate-cap", "kind": "limit", "soft": False, "tool": "book", "level": "boundary",
        "calls": 2, "applied": 2, "held": 1, "broken": 1, "could_fire": True,
        "tasks": ["at-ceiling", "past-ceiling"],
        "boundary": {"lte": {"held_at_bound": True, "broken_past_bound": True}},
    }
    assert (cov["unreached_rules"], cov["tasks_without_rules"], cov["tasks_not_run"]) == ([], [], [])


def test_a_coverage_failure_is_one_line_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    (pytester.path / "desk.sandtable.yaml").write_text(DESK, encoding="utf-8")
    # a conftest that breaks the accumulator: the run's outcome and files stay as they are
    pytester.makeconftest(
        "import pytest_sandtable.policy_coverage as pc\n"
        "class Broken:\n"
        "    def __init__(self, domain):\n"
        "        raise RuntimeError('no accumulator')\n"
        "pc.CoverageAccumulator = Broken\n"
    )
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-k=1")
    result.assert_outcomes(passed=1, failed=1)
    assert "sandtable: policy coverage not computed: RuntimeError: no accumulator" in result.outlines
    doc = only_results(pytester.path)
    assert doc["summary"]["trials"] == 2
    assert "coverage" not in doc
