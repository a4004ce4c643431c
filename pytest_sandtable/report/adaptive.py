"""What an adaptive run (``--sandtable-adaptive``) came to: results.json's ``adaptive``
section, its terminal lines, and the honest intervals of its summary.

Built from the design and the recorded trials alone, as the run decided: each task's
graded trials in trial order (errored ones never counted) through its
``sequential.TaskSequence`` until it settles; a trial recorded after that (one started
before its task settled, under ``--sandtable-concurrency``) is kept, listed as
``uncounted``, and left out of the verdict. So the section is the same in the process
that ran the trials, on the xdist controller, and read back from a file.

Where n was chosen by looking at the results, a Wilson interval no longer holds: every
interval here, and each task's ``rate_ci`` in an adaptive run's summary, is the
anytime-valid one of ``sequential.confseq``.

With a stored baseline (``--sandtable-baseline``) each task the baseline has also gets a
``sequential.StoredRegression`` (:func:`stored_regression`), fed the same graded
outcomes in the same order; a task counts trials until both its verdict and its
regression test are settled (:func:`task_settled`), and e-BH across the tasks' stopped
e-values flags the regressed ones (``regression`` of the section).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped,unused-ignore]

from ..sequential.confseq import interval
from ..sequential.design import Design
from ..sequential.multiple import e_bh
from ..sequential.regression import StoredRegression
from ..sequential.sprt import TaskSequence
from .fmt import count, format_cost, pct_range, plural
from .types import AdaptiveDesign, AdaptiveRegression, AdaptiveSection, AdaptiveTask

VERDICTS = ("reliable", "unreliable", "inconclusive", "open")
LEVEL = 0.05  # the intervals' error: anytime-valid 95%


def design_of(section: Mapping[str, Any]) -> Design:
    d = section["design"]
    return Design(p0=float(d["p0"]), p1=float(d["p1"]), alpha=float(d["alpha"]), beta=float(d["beta"]),
                  cap=int(d["cap"]))


BaselineCounts = Mapping[tuple[str, str], tuple[int, int]]  # (domain, task) -> (passes, graded)


def baseline_counts(doc: Mapping[str, Any] | None) -> dict[tuple[str, str], tuple[int, int]]:
    """A stored baseline's (passes, graded trials) per (domain name, task id), from its
    results.json's ``tasks``; a task without a graded trial there is left out (there is
    nothing to compare with)."""
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    for t in (doc or {}).get("tasks") or ():
        graded, passed = int(t.get("graded") or 0), int(t.get("passed") or 0)
        if graded > 0:
            counts[(str(t.get("domain")), str(t.get("task")))] = (passed, graded)
    return counts


def stored_regression(counts: tuple[int, int], design: Design, alpha: float) -> StoredRegression:
    """A task's regression test against its stored baseline counts: at ``alpha``, with the
    design's beta and cap (the same in the run that decides and in the report)."""
    return StoredRegression(counts[0], counts[1], alpha=alpha, beta=design.beta, cap=design.cap)


def task_settled(seq: TaskSequence, reg: StoredRegression | None) -> bool:
    """A task takes no more trials once its verdict and its regression test (if any) are settled."""
    return seq.verdict is not None and (reg is None or reg.verdict is not None)


def task_name(domain: str, task: str, several: bool) -> str:
    """A task as the summary names it: ``domain/task`` with several domains, else the id."""
    return f"{domain}/{task}" if several else task


def adaptive_section(
    design: AdaptiveDesign,
    trials: Iterable[Any],
    *,
    tasks: Sequence[tuple[str, str]] = (),
    stopped: str | None = None,
    baseline: BaselineCounts | None = None,
    regression_alpha: float | None = None,
) -> AdaptiveSection:
    """The ``adaptive`` section: ``trials`` are TrialResults (or anything with their
    ``domain``, ``task``, ``trial`` and ``verdict``); ``tasks`` the (domain, task) of every
    collected task, so one that never got a trial is listed too; ``stopped`` why the run
    stopped handing out trials (``max_trials`` or ``max_cost``), if a budget ran out.
    ``baseline``: a stored baseline's counts per task (:func:`baseline_counts`); each task
    it has gets a regression test at ``regression_alpha`` (default: the design's alpha),
    and the section a ``regression`` part, e-BH across those tasks."""
    d = Design(p0=design["p0"], p1=design["p1"], alpha=design["alpha"], beta=design["beta"], cap=design["cap"])
    ralpha = regression_alpha if regression_alpha is not None else d.alpha
    by_task: dict[tuple[str, str], list[tuple[int, str]]] = {key: [] for key in tasks}
    spent = 0
    for t in trials:
        spent += 1
        by_task.setdefault((str(t.domain), str(t.task)), []).append((int(t.trial), str(t.verdict)))
    entries: list[AdaptiveTask] = []
    for (domain, task), ran in sorted(by_task.items()):
        ran.sort()
        seq = TaskSequence(d)
        found = baseline.get((domain, task)) if baseline is not None else None
        reg = stored_regression(found, d, ralpha) if found is not None else None
        stopped_at: int | None = None
        uncounted: list[int] = []
        for trial, verdict in ran:
            if task_settled(seq, reg):
                uncounted.append(trial)
                continue
            if verdict == "errored":
                continue
            passed = verdict == "passed"
            if seq.verdict is None and seq.observe(passed) is not None:
                stopped_at = trial
            if reg is not None and reg.verdict is None:
                reg.observe(passed)
        low, high = interval(seq.passes, seq.n, LEVEL)
        entry: AdaptiveTask = {
            "domain": domain,
            "task": task,
            "verdict": seq.verdict or "open",
            "open_reason": ("budget" if stopped else "not run") if seq.verdict is None else None,
            "graded": seq.n,
            "passes": seq.passes,
            "trials": len(ran),
            "stopped_at": stopped_at,
            "e_value": seq.e_value,
            "interval": [low, high],
            "uncounted": uncounted,
        }
        if found is not None and reg is not None:
            entry["regression"] = {"verdict": reg.verdict or "open", "e_value": reg.e_value, "graded": reg.n,
                                   "floor": reg.floor, "baseline": [found[0], found[1]]}
        entries.append(entry)
    counts = {v: sum(e["verdict"] == v for e in entries) for v in VERDICTS}
    fixed = d.cap * len(entries)
    section: AdaptiveSection = {
        "design": dict(design),  # type: ignore[typeddict-item]
        "spent": spent,
        "fixed_k_trials": fixed,
        "stopped": stopped,
        "counts": counts,
        "tasks": entries,
    }
    if baseline is not None:
        section["regression"] = regression_part(entries, ralpha)
    return section


def regression_part(entries: Sequence[AdaptiveTask], alpha: float) -> AdaptiveRegression:
    """e-BH at ``alpha`` on the stopped e-values of the tasks with a regression test: the
    flagged tasks (largest e-value first), named as the summary names them."""
    several = len({e["domain"] for e in entries}) > 1
    e_values = {task_name(e["domain"], e["task"], several): e["regression"]["e_value"]
                for e in entries if "regression" in e}
    return {"design": "stored", "alpha": alpha, "method": "e-BH", "tasks": len(e_values),
            "flagged": e_bh(e_values, alpha) if e_values else []}


def regression_line(part: AdaptiveRegression) -> str:
    """``regressed (sequential, e-BH at alpha 0.05): task-a, task-b``, or that none did."""
    how = f"sequential, e-BH at alpha {part['alpha']:g}"
    if part["flagged"]:
        return f"regressed ({how}): {', '.join(part['flagged'])}"
    return f"no task regressed ({how}; {plural(part['tasks'], 'task')} in the baseline)"


def honest_intervals(summary: Any, section: AdaptiveSection) -> None:
    """In an adaptive run's summary, each task's ``rate_ci`` becomes its anytime-valid
    interval over the trials its verdict counted (a Wilson interval would not cover)."""
    by_name = {(e["domain"], e["task"]): e for e in section["tasks"]}
    for entry in summary.get("tasks") or ():
        found = by_name.get((entry.get("domain"), entry.get("task")))
        if found is not None and entry.get("rate_ci") is not None:
            entry["rate_ci"] = list(found["interval"])


def saving_line(section: AdaptiveSection) -> str:
    """``spent 1,254 trials where k=32 would take 3,680 (2.9x fewer); 5 tasks inconclusive at the cap``."""
    spent, fixed, cap = section["spent"], section["fixed_k_trials"], section["design"]["cap"]
    line = f"spent {count(spent)} {'trial' if spent == 1 else 'trials'} where k={cap} would take {count(fixed)}"
    if spent and fixed > spent:
        line += f" ({fixed / spent:.1f}x fewer)"
    inconclusive, open_ = section["counts"]["inconclusive"], section["counts"]["open"]
    if inconclusive:
        line += f"; {plural(inconclusive, 'task')} inconclusive at the cap"
    if open_:
        why = {"max_trials": "the trial budget", "max_cost": "the cost budget"}.get(section["stopped"] or "")
        line += f"; {plural(open_, 'task')} left open" + (f" ({why} ran out)" if why else "")
    return line


def shown_verdict(e: AdaptiveTask) -> str:
    if e["verdict"] == "open":
        return "open (budget)" if e["open_reason"] == "budget" else "open"
    return e["verdict"]


def terminal_lines(section: AdaptiveSection) -> list[str]:
    """The adaptive section of the terminal summary: the design, each task's verdict with
    its trial count and anytime interval, the saving."""
    d = section["design"]
    budget = []
    max_trials, max_cost = d.get("max_trials"), d.get("max_cost")
    if max_trials is not None:
        budget.append(f"at most {count(int(max_trials))} trials in all")
    if max_cost is not None:
        budget.append(f"at most {format_cost(float(max_cost))}")
    head = (f"Adaptive trials: reliable means a pass rate of at least {d['p0']:g} (alpha {d['alpha']:g}), "
            f"unreliable below {d['p1']:g} (beta {d['beta']:g}); at most {d['cap']} trials a task"
            + "".join(f", {b}" for b in budget))
    part = section.get("regression")
    rows = []
    for e in section["tasks"]:
        trials = str(e["graded"]) + (f" (+{len(e['uncounted'])} uncounted)" if e["uncounted"] else "")
        row = [f"{e['domain']}/{e['task']}", shown_verdict(e), trials, f"{e['passes']}/{e['graded']}",
               pct_range(e["interval"]), f"{e['e_value']:.3g}"]
        if part is not None:
            row.append(regression_cell(e))
        rows.append(row)
    headers = ["task", "adaptive verdict", "graded trials", "passed", "anytime 95% CI", "e-value"]
    if part is not None:
        headers.append("against the baseline")
    return [
        head,
        *tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True).splitlines(),
        "pass^j above counts a task only with at least j graded trials, from an adaptive sample "
        "(each task stopped once settled); intervals are anytime-valid, not Wilson",
        saving_line(section),
    ]


def regression_cell(e: AdaptiveTask) -> str:
    """``regressed after 7 (32/32 before, e-value 58)``, or ``not in the baseline``."""
    r = e.get("regression")
    if r is None:
        return "not in the baseline"
    b = r["baseline"]
    return f"{r['verdict']} after {r['graded']} ({b[0]}/{b[1]} before, e-value {r['e_value']:.3g})"
