"""The run summary as terminal lines: a provisional run's warning, the counts, then one
plain-text table per part (pass^j with 95% intervals and pass@k, overall, per domain and
per tag; tasks; failure modes and their likely owners; soft rules; usage), latency and
errored trials. A big run shows what needs reading and counts the rest: the tasks that
did not pass, a chosen few j, the most frequent failure modes (results.json and
report.html keep all).

pytest prints it in its ``sandtable`` section; ``merge`` and ``report`` print it too.
Like a trial's failure text, the lines are made safe for the terminal (:mod:`.safe`):
secrets redacted, lone surrogates replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

from .fmt import count, format_cost, one_line, pct, pct_range, plural, secs
from .safe import for_terminal, secret_values
from .types import ErroredTrial, Latency, PendingItem, SoftRuleRate, Summary, TaskSummary
from .usage import USAGE_HEADERS, cache_saving_text, cost_rows, replayed_text

__all__ = ["render_terminal"]


def _table(rows: list[list[str]], headers: Sequence[str] = (), tablefmt: str = "simple",
           colalign: tuple[str, ...] | None = None) -> list[str]:
    """The lines of a table; cells are text as given (never read as numbers)."""
    text: str = tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True, colalign=colalign)
    return text.splitlines()


def _provisional(s: Summary) -> list[str]:
    """The warning at the top of a run that ran drafted items nobody accepted yet."""
    items = s.get("provisional") or []
    if not items:
        return []
    return [provisional_line(items, len(s.get("domains") or ()) > 1)]


def provisional_line(items: Sequence[PendingItem], multi: bool, shown: int = 5) -> str:
    """``sandtable: PROVISIONAL: 2 drafted items are pending review (task x, rule y)``: the
    first ``shown`` items (``domain/id`` in a run of several domains), then how many more."""
    names = [f"{p['kind']} {p['domain'] + '/' if multi else ''}{p['id']}" for p in items]
    more = f", and {len(names) - shown} more" if len(names) > shown else ""
    are = "is" if len(names) == 1 else "are"
    return (f"sandtable: PROVISIONAL: {plural(len(names), 'drafted item')} {are} pending review "
            f"({', '.join(names[:shown])}{more})")


def _counts(s: Summary) -> list[str]:
    return [
        f"{plural(s['trials'], 'trial')} of {plural(len(s['tasks']), 'task')}: {s['passed']} passed, "
        f"{s['failed']} failed, {s['errored']} errored (left out of pass^k)   agent: {', '.join(s['agents'])}   "
        f"user: {', '.join(s['users'])}"
    ]


FEWER_MARK = "*"
FEWER_NOTE = (f"{FEWER_MARK} counts fewer tasks than pass^1: a task with fewer than j graded trials (errored ones "
              "are not graded) is left out of pass^j")


def _score_rows(label: str, score: Mapping[str, Any], js: Sequence[str], top: str) -> tuple[list[list[str]], bool]:
    """A score's row (pass^j for every j, then pass@k), a ``95% CI`` row under it when
    the score has intervals, and whether a j was marked for counting fewer tasks than j=1."""
    counted = score.get("pass_hat_tasks") or {}
    base = counted.get("1")
    marked = False

    def cell(value: float | None, j: str, counts: Mapping[str, int]) -> str:
        nonlocal marked
        fewer = base is not None and value is not None and counts.get(j, base) < base
        marked = marked or fewer
        return pct(value) + (FEWER_MARK if fewer else "")

    hat, at = score.get("pass_hat") or {}, score.get("pass_at")
    row = [label, str(score["tasks"]), *(cell(hat.get(j), j, counted) for j in js)]
    if at is not None:
        row.append(cell(at.get(top), top, score.get("pass_at_tasks") or counted))
    rows = [row]
    hat_ci, at_ci = score.get("pass_hat_ci"), score.get("pass_at_ci")
    if hat_ci is not None and any(hat_ci.get(j) for j in js):
        ci = ["95% CI", "", *(_ci(hat_ci.get(j)) for j in js)]
        if at is not None:
            ci.append(_ci((at_ci or {}).get(top)))
        rows.append(ci)
    return rows, marked


def _ci(interval: Sequence[float] | None) -> str:
    return "" if interval is None else pct_range(interval)


# The pass^k table shows every j up to this many; above, a chosen few (:func:`shown_js`),
# at most 8 columns of j whatever k is (every j of k = 174 made a table 2,000 characters wide).
EVERY_J_UP_TO = 8
# above EVERY_J_UP_TO, the powers of two shown are these at most (then k): 8 columns of j
DOUBLING_UP_TO = 64


def shown_js(js: Sequence[str]) -> list[str]:
    """The j the terminal shows of ``js`` (every j of the run, ``"1"`` to ``"k"``): all of
    them up to :data:`EVERY_J_UP_TO`; else 1, 2, 4, ... up to :data:`DOUBLING_UP_TO` (those
    below k) and k, the figure a gate reads."""
    if len(js) <= EVERY_J_UP_TO:
        return list(js)
    top = js[-1]
    return [j for j in js[:-1] if _doubling(int(j))] + [top]


def _doubling(j: int) -> bool:
    """Whether j is one of 1, 2, 4, ... up to :data:`DOUBLING_UP_TO`."""
    return 0 < j <= DOUBLING_UP_TO and j & (j - 1) == 0


def _shown_js_note(js: Sequence[str], shown: Sequence[str]) -> list[str]:
    """The footnote of a table that leaves some j out, naming those it shows."""
    if len(shown) == len(js):
        return []
    return [f"pass^j for j = {', '.join(shown)}; every j in results.json and report.html"]


def _pass_hat(s: Summary) -> list[str]:
    """pass^j with its 95% interval for every j (a chosen few at a large k), and pass@k,
    over all tasks, per domain (several domains) and per tag; a mark and a footnote where
    a j counts fewer tasks, and a footnote naming the j shown when some are left out."""
    every = list(s["pass_hat"])
    top = every[-1] if every else "1"
    js = shown_js(every)
    overall: dict[str, Any] = {**s, "tasks": len(s["tasks"])}
    groups: list[tuple[str, Mapping[str, Any]]] = [("all tasks", overall)]
    groups += [(f"domain {d}", score) for d, score in (s.get("domain_scores") or {}).items()]
    groups += [(f"tag {tag}", score) for tag, score in s["tags"].items()]
    rows: list[list[str]] = []
    marked = False
    for label, score in groups:
        more, fewer = _score_rows(label, score, js, top)
        rows += more
        marked = marked or fewer
    headers = ["pass^k", "tasks"] + [f"pass^{j}" for j in js] + ([f"pass@{top}"] if "pass_at" in s else [])
    return _table(rows, headers) + ([FEWER_NOTE] if marked else []) + _shown_js_note(every, js)


# A run of up to this many tasks lists every task; a bigger one lists those that did not
# pass and counts the passed ones in one line, unless asked to list them all.
LIST_EVERY_TASK_UP_TO = 20
ALL_TASKS_HINT = "-v or --sandtable-all-tasks"


def _tasks(tasks: list[TaskSummary], all_tasks: bool, hint: str) -> list[str]:
    """The tasks, worst first (critical ones first); in a big run only those that did not
    pass unless ``all_tasks``, then how many passed ones were not listed and ``hint``, the
    option that lists them."""
    if all_tasks or len(tasks) <= LIST_EVERY_TASK_UP_TO:
        return _task_table(tasks)
    listed = [e for e in tasks if e["verdict"] != "passed"]
    unlisted = len(tasks) - len(listed)
    more = [f"{plural(unlisted, 'passed task')} not listed ({hint} lists them)"] if unlisted else []
    return (_task_table(listed) if listed else []) + more


def _task_table(tasks: list[TaskSummary]) -> list[str]:
    """The tasks' table; the interval of a flaky task's pass rate beside it."""
    flaky = any(e["verdict"] == "flaky" and e.get("rate_ci") for e in tasks)
    rows = []
    for e in tasks:
        row = [e["name"] + (" (critical)" if e["critical"] else ""), e["verdict"],
               f"{e['passed']}/{e['graded']}" + (f" +{e['errored']} errored" if e["errored"] else "")]
        if flaky:
            row.append(_ci(e.get("rate_ci")) if e["verdict"] == "flaky" else "")
        rows.append([*row, ", ".join(e["tags"])])
    return _table(rows, ["task", "verdict", "passed", *(["pass rate 95% CI"] if flaky else []), "tags"])


# The failure-modes table shows this many, the most frequent; results.json has them all.
FAILURE_MODES_SHOWN = 15


def _failure_modes(s: Summary) -> list[str]:
    """The most frequent failure modes (:data:`FAILURE_MODES_SHOWN`), with an example each,
    how many more there are, and the failed trials' likely owners."""
    modes = s["failure_modes"]
    if not modes:
        return []
    rows = [[m["kind"], m["id"], f"{m['trials']}",
             one_line(f"{m['example']['task']}[{m['example']['trial']}]: {m['example']['detail']}", 100)]
            for m in modes[:FAILURE_MODES_SHOWN]]
    unshown = len(modes) - len(rows)
    more = [f"... and {unshown} more failure {'mode' if unshown == 1 else 'modes'} (results.json lists all)"]
    return ["", "Failure modes (failed checks across trials, most frequent first)",
            *_table(rows, ["kind", "check", "trials", "example"]), *(more if unshown else []), *_owners(s)]


def _owners(s: Summary) -> list[str]:
    """``likely owners of 7 failed trials: agent 4, user 2, task 1`` (and how many no one
    was found for), when any failed trial was attributed."""
    owners = s.get("owners") or []
    if not owners:
        return []
    parts = [f"{o['owner']} {o['trials']}" for o in owners]
    unattributed = s["failed"] - sum(o["trials"] for o in owners)
    if unattributed > 0:
        parts.append(f"not attributed {unattributed}")
    return [f"likely owners of {plural(s['failed'], 'failed trial')}: {', '.join(parts)}"]


def _soft_rules(rules: list[SoftRuleRate]) -> list[str]:
    if not rules:
        return []
    rows = []
    for e in rules:
        scope = f"trials that called {e['tool']}" if e["tool"] else "trials"
        rows.append([e["id"], pct(e["rate"]), f"{e['broken']} of {e['applied']} {scope}"])
    return ["", "Soft rules (reported, never fail a trial)", *_table(rows, tablefmt="plain")]


def _usage(s: Summary) -> list[str]:
    usage = s["usage"]
    if not (usage["agent"] or usage["user"]):
        return []
    rows = cost_rows(usage, s.get("cost") or {})
    return ["", "Usage (cost estimated at list prices)",
            *_table(rows, USAGE_HEADERS, colalign=("left", "left") + ("right",) * 5), *_cache_saving(s),
            *_replayed(s)]


def _cache_saving(s: Summary) -> list[str]:
    """``prompt cache: 41,200 input tokens read from cache, saving $0.1100 (62.0% of input
    cost)`` when a model used a prompt cache."""
    text = cache_saving_text(s.get("cost"))
    return [] if text is None else [f"prompt cache: {text}"]


def _replayed(s: Summary) -> list[str]:
    """``replayed: 50 of 50 trials from recordings; cost live $1.23, cost now $0.00`` when
    some trials were replayed (--sandtable-record)."""
    text = replayed_text(s.get("cost"), s["trials"])
    return [] if text is None else [f"replayed: {text}"]


def _latency(lat: Latency) -> list[str]:
    if not lat["turns"]:
        return []
    return ["", f"Agent turn latency: p50 {secs(lat['p50'])}, p95 {secs(lat['p95'])} over {lat['turns']} turns"]


# The errored trials listed, in run order; results.json has them all.
ERRORED_SHOWN = 15


def _errored(errored: list[ErroredTrial]) -> list[str]:
    """The first errored trials (:data:`ERRORED_SHOWN`) with why, and how many more: a run
    whose endpoint went down errors every trial, and one line each would bury the rest."""
    if not errored:
        return []
    unshown = len(errored) - ERRORED_SHOWN
    more = [f"  ... and {unshown} more errored {'trial' if unshown == 1 else 'trials'} (results.json lists all)"]
    return ["", "Errored trials (left out of pass^k)",
            *(f"  {e['task']}[{e['trial']}]: {e['error']}" for e in errored[:ERRORED_SHOWN]),
            *(more if unshown > 0 else [])]


def render_terminal(s: Summary, secrets: Sequence[str] | None = None, *, all_tasks: bool = False,
                    all_tasks_hint: str = ALL_TASKS_HINT) -> list[str]:
    """The summary's lines, as pytest's ``sandtable`` section shows them, without secrets
    (those of the environment when ``secrets`` is None). A run of more than
    :data:`LIST_EVERY_TASK_UP_TO` tasks lists the passed ones only with ``all_tasks``;
    ``all_tasks_hint`` names the option that sets it (the ``report`` command has its own)."""
    lines = [
        *_provisional(s),
        *_counts(s),
        "",
        *_pass_hat(s),
        "",
        *_tasks(s["tasks"], all_tasks, all_tasks_hint),
        *_failure_modes(s),
        *_soft_rules(s["soft_rules"]),
        *_usage(s),
        *_latency(s["latency"]),
        *_errored(s["errored_trials"]),
    ]
    keys = secret_values() if secrets is None else secrets
    return for_terminal("\n".join(lines), keys).split("\n")


# --------------------------------------------------------------------------- judged scores (--sandtable-judge)

JUDGED_HEADERS = ["criterion", "yes", "95% CI", "scored", "void", "split", "n/a", "disagree", ""]
"""Column headers of :func:`judged_lines`' tables."""


def _judged_row(label: str, row: Mapping[str, Any], note: str = "") -> list[str]:
    return [label, pct(row["rate"]), _ci(row["interval"]), str(row["scored"]), str(row["void"]),
            str(row["split"]), str(row["na"]), str(row["disagreements"]), note]


def judged_lines(judged: Mapping[str, Any], secrets: Sequence[str] | None = None, *,
                 shown_tasks: int = 20) -> list[str]:
    """The terminal's "Judged scores" section (docs/judges.md): per criterion, per tag and
    (up to ``shown_tasks`` rows) per task, the share of scored trials the panel said yes
    to; the void verdicts' reasons; the judges' calls, tokens and cost, apart from the
    agent's and the user's. Every line names what it is never part of."""
    secrets = secret_values() if secrets is None else secrets
    multi = len({r["domain"] for r in judged["criteria"]}) > 1
    rows = [_judged_row(f"{r['domain']}/{r['criterion']}" if multi else r["criterion"], r,
                        "calibrated" if r["calibrated"] else "uncalibrated") for r in judged["criteria"]]
    out = ["Judged scores (" + ", ".join(judged["judges"]) + "; reported only: never a verdict, a gate or the "
           "exit status)", *_table(rows, JUDGED_HEADERS)]
    if judged["tags"]:
        out += ["", "Judged scores by tag",
                *_table([_judged_row(f"{r['tag']}: {r['criterion']}", r)[:-1] for r in judged["tags"]],
                        ["tag: criterion", *JUDGED_HEADERS[1:-1]])]
    if judged["tasks"] and len(judged["tasks"]) <= shown_tasks:
        out += ["", "Judged scores by task",
                *_table([_judged_row(f"{r['task']}: {r['criterion']}", r)[:-1] for r in judged["tasks"]],
                        ["task: criterion", *JUDGED_HEADERS[1:-1]])]
    reasons: dict[str, int] = {}
    for t in judged["trials"]:
        for c in t["criteria"]:
            for j in c["judges"]:
                if j.get("void"):
                    reasons[f"{j['judge']}: {j['void']}"] = reasons.get(f"{j['judge']}: {j['void']}", 0) + 1
    if reasons:
        total = sum(reasons.values())
        out += ["", f"Void judge verdicts: {total}"]
        ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        out += [f"  {n}x {one_line(for_terminal(reason, secrets), 160)}" for reason, n in ranked[:5]]
        if len(ranked) > 5:
            out.append(f"  ... and {plural(len(ranked) - 5, 'other reason')}")
    tokens = [(u.get("input", 0), u.get("output", 0)) for u in judged["usage"].values()]
    calls = f"{plural(judged['calls'], 'judge call')}"
    spent = (f"{count(sum(i for i, _ in tokens))} input and {count(sum(o for _, o in tokens))} output tokens, "
             f"{format_cost(judged['cost']['total'])}")
    cached = f"{plural(judged['cached'], 'verdict')} from the judge cache"
    budget = ""
    if judged.get("max_cost") is not None:
        budget = f"; budget {format_cost(judged['max_cost'])}" + (" reached" if judged.get("budget_reached") else "")
    out += ["", f"Judges: {calls}, {spent} (apart from the agent's and the user's); {cached}; "
                f"{secs(judged['seconds'])}{budget}"]
    return out
