"""Aggregating trials: pass^j, verdicts per task, failure modes, soft rules, usage.

The summary is a plain JSON-compatible dict, so the terminal, results.json and
the HTML report all render the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import comb
from typing import Any

from ..engine.results import ERRORED, PASSED, TrialResult

VERDICT_ORDER = {"failed": 0, "flaky": 1, "skipped": 2, "passed": 3}


def pass_hat(c: int, n: int, j: int) -> float | None:
    """The unbiased estimator of pass^j for one task: C(c, j) / C(n, j).

    None when the task has fewer than j graded trials (it is left out of the average).
    """
    if n < j or j < 1:
        return None
    return comb(c, j) / comb(n, j)


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _percentile(xs: Sequence[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    # nearest-rank on a 0..n-1 scale with linear interpolation
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def task_verdict(n: int, c: int) -> str:
    if n == 0:
        return "skipped"
    if c == n:
        return "passed"
    if c == 0:
        return "failed"
    return "flaky"


def _file(t: TrialResult) -> str:
    return t.location.rpartition(":")[0]


def order_trials(trials: Iterable[TrialResult]) -> list[TrialResult]:
    """A stable order whatever order the trials finished in (xdist)."""

    def key(t: TrialResult) -> tuple[str, str, int, str, int]:
        file, _, line = t.location.rpartition(":")
        return (t.domain, file, int(line) if line.isdigit() else 0, t.task, t.trial)

    return sorted(trials, key=key)


def cost_summary(
    usage: Mapping[str, Mapping[str, Mapping[str, int]]], prices: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, Any]:
    """Estimated cost at list prices per side and model (None where the price is unknown)."""
    from .prices import all_prices, builtin_prices_as_of, estimate_cost

    table = prices if prices is not None else all_prices(None)
    out: dict[str, Any] = {"currency": "USD", "prices_as_of": builtin_prices_as_of()}
    total = 0.0
    unpriced: list[str] = []
    for side in ("agent", "user"):
        costs = estimate_cost(usage.get(side) or {}, table)
        out[side] = costs
        for model, c in costs.items():
            if c is None:
                unpriced.append(model)
            else:
                total += c
    out["total"] = total
    out["unpriced"] = sorted(set(unpriced))
    return out


def summarize(
    trials: Iterable[TrialResult], k: int | None = None, prices: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, Any]:
    """The run's figures. ``prices`` (model -> per-million-token prices) defaults to the
    built-in list prices; models without a price get a cost of None ("n/a")."""
    trials = order_trials(trials)
    multi = len({t.domain for t in trials}) > 1
    # two domain files may share a `name`: their tasks stay apart, told apart by file
    files_of: dict[tuple[str, str], set[str]] = {}
    for t in trials:
        files_of.setdefault((t.domain, t.task), set()).add(_file(t))
    tasks: dict[tuple[str, str, str], dict[str, Any]] = {}
    for t in trials:
        key = (t.domain, _file(t), t.task)
        e = tasks.get(key)
        if e is None:
            name = f"{t.domain}/{t.task}" if multi else t.task
            if len(files_of[(t.domain, t.task)]) > 1:
                name += f" ({_file(t)})"
            e = tasks[key] = {
                "domain": t.domain,
                "task": t.task,
                "name": name,
                "tags": list(t.tags),
                "critical": t.critical,
                "trials": 0,
                "graded": 0,
                "passed": 0,
                "errored": 0,
            }
        e["trials"] += 1
        if t.verdict == ERRORED:
            e["errored"] += 1
        else:
            e["graded"] += 1
            e["passed"] += t.verdict == PASSED
    k = k or max((t.trial for t in trials), default=1)
    kmax = max([k] + [e["graded"] for e in tasks.values()])
    js = list(range(1, kmax + 1))
    for e in tasks.values():
        e["verdict"] = task_verdict(e["graded"], e["passed"])
        e["pass_hat"] = {str(j): pass_hat(e["passed"], e["graded"], j) for j in js}
    task_list = sorted(tasks.values(), key=lambda e: (not e["critical"], VERDICT_ORDER[e["verdict"]]))
    overall = {str(j): _mean(e["pass_hat"][str(j)] for e in tasks.values()) for j in js}
    tags: dict[str, dict[str, Any]] = {}
    for tag in sorted({tag for e in tasks.values() for tag in e["tags"]}):
        mine = [e for e in tasks.values() if tag in e["tags"]]
        tags[tag] = {
            "tasks": len(mine),
            "pass_hat": {str(j): _mean(e["pass_hat"][str(j)] for e in mine) for j in js},
        }

    modes: dict[tuple[str, str], dict[str, Any]] = {}
    for t in trials:
        if t.verdict == ERRORED:
            continue
        for c in t.failed_checks:
            m = modes.get((c.kind, c.id))
            if m is None:
                m = modes[(c.kind, c.id)] = {
                    "kind": c.kind,
                    "id": c.id,
                    "trials": 0,
                    "tasks": [],
                    "example": {"task": t.task, "domain": t.domain, "trial": t.trial, "detail": c.detail},
                }
            m["trials"] += 1
            if t.task not in m["tasks"]:
                m["tasks"].append(t.task)
    failure_modes = sorted(modes.values(), key=lambda m: (-m["trials"], m["kind"], m["id"]))

    soft: dict[str, dict[str, Any]] = {}
    for t in trials:
        if t.verdict == ERRORED:
            continue
        for rid, s in t.soft.items():
            e = soft.setdefault(rid, {"id": rid, "tool": s.get("tool"), "applied": 0, "broken": 0})
            e["applied"] += bool(s.get("applied"))
            e["broken"] += bool(s.get("broken")) and bool(s.get("applied"))
    for e in soft.values():
        e["rate"] = e["broken"] / e["applied"] if e["applied"] else None

    usage: dict[str, dict[str, dict[str, int]]] = {"agent": {}, "user": {}}
    for t in trials:
        for side in ("agent", "user"):
            for model, u in (t.usage.get(side) or {}).items():
                acc = usage[side].setdefault(model, {})
                for f, v in u.items():
                    acc[f] = acc.get(f, 0) + int(v)
    lat = [x for t in trials for x in t.latency]
    errored = [
        {"task": t.task, "domain": t.domain, "trial": t.trial, "error": t.error} for t in trials if t.verdict == ERRORED
    ]
    return {
        "k": k,
        "trials": len(trials),
        "passed": sum(t.verdict == PASSED for t in trials),
        "failed": sum(t.verdict not in (PASSED, ERRORED) for t in trials),
        "errored": len(errored),
        "errored_trials": errored,
        "pass_hat": overall,
        "tags": tags,
        "tasks": task_list,
        "failure_modes": failure_modes,
        "soft_rules": sorted(soft.values(), key=lambda e: e["id"]),
        "usage": usage,
        "cost": cost_summary(usage, prices),
        "latency": {"turns": len(lat), "p50": _percentile(lat, 0.5), "p95": _percentile(lat, 0.95)},
        "agents": sorted({t.agent for t in trials}),
        "users": sorted({t.user for t in trials}),
        "domains": sorted({t.domain for t in trials}),
    }


def _clip(text: str, width: int) -> str:
    """One line of at most `width` characters (the full text is in results.json and the report)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _secs(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def render_terminal(s: dict[str, Any]) -> list[str]:
    from tabulate import tabulate

    js = list(s["pass_hat"])
    out: list[str] = []
    n_tasks = len(s["tasks"])
    out.append(
        f"{_plural(s['trials'], 'trial')} of {_plural(n_tasks, 'task')}: {s['passed']} passed, {s['failed']} failed, "
        f"{s['errored']} errored (left out of pass^k)   agent: {', '.join(s['agents'])}   user: {', '.join(s['users'])}"
    )
    out.append("")
    rows = [["all tasks", len(s["tasks"])] + [pct(s["pass_hat"][j]) for j in js]]
    for tag, e in s["tags"].items():
        rows.append([f"tag {tag}", e["tasks"]] + [pct(e["pass_hat"][j]) for j in js])
    out.extend(tabulate(rows, headers=["pass^k", "tasks"] + [f"pass^{j}" for j in js],
                        tablefmt="simple", disable_numparse=True).splitlines())
    out.append("")
    rows = []
    for e in s["tasks"]:
        rows.append([e["name"] + (" (critical)" if e["critical"] else ""), e["verdict"],
                     f"{e['passed']}/{e['graded']}" + (f" +{e['errored']} errored" if e["errored"] else ""),
                     ", ".join(e["tags"])])
    out.extend(tabulate(rows, headers=["task", "verdict", "passed", "tags"], tablefmt="simple",
                        disable_numparse=True).splitlines())
    if s["failure_modes"]:
        out.append("")
        out.append("Failure modes (failed checks across trials, most frequent first)")
        rows = []
        for m in s["failure_modes"]:
            ex = m["example"]
            rows.append([m["kind"], m["id"], f"{m['trials']}",
                         _clip(f"{ex['task']}[{ex['trial']}]: {ex['detail']}", 100)])
        out.extend(tabulate(rows, headers=["kind", "check", "trials", "example"], tablefmt="simple",
                            disable_numparse=True).splitlines())
    if s["soft_rules"]:
        out.append("")
        out.append("Soft rules (reported, never fail a trial)")
        rows = []
        for e in s["soft_rules"]:
            scope = f"trials that called {e['tool']}" if e["tool"] else "trials"
            rows.append([e["id"], pct(e["rate"]), f"{e['broken']} of {e['applied']} {scope}"])
        out.extend(tabulate(rows, tablefmt="plain", disable_numparse=True).splitlines())
    usage = s.get("usage") or {}
    if usage.get("agent") or usage.get("user"):
        from .usage import USAGE_HEADERS, cost_rows

        usage_table = cost_rows(usage, s.get("cost") or {})
        out.append("")
        out.append("Usage (cost estimated at list prices)")
        out.extend(tabulate(usage_table, headers=USAGE_HEADERS, tablefmt="simple", disable_numparse=True,
                            colalign=("left", "left") + ("right",) * 5).splitlines())
    lat = s.get("latency") or {}
    if lat.get("turns"):
        out.append("")
        out.append(f"Agent turn latency: p50 {_secs(lat['p50'])}, p95 {_secs(lat['p95'])} over {lat['turns']} turns")
    if s["errored_trials"]:
        out.append("")
        out.append("Errored trials (left out of pass^k)")
        for e in s["errored_trials"]:
            out.append(f"  {e['task']}[{e['trial']}]: {e['error']}")
    return out
