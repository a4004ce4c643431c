"""The run summary as terminal lines: the counts, then one plain-text table per part
(pass^j by tag, tasks, failure modes, soft rules, usage), latency and errored trials.

pytest prints it in its ``sandtable`` section; ``merge`` and ``report`` print it too.
Like a trial's failure text, the lines are made safe for the terminal (:mod:`.safe`):
secrets redacted, lone surrogates replaced.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from .fmt import one_line, pct, plural, secs
from .safe import for_terminal, secret_values
from .types import ErroredTrial, FailureMode, Latency, SoftRuleRate, Summary, TaskSummary
from .usage import USAGE_HEADERS, cost_rows

__all__ = ["render_terminal"]


def _table(rows: list[list[str]], headers: Sequence[str] = (), tablefmt: str = "simple",
           colalign: tuple[str, ...] | None = None) -> list[str]:
    """The lines of a table; cells are text as given (never read as numbers)."""
    text: str = tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True, colalign=colalign)
    return text.splitlines()


def _counts(s: Summary) -> list[str]:
    return [
        f"{plural(s['trials'], 'trial')} of {plural(len(s['tasks']), 'task')}: {s['passed']} passed, "
        f"{s['failed']} failed, {s['errored']} errored (left out of pass^k)   agent: {', '.join(s['agents'])}   "
        f"user: {', '.join(s['users'])}"
    ]


def _pass_hat(s: Summary) -> list[str]:
    """pass^j for every j, over all tasks and per tag."""
    js = list(s["pass_hat"])
    rows = [["all tasks", str(len(s["tasks"])), *(pct(s["pass_hat"][j]) for j in js)]]
    for tag, e in s["tags"].items():
        rows.append([f"tag {tag}", str(e["tasks"]), *(pct(e["pass_hat"][j]) for j in js)])
    return _table(rows, ["pass^k", "tasks"] + [f"pass^{j}" for j in js])


def _tasks(tasks: list[TaskSummary]) -> list[str]:
    rows = [[e["name"] + (" (critical)" if e["critical"] else ""), e["verdict"],
             f"{e['passed']}/{e['graded']}" + (f" +{e['errored']} errored" if e["errored"] else ""),
             ", ".join(e["tags"])] for e in tasks]
    return _table(rows, ["task", "verdict", "passed", "tags"])


def _failure_modes(modes: list[FailureMode]) -> list[str]:
    if not modes:
        return []
    rows = [[m["kind"], m["id"], f"{m['trials']}",
             one_line(f"{m['example']['task']}[{m['example']['trial']}]: {m['example']['detail']}", 100)]
            for m in modes]
    return ["", "Failure modes (failed checks across trials, most frequent first)",
            *_table(rows, ["kind", "check", "trials", "example"])]


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
            *_table(rows, USAGE_HEADERS, colalign=("left", "left") + ("right",) * 5)]


def _latency(lat: Latency) -> list[str]:
    if not lat["turns"]:
        return []
    return ["", f"Agent turn latency: p50 {secs(lat['p50'])}, p95 {secs(lat['p95'])} over {lat['turns']} turns"]


def _errored(errored: list[ErroredTrial]) -> list[str]:
    if not errored:
        return []
    return ["", "Errored trials (left out of pass^k)", *(f"  {e['task']}[{e['trial']}]: {e['error']}" for e in errored)]


def render_terminal(s: Summary, secrets: Sequence[str] | None = None) -> list[str]:
    """The summary's lines, as pytest's ``sandtable`` section shows them, without secrets
    (those of the environment when ``secrets`` is None)."""
    lines = [
        *_counts(s),
        "",
        *_pass_hat(s),
        "",
        *_tasks(s["tasks"]),
        *_failure_modes(s["failure_modes"]),
        *_soft_rules(s["soft_rules"]),
        *_usage(s),
        *_latency(s["latency"]),
        *_errored(s["errored_trials"]),
    ]
    keys = secret_values() if secrets is None else secrets
    return for_terminal("\n".join(lines), keys).split("\n")
