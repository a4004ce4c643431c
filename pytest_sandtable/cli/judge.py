"""``judge calibrate LABELS --run RUN --judge SPEC``: how far a judge panel agrees with
people on a run's trials, and with itself (docs/judges.md, "Calibration").

Each labelled trial is judged on its criterion by the panel (from the judge cache when
a run already asked) and once more without the cache (the retest). Per criterion it
prints Cohen's kappa of each judge and of the panel against the labels, the agreement,
the test-retest flip rate, and whether the criterion is calibrated; it writes the
calibration where runs read it (``.sandtable/judge-calibration.json``). Exit 2 on bad
input (a labels line naming an unknown trial or criterion, a bad spec, a run that does
not load), else 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .exits import EXIT_ERROR, EXIT_OK
from .runs import _err, _out

__all__ = ["add_subcommands"]


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``judge calibrate`` to ``python -m pytest_sandtable``'s subcommands."""
    cmd = subparsers.add_parser("judge", help="the judge panel's own reliability (judge calibrate)",
                                description="Commands about the model judges of --sandtable-judge (docs/judges.md).")
    sub = cmd.add_subparsers(dest="judge_command", metavar="COMMAND", required=True)
    cal = sub.add_parser(
        "calibrate",
        help="agreement of a judge panel with human labels (Cohen's kappa) and with itself (test-retest)",
        description="Judge each labelled trial of a run on its criterion, twice (the second time without the "
        "judge cache), and print per criterion Cohen's kappa of each judge and of the panel against the labels "
        "and the test-retest flip rate. A criterion is calibrated at panel kappa >= 0.6 on at least 30 labels. "
        "LABELS is JSON lines: {\"criterion\": ID, \"trial\": \"TASK/N\", \"label\": \"yes\" or \"no\"}. "
        "Exit 2 on bad input, else 0.",
    )
    cal.add_argument("labels", metavar="LABELS", help="the human labels, one JSON object a line")
    cal.add_argument("--run", required=True, metavar="RUN", help="the results.json (or run folder) of the trials")
    cal.add_argument("domains", nargs="*", metavar="DOMAIN",
                     help="the domain files with the criteria (default: the files the run names, as regrade finds "
                          "them)")
    cal.add_argument("--judge", required=True, metavar="SPEC", help="the panel, as --sandtable-judge gives it")
    cal.add_argument("-o", "--out", default=None, metavar="FILE",
                     help="where the calibration goes (default .sandtable/judge-calibration.json, where a run "
                          "started here reads it)")
    cal.add_argument("--cache", default=".sandtable/judge-cache", metavar="DIR",
                     help="the judge cache the first judging reads and fills (default .sandtable/judge-cache)")
    cal.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per judge call (default 60)")
    cal.add_argument("--retries", type=int, default=2, metavar="N", help="retries of a judge call (default 2)")
    cal.set_defaults(func=_calibrate)
    mut = sub.add_parser(
        "mutants",
        help="does the panel notice when the evidence it quoted is removed from a passing trial?",
        description="For each passing trial of a judged run (--sandtable-judge) whose criterion the panel "
        "answered yes, remove every agent sentence holding a quote the judges relied on, judge the altered "
        "transcript again, and report how many the panel caught (answered no). Exit 2 on bad input, else 0.",
    )
    mut.add_argument("run", metavar="RUN", help="the results.json (or run folder) of a judged run")
    mut.add_argument("domains", nargs="*", metavar="DOMAIN",
                     help="the domain files with the criteria (default: the files the run names)")
    mut.add_argument("--judge", default=None, metavar="SPEC", help="the panel (default: the run's)")
    mut.add_argument("--cache", default=".sandtable/judge-cache", metavar="DIR",
                     help="the judge cache (default .sandtable/judge-cache)")
    mut.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per judge call (default 60)")
    mut.add_argument("--retries", type=int, default=2, metavar="N", help="retries of a judge call (default 2)")
    mut.set_defaults(func=_mutants)


def _calibrate(args: argparse.Namespace) -> int:
    from ..judge.calibrate import CALIBRATION_FILE, LabelsError, calibrate, read_labels, resolve
    from ..judge.panel import Panel, PanelOptions
    from ..judge.spec import JudgeSpecError, parse_panel
    from ..report.prices import all_prices
    from ..report.reading import open_results
    from ..report.regrade import RegradeError, domain_files, search_folders
    from ..report.results_json import ResultsError

    try:
        judges = parse_panel(args.judge)
    except JudgeSpecError as e:
        return _err(f"--judge: {e}")
    try:
        labels = read_labels(Path(args.labels), args.labels)
        with open_results(args.run) as stored:
            files = domain_files(stored.doc, args.run, args.domains, search_folders(stored.path))
            trials = list(stored.trials())
        items = resolve(labels, trials, {f.name: f.edited for f in files}, args.labels)
    except ResultsError as e:
        return _err(str(e))
    except (LabelsError, RegradeError) as e:
        for line in e.problems:
            _err(line)
        return EXIT_ERROR
    prices = all_prices()
    first = Panel(judges, PanelOptions(timeout=args.timeout, retries=args.retries, cache_dir=Path(args.cache),
                                       prices=prices))
    retest = Panel(judges, PanelOptions(timeout=args.timeout, retries=args.retries, cache_dir=None, prices=prices))
    report = calibrate(items, first, retest)
    out = Path(args.out or CALIBRATION_FILE)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as e:
        return _err(f"cannot write the calibration: {e}")
    _out([*calibration_lines(report), f"calibration written to {out}"])
    return EXIT_OK


def _mutants(args: argparse.Namespace) -> int:
    from ..judge.mutants import OPERATOR, judge_mutants
    from ..judge.panel import Panel, PanelOptions
    from ..judge.spec import JudgeSpecError, parse_panel
    from ..report.fmt import pct
    from ..report.prices import all_prices
    from ..report.reading import open_results
    from ..report.regrade import RegradeError, domain_files, search_folders
    from ..report.results_json import ResultsError
    from ..report.terminal import _table

    try:
        with open_results(args.run) as stored:
            judged = stored.doc.get("judged")
            if not judged:
                return _err(f"{args.run}: no judged scores in this run: run it with --sandtable-judge first")
            files = domain_files(stored.doc, args.run, args.domains, search_folders(stored.path))
            trials = list(stored.trials())
    except ResultsError as e:
        return _err(str(e))
    except RegradeError as e:
        for line in e.problems:
            _err(line)
        return EXIT_ERROR
    try:
        judges = parse_panel(args.judge or ",".join(judged["judges"]))
    except JudgeSpecError as e:
        return _err(f"--judge: {e}")
    panel = Panel(judges, PanelOptions(timeout=args.timeout, retries=args.retries, cache_dir=Path(args.cache),
                                       prices=all_prices()))
    report = judge_mutants(judged["trials"], trials, {f.name: f.edited for f in files}, panel)
    if not report["total"]:
        _out(["judge mutants: none made (no passing trial has a yes verdict with a quote to remove)"])
        return EXIT_OK
    lines = [f"judge mutants: {report['caught']} of {report['total']} caught ({pct(report['rate'])}) by "
             f"{', '.join(panel.names)} ({OPERATOR}: each quoted sentence removed from a passing trial; "
             f"{report['calls']} judge calls)",
             *_table([[f"{r['domain']}/{r['criterion']}", str(r["mutants"]), str(r["caught"]), pct(r["rate"])]
                      for r in report["criteria"]], ["criterion", "mutants", "caught", "detection"])]
    survivors = [m for m in report["mutants"] if not m["caught"]]
    lines += [f"survived: {m['task']}[{m['trial']}] {m['criterion']}: the panel said {m['verdict']}"
              for m in survivors]
    _out(lines)
    return EXIT_OK


def judge_regraded(results: Any, files: Any, spec: str, cache: str = ".sandtable/judge-cache") -> list[str] | None:
    """``regrade --judge SPEC``: the regraded trials judged into ``results["judged"]``;
    the lines to print, or None after an ``error:`` line for a bad spec."""
    from ..judge.panel import Panel, PanelOptions
    from ..judge.run import judge_trials
    from ..judge.spec import JudgeSpecError, parse_panel
    from ..report.prices import all_prices
    from ..report.terminal import judged_lines

    try:
        judges = parse_panel(spec)
    except JudgeSpecError as e:
        _err(f"--judge: {e}")
        return None
    domains = {f.name: f.edited for f in files}
    panel = Panel(judges, PanelOptions(cache_dir=Path(cache), prices=all_prices()))
    judged = judge_trials(results["trials"], lambda t: domains.get(str(t.get("domain"))), panel)
    if judged is None:
        return []
    results["judged"] = judged
    lines = judged_lines(judged)
    _out(lines)
    return lines


def _num(x: float | None, percent: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x * 100:.1f}%" if percent else f"{x:.2f}"


def calibration_lines(report: dict[str, Any]) -> list[str]:
    """The terminal lines of a calibration: a table per criterion and judge, then one
    verdict line per criterion."""
    from ..report.fmt import plural
    from ..report.terminal import _table

    criteria = report["criteria"]
    who = [*report["judges"], "panel"]
    rows = []
    for key, c in criteria.items():
        for n, w in enumerate(who):
            rows.append([key if n == 0 else "", str(c["labels"]) if n == 0 else "", w, str(c["scored"][w]),
                         _num(c["agreement"][w], True), _num(c["kappa"][w]), _num(c["flip_rate"][w], True)])
    labels = sum(c["labels"] for c in criteria.values())
    head = (f"calibration of {len(criteria)} criteri{'on' if len(criteria) == 1 else 'a'} by "
            f"{', '.join(report['judges'])}: {plural(labels, 'label')}, each judged twice "
            f"({plural(report['calls'], 'judge call')})")
    lines = [head, *_table(rows, ["criterion", "labels", "judge", "scored", "agree", "kappa", "flips"])]
    lines += [f"{key}: {'calibrated' if c['calibrated'] else 'uncalibrated'} ({c['why']})"
              for key, c in criteria.items()]
    return lines
