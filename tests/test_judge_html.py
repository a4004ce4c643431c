"""report.html's "Judged scores" section: the scores per criterion and tag, each judged
trial's verdicts with the transcript lines the judges quoted and the quotes marked, all
escaped; checked in the markup and in headless chromium."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _judges import answering, fake_judges, verdict
from test_html_browser import BROWSER_ARGS, CHROMIUM, _playwright, _Tables, needs_chromium
from test_judge_plugin import DESK

from pytest_sandtable import ReferenceAgent, ScriptedUser, run_trial
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.judge.panel import Panel, PanelOptions
from pytest_sandtable.judge.run import judge_trials
from pytest_sandtable.judge.spec import parse_panel
from pytest_sandtable.report.html import render_report
from pytest_sandtable.report.results_json import RunMeta, build_results, write_run

PLANTED = '<img src=x onerror="window.__pwned=1">'
TEXT = DESK.replace('say: "Booked L-1 at 2000."', f"say: 'Booked L-1 at 2000. {PLANTED}'")


def _results(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    domain = load_domain_text(TEXT, "desk.sandtable.yaml")
    trials = [run_trial(domain, task.id, ReferenceAgent(), ScriptedUser(), trial=1, k=1,
                        location="desk.sandtable.yaml:1") for task in domain.tasks]
    meta = RunMeta(domains=[{"name": "desk", "path": "desk.sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=1, run_seed=0)
    results: dict[str, Any] = dict(build_results(trials, meta))
    script = {
        "judge-a": answering({"confirms": verdict("yes", f"Booked L-1 at 2000. {PLANTED}"),
                              "states-rate": verdict("yes", "at 2001")}),
        "judge-c": answering({"confirms": verdict("yes", "Booked L-1"), "states-rate": verdict("no", "the rate")}),
    }
    with fake_judges(monkeypatch, script):
        panel = Panel(parse_panel("claude:judge-a,openai:judge-c"), PanelOptions(cache_dir=tmp_path / "cache"))
        judged = judge_trials(results["trials"], lambda t: domain, panel)
    assert judged is not None
    results["judged"] = judged
    return results


def test_the_section_and_its_marks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    html = render_report(_results(monkeypatch, tmp_path))
    section = html[html.index('<section id="judged-scores"'):]
    section = section[: section.index("</section>")]
    assert "<img" not in section and "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in section
    assert ("reported only: never a verdict, a gate or the exit status" in section)
    tables = _Tables()
    tables.feed(section)
    assert tables.tables["judged-criteria"] == [
        ["criterion", "question", "yes", "scored", "void", "split", "n/a", "disagree", "calibration"],
        ["confirms", "Did the agent confirm the booking?", tables.tables["judged-criteria"][1][2], "2", "0", "0",
         "0", "0", "uncalibrated"],
        # judge-c's verdict is void (below): judge-a's yes is the panel's
        ["states-rate", "Did the agent state the rate?", tables.tables["judged-criteria"][2][2], "1", "0", "0",
         "0", "0", "uncalibrated"],
    ]
    assert tables.tables["judged-criteria"][1][2].startswith("100.0%")
    assert tables.tables["judged-tags"][1][:4] == ["booking", "confirms", tables.tables["judged-tags"][1][2], "2"]
    # at-ceiling: both judges quote the agent's line; the longer quote's mark holds, escaped
    assert ('<mark class="evidence" title="confirms: claude:judge-a">Booked L-1 at 2000. '
            "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;</mark>") in section
    # past-ceiling: judge-c's quote is not in the final message: void, and shown so
    assert ('<span class="void">openai:judge-c: void, quote not in the transcript: &#x27;the rate&#x27;</span>'
            in section)
    assert '<mark class="evidence" title="states-rate: claude:judge-a">at 2001</mark>' in section


@needs_chromium
def test_the_section_in_a_browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    results = _results(monkeypatch, tmp_path)
    write_run(results, tmp_path / "run")  # type: ignore[arg-type]
    url = (tmp_path / "run" / "report.html").as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            section = page.locator("#judged-scores")
            assert section.is_visible()
            assert section.locator("h2").inner_text().startswith("Judged scores (claude:judge-a, openai:judge-c; ")
            trials = section.locator("details.judged-trial")
            assert trials.count() == 2
            assert [s.inner_text() for s in section.locator("details.judged-trial > summary").all()] == [
                "at-ceiling[1] passed", "past-ceiling[1] failed"]
            mark = trials.nth(0).locator("mark.evidence")
            assert mark.is_visible() is False  # closed
            trials.nth(0).locator("summary").click()
            assert mark.is_visible() and mark.inner_text() == f"Booked L-1 at 2000. {PLANTED}"
            line = trials.nth(0).locator(".judged-line")
            assert line.inner_text() == f"[1] agent: Booked L-1 at 2000. {PLANTED}"
            trials.nth(1).locator("summary").click()
            marks = trials.nth(1).locator("mark.evidence")
            assert [m.inner_text() for m in marks.all()] == ["Booked L-1", "at 2001"]  # two quotes of one line
            assert [v.inner_text() for v in trials.nth(1).locator(".void").all()] == [
                f"claude:judge-a: void, quote not in the transcript: 'Booked L-1 at 2000. {PLANTED}'",
                "openai:judge-c: void, quote not in the transcript: 'the rate'"]
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert page.locator("img").count() == 0
            assert errors == []
        finally:
            browser.close()


def test_a_big_run_lists_the_first_judged_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_sandtable.report.html as report_html

    monkeypatch.setattr(report_html, "JUDGED_TRIALS_SHOWN", 1)
    judged = {"judges": ["claude:j"], "criteria": [], "tags": [], "cost": {"total": None}, "calls": 0, "cached": 0,
              "trials": [{"task": f"t{n}", "trial": 1, "verdict": "passed", "criteria": []} for n in range(3)]}
    html = render_report({"summary": {"pass_hat": {"1": None}, "tasks": []}, "run": {}, "gate": {}, "trials": [],
                          "judged": judged})
    assert html.count('<details class="judged-trial">') == 1
    assert "2 more judged trials are in results.json (judged.trials)." in html
