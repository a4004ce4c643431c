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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped,unused-ignore]

from ..sequential.confseq import interval
from ..sequential.design import Design
from ..sequential.sprt import TaskSequence
from .fmt import count, format_cost, pct_range, plural
from .types import AdaptiveDesign, AdaptiveSection, AdaptiveTask

VERDICTS = ("reliable", "unreliable", "inconclusive", "open")
LEVEL = 0.05  # the intervals' error: anytime-valid 95%


def design_of(section: Mapping[str, Any]) -> Design:
    d = section["design"]
    return Design(p0=float(d["p0"]), p1=float(d["p1"]), alpha=float(d["alpha"]), beta=float(d["beta"]),
                  cap=int(d["cap"]))


def adaptive_section(
    design: AdaptiveDesign,
    trials: Iterable[Any],
    *,
    tasks: Sequence[tuple[str, str]] = (),
    stopped: str | None = None,
) -> AdaptiveSection:
    """The ``adaptive`` section: ``trials`` are TrialResults (or anything with their
    ``domain``, ``task``, ``trial`` and ``verdict``); ``tasks`` the (domain, task) of every
    collected task, so one that never got a trial is listed too; ``stopped`` why the run
    stopped handing out trials (``max_trials`` or ``max_cost``), if a budget ran out."""
    d = Design(p0=design["p0"], p1=design["p1"], alpha=design["alpha"], beta=design["beta"], cap=design["cap"])
    by_task: dict[tuple[str, str], list[tuple[int, str]]] = {key: [] for key in tasks}
    spent = 0
    for t in trials:
        spent += 1
        by_task.setdefault((str(t.domain), str(t.task)), []).append((int(t.trial), str(t.verdict)))
    entries: list[AdaptiveTask] = []
    for (domain, task), ran in sorted(by_task.items()):
        ran.sort()
        seq = TaskSequence(d)
        stopped_at: int | None = None
        uncounted: list[int] = []
        for trial, verdict in ran:
            if seq.verdict is not None:
                uncounted.append(trial)
                continue
            if verdict == "errored":
                continue
            if seq.observe(verdict == "passed") is not None:
                stopped_at = trial
        low, high = interval(seq.passes, seq.n, LEVEL)
        entries.append({
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
        })
    counts = {v: sum(e["verdict"] == v for e in entries) for v in VERDICTS}
    fixed = d.cap * len(entries)
    return {
        "design": dict(design),  # type: ignore[typeddict-item]
        "spent": spent,
        "fixed_k_trials": fixed,
        "stopped": stopped,
        "counts": counts,
        "tasks": entries,
    }


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
    rows = []
    for e in section["tasks"]:
        trials = str(e["graded"]) + (f" (+{len(e['uncounted'])} uncounted)" if e["uncounted"] else "")
        rows.append([f"{e['domain']}/{e['task']}", shown_verdict(e), trials, f"{e['passes']}/{e['graded']}",
                     pct_range(e["interval"]), f"{e['e_value']:.3g}"])
    return [
        head,
        *tabulate(rows, headers=["task", "adaptive verdict", "graded trials", "passed", "anytime 95% CI", "e-value"],
                  tablefmt="simple", disable_numparse=True).splitlines(),
        "pass^j above counts a task only with at least j graded trials, from an adaptive sample "
        "(each task stopped once settled); intervals are anytime-valid, not Wilson",
        saving_line(section),
    ]
