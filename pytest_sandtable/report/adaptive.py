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

With ``--sandtable-paired`` the stored baseline's own trials are paired with this run's
by seed (:func:`paired_outcomes`: the candidate's trial of a task and the stored trial of
that task with the same trial seed), and each task runs a ``sequential.PairedRegression``,
a sequential McNemar test on the discordant pairs, fed the pairs in trial order
(:func:`feed`: a pair with an errored side is not counted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate  # type: ignore[import-untyped,unused-ignore]

from ..sequential.confseq import interval
from ..sequential.design import Design
from ..sequential.multiple import e_bh
from ..sequential.regression import PairedRegression, StoredRegression
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


def stored_regression(counts: tuple[int, int], design: Design, alpha: float, m: int) -> StoredRegression:
    """A task's regression test against its stored baseline counts: at ``alpha`` over m,
    the tasks the baseline has (:func:`paired_alpha`: e-BH across m tasks flags one task
    alone only at an e-value of m / alpha, which a test at ``alpha`` itself stops short
    of), with the design's beta and cap (the same in the run that decides and in the
    report). m counts the baseline's tasks, not the run's, so that it is the same
    wherever it is read (an xdist controller learns a domain's name from its first trial)."""
    return StoredRegression(counts[0], counts[1], alpha=paired_alpha(alpha, m), beta=design.beta, cap=design.cap)


Regression = StoredRegression | PairedRegression
# a task's paired baseline outcomes, by this run's trial number: True passed, False
# failed, None errored (a trial number without a stored trial of its seed is absent)
Pairs = Mapping[int, bool | None]


def paired_outcomes(doc: Mapping[str, Any] | None, run_seed: int,
                    cap: int) -> dict[tuple[str, str], dict[int, bool | None]]:
    """A stored baseline's trials paired with this run's by seed: per (domain name, task
    id), for each of this run's trial numbers 1 to ``cap`` whose trial seed
    (``engine.trial.trial_seed`` of this run's seed) a stored trial of the task has, that
    trial's outcome. With the same run seed a stored trial n pairs with this run's trial n;
    a task none of whose stored trials shares a seed is left out (nothing to pair)."""
    from ..engine.trial import trial_seed

    stored: dict[tuple[str, str, int], bool | None] = {}
    for t in (doc or {}).get("trials") or ():
        verdict = str(t.get("verdict"))
        stored[(str(t.get("domain")), str(t.get("task")), int(t.get("seed") or 0))] = (
            None if verdict == "errored" else verdict == "passed")
    out: dict[tuple[str, str], dict[int, bool | None]] = {}
    for domain, task in sorted({(d, t) for d, t, _ in stored}):
        found: dict[int, bool | None] = {}
        for n in range(1, cap + 1):
            seed = trial_seed(run_seed, domain, task, n)
            if (domain, task, seed) in stored:
                found[n] = stored[(domain, task, seed)]
        if found:
            out[(domain, task)] = found
    return out


def paired_problem(doc: Mapping[str, Any], run_seed: int, cap: int, given: str) -> str | None:
    """Why a stored baseline cannot be paired with this run (``--sandtable-paired``), or
    None: it has no trials with their seeds, or none of its trials' seeds is one this
    run's trials of the task will have (it ran with another ``--sandtable-seed``)."""
    trials = (doc or {}).get("trials") or ()
    if not trials:
        return (f"{given} has no trials with their seeds to pair with (its results.json lists none); "
                f"give a baseline whose results.json keeps its trials, or leave out --sandtable-paired "
                f"to test against its counts")
    if paired_outcomes(doc, run_seed, cap):
        return None
    theirs = (doc.get("run") or {}).get("run_seed")
    why = (f"it ran with --sandtable-seed={theirs}, this run with {run_seed}; give --sandtable-seed={theirs}"
           if theirs is not None and theirs != run_seed else "its trials' seeds are not this run's")
    return f"no trial of {given} has the seed of this run's trial of its task: {why}"


def paired_alpha(alpha: float, m: int) -> float:
    """The level of each task's paired test: ``alpha`` over m, the tasks with a paired test
    (a stored baseline's tasks with pairs; with the baseline agent, the collected tasks).
    A task's test says "regressed" once its e-value reaches m / alpha, which is what e-BH
    across m tasks needs to flag one task alone; at ``alpha`` itself a task would stop at
    1/alpha, an e-value e-BH could not flag in a suite of more than one task."""
    return alpha / max(m, 1)


def paired_regression(design: Design, alpha: float) -> PairedRegression:
    """A task's paired regression test: at ``alpha`` (:func:`paired_alpha`), with the design's beta and cap."""
    return PairedRegression(alpha=alpha, beta=design.beta, cap=design.cap)


def feed(seq: TaskSequence, reg: Regression | None, trial: int, passed: bool, pairs: Pairs | None = None,
         last: int | None = None) -> None:
    """One graded outcome of a task, trial ``trial``, into its verdict and its regression
    test (the same in the run that decides and in the report). A paired test takes the
    pair if the baseline's trial of that seed was graded; it closes (inconclusive) after
    ``last``, the last trial a stored baseline has (None: the baseline agent's, each trial
    has one), and once the task's verdict is settled with no more
    drops than gains so far (ties say nothing: without this, a task both builds always
    pass would run to the cap; stopping a sequential test early never breaks its bound)."""
    if seq.verdict is None:
        seq.observe(passed)
    if reg is None or reg.verdict is not None:
        return
    if isinstance(reg, StoredRegression):
        reg.observe(passed)
        return
    base = pairs.get(trial) if pairs is not None else None
    if base is not None:
        reg.observe(base, passed)
    if reg.verdict is None and ((last is not None and trial >= last) or (seq.verdict is not None
                                                                         and reg.drops <= reg.gains)):
        reg.close()


def task_settled(seq: TaskSequence, reg: Regression | None) -> bool:
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
    pairs: Mapping[tuple[str, str], Pairs] | None = None,
    in_job: bool = False,
) -> AdaptiveSection:
    """The ``adaptive`` section: ``trials`` are TrialResults (or anything with their
    ``domain``, ``task``, ``trial`` and ``verdict``); ``tasks`` the (domain, task) of every
    collected task, so one that never got a trial is listed too; ``stopped`` why the run
    stopped handing out trials (``max_trials`` or ``max_cost``), if a budget ran out.
    ``baseline``: a stored baseline's counts per task (:func:`baseline_counts`); each task
    it has gets a regression test at ``regression_alpha`` (default: the design's alpha),
    and the section a ``regression`` part, e-BH across those tasks. ``pairs``: instead, the
    paired design (:func:`paired_outcomes`): each task with pairs gets a paired test.
    ``in_job``: those pairs are the baseline agent's trials of this run
    (``--sandtable-baseline-agent``): every task gets a paired test, at alpha over the
    tasks."""
    d = Design(p0=design["p0"], p1=design["p1"], alpha=design["alpha"], beta=design["beta"], cap=design["cap"])
    ralpha = regression_alpha if regression_alpha is not None else d.alpha
    by_task: dict[tuple[str, str], list[tuple[int, str]]] = {key: [] for key in tasks}
    spent = 0
    for t in trials:
        spent += 1
        by_task.setdefault((str(t.domain), str(t.task)), []).append((int(t.trial), str(t.verdict)))
    entries: list[AdaptiveTask] = []
    task_alpha = paired_alpha(ralpha, len(by_task) if in_job else len(pairs or {}))
    for (domain, task), ran in sorted(by_task.items()):
        ran.sort()
        seq = TaskSequence(d)
        found = baseline.get((domain, task)) if baseline is not None and pairs is None else None
        paired = pairs.get((domain, task), {} if in_job else None) if pairs is not None else None
        reg: Regression | None = (stored_regression(found, d, ralpha, len(baseline or {})) if found is not None else
                                  paired_regression(d, task_alpha) if paired is not None else None)
        last = None if in_job or not paired else max(paired)
        stopped_at: int | None = None
        uncounted: list[int] = []
        for trial, verdict in ran:
            if task_settled(seq, reg):
                uncounted.append(trial)
                continue
            if verdict == "errored":
                continue
            was = seq.verdict
            feed(seq, reg, trial, verdict == "passed", paired, last)
            if was is None and seq.verdict is not None:
                stopped_at = trial
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
        if isinstance(reg, PairedRegression):
            entry["regression"] = {"verdict": reg.verdict or "open", "e_value": reg.e_value, "graded": reg.n,
                                   "pairs": [reg.drops, reg.gains]}
        elif found is not None and reg is not None:
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
    if pairs is not None:
        section["regression"] = regression_part(entries, ralpha, "paired")
        section["regression"]["task_alpha"] = task_alpha
    elif baseline is not None:
        section["regression"] = regression_part(entries, ralpha)
        section["regression"]["task_alpha"] = paired_alpha(ralpha, len(baseline))
    return section


def regression_part(entries: Sequence[AdaptiveTask], alpha: float, design: str = "stored") -> AdaptiveRegression:
    """e-BH at ``alpha`` on the stopped e-values of the tasks with a regression test: the
    flagged tasks (largest e-value first), named as the summary names them."""
    several = len({e["domain"] for e in entries}) > 1
    e_values = {task_name(e["domain"], e["task"], several): e["regression"]["e_value"]
                for e in entries if "regression" in e}
    return {"design": design, "alpha": alpha, "method": "e-BH", "tasks": len(e_values),
            "flagged": e_bh(e_values, alpha) if e_values else []}


def regression_line(part: AdaptiveRegression) -> str:
    """``regressed (sequential, e-BH at alpha 0.05): task-a, task-b``, or that none did."""
    how = regression_how(part)
    if part["flagged"]:
        return f"regressed ({how}): {', '.join(part['flagged'])}"
    return f"no task regressed ({how}; {plural(part['tasks'], 'task')} in the baseline)"


def regression_how(part: AdaptiveRegression) -> str:
    """``sequential, e-BH at alpha 0.05`` (``paired sequential, ...`` in the paired design)."""
    return f"{'paired ' * (part['design'] == 'paired')}sequential, e-BH at alpha {part['alpha']:g}"


def failing_tasks(section: AdaptiveSection) -> frozenset[tuple[str, str]]:
    """The (domain, task) of the tasks settled unreliable: the summary counts each as
    failing at every j past its graded trials (``summary.summarize``'s ``failing``)."""
    return frozenset((e["domain"], e["task"]) for e in section["tasks"] if e["verdict"] == "unreliable")


def attach(results: Any, section: AdaptiveSection) -> None:
    """Put an adaptive run's ``section`` into its ``results`` (built with
    ``failing=failing_tasks(section)``): the summary's and the tasks' intervals made the
    anytime-valid ones, and the section itself."""
    honest_intervals(results["summary"], section)
    honest_intervals({"tasks": results["tasks"]}, section)
    results["adaptive"] = section


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
        "pass^j above, from an adaptive sample (each task stopped once settled): a task settled unreliable "
        "counts as failing at every j past its graded trials, any other task only with at least j; "
        "intervals are anytime-valid, not Wilson",
        saving_line(section),
    ]


def regression_cell(e: AdaptiveTask) -> str:
    """``regressed after 7 (32/32 before, e-value 58)``, ``regressed after 9 pairs (5 drops,
    0 gains; e-value 21.3)`` in the paired design, or ``not in the baseline``."""
    r = e.get("regression")
    if r is None:
        return "not in the baseline"
    if "pairs" in r:
        drops, gains = r["pairs"]
        return (f"{r['verdict']} after {plural(r['graded'], 'pair')} ({plural(drops, 'drop')}, "
                f"{plural(gains, 'gain')}; e-value {r['e_value']:.3g})")
    b = r["baseline"]
    return f"{r['verdict']} after {r['graded']} ({b[0]}/{b[1]} before, e-value {r['e_value']:.3g})"
