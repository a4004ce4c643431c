"""report.html at 20,000 trials: write time, file size, and open time in headless Chromium.

Runs the trials with the real engine, in-process: the freight example's tasks,
``--trials`` trials spread evenly over them, played by its in-house desk agent
(``example_domains/freight/desk_agent.py``; ``--flaw-rate 0.2`` makes about one
trial in ten fail) and the scripted user. Nothing is replicated: every trial is a
real run with its own seed. The document is built with the real writer
(``build_results``), then report.html is written with ``write_report_html``
(transcripts of passing trials compressed past ``INLINE_LIMIT``; wall and CPU time,
and, in a third writing, the memory it allocates, measured with tracemalloc), and once
more with every trial in full (``inline_limit`` past any size: every transcript inline,
as reports were before) for the size ratio.

The page is opened in headless Chromium (``/usr/bin/chromium`` through playwright,
as ``tests/test_html_browser.py`` does): seconds to DOMContentLoaded and to the load
event (from the page's navigation timing), whether the headline figure is visible
then, and the seconds to open one compressed passing trial (click its square in the
tasks table until its transcript shows: its task's fold is listed, then its body
decompressed). The page in full is opened too, with a 60 s limit.

With ``--tasks N --k K`` the run has N tasks of K trials each (as
``benchmarks/bench_big.py``'s 2,500 x 8): the freight example's tasks are run K times
each for real, then their trial records are replicated under N task ids
(``<task>~<n>``), so that the page has as many task sections, squares and folds as a
run of N tasks. The share of the page's bytes each section takes is printed too.

    python benchmarks/bench_report.py [--trials 20000] [--flaw-rate 0.2] [--skip-full-open]
    python benchmarks/bench_report.py --tasks 2500 --k 8 --skip-full-open [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FREIGHT = ROOT / "example_domains" / "freight"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]


def run_trials(trials: int, flaw_rate: float, tasks: int = 0, k: int = 0) -> dict[str, Any]:
    """The results document of ``trials`` real trials of the freight example; with
    ``tasks`` and ``k``, of ``tasks`` tasks of ``k`` trials, replicated from the
    example's tasks run ``k`` times each."""
    import dataclasses

    sys.path.insert(0, str(FREIGHT))
    from desk_agent import DeskAgent  # type: ignore[import-not-found]

    import pytest_sandtable as st
    from pytest_sandtable.report.results_json import RunMeta, build_results

    domain = st.load_domain(FREIGHT / "sandtable.yaml")
    if not (tasks and k):
        k = -(-trials // len(domain.tasks))
    agent, user = DeskAgent(flaw_rate=flaw_rate), st.ScriptedUser()
    t0 = time.perf_counter()
    results = [st.run_trial(domain, task.id, agent, user, trial=i, k=k, agent_name="DeskAgent",
                            user_name="scripted", location=f"sandtable.yaml:{task.pos.line if task.pos else 0}")
               for task in domain.tasks for i in range(1, k + 1)]
    ran = time.perf_counter() - t0
    if tasks and k:  # replicated under varied task ids: the page of a run of `tasks` tasks
        real = results
        results = [dataclasses.replace(r, task=f"{r.task}~{n}") for n in range(-(-tasks // len(domain.tasks)))
                   for r in real][:tasks * k]
    meta = RunMeta(domains=[{"name": domain.name, "path": "sandtable.yaml", "sha256": domain.sha256}],
                   agent="DeskAgent", user="scripted", k=k, run_seed=0)
    doc = build_results(results, meta)
    failed = sum(r.verdict != "passed" for r in results)
    n_tasks = len({r.task for r in results})
    real_note = f" (replicated from {len(domain.tasks) * k:,} real trials)" if tasks and k else ""
    print(f"{len(results):,} trials ({n_tasks:,} tasks x k={k}){real_note} run in {ran:.1f} s; "
          f"{failed:,} did not pass ({failed / len(results):.1%})")
    return dict(doc)


def write(doc: dict[str, Any], path: Path, **options: Any) -> str:
    """Wall and CPU seconds to write report.html to ``path`` with ``write_report_html``
    (CPU time too: a busy machine stretches the wall time)."""
    from pytest_sandtable.report.html import write_report_html

    t0, c0 = time.perf_counter(), time.process_time()
    with path.open("w", encoding="utf-8") as fp:
        write_report_html(doc, fp, secrets=(), **options)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return f"written in {wall:.2f} s ({cpu:.2f} s CPU, {cpu / len(doc['trials']) * 1e6:.0f} µs CPU a trial)"


def peak_mb(doc: dict[str, Any]) -> float:
    """The most memory the writing allocates, beyond the document it is given."""
    import os
    import tracemalloc

    from pytest_sandtable.report.html import write_report_html

    tracemalloc.start()
    with open(os.devnull, "w", encoding="utf-8") as fp:
        write_report_html(doc, fp, secrets=())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def open_times(path: Path, timeout_s: float, open_one: bool) -> str:
    """How long headless Chromium takes to show the page (and to open one compressed trial)."""
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            t0 = time.perf_counter()
            try:
                page.goto(path.as_uri(), wait_until="load", timeout=timeout_s * 1000)
            except Error as exc:
                return f"did not load in {timeout_s:.0f} s ({str(exc).splitlines()[0]})"
            wall = time.perf_counter() - t0
            timing = page.evaluate("(() => { const n = performance.getEntriesByType('navigation')[0];"
                                   " return [n.domContentLoadedEventEnd, n.loadEventEnd]; })()")
            shown = page.locator("#headline").is_visible()
            text = (f"DOMContentLoaded {timing[0] / 1000:.2f} s, load {timing[1] / 1000:.2f} s "
                    f"({wall:.2f} s wall from goto), headline visible: {shown}")
            if open_one:  # the last passing trial's square: its fold is listed, then it is decompressed
                anchor = page.locator("a.dot.v-passed").last.get_attribute("href")
                t1 = time.perf_counter()
                page.locator(f'a.dot[href="{anchor}"]').click()
                page.locator(f"{anchor} .trial-body li.msg").first.wait_for(state="visible", timeout=30_000)
                text += f"; a compressed passing trial opened from its square in {time.perf_counter() - t1:.2f} s"
            return text
        finally:
            browser.close()


def dcl_times(path: Path, repeat: int) -> str:
    """Seconds to DOMContentLoaded over ``repeat`` openings of the page, each in a new page
    of one browser, and their median (one opening varies with the machine's load)."""
    import statistics

    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(path.as_uri(), wait_until="load", timeout=120_000)
                times.append(page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"))
                page.close()
        finally:
            browser.close()
    shown = ", ".join(f"{t / 1000:.2f}" for t in times)
    return f"DOMContentLoaded over {repeat} openings: {shown} s (median {statistics.median(times) / 1000:.2f} s)"


def shares(page: str) -> str:
    """The bytes of the page's parts: each ``<section>`` of ``<main>``, the compressed
    blocks by kind (a task's folded trials ``g``, trial bodies ``z``), and the rest."""
    import re

    parts: dict[str, int] = {}
    for m in re.finditer(r'<section id="([a-z-]+)".*?</section>', page, re.S):
        parts[f"section {m.group(1)}"] = parts.get(f"section {m.group(1)}", 0) + len(m.group(0))
    for m in re.finditer(r'<script type="application/octet-stream" id="([a-z]+)[0-9]+">[^<]*</script>', page):
        parts[f"blocks {m.group(1)}"] = parts.get(f"blocks {m.group(1)}", 0) + len(m.group(0))
    parts["rest"] = len(page) - sum(parts.values())
    counts = {kind: page.count(f'<script type="application/octet-stream" id="{kind}') for kind in "gz"}
    return ", ".join(f"{name} {n / 1e6:.2f} MB ({n / len(page):.0%})" for name, n in parts.items()) + (
        f"; {counts['g']:,} g blocks, {counts['z']:,} z blocks, {page.count('<'):,} tags")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--flaw-rate", type=float, default=0.2)
    ap.add_argument("--tasks", type=int, default=0, help="tasks of the run (with --k): replicated trial records")
    ap.add_argument("--k", type=int, default=0, help="trials a task (with --tasks)")
    ap.add_argument("--skip-full-open", action="store_true", help="do not open the page with every trial in full")
    ap.add_argument("--repeat", type=int, default=1, help="open the page this many times more (median)")
    args = ap.parse_args()
    doc = run_trials(args.trials, args.flaw_rate, args.tasks, args.k)
    with tempfile.TemporaryDirectory() as tmp:
        small, full = Path(tmp) / "report.html", Path(tmp) / "full.html"
        took = write(doc, small)
        size = small.stat().st_size
        print(f"report.html: {size / 1e6:.1f} MB, {took}")
        print(f"  parts: {shares(small.read_text(encoding='utf-8'))}")
        print(f"  opened: {open_times(small, 60, open_one=True)}")
        if args.repeat > 1:
            print(f"  {dcl_times(small, args.repeat)}")
        took_full = write(doc, full, inline_limit=10**15)
        size_full = full.stat().st_size
        print(f"every trial in full: {size_full / 1e6:.1f} MB, {took_full}; ratio {size_full / size:.1f}x the size")
        if not args.skip_full_open:
            print(f"  opened: {open_times(full, 60, open_one=False)}")
        print(f"memory allocated while writing report.html (tracemalloc peak): {peak_mb(doc):.1f} MB")
        buf = io.StringIO()  # render_report's string, to check that it is the same page
        from pytest_sandtable.report.html import render_report

        buf.write(render_report(doc))
        assert buf.getvalue() == small.read_text(encoding="utf-8"), "render_report and write_report_html differ"


if __name__ == "__main__":
    main()
