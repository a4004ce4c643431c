"""report.html: one self-contained page rendered from a results.json document.

Inline CSS, a little vanilla JS (filters; opening a trial reached by a link; opening
a compressed transcript) and an inline SVG chart; no outside requests (a
Content-Security-Policy forbids them, and only the page's own script, by hash, may
run). Every piece of text that comes from a transcript, a domain or the run is
escaped with ``html.escape(..., quote=True)``. Everything but a compressed
transcript shows without JS: trials are ``<details>`` and navigation is plain links.

The page stays quick to open at any number of trials. :func:`write_report_html` writes
it piece by piece to a stream and reads the trials once. While all trials' HTML fits in
:data:`INLINE_LIMIT` characters (estimated from their data, :data:`_HTML_PER_LIST`),
every trial is in the page in full; past that, only failing and errored ones are (up to
:data:`INLINE_PER_TASK` a task, :data:`INLINE_LIMIT` in all), listed first in their
task. The other trials' bodies are stored as data, not HTML: each body's data
(:func:`_trial_data`, every text in it formatted as the page shows it) as compact JSON,
gzip-compressed into base64 data blocks (``<script type="application/octet-stream">``,
which never runs, and which base64, holding no ``<``, cannot end) at the end of the
page; their summary lines are HTML in blocks of their own, a block per task and kind
(passed, or not), shown as one fold in the task. The page's script decompresses a block
(``DecompressionStream``) when a fold or a trial is opened, or a link leads into one: a
fold's lines it inserts as the markup Python escaped; a trial's body it lays out from
its data with ``createElement`` and text nodes only, the elements :func:`_body_html`
writes for a trial in full (Python renders no HTML of a compressed trial). Markup it
inserts cannot run script either: the CSP allows no inline handler, and a ``<script>``
put in by a template never runs. A page of any size thus holds a bounded number of
elements: the trials in full, two folds a task, :data:`DOTS_SHOWN` squares a task, and
the columns of :data:`JS_SHOWN` values of j. With more than :data:`TASKS_INLINE` tasks,
the page holds a bounded number of tasks too: the first :data:`TASKS_INLINE` tasks in
the tasks' order (critical first, then the worst) that are critical or did not pass
every trial have their row in the tasks table and their trial section in full; every
other task's row and section are stored compressed, consecutive tasks of one verdict
:data:`TASKS_PER_BLOCK` a block, each block one fold in the table (a row group its rows
replace when opened) and one in the trials, opened the same way (by hand, by a link to
one of its tasks, or by the name filter). The figures and every other table stay in the
page.

The page is one function per section, each given the typed parts of the document
(:mod:`pytest_sandtable.report.types`) it shows.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, Protocol, cast

import orjson

from .fmt import clip, duration, format_cost, pct, pct_range, plural
from .safe import (
    ENTRY_LIMIT,
    TEXT_LIMIT,
    VALUE_LIMIT,
    bounded_trial,
    not_shown,
    safe_text,
    scrub_text,
    secret_values,
    shown_items,
)
from .spool import SpooledTrials
from .text import event_note, fault_note
from .types import (
    Diff,
    ErroredTrial,
    FailureMode,
    Gate,
    Intervals,
    OwnerCluster,
    PassHat,
    PendingItem,
    Results,
    Run,
    Score,
    SoftRuleRate,
    StoredTrial,
    StoredViolation,
    Summary,
    TaskSummary,
    Writer,
)

__all__ = ["INLINE_LIMIT", "INLINE_PER_TASK", "render_report", "write_report_html"]

INLINE_LIMIT = 4_000_000
"""Characters of trial HTML a report shows in full. Under it, every trial is in full;
past it, passing trials and the failing ones over the limit are compressed."""
INLINE_PER_TASK = 3
"""Failing or errored trials of one task shown in full in a report past :data:`INLINE_LIMIT`,
so that one task with many failures does not take the room of every other."""
BLOCK_SIZE = 256_000
"""Characters of trial data per compressed block: opening a trial decompresses one block,
and the trials of a block, often of one task, compress well together."""
JS_SHOWN = 32
"""Values of j a scores table or the chart shows at a glance (past it: 1, 2, 4, ..., k)."""
DOTS_SHOWN = 200
"""Squares of one task's trials in the tasks table; past it, the others are counted."""
TASKS_INLINE = 200
"""Tasks past which a page past :data:`INLINE_LIMIT` shows this many in full (the first that
are critical or did not pass every trial) and stores the others' rows and trial sections
compressed, :data:`TASKS_PER_BLOCK` a block: a page's elements stay bounded at any number
of tasks (10,000 rows and sections take seconds to open)."""
TASKS_PER_BLOCK = 100
"""Tasks' rows, and their trial sections, per compressed block (one fold each in the page)."""
MANY_TASKS_INLINE = 250_000
"""Characters of trial HTML a page of more than :data:`TASKS_INLINE` tasks shows in full
once past :data:`INLINE_LIMIT` (and one failing trial a task, not :data:`INLINE_PER_TASK`):
its failing trials in full, a few dozen of the first tasks' (about 300 elements each), are
otherwise most of its elements and of its opening time."""
_SPOOL_SIZE = 1_000_000  # compressed blocks are kept in memory up to this, then in a temporary file


class TextSink(Protocol):
    """Where the report is written: a text stream (an open file, ``io.StringIO``)."""

    def write(self, text: str, /) -> object: ...

_VERDICT_ORDER = ("failed", "flaky", "skipped", "passed")


def e(value: Any) -> str:
    """Escape any value as HTML text or attribute value."""
    return html.escape(str(value), quote=True)


# made once: json.dumps with options builds an encoder per call, a cost in every value of every trial
_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


def _literal(v: Any) -> str:
    """A value as JSON on one line (a string quoted as JSON quotes it)."""
    if isinstance(v, str):
        return encode_basestring(v)
    if type(v) is int:  # as the encoder writes it (int.__repr__), without a call into it
        return str(v)
    return _JSON.encode(v)


def _pretty(v: Any) -> str:
    """JSON with each item of its top level on a line of its own (a result's rows, an
    object's fields): readable, and written by the C encoder, where ``indent`` takes the
    pure-Python one, the larger part of rendering a big run's page."""
    if isinstance(v, list) and v:
        return "[\n" + ",\n".join(" " + _JSON.encode(x) for x in v) + "\n]"
    if isinstance(v, dict) and v:
        return "{\n" + ",\n".join(f" {encode_basestring(str(k))}: {_JSON.encode(x)}" for k, x in v.items()) + "\n}"
    return _JSON.encode(v)


def _args(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_literal(v)}" for k, v in args.items())


def _badge(verdict: str, text: str | None = None) -> str:
    return f'<span class="badge v-{e(verdict)}">{e(text or verdict)}</span>'


def _time(ts: str) -> str:
    try:
        dt = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    except (TypeError, ValueError):
        return str(ts)
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC")


def _wall(run: Run) -> float | None:
    try:
        a = datetime.strptime(run["started_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        b = datetime.strptime(run["finished_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
    except (TypeError, ValueError):
        return None
    return max(0.0, (b - a).total_seconds())


# --------------------------------------------------------------------------- the document


def _part(results: Mapping[str, Any], name: str) -> Any:
    """One object of the document as given; an empty one when left out."""
    return results.get(name) or {}


def _complete(results: Mapping[str, Any]) -> Results:
    """``results`` with every part the page reads. A results.json read back is checked
    against the schema and has them all; a document put together by hand (a test,
    another tool) may leave parts out, which then show as empty, zero or n/a."""
    trials = results.get("trials") or []
    given = _part(results, "summary")
    summary: Summary = {
        "k": max(map(int, given.get("pass_hat") or {}), default=1),
        "trials": len(trials) if isinstance(trials, Sized) else 0,
        "passed": 0, "failed": 0, "errored": 0, "errored_trials": [], "pass_hat": {},
        "tags": {}, "tasks": [], "failure_modes": [], "soft_rules": [], "usage": {"agent": {}, "user": {}},
        "latency": {"turns": 0, "p50": None, "p95": None}, "agents": [], "users": [], "domains": [],
    }
    summary.update(given)
    run: Run = {"domains": [], "agent": "", "user": "", "k": summary["k"], "run_seed": 0, "options": {},
                "started_at": "", "finished_at": ""}
    run.update(_part(results, "run"))
    gate: Gate = {"set": False, "passed": True, "fail_under": None, "floors": {}, "lines": []}
    gate.update(_part(results, "gate"))
    writer: Writer = {"name": "pytest-sandtable", "version": "", "command": ""}
    writer.update(_part(results, "writer"))
    # the trials are read once, as they come (write_report_html), never held here
    doc: Results = {"schema_version": results.get("schema_version", ""), "writer": writer, "run": run, "trials": [],
                    "tasks": list(results.get("tasks") or []), "summary": summary, "gate": gate}
    if results.get("coverage"):  # (1.4) optional
        doc["coverage"] = list(results["coverage"])
    if isinstance(results.get("mutation"), Mapping):  # (1.5) optional
        doc["mutation"] = dict(results["mutation"])
    if results.get("adaptive"):  # an adaptive run's
        doc["adaptive"] = results["adaptive"]
    if results.get("judged"):  # optional: --sandtable-judge
        doc["judged"] = dict(results["judged"])
    return doc


def _top_j(s: Summary) -> str:
    """The j of the headline pass^j: the run's k, else the largest j computed."""
    js = sorted(s["pass_hat"], key=int)
    k = str(s["k"])
    return k if k in s["pass_hat"] else (js[-1] if js else k)


class _Index:
    """Anchors for tasks and trials (numeric ids: no text from the data in an id)."""

    def __init__(self, tasks: Sequence[TaskSummary]) -> None:
        self.task_no = {(t["domain"], t["task"]): i + 1 for i, t in enumerate(tasks)}
        self.names = {(t["domain"], t["task"]): t["name"] for t in tasks}

    def task(self, domain: str, task: str) -> str:
        return f"task-{self.task_no.get((domain, task), 0)}"

    def trial(self, domain: str, task: str, trial: int) -> str:
        return f"trial-{self.task_no.get((domain, task), 0)}-{int(trial)}"

    def name(self, domain: str, task: str) -> str:
        """The task's name as the tables show it."""
        return self.names.get((domain, task), task)


# --------------------------------------------------------------------------- chart


def chart(pass_hat: PassHat, width: int = 300, height: int = 150, intervals: Intervals | None = None) -> str:
    """An inline SVG line chart of pass^j against j, with each j's 95% interval as a bar;
    past :data:`JS_SHOWN` values of j, the line goes through every j and the points,
    bars and labels are those of :func:`chosen_js`."""
    js = sorted((int(j) for j in pass_hat), key=int)
    marked = {int(j) for j in chosen_js([str(j) for j in js])}
    left, right, top, bottom = 38, 10, 22, 30
    w, h = width - left - right, height - top - bottom
    inset = 24  # keep the points (and their labels) off the axes
    n = len(js)

    def x(i: int) -> float:
        return left + (w / 2 if n == 1 else inset + (w - 2 * inset) * i / (n - 1))

    def y(v: float) -> float:
        return top + (1 - v) * h

    values = [(i, j, pass_hat[str(j)]) for i, j in enumerate(js)]
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="pass^j against j"><title>pass^j against j</title>'
    ]
    for v in (0, 0.5, 1):
        parts.append(f'<line class="grid" x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>')
        parts.append(f'<text class="axis" x="{left - 6}" y="{y(v) + 3.5:.1f}" text-anchor="end">{int(v * 100)}%</text>')
    points = [(x(i), y(v)) for i, _, v in values if v is not None]
    if len(points) > 1:
        pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        parts.append(f'<polyline class="line" points="{pts}"/>')
    for i, j, value in values:
        if j not in marked:
            continue
        parts.append(f'<text class="axis" x="{x(i):.1f}" y="{top + h + 16}" text-anchor="middle">{j}</text>')
        if value is None:
            continue
        px, py = x(i), y(value)
        ci = (intervals or {}).get(str(j))
        if ci:
            parts.append(f'<line class="ci" x1="{px:.1f}" x2="{px:.1f}" y1="{y(ci[1]):.1f}" y2="{y(ci[0]):.1f}"/>')
        shown = f"pass^{j} {pct(value)}" + (f" (95% CI {pct_range(ci)})" if ci else "")
        parts.append(f'<circle class="dot" cx="{px:.1f}" cy="{py:.1f}" r="3.5">'
                     f"<title>{e(shown)}</title></circle>")
        ly = py - 8
        parts.append(f'<text class="val" x="{px:.1f}" y="{ly:.1f}" text-anchor="middle">{e(pct(value))}</text>')
    parts.append(f'<text class="axis" x="{left + w / 2:.1f}" y="{height - 2}" text-anchor="middle">'
                 "j: trials that must all pass</text></svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- pieces


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "", num: Iterable[int] = (),
           last_row_cls: str = "") -> str:
    """Headers are escaped here; cells must already be HTML. Columns in ``num`` are
    right-aligned numbers; ``last_row_cls`` marks the last row (a total)."""
    nums = set(num)

    def attr(i: int) -> str:
        return ' class="num"' if i in nums else ""

    head = "".join(f"<th{attr(i)}>{e(h)}</th>" for i, h in enumerate(headers))
    rows = list(rows)
    body = "".join(
        (f'<tr class="{e(last_row_cls)}">' if last_row_cls and n == len(rows) - 1 else "<tr>")
        + "".join(f"<td{attr(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>"
        for n, row in enumerate(rows)
    )
    return f'<table class="{e(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _filterable(t: TaskSummary) -> str:
    """The attributes the filters read: verdict, critical, and name and tags in lower case."""
    return (f'data-filterable data-verdict="{e(t["verdict"])}" data-critical="{1 if t["critical"] else 0}"'
            f' data-name="{e((t["name"] + " " + " ".join(t["tags"])).lower())}"')


def _dots(trials: Sequence[_Shown], idx: _Index) -> str:
    """A square per trial, in trial order, linking to it; past :data:`DOTS_SHOWN` trials,
    those that did not pass first, and a count of the others by verdict."""
    ordered = sorted(trials, key=lambda t: t.trial)
    shown = ordered
    if len(ordered) > DOTS_SHOWN:
        keep = {id(t) for t in sorted(ordered, key=lambda t: t.verdict == "passed")[:DOTS_SHOWN]}
        shown = [t for t in ordered if id(t) in keep]
    out = []
    for t in shown:
        v = t.verdict
        out.append(f'<a class="dot v-{e(v)}" href="#{idx.trial(t.domain, t.task, t.trial)}" '
                   f'title="trial {e(t.trial)}: {e(v)}"></a>')
    more = ""
    if len(shown) < len(ordered):
        left: dict[str, int] = {}
        for t in ordered:
            left[t.verdict] = left.get(t.verdict, 0) + 1
        for t in shown:
            left[t.verdict] -= 1
        counts = ", ".join(f"{n:,} {v}" for v, n in sorted(left.items()) if n)
        more = f'<br><span class="muted small">+{len(ordered) - len(shown):,} more: {e(counts)}</span>'
    return f'<span class="dots">{"".join(out)}</span>{more}'


# --------------------------------------------------------------------------- the gate


_GATE_PREFIXES = (("sandtable gate failed: ", False), ("sandtable gate passed: ", True),
                  ("  failed: ", False), ("  passed: ", True))


def _gate_checks(gate: Gate) -> list[tuple[bool, str]]:
    """(passed, text) per check: from ``gate.checks`` (schema 1.1), else from the lines
    (the per-check lines after the verdict, or every line of a schema 1.0 file)."""
    checks = gate.get("checks")
    if checks is not None:
        return [(c["passed"], c["text"]) for c in checks]
    lines = gate["lines"]
    details = [ln for ln in lines if ln.startswith(("  failed: ", "  passed: "))]
    out = []
    for ln in details or lines:
        for prefix, ok in _GATE_PREFIXES:
            if ln.startswith(prefix):
                out.append((ok, ln[len(prefix):]))
                break
    return out


def _gate(gate: Gate) -> str:
    checks = _gate_checks(gate)
    if gate["set"]:
        status = _badge("passed" if gate["passed"] else "failed", "gate passed" if gate["passed"] else "gate failed")
        note = "the gate decided the exit status"
    elif gate["passed"]:
        status = '<span class="badge v-skipped">no gate set</span>'
        note = "pytest's exit status decided (any failing trial fails it)"
    else:
        status = _badge("failed", "run failed")
        note = ("no gate set; a critical task's trial that did not pass, or a domain file that did not load, "
                "fails the run")
    verdict = ""
    lines = gate["lines"]
    if lines and len(checks) > 1:
        head = lines[0]
        for prefix, _ in _GATE_PREFIXES[:2]:
            head = head.removeprefix(prefix)
        verdict = f'<p class="verdict">{e(head)}</p>'
    lis = [f'<li class="{"ok" if ok else "bad"}"><span class="mark">{"✓" if ok else "✗"}</span>'
           f'<span class="what">{"passed" if ok else "failed"}:</span> {e(text)}</li>' for ok, text in checks]
    items = "".join(lis)
    return (f'{status}<p class="muted">{e(note)}</p>{verdict}'
            + (f'<ul class="gatelines">{items}</ul>' if items else ""))


# --------------------------------------------------------------------------- one trial


# A trial's body is built in two steps: :func:`_trial_data`, its data as the page shows it
# (every text already formatted: JSON literals, notes, counts; lists of strings and flags
# only), then :func:`_body_html`, that data as HTML. A trial shown in full is its HTML; a
# compressed one is its data as compact JSON, which the page's script lays out as the same
# elements (``textContent`` and ``createElement`` only, never markup): Python renders no
# HTML of a trial nobody opens.
#
# The data, a dict of lists (a mark: ``[soft, invariant, detail, quote]``; a key other than
# chat, diff and meta is left out when the trial has nothing of it):
#   err     [kind, text]: an errored trial's box (kind "errored") or a note (kind "note")
#   failed  [[kind, check, detail], ...]: the failed checks that count
#   uncounted  the same, of the failed checks of kinds the task's basis leaves out (issue 22)
#   owner   [owner, evidence]: the likely owner
#   chat    the transcript's items, or None for no conversation: ["call", ok, tool, args,
#           result, fault note, marks] with result (:func:`_result_data`) ["s", flat], ["l",
#           start, bracket, items] or ["p", start, text], or ["e", code, message] (an error),
#           and an eighth item, who made the call, when not the agent ("user": the simulated
#           user's own call, with no marks; "setup", "history", "sync": issue 22);
#           ["miss", i] (a call not in the calls); ["ev", note] (a task's event); ["msg", who,
#           text, marks]; ["gap", text] (entries not shown); ["rules", marks] (rules broken in
#           entries not shown)
#   tb      where the agent raised
#   diff    [["c" | "d", table, key, fields] | ["u", table, key, field, before, after], ...]
#   diffnote  how many world changes are not shown
#   udiff, udiffnote  the same of the user's world (dual control's ``diff.user``), when it has one
#   checks  [label, [[passed, kind, check, detail], ...]]: every check, a fifth item false
#           for one that is not counted
#   soft    [[invariant, detail] | text of those not shown, ...]
#   meta    [agent, user, agent turns' latency ("" for none), location ("" for none)]


def _mark_data(violations: Iterable[StoredViolation]) -> list[list[Any]]:
    return [[bool(v["soft"]), str(v["invariant"]), str(v["detail"]), str(v.get("quote") or "")] for v in violations]


ResultData = Callable[[Any], list[Any]]  # what a call returned, as the page's data (_result_data)


def _call_data(t: StoredTrial, i: int, by_call: dict[int, list[StoredViolation]],
               result_data: ResultData) -> list[Any]:
    """One tool call of the transcript (``i`` indexes the trial's calls): its signature,
    what it returned or the error, and the rules it broke (taken out of ``by_call``)."""
    calls = t["calls"]
    if not 0 <= i < len(calls):
        return ["miss", str(i)]
    c = calls[i]
    tool, args = str(c["tool"]), _args(c["args"])  # read in the order the HTML shows them
    result: list[str]
    if c["ok"]:
        result = result_data(c["result"])
    else:
        err = c["error"]
        code, message = (err["code"], err["message"]) if err else (None, None)
        result = ["e", str(code), str(message)]
    fault = fault_note(c["fault"]) if c.get("fault") else ""
    by = c.get("by")
    if by == "user":  # dual control: the simulated user's own call, which breaks no rule of the agent's
        return ["call", bool(c["ok"]), tool, args, result, fault, [], "user"]
    item = ["call", bool(c["ok"]), tool, args, result, fault, _mark_data(by_call.pop(c["index"], []))]
    if by:  # (issue 22: a setup, history or sync call)
        item.append(str(by))
    return item


class _Memo:
    """What :func:`_result_data` made of each value it was given while a page is written,
    by the value's compact JSON (orjson's, in C, a fraction of the json module's encoding
    the result needs): the k trials of a task mostly get the same results. The same JSON
    is the same value to the page, for the strict JSON of a spool's trials (orjson writes
    NaN as null). Bounded by the characters of the values kept."""

    LIMIT = 4_000_000

    def __init__(self) -> None:
        self.kept: dict[bytes, list[Any]] = {}
        self.size = 0

    def result_data(self, value: Any) -> list[Any]:
        if not isinstance(value, (list, dict)):
            return _result_data(value)
        try:
            key = orjson.dumps(value)
        except TypeError:  # what orjson does not write: made each time
            return _result_data(value)
        data = self.kept.get(key)
        if data is None:
            data = _result_data(value)
            if self.size + len(key) > self.LIMIT:
                self.kept.clear()
                self.size = 0
            self.kept[key] = data
            self.size += len(key)
        return data


def _result_data(value: Any) -> list[Any]:
    """What a call returned: ``["s", its JSON]`` when short (140 characters at most), else
    ``["l", its first 110 characters, "[" or "{", [each item of its top level]]``, an item
    a line when opened (a list's item, or an object's ``"key": value``: each encoded once,
    the flat text their join, as the encoder would write it whole), or ``["p", its first
    110 characters, the text shown opened]``."""
    if isinstance(value, list) and value:
        items = [_JSON.encode(x) for x in value]
        flat = "[" + ", ".join(items) + "]"
        return ["s", flat] if len(flat) <= 140 else ["l", flat[:110], "[", items]
    if isinstance(value, dict) and value and all(type(k) is str for k in value):
        items = [f"{encode_basestring(k)}: {_JSON.encode(x)}" for k, x in value.items()]
        flat = "{" + ", ".join(items) + "}"
        return ["s", flat] if len(flat) <= 140 else ["l", flat[:110], "{", items]
    flat = _literal(value)
    return ["s", flat] if len(flat) <= 140 else ["p", flat[:110], _pretty(value)]


def _entry_data(t: StoredTrial, entry: Any, by_call: dict[int, list[StoredViolation]],
                said: dict[int, list[StoredViolation]], result_data: ResultData) -> list[Any]:
    """One entry of the transcript: a tool call, or what the user or the agent said with
    the rules the agent broke saying it (taken out of ``said``)."""
    if entry["role"] == "tool":
        return _call_data(t, entry["call"], by_call, result_data)
    if entry["role"] == "event":  # the world changed by someone else (a task's event)
        return ["ev", event_note(entry)]
    who = "agent" if entry["role"] == "agent" else "user"
    marks = _mark_data(said.pop(entry["turn"], [])) if who == "agent" else []
    return ["msg", who, str(entry["text"]), marks]


def _chat_data(t: StoredTrial, result_data: ResultData) -> list[list[Any]] | None:
    by_call: dict[int, list[StoredViolation]] = {}
    said: dict[int, list[StoredViolation]] = {}
    for v in t["violations"]:
        if v["call"] is not None:
            by_call.setdefault(v["call"], []).append(v)
        else:
            said.setdefault(v["turn"], []).append(v)
    entries = t["transcript"]
    first, hidden, last = shown_items(entries)
    items = [_entry_data(t, entry, by_call, said, result_data) for entry in first]
    if hidden:
        items.append(["gap", not_shown(hidden, len(entries), "transcript entries")])
    items += [_entry_data(t, entry, by_call, said, result_data) for entry in last]
    if hidden:  # the rules broken in the entries not shown stay with them
        shown = {entry["call"] for entry in (*first, *last) if entry["role"] == "tool"}
        turns = {entry["turn"] for entry in (*first, *last) if entry["role"] == "agent"}
        by_call = {i: vs for i, vs in by_call.items() if i in shown}
        said = {turn: vs for turn, vs in said.items() if turn in turns}
    rest = [v for vs in list(by_call.values()) + list(said.values()) for v in vs]
    if rest:
        items.append(["rules", _mark_data(rest)])
    return items or None


def _fields(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_literal(v)}" for k, v in row.items())


def _diff_data(diff: Diff) -> tuple[list[list[str]], str]:
    """The world diff's rows, its first :data:`~.safe.ENTRY_LIMIT` changes when it has
    more, and the note saying how many are not shown."""
    lists: dict[str, list[Any]] = {key: value for key, value in diff.items() if isinstance(value, list)}
    total = sum(map(len, lists.values()))
    note = ""
    if total > ENTRY_LIMIT:
        room, shown = ENTRY_LIMIT, dict(diff)
        for key, entries in lists.items():  # created, changed, deleted: the first changes, in that order
            shown[key], room = entries[:room], max(0, room - len(entries))
        diff, note = cast(Diff, shown), not_shown(total - ENTRY_LIMIT, total, "world changes")
    rows = []
    for c in diff["created"]:
        rows.append(["c", str(c["table"]), _literal(c["key"]), _fields(c["row"])])
    for ch in diff["changed"]:
        for f, ba in ch["fields"].items():
            rows.append(["u", str(ch["table"]), _literal(ch["key"]), str(f), _literal(ba["before"]),
                         _literal(ba["after"])])
    for d in diff.get("deleted", []):
        rows.append(["d", str(d["table"]), _literal(d["key"]), _fields(d["row"])])
    return rows, note


def _trial_data(t: StoredTrial, result_data: ResultData = _result_data) -> dict[str, Any]:
    """A trial's body as data (see above): failed checks, likely owner, transcript, world
    diff, every check, soft rules broken, who ran it."""
    v = t["verdict"]
    data: dict[str, Any] = {}
    if t["error"]:  # errored, or a graded trial whose record lost a field that could not be written
        data["err"] = ["errored" if v == "errored" else "note", str(t["error"])]
    failed = [[str(c["kind"]), str(c["id"]), str(c["detail"])] for c in t["checks"]
              if not c["passed"] and c.get("counted") is not False]
    if failed:
        data["failed"] = failed
    uncounted = [[str(c["kind"]), str(c["id"]), str(c["detail"])] for c in t["checks"]
                 if not c["passed"] and c.get("counted") is False]
    if uncounted:  # issue 22: kinds the task's basis leaves out, checked and shown, never failing the trial
        data["uncounted"] = uncounted
    a = t.get("attribution")
    if isinstance(a, Mapping) and a.get("owner"):
        data["owner"] = [str(a["owner"]), str(a.get("evidence", ""))]
    data["chat"] = _chat_data(t, result_data)
    traceback = t.get("traceback")
    if traceback:
        data["tb"] = str(traceback)
    data["diff"], note = _diff_data(t["diff"])
    if note:
        data["diffnote"] = note
    user_diff = t["diff"].get("user")  # dual control: the caller's own world, beside the agent's
    if user_diff is not None:
        data["udiff"], note = _diff_data(user_diff)
        if note:
            data["udiffnote"] = note
    checks = t["checks"]
    if checks:
        data["checks"] = [f'{"All " if len(checks) > 1 else ""}{plural(len(checks), "check")}',
                          [[bool(c["passed"]), str(c["kind"]), str(c["id"]), str(c["detail"])]
                           + ([False] if c.get("counted") is False else []) for c in checks]]
    soft = [s for s in t["violations"] if s["soft"]]
    if soft:
        first, hidden, last = shown_items(soft)
        data["soft"] = ([[str(s["invariant"]), str(s["detail"])] for s in first]
                        + ([not_shown(hidden, len(soft), "soft rule breaks")] if hidden else [])
                        + [[str(s["invariant"]), str(s["detail"])] for s in last])
    data["meta"] = [str(t["agent"]), str(t["user"]),
                    ", ".join(duration(x) for x in t["latency"]) if t["latency"] else "",
                    str(t["location"]) if t["location"] else ""]
    return data


def _marks(marks: Iterable[Sequence[Any]]) -> str:
    """Rules broken at one point of the conversation, with the policy sentence behind each."""
    out = []
    for soft, invariant, detail, quote in marks:
        said = f'<div class="quote">policy: “{e(quote)}”</div>' if quote else ""
        out.append(f'<div class="viol {"soft" if soft else "hard"}"><b>{"soft rule" if soft else "violation"} '
                   f'{e(invariant)}</b> <span>{e(detail)}</span>{said}</div>')
    return "".join(out)


def _item_html(item: Sequence[Any]) -> str:
    """One item of a transcript's data as HTML."""
    kind = item[0]
    if kind == "call":
        ok, tool, args, result, fault, marks = item[1:7]
        by = item[7] if len(item) > 7 else ""
        if result[0] == "s":
            body = f'<code class="res">→ {e(result[1])}</code>'
        elif result[0] in ("l", "p"):
            text = result[2] if result[0] == "p" else _opened(result[2], result[3])
            body = (f'<details class="res"><summary>→ {e(result[1])}…</summary>'
                    f"<pre>{e(text)}</pre></details>")
        else:
            body = f'<code class="res err">✗ error {e(result[1])}: {e(result[2])}</code>'
        body += f'<div class="muted">{e(fault)}</div>' if fault else ""
        head = f'<code class="sig"><b>{e(tool)}</b>({e(args)})</code>'
        cls = "ok" if ok else "err"
        if by == "user":  # dual control: the simulated user's own call
            return (f'<li class="call {cls} by-user"><span class="who">user called</span><div class="body">{head}'
                    f"{body}</div></li>")
        who = f"tool · {e(by)}" if by else "tool"  # (issue 22: a setup, history or sync call)
        return (f'<li class="call {cls}"><span class="who">{who}</span><div class="body">{head}{body}'
                f"{_marks(marks)}</div></li>")
    if kind == "miss":
        return f'<li class="call err"><code>(missing call {e(item[1])})</code></li>'
    if kind == "ev":
        return f'<li class="msg gap"><span class="who">world</span><div class="body">{e(item[1])}</div></li>'
    if kind == "msg":
        _, who, text, marks = item
        return (f'<li class="msg {who}"><span class="who">{who}</span><div class="body">'
                f'<div class="text">{e(text)}</div>{_marks(marks)}</div></li>')
    if kind == "gap":
        return f'<li class="msg gap"><span class="who"></span><div class="body muted">{e(item[1])}</div></li>'
    return f'<li class="msg agent"><span class="who">rules</span><div class="body">{_marks(item[1])}</div></li>'


def _opened(bracket: str, items: Sequence[str]) -> str:
    """A long result as shown opened: each item of its top level on a line of its own."""
    return bracket + "\n" + ",\n".join(" " + x for x in items) + "\n" + ("]" if bracket == "[" else "}")


_DIFF_BADGES = {"c": '<span class="badge v-passed">created</span>', "u": '<span class="badge v-flaky">changed</span>',
                "d": '<span class="badge v-failed">deleted</span>'}


def _diff_html(rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return '<p class="muted">The world did not change.</p>'
    cells = []
    for row in rows:
        if row[0] == "u":
            shown = (f"<code>{e(row[3])}</code>: <code class=\"before\">{e(row[4])}</code> → "
                     f"<code class=\"after\">{e(row[5])}</code>")
        else:
            shown = f"<code>{e(row[3])}</code>"
        cells.append([_DIFF_BADGES[row[0]], f"<code>{e(row[1])}</code>", f"<code>{e(row[2])}</code>", shown])
    return _table(["", "table", "key", "row / field"], cells, "diff")


def _body_html(data: Mapping[str, Any]) -> str:
    """A trial's body (:func:`_trial_data`) as HTML: what the page's script lays out from
    the same data for a compressed trial."""
    body = []
    err = data.get("err")
    if err and err[0] == "errored":
        body.append(f'<div class="box error"><b>errored</b> (not graded; left out of pass^k): {e(err[1])}</div>')
    elif err:
        body.append(f'<div class="box error"><b>note</b>: {e(err[1])}</div>')
    failed = data.get("failed")
    if failed:
        rows = [[f"<code>{e(kind)}</code>", f"<code>{e(check)}</code>", e(detail)] for kind, check, detail in failed]
        body.append('<h4>Failed checks</h4>' + _table(["kind", "check", "detail"], rows, "checks bad"))
    uncounted = data.get("uncounted")
    if uncounted:
        rows = [[f"<code>{e(kind)}</code>", f"<code>{e(check)}</code>", e(detail)] for kind, check, detail in uncounted]
        body.append('<h4>Failed checks, not counted</h4><p class="muted small">of kinds the task\'s basis leaves '
                    'out: they never fail the trial</p>' + _table(["kind", "check", "detail"], rows, "checks"))
    owner = data.get("owner")
    if owner:
        body.append(f'<div class="box owner"><b>likely owner: <span class="who-owns">{e(owner[0])}</span></b>'
                    f' <span class="evidence">{e(owner[1])}</span></div>')
    chat = data.get("chat")
    body.append("<h4>Transcript</h4>" + (f'<ol class="chat">{"".join(map(_item_html, chat))}</ol>' if chat else
                                         '<p class="muted">No conversation took place.</p>'))
    if data.get("tb"):
        body.append('<details class="tb"><summary>Where the agent raised</summary>'
                    f'<pre>{e(data["tb"])}</pre></details>')
    body.append("<h4>World diff</h4>" + _diff_html(data.get("diff") or ()))
    if data.get("diffnote"):
        body.append(f'<p class="muted small">{e(data["diffnote"])}</p>')
    if "udiff" in data:
        body.append("<h4>User world diff</h4>" + _diff_html(data["udiff"]))
        if data.get("udiffnote"):
            body.append(f'<p class="muted small">{e(data["udiffnote"])}</p>')
    checks = data.get("checks")
    if checks:
        rows = [[_badge("passed" if c[0] else "failed", "pass" if c[0] else "fail")
                 + (' <span class="muted">not counted</span>' if len(c) > 4 else ""),
                 f"<code>{e(c[1])}</code>", f"<code>{e(c[2])}</code>", e(c[3])] for c in checks[1]]
        body.append(f'<details class="all-checks"><summary>{e(checks[0])}</summary>'
                    f'{_table(["", "kind", "check", "detail"], rows, "checks")}</details>')
    soft = data.get("soft")
    if soft:
        lines = [f'<li class="muted">{e(s)}</li>' if isinstance(s, str)
                 else f"<li><code>{e(s[0])}</code> {e(s[1])}</li>" for s in soft]
        body.append("<h4>Soft rules broken (reported, never fail a trial)</h4><ul>" + "".join(lines) + "</ul>")
    agent, user, latency, location = data["meta"]
    meta = [f"agent <code>{e(agent)}</code>", f"user <code>{e(user)}</code>"]
    if latency:
        meta.append(f"agent turns {e(latency)}")
    if location:
        meta.append(f"task at <code>{e(location)}</code>")
    body.append(f'<p class="muted small">{" · ".join(meta)}</p>')
    return "".join(body)


@dataclass(slots=True)  # one a trial, held to the end of the page: no __dict__
class _Shown:
    """One trial as the page writes it: its summary line (``head``; empty for a trial
    that cannot be shown, whose ``body`` then says why) and its body, in full in
    ``body``, or compressed: ``ref`` is ``"block.item"`` and ``body`` is empty."""

    domain: str
    task: str
    trial: int
    verdict: str
    head: str
    body: str
    ref: str = ""


def _number(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _cannot_show(t: Mapping[str, Any], exc: Exception) -> _Shown:
    """The line standing for a trial that cannot be shown: one odd trial never costs the
    run its report."""
    box = (f'<div class="box error">trial {e(t.get("trial"))} of {e(t.get("task"))} cannot be shown '
           f"({e(type(exc).__name__)}: {e(clip(str(exc), 200))}); results.json holds what was recorded</div>")
    return _Shown(str(t.get("domain")), str(t.get("task")), _number(t.get("trial")), str(t.get("verdict")), "", box)


def _trial_head(t: StoredTrial) -> str:
    """A trial's summary line: its number, verdict, how it ended, its size and time."""
    v = t["verdict"]
    bits = [f"trial {e(t['trial'])} of {e(t['k'])}", _badge(v)]
    if t["ended_by"]:
        bits.append(f'<span class="muted">ended by {e(t["ended_by"])}</span>')
    bits.append(f'<span class="muted">{e(plural(t["turns"], "turn"))} · {e(plural(len(t["calls"]), "call"))}'
                f' · seed {e(t["seed"])} · {e(duration(t["duration"]))}</span>')
    failed = [c for c in t["checks"] if not c["passed"] and c.get("counted") is not False]  # (issue 22)
    if failed:
        bits.append(f'<span class="muted">{plural(len(failed), "failed check")}</span>')
    return " ".join(bits)

# --------------------------------------------------------------------------- the page

_CSS = """
:root{--bg:#f6f7f9;--card:#fff;--fg:#1f2328;--muted:#656d76;--line:#d8dee4;--accent:#3b5bdb;
--pass:#1a7f37;--fail:#cf222e;--flaky:#9a6700;--skip:#6e7781;--passbg:#dafbe1;--failbg:#ffebe9;
--flakybg:#fff8c5;--skipbg:#eaeef2;--code:#f3f4f6}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--card:#161b22;--fg:#e6edf3;--muted:#8d96a0;--line:#30363d;
--accent:#7c9cff;--pass:#3fb950;--fail:#f85149;--flaky:#d29922;--skip:#8d96a0;--passbg:#12361f;--failbg:#42171a;
--flakybg:#3b2e0a;--skipbg:#21262d;--code:#1f242c}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
pre{background:var(--code);padding:8px;border-radius:6px;overflow:auto;max-height:360px;margin:4px 0}
header{background:var(--card);border-bottom:1px solid var(--line);padding:14px 24px 0;position:sticky;top:0;z-index:5}
header .brand{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.08em}
header h1{margin:2px 0 4px;font-size:22px}
header nav{display:flex;gap:18px;margin-top:8px;overflow-x:auto}
header nav a{padding:6px 0;border-bottom:2px solid transparent;color:var(--fg);white-space:nowrap}
header nav a:hover{border-bottom-color:var(--accent);text-decoration:none}
main{max-width:1240px;margin:0 auto;padding:18px 24px 60px}
section{margin:0 0 22px}
[id]{scroll-margin-top:130px}
h2{font-size:17px;margin:0 0 10px}h3{font-size:15px;margin:0}h4{font-size:13px;margin:14px 0 6px;color:var(--muted);
text-transform:uppercase;letter-spacing:.04em}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px}
.hero{display:grid;grid-template-columns:minmax(190px,1fr) minmax(300px,1.4fr) minmax(260px,1.6fr);gap:14px;
margin-bottom:22px}
@media (max-width:900px){.hero{grid-template-columns:1fr}}
.headline .label{color:var(--muted);font-size:13px}
.headline .big{font-size:44px;font-weight:700;line-height:1.1;letter-spacing:-.02em}
.headline .sub{margin-top:6px;color:var(--muted)}
.headline .counts{margin-top:10px;display:flex;flex-wrap:wrap;gap:6px}
.muted{color:var(--muted)}.small{font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;
background:var(--skipbg);color:var(--skip);white-space:nowrap;vertical-align:1px}
.v-passed.badge{background:var(--passbg);color:var(--pass)}.v-failed.badge,.v-errored.badge{background:var(--failbg);
color:var(--fail)}.v-flaky.badge{background:var(--flakybg);color:var(--flaky)}
.v-errored.badge{background:var(--skipbg);color:var(--skip)}
.crit{background:var(--failbg);color:var(--fail);border:1px solid var(--fail)}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:var(--card)}
.tablewrap{border:1px solid var(--line);border-radius:10px;overflow:auto}
.tablewrap tr:last-child td{border-bottom:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.dots{display:inline-flex;gap:3px;flex-wrap:wrap;max-width:260px}
.dot{width:11px;height:11px;border-radius:3px;display:inline-block;background:var(--skip)}
.dot.v-passed{background:var(--pass)}.dot.v-failed{background:var(--fail)}.dot.v-errored{background:var(--skip);
outline:1px dashed var(--fail)}
.chart{width:100%;height:auto;max-width:420px}
.chart .grid{stroke:var(--line);stroke-width:1}.chart .axis{fill:var(--muted);font-size:10px}
.chart .line{fill:none;stroke:var(--accent);stroke-width:2}.chart .dot{fill:var(--accent)}
.chart .val{fill:var(--fg);font-size:10.5px;font-weight:600}
.gatelines{margin:8px 0 0;padding:0;list-style:none}.gatelines li{margin:4px 0;display:flex;gap:8px}
.gatelines .mark{font-weight:700}.gatelines .bad{color:var(--fail)}
.gatelines .ok{color:var(--pass)}.gatelines .what{font-weight:600}
.verdict{margin:8px 0 0;font-weight:600}
.alert{background:var(--failbg);border:2px solid var(--fail);border-radius:10px;padding:12px 16px;color:var(--fg)}
.alert h2{color:var(--fail)}.alert p{margin:4px 0 8px}.alert summary{cursor:pointer}
.alert.warn{background:var(--flakybg);border-color:var(--flaky);margin-bottom:22px}.alert.warn h2{color:var(--flaky)}
.ci{color:var(--muted);font-size:11.5px;white-space:nowrap}.headline .ci{font-size:13px;margin-top:2px}
.chart .ci{stroke:var(--accent);stroke-width:1.5;opacity:.45}
.sub-h{margin:14px 0 6px;font-size:13.5px}
.box.owner{background:var(--flakybg);border:1px solid var(--flaky);padding:6px 10px;border-radius:8px;margin:8px 0}
table.usage tr.total td{font-weight:600;border-top:2px solid var(--line)}
.filters{display:flex;gap:8px;align-items:center;margin:0 0 10px;flex-wrap:wrap}
.filters button{font:inherit;font-size:13px;padding:4px 12px;border-radius:999px;border:1px solid var(--line);
background:var(--card);color:var(--fg);cursor:pointer}
.filters button.on{background:var(--accent);border-color:var(--accent);color:#fff}
.filters input{font:inherit;padding:4px 10px;border-radius:8px;border:1px solid var(--line);background:var(--card);
color:var(--fg);min-width:200px}
.no-js .js-only{display:none}
.hidden{display:none !important}
.task{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px;margin-bottom:12px}
.task:target{outline:2px solid var(--accent)}
.task-head{display:flex;gap:10px;align-items:center;flex-wrap:wrap;margin-bottom:8px}
details.trial{border:1px solid var(--line);border-radius:8px;margin:6px 0;background:var(--bg)}
details.trial>summary{cursor:pointer;padding:7px 10px;display:flex;gap:10px;align-items:center;flex-wrap:wrap;
list-style:none}
details.trial>summary::-webkit-details-marker{display:none}
details.trial>summary::before{content:"▸";color:var(--muted);width:10px}
details.trial[open]>summary::before{content:"▾"}
details.trial.v-failed{border-left:4px solid var(--fail)}details.trial.v-errored{border-left:4px solid var(--skip)}
details.trial.v-passed{border-left:4px solid var(--pass)}
details.trial:target{outline:2px solid var(--accent)}
.trial-body{padding:0 14px 12px}
.chat{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:6px}
.chat li{display:flex;gap:10px;align-items:flex-start}
.chat .who{flex:0 0 44px;font-size:11px;text-transform:uppercase;color:var(--muted);padding-top:6px;text-align:right}
.chat .body{flex:1;min-width:0}
.chat .text{white-space:pre-wrap;overflow-wrap:anywhere;padding:6px 10px;border-radius:8px;max-width:820px}
.chat .user .text{background:var(--card);border:1px solid var(--line)}
.chat .agent .text{background:color-mix(in srgb,var(--accent) 12%,var(--card));border:1px solid
color-mix(in srgb,var(--accent) 30%,var(--line))}
.chat .call .body{border-left:2px solid var(--line);padding:2px 0 2px 10px}
.chat .call.err .body{border-left-color:var(--fail)}
.chat .sig{display:block;overflow-wrap:anywhere}.chat .res{display:block;color:var(--muted);overflow-wrap:anywhere}
.chat details.res summary{cursor:pointer;color:var(--muted);font:12.5px ui-monospace,Menlo,Consolas,monospace}
.chat .res.err{color:var(--fail)}
.viol{margin-top:4px;padding:3px 8px;border-radius:6px;font-size:12.5px}
.viol .quote{font-style:italic;opacity:.85}
.viol.hard{background:var(--failbg);color:var(--fail)}.viol.soft{background:var(--flakybg);color:var(--flaky)}
.box.error{background:var(--skipbg);border:1px dashed var(--fail);padding:8px 10px;border-radius:8px;margin:10px 0}
table.diff code.before{color:var(--fail)}table.diff code.after{color:var(--pass)}
.all-checks{margin-top:10px}.all-checks summary{cursor:pointer;color:var(--muted)}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:10px 0 0}.kv dt{color:var(--muted)}
.kv dd{margin:0}
.lazy:empty::after{content:"opening…";color:var(--muted)}
.no-js .lazy:empty::after{content:"Stored compressed in this page: opening it needs JavaScript "
"(results.json holds it in full)."}
.chat .gap .body{font-style:italic;padding:4px 0}
details.group{margin:6px 0}details.group>summary{cursor:pointer;color:var(--muted);padding:4px 0}
footer{color:var(--muted);font-size:12px;text-align:center;padding:20px}
"""
# the "Judged scores" section's (--sandtable-judge, :func:`_judged`)
_CSS += """.judged-line{margin:2px 0 2px 12px;white-space:pre-wrap}mark.evidence{background:var(--flakybg);
color:var(--fg);padding:0 2px;border-radius:2px}.judged .void{color:var(--fail)}.judged-trial{margin:6px 0}
"""

_JS = r"""
(function(){
  document.documentElement.classList.remove('no-js');
  function openTarget(){
    var id = decodeURIComponent(location.hash.slice(1));
    if(!id) return;
    var el = document.getElementById(id);
    if(!el){  // a passing trial of a big run: listed once its task's fold is opened
      var m = /^(task|trial)-([0-9]+)(-[0-9]+)?$/.exec(id), folds = [];
      if(m && !document.getElementById('task-' + m[2]))  // its task's section is in a compressed block
        document.querySelectorAll('details[data-g][data-tasks]').forEach(function(g){
          var r = g.getAttribute('data-tasks').split('-');  // the numbers of the tasks it holds
          if(+m[2] >= +r[0] && +m[2] <= +r[1]) folds.push(fill(g, 'data-g', '.group-body'));
        });
      if(m && m[1] === 'trial' && m[3] && !folds.length) ['-more', '-passed'].forEach(function(end){
        var g = document.getElementById('task-' + m[2] + end);
        if(g && g.hasAttribute('data-g')) folds.push(fill(g, 'data-g', '.group-body'));
      });
      if(folds.length) Promise.all(folds).then(openTarget);
      return;
    }
    for(var p = el; p; p = p.parentElement){
      if(p.tagName === 'DETAILS') p.open = true;
      if(p.classList && p.classList.contains('hidden')) p.classList.remove('hidden');
    }
    el.scrollIntoView();
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
  var state = {verdict: 'all', q: ''};
  function matches(el){
    var v = el.getAttribute('data-verdict'), c = el.getAttribute('data-critical') === '1';
    var okV = state.verdict === 'all' || (state.verdict === 'critical' ? c :
      state.verdict === 'notpassed' ? v !== 'passed' : v === state.verdict);
    var name = el.getAttribute('data-name') || '';
    return okV && (!state.q || name.indexOf(state.q) !== -1);
  }
  function apply(){
    document.querySelectorAll('[data-filterable]').forEach(function(el){
      el.classList.toggle('hidden', !matches(el));
    });
    document.querySelectorAll('.filters button[data-verdict]').forEach(function(b){
      b.classList.toggle('on', b.getAttribute('data-verdict') === state.verdict);
    });
  }
  document.querySelectorAll('.filters button[data-verdict]').forEach(function(b){
    b.addEventListener('click', function(){ state.verdict = b.getAttribute('data-verdict'); apply(); });
  });
  var q = document.getElementById('q');
  if(q) q.addEventListener('input', function(){
    state.q = q.value.trim().toLowerCase();
    apply();
    // a name found in a few folds of the tasks table: their rows are listed, to be filtered in turn
    var found = [];
    if(state.q) document.querySelectorAll('tbody[data-filterable] > tr > td > details[data-g]').forEach(function(d){
      if(!d.closest('tbody').classList.contains('hidden')) found.push(d);
    });
    if(found.length <= 3) found.forEach(function(d){ fill(d, 'data-g', '.group-body'); });
  });
  function setAll(open){
    document.querySelectorAll('details.trial').forEach(function(d){ d.open = open; });
  }
  var ex = document.getElementById('expand'), co = document.getElementById('collapse');
  if(ex) ex.addEventListener('click', function(){ setAll(true); });
  if(co) co.addEventListener('click', function(){ setAll(false); });
  // compressed trials: a block is decoded once, when the first of its trials opens
  var blocks = {};
  function bytes(text){
    var s = atob(text.trim()), out = new Uint8Array(s.length);
    for(var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function block(n){
    if(!blocks[n]){
      var el = document.getElementById(n);
      blocks[n] = !el ? Promise.reject(new Error('its data block is missing')) :
        typeof DecompressionStream === 'undefined' ? Promise.reject(new Error('this browser cannot decompress')) :
        new Response(new Blob([bytes(el.textContent)]).stream().pipeThrough(new DecompressionStream('gzip')))
          .text().then(JSON.parse);
    }
    return blocks[n];
  }
  // a compressed trial's body, from its data (report/html.py, _trial_data): the elements
  // _body_html writes, made with createElement and text nodes only, never markup; text as
  // the HTML parser would leave it (CR LF and CR as LF, no NUL, a <pre>'s first newline dropped)
  function tx(s){ return String(s).replace(/\r\n?/g, '\n').replace(/\0/g, ''); }
  function h(tag, cls){
    var n = document.createElement(tag);
    if(cls) n.className = cls;
    for(var i = 2; i < arguments.length; i++) add(n, arguments[i]);
    return n;
  }
  function add(n, k){
    if(Array.isArray(k)) k.forEach(function(x){ add(n, x); });
    else if(typeof k === 'string'){ if(k) n.append(tx(k)); }
    else if(k) n.append(k);
  }
  function pre(s){ s = tx(s); return h('pre', '', s.charAt(0) === '\n' ? s.slice(1) : s); }
  function code(s, cls){ return h('code', cls || '', s); }
  function badge(v, text){ return h('span', 'badge v-' + v, text); }
  function table(heads, rows, cls){
    return h('table', cls, h('thead', '', h('tr', '', heads.map(function(x){ return h('th', '', x); }))),
      h('tbody', '', rows.map(function(r){ return h('tr', '', r.map(function(c){ return h('td', '', c); })); })));
  }
  function marks(ms){
    return ms.map(function(m){
      return h('div', 'viol ' + (m[0] ? 'soft' : 'hard'), h('b', '', (m[0] ? 'soft rule ' : 'violation ') + m[1]), ' ',
        h('span', '', m[2]), m[3] ? h('div', 'quote', 'policy: \u201c' + m[3] + '\u201d') : null);
    });
  }
  function item(x){
    var k = x[0];
    if(k === 'call'){
      var r = x[4], res = r[0] === 's' ? code('\u2192 ' + r[1], 'res') :
        r[0] === 'p' ? h('details', 'res', h('summary', '', '\u2192 ' + r[1] + '\u2026'), pre(r[2])) :
        r[0] === 'l' ? h('details', 'res', h('summary', '', '\u2192 ' + r[1] + '\u2026'), pre(r[2] + '\n' +
          r[3].map(function(x){ return ' ' + x; }).join(',\n') + '\n' + (r[2] === '[' ? ']' : '}'))) :
        code('\u2717 error ' + r[1] + ': ' + r[2], 'res err');
      var by = x[7] || '', sig = h('code', 'sig', h('b', '', x[2]), '(' + x[3] + ')'), fault = x[5] ?
        h('div', 'muted', x[5]) : null;
      if(by === 'user')  // dual control: the simulated user's own call
        return h('li', 'call ' + (x[1] ? 'ok' : 'err') + ' by-user', h('span', 'who', 'user called'),
          h('div', 'body', sig, res, fault));
      return h('li', 'call ' + (x[1] ? 'ok' : 'err'), h('span', 'who', by ? 'tool \u00b7 ' + by : 'tool'),
        h('div', 'body', sig, res, fault, marks(x[6])));
    }
    if(k === 'miss') return h('li', 'call err', code('(missing call ' + x[1] + ')'));
    if(k === 'ev') return h('li', 'msg gap', h('span', 'who', 'world'), h('div', 'body', x[1]));
    if(k === 'msg') return h('li', 'msg ' + x[1], h('span', 'who', x[1]), h('div', 'body', h('div', 'text', x[2]),
      marks(x[3])));
    if(k === 'gap') return h('li', 'msg gap', h('span', 'who'), h('div', 'body muted', x[1]));
    return h('li', 'msg agent', h('span', 'who', 'rules'), h('div', 'body', marks(x[1])));
  }
  var changes = {c: ['passed', 'created'], u: ['flaky', 'changed'], d: ['failed', 'deleted']};
  function diff(rows){
    return rows && rows.length ? table(['', 'table', 'key', 'row / field'], rows.map(function(r){
      return [badge(changes[r[0]][0], changes[r[0]][1]), code(r[1]), code(r[2]), r[0] === 'u' ?
        [code(r[3]), ': ', code(r[4], 'before'), ' \u2192 ', code(r[5], 'after')] : code(r[3])];
    }), 'diff') : h('p', 'muted', 'The world did not change.');
  }
  function trialBody(d){
    var out = document.createDocumentFragment(), e = d.err;
    if(e) out.append(e[0] === 'errored' ? h('div', 'box error', h('b', '', 'errored'),
      ' (not graded; left out of pass^k): ' + e[1]) : h('div', 'box error', h('b', '', 'note'), ': ' + e[1]));
    if(d.failed) add(out, [h('h4', '', 'Failed checks'), table(['kind', 'check', 'detail'], d.failed.map(function(c){
      return [code(c[0]), code(c[1]), c[2]]; }), 'checks bad')]);
    if(d.uncounted) add(out, [h('h4', '', 'Failed checks, not counted'), h('p', 'muted small', 'of kinds the ' +
      'task\'s basis leaves out: they never fail the trial'), table(['kind', 'check', 'detail'],
      d.uncounted.map(function(c){ return [code(c[0]), code(c[1]), c[2]]; }), 'checks')]);
    if(d.owner) out.append(h('div', 'box owner', h('b', '', 'likely owner: ', h('span', 'who-owns', d.owner[0])), ' ',
      h('span', 'evidence', d.owner[1])));
    add(out, [h('h4', '', 'Transcript'), d.chat ? h('ol', 'chat', d.chat.map(item)) :
      h('p', 'muted', 'No conversation took place.')]);
    if(d.tb) out.append(h('details', 'tb', h('summary', '', 'Where the agent raised'), pre(d.tb)));
    add(out, [h('h4', '', 'World diff'), diff(d.diff)]);
    if(d.diffnote) out.append(h('p', 'muted small', d.diffnote));
    if(d.udiff){  // dual control: the user's own world
      add(out, [h('h4', '', 'User world diff'), diff(d.udiff)]);
      if(d.udiffnote) out.append(h('p', 'muted small', d.udiffnote));
    }
    if(d.checks) out.append(h('details', 'all-checks', h('summary', '', d.checks[0]), table(['', 'kind', 'check',
      'detail'], d.checks[1].map(function(c){
        return [[badge(c[0] ? 'passed' : 'failed', c[0] ? 'pass' : 'fail'), c.length > 4 ? [' ',
          h('span', 'muted', 'not counted')] : null], code(c[1]), code(c[2]), c[3]]; }),
      'checks')));
    if(d.soft) add(out, [h('h4', '', 'Soft rules broken (reported, never fail a trial)'), h('ul', '',
      d.soft.map(function(s){
        return typeof s === 'string' ? h('li', 'muted', s) : h('li', '', code(s[0]), ' ' + s[1]); }))]);
    var m = d.meta;
    out.append(h('p', 'muted small', 'agent ', code(m[0]), ' \u00b7 user ', code(m[1]),
      m[2] ? ' \u00b7 agent turns ' + m[2] : null, m[3] ? [' \u00b7 task at ', code(m[3])] : null));
    return out;
  }
  // a trial's body (data-z="z<block>.<item>"), or a task's compressed trials or a fold's
  // tasks (data-g="g<n>"); a fold of the tasks table (data-rows) is a row group of its own,
  // which its rows replace, filtered as the rest of the table
  function fill(d, attr, where){
    var ref = d.getAttribute(attr).split('.'), body = d.querySelector(where);
    var into = d.hasAttribute('data-rows') ? d.closest('tbody') : body;
    d.removeAttribute(attr);
    d.open = true;
    return block(ref[0]).then(function(list){
      var html = ref.length > 1 ? list[+ref[1]] : list.join('');
      if(attr === 'data-z'){  // a trial's data: laid out as text
        if(!html || typeof html !== 'object') throw new Error('its data block does not hold it');
        into.replaceChildren(trialBody(html));
      } else {  // lines the page wrote as HTML, escaped: a task's trials, a fold's rows and sections
        if(typeof html !== 'string') throw new Error('its data block does not hold it');
        var t = document.createElement('template');
        t.innerHTML = html;
        into.replaceChildren(t.content);
      }
      body.classList.remove('lazy');
      if(into !== body){ into.removeAttribute('data-filterable'); into.removeAttribute('class'); }
      if(attr === 'data-g') apply();
    }).catch(function(err){
      body.textContent = 'This could not be opened (' + err.message + '); results.json holds every trial in full.';
    });
  }
  document.addEventListener('toggle', function(ev){
    var d = ev.target;
    if(!d.open || !d.hasAttribute) return;
    if(d.hasAttribute('data-z')) fill(d, 'data-z', '.trial-body');
    else if(d.hasAttribute('data-g')) fill(d, 'data-g', '.group-body');
  }, true);
})();
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:; "
            "base-uri 'none'; form-action 'none'")

# --------------------------------------------------------------------------- the sections, top to bottom


def _head(doc: Results, title: str, top: str) -> str:
    """From the doctype to ``<body>``: the CSP, and a title with the headline figure."""
    not_loaded = len(doc["run"].get("collection_errors") or [])
    missing = f" ({plural(not_loaded, 'domain file')} did not load)" if not_loaded else ""
    if doc["summary"].get("provisional"):
        missing += " (provisional)"
    return ('<!doctype html><html lang="en" class="no-js"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{e(_csp())}">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>sandtable: pass^{e(top)} {e(pct(doc['summary']['pass_hat'].get(top)))} · {e(title)}{e(missing)}"
            f"</title><style>{_CSS}</style></head><body>")


def _header(run: Run, s: Summary, title: str) -> str:
    """The page header: what ran, when and how long, and the navigation."""
    meta = [f"agent <b>{e(', '.join(s['agents']) or run['agent'])}</b>",
            f"user <b>{e(', '.join(s['users']) or run['user'])}</b>",
            f"k={e(run['k'])}", f"run seed {e(run['run_seed'])}"]
    if run["started_at"]:
        meta.append(e(_time(run["started_at"])))
    wall = _wall(run)
    if wall is not None:
        meta.append(f"took {e(duration(wall))}")
    shards = run.get("shards")
    if shards:
        meta.append(f"merged from {len(shards)} shards")
    return ('<header><div class="brand">sandtable report</div>'
            f"<h1>{e(title)}</h1><div class=\"muted\">{' · '.join(meta)}</div>"
            '<nav><a href="#overview">Overview</a><a href="#tasks">Tasks</a><a href="#failure-modes">Failure modes</a>'
            '<a href="#tags">Scores</a><a href="#soft-rules">Soft rules</a><a href="#usage">Usage</a>'
            '<a href="#trials">Trials</a></nav></header>')


def _not_loaded(run: Run) -> str:
    """The banner at the top of the page for domain files that did not load."""
    errors = run.get("collection_errors") or []
    if not errors:
        return ""
    n = len(errors)
    paths = ", ".join(c["path"] for c in errors)
    their = "Their" if n != 1 else "Its"
    items = "".join(f'<details open><summary><code>{e(c["path"])}</code></summary>'
                    f'<pre>{e(c["message"])}</pre></details>' for c in errors)
    return (f'<section id="not-loaded" class="alert" role="alert"><h2>{plural(n, "domain file")} did '
            f"not load: {e(paths)}</h2><p>{their} tasks did not run and are in none of the figures below: "
            f"a score here covers the domains that loaded only.</p>{items}</section>")


def _provisional(s: Summary) -> str:
    """The banner at the top of a provisional run: the drafted items nobody accepted yet."""
    items: Sequence[PendingItem] = s.get("provisional") or []
    if not items:
        return ""
    multi = len(s["domains"]) > 1
    are = "is" if len(items) == 1 else "are"
    lis = "".join(f'<li>{e(p["kind"])} <code>{e(p["domain"] + "/" if multi else "")}{e(p["id"])}</code>'
                  f' <span class="muted">({e(plural(p["trials"], "trial"))} ran under it)</span></li>'
                  for p in items)
    return (f'<section id="provisional" class="alert warn" role="alert"><h2>Provisional: '
            f'{plural(len(items), "drafted item")} {are} pending review</h2><p>These results ran under drafted '
            "tasks or rules nobody has accepted yet: the figures may change once they are reviewed.</p>"
            f"<ul>{lis}</ul></section>")


def _ci_text(intervals: Intervals | None, j: str) -> str:
    """`` · 95% CI 62–100%`` for a score with an interval at j; nothing otherwise."""
    ci = (intervals or {}).get(j)
    return f" · 95% CI {pct_range(ci)}" if ci else ""


def _overview(s: Summary, gate: Gate, top: str) -> str:
    """The headline pass^k with its interval and the counts, the chart of pass^j against j,
    and the gate."""
    tasks = s["tasks"]
    verdicts = {v: sum(1 for t in tasks if t["verdict"] == v) for v in _VERDICT_ORDER}
    counts = " ".join(_badge(v, f"{verdicts[v]} {v}") for v in _VERDICT_ORDER if verdicts[v])
    hat_ci = s.get("pass_hat_ci")
    ci = (hat_ci or {}).get(top)
    interval = f'<div class="ci" id="headline-ci">95% CI {e(pct_range(ci))}</div>' if ci else ""
    bars = ' <span class="muted small">(bars: 95% CI)</span>' if hat_ci else ""
    at = s.get("pass_at")
    at_text = f" · pass@{e(top)} {e(pct(at.get(top)))}{e(_ci_text(s.get('pass_at_ci'), top))}" if at else ""
    return ('<section id="overview" class="hero">'
            f'<div class="card headline"><div class="label">pass^{e(top)} over {plural(len(tasks), "task")}'
            f'</div><div class="big" id="headline">{e(pct(s["pass_hat"].get(top)))}</div>{interval}'
            f'<div class="sub">pass^1 {e(pct(s["pass_hat"].get("1")))}{e(_ci_text(hat_ci, "1"))}{at_text}</div>'
            f'<div class="sub">{e(s["trials"])} trials: '
            f'{e(s["passed"])} passed, {e(s["failed"])} failed, {e(s["errored"])} errored</div>'
            f'<div class="counts">{counts}</div></div>'
            f'<div class="card"><h3>pass^j against j{bars}</h3>'
            f'{chart(s["pass_hat"], intervals=hat_ci)}</div>'
            f'<div class="card" id="gate"><h3>Gate</h3>{_gate(gate)}</div></section>')


def _with_ci(value: float | None, interval: Sequence[float] | None, mark: str = "") -> str:
    """A score and, under it, its 95% interval (when it has one)."""
    ci = f'<br><span class="ci">{e(pct_range(interval))}</span>' if interval else ""
    return f"{e(pct(value))}{e(mark)}{ci}"


def _task_row(t: TaskSummary, trials: Sequence[_Shown], idx: _Index, top: str) -> str:
    """A task's row of the tasks table: its name linking to its section, verdict, a square
    per trial, passed with the interval of the pass rate, pass^k with its interval, tags."""
    crit = ' <span class="badge crit">critical</span>' if t["critical"] else ""
    errored = f' <span class="muted">+{e(t["errored"])} errored</span>' if t["errored"] else ""
    rate_ci = t.get("rate_ci")
    rate = f'<br><span class="ci">rate {e(pct_range(rate_ci))}</span>' if rate_ci else ""
    cells = [
        f'<a href="#{idx.task(t["domain"], t["task"])}">{e(t["name"])}</a>{crit}',
        _badge(t["verdict"]),
        _dots(trials, idx),
        f'{e(t["passed"])}/{e(t["graded"])}{errored}{rate}',
        _with_ci(t["pass_hat"].get(top), (t.get("pass_hat_ci") or {}).get(top)),
        e(", ".join(t["tags"])),
    ]
    return f"<tr {_filterable(t)}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _folded_note(layout: _Layout) -> str:
    """Above the tasks table of a page with folds: how many tasks are in them, which, and
    how they are listed."""
    folded = sum(len(group) for is_fold, group in layout if is_fold)
    tasks = sum(len(group) for _, group in layout)
    if not folded:
        return ""
    return (f'<p class="muted small" id="folded-note">{e(folded)} of {e(plural(tasks, "task"))} are stored compressed, '
            f"up to {TASKS_PER_BLOCK} a fold, to keep the page quick to open: those that passed every trial and, "
            f"past the first {TASKS_INLINE} that did not (or are critical), the others. A fold lists its tasks when "
            "it is opened, when a link leads to one of them, or when the name filter finds one in it; this needs "
            "JavaScript.</p>")


def _tasks(layout: _Layout, placed: _Placed, idx: _Index, top: str) -> Iterator[str]:
    """The tasks table, with the filters: a row per task in full, and a fold (a row group
    of its own) per block of compressed tasks. One piece per row or fold."""
    head = "".join(f"<th>{e(h)}</th>" for h in ["task", "verdict", "trials", "passed", f"pass^{top}", "tags"])
    yield ('<section id="tasks"><h2>Tasks <span class="muted small">(under each figure its 95% CI: the '
           "Wilson interval of the task's pass rate; a task that passed every trial may still be flaky)</span></h2>"
           '<div class="filters js-only"><button data-verdict="all" class="on">all</button>'
           '<button data-verdict="notpassed">not passed</button><button data-verdict="flaky">flaky</button>'
           '<button data-verdict="failed">failed</button><button data-verdict="critical">critical</button>'
           '<input id="q" type="search" placeholder="filter tasks by name or tag" aria-label="filter tasks"></div>'
           + _folded_note(layout)
           + f'<div class="tablewrap"><table class="tasks"><thead><tr>{head}</tr></thead>')
    in_body = False  # within a <tbody> of rows in full
    for is_fold, group in layout:
        if is_fold:
            rows = [_task_row(t, placed.trials_of(t), idx, top) for _, t in group]
            yield ("</tbody>" if in_body else "") + _rows_fold(group, rows, placed.blocks)
            in_body = False
            continue
        _, t = group[0]
        yield ("" if in_body else "<tbody>") + _task_row(t, placed.trials_of(t), idx, top)
        in_body = True
    yield ("</tbody>" if in_body else "" if layout else "<tbody></tbody>") + "</table></div></section>"


def _owners_text(owners: Mapping[str, int] | None) -> str:
    return ", ".join(f"{o} {n}" for o, n in (owners or {}).items())


def _failure_modes(s: Summary, idx: _Index) -> str:
    """Failed checks across trials, each with its likely owners and an example linking to
    its trial; then the failed trials by likely owner."""
    modes: Sequence[FailureMode] = s["failure_modes"]
    if not modes:
        return '<section id="failure-modes"><h2>Failure modes</h2><p class="muted">No check failed.</p></section>'
    owned = any(m.get("owners") for m in modes)
    rows = []
    for m in modes:
        ex = m["example"]
        link = idx.trial(ex["domain"], ex["task"], ex["trial"])
        row = [f"<code>{e(m['kind'])}</code>", f"<code>{e(m['id'])}</code>",
               f'<span class="num">{e(m["trials"])}</span>']
        if owned:
            row.append(e(_owners_text(m.get("owners"))))
        rows.append([*row, f'<a href="#{link}">{e(idx.name(ex["domain"], ex["task"]))} [{e(ex["trial"])}]</a>: '
                           f'{e(ex["detail"])}'])
    headers = ["kind", "check", "trials", *(["likely owners"] if owned else []), "example"]
    return ('<section id="failure-modes"><h2>Failure modes</h2><div class="tablewrap">'
            + _table(headers, rows, "modes") + "</div>" + _owner_clusters(s) + "</section>")


def _owner_clusters(s: Summary) -> str:
    """The failed trials by likely owner: how many, and which tasks."""
    owners: Sequence[OwnerCluster] = s.get("owners") or []
    if not owners:
        return ""
    unattributed = s["failed"] - sum(o["trials"] for o in owners)
    rows = [[f"<b>{e(o['owner'])}</b>", f'<span class="num">{e(o["trials"])}</span>', e(", ".join(o["tasks"]))]
            for o in owners]
    if unattributed > 0:
        rows.append(['<span class="muted">not attributed</span>', f'<span class="num">{e(unattributed)}</span>', ""])
    return (f'<h3 class="sub-h">Likely owners of {e(plural(s["failed"], "failed trial"))}</h3>'
            '<div class="tablewrap">' + _table(["owner", "failed trials", "tasks"], rows, "owners") + "</div>")


_FEWER = "*"


def _score_tables(groups: Sequence[tuple[str, Score]], js: Sequence[str], at: bool) -> tuple[str, bool]:
    """The pass^j table and, when ``at``, the pass@j one, at ``js``; and whether a cell is marked."""
    hat, marked = _score_table(groups, js, "pass_hat")
    out = f'<h3 class="sub-h">pass^j: all of j trials pass</h3><div class="tablewrap">{hat}</div>'
    if at:
        table, more = _score_table(groups, js, "pass_at")
        marked = marked or more
        out += f'<h3 class="sub-h">pass@j: at least one of j trials passes</h3><div class="tablewrap">{table}</div>'
    return out, marked


def _score_table(groups: Sequence[tuple[str, Score]], js: Sequence[str], measure: str) -> tuple[str, bool]:
    """One table of pass^j (``measure`` ``pass_hat``) or pass@j (``pass_at``) with their
    intervals, a row per group; and whether a cell counts fewer tasks than j = 1 (marked)."""
    marked = False
    rows = []
    for label, score in groups:
        values: Mapping[str, float | None] = score.get(measure) or {}  # type: ignore[assignment]
        intervals: Mapping[str, Any] = score.get(f"{measure}_ci") or {}  # type: ignore[assignment]
        counted = (score.get("pass_at_tasks") if measure == "pass_at" else None) or score.get("pass_hat_tasks") or {}
        cells = []
        for j in js:
            fewer = "1" in counted and values.get(j) is not None and counted.get(j, 0) < counted["1"]
            marked = marked or fewer
            cells.append(_with_ci(values.get(j), intervals.get(j), _FEWER if fewer else ""))
        rows.append([label, e(score["tasks"]), *cells])
    sign = "^" if measure == "pass_hat" else "@"
    return _table(["", "tasks"] + [f"pass{sign}{j}" for j in js], rows, f"scores {measure}"), marked


def chosen_js(js: Sequence[str]) -> list[str]:
    """The j a table or chart shows at a glance: every j up to :data:`JS_SHOWN` of them;
    past that 1, 2, 4, 8, ... and the largest (k)."""
    ordered = sorted(js, key=int)
    if len(ordered) <= JS_SHOWN:
        return ordered
    have = set(ordered)
    powers = [str(1 << n) for n in range(int(ordered[-1]).bit_length()) if str(1 << n) in have]
    return [j for j in powers if j != ordered[-1]] + [ordered[-1]]


def _tags(s: Summary, blocks: _Blocks) -> str:
    """pass^j and pass@j with their 95% intervals: over all tasks, per domain (several
    domains), then per tag. Every j, or, past :data:`JS_SHOWN` of them, the j of
    :func:`chosen_js`, with the tables of every j in a compressed fold."""
    every = sorted(s["pass_hat"], key=int)
    js = chosen_js(every)
    overall: Score = {"tasks": len(s["tasks"]), "pass_hat": s["pass_hat"]}
    for field in ("pass_hat_ci", "pass_hat_tasks", "pass_at", "pass_at_ci", "pass_at_tasks"):
        if field in s:
            overall[field] = s[field]  # type: ignore[literal-required]
    groups: list[tuple[str, Score]] = [("<b>all tasks</b>", overall)]
    groups += [(f"domain <b>{e(d)}</b>", score) for d, score in (s.get("domain_scores") or {}).items()]
    groups += [(e(tag), score) for tag, score in s["tags"].items()]
    parts = ['<section id="tags"><h2>Scores <span class="muted small">(under each figure its 95% CI)</span></h2>']
    tables, marked = _score_tables(groups, js, "pass_at" in s)
    parts.append(tables)
    if js != every:
        full, _ = _score_tables(groups, every, "pass_at" in s)
        parts.append(f'<details class="group" id="every-j" data-g="{e(blocks.group([full]))}"><summary>pass^j and '
                     f"pass@j for every j from 1 to {e(every[-1])} ({len(every)} columns), stored compressed"
                     '</summary><div class="group-body lazy"></div></details>')
    if marked:
        parts.append(f'<p class="muted small">{_FEWER} counts fewer tasks than j = 1: a task with fewer than j graded '
                     "trials (errored ones are not graded) is left out of pass^j and pass@j.</p>")
    if not s["tags"]:
        parts.append('<p class="muted">No task has a tag.</p>')
    return "".join(parts) + "</section>"


def _soft_rules(rules: Sequence[SoftRuleRate]) -> str:
    """How often each soft rule was broken where it applied."""
    head = ('<section id="soft-rules"><h2>Soft rules <span class="muted small">(reported, never fail a trial)</span>'
            "</h2>")
    if not rules:
        return head + '<p class="muted">The domain has no soft rule.</p></section>'
    rows = []
    for r in rules:
        scope = f"trials that called {r['tool']}" if r["tool"] else "trials"
        rows.append([f"<code>{e(r['id'])}</code>", e(pct(r["rate"])),
                     e(f"broken in {r['broken']} of {r['applied']} {scope}")])
    return head + '<div class="tablewrap">' + _table(["rule", "broken", ""], rows) + "</div></section>"


_CURLY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _marked(text: str, quotes: Sequence[tuple[str, str]]) -> str:
    """``text`` escaped, each of ``quotes`` (quote, who quoted it) in it marked; a quote is
    found as the judge was held to it: whitespace and curly quotes aside."""
    spans: list[tuple[int, int, str]] = []
    for quote, who in quotes:
        words = quote.translate(_CURLY).strip().strip('"').removesuffix("...").removeprefix("...").split()
        if not words:
            continue
        pattern = r"\s+".join(re.escape(w) for w in words)
        found = re.search(pattern, text.translate(_CURLY))  # the same length: the indices hold
        if found:
            spans.append((found.start(), found.end(), who))
    out, at = [], 0
    for start, end, who in sorted(spans, key=lambda s: (s[0], -s[1])):  # the longer of two at one place
        if start < at:  # overlapping quotes: the earlier mark holds
            continue
        out.append(e(text[at:start]) + f'<mark class="evidence" title="{e(who)}">{e(text[start:end])}</mark>')
        at = end
    return "".join(out) + e(text[at:])


JUDGED_TRIALS_SHOWN = 500
"""The judged trials the Judged scores section lists with their evidence; the rest are in results.json."""


def _judged_counts(r: Mapping[str, Any]) -> list[str]:
    return [_with_ci(r.get("rate"), r.get("interval")), e(r.get("scored")), e(r.get("void")), e(r.get("split")),
            e(r.get("na")), e(r.get("disagreements"))]


def _judged(judged: Mapping[str, Any] | None) -> str:
    """Judged soft scores (--sandtable-judge, docs/judges.md): per criterion and tag, then
    each judged trial's verdicts with the transcript lines the judges quoted, the quotes
    marked; nothing when absent. Never part of a verdict or the gate, and says so."""
    if not judged:
        return ""
    parts = ['<section id="judged-scores" class="judged"><h2>Judged scores <span class="muted small">(',
             e(", ".join(judged.get("judges") or ())),
             "; reported only: never a verdict, a gate or the exit status)</span></h2>"]
    heads = ["yes", "scored", "void", "split", "n/a", "disagree"]
    rows = [[f"<code>{e(r.get('criterion'))}</code>", e(r.get("question")), *_judged_counts(r),
             e("calibrated" if r.get("calibrated") else "uncalibrated")] for r in judged.get("criteria") or ()]
    parts.append('<div class="tablewrap">' + _table(["criterion", "question", *heads, "calibration"], rows,
                                                    cls="judged-criteria", num=range(2, 8)) + "</div>")
    tags = [[e(r.get("tag")), f"<code>{e(r.get('criterion'))}</code>", *_judged_counts(r)]
            for r in judged.get("tags") or ()]
    if tags:
        parts.append("<h3>By tag</h3>" + '<div class="tablewrap">'
                     + _table(["tag", "criterion", *heads], tags, cls="judged-tags", num=range(2, 8)) + "</div>")
    cost = judged.get("cost") or {}
    parts.append(f'<p class="muted">{e(judged.get("calls"))} judge calls, {e(judged.get("cached"))} verdicts from '
                 f"the judge cache, cost {e(format_cost(cost.get('total')))} (apart from the agent's and the "
                 "user's)</p><h3>Verdicts and their evidence</h3>")
    judged_trials = list(judged.get("trials") or ())
    for t in judged_trials[:JUDGED_TRIALS_SHOWN]:
        evidence = t.get("evidence") or {}
        items = []
        quotes: dict[str, list[tuple[str, str]]] = {}
        for c in t.get("criteria") or ():
            verdicts = []
            for j in c.get("judges") or ():
                if j.get("void"):
                    verdicts.append(f'<span class="void">{e(j.get("judge"))}: void, {e(j.get("void"))}</span>')
                else:
                    verdicts.append(e(f"{j.get('judge')}: {j.get('verdict')}"))
                if isinstance(j.get("at"), int) and j.get("quote"):
                    quotes.setdefault(str(j["at"]), []).append((str(j["quote"]), f"{c.get('criterion')}: "
                                                                                 f"{j.get('judge')}"))
            split = " (judges disagree)" if c.get("disagreement") else ""
            items.append(f"<li><code>{e(c.get('criterion'))}</code> <b>{e(c.get('verdict'))}</b>{e(split)}"
                         f' <span class="muted small">{"; ".join(verdicts)}</span></li>')
        lines = "".join(f'<div class="judged-line"><span class="muted">{e(ev.get("label"))}:</span> '
                        f'{_marked(str(ev.get("text", "")), quotes.get(at, []))}</div>'
                        for at, ev in sorted(evidence.items(), key=lambda kv: int(kv[0])))
        parts.append(f'<details class="judged-trial"><summary>{e(t.get("task"))}[{e(t.get("trial"))}] '
                     f'<span class="muted small">{e(t.get("verdict"))}</span></summary><ul>{"".join(items)}</ul>'
                     f"{lines}</details>")
    if len(judged_trials) > JUDGED_TRIALS_SHOWN:
        parts.append(f'<p class="muted">{e(len(judged_trials) - JUDGED_TRIALS_SHOWN)} more judged trials are in '
                     "results.json (judged.trials).</p>")
    return "".join(parts) + "</section>"


_COVERAGE_LEVELS = ("boundary", "both-outcomes", "could-fire", "applied", "declared")  # highest first


def _coverage(coverage: Sequence[Mapping[str, Any]] | None) -> str:
    """The policy coverage of the run's trials, per domain file: the rules at each level,
    then one row per rule (docs/grading.md, "Policy coverage"); nothing when absent."""
    if not coverage:
        return ""
    parts = ['<section id="policy-coverage"><h2>Policy coverage <span class="muted small">(how far the trials '
             "went with each rule)</span></h2>"]
    for cov in coverage:
        levels = cov.get("levels") or {}
        counts = ", ".join(f"{_number(levels.get(lv))} {lv}" for lv in _COVERAGE_LEVELS if levels.get(lv))
        parts.append(f'<h3><code>{e(cov.get("domain"))}</code> <span class="muted small">{e(cov.get("path"))}'
                     f' · {e(cov.get("trials"))} trials · {e(counts or "no rule")}</span></h3>')
        rows = [[f"<code>{e(r.get('id'))}</code>", e(str(r.get("kind", "")) + (" (soft)" if r.get("soft") else "")),
                 e(r.get("level")), e(r.get("calls")), e(r.get("applied")), e(r.get("held")), e(r.get("broken")),
                 e(len(r.get("tasks") or ()))]
                for r in cov.get("rules") or ()]
        if rows:
            parts.append('<div class="tablewrap">'
                         + _table(["rule", "kind", "level", "calls", "applied", "held", "broken", "tasks"], rows,
                                  cls="coverage", num=range(3, 8))
                         + "</div>")
        notes = ([f"no trial reaches rule {r}" for r in cov.get("unreached_rules") or ()]
                 + [f"quoted by no rule: {x}" for x in cov.get("unquoted_sentences") or ()]
                 + [f"task {t} exercises no rule" for t in cov.get("tasks_without_rules") or ()]
                 + [f"not replayed to the end: {n}" for n in cov.get("notes") or ()])
        if notes:
            parts.append('<ul class="muted">' + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    return "".join(parts) + "</section>"


_MUTANT_STATES = ("killed", "survived", "equivalent", "accepted", "invalid")


def _mutation(mutation: Mapping[str, Any] | None) -> str:
    """``--sandtable-mutate``: per domain file the mutation score, the trivial-agent
    baselines, the counts by operator and by task, then every survivor with the
    expectation that would catch it (docs/mutate.md); nothing when absent."""
    if not isinstance(mutation, Mapping):
        return ""
    totals = mutation.get("totals") or {}
    gates = []
    if isinstance(mutation.get("fail_under"), (int, float)):
        gates.append(f"--sandtable-mutate-fail-under {mutation['fail_under']:g}%")
    if mutation.get("fail_on_weak"):
        gates.append("--sandtable-mutate-fail-on-weak")
    parts = ['<section id="mutation"><h2>Mutation <span class="muted small">(each task\'s reference rewritten '
             "into faults and replayed: how many its checks catch)</span></h2>",
             f'<p>Score <strong>{e(pct(totals.get("score")))}</strong> · {e(_number(totals.get("killed")))} killed, '
             f'{e(_number(totals.get("survived")))} survived of {e(_number(totals.get("generated")))} mutants · '
             f'{e(_number(totals.get("weak_tasks")))} weak tasks'
             + (f' · gated by {e(", ".join(gates))}' if gates else "") + "</p>"]
    for dom in mutation.get("domains") or ():
        counts = dom.get("counts") or {}
        parts.append(f'<h3><code>{e(dom.get("domain"))}</code> <span class="muted small">{e(dom.get("path"))}'
                     f' · score {e(pct(dom.get("score")))} · {e(_number(counts.get("generated")))} mutants · '
                     f'{e(_number(len(dom.get("weak_tasks") or ())))} weak tasks</span></h3>')
        base = dom.get("baselines") or {}
        if base:
            def listed(ids: Any) -> str:
                ids = [str(i) for i in ids or ()]
                return f" ({', '.join(ids)})" if ids else ""

            parts.append(f'<p class="muted">Trivial agents: doing nothing passes '
                         f'{e(len(base.get("do_nothing") or ()))} of {e(base.get("tasks"))} tasks'
                         f'{e(listed(base.get("do_nothing")))}; spam passes {e(len(base.get("spam") or ()))}'
                         f'{e(listed(base.get("spam")))}.</p>')
        ops = [[e(o.get("operator")), e(o.get("expected")),
                *(e((o.get("counts") or {}).get(st, 0)) for st in ("generated", *_MUTANT_STATES))]
               for o in dom.get("operators") or ()]
        if ops:
            parts.append('<div class="tablewrap">' + _table(["operator", "expected", "mutants", *_MUTANT_STATES],
                                                            ops, cls="mutation", num=range(2, 8)) + "</div>")
        tasks = [[e(t.get("task")), *(e((t.get("counts") or {}).get(st, 0)) for st in ("generated", *_MUTANT_STATES)),
                  e(pct(t.get("score"))), e("weak" if t.get("weak") else (t.get("skipped") and "not mutated") or "")]
                 for t in dom.get("tasks") or ()]
        if tasks:
            parts.append('<div class="tablewrap">' + _table(["task", "mutants", *_MUTANT_STATES, "score", ""], tasks,
                                                            cls="mutation-tasks", num=range(1, 8)) + "</div>")
        survivors = dom.get("survivors") or ()
        if survivors:
            parts.append(f"<h4>Survived ({e(len(survivors))})</h4><ul class=\"survivors\">")
            for m in survivors:
                must = "must be caught" if m.get("expected") == "must" else "may survive"
                fix = f'<br><span class="muted">catch it with:</span> <code>{e(m.get("suggestion"))}</code>' \
                    if m.get("suggestion") else ""
                parts.append(f'<li><code>{e(m.get("task"))}</code>: <code>{e(m.get("id"))}</code> '
                             f'<span class="muted">({e(must)})</span>: {e(m.get("diff"))}{fix}</li>')
            parts.append("</ul>")
        notes = ([f"invalid: {m.get('task')}: {m.get('id')}: {m.get('reason')}" for m in dom.get("invalid") or ()]
                 + [f"not mutated: {t.get('task')}: {t.get('skipped')}" for t in dom.get("tasks") or ()
                    if t.get("skipped")]
                 + [f"line {p.get('line')}: {p.get('key')}: {p.get('message')}" for p in dom.get("problems") or ()])
        decorative = list(dom.get("decorative") or ())
        if decorative:
            notes.append(f"decorative checks, killed no mutant: {', '.join(str(d) for d in decorative)}")
        if notes:
            parts.append('<ul class="muted">' + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    return "".join(parts) + "</section>"
def _adaptive(section: Mapping[str, Any] | None) -> str:
    """An adaptive run's design, each task's sequential verdict with its trials and
    anytime-valid interval, and the trials it spent against a fixed k (docs/results.md,
    "Adaptive runs"); with a stored baseline, each task's regression test and the tasks
    e-BH flags; nothing in other runs."""
    if not section:
        return ""
    from .adaptive import regression_cell, regression_line, saving_line, shown_verdict

    badge = {"reliable": "passed", "unreliable": "failed", "inconclusive": "flaky", "open": "skipped"}
    d = section.get("design") or {}
    rows = [[f"<code>{e(t.get('domain'))}/{e(t.get('task'))}</code>",
             _badge(badge.get(str(t.get("verdict")), "skipped"), shown_verdict(t)),  # type: ignore[arg-type]
             e(t.get("graded")), e(f"{t.get('passes')}/{t.get('graded')}"),
             e(pct_range(t.get("interval"))), e(f"{float(t.get('e_value') or 0):.3g}"),
             e(t.get("stopped_at") if t.get("stopped_at") is not None else "–"),
             e(", ".join(map(str, t.get("uncounted") or ())) or "–")]
            for t in section.get("tasks") or ()]
    part = section.get("regression")
    headers = ["task", "verdict", "graded trials", "passed", "anytime 95% CI", "e-value", "stopped at",
               "uncounted trials"]
    regression = ""
    if isinstance(part, Mapping):
        headers.append("against the baseline")
        for row, t in zip(rows, section.get("tasks") or ()):
            row.append(e(regression_cell(t)))  # type: ignore[arg-type]
        against = ("each task's trials paired with the baseline's of the same seeds, a sequential McNemar test"
                   if part.get("design") == "paired" else "each task against the stored baseline's exact lower bound")
        regression = (f'<p class="regression"><strong>{e(regression_line(part))}</strong> '  # type: ignore[arg-type]
                      f'<span class="muted">({e(against)}; e-BH '
                      "bounds the share of false alarms among the flagged tasks)</span></p>")
    return ('<section id="adaptive"><h2>Adaptive trials <span class="muted small">(each task stopped once its '
            "verdict was settled)</span></h2>"
            f'<p class="muted">reliable: a pass rate of at least {e(d.get("p0"))} (alpha {e(d.get("alpha"))}); '
            f'unreliable: below {e(d.get("p1"))} (beta {e(d.get("beta"))}); at most {e(d.get("cap"))} trials a '
            "task. Intervals are anytime-valid (they hold however the run stopped), not Wilson; pass^j counts a "
            "task only with at least j graded trials of this adaptive sample.</p>"
            '<div class="tablewrap">'
            + _table(headers, rows, cls="adaptive", num=(2, 3, 5, 6))
            + f'</div><p class="saving">{e(saving_line(section))}</p>{regression}</section>')  # type: ignore[arg-type]


def _cost_notes(cost: object) -> str:
    """Where the costs come from. ``cost`` is the summary's: readers accept any JSON value
    there (the schema leaves it open), so anything but an object reads as not computed."""
    if not isinstance(cost, Mapping):
        return "Cost not computed."
    notes = []
    currency = str(cost.get("currency") or "USD")
    as_of = cost.get("prices_as_of")
    notes.append(f"Cost estimated at list prices{f' as of {e(as_of)}' if as_of else ''} ({e(currency)})"
                 "; a --sandtable-prices file adds or overrides prices.")
    unpriced = [str(m) for m in cost.get("unpriced") or []]
    if unpriced:
        notes.append(f"No price for {', '.join(f'<code>{e(m)}</code>' for m in unpriced)}: its cost is n/a.")
    return " ".join(notes)


def _usage_table(s: Summary) -> str:
    """Tokens and estimated cost per side and model with a total row, and the prices' date."""
    from .usage import COST_HEADERS_WITH_CALLS, cost_rows

    cost = s.get("cost")
    rows = cost_rows(s["usage"], cost if isinstance(cost, Mapping) else None, calls=True)
    if not rows:
        return ('<p class="muted small">No model calls were recorded (a scripted user and a model-free agent), '
                "so there is no cost.</p>")
    cells = [[e(side) if side != "total" else "<b>total</b>", f"<code>{e(model)}</code>" if model else "",
              *(e(x) for x in rest)] for side, model, *rest in rows]
    total = "total" if rows[-1][0] == "total" else ""
    return ('<div class="tablewrap">' + _table(COST_HEADERS_WITH_CALLS, cells, "usage", num=range(2, 8),
                                               last_row_cls=total) + "</div>"
            + f'<p class="muted small">{_cost_notes(cost)}</p>')


def _cache_saving(s: Summary) -> list[tuple[str, str]]:
    """The ``prompt cache`` entry of the usage card, when a model used a prompt cache."""
    from .usage import cache_saving_text

    text = cache_saving_text(s.get("cost"))
    return [] if text is None else [("prompt cache", text)]


def _usage(s: Summary, total_time: float, trials: int) -> str:
    """The usage, cost and latency card: the usage table, agent turn latency and trial
    time (``total_time`` seconds over ``trials`` trials)."""
    lat = s["latency"]
    per = duration(total_time / trials) if trials else "n/a"
    kv = [("agent turn latency", f"p50 {duration(lat['p50'])} · p95 {duration(lat['p95'])} "
                                 f"over {plural(lat['turns'], 'turn')}"),
          ("trial time", f"{duration(total_time)} in all, {per} per trial")]
    kv += _cache_saving(s)
    return ('<section id="usage"><h2>Usage, cost and latency</h2><div class="card">' + _usage_table(s)
            + '<dl class="kv">' + "".join(f"<dt>{e(a)}</dt><dd>{e(b)}</dd>" for a, b in kv) + "</dl></div></section>")


def _errored(errored: Sequence[ErroredTrial], idx: _Index) -> str:
    """The trials that errored and why, each linking to its trial."""
    if not errored:
        return ""
    items = "".join(f'<li><a href="#{idx.trial(x["domain"], x["task"], x["trial"])}">'
                    f'{e(idx.name(x["domain"], x["task"]))} [{e(x["trial"])}]</a>: {e(x["error"])}</li>'
                    for x in errored)
    return (f'<section id="errored"><h2>Errored trials <span class="muted small">(left out of pass^k)</span></h2>'
            f"<ul>{items}</ul></section>")


def _trial(s: _Shown, idx: _Index) -> str:
    """One trial: a ``<details>`` with its summary line and its body, open when it did not
    pass; a compressed one with an empty body that the page's script fills when opened."""
    if not s.head:
        return s.body
    anchor = idx.trial(s.domain, s.task, s.trial)
    if s.ref:
        return (f'<details class="trial v-{e(s.verdict)}" id="{anchor}" data-z="{e(s.ref)}"><summary>{s.head}'
                '</summary><div class="trial-body lazy"></div></details>')
    is_open = " open" if s.verdict != "passed" else ""
    return (f'<details class="trial v-{e(s.verdict)}" id="{anchor}"{is_open}><summary>{s.head}</summary>'
            f'<div class="trial-body">{s.body}</div></details>')


def _task_trials(t: TaskSummary, trials: Sequence[_Shown], idx: _Index, top: str, blocks: _Blocks,
                 flat: bool = False) -> str:
    """A task's card: its verdict and pass^k, then its trials, those that did not pass
    first. Its compressed passing trials are listed in a block of their own, in a fold
    that lists them when opened: a big run's page holds no line per passing trial. A
    ``flat`` card (one stored in a compressed block itself) lists every trial."""
    crit = '<span class="badge crit">critical</span>' if t["critical"] else ""
    tags = f'<span class="muted">{e(", ".join(t["tags"]))}</span>' if t["tags"] else ""
    ordered = sorted(trials, key=lambda s: (s.verdict == "passed", s.trial))
    anchor = idx.task(t["domain"], t["task"])
    listed = [s for s in ordered if flat or not s.ref]
    folded = [] if flat else [s for s in ordered if s.ref]
    more = _fold(f"{anchor}-more", [s for s in folded if s.verdict != "passed"], "more trial", idx, blocks)
    passed = _fold(f"{anchor}-passed", [s for s in folded if s.verdict == "passed"], "passed trial", idx, blocks)
    return (f'<div class="task" id="{anchor}" {_filterable(t)}><div class="task-head">'
            f'<h3>{e(t["name"])}</h3>{_badge(t["verdict"])}{crit}<span class="muted">{e(t["passed"])}/'
            f'{e(t["graded"])} passed · pass^{e(top)} {e(pct(t["pass_hat"].get(top)))}</span>{tags}</div>'
            + "".join(_trial(one, idx) for one in listed) + more + passed + "</div>")


def _fold(anchor: str, trials: Sequence[_Shown], word: str, idx: _Index, blocks: _Blocks) -> str:
    """A fold standing for compressed trials of a task, whose lines are a block of their
    own: the page holds one element for them until it is opened."""
    if not trials:
        return ""
    ref = blocks.group([_trial(one, idx) for one in trials])
    return (f'<details class="group" id="{anchor}" data-g="{e(ref)}"><summary>{e(plural(len(trials), word))}, '
            'stored compressed</summary><div class="group-body lazy"></div></details>')


def _compressed_note(placed: _Placed) -> str:
    """What a reader of a big report needs to know: which trials are compressed, and that
    opening them takes JavaScript."""
    if not placed.compressed:
        return ""
    return (f'<p class="muted small" id="compressed-note">{e(placed.compressed)} of {e(plural(placed.count, "trial"))}'
            " are stored compressed in this page to keep it quick to open; opening them needs JavaScript "
            "(results.json holds every trial). Failing and errored trials are listed first in their task and "
            f"shown in full, up to {placed.per_task_limit} a task.</p>")


_Layout = list[tuple[bool, list[tuple[int, TaskSummary]]]]
"""The tasks in the page's order, by their number: each ``(False, [task])`` in full, or
``(True, tasks)`` a fold of compressed tasks."""


def _layout(tasks: Sequence[TaskSummary], placed: _Placed) -> _Layout:
    """Where each task goes. In a page of more than :data:`TASKS_INLINE` tasks with
    compressed trials, the tasks that :meth:`_Placed.folded` says may be compressed are,
    consecutive ones of the same verdict (and criticality) :data:`TASKS_PER_BLOCK` a fold;
    every other task is in full."""
    gather = bool(placed.compressed) and len(tasks) > TASKS_INLINE
    layout: _Layout = []
    for no, t in enumerate(tasks, 1):
        if not (gather and placed.folded(t)):
            layout.append((False, [(no, t)]))
            continue
        last = layout[-1][1] if layout and layout[-1][0] else []
        if last and len(last) < TASKS_PER_BLOCK and _kind(last[-1][1]) == _kind(t):
            last.append((no, t))
        else:
            layout.append((True, [(no, t)]))
    return layout


def _kind(t: TaskSummary) -> tuple[str, bool]:
    """What a fold's tasks share: their verdict and criticality (how the filters find them)."""
    return t["verdict"], t["critical"]


def _group_label(group: Sequence[tuple[int, TaskSummary]]) -> str:
    """A fold's summary line: how many tasks of which verdict, the first and last, their trials."""
    t = group[0][1]
    passed = t["verdict"] == "passed"
    noun = ("critical " if t["critical"] else "") + ("" if passed else f"{t['verdict']} ") + "task"
    trials = sum(one["graded"] + one["errored"] for _, one in group)
    span = t["name"] + ("" if len(group) == 1 else " to " + group[-1][1]["name"])
    return (f"{plural(len(group), noun)}{' that passed every trial' if passed else ''} ({span}, "
            f"{plural(trials, 'trial')}), stored compressed")


def _group_filterable(group: Sequence[tuple[int, TaskSummary]]) -> str:
    """The attributes the filters read of a fold: its tasks' verdict and criticality, and
    every name and tag in it, so that a filter finds the fold by any of its tasks."""
    t = group[0][1]
    names = " ".join((one["name"] + " " + " ".join(one["tags"])).lower() for _, one in group)
    return (f'data-filterable data-verdict="{e(t["verdict"])}" data-critical="{1 if t["critical"] else 0}" '
            f'data-name="{e(names)}"')


def _tasks_fold(group: Sequence[tuple[int, TaskSummary]], cards: list[str], blocks: _Blocks) -> str:
    """A fold standing for the trial sections (``cards``) of a block of tasks, stored as one
    block; ``data-tasks`` is the range of their numbers, by which a link to one of them
    opens it."""
    ref = blocks.group(cards)
    first, last = group[0][0], group[-1][0]
    return (f'<details class="group" id="tasks-{first}-{last}" data-g="{e(ref)}" data-tasks="{first}-{last}" '
            f'{_group_filterable(group)}><summary>{e(_group_label(group))}</summary>'
            '<div class="group-body lazy"></div></details>')


def _rows_fold(group: Sequence[tuple[int, TaskSummary]], rows: list[str], blocks: _Blocks) -> str:
    """A fold of the tasks table standing for the ``rows`` of a block of tasks: a row group
    of its own, which the page's script replaces with the rows when the fold is opened."""
    ref = blocks.group(rows)
    first, last = group[0][0], group[-1][0]
    return (f'<tbody class="fold" {_group_filterable(group)}><tr><td colspan="6"><details class="group" '
            f'id="rows-{first}-{last}" data-g="{e(ref)}" data-rows="{first}-{last}"><summary>'
            f'{e(_group_label(group))}</summary><div class="group-body lazy"></div></details></td></tr></tbody>')


def _trials(layout: _Layout, placed: _Placed, idx: _Index, top: str) -> Iterator[str]:
    """Every trial, task by task: failing ones first and open, passing ones folded. One
    piece per task, or per fold of compressed tasks' sections (each listing every trial
    of its task), so that the page is written as it is rendered."""
    yield ('<section id="trials"><h2>Trials</h2>' + _compressed_note(placed) + '<div class="filters js-only">'
           '<button id="expand" type="button">expand all</button><button id="collapse" type="button">collapse all'
           "</button></div>")
    for is_fold, group in layout:
        if is_fold:
            cards = [_task_trials(t, placed.trials_of(t), idx, top, placed.blocks, flat=True) for _, t in group]
            yield _tasks_fold(group, cards, placed.blocks)
        else:
            _, t = group[0]
            yield _task_trials(t, placed.trials_of(t), idx, top, placed.blocks)
    yield "</section>"


class _Blocks:
    """Trial bodies stored compressed: gathered into blocks of about :data:`BLOCK_SIZE`
    characters, each a JSON list of their data (:func:`_trial_data`; a group's block: of
    HTML strings), gzip-compressed and base64-encoded in a
    data block of its own. Finished blocks wait in a temporary file (in memory while
    small) until the page reaches its end. ``clean`` is what the page's text goes through
    (secrets redacted), applied to a group's lines (bodies come cleaned)."""

    def __init__(self, clean: Callable[[str], str]) -> None:
        self.clean = clean
        self.spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_SIZE, mode="w+", encoding="utf-8")
        self.pending: list[str] = []
        self.size = 0
        self.blocks = 0
        self.groups = 0

    def add(self, body: str) -> str:
        """Store ``body``; its reference, ``"block.item"``."""
        ref = f"z{self.blocks}.{len(self.pending)}"
        self.pending.append(body)
        self.size += len(body)
        if self.size >= BLOCK_SIZE:
            self._flush()
        return ref

    def group(self, lines: list[str]) -> str:
        """Store lines shown together (a task's compressed trials, a fold's tasks) as a block
        of their own; its id."""
        self.groups += 1
        ref = f"g{self.groups}"
        self._write(ref, json.dumps([self.clean(line) for line in lines], ensure_ascii=False))
        return ref

    def _flush(self) -> None:
        if not self.pending:
            return
        self._write(f"z{self.blocks}", "[" + ",".join(self.pending) + "]")  # each item JSON already
        self.blocks += 1
        self.pending, self.size = [], 0

    def _write(self, ref: str, text: str) -> None:
        """A block: ``text``, a JSON list, compressed."""
        gz = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: the gzip format DecompressionStream reads
        raw = text.encode("utf-8")
        data = base64.b64encode(gz.compress(raw) + gz.flush()).decode("ascii")
        self.spool.write(f'<script type="application/octet-stream" id="{ref}">{data}</script>')

    def write_to(self, fp: TextSink) -> None:
        """Every block, into ``fp``; the temporary file is gone after."""
        self._flush()
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, fp)  # type: ignore[misc]
        self.spool.close()


class _Placed:
    """Every trial read once, as the document gives them, and placed: in full in the page
    (its body rendered as HTML), or compressed (its body's data, :func:`_trial_data`, as
    compact JSON; see the module's docstring). While every trial may still fit in the page,
    the trials' data is held (as UTF-8), its HTML size estimated from its length; bodies in
    full are held only while they are to be shown, so memory stays within
    :data:`INLINE_LIMIT` characters besides a summary line per trial."""

    def __init__(self, clean: Callable[[str], str], limit: int, tasks: Sequence[TaskSummary],
                 bounded: bool = False) -> None:
        self.clean = clean
        self.bounded = bounded  # the trials are a spool's, stored within the caps: no need to look again
        # their strict JSON has no NaN (which orjson writes as it writes null): results kept
        self.result_data: ResultData = _Memo().result_data if bounded else _result_data
        self.limit = limit
        self.many_tasks = len(tasks) > TASKS_INLINE
        # with many tasks, the only ones whose failing trials may be in full (see _shown_tasks)
        self.shown = _shown_tasks(tasks) if self.many_tasks else set()
        self.per_task_limit = INLINE_PER_TASK
        self.by_task: dict[tuple[str, str], list[_Shown]] = {}
        self.blocks = _Blocks(clean)
        # every trial so far with its data as UTF-8 (half the memory of a str holding a
        # character past Latin-1, as most do: "→"), while all may fit in the limit
        self.held: list[tuple[_Shown, bytes]] | None = []
        self.inline = 0  # characters of the bodies in full (while held: their estimate)
        self.per_task: dict[tuple[str, str], int] = {}
        self.count = 0
        self.compressed = 0
        self.total_time = 0.0

    def add(self, t: StoredTrial) -> None:
        data = ""
        try:
            b = t if self.bounded else _bounded(t)
            s = _Shown(str(b["domain"]), str(b["task"]), int(b["trial"]), str(b["verdict"]), _trial_head(b), "")
            data = _data_text(_trial_data(b, self.result_data), self.clean)
        except Exception as exc:
            s = _cannot_show(t, exc)
            s.body = self.clean(s.body)
        self.count += 1
        self.total_time += _seconds(t)
        trials = self.by_task.get((s.domain, s.task))
        if trials is None:
            trials = self.by_task[(s.domain, s.task)] = []
        else:  # one copy of the names for all the trials of a task: memory a trial stays small
            s.domain, s.task = trials[0].domain, trials[0].task
        s.verdict = sys.intern(s.verdict)
        trials.append(s)
        if self.held is None:
            self._place(s, data)
            return
        self.inline += len(s.body) or len(data) + _HTML_PER_LIST * data.count("[")
        self.held.append((s, data.encode("utf-8")))  # clean() left no lone surrogate
        if self.inline > self.limit:  # too big to show every trial: place each held one again
            held, self.held, self.inline = self.held, None, 0
            if self.many_tasks:
                self.limit, self.per_task_limit = min(self.limit, MANY_TASKS_INLINE), 1
            for one, raw in held:
                self._place(one, raw.decode("utf-8"))

    def finish(self) -> None:
        """After the last trial: the trials still held are in the page in full (they fit)."""
        for one, raw in self.held or []:
            if one.head:
                one.body = self._html(raw.decode("utf-8"))
        self.held = []

    def _html(self, data: str) -> str:
        """A body in full, from its data."""
        return self.clean(_body_html(json.loads(data)))

    def trials_of(self, t: TaskSummary) -> list[_Shown]:
        """The trials of a task, as they came."""
        return self.by_task.get((t["domain"], t["task"]), [])

    def folded(self, t: TaskSummary) -> bool:
        """Whether a task of a page of many tasks may be stored compressed whole: it is not
        one of those shown in full, and none of its trials is in the page in full."""
        trials = self.trials_of(t)
        return (t["domain"], t["task"]) not in self.shown and bool(trials) and all(s.ref for s in trials)

    def _place(self, s: _Shown, data: str) -> None:
        """In full: a trial that cannot be shown, and a failing or errored one while its task
        has fewer than :data:`INLINE_PER_TASK` in full (one, with more than
        :data:`TASKS_INLINE` tasks, and only in a task shown in full) and the limit holds.
        Else compressed: its data."""
        if not s.head:
            return
        key = (s.domain, s.task)
        if (s.verdict != "passed" and self.per_task.get(key, 0) < self.per_task_limit
                and (not self.many_tasks or key in self.shown)):
            body = self._html(data)
            if self.inline + len(body) <= self.limit:
                self.per_task[key] = self.per_task.get(key, 0) + 1
                self.inline += len(body)
                s.body = body
                return
        s.ref = self.blocks.add(data)
        self.compressed += 1


def _bounded(t: StoredTrial) -> StoredTrial:
    """:func:`~.safe.bounded_trial` of ``t``, with a quicker first look: a trial whose
    compact JSON (orjson's, in C) is within half the smallest cap holds nothing over any cap
    (the caps count JSON with a space after each separator: at most 1.5 times as long)."""
    try:
        if 2 * len(orjson.dumps(t)) <= min(TEXT_LIMIT, VALUE_LIMIT):
            return t
    except TypeError:  # what orjson does not write (a key that is not a string, ...): the careful way
        pass
    return cast(StoredTrial, bounded_trial(t))


_HTML_PER_LIST = 64
"""While every trial may fit in :data:`INLINE_LIMIT`, their HTML is not rendered but
estimated from their data: its length and this many characters of markup for each list
in it (each item, mark, row and check is one; their markup takes 52 to 72 characters
each in the freight example's and the tests' trials: within about 10% of the HTML)."""

# compact: a trial's data is written once per compressed trial
_DATA = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _data_text(data: Any, clean: Callable[[str], str]) -> str:
    """A trial's data as the page stores it: compact JSON, secrets redacted and lone
    surrogates replaced (``clean``); still valid JSON when a secret spans its punctuation
    (then each string is cleaned instead)."""
    try:
        raw = orjson.dumps(data).decode("utf-8")  # in C, and quicker than the json module's
    except TypeError:  # a lone surrogate, which orjson does not write: clean() replaces it below
        raw = _DATA.encode(data)
    text = clean(raw)
    if text != raw:
        try:
            json.loads(text)
        except ValueError:
            text = _DATA.encode(_cleaned_strings(data, clean))
    return text


def _cleaned_strings(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [_cleaned_strings(v, clean) for v in value]
    if isinstance(value, dict):
        return {k: _cleaned_strings(v, clean) for k, v in value.items()}
    return value


def _shown_tasks(tasks: Sequence[TaskSummary]) -> set[tuple[str, str]]:
    """The tasks a page of more than :data:`TASKS_INLINE` tasks shows in full: the first
    :data:`TASKS_INLINE`, in the tasks' order (critical first, then the worst), that are
    critical or did not pass every trial."""
    keys = [(t["domain"], t["task"]) for t in tasks if t["critical"] or t["verdict"] != "passed"]
    return set(keys[:TASKS_INLINE])


def _seconds(t: StoredTrial) -> float:
    try:
        return float(t["duration"])
    except (KeyError, TypeError, ValueError):
        return 0.0


def _footer(doc: Results) -> str:
    """The domain files with their hashes, and what wrote the results."""
    doms = " · ".join(f"{e(d['name'])} <code>{e(d['path'])}</code> sha256 {e(str(d['sha256'])[:12])}"
                      for d in doc["run"]["domains"])
    writer = doc["writer"]
    return (f'<footer>{doms}<br>written by {e(writer["name"])} {e(writer["version"])} · '
            f"results schema {e(doc['schema_version'])}</footer>")


def write_report_html(results: Mapping[str, Any], fp: TextSink, *, secrets: Sequence[str] | None = None,
                      inline_limit: int = INLINE_LIMIT) -> None:
    """Write the HTML report of a results.json document (see docs/results.md) to the text
    stream ``fp``, piece by piece. ``results["trials"]`` is iterated once and may be any
    iterable (a sequence read from disk as it goes). What is written has ``secrets``
    (default: those of the environment, :func:`~.safe.secret_values`) redacted and lone
    surrogates replaced, compressed transcripts included. ``inline_limit`` is
    :data:`INLINE_LIMIT` but for tests."""
    keys = secret_values() if secrets is None else list(secrets)

    def clean(text: str) -> str:
        return safe_text(scrub_text(text, keys) if keys else text)

    doc = _complete(results)
    tasks = doc["summary"]["tasks"]
    trials = results.get("trials") or []
    # a spool's trials were bounded as they were stored (report.spool): what a run writes
    placed = _Placed(clean, inline_limit, tasks, bounded=isinstance(trials, SpooledTrials))
    for t in trials:
        placed.add(t)
    placed.finish()
    for piece in _page(doc, placed):
        fp.write(clean(piece))
    placed.blocks.write_to(fp)  # each body and group was cleaned before it was compressed
    fp.write(f"<script>{_JS}</script></body></html>\n")


def _page(doc: Results, placed: _Placed) -> Iterator[str]:
    """The page from its head to its footer, section by section (the big ones row by row),
    each piece rendered as it is written: the page is never whole in memory."""
    run, s = doc["run"], doc["summary"]
    tasks = s["tasks"]
    idx = _Index(tasks)
    layout = _layout(tasks, placed)
    top = _top_j(s)
    title = ", ".join([d["name"] for d in run["domains"]] or s["domains"]) or "sandtable run"
    yield _head(doc, title, top)
    yield _header(run, s, title)
    yield "<main>"
    yield _not_loaded(run)
    yield _provisional(s)
    yield _overview(s, doc["gate"], top)
    yield from _tasks(layout, placed, idx, top)
    yield _failure_modes(s, idx)
    yield _tags(s, placed.blocks)
    yield _soft_rules(s["soft_rules"])
    yield _coverage(doc.get("coverage"))
    yield _mutation(doc.get("mutation"))
    yield _adaptive(doc.get("adaptive"))
    yield _judged(doc.get("judged"))
    yield _usage(s, placed.total_time, placed.count)
    yield _errored(s["errored_trials"], idx)
    yield from _trials(layout, placed, idx, top)
    yield "</main>" + _footer(doc)


def render_report(results: Mapping[str, Any]) -> str:
    """The HTML report of a results.json document as one string (:func:`write_report_html`
    into memory, no secret redacted: the callers that write files redact)."""
    buf = io.StringIO()
    write_report_html(results, buf, secrets=())
    return buf.getvalue()
