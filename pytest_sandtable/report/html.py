"""report.html: one self-contained page rendered from a results.json document.

Inline CSS, a few lines of vanilla JS (filters; opening a trial reached by a link)
and an inline SVG chart; no outside requests (a Content-Security-Policy forbids
them, and only the page's own script, by hash, may run). Every piece of text that
comes from a transcript, a domain or the run is escaped with
``html.escape(..., quote=True)``; the script never writes markup. Everything
shows without JS too: trials are ``<details>`` and navigation is plain links.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["render_report"]

_VERDICT_ORDER = ("failed", "flaky", "skipped", "passed")


def e(value: Any) -> str:
    """Escape any value as HTML text or attribute value."""
    return html.escape(str(value), quote=True)


def _n(count: Any, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{float(x) * 100:.1f}%"


def _secs(x: Any) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if x < 1:
        return f"{x * 1000:.0f} ms" if x >= 0.001 else f"{x * 1000:.2f} ms"
    if x < 120:
        return f"{x:.1f} s"
    return f"{x / 60:.1f} min"


def _literal(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return json.dumps(v, ensure_ascii=False, default=str)


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


def _wall(run: Mapping[str, Any]) -> float | None:
    try:
        a = datetime.strptime(run["started_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        b = datetime.strptime(run["finished_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, (b - a).total_seconds())


# --------------------------------------------------------------------------- chart


def chart(pass_hat: Mapping[str, Any], width: int = 300, height: int = 150) -> str:
    """An inline SVG line chart of pass^j against j."""
    js = sorted((int(j) for j in pass_hat), key=int)
    left, right, top, bottom = 38, 10, 22, 30
    w, h = width - left - right, height - top - bottom
    inset = 24  # keep the points (and their labels) off the axes
    n = len(js)

    def x(i: int) -> float:
        return left + (w / 2 if n == 1 else inset + (w - 2 * inset) * i / (n - 1))

    def y(v: float) -> float:
        return top + (1 - v) * h

    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="pass^j against j"><title>pass^j against j</title>'
    ]
    for v in (0, 0.5, 1):
        parts.append(f'<line class="grid" x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>')
        parts.append(f'<text class="axis" x="{left - 6}" y="{y(v) + 3.5:.1f}" text-anchor="end">{int(v * 100)}%</text>')
    points = [(x(i), y(float(pass_hat[str(j)]))) for i, j in enumerate(js) if pass_hat[str(j)] is not None]
    if len(points) > 1:
        pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        parts.append(f'<polyline class="line" points="{pts}"/>')
    for i, j in enumerate(js):
        v = pass_hat[str(j)]
        parts.append(f'<text class="axis" x="{x(i):.1f}" y="{top + h + 16}" text-anchor="middle">{j}</text>')
        if v is None:
            continue
        px, py = x(i), y(float(v))
        parts.append(f'<circle class="dot" cx="{px:.1f}" cy="{py:.1f}" r="3.5">'
                     f"<title>pass^{j} {_pct(v)}</title></circle>")
        ly = py - 8
        parts.append(f'<text class="val" x="{px:.1f}" y="{ly:.1f}" text-anchor="middle">{e(_pct(v))}</text>')
    parts.append(f'<text class="axis" x="{left + w / 2:.1f}" y="{height - 2}" text-anchor="middle">'
                 "j: trials that must all pass</text></svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- pieces


class _Index:
    """Anchors for tasks and trials (numeric ids: no text from the data in an id)."""

    def __init__(self, tasks: Sequence[Mapping[str, Any]]) -> None:
        self.task_no = {(t["domain"], t["task"]): i + 1 for i, t in enumerate(tasks)}
        self.names = {(t["domain"], t["task"]): t.get("name", t["task"]) for t in tasks}

    def task(self, domain: str, task: str) -> str:
        return f"task-{self.task_no.get((domain, task), 0)}"

    def trial(self, domain: str, task: str, trial: int) -> str:
        return f"trial-{self.task_no.get((domain, task), 0)}-{int(trial)}"


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


_GATE_PREFIXES = (("sandtable gate failed: ", False), ("sandtable gate passed: ", True),
                  ("  failed: ", False), ("  passed: ", True))


def _gate_checks(gate: Mapping[str, Any]) -> list[tuple[bool, str]]:
    """(passed, text) per check: from ``gate.checks`` (schema 1.1), else from the lines
    (the per-check lines after the verdict, or every line of a schema 1.0 file)."""
    checks = gate.get("checks")
    if isinstance(checks, list):
        return [(bool(c.get("passed")), str(c.get("text", ""))) for c in checks if isinstance(c, Mapping)]
    lines = [str(x) for x in gate.get("lines") or []]
    details = [ln for ln in lines if ln.startswith(("  failed: ", "  passed: "))]
    out = []
    for ln in details or lines:
        for prefix, ok in _GATE_PREFIXES:
            if ln.startswith(prefix):
                out.append((ok, ln[len(prefix):]))
                break
    return out


def _gate(gate: Mapping[str, Any]) -> str:
    checks = _gate_checks(gate)
    if gate.get("set"):
        status = _badge("passed" if gate.get("passed") else "failed",
                        "gate passed" if gate.get("passed") else "gate failed")
        note = "the gate decided the exit status"
    elif gate.get("passed", True):
        status = '<span class="badge v-skipped">no gate set</span>'
        note = "pytest's exit status decided (any failing trial fails it)"
    else:
        status = _badge("failed", "run failed")
        note = ("no gate set; a critical task's trial that did not pass, or a domain file that did not load, "
                "fails the run")
    verdict = ""
    lines = [str(x) for x in gate.get("lines") or []]
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


def _not_loaded(errors: Sequence[Mapping[str, Any]]) -> str:
    """The banner at the top of the page for domain files that did not load."""
    n = len(errors)
    paths = ", ".join(str(c.get("path", "")) for c in errors)
    their = "Their" if n != 1 else "Its"
    items = "".join(f'<details open><summary><code>{e(c.get("path", ""))}</code></summary>'
                    f'<pre>{e(c.get("message", ""))}</pre></details>' for c in errors)
    return (f'<section id="not-loaded" class="alert" role="alert"><h2>{n} domain file{"s" if n != 1 else ""} did '
            f"not load: {e(paths)}</h2><p>{their} tasks did not run and are in none of the figures below: "
            f"a score here covers the domains that loaded only.</p>{items}</section>")


def _dots(trials: Sequence[Mapping[str, Any]], idx: _Index) -> str:
    out = []
    for t in trials:
        v = t.get("verdict", "")
        out.append(f'<a class="dot v-{e(v)}" href="#{idx.trial(t["domain"], t["task"], t["trial"])}" '
                   f'title="trial {e(t["trial"])}: {e(v)}"></a>')
    return f'<span class="dots">{"".join(out)}</span>'


def _usage(s: Mapping[str, Any], trials: Sequence[Mapping[str, Any]]) -> str:
    """The usage, cost and latency card: a table of tokens and estimated cost per side
    and model with a total row, the prices' date, and agent turn latency."""
    from .usage import COST_HEADERS_WITH_CALLS, cost_rows

    out: list[str] = []
    usage = s.get("usage") or {}
    cost = s.get("cost")
    rows = cost_rows(usage, cost if isinstance(cost, Mapping) else None, calls=True)
    if rows:
        cells = [[e(side) if side != "total" else "<b>total</b>", f"<code>{e(model)}</code>" if model else "",
                  *(e(x) for x in rest)] for side, model, *rest in rows]
        total = "total" if rows[-1][0] == "total" else ""
        out.append('<div class="tablewrap">' + _table(COST_HEADERS_WITH_CALLS, cells, "usage",
                                                      num=range(2, 8), last_row_cls=total) + "</div>")
        notes = []
        if isinstance(cost, Mapping):
            currency = str(cost.get("currency") or "USD")
            as_of = cost.get("prices_as_of")
            notes.append(f"Cost estimated at list prices{f' as of {e(as_of)}' if as_of else ''} ({e(currency)})"
                         "; a --sandtable-prices file adds or overrides prices.")
            unpriced = [str(m) for m in cost.get("unpriced") or []]
            if unpriced:
                notes.append(f"No price for {', '.join(f'<code>{e(m)}</code>' for m in unpriced)}: "
                             "its cost is n/a.")
        else:
            notes.append("Cost not computed.")
        out.append(f'<p class="muted small">{" ".join(notes)}</p>')
    else:
        out.append('<p class="muted small">No model calls were recorded (a scripted user and a model-free agent), '
                   "so there is no cost.</p>")
    lat = s.get("latency") or {}
    total_time = sum(float(t.get("duration") or 0) for t in trials)
    per = _secs(total_time / len(trials)) if trials else "n/a"
    kv = [("agent turn latency", f"p50 {_secs(lat.get('p50'))} · p95 {_secs(lat.get('p95'))} "
                                 f"over {_n(lat.get('turns', 0), 'turn')}"),
          ("trial time", f"{_secs(total_time)} in all, {per} per trial")]
    out.append('<dl class="kv">' + "".join(f"<dt>{e(a)}</dt><dd>{e(b)}</dd>" for a, b in kv) + "</dl>")
    return "".join(out)


# --------------------------------------------------------------------------- one trial


def _transcript(t: Mapping[str, Any]) -> str:
    calls = t.get("calls") or []
    by_call: dict[int, list[Mapping[str, Any]]] = {}
    said: dict[int, list[Mapping[str, Any]]] = {}
    for v in t.get("violations") or []:
        if v.get("call") is not None:
            by_call.setdefault(int(v["call"]), []).append(v)
        else:
            said.setdefault(int(v.get("turn", 0)), []).append(v)

    def marks(vs: Iterable[Mapping[str, Any]]) -> str:
        out = []
        for v in vs:
            cls = "soft" if v.get("soft") else "hard"
            label = "soft rule" if v.get("soft") else "violation"
            quote = f'<div class="quote">policy: “{e(v["quote"])}”</div>' if v.get("quote") else ""
            out.append(f'<div class="viol {cls}"><b>{label} {e(v.get("invariant", ""))}</b> '
                       f'<span>{e(v.get("detail", ""))}</span>{quote}</div>')
        return "".join(out)

    items = []
    for entry in t.get("transcript") or []:
        role = entry.get("role")
        if role == "tool":
            i = entry.get("call")
            c = calls[i] if isinstance(i, int) and 0 <= i < len(calls) else None
            if c is None:
                items.append(f'<li class="call err"><code>(missing call {e(i)})</code></li>')
                continue
            args = c.get("args") or {}
            head = f'<code class="sig"><b>{e(c.get("tool", ""))}</b>({e(_args(args))})</code>'
            if c.get("ok"):
                text = json.dumps(c.get("result"), ensure_ascii=False, indent=1, default=str)
                flat = json.dumps(c.get("result"), ensure_ascii=False, default=str)
                if len(flat) <= 140:
                    body = f'<code class="res">→ {e(flat)}</code>'
                else:
                    body = (f'<details class="res"><summary>→ {e(flat[:110])}…</summary>'
                            f"<pre>{e(text)}</pre></details>")
            else:
                err = c.get("error") or {}
                body = f'<code class="res err">✗ error {e(err.get("code"))}: {e(err.get("message"))}</code>'
            cls = "ok" if c.get("ok") else "err"
            items.append(f'<li class="call {cls}"><span class="who">tool</span><div class="body">{head}{body}'
                         f"{marks(by_call.pop(int(c.get('index', -1)), []))}</div></li>")
        else:
            who = "agent" if role == "agent" else "user"
            turn = int(entry.get("turn", 0))
            extra = marks(said.pop(turn, [])) if who == "agent" else ""
            items.append(f'<li class="msg {who}"><span class="who">{who}</span><div class="body">'
                         f'<div class="text">{e(entry.get("text", ""))}</div>{extra}</div></li>')
    rest = [v for vs in list(by_call.values()) + list(said.values()) for v in vs]
    if rest:
        items.append(f'<li class="msg agent"><span class="who">rules</span><div class="body">{marks(rest)}</div></li>')
    if not items:
        return '<p class="muted">No conversation took place.</p>'
    return f'<ol class="chat">{"".join(items)}</ol>'


def _diff(diff: Mapping[str, Any]) -> str:
    rows = []
    for c in diff.get("created") or []:
        row = c.get("row") or {}
        fields = ", ".join(f"{k}={_literal(v)}" for k, v in row.items())
        rows.append(['<span class="badge v-passed">created</span>', f"<code>{e(c.get('table'))}</code>",
                     f"<code>{e(_literal(c.get('key')))}</code>", f"<code>{e(fields)}</code>"])
    for c in diff.get("changed") or []:
        for f, ba in (c.get("fields") or {}).items():
            rows.append(['<span class="badge v-flaky">changed</span>', f"<code>{e(c.get('table'))}</code>",
                         f"<code>{e(_literal(c.get('key')))}</code>",
                         f"<code>{e(f)}</code>: <code class=\"before\">{e(_literal(ba.get('before')))}</code> → "
                         f"<code class=\"after\">{e(_literal(ba.get('after')))}</code>"])
    if not rows:
        return '<p class="muted">The world did not change.</p>'
    return _table(["", "table", "key", "row / field"], rows, "diff")


def _trial(t: Mapping[str, Any], idx: _Index) -> str:
    v = t.get("verdict", "")
    anchor = idx.trial(t["domain"], t["task"], t["trial"])
    bits = [f"trial {e(t.get('trial'))} of {e(t.get('k'))}", _badge(v)]
    if t.get("ended_by"):
        bits.append(f'<span class="muted">ended by {e(t["ended_by"])}</span>')
    bits.append(f'<span class="muted">{e(_n(t.get("turns", 0), "turn"))} · {e(_n(len(t.get("calls") or []), "call"))}'
                f' · seed {e(t.get("seed"))} · {e(_secs(t.get("duration")))}</span>')
    failed = [c for c in t.get("checks") or [] if not c.get("passed")]
    if failed:
        bits.append(f'<span class="muted">{len(failed)} failed check{"s" if len(failed) != 1 else ""}</span>')
    body = []
    if t.get("error"):
        body.append(f'<div class="box error"><b>errored</b> (not graded; left out of pass^k): {e(t["error"])}</div>')
    if failed:
        rows = [[f"<code>{e(c.get('kind'))}</code>", f"<code>{e(c.get('id'))}</code>", e(c.get("detail", ""))]
                for c in failed]
        body.append('<h4>Failed checks</h4>' + _table(["kind", "check", "detail"], rows, "checks bad"))
    body.append("<h4>Transcript</h4>" + _transcript(t))
    if t.get("traceback"):
        body.append('<details class="tb"><summary>Where the agent raised</summary>'
                    f'<pre>{e(t["traceback"])}</pre></details>')
    body.append("<h4>World diff</h4>" + _diff(t.get("diff") or {}))
    checks = t.get("checks") or []
    if checks:
        rows = [[_badge("passed" if c.get("passed") else "failed", "pass" if c.get("passed") else "fail"),
                 f"<code>{e(c.get('kind'))}</code>", f"<code>{e(c.get('id'))}</code>", e(c.get("detail", ""))]
                for c in checks]
        body.append(f'<details class="all-checks"><summary>{"All " if len(checks) > 1 else ""}'
                    f'{_n(len(checks), "check")}</summary>'
                    f'{_table(["", "kind", "check", "detail"], rows, "checks")}</details>')
    soft = [v for v in t.get("violations") or [] if v.get("soft")]
    if soft:
        body.append("<h4>Soft rules broken (reported, never fail a trial)</h4><ul>" + "".join(
            f"<li><code>{e(s.get('invariant'))}</code> {e(s.get('detail'))}</li>" for s in soft) + "</ul>")
    lat = t.get("latency") or []
    meta = [f"agent <code>{e(t.get('agent', ''))}</code>", f"user <code>{e(t.get('user', ''))}</code>"]
    if lat:
        meta.append(f"agent turns {e(', '.join(_secs(x) for x in lat))}")
    if t.get("location"):
        meta.append(f"task at <code>{e(t['location'])}</code>")
    body.append(f'<p class="muted small">{" · ".join(meta)}</p>')
    is_open = " open" if v != "passed" else ""
    return (f'<details class="trial v-{e(v)}" id="{anchor}"{is_open}><summary>{" ".join(bits)}</summary>'
            f'<div class="trial-body">{"".join(body)}</div></details>')


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
footer{color:var(--muted);font-size:12px;text-align:center;padding:20px}
"""

_JS = """
(function(){
  document.documentElement.classList.remove('no-js');
  function openTarget(){
    var id = decodeURIComponent(location.hash.slice(1));
    if(!id) return;
    var el = document.getElementById(id);
    if(!el) return;
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
  if(q) q.addEventListener('input', function(){ state.q = q.value.trim().toLowerCase(); apply(); });
  function setAll(open){
    document.querySelectorAll('details.trial').forEach(function(d){ d.open = open; });
  }
  var ex = document.getElementById('expand'), co = document.getElementById('collapse');
  if(ex) ex.addEventListener('click', function(){ setAll(true); });
  if(co) co.addEventListener('click', function(){ setAll(false); });
})();
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def render_report(results: Mapping[str, Any]) -> str:
    """The HTML report of a results.json document (see docs/results.md)."""
    run: Mapping[str, Any] = results.get("run") or {}
    s: Mapping[str, Any] = results.get("summary") or {}
    gate: Mapping[str, Any] = results.get("gate") or {}
    writer: Mapping[str, Any] = results.get("writer") or {}
    trials: list[Mapping[str, Any]] = list(results.get("trials") or [])
    tasks: list[Mapping[str, Any]] = list(s.get("tasks") or [])
    idx = _Index(tasks)
    pass_hat: Mapping[str, Any] = s.get("pass_hat") or {}
    js = sorted(pass_hat, key=int)
    k = str(s.get("k", js[-1] if js else 1))
    top = k if k in pass_hat else (js[-1] if js else k)
    domains = [d.get("name", "") for d in run.get("domains") or []] or list(s.get("domains") or [])
    title = ", ".join(domains) or "sandtable run"

    by_task: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for t in trials:
        by_task.setdefault((t.get("domain", ""), t.get("task", "")), []).append(t)
    for ts in by_task.values():
        ts.sort(key=lambda t: int(t.get("trial", 0)))

    out: list[str] = []
    add = out.append
    add('<!doctype html><html lang="en" class="no-js"><head><meta charset="utf-8">')
    add(f'<meta http-equiv="Content-Security-Policy" content="{e(_csp())}">')
    add('<meta name="viewport" content="width=device-width,initial-scale=1">')
    not_loaded = [c for c in run.get("collection_errors") or [] if isinstance(c, Mapping)]
    n_missing = len(not_loaded)
    missing = f" ({n_missing} domain file{'s' if n_missing != 1 else ''} did not load)" if n_missing else ""
    add(f"<title>sandtable: pass^{e(top)} {e(_pct(pass_hat.get(top)))} · {e(title)}{e(missing)}</title>")
    add(f"<style>{_CSS}</style></head><body>")

    # header
    meta = [f"agent <b>{e(', '.join(s.get('agents') or []) or run.get('agent', ''))}</b>",
            f"user <b>{e(', '.join(s.get('users') or []) or run.get('user', ''))}</b>",
            f"k={e(run.get('k', k))}", f"run seed {e(run.get('run_seed', ''))}"]
    if run.get("started_at"):
        meta.append(e(_time(run["started_at"])))
    wall = _wall(run)
    if wall is not None:
        meta.append(f"took {e(_secs(wall))}")
    if run.get("shards"):
        meta.append(f"merged from {len(run['shards'])} shards")
    add('<header><div class="brand">sandtable report</div>')
    add(f"<h1>{e(title)}</h1><div class=\"muted\">{' · '.join(meta)}</div>")
    add('<nav><a href="#overview">Overview</a><a href="#tasks">Tasks</a><a href="#failure-modes">Failure modes</a>'
        '<a href="#tags">Tags</a><a href="#soft-rules">Soft rules</a><a href="#usage">Usage</a>'
        '<a href="#trials">Trials</a></nav></header><main>')
    if not_loaded:
        add(_not_loaded(not_loaded))

    # overview: headline, chart, gate
    n_tasks = len(tasks)
    verdicts = {v: sum(1 for t in tasks if t.get("verdict") == v) for v in _VERDICT_ORDER}
    counts = " ".join(_badge(v, f"{verdicts[v]} {v}") for v in _VERDICT_ORDER if verdicts[v])
    add('<section id="overview" class="hero">')
    add(f'<div class="card headline"><div class="label">pass^{e(top)} over {n_tasks} task{"s" if n_tasks != 1 else ""}'
        f'</div><div class="big" id="headline">{e(_pct(pass_hat.get(top)))}</div>'
        f'<div class="sub">pass^1 {e(_pct(pass_hat.get("1")))} · {e(s.get("trials", len(trials)))} trials: '
        f'{e(s.get("passed", 0))} passed, {e(s.get("failed", 0))} failed, {e(s.get("errored", 0))} errored</div>'
        f'<div class="counts">{counts}</div></div>')
    add(f'<div class="card"><h3>pass^j against j</h3>{chart(pass_hat)}</div>')
    add(f'<div class="card" id="gate"><h3>Gate</h3>{_gate(gate)}</div></section>')

    # tasks
    add('<section id="tasks"><h2>Tasks</h2>')
    add('<div class="filters js-only"><button data-verdict="all" class="on">all</button>'
        '<button data-verdict="notpassed">not passed</button><button data-verdict="flaky">flaky</button>'
        '<button data-verdict="failed">failed</button><button data-verdict="critical">critical</button>'
        '<input id="q" type="search" placeholder="filter tasks by name or tag" aria-label="filter tasks"></div>')
    rows = []
    for t in tasks:
        key = (t["domain"], t["task"])
        name = t.get("name", t["task"])
        crit = ' <span class="badge crit">critical</span>' if t.get("critical") else ""
        errored = f' <span class="muted">+{e(t["errored"])} errored</span>' if t.get("errored") else ""
        attrs = (f'data-filterable data-verdict="{e(t.get("verdict"))}" data-critical="{1 if t.get("critical") else 0}"'
                 f' data-name="{e((name + " " + " ".join(t.get("tags") or [])).lower())}"')
        rows.append((attrs, [
            f'<a href="#{idx.task(*key)}">{e(name)}</a>{crit}',
            _badge(t.get("verdict", "")),
            _dots(by_task.get(key, []), idx),
            f'{e(t.get("passed"))}/{e(t.get("graded"))}{errored}',
            e(_pct((t.get("pass_hat") or {}).get(top))),
            e(", ".join(t.get("tags") or [])),
        ]))
    head = "".join(f"<th>{e(h)}</th>" for h in ["task", "verdict", "trials", "passed", f"pass^{top}", "tags"])
    body = "".join(f"<tr {a}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>" for a, cells in rows)
    add(f'<div class="tablewrap"><table class="tasks"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        "</div></section>")

    # failure modes
    add('<section id="failure-modes"><h2>Failure modes</h2>')
    modes = s.get("failure_modes") or []
    if modes:
        rows2 = []
        for m in modes:
            ex = m.get("example") or {}
            link = idx.trial(ex.get("domain", ""), ex.get("task", ""), ex.get("trial", 0))
            exname = idx.names.get((ex.get("domain", ""), ex.get("task", "")), ex.get("task", ""))
            rows2.append([f"<code>{e(m.get('kind'))}</code>", f"<code>{e(m.get('id'))}</code>",
                          f'<span class="num">{e(m.get("trials"))}</span>',
                          f'<a href="#{link}">{e(exname)} [{e(ex.get("trial"))}]</a>: {e(ex.get("detail", ""))}'])
        add('<div class="tablewrap">' + _table(["kind", "check", "trials", "example"], rows2) + "</div>")
    else:
        add('<p class="muted">No check failed.</p>')
    add("</section>")

    # tags
    add('<section id="tags"><h2>Scores by tag</h2>')
    tags = s.get("tags") or {}
    if tags:
        rows3 = [["<b>all tasks</b>", e(n_tasks)] + [e(_pct(pass_hat.get(j))) for j in js]]
        for tag, te in tags.items():
            ph = te.get("pass_hat") or {}
            rows3.append([e(tag), e(te.get("tasks"))] + [e(_pct(ph.get(j))) for j in js])
        add('<div class="tablewrap">' + _table(["tag", "tasks"] + [f"pass^{j}" for j in js], rows3) + "</div>")
    else:
        add('<p class="muted">No task has a tag.</p>')
    add("</section>")

    # soft rules
    add('<section id="soft-rules"><h2>Soft rules <span class="muted small">(reported, never fail a trial)</span></h2>')
    soft = s.get("soft_rules") or []
    if soft:
        rows4 = []
        for r in soft:
            scope = f"trials that called {r['tool']}" if r.get("tool") else "trials"
            rows4.append([f"<code>{e(r.get('id'))}</code>", e(_pct(r.get("rate"))),
                          e(f"broken in {r.get('broken')} of {r.get('applied')} {scope}")])
        add('<div class="tablewrap">' + _table(["rule", "broken", ""], rows4) + "</div>")
    else:
        add('<p class="muted">The domain has no soft rule.</p>')
    add("</section>")

    # usage, cost, latency
    add(f'<section id="usage"><h2>Usage, cost and latency</h2><div class="card">{_usage(s, trials)}</div></section>')

    errored_trials = s.get("errored_trials") or []
    if errored_trials:
        add('<section id="errored"><h2>Errored trials <span class="muted small">(left out of pass^k)</span></h2><ul>')
        for x in errored_trials:
            name = idx.names.get((x.get("domain", ""), x.get("task", "")), x.get("task", ""))
            add(f'<li><a href="#{idx.trial(x.get("domain", ""), x.get("task", ""), x.get("trial", 0))}">'
                f'{e(name)} [{e(x.get("trial"))}]</a>: {e(x.get("error"))}</li>')
        add("</ul></section>")

    # trials
    add('<section id="trials"><h2>Trials</h2><div class="filters js-only">'
        '<button id="expand" type="button">expand all</button><button id="collapse" type="button">collapse all'
        "</button></div>")
    for t in tasks:
        key = (t["domain"], t["task"])
        name = t.get("name", t["task"])
        crit = '<span class="badge crit">critical</span>' if t.get("critical") else ""
        tags_txt = f'<span class="muted">{e(", ".join(t.get("tags") or []))}</span>' if t.get("tags") else ""
        attrs = (f'data-filterable data-verdict="{e(t.get("verdict"))}" data-critical="{1 if t.get("critical") else 0}"'
                 f' data-name="{e((name + " " + " ".join(t.get("tags") or [])).lower())}"')
        add(f'<div class="task" id="{idx.task(*key)}" {attrs}><div class="task-head"><h3>{e(name)}</h3>'
            f'{_badge(t.get("verdict", ""))}{crit}<span class="muted">{e(t.get("passed"))}/{e(t.get("graded"))} '
            f'passed · pass^{e(top)} {e(_pct((t.get("pass_hat") or {}).get(top)))}</span>{tags_txt}</div>')
        for one in by_task.get(key, []):
            add(_trial(one, idx))
        add("</div>")
    add("</section></main>")

    doms = " · ".join(f"{e(d.get('name'))} <code>{e(d.get('path'))}</code> sha256 {e(str(d.get('sha256'))[:12])}"
                      for d in run.get("domains") or [])
    add(f'<footer>{doms}<br>written by {e(writer.get("name", "pytest-sandtable"))} {e(writer.get("version", ""))} · '
        f"results schema {e(results.get('schema_version', ''))}</footer>")
    add(f"<script>{_JS}</script></body></html>\n")
    return "".join(out)
