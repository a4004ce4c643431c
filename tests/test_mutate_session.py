"""``--sandtable-mutate``: the run's tasks mutated at its end (docs/mutate.md), in the
terminal, results.json, report.html and the gate, one process and under xdist.

The shop is test_mutate.py's hand-counted one: its figures here are the same as the
``mutate`` command's, worked out by hand there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, only_results
from test_html_browser import BROWSER_ARGS, CHROMIUM, _playwright, needs_chromium
from test_mutate import ORDERS, SHOP

from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.mutate.run import mutate_domain

HEADLINE = ("mutation shop (shop.sandtable.yaml): 2 tasks, 24 mutants: 16 killed, 3 survived, 5 equivalent, "
            "0 accepted, 0 invalid; score 84.2%; 1 weak task")
LINES = [
    HEADLINE,
    "  baselines: doing nothing passes 0 of 2 tasks; spam passes 0 of 2 tasks",
    "  survived (3):",
    '    order: change-arg@3.tier:enum (must be caught): place_order tier: "std" -> "rush"; '
    f"add where: {{tier: std}} to {ORDERS}",
    '    order: change-arg@3.note:short (must be caught): place_order note: "gift" -> "gif"; '
    f"add where: {{note: gift}} to {ORDERS}",
    '    order: stop-after@3 (may survive): stopped after place_order(sku="A1", qty=2, tier="std", note="gift"); '
    "add reply_includes: [ordered] (ties the task to the reference's wording: an agent that says it otherwise fails)",
    "  decorative checks, killed no mutant (1): closed-item: reply:closed",
]


def _shop(pytester: pytest.Pytester, text: str = SHOP) -> None:
    (pytester.path / "shop.sandtable.yaml").write_text(text, encoding="utf-8")


def _block(lines: list[str]) -> list[str]:
    start = lines.index(HEADLINE)
    return lines[start : start + len(LINES)]


@pytest.mark.parametrize("workers", [None, "2"], ids=["one-process", "xdist"])
def test_a_run_mutates_its_tasks(pytester: pytest.Pytester, workers: str | None) -> None:
    _shop(pytester)
    xdist = ("-n", workers) if workers else ()
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-mutate", *xdist)
    result.assert_outcomes(passed=2)
    assert result.ret == 0  # no mutation gate given: the score is a report
    lines = result.outlines
    assert _block(lines) == LINES
    # in the sandtable section after the coverage line, before where the files went
    cov = next(i for i, line in enumerate(lines) if line.startswith("policy coverage shop:"))
    assert cov < lines.index(HEADLINE) < next(i for i, line in enumerate(lines)
                                              if line.startswith("sandtable: results in"))
    doc = only_results(pytester.path)  # checked against the schema
    assert doc["schema_version"] == "1.6"
    mutation = doc["mutation"]
    assert mutation["totals"] == {"killed": 16, "survived": 3, "equivalent": 5, "accepted": 0, "invalid": 0,
                                  "generated": 24, "score": 16 / 19, "weak_tasks": 1}
    assert (mutation["fail_under"], mutation["fail_on_weak"]) == (None, False)
    [dom] = mutation["domains"]
    report = mutate_domain(load_domain_text(SHOP))  # the command's own figures
    assert (dom["domain"], dom["path"], dom["counts"], dom["score"], dom["weak_tasks"]) == (
        "shop", "shop.sandtable.yaml", report.counts, report.score, ["order"])
    assert [(t["task"], t["counts"], t["weak"], t["skipped"]) for t in dom["tasks"]] == [
        (t.task, t.counts, t.weak, None) for t in report.tasks]
    assert [(s["task"], s["id"], s["expected"], s["suggestion"]) for s in dom["survivors"]] == [
        ("order", "change-arg@3.tier:enum", "must", f"add where: {{tier: std}} to {ORDERS}"),
        ("order", "change-arg@3.note:short", "must", f"add where: {{note: gift}} to {ORDERS}"),
        ("order", "stop-after@3", "may", "add reply_includes: [ordered] (ties the task to the reference's "
         "wording: an agent that says it otherwise fails)"),
    ]
    assert dom["baselines"] == {"tasks": 2, "do_nothing": [], "spam": [], "do_nothing_rate": 0.0, "spam_rate": 0.0}
    assert (dom["invalid"], dom["problems"], dom["decorative"]) == ([], [], ["closed-item: reply:closed"])
    assert doc["gate"]["set"] is False


@pytest.mark.parametrize(
    ("flags", "ret", "verdict"),
    [
        (["--sandtable-mutate-fail-under", "84"], 0,
         "sandtable gate passed: mutation score 84.2% meets --sandtable-mutate-fail-under 84%"),
        (["--sandtable-mutate-fail-under=85%"], 1,
         "sandtable gate failed: mutation score 84.2% is below --sandtable-mutate-fail-under 85% by 0.8 points"),
        (["--sandtable-mutate-fail-on-weak"], 1,
         "sandtable gate failed: --sandtable-mutate-fail-on-weak: 1 weak task (order)"),
    ],
    ids=["meets", "below", "weak"],
)
def test_the_mutation_gates_decide_the_exit_status(pytester: pytest.Pytester, flags: list[str], ret: int,
                                                   verdict: str) -> None:
    _shop(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, *flags)  # either gate turns mutation on
    result.assert_outcomes(passed=2)
    assert result.ret == ret
    assert _block(result.outlines) == LINES
    assert verdict in result.outlines
    doc = only_results(pytester.path)
    assert doc["gate"]["set"] is True and doc["gate"]["passed"] is (ret == 0)
    assert doc["gate"]["lines"][0] == verdict


def test_only_the_tasks_of_the_run_are_mutated(pytester: pytest.Pytester) -> None:
    _shop(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-mutate-fail-on-weak", "-k", "closed")
    result.assert_outcomes(passed=1, deselected=1)
    assert result.ret == 0
    assert ("mutation shop (shop.sandtable.yaml): 1 task, 5 mutants: 4 killed, 0 survived, 1 equivalent, "
            "0 accepted, 0 invalid; score 100.0%; 0 weak tasks") in result.outlines
    assert "sandtable gate passed: --sandtable-mutate-fail-on-weak: no weak task" in result.outlines
    [dom] = only_results(pytester.path)["mutation"]["domains"]
    assert [t["task"] for t in dom["tasks"]] == ["closed-item"]
    assert dom["baselines"]["tasks"] == 1


def test_without_the_option_nothing_is_mutated(pytester: pytest.Pytester) -> None:
    _shop(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS)
    result.assert_outcomes(passed=2)
    assert not [line for line in result.outlines if line.startswith(("mutation", "  survived"))]
    assert "mutation" not in only_results(pytester.path)


@pytest.mark.parametrize("value", ["abc", "120", "nan"])
def test_a_bad_score_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    _shop(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, f"--sandtable-mutate-fail-under={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    shown = repr(value) if value == "abc" else value
    assert result.errlines[0] == (f"ERROR: --sandtable-mutate-fail-under: expected a percentage from 0 to 100, "
                                  f"got {shown}")
    assert not list(pytester.path.glob(".sandtable/runs/*"))  # before any trial ran


@pytest.mark.parametrize("gated", [False, True], ids=["report", "gated"])
def test_a_mutation_failure_is_one_line_and_the_run_goes_on(pytester: pytest.Pytester, gated: bool) -> None:
    _shop(pytester)
    pytester.makeconftest(
        "import pytest_sandtable.mutate.session as s\n"
        "def broken(*a, **k):\n"
        "    raise RuntimeError('no mutants today')\n"
        "s.mutate_run = broken\n"
    )
    flag = "--sandtable-mutate-fail-on-weak" if gated else "--sandtable-mutate"
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, flag)
    result.assert_outcomes(passed=2)
    assert "sandtable: mutation not run: RuntimeError: no mutants today" in result.outlines
    doc = only_results(pytester.path)
    assert "mutation" not in doc and doc["summary"]["trials"] == 2
    if gated:  # a gate that cannot be checked is not met
        assert result.ret == 1
        assert ("sandtable gate failed: the mutation run failed (RuntimeError: no mutants today)"
                in result.outlines)
    else:
        assert result.ret == 0


PLANTED = "<img src=x onerror=window.__pwned=1>"

# one write whose note nothing checks: the note's shortened mutant survives, markup and all
NOTES = f"""\
version: 1
name: notes
policy: Keep notes.
world:
  notes:
    key: id
    key_format: "N-{{n}}"
    fields: [id, text]
    rows: []
tools:
  - name: add_note
    params: {{ text: {{ type: string }} }}
    ops:
      - create: {{ table: notes, row: {{ text: $text }} }}
tasks:
  - id: note
    user: {{ opening: "Note this." }}
    expect:
      state:
        - {{ table: notes, count: 1 }}
    reference:
      - call: add_note
        args: {{ text: "{PLANTED}" }}
      - say: "Noted."
"""


@needs_chromium
def test_the_mutation_section_in_a_browser(pytester: pytest.Pytester) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    (pytester.path / "notes.sandtable.yaml").write_text(NOTES, encoding="utf-8")
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-mutate")
    result.assert_outcomes(passed=1)
    [run] = pytester.path.glob(".sandtable/runs/*")
    html = (run / "report.html").read_text(encoding="utf-8")
    assert html.count("<script") == 1 and "<img" not in html
    doc = only_results(pytester.path)
    [dom] = doc["mutation"]["domains"]
    survivors = dom["survivors"]
    assert sum(PLANTED in s["diff"] for s in survivors) == 2  # the shortened note and stop-after
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((run / "report.html").as_uri())
            section = page.locator("#mutation")
            assert section.locator("h2").inner_text().startswith("Mutation")
            counts = dom["counts"]
            assert (f"Score {round(100 * dom['score'], 1)}% · {counts['killed']} killed, {counts['survived']} "
                    f"survived of {counts['generated']} mutants · {len(dom['weak_tasks'])} weak tasks"
                    ) in section.inner_text()
            ops = section.locator("table.mutation tbody tr")
            assert [r.inner_text().split("\t")[0] for r in ops.all()] == [o["operator"] for o in dom["operators"]]
            items = section.locator("ul.survivors li")
            assert items.count() == len(survivors)
            for item, s in zip(items.all(), survivors):
                text = item.inner_text()
                assert text.startswith(f"{s['task']}: {s['id']} (")
                assert s["diff"] in text  # the markup shows as text
                if s["suggestion"]:
                    assert f"catch it with: {s['suggestion']}" in text
            assert section.locator("img").count() == 0
            assert page.evaluate("window.__pwned") is None
            assert errors == []
        finally:
            browser.close()


def test_a_run_that_stopped_early_is_not_mutated(pytester: pytest.Pytester) -> None:
    _shop(pytester)
    pytester.makeconftest(
        "def pytest_runtest_teardown(item):\n"
        "    item.session.shouldstop = 'planted stop'\n"
    )
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "--sandtable-mutate")
    result.assert_outcomes(passed=1)
    assert "sandtable: mutation not run: the run stopped early (interrupted)" in result.outlines
    assert not [line for line in result.outlines if line.startswith("mutation ")]
    assert "mutation" not in only_results(pytester.path)
