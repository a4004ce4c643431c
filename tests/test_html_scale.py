"""Artefacts stay bounded whatever a trial holds or however many trials a run has
(issue 13): a 10 MB tool argument and a 5 MB reply are clipped with their size in
results.json, report.html and the terminal; a trial of 100,000 tool calls is kept
whole in results.json and shown by its start and end in report.html and the terminal;
and a big run's report.html holds its passing trials compressed, its failing ones
first and in full (docs/results.md, "Size caps" and "report.html")."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import re
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from pytest_sandtable.engine.results import Check, TrialResult
from pytest_sandtable.report.html import DOTS_SHOWN, INLINE_PER_TASK, chosen_js, render_report, write_report_html
from pytest_sandtable.report.results_json import REPORT_FILE, RESULTS_FILE, RunMeta, build_results
from pytest_sandtable.report.safe import ENTRY_LIMIT, TEXT_LIMIT, not_shown, shown_items, storable_trial

sys.path.insert(0, str(Path(__file__).parent))
from _sandtable_shop import PLUGIN_ARGS, only_results, run_dirs

pytest_plugins = ["pytester"]

DOMAIN = """\
version: 1
name: notes
description: A fictional notice board.
policy: Read the note the caller asks for.
world:
  notes:
    key: id
    rows:
      - { id: n-1, text: hello }
tools:
  - name: read_note
    description: Read a note.
    params: { id: { type: string } }
    ops:
      - get: { table: notes, key: $id }
tasks:
  - id: big-values
    user: { opening: "Read note n-1 please." }
    expect:
      reply_includes: ["hello"]
  - id: many-calls
    max_turns: 1000
    user: { opening: "Read note n-1 please." }
    expect:
      reply_includes: ["goodbye"]
"""

# module:attr agents and a user that never stops talking
AGENTS = """\
BIG_ARG = "x" * (10 * 1024 * 1024)
BIG_REPLY = "Sorry " + "y" * (5 * 1024 * 1024)


def huge(turn):
    turn.call_tool("read_note", {"id": BIG_ARG})
    return BIG_REPLY


def busy(turn):
    # 100 calls a turn, the most the engine allows; at the 1,000th turn one more, which
    # fails the trial as the agent's own fault
    turn.state["turn"] = turn.state.get("turn", 0) + 1
    for _ in range(100 if turn.state["turn"] < 1000 else 101):
        turn.call_tool("read_note", {"id": "n-1"})
    return "Read it again."


def chatty(turn):
    return "Once more, please."
"""

MB = 1024 * 1024


@pytest.fixture(autouse=True)
def _no_keys_but_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets of the machine running the tests would be redacted in the texts compared."""
    for name in list(os.environ):
        if name.upper().endswith(("_API_KEY", "_TOKEN", "_SECRET")):
            monkeypatch.delenv(name)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    pytester.path.joinpath("sandtable.yaml").write_text(DOMAIN, encoding="utf-8")
    pytester.path.joinpath("scale_agents.py").write_text(AGENTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(pytester.path))
    return pytester


def _files(root: Path) -> tuple[int, int, str]:
    (folder,) = run_dirs(root)
    html = (folder / REPORT_FILE).read_text(encoding="utf-8")
    return (folder / RESULTS_FILE).stat().st_size, (folder / REPORT_FILE).stat().st_size, html


def _clipped(fill: str, marker: str) -> str:
    return (fill * TEXT_LIMIT)[: TEXT_LIMIT - len(marker)] + marker


# --------------------------------------------------------------------------- big values


def test_a_10_mb_argument_and_a_5_mb_reply_are_clipped_with_their_size_in_every_artefact(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest_subprocess(*PLUGIN_ARGS, "-k", "big-values", "--sandtable-k=3",
                                          "--sandtable-agent=scale_agents:huge")
    result.assert_outcomes(failed=3, deselected=3)
    results_size, report_size, html = _files(project.path)
    terminal = result.stdout.str()
    # each trial held 15 MB; each value is now 20,000 characters wherever it shows (the
    # argument twice: the call and the error quoting it)
    assert results_size < 3 * 80_000, results_size
    assert report_size < 3 * 80_000 + 60_000, report_size
    assert len(terminal.encode()) < 3 * 80_000, len(terminal)

    arg = _clipped("x", "… [clipped: 10,485,760 characters]")
    reply = "Sorry " + _clipped("y", "… [clipped: 5,242,886 characters]")[6:]
    assert len(reply) == TEXT_LIMIT
    trial = only_results(project.path)["trials"][0]
    assert trial["calls"][0]["args"] == {"id": arg}
    assert trial["transcript"][-1]["text"] == reply
    assert f"<b>read_note</b>(id=&quot;{arg}&quot;)</code>" in html
    assert f'<div class="text">{reply}</div>' in html
    assert f'[1] agent -> read_note(id="{arg}")' in terminal
    assert f"[1] agent: {reply}" in terminal
    assert terminal.count("… [clipped: 5,242,886 characters]") == 3


# --------------------------------------------------------------------------- 100,000 tool calls


def test_a_trial_of_100_000_tool_calls_is_kept_whole_in_results_json_and_shown_by_its_ends(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest_subprocess(*PLUGIN_ARGS, "-k", "many-calls", "--sandtable-k=1",
                                          "--sandtable-agent=scale_agents:busy", "--sandtable-user=scale_agents:chatty",
                                          timeout=300)
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["  runtime  runtime * the agent made more than 100 tool calls in one turn"])
    results_size, report_size, html = _files(project.path)
    trial = only_results(project.path)["trials"][0]
    assert trial["ended_by"] == "agent_error" and len(trial["calls"]) == 100_000
    entries = len(trial["transcript"])
    assert entries == 100_000 + 1000 + 999  # the calls, what the user said and the agent's replies but the last
    marker = f"… [not shown: {entries - ENTRY_LIMIT:,} of {entries:,} transcript entries; results.json holds every one]"
    assert results_size < 25 * MB, results_size  # every call (about 20 MB), each within the caps
    assert report_size < 200_000, report_size  # 400 entries of 101,999 (about 120 kB)
    # shown: the first 300 entries (user, 100 calls, agent, user, 100 calls, agent, user, 95 calls)
    # and the last 100 (the last 100 calls: the agent's last turn ended in an error)
    calls_shown = 100 + 100 + 95 + 100
    chat = html[html.index('<ol class="chat">'):html.index("</ol>", html.index('<ol class="chat">'))]
    assert chat.count("<li ") == ENTRY_LIMIT + 1  # the first 300, the marker, the last 100
    assert chat.count('<li class="call ok">') == calls_shown
    assert f'<div class="body muted">{marker}</div>' in chat
    terminal = result.stdout.str()
    assert terminal.count(f"        {marker}") == 1
    assert terminal.count("] agent -> read_note(") == calls_shown
    assert len(terminal.encode()) < 200_000, len(terminal)


# --------------------------------------------------------------------------- a big run's report


def _trial(task: str, i: int, verdict: str, text: str = "") -> TrialResult:
    said = text or f"{task} trial {i} said {verdict}"
    return TrialResult(
        domain="shop", task=task, trial=i, k=40, seed=i, verdict=verdict, agent="a", user="u", turns=1,
        location="sandtable.yaml:1", latency=[0.01],
        transcript=[{"role": "user", "turn": 1, "text": "hello"}, {"role": "agent", "turn": 1, "text": said}],
        checks=[Check("reply", "reply:ok", verdict == "passed", "" if verdict == "passed" else "no")])


def _big_run(fails: dict[str, set[int]], k: int = 40) -> dict[str, Any]:
    trials = [_trial(task, i, "failed" if i in bad else "passed") for task, bad in fails.items()
              for i in range(1, k + 1)]
    meta = RunMeta(domains=[], agent="a", user="u", k=k, run_seed=0)
    return dict(build_results(trials, meta))


def _blocks(html: str) -> dict[str, list[Any]]:
    """The page's compressed blocks, decoded as the page's script decodes them."""
    found = re.findall(r'<script type="application/octet-stream" id="([^"]+)">([A-Za-z0-9+/=]*)</script>', html)
    return {ref: json.loads(zlib.decompress(base64.b64decode(data), 31)) for ref, data in found}


def _text(item: Any) -> str:
    """An item of a block as text: a line of HTML, or a compressed trial's data as JSON."""
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)


def test_past_the_limit_passing_trials_are_compressed_and_failing_ones_shown_first_in_full() -> None:
    doc = _big_run({"alpha": {3, 7, 9, 12, 30}, "beta": set()})
    small = render_report(doc)
    assert ' data-z="' not in small and 'class="group" id="task-' not in small  # under the limit: all in full
    assert small.count('<details class="trial') == 80

    class Stream:  # any text stream will do; each piece is written as it is rendered
        def __init__(self) -> None:
            self.pieces: list[str] = []

        def write(self, text: str) -> int:
            self.pieces.append(text)
            return len(text)

    out = Stream()
    write_report_html(doc, out, secrets=(), inline_limit=5_000)
    html = "".join(out.pieces)
    assert len(out.pieces) > 10 and max(map(len, out.pieces)) < 60_000
    alpha = html[html.index('id="task-1"'):html.index('id="task-2"')]
    # failing first, in trial order: the first INLINE_PER_TASK in full and open, then a fold for the
    # other failing ones and one for the passing ones, each listing its trials from a block of its own,
    # each trial's body in a block of bodies
    opened = re.findall(r'<details class="trial v-failed" id="trial-1-(\d+)" open>', alpha)
    assert [int(n) for n in opened] == [3, 7, 9][:INLINE_PER_TASK]
    assert "alpha trial 3 said failed" in alpha and "alpha trial 12 said failed" not in alpha
    assert alpha.count("<details") == INLINE_PER_TASK * 2 + 2  # each open trial holds a fold of its checks
    more = re.search(r'<details class="group" id="task-1-more" data-g="(g\d+)"><summary>2 more trials, '
                     r"stored compressed</summary>", alpha)
    passed = re.search(r'<details class="group" id="task-1-passed" data-g="(g\d+)"><summary>35 passed trials, '
                       r"stored compressed</summary>", alpha)
    assert more is not None and passed is not None and more.start() < passed.start()
    blocks = _blocks(html)
    listed = re.findall(r'<details class="trial v-failed" id="trial-1-(\d+)" data-z="(z\d+)\.(\d+)">',
                        "".join(blocks[more.group(1)]))
    assert [int(n) for n, _, _ in listed] == [12, 30]
    assert "alpha trial 12 said failed" in _text(blocks[listed[0][1]][int(listed[0][2])])
    lines = "".join(blocks[passed.group(1)])
    assert re.findall(r'id="trial-1-(\d+)" data-z', lines) == [str(i) for i in range(1, 41) if i not in
                                                                {3, 7, 9, 12, 30}]
    note = re.search(r'<p class="muted small" id="compressed-note">(.*?)</p>', html)
    assert note is not None and note.group(1) == (
        "77 of 80 trials are stored compressed in this page to keep it quick to open; opening them needs "
        "JavaScript (results.json holds every trial). Failing and errored trials are listed first in their task "
        f"and shown in full, up to {INLINE_PER_TASK} a task.")


def test_the_tasks_table_shows_a_bounded_number_of_squares_and_the_chart_a_bounded_number_of_js() -> None:
    k = 300
    fails = {"alpha": set(range(1, k + 1, 10))}
    html = render_report(_big_run(fails, k=k))
    row = html[html.index('<table class="tasks">'):html.index("</table>", html.index('<table class="tasks">'))]
    squares = re.findall(r'<a class="dot v-(\w+)" href="#trial-1-(\d+)"', row)
    assert len(squares) == DOTS_SHOWN
    assert [int(n) for v, n in squares if v == "failed"] == list(range(1, k + 1, 10))  # every failure has its square
    shown = [int(n) for _, n in squares]
    assert shown == sorted(shown) and shown[:12] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]  # in trial order
    assert '<span class="muted small">+100 more: 100 passed</span>' in row
    assert chosen_js([str(j) for j in range(1, k + 1)]) == ["1", "2", "4", "8", "16", "32", "64", "128", "256", "300"]
    assert chosen_js(["1", "2", "3"]) == ["1", "2", "3"]
    chart = html[html.index("<svg"):html.index("</svg>")]
    assert chart.count("<circle") == 10
    scores = html[html.index('<section id="tags"'):html.index("</section>", html.index('<section id="tags"'))]
    assert re.findall(r"<th>pass\^(\d+)</th>", scores.split('id="every-j"')[0]) == chosen_js(
        [str(j) for j in range(1, k + 1)])
    ref = re.search(r'<details class="group" id="every-j" data-g="(g\d+)"><summary>pass\^j and pass@j for every j '
                    r"from 1 to 300 \(300 columns\), stored compressed</summary>", scores)
    assert ref is not None
    (full,) = _blocks(html)[ref.group(1)]
    assert re.findall(r"<th>pass\^(\d+)</th>", full) == [str(j) for j in range(1, k + 1)]


# --------------------------------------------------------------------------- the caps' helpers


def test_a_long_list_is_shown_by_its_start_and_end_with_a_count_of_the_rest() -> None:
    assert shown_items(list(range(ENTRY_LIMIT))) == (list(range(ENTRY_LIMIT)), 0, ())
    first, hidden, last = shown_items(list(range(1000)))
    assert (list(first), hidden, list(last)) == (list(range(300)), 600, list(range(900, 1000)))
    assert not_shown(600, 1000, "transcript entries") == (
        "… [not shown: 600 of 1,000 transcript entries; results.json holds every one]")


def test_small_calls_are_kept_as_they_are_and_big_ones_clipped() -> None:
    small = {"index": 0, "turn": 1, "tool": "t", "args": {"id": "n-1"}, "ok": True, "result": {"a": [1, 2]},
             "error": None, "violations": []}
    big = dict(small, args={"id": "x" * 30_000, "n": 1}, result=["y"] * 10_000)
    stored = storable_trial({"calls": [small, big], "transcript": [{"role": "user", "turn": 1, "text": "z" * 30_000}]})
    assert stored["calls"][0] == small
    assert stored["calls"][1]["args"] == {"id": _clipped("x", "… [clipped: 30,000 characters]"), "n": 1}
    assert stored["calls"][1]["result"].endswith("… [clipped: 50,000 characters of JSON]")
    assert stored["transcript"][0]["text"].endswith("… [clipped: 30,000 characters]")


def test_compressed_trials_hold_no_secret_and_no_lone_surrogate() -> None:
    key = "sk-ant-fake-0123456789abcdef"
    trials = [_trial("alpha", i, "passed", text=f"the key is {key} \ud800 here") for i in range(1, 41)]
    doc = dict(build_results(trials, RunMeta(domains=[], agent="a", user="u", k=40, run_seed=0)))
    out = io.StringIO()
    write_report_html(doc, out, secrets=[key], inline_limit=5_000)
    html = out.getvalue()
    bodies = "".join(_text(item) for items in _blocks(html).values() for item in items)
    assert key not in html and key not in bodies
    assert bodies.count("the key is [redacted] \ufffd here") == 40
    html.encode("utf-8")  # nothing UTF-8 cannot hold


def test_a_document_written_elsewhere_is_shown_within_the_caps() -> None:
    """report and merge read any valid results.json: its values are clipped when shown."""
    doc = _big_run({"alpha": {1}}, k=2)
    doc["trials"][0]["transcript"][1]["text"] = "w" * MB
    doc["trials"][0]["calls"] = [{"index": 0, "turn": 1, "tool": "t", "args": {"id": "v" * MB}, "ok": False,
                                  "result": None, "error": {"code": 404, "message": "no"}, "violations": []}]
    doc["trials"][0]["transcript"].append({"role": "tool", "turn": 1, "call": 0})
    html = render_report(doc)
    assert len(html) < 100_000
    assert f'<div class="text">{_clipped("w", "… [clipped: 1,048,576 characters]")}</div>' in html
    assert f"<b>t</b>(id=&quot;{_clipped('v', '… [clipped: 1,048,576 characters]')}&quot;)</code>" in html


def test_with_many_tasks_the_sections_of_tasks_that_passed_every_trial_are_stored_compressed_together(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_sandtable.report.html as page

    monkeypatch.setattr(page, "TASKS_INLINE", 3)  # 6 tasks count as many; 2 passing tasks' sections a block
    monkeypatch.setattr(page, "TASKS_PER_BLOCK", 2)
    doc = _big_run({f"t{i}": ({2, 3} if i == 2 else set()) for i in range(6)}, k=4)
    assert [(t["task"], t["verdict"]) for t in doc["summary"]["tasks"]][:2] == [("t2", "flaky"), ("t0", "passed")]
    under = render_report(doc)  # under the inline limit: every task's section in the page, every trial in full
    assert "data-tasks=" not in under and under.count('<div class="task" id=') == 6
    out = io.StringIO()
    write_report_html(doc, out, secrets=(), inline_limit=3_000)
    html = out.getvalue()
    trials = html[html.index('<section id="trials">'):html.index("</section>", html.index('<section id="trials">'))]
    # the flaky task stays in full: its first failing trial open (one a task, with many tasks), the other folded
    flaky = trials[trials.index('<div class="task" id="task-1"'):trials.index('<details class="group" id="tasks-2-3"')]
    assert re.findall(r'<details class="trial v-failed" id="trial-1-(\d+)" open>', flaky) == ["2"]
    assert "t2 trial 2 said failed" in flaky
    # (g1 to g3: the folds of the tasks table, written before the trials)
    assert '<details class="group" id="task-1-more" data-g="g4"><summary>1 more trial, stored compressed' in flaky
    assert "up to 1 a task." in html
    # the passing tasks: no section in the page, one fold per 2 of them, in place of the first
    assert re.findall(r'<div class="task" id="task-(\d+)"', trials) == ["1"]
    folds = re.findall(r'<details class="group" id="(tasks-\d+-\d+)" data-g="(g\d+)" data-tasks="(\d+-\d+)" '
                       r'data-filterable data-verdict="passed" data-critical="0" data-name="([^"]*)"><summary>'
                       r"(.*?)</summary><div class=\"group-body lazy\"></div></details>", trials)
    assert [(f[0], f[2], f[3], f[4]) for f in folds] == [
        ("tasks-2-3", "2-3", "t0  t1 ", "2 tasks that passed every trial (t0 to t1, 8 trials), stored compressed"),
        ("tasks-4-5", "4-5", "t3  t4 ", "2 tasks that passed every trial (t3 to t4, 8 trials), stored compressed"),
        ("tasks-6-6", "6-6", "t5 ", "1 task that passed every trial (t5, 4 trials), stored compressed"),
    ]
    blocks = _blocks(html)
    first = blocks[folds[0][1]]  # each task's section in full, every trial listed, its body in a block of bodies
    assert [re.findall(r'^<div class="task" id="(task-\d+)"', s) for s in first] == [["task-2"], ["task-3"]]
    listed = re.findall(r'<details class="trial v-passed" id="trial-2-(\d+)" data-z="(z\d+)\.(\d+)">', first[0])
    assert [n for n, _, _ in listed] == ["1", "2", "3", "4"] and 'class="group"' not in first[0]
    assert "t0 trial 3 said passed" in _text(blocks[listed[2][1]][int(listed[2][2])])
    # the tasks table: the flaky task's row in full, the passing tasks' rows in the same folds
    table = html[html.index('<table class="tasks">'):html.index("</table>")]
    assert re.findall(r"<tr (data-filterable[^>]*)>", table) == [
        'data-filterable data-verdict="flaky" data-critical="0" data-name="t2 "']
    assert table.count('<a class="dot ') == 4
    rows = re.findall(r'<tbody class="fold" ([^>]*)><tr><td colspan="6"><details class="group" id="(rows-\d+-\d+)" '
                      r'data-g="(g\d+)" data-rows="(\d+-\d+)"><summary>(.*?)</summary>'
                      r'<div class="group-body lazy"></div></details></td></tr></tbody>', table)
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [
        ('data-filterable data-verdict="passed" data-critical="0" data-name="t0  t1 "', "rows-2-3", "2-3",
         "2 tasks that passed every trial (t0 to t1, 8 trials), stored compressed"),
        ('data-filterable data-verdict="passed" data-critical="0" data-name="t3  t4 "', "rows-4-5", "4-5",
         "2 tasks that passed every trial (t3 to t4, 8 trials), stored compressed"),
        ('data-filterable data-verdict="passed" data-critical="0" data-name="t5 "', "rows-6-6", "6-6",
         "1 task that passed every trial (t5, 4 trials), stored compressed"),
    ]
    assert [r[2] for r in rows] == ["g1", "g2", "g3"]
    first_rows = blocks["g1"]  # each task's row, as it would be in the table, with its squares
    assert [re.findall(r'<a href="#(task-\d+)">(t\d)</a>', row) for row in first_rows] == [
        [("task-2", "t0")], [("task-3", "t1")]]
    assert all(row.startswith("<tr data-filterable") and row.count('<a class="dot v-passed"') == 4
               for row in first_rows)
    note = re.search(r'<p class="muted small" id="folded-note">(.*?)</p>', html)
    assert note is not None and note.group(1) == (
        "5 of 6 tasks are stored compressed, up to 2 a fold, to keep the page quick to open: those that passed "
        "every trial and, past the first 3 that did not (or are critical), the others. A fold lists its tasks "
        "when it is opened, when a link leads to one of them, or when the name filter finds one in it; this "
        "needs JavaScript.")


def test_a_spools_trials_are_shown_as_the_same_trials_read_from_results_json(tmp_path: Path) -> None:
    # report.html takes a spool's trials as bounded when stored: the page must be the one
    # that the same trials give when read back from results.json and bounded again
    from pytest_sandtable.report.results_json import build_spooled
    from pytest_sandtable.report.spool import SpooledTrials, TrialSpool

    rows = [{"id": f"R{i}", "note": "n" * 60} for i in range(250)]  # a result of about 18,000 characters
    trials = [
        _trial("small", 1, "passed"),
        _trial("long-reply", 1, "failed", text="z" * 30_000),  # clipped as stored
        dataclasses.replace(_trial("big-result", 1, "passed"),
                            calls=[{"index": 0, "turn": 1, "tool": "list_rows", "args": {"q": "x" * 25_000},
                                    "ok": True, "result": rows, "error": None, "violations": []}],
                            transcript=[{"role": "user", "turn": 1, "text": "hello"},
                                        {"role": "tool", "call": 0}, {"role": "agent", "turn": 1, "text": "done"}]),
    ]
    trials.append(dataclasses.replace(trials[2], trial=2, seed=2))  # the same result again (kept by report.html)
    spool = TrialSpool(tmp_path, secrets=[])
    for t in trials:
        spool.add_fresh(t)
    doc = dict(build_spooled(spool, RunMeta(domains=[], agent="a", user="u", k=1, run_seed=0)))
    assert isinstance(doc["trials"], SpooledTrials)
    spooled, read_back = io.StringIO(), io.StringIO()
    write_report_html(doc, spooled, secrets=[])
    write_report_html({**doc, "trials": json.loads(json.dumps(list(doc["trials"])))}, read_back, secrets=[])
    assert spooled.getvalue() == read_back.getvalue()
    assert "… [clipped: 30,000 characters]" in spooled.getvalue()
    spool.close()
