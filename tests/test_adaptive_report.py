"""An adaptive run's section of report.html, in headless chromium: each task's verdict,
trials and anytime interval, the saving line, every value shown as text."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable import ReferenceAgent, ScriptedUser, run_trial
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.report.adaptive import adaptive_section
from pytest_sandtable.report.results_json import RunMeta, build_results, read_results, write_run

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import SHOP

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]
PLANTED = "<img src=x onerror=\"window.__pwned=1\">"


class SlippingAgent(ReferenceAgent):
    """The reference agent, except that it fails greet's second trial."""

    def for_task(self, task: Any) -> SlippingAgent:
        return SlippingAgent(task.reference)

    def __call__(self, turn: Any) -> str:
        if (turn.trial.task_id, turn.trial.trial) == ("greet", 2):
            return "Sorry."
        return super().__call__(turn)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    domain = load_domain_text(SHOP, "sandtable.yaml")
    trials = [run_trial(domain, task.id, SlippingAgent(), ScriptedUser(), trial=i, k=3, location="sandtable.yaml:1")
              for task in domain.tasks for i in (1, 2, 3)]
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=3, run_seed=0)
    results = build_results(trials, meta)
    design = {"p0": 0.5, "p1": 0.95, "alpha": 0.2, "beta": 0.2, "cap": 3, "max_trials": None, "max_cost": None}
    section = adaptive_section(design, trials)  # type: ignore[arg-type]
    section["tasks"][0]["domain"] = PLANTED  # markup where a name goes stays text
    results["adaptive"] = section
    out = tmp_path_factory.mktemp("run")
    write_run(results, out)
    assert read_results(out / "results.json")["adaptive"] == section  # valid against the schema
    return out / "report.html"


def test_the_section_escapes_every_value(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert '<section id="adaptive">' in html
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in html and "<img" not in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_adaptive_section_in_a_browser(report: Path) -> None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report.as_uri())
            section = page.locator("#adaptive")
            assert section.locator("h2").inner_text().startswith("Adaptive trials")
            rows = [r.inner_text().split("\t") for r in section.locator("tbody tr").all()]
            names = [r[0] for r in rows]
            assert names[0] == f"{PLANTED}/greet" and all(n.startswith("shop/") for n in names[1:])
            assert rows[0][1:] == ["unreliable", "2", "1/2", "1-99%", "0.19", "2", "3"]
            assert all(r[1:4] == ["reliable", "3", "3/3"] and r[6:] == ["3", "–"] for r in rows[1:])
            trials = 3 * len(rows)
            assert section.locator(".saving").inner_text() == f"spent {trials} trials where k=3 would take {trials}"
            assert page.evaluate("window.__pwned") is None and errors == []
        finally:
            browser.close()
