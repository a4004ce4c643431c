"""report.html's viewer: a compressed trial is stored as data and laid out by the page's
script, and it shows what the same trial shows when Python renders it in full.

Every trial below is written twice: in a page with every trial in full (Python's HTML)
and in one with every trial compressed (its data, laid out by the page's script); in
headless Chromium each trial's body must be the same DOM in both, element for element
(their ``innerHTML``)."""

from __future__ import annotations

import base64
import copy
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from test_html_browser import BROWSER_ARGS, CHROMIUM, _playwright, needs_chromium

from pytest_sandtable.engine.results import TrialResult
from pytest_sandtable.report.html import write_report_html
from pytest_sandtable.report.results_json import RunMeta, build_results

KEY = "sk-ant-fake-viewer-0123456789abcdef"
PLANTED = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script> &amp; "q" \'s\''


def _call(i: int, turn: int, tool: str, args: dict[str, Any], result: Any = None, *, ok: bool = True,
          error: dict[str, Any] | None = None, fault: dict[str, Any] | None = None,
          by: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": i, "turn": turn, "tool": tool, "args": args, "ok": ok,
                            "result": result if ok else None, "error": error, "violations": []}
    if fault:
        call["fault"] = fault
    if by:
        call["by"] = by
    return call


def _trial(n: int, verdict: str = "passed", **fields: Any) -> dict[str, Any]:
    t: dict[str, Any] = {
        "domain": "shop", "task": "viewer", "trial": n, "k": 12, "seed": n, "verdict": verdict, "tags": [],
        "critical": False, "error": None, "ended_by": "script_end", "turns": 1, "agent": "desk", "user": "scripted",
        "transcript": [{"role": "user", "turn": 0, "text": "hello"}, {"role": "agent", "turn": 1, "text": "hi"}],
        "calls": [], "checks": [{"kind": "reply", "id": "reply:ok", "passed": verdict == "passed", "detail": ""}],
        "violations": [], "diff": {"created": [], "changed": []}, "usage": {"agent": {}, "user": {}},
        "latency": [0.0012], "duration": 0.01, "location": "sandtable.yaml:7", "traceback": None, "soft": {},
        "shared_tags": [], "pending": [], "attribution": None,
    }
    t.update(fields)
    return t


def _trials() -> list[dict[str, Any]]:
    rows = [{"id": f"R-{i}", "note": "ünïcödé ✓ 🚚", "n": i, "x": i / 3} for i in range(6)]
    calls = [
        _call(0, 1, "lookup", {"id": "R-1", "n": 1, "f": 1.0, "big": 2**60, "none": None}, {"id": "R-1", "ok": True}),
        _call(1, 1, "search", {"q": PLANTED}, rows),  # long: a row a line when opened
        _call(2, 1, "detail", {}, {f"k{i}": PLANTED for i in range(6)}),  # a long object
        _call(3, 1, "note", {}, "n" * 300),  # a long string
        _call(4, 1, "book", {"id": "R-1"}, ok=False, error={"code": 504, "message": "timed out " + PLANTED},
              fault={"fault": 1, "kind": "timeout", "latency_ms": 30, "after_commit": True, "landed": False}),
        _call(5, 1, "odd", {"k": [1, 2]}, {"1": "a", "2": [1.5, None, True]}),
    ]
    chat = [{"role": "user", "turn": 0, "text": f"{PLANTED}\r\nline two\rthree\0four 🚚 مرحبا e\u0301"}]
    chat += [{"role": "tool", "turn": 1, "call": i} for i in range(len(calls))]
    chat += [{"role": "tool", "turn": 1, "call": 9},  # a call the calls do not hold
             {"role": "event", "event": 1, "after_call": 1, "op": "update", "table": "loads", "key": "L-1",
              "values": {"status": "booked"}},
             {"role": "agent", "turn": 1, "text": f"your key {KEY} is safe \u2028 done"}, {"role": "agent", "turn": 2,
                                                                                     "text": ""}]
    violations = [
        {"invariant": "no-book-twice", "kind": "before", "soft": False, "detail": "booked " + PLANTED, "turn": 1,
         "call": 4, "quote": "Never book a load twice"},
        {"invariant": "tone", "kind": "never_disclose", "soft": True, "detail": "said the key", "turn": 1,
         "call": None, "quote": ""},
    ]
    diff = {"created": [{"table": "bookings", "key": "B-1", "row": {"load": "L-1", "rate": 1800.0, "who": PLANTED}}],
            "changed": [{"table": "loads", "key": "L-1", "fields": {"status": {"before": "open", "after": "booked"},
                                                                     "rate": {"before": 1, "after": 2.5}}}],
            "deleted": [{"table": "offers", "key": 7, "row": {"id": 7}}]}
    long_chat = [{"role": "user" if i % 2 else "agent", "turn": i, "text": f"line {i}"} for i in range(450)]
    many_soft = [{"invariant": f"soft-{i}", "kind": "never", "soft": True, "detail": f"d{i}", "turn": 1, "call": None,
                  "quote": None} for i in range(420)]
    hidden_rule = [{"invariant": "hard-hidden", "kind": "never", "soft": False, "detail": "in a hidden turn",
                    "turn": 100, "call": None, "quote": None}]
    many_changes = {"created": [{"table": "t", "key": i, "row": {"v": i}} for i in range(410)], "changed": []}
    # dual control (issue 22): calls by the user, a setup step, history and sync; a check of a kind the
    # task's basis leaves out, failed and passed; the user's own world changed (past the entry limit)
    dual_calls = [
        _call(0, 0, "reset_line", {"line": PLANTED}, {"ok": True}, by="setup"),
        _call(1, 0, "past_order", {}, "done", by="history"),
        _call(2, 1, "toggle_data", {"on": True}, {"data": PLANTED}, by="user"),
        _call(3, 1, "reboot", {}, ok=False, error={"code": 409, "message": "busy " + PLANTED}, by="user",
              fault={"fault": 1, "kind": "error", "latency_ms": 0, "after_commit": False, "landed": False}),
        _call(4, 1, "sync", {}, {"created": [], "changed": []}, by="sync"),
        _call(5, 2, "check_line", {"line": "L-1"}, {"status": "active"}),
    ]
    dual_chat = [{"role": "user", "turn": 0, "text": "my phone has no data"}]
    dual_chat += [{"role": "tool", "turn": 1, "call": i} for i in range(len(dual_calls))]
    dual_chat += [{"role": "agent", "turn": 2, "text": "it works now"}]
    dual_violations = [  # a rule broken at a setup call and at a user's call (not marked on it: listed after)
        {"invariant": "setup-rule", "kind": "before", "soft": False, "detail": "at setup " + PLANTED, "turn": 0,
         "call": 0, "quote": "Setup first"},
        {"invariant": "user-rule", "kind": "before", "soft": False, "detail": "at the user's call", "turn": 1,
         "call": 2, "quote": None},
    ]
    user_world = {"created": [{"table": "apps", "key": i, "row": {"app": f"a{i}"}} for i in range(405)],
                  "changed": [{"table": "phone", "key": "P-1", "fields": {"data": {"before": False, "after": True},
                                                                          "who": {"before": "", "after": PLANTED}}}]}
    dual_checks = [{"kind": "state", "id": "state:line", "passed": False, "detail": "line " + PLANTED},
                   {"kind": "reply", "id": "reply:said", "passed": False, "detail": "never said " + PLANTED,
                    "counted": False},
                   {"kind": "called", "id": "called:toggle", "passed": True, "detail": "", "counted": False},
                   {"kind": "state", "id": "state:phone", "passed": True, "detail": ""}]
    return [
        _trial(1, "failed", calls=calls, transcript=chat, violations=violations, diff=diff, turns=2,
               checks=[{"kind": "state", "id": "state:x", "passed": False, "detail": PLANTED},
                       {"kind": "reply", "id": "reply:ok", "passed": True, "detail": ""}],
               attribution={"owner": "agent", "evidence": "it booked " + PLANTED}),
        _trial(2, "errored", error="RuntimeError: boom " + PLANTED, ended_by="agent_error",
               traceback="\nTraceback (most recent call last):\n  File \"desk.py\", line 3\nRuntimeError: boom",
               transcript=[], checks=[], latency=[], location=""),
        _trial(3, "passed", error="usage: a field could not be written"),
        _trial(4, "failed", transcript=long_chat, violations=many_soft + hidden_rule, diff=many_changes),
        _trial(5, "passed", diff={"created": [], "changed": []}),
        _trial(6, "failed", calls=dual_calls, transcript=dual_chat, violations=dual_violations, checks=dual_checks,
               turns=2, diff={"created": [], "changed": [{"table": "lines", "key": "L-1",
                                                          "fields": {"status": {"before": "off", "after": "on"}}}],
                              "user": user_world}),
        _trial(7, "passed", diff={"created": [], "changed": [], "user": {"created": [], "changed": []}},
               checks=[{"kind": "reply", "id": "reply:ok", "passed": False, "detail": "left out", "counted": False}]),
    ]


def _doc() -> dict[str, Any]:
    trials = _trials()
    meta = RunMeta(domains=[{"name": "shop", "path": "sandtable.yaml", "sha256": "0" * 64}], agent="desk",
                   user="scripted", k=12, run_seed=0)
    doc = dict(build_results([TrialResult.from_dict(copy.deepcopy(t)) for t in trials], meta))
    doc["trials"] = trials  # as given: a document written elsewhere may hold anything the schema allows
    return doc


def _pages(tmp_path: Path) -> tuple[Path, Path]:
    doc = _doc()
    full, compressed = tmp_path / "full.html", tmp_path / "compressed.html"
    with full.open("w", encoding="utf-8") as fp:
        write_report_html(doc, fp, secrets=[KEY], inline_limit=10**15)
    with compressed.open("w", encoding="utf-8") as fp:
        write_report_html(doc, fp, secrets=[KEY], inline_limit=0)
    return full, compressed


def _z_blocks(html: str) -> list[Any]:
    found = re.findall(r'<script type="application/octet-stream" id="(z\d+)">([A-Za-z0-9+/=]*)</script>', html)
    return [json.loads(zlib.decompress(base64.b64decode(data), 31)) for _, data in found]


def test_a_compressed_trial_is_data_not_markup(tmp_path: Path) -> None:
    full, compressed = _pages(tmp_path)
    html = compressed.read_text(encoding="utf-8")
    assert _z_blocks(full.read_text(encoding="utf-8")) == []
    items = [item for block in _z_blocks(html) for item in block]
    assert len(items) == 7 and all(isinstance(item, dict) for item in items)  # every trial compressed
    text = json.dumps(items, ensure_ascii=False)
    assert "<li" not in text and "<code" not in text and "&lt;" not in text  # no HTML: the page's script lays it out
    assert KEY not in html and KEY not in text and "your key [redacted] is safe" in text
    # a long result is its items, each once: the flat line and the opened text are joined from them
    first = items[0]["chat"]
    search = next(x for x in first if x[0] == "call" and x[2] == "search")
    assert search[4][0] == "l" and search[4][2] == "[" and len(search[4][3]) == 6


@needs_chromium
def test_a_compressed_trial_shows_what_the_trial_in_full_shows(tmp_path: Path) -> None:
    sync_playwright = _playwright()
    if sync_playwright is None:
        pytest.skip("playwright is not installed")
    from playwright.sync_api import expect

    full, compressed = _pages(tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(full.as_uri())
            bodies = "() => Object.fromEntries([...document.querySelectorAll('details.trial')].map(d => " \
                     "[d.id, d.querySelector('.trial-body').innerHTML]))"
            in_full = page.evaluate(bodies)
            assert len(in_full) == 7
            _dual_control_shown(in_full)
            page.goto(compressed.as_uri())
            assert page.locator("details.trial").count() == 0  # listed in their task's folds
            page.locator("details.group > summary").first.click()
            page.locator("details.group > summary").last.click()
            page.locator("details.trial").nth(6).wait_for(state="attached", timeout=10_000)
            page.evaluate("document.querySelectorAll('details.trial').forEach(d => { d.open = true; })")
            # (not wait_for_function: it evaluates a string, which the page's CSP refuses)
            expect(page.locator("details.trial .trial-body.lazy")).to_have_count(0, timeout=10_000)
            opened = page.evaluate(bodies)
            assert sorted(opened) == sorted(in_full)
            for anchor, body in in_full.items():
                assert opened[anchor] == body, anchor
            # what the planted markup in the data is: text
            user = page.locator("details.trial li.msg.user .text").first  # trial 1's, failed: listed first
            assert user.inner_text().startswith('<img src=x onerror="window.__pwned=1"></script>')
            assert page.evaluate("typeof window.__pwned") == "undefined" and page.locator("img").count() == 0
            assert errors == [] and requests == [full.as_uri(), compressed.as_uri()]  # no request of their own
        finally:
            browser.close()


def _dual_control_shown(bodies: dict[str, str]) -> None:
    """The trials in full show dual control's four things as the page's markup has them
    (issue 22), so that the compressed trials must show them too."""
    six, seven = (next(body for anchor, body in bodies.items() if anchor.endswith(f"-{n}")) for n in (6, 7))
    assert '<li class="call ok by-user"><span class="who">user called</span><div class="body"><code class="sig">' \
           "<b>toggle_data</b>" in six
    assert '<li class="call err by-user"><span class="who">user called</span>' in six
    assert six.count("by-user") == 2 and six.count('class="viol hard"') == 2  # the user's rule: after, not on it
    assert '<li class="call ok"><span class="who">tool · setup</span>' in six
    assert '<span class="who">tool · history</span>' in six and '<span class="who">tool · sync</span>' in six
    assert '<li class="call ok"><span class="who">tool</span><div class="body"><code class="sig"><b>check_line' in six
    counted, uncounted = six.split("<h4>Failed checks, not counted</h4>")
    assert "state:line" in counted and "reply:said" not in counted
    assert uncounted.startswith('<p class="muted small">of kinds the task\'s basis leaves out: they never fail '
                                "the trial</p>")
    assert six.count('<span class="muted">not counted</span>') == 2  # a failed and a passed uncounted check
    world, user = six.split("<h4>User world diff</h4>")
    assert "lines" in world and "apps" not in world and "phone" in user
    assert '<p class="muted small">… [not shown: 6 of 406 world changes; results.json holds every one]</p>' in user
    assert "<h4>User world diff</h4>" in seven and "Failed checks, not counted" in seven
    assert "<h4>Failed checks</h4>" not in seven
