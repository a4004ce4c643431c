"""report.html in a real headless browser (Debian's chromium): the content shows,
navigation works, markup planted in a transcript is shown as text and never runs,
and the page makes no request of its own. Plus checks of the markup itself."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable import ReferenceAgent, ScriptedUser, run_trial
from pytest_sandtable.domain.loader import load_domain_text
from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.html import render_report, write_report_html
from pytest_sandtable.report.prices import builtin_prices_as_of
from pytest_sandtable.report.results_json import RunMeta, build_results, write_run

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import SHOP

PLANTED_SCRIPT = "<script>window.__pwned=1</script>"
PLANTED_IMG = '<img src=x onerror="window.__pwned=1">'
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


class SlippingAgent(ReferenceAgent):
    """The reference agent, except that it fails greet's second trial."""

    def for_task(self, task: Any) -> SlippingAgent:
        return SlippingAgent(task.reference)

    def __call__(self, turn: Any) -> str:
        if (turn.trial.task_id, turn.trial.trial) == ("greet", 2):
            return f"Sorry. {PLANTED_IMG}"
        return super().__call__(turn)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report whose transcripts, world rows and replies carry planted markup."""
    text = SHOP.replace('"Hi, I\'m customer C-1. Please refund 20 for my broken mug."',
                        f"'{PLANTED_SCRIPT} {PLANTED_IMG} Hi, I am customer C-1. Please refund 20.'")
    text = text.replace("name: Ada Example", 'name: "<b onmouseover=window.__pwned=1>Ada</b>"')
    domain = load_domain_text(text, "sandtable.yaml")
    trials = [run_trial(domain, task.id, SlippingAgent(), ScriptedUser(), trial=i, k=3, location="sandtable.yaml:1")
              for task in domain.tasks for i in (1, 2, 3)]
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=3, run_seed=0)
    out = tmp_path_factory.mktemp("run")
    write_run(build_results(trials, meta, fail_under=80), out)
    return out / "report.html"


# --------------------------------------------------------------------------- the markup


def test_the_page_is_self_contained_and_escapes_everything(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert html.count("<script") == 1  # ours, at the end
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in html
    assert "<img" not in html and "onerror=" not in html.replace("onerror=&quot;", "")
    assert "<b onmouseover" not in html
    assert re.findall(r'\b(?:src|href|action)="(?!#)', html) == []  # links are anchors only
    assert "http://" not in html and "https://" not in html
    assert "default-src &#x27;none&#x27;" in html  # a CSP: the browser allows no request


def test_render_without_optional_parts() -> None:
    html = render_report({"summary": {"pass_hat": {"1": None}, "tasks": []}, "run": {}, "gate": {}, "trials": []})
    assert "n/a" in html and "No check failed." in html


class _Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts (headers included), by the table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._rows = self.tables.setdefault(dict(attrs).get("class") or "", [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._rows is not None and self._cell is not None:
            self._rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _usage_trial(task: str, agent: dict[str, Any], user: dict[str, Any]) -> TrialResult:
    return TrialResult(domain="shop", task=task, trial=1, k=1, seed=1, verdict="passed", agent="claude",
                       user="gpt", usage={"agent": agent, "user": user}, latency=[0.25, 0.75, 1.5],
                       location="sandtable.yaml:1")


def test_usage_and_cost_are_a_table_with_a_total_and_the_prices_date() -> None:
    agent = {"claude-sonnet-4-5-20250929": {"input": 12_000, "output": 3_000, "cache_read": 40_000,
                                            "cache_write": 8_000, "calls": 6}}
    user = {"gpt-test": {"input": 1_000, "output": 200, "cache_read": 0, "cache_write": 0, "calls": 3}}
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": "0" * 64}], agent="reference",
                   user="scripted", k=1, run_seed=0)
    html = render_report(build_results([_usage_trial("greet", agent, user)], meta))
    assert "cost.currency" not in html and "cost.total" not in html and "cost.prices_as_of" not in html
    usage = _Tables()
    usage.feed(html)
    assert usage.tables["usage"] == [
        ["side", "model", "calls", "input", "output", "cache read", "cache write", "cost"],
        # (12,000 x 3 + 3,000 x 15 + 40,000 x 0.30 + 8,000 x 3.75) / 1e6 = $0.123
        ["agent", "claude-sonnet-4-5-20250929", "6", "12,000", "3,000", "40,000", "8,000", "$0.1230"],
        ["user", "gpt-test", "3", "1,000", "200", "0", "0", "n/a"],
        ["total", "", "9", "13,000", "3,200", "40,000", "8,000", "$0.1230 + n/a"],
    ]
    assert (f"Cost estimated at list prices as of {builtin_prices_as_of()} (USD)") in html
    assert "No price for <code>gpt-test</code>: its cost is n/a." in html
    text = re.sub(r"<[^>]+>", " ", html)
    assert re.search(r"agent turn latency\s+p50 750 ms · p95 1\.4 s over 3 turns", text)


def test_usage_without_model_calls_and_with_an_unknown_cost_shape() -> None:
    meta = RunMeta(domains=[], agent="reference", user="scripted", k=1, run_seed=0)
    html = render_report(build_results([_usage_trial("greet", {}, {})], meta))
    assert "No model calls were recorded" in html and '<table class="usage">' not in html
    doc = build_results([_usage_trial("greet", {"m": {"input": 5, "output": 1, "calls": 1}}, {})], meta)
    doc["summary"]["cost"] = {"total_usd": 0.42}  # another version's shape: still a table, cost n/a
    usage = _Tables()
    usage.feed(render_report(doc))
    assert usage.tables["usage"][1] == ["agent", "m", "1", "5", "1", "0", "0", "n/a"]


def test_the_gate_card_shows_one_verdict_and_a_line_per_check() -> None:
    trials = [_usage_trial("greet", {}, {})]
    trials[0].tags = ["chat"]
    meta = RunMeta(domains=[], agent="reference", user="scripted", k=1, run_seed=0)
    html = render_report(build_results(trials, meta, fail_under=50, floors={"chat": 100, "billing": 10}))
    card = html[html.index('id="gate"'):html.index('id="tasks"')]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", card))
    assert text.count("gate failed") == 1 and "gate passed" not in text
    assert "✗ failed: --sandtable-floor billing=10: no task is tagged" in text
    assert "✓ passed: pass^1 100.0% meets --sandtable-fail-under 50% with 50.0 points to spare" in text
    assert "✓ passed: tag chat pass^1 100.0% meets --sandtable-floor chat=100% exactly" in text


# --------------------------------------------------------------------------- in a browser


def _playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    return sync_playwright


@needs_chromium
def test_in_a_browser(report: Path, tmp_path: Path) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        _dump_dom_checks(report)
        return
    url = report.as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)

            # the content shows
            assert page.title().startswith("sandtable: pass^3 ")
            headline = page.locator("#headline")
            assert headline.is_visible() and re.fullmatch(r"\d+\.\d%", headline.inner_text())
            assert page.locator("#gate").inner_text().count("gate failed") == 1
            tasks_table = page.locator("table.tasks")
            assert tasks_table.get_by_role("link", name="order-status").is_visible()
            assert page.get_by_text("Your order O-1 has shipped.").first.is_visible() is False  # passed: collapsed
            assert page.get_by_text("Sorry.").first.is_visible()  # greet[2] failed: open
            assert page.locator("svg.chart circle").count() == 3

            # navigation: a task link shows the task's trials; a trial dot opens a collapsed trial
            tasks_table.get_by_role("link", name="order-status").click()
            assert page.evaluate("location.hash") == "#task-3"
            section = page.locator("#task-3")
            assert section.is_visible() and _in_viewport(page, "#task-3")
            page.locator('a.dot[href="#trial-3-2"]').click()
            # the page opens a trial on the hash change: wait for it rather than race it
            page.locator("#trial-3-2[open]").wait_for(state="attached", timeout=5000)
            assert page.locator("#trial-3-2").evaluate("d => d.open") is True
            assert page.locator("#trial-3-2").get_by_text("Your order O-1 has shipped.").is_visible()
            assert _in_viewport(page, "#trial-3-2")

            # filters (JS): only the flaky tasks
            page.locator('.filters button[data-verdict="flaky"]').click()
            rows = tasks_table.locator("tbody tr")
            visible = [r.locator("td a").first.inner_text() for r in rows.all() if r.is_visible()]
            assert visible == ["greet"]
            page.locator('.filters button[data-verdict="all"]').click()

            # planted markup is text, and never ran
            first_user = page.locator("#trial-1-1 li.msg.user .text")
            page.locator('a.dot[href="#trial-1-1"]').click()
            page.locator("#trial-1-1[open]").wait_for(state="attached", timeout=5000)
            first_user.wait_for(state="visible", timeout=5000)
            assert first_user.inner_text().startswith(f"{PLANTED_SCRIPT} {PLANTED_IMG} Hi, I am customer C-1.")
            assert page.get_by_text(f"Sorry. {PLANTED_IMG}").first.is_visible()
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert page.locator("img").count() == 0
            assert page.locator("#trial-1-1").get_by_text("<b onmouseover=window.__pwned=1>Ada</b>").count() >= 1

            # no request leaves the page, and the page's own script ran without error
            assert requests == [url]
            assert errors == []
            assert "no-js" not in (page.locator("html").get_attribute("class") or "")
            page.goto(f"{url}#trial-2-2")
            page.screenshot(path=str(tmp_path / "report.png"), full_page=False)

            # without JS everything still shows: failing trials open, links to anchors
            nojs = browser.new_context(java_script_enabled=False).new_page()
            nojs.goto(url)
            assert nojs.locator("#headline").is_visible()
            assert nojs.get_by_text("Sorry.").first.is_visible()
            assert not nojs.locator(".filters").first.is_visible()  # JS-only controls hidden
            nojs.get_by_role("link", name="order-status").first.click()
            assert nojs.locator("#task-3").is_visible()
        finally:
            browser.close()


def _in_viewport(page: Any, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    height = page.viewport_size["height"]
    return box is not None and 0 <= box["y"] < height


def _dump_dom_checks(report: Path) -> None:
    """Without playwright: chromium's own --dump-dom (JS runs; the DOM it leaves is checked)."""
    assert CHROMIUM is not None
    proc = subprocess.run([CHROMIUM, "--headless", *BROWSER_ARGS, "--dump-dom", report.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert 'id="headline"' in dom and "order-status" in dom
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in dom
    assert "<img" not in dom
    assert 'class="no-js"' not in dom  # the page's script ran (and only it: CSP by hash)


def _scored_report(tmp_path: Path) -> Path:
    """Two domains, a drafted rule pending review, failed trials with their likely owners."""
    from pytest_sandtable.engine.results import Check

    trials = []
    for domain, task, verdicts, owner in [("shop", "refund", "ppfp", "agent"), ("bank", "transfer", "pffp", "user")]:
        for i, v in enumerate(verdicts, 1):
            failed = v == "f"
            trials.append(TrialResult(
                domain=domain, task=task, trial=i, k=4, seed=i, verdict="failed" if failed else "passed",
                tags=["money"], shared_tags=["money"], location=f"{domain}.sandtable.yaml:1",
                checks=[Check("state", f"state:{task}#1", False, "no row")] if failed else [],
                attribution={"owner": owner, "evidence": f"the {owner} did it"} if failed else None,
                pending=[{"kind": "rule", "id": "refund-cap"}] if domain == "shop" else []))
    meta = RunMeta(domains=[{"name": "shop", "path": "shop.sandtable.yaml", "sha256": "0" * 64}],
                   agent="reference", user="scripted", k=4, run_seed=0)
    return write_run(build_results(trials, meta), tmp_path / "scored") / "report.html"


@needs_chromium
def test_intervals_owners_and_the_provisional_banner_in_a_browser(tmp_path: Path) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    report = _scored_report(tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report.as_uri())
            assert page.title() == "sandtable: pass^4 0.0% · shop (provisional)"
            banner = page.locator("#provisional")
            assert banner.is_visible() and _in_viewport(page, "#provisional")
            assert banner.locator("h2").inner_text() == "Provisional: 1 drafted item is pending review"
            assert banner.locator("li").inner_text() == "rule shop/refund-cap (4 trials ran under it)"
            assert page.locator("#headline").inner_text() == "0.0%"
            assert page.locator("#headline-ci").inner_text() == "95% CI 0-76%"
            assert page.locator("svg.chart line.ci").count() == 4
            scores = page.locator("table.scores.pass_hat tbody tr")
            assert [r.locator("td").first.inner_text() for r in scores.all()] == [
                "all tasks", "domain bank", "domain shop", "money"]
            assert scores.first.locator("td").nth(2).inner_text() == "62.5%\n15-100%"
            owners = page.locator("table.owners tbody tr")
            assert [r.inner_text().split("\t") for r in owners.all()] == [
                ["user", "2", "bank/transfer"], ["agent", "1", "shop/refund"]]
            owner_box = page.locator("#trial-1-2 .box.owner")  # bank/transfer[2] failed: open
            assert owner_box.is_visible() and owner_box.inner_text() == "likely owner: user the user did it"
            assert errors == []
        finally:
            browser.close()


# --------------------------------------------------------------------------- a big run's compressed trials

BREAKOUT = "</script><script>window.__pwned=1;alert(1)</script>"


@pytest.fixture(scope="module")
def compressed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report past its inline limit: passing trials compressed, failing ones first and
    in full; markup that would end a data block planted in every trial of order-status."""
    text = SHOP.replace('"Where is my order O-1?"', f"'{BREAKOUT} Where is my order O-1?'")
    domain = load_domain_text(text, "sandtable.yaml")
    trials = [run_trial(domain, task.id, SlippingAgent(), ScriptedUser(), trial=i, k=6, location="sandtable.yaml:1")
              for task in domain.tasks for i in range(1, 7)]
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=6, run_seed=0)
    path = tmp_path_factory.mktemp("big") / "report.html"
    with path.open("w", encoding="utf-8") as fp:
        write_report_html(build_results(trials, meta), fp, secrets=(), inline_limit=20_000)
    return path


def test_compressed_trials_are_data_the_page_cannot_run(compressed_report: Path) -> None:
    html = compressed_report.read_text(encoding="utf-8")
    assert BREAKOUT not in html and "alert(1)" not in html  # only in the compressed blocks
    blocks = re.findall(r'<script type="application/octet-stream" id="[gz]\d+">([A-Za-z0-9+/=]*)</script>', html)
    assert len(blocks) == html.count("<script") - 1 >= 4  # every other <script> is one of ours: data, never run
    assert html.count('<details class="group"') == 3  # a fold of passing trials per task


@needs_chromium
def test_a_compressed_trial_opens_in_a_browser_and_its_markup_stays_text(compressed_report: Path) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    url = compressed_report.as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(url)
            assert page.locator("#headline").is_visible()
            assert page.locator("#compressed-note").inner_text().startswith("17 of 18 trials are stored compressed")

            # a square of a compressed passing trial: its task's fold opens, then the trial, decompressed
            task = page.locator("table.tasks").get_by_role("link", name="order-status").get_attribute("href")
            assert task is not None
            trial = f"trial-{task.removeprefix('#task-')}-2"
            assert page.locator(f"#{trial}").count() == 0  # not in the page until its fold is opened
            page.locator(f'a.dot[href="#{trial}"]').click()
            body = page.locator(f"#{trial} .trial-body")
            body.get_by_text("Your order O-1 has shipped.").wait_for(state="visible", timeout=10_000)
            assert page.locator(f"#{trial}").evaluate("d => d.open") is True
            user = body.locator("li.msg.user .text")
            assert user.inner_text() == f"{BREAKOUT} Where is my order O-1?"  # shown as text
            assert _in_viewport(page, f"#{trial}")

            # a folded one opened by hand
            fold = page.locator(f"{task}-passed")
            assert fold.locator(":scope > summary").inner_text() == "6 passed trials, stored compressed"
            other = page.locator(f"#trial-{task.removeprefix('#task-')}-5")
            other.locator("summary").click()
            other.locator(".trial-body li.msg.agent").wait_for(state="visible", timeout=10_000)
            assert other.locator(".trial-body li.msg.agent .text").inner_text() == "Your order O-1 has shipped."

            # the planted markup never ran; the page made no request of its own
            assert dialogs == [] and page.evaluate("typeof window.__pwned") == "undefined"
            assert page.locator("img").count() == 0
            assert errors == [] and requests == [url]

            # without JS: every figure shows, the fold says what opening it needs
            nojs = browser.new_context(java_script_enabled=False).new_page()
            nojs.goto(url)
            assert nojs.locator("#headline").is_visible() and nojs.locator("table.tasks").is_visible()
            assert nojs.get_by_text("Sorry.").first.is_visible()  # greet[2] failed: in full
            nojs.locator(f"{task}-passed summary").click()
            empty = nojs.locator(f"{task}-passed .group-body")
            assert empty.evaluate("el => getComputedStyle(el, '::after').content") == (
                '"Stored compressed in this page: opening it needs JavaScript (results.json holds it in full)."')
        finally:
            browser.close()


@needs_chromium
def test_a_compressed_block_of_passing_tasks_opens_in_a_browser(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With many tasks (here 3 count as many), the sections of the tasks that passed every
    trial (not critical ones) are stored compressed, here one a fold; a link to one of
    them, or to one of its trials, opens it."""
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    import pytest_sandtable.report.html as report_html

    monkeypatch.setattr(report_html, "TASKS_INLINE", 2)
    monkeypatch.setattr(report_html, "TASKS_PER_BLOCK", 1)
    domain = load_domain_text(SHOP, "sandtable.yaml")
    trials = [run_trial(domain, task.id, SlippingAgent(), ScriptedUser(), trial=i, k=6, location="sandtable.yaml:1")
              for task in domain.tasks for i in range(1, 7)]
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=6, run_seed=0)
    path = tmp_path / "report.html"
    with path.open("w", encoding="utf-8") as fp:
        write_report_html(build_results(trials, meta), fp, secrets=(), inline_limit=20_000)
    html = path.read_text(encoding="utf-8")
    # order-status in a fold; greet (flaky) and refund (critical) in full
    assert html.count(' data-tasks="') == 1 and html.count('<div class="task" id=') == 2
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            assert page.locator("#headline").is_visible()
            # greet (flaky) and refund (critical) have their rows; order-status's is in a fold of the table
            table = page.locator("table.tasks")
            assert [a.inner_text() for a in table.locator("tbody tr td:first-child a").all()] == ["refund", "greet"]
            rows = table.locator("details[data-rows]")
            assert rows.count() == 1
            no = rows.get_attribute("data-rows").split("-")[0]  # type: ignore[union-attr]
            task = f"#task-{no}"
            assert rows.locator(":scope > summary").inner_text() == (
                "1 task that passed every trial (order-status, 6 trials), stored compressed")
            fold = page.locator(f'details[data-tasks="{no}-{no}"]')
            assert fold.locator(":scope > summary").inner_text() == (
                "1 task that passed every trial (order-status, 6 trials), stored compressed")
            assert page.locator(task).count() == 0  # its section is not in the page until its fold opens
            rows.locator(":scope > summary").click()  # the table's fold: its row takes its place
            link = table.get_by_role("link", name="order-status")
            link.wait_for(state="visible", timeout=10_000)
            assert table.locator("details[data-rows]").count() == 0
            assert table.locator("tbody tr").count() == 3 and table.locator('a.dot[href^="#trial-"]').count() == 18
            page.locator(f'a.dot[href="#trial-{no}-4"]').click()  # a square: the fold, then the trial, open
            body = page.locator(f"#trial-{no}-4 .trial-body")
            body.get_by_text("Your order O-1 has shipped.").wait_for(state="visible", timeout=10_000)
            assert page.locator(task).is_visible() and page.locator(f"{task} details.trial").count() == 6
            # opened again by the name filter (its fold of the table), then its task's link
            page.goto(path.as_uri())
            assert page.locator(task).count() == 0
            page.locator("#q").fill("order-st")
            link.wait_for(state="visible", timeout=10_000)
            visible = [r.locator("td a").first.inner_text() for r in table.locator("tbody tr").all() if r.is_visible()]
            assert visible == ["order-status"]  # the rows it listed are filtered as the others
            link.click()
            page.locator(f"{task} h3").wait_for(state="visible", timeout=10_000)
            assert page.locator(f"{task} h3").inner_text() == "order-status"
            assert errors == []
        finally:
            browser.close()


# --------------------------------------------------------------------------- a page of many tasks


@pytest.fixture(scope="module")
def many_tasks_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """360 tasks (the shop's three, each run twice, replicated under 120 ids each), past
    the inline limit: 120 critical tasks that passed, 120 flaky ones (trial 2 fails) and
    120 that passed, in that order; the first 200 critical or flaky ones are in full, the
    other 40 flaky and the 120 passing ones in folds (the real constants, nothing patched)."""
    import dataclasses

    from pytest_sandtable.report.html import TASKS_INLINE, TASKS_PER_BLOCK

    assert (TASKS_INLINE, TASKS_PER_BLOCK) == (200, 100)
    domain = load_domain_text(SHOP, "sandtable.yaml")
    real = [run_trial(domain, task.id, SlippingAgent(), ScriptedUser(), trial=i, k=2, location="sandtable.yaml:1")
            for task in domain.tasks for i in (1, 2)]
    trials = [dataclasses.replace(r, task=f"{r.task}~{n}") for n in range(120) for r in real]
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=2, run_seed=0)
    doc = build_results(trials, meta)
    path = tmp_path_factory.mktemp("many") / "report.html"
    with path.open("w", encoding="utf-8") as fp:
        write_report_html(doc, fp, secrets=(), inline_limit=20_000)
    return path, [dict(t) for t in doc["summary"]["tasks"]]


def test_a_page_of_many_tasks_holds_a_bounded_number_of_rows_and_sections(
        many_tasks_report: tuple[Path, list[dict[str, Any]]]) -> None:
    path, tasks = many_tasks_report
    html = path.read_text(encoding="utf-8")
    assert [t["verdict"] for t in tasks] == ["passed"] * 120 + ["flaky"] * 120 + ["passed"] * 120
    assert [t["critical"] for t in tasks] == [True] * 120 + [False] * 240
    table = html[html.index('<table class="tasks">'):html.index("</table>")]
    assert table.count("<tr data-filterable") == 200 and html.count('<div class="task" id=') == 200
    names = [t["name"] for t in tasks]
    folds = re.findall(r'<details class="group" id="rows-(\d+)-(\d+)" data-g="g\d+" data-rows="\d+-\d+"><summary>'
                       r"(.*?)</summary>", table)
    assert [(a, b) for a, b, _ in folds] == [("201", "240"), ("241", "340"), ("341", "360")]
    assert [label for _, _, label in folds] == [
        f"40 flaky tasks ({names[200]} to {names[239]}, 80 trials), stored compressed",
        f"100 tasks that passed every trial ({names[240]} to {names[339]}, 200 trials), stored compressed",
        f"20 tasks that passed every trial ({names[340]} to {names[359]}, 40 trials), stored compressed",
    ]
    sections = re.findall(r'<details class="group" id="tasks-(\d+)-(\d+)" data-g="g\d+" data-tasks="\d+-\d+" '
                          r'data-filterable data-verdict="(\w+)" data-critical="(\d)"', html)
    assert sections == [("201", "240", "flaky", "0"), ("241", "340", "passed", "0"), ("341", "360", "passed", "0")]
    assert html.count('<tbody class="fold" data-filterable data-verdict="flaky" data-critical="0"') == 1


@needs_chromium
def test_a_page_of_many_tasks_in_a_browser(many_tasks_report: tuple[Path, list[dict[str, Any]]]) -> None:
    """The failing tasks show at once; a task in a fold is found by the name filter or a
    verdict filter and opened from its link, its square or a failure mode's example."""
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    path, tasks = many_tasks_report
    names = [t["name"] for t in tasks]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            assert page.locator("#headline").is_visible()
            table = page.locator("table.tasks")
            assert page.locator("#folded-note").inner_text().startswith("160 of 360 tasks are stored compressed")

            # the first flaky task: its row in the table, its failing trial open in its section, at once
            first_flaky = names[120]
            page.locator('.filters button[data-verdict="flaky"]').click()
            shown = [r for r in table.locator("tbody tr").all() if r.is_visible()]
            assert shown[0].locator("td a").first.inner_text() == first_flaky
            assert len(shown) == 80 + 1  # 80 rows in full and the fold of the other 40
            assert page.locator("#trial-121-2").evaluate("d => d.open") is True
            assert page.locator("#trial-121-2").get_by_text("Sorry.").first.is_visible()

            # a flaky task in a fold: the verdict filter shows its fold; opened, its rows are listed
            fold = table.locator('details[data-rows="201-240"]')
            assert fold.is_visible()
            fold.locator(":scope > summary").click()
            row = table.locator("tbody tr", has=page.get_by_role("link", name=names[230], exact=True))
            row.wait_for(state="visible", timeout=10_000)
            assert table.locator("details[data-rows]").count() == 2
            # its failing trial's square: the task's section fold opens, then the trial
            row.locator('a.dot[href="#trial-231-2"]').click()
            trial = page.locator("#trial-231-2")
            trial.locator(".trial-body li.msg.agent").first.wait_for(state="visible", timeout=10_000)
            assert trial.get_by_text("Sorry.").first.is_visible() and _in_viewport(page, "#trial-231-2")

            # a passing task in a fold, found by name, opened from its link
            page.goto(path.as_uri())
            page.locator("#q").fill(names[300])
            link = table.get_by_role("link", name=names[300], exact=True)
            link.wait_for(state="visible", timeout=10_000)
            visible = [r.locator("td a").first.inner_text() for r in table.locator("tbody tr").all() if r.is_visible()]
            assert names[300] in visible and all(names[300] in v for v in visible)
            link.click()
            section = page.locator("#task-301")
            section.locator("h3").wait_for(state="visible", timeout=10_000)
            assert section.locator("h3").inner_text() == names[300] and _in_viewport(page, "#task-301")
            assert section.locator("details.trial").count() == 2

            # a failure mode's example leads to its trial
            page.goto(path.as_uri())
            example = page.locator("table.modes a").first
            href = example.get_attribute("href")
            assert href is not None and href.startswith("#trial-")
            example.click()
            target = page.locator(href)
            target.locator(".trial-body li.msg.agent").first.wait_for(state="visible", timeout=10_000)
            assert target.evaluate("d => d.open") is True and _in_viewport(page, href)
            assert errors == []
        finally:
            browser.close()


# --------------------------------------------------------------------------- policy coverage


def _coverage_run(out: Path) -> tuple[Any, dict[str, Any]]:
    """A run of the shop's references with its policy coverage (a note planted with
    markup) written to ``out``: the domain and the coverage entry."""
    from pytest_sandtable.policy_coverage import CoverageAccumulator, coverage_json

    domain = load_domain_text(SHOP, "sandtable.yaml")
    trials = [run_trial(domain, task.id, ReferenceAgent(), ScriptedUser(), trial=1, k=1, location="sandtable.yaml:1")
              for task in domain.tasks]
    acc = CoverageAccumulator(domain)
    for t in trials:
        acc.add(t)
    cov = {"domain": "shop", "path": "sandtable.yaml", **coverage_json(acc.result())}
    cov["notes"] = [f"planted {PLANTED_SCRIPT}"]
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="reference", user="scripted", k=1, run_seed=0)
    results = build_results(trials, meta)
    results["coverage"] = [cov]
    write_run(results, out)
    return domain, cov


def test_the_policy_coverage_section_has_a_row_per_rule_and_escapes_its_values(tmp_path: Path) -> None:
    domain, cov = _coverage_run(tmp_path)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.count("<script") == 1 and "<li>not replayed to the end: planted &lt;script&gt;" in html
    section = html[html.index('<section id="policy-coverage">'):]
    section = section[:section.index("</section>")]
    rows = re.findall(r"<tr><td><code>([^<]*)</code></td><td>([^<]*)</td><td>([^<]*)</td>", section)
    assert rows == [(r["id"], r["kind"] + (" (soft)" if r["soft"] else ""), r["level"]) for r in cov["rules"]]
    assert len(rows) == len(domain.invariants) > 0
    assert 'id="policy-coverage"' not in render_report({k: v for k, v in json.loads(
        (tmp_path / "results.json").read_text(encoding="utf-8")).items() if k != "coverage"})


@needs_chromium
def test_the_policy_coverage_section_in_a_browser(tmp_path: Path) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    domain, cov = _coverage_run(tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((tmp_path / "report.html").as_uri())
            section = page.locator("#policy-coverage")
            assert section.locator("h2").inner_text().startswith("Policy coverage")
            rows = section.locator("table.coverage tbody tr")
            assert [r.inner_text().split("\t") for r in rows.all()] == [
                [r["id"], r["kind"] + (" (soft)" if r["soft"] else ""), r["level"], str(r["calls"]),
                 str(r["applied"]), str(r["held"]), str(r["broken"]), str(len(r["tasks"]))]
                for r in cov["rules"]]
            assert rows.count() == len(domain.invariants) > 0
            assert f"not replayed to the end: planted {PLANTED_SCRIPT}" in section.inner_text()
            assert page.evaluate("window.__pwned") is None
            assert errors == []
        finally:
            browser.close()
