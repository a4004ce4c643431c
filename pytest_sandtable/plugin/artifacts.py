"""The one recorder of a run's results, and what it makes of them: results.json,
report.html, the gate's exit status, the terminal summary, JUnit XML properties and
trials lost with a dying pytest-xdist worker.

One flow: a trial's :class:`TrialResult` reaches the :class:`Recorder` with the report
of the phase that tells it (from the item that ran it, or on the xdist controller as the
line the report carried from a worker), which hands it to the spool at once
(``report.spool``: on disk within a few trials), keeping in memory only what the
summary reads: a run's memory does not grow with its transcripts. A trial is encoded
once, where it ran (under xdist the controller stores the worker's line as it is), and the reports
pytest keeps to the end hold what the three reports of an item have alike once. At
session finish the recorder builds the run's results once (:class:`RunReport`); the
terminal summary, both files and the gate read that, so they never disagree.

``plugin.pytest_configure`` registers the recorder. This module imports only the
standard library and pytest at load; the writers, the summary and the engine are
imported inside the hooks that need them, so a pytest run without domain files pays
nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import RUN_STATE, RunConfig, is_xdist_worker
from .telemetry import ended_at, run_telemetry

if TYPE_CHECKING:
    from ..engine.results import TrialResult
    from ..report.gates import GateCheck
    from ..report.results_json import RunMeta
    from ..report.spool import Alike, TrialSpool
    from ..report.types import AdaptiveSection, Results

__all__ = ["Recorder", "RunReport", "crashed_trial", "trial_ended"]

_NODEID = re.compile(r"^(?P<path>.+?)::(?P<task>[^:\[]+)\[(?P<trial>\d+)-(?P<k>\d+)\]$")
_JUNIT_PREFIX = "sandtable."
RECORDER = "sandtable-recorder"  # the name the recorder is registered under (plugin.pytest_configure)
_WORKER_CRASHED = "worker_crashed"  # what ended a trial whose xdist worker died (TrialResult.ended_by)
# what the setup, call and teardown reports of one item hold alike (pytest builds each
# anew, and pytest-xdist reads each anew on the controller): pytest's node id (in
# pytest >= 9 an object, before a string), the item's location and its keywords
_ITEM_PARTS = ("_id", "nodeid", "location", "keywords")
# strings every report repeats, pytest's and pytest-xdist's, each read anew from a worker
_REPORT_TEXTS = ("outcome", "when", "worker_id", "testrun_uid", "$report_type")


@dataclass(frozen=True)
class RunReport:
    """What a run came to, made once at session finish."""

    results: Results  # the results.json document: every trial, the summary, the gate's outcome
    out_dir: Path | None  # where results.json and report.html went
    write_error: str | None  # why they could not be written
    # with --sandtable-baseline: a few lines on the comparison, for the terminal summary
    comparison: list[str] = dataclasses.field(default_factory=list)
    # policy coverage: per domain its summary line, or the one line saying why it was not computed
    coverage: list[str] = dataclasses.field(default_factory=list)
    # --sandtable-mutate: the mutation run's lines, or the one line saying why it did not run
    mutation: list[str] = dataclasses.field(default_factory=list)
    # --sandtable-judge: the judged scores' lines (plugin/judging.py)
    judged: list[str] = dataclasses.field(default_factory=list)


class Recorder:
    """Receives every trial's result and every collection error (on the xdist controller,
    from every worker). At session finish, on the controller or the only process, it
    builds the :class:`RunReport`, writes it, applies the gate to the exit status and
    shows it in the terminal summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.run = RunConfig.of(config)
        # not results_json.iso_utc: that module is imported only when there is something to write
        self.started_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        # every trial recorded, on disk; made with the first (see report.spool)
        self.spool: TrialSpool | None = None
        self.foreign_failures = 0  # failed reports that are not sandtable trials
        self.collect_errors = 0
        # domain files that did not load: {path (relative to the rootdir), message}
        self.collection_errors: list[dict[str, str]] = []
        self.report: RunReport | None = None
        # JUnit XML properties only for --junitxml (xdist gives workers the option too): a
        # report keeps its item's properties, and pytest keeps every report to the end
        self.junit = bool(getattr(config.option, "xmlpath", None))
        self.worker = is_xdist_worker(config)
        # trial items of this process whose result a report has yet to tell, by node id
        # (see carry): the report of the phase that tells it takes it from there (a
        # skipped trial's is there from collection on, on every xdist worker)
        # (several with --keep-duplicates: they run, and are reported, in that order)
        self._ended: dict[str, list[Any]] = {}
        # what the last trial report from each xdist worker held of _ITEM_PARTS, and
        # strings held once (made with the first trial report: a run without trials
        # loads nothing for them)
        self._last_parts: dict[Any, dict[str, Any]] = {}
        self._alike: Alike | None = None
        self._last_keywords: Any = None  # of this process's last trial report (see _keywords_once)
        self._sigterm = _stop_on_sigterm()  # the handler it replaced, put back at unconfigure
        # on the xdist controller of an adaptive run or one with a budget: what decides (plugin.adaptive)
        self.decider: Any = config.pluginmanager.get_plugin("sandtable-decider")
        # --sandtable-otel: each recorded trial's spans (plugin/telemetry.py); its line at the end
        self.otel = run_telemetry(self.run, self.worker) if self.run.otel else None
        self.otel_lines: list[str] = []
        self._secrets: list[str] | None = None  # redacted from the lines a worker sends (see _line)
        # --sandtable-baseline-agent: the baseline side of each trial (plugin.adaptive.baseline_side),
        # by node id until its report is logged, then by (domain, task) and trial where trials are recorded
        self._sides: dict[str, dict[str, Any]] = {}
        self.baseline_sides: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}

    # -- on every process (xdist workers too) ----------------------------------------

    def carry(self, item: Any, result: TrialResult) -> None:
        """Take ``result``, which ``item`` holds (see :func:`trial_ended`), off it when the
        report that tells it is logged (:meth:`pytest_runtest_logreport`).

        With ``--junitxml``, task, trial, tags and verdict become JUnit XML properties
        (short strings) now, before the setup report is made: junitxml reads them from
        the teardown report, which holds the item's list of them."""
        self._ended.setdefault(item.nodeid, []).append(item)
        side = getattr(item, "sandtable_baseline", None)
        if side is not None:  # --sandtable-baseline-agent: its trial of the same seed, told with this one's
            self._sides[item.nodeid] = side
        if self.junit:
            kept = [p for p in item.user_properties if not str(p[0]).startswith(_JUNIT_PREFIX)]
            item.user_properties[:] = [*kept, *_junit_properties(result)]

    def _told_by(self, report: pytest.TestReport) -> TrialResult | None:
        """The result of this process's trial that ``report`` tells, taken from its item,
        which lives as long as the session and need not hold it on. The teardown report
        takes it too when the phase that tells it never came (``--setup-only``). Items of
        one node id (``--keep-duplicates``) are taken in the order they run."""
        nodeid = report.nodeid  # a property, made each time it is read
        items = self._ended.get(nodeid)
        if items is None:
            return None
        item = items[0]
        carried = item.sandtable_result
        told = carried is not None and carried[0] == report.when
        # a setup-phase result is told by the setup report, which comes before this
        # item's teardown: one still held at a teardown is a later item's of that node id
        if told or (report.when == "teardown" and (carried is None or carried[0] != "setup")):
            item.sandtable_result = None
            if len(items) > 1:
                del items[0]
            else:
                del self._ended[nodeid]
        return carried[1] if told else None

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Counts collection errors; a domain file's is recorded for results.json. Under
        xdist the workers' failed collect reports reach the controller through this hook."""
        if not report.failed:
            return
        self.collect_errors += 1
        path = report.nodeid.split("::")[0]
        from ..domain.files import is_domain_file

        if not path or "::" in report.nodeid or not is_domain_file(Path(path)):
            return
        if any(c["path"] == path for c in self.collection_errors):
            return  # every xdist worker collects every file
        message = (report.longreprtext or "").strip() or "the domain file could not be collected"
        self.collection_errors.append({"path": path, "message": message})

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """A ``--sandtable-floor`` on a tag no collected trial has, and a ``--sandtable-baseline``
        with no task in common with the collected trials, are usage errors before any
        trial runs (after -k/-m deselection). Not on an xdist worker: there the controller
        reports them at the end of the run, as it never collects."""
        if self._ended:  # skipped trials, held from collection on: by the node ids items end with
            # (pytest-xdist's --dist loadgroup adds the group to them, in its own modifyitems)
            held, self._ended = self._ended, {}
            for items in held.values():
                for it in items:
                    self._ended.setdefault(it.nodeid, []).append(it)
        if self.worker:
            return
        trials = [it for it in items if getattr(it, "is_sandtable_trial", False)]
        if not trials:
            return  # no trial to gate: nothing is written, nothing is gated
        self._check_floors(trials)
        self._check_baseline(trials)

    def _check_floors(self, trials: list[pytest.Item]) -> None:
        floors = self.run.floors
        if not floors:
            return
        tags = {tag for it in trials for tag in getattr(getattr(it, "task", None), "tags", ())}
        # a run of several domains scores a tag that is not shared as domain/tag: a floor
        # may name either form
        scoped = {f"{it.domain.name}/{tag}" for it in trials if hasattr(it, "domain")
                  for tag in getattr(getattr(it, "task", None), "tags", ())}
        unknown = [tag for tag in floors if tag not in tags and tag not in scoped]
        if not unknown:
            return
        from ..report.fmt import number

        known = ", ".join(sorted(tags)) or "(none: no task has a tag)"
        broken = ""
        if self.collection_errors:
            n = len(self.collection_errors)
            broken = (f" ({n} domain file{'s' if n != 1 else ''} did not load: "
                      f"{', '.join(c['path'] for c in self.collection_errors)})")
        raise pytest.UsageError(*(
            f"--sandtable-floor {tag}={number(floors[tag])}: no collected trial is tagged {tag!r}; "
            f"the tags are {known}{broken}"
            for tag in unknown
        ))

    def _check_baseline(self, trials: list[pytest.Item]) -> None:
        """The baseline must share a task (domain name and task id) with the collected trials."""
        base = self.run.baseline
        if base is None or base.doc is None:
            return
        collected = {(getattr(getattr(it, "domain", None), "name", ""), getattr(getattr(it, "task", None), "id", ""))
                     for it in trials}
        theirs = {(str(t["domain"]), str(t["task"])) for t in base.doc.get("trials") or []}
        if collected & theirs:
            return

        def listed(keys: set[tuple[str, str]]) -> str:
            names = sorted(f"{d}/{t}" for d, t in keys)
            return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") or "no task"

        raise pytest.UsageError(f"--sandtable-baseline: {base.given} has no task in common with the collected "
                                f"trials (it has {listed(theirs)}; collected: {listed(collected)})")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A trial's result reaches the recorder in the report of the phase that tells it,
        first of the hook's implementations: on an xdist worker before pytest-xdist's own
        sends the report, on the controller or the only process before any other plugin
        (pytest-reportlog's, the terminal's) reads it.

        In a worker it rides on to the controller as the line the spool stores, one string
        (``report.sandtable``: a TestReport keeps extra attributes, and pytest-xdist
        carries them), within the caps, secrets redacted, with no lone surrogate; the
        controller stores it as it came. Where it is recorded it goes to the spool at once: taken
        from the report, which pytest keeps to the end of the session (every passed one
        too, in the terminal reporter's stats), or straight from this process's item."""
        result = self._told_by(report) if self._ended else None
        side = self._sides.pop(report.nodeid, None) if result is not None and self._sides else None
        if self.worker:
            if result is not None:
                report.sandtable = self._line(result)  # type: ignore[attr-defined]
                if side is not None:
                    report.sandtable_baseline = json.dumps(side, default=str)  # type: ignore[attr-defined]
            return
        final = str(report.outcome) != "rerun"  # a trial retried by pytest-rerunfailures counts once: its final run
        if result is not None:
            if final:
                if side is not None:
                    self.baseline_sides.setdefault((result.domain, result.task), {})[result.trial] = side
                self._spool().add_fresh(result)
                if self.otel is not None:
                    self.otel.add(result.to_dict(), ended_at(report))
        else:
            line = vars(report).pop("sandtable", None)  # from a worker (or pytest_handlecrashitem)
            if line is None:
                if report.failed:
                    self.foreign_failures += 1
            elif final:
                data = self._spool().add_line(line)  # stored as it came; read for its light trial
                if self.otel is not None:
                    self.otel.add(data, ended_at(report))
                told = vars(report).pop("sandtable_baseline", None)
                side = json.loads(told) if told is not None else None
                if side is not None:
                    self.baseline_sides.setdefault((str(data.get("domain")), str(data.get("task"))), {})[
                        int(data.get("trial") or 0)] = side
                if self.decider is not None:  # the xdist controller decides which trials are still needed
                    self.decider.needs.ended_stored(data, side)
        if "sandtable" in report.keywords:  # a trial item's report (its marker)
            self._hold_once(vars(report))

    # -- where trials are recorded: the xdist controller, or the only process -----------

    def _hold_once(self, parts: dict[str, Any]) -> None:
        """Make a trial report hold once what the reports of the run hold alike (its
        ``parts``: its attributes). pytest keeps every report to the end of the session,
        three an item: as built, 20,000 trials' reports would hold 60,000 copies of their
        keywords and locations, and from xdist workers of every string in them. Equal
        values become one object; no value changes."""
        worker = parts.get("worker_id")
        if worker is None:
            self._keywords_once(parts)
            return
        if self._alike is None:
            from ..report.spool import Alike

            self._alike = Alike()
        # a worker's reports arrive between another's, each worker's in its items' order;
        # read from a worker's message, every string in them is a copy of its own
        alike, last = self._alike, self._last_parts.get(worker, {})
        for name in _ITEM_PARTS:
            value = parts.get(name)
            if value is None:
                continue
            if name in last and value == last[name]:
                parts[name] = last[name]  # the item's reports before this one
            elif name == "keywords" and type(value) is dict:
                parts[name] = {alike.text(k): v for k, v in value.items()}
            elif name == "location" and type(value) is tuple:
                parts[name] = tuple(alike.text(x) for x in value)
        self._last_parts[worker] = {name: parts[name] for name in _ITEM_PARTS if name in parts}
        for name in _REPORT_TEXTS:
            if name in parts:
                parts[name] = alike.text(parts[name])

    def _keywords_once(self, parts: dict[str, Any]) -> None:
        """:meth:`_hold_once` of a report of this process: pytest builds each of an item's
        reports of the item's own node id and location (the same objects), and its
        keywords anew, which alone are held once (the cheapest check first)."""
        keywords, last = parts.get("keywords"), self._last_keywords
        if keywords is last:
            return
        if last is not None and keywords is not None and len(keywords) == len(last) and keywords == last:
            parts["keywords"] = last
        else:
            self._last_keywords = keywords

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        """A trial's captured output (what its agent, user or handlers printed, wrote to
        stderr or logged) as safe as the files: secrets redacted, lone surrogates
        replaced, and each section clipped to its first and last characters, for the
        terminal (a failure's sections, ``-rA``), JUnit XML's system-out and system-err,
        and what xdist carries to the controller. The item's own copy is made the same,
        so the reports of its later phases, and the session, hold no more. Other tests'
        output is theirs."""
        report = yield
        if report.sections and getattr(item, "is_sandtable_trial", False):
            from ..report.safe import secret_values

            secrets = secret_values()
            held = getattr(item, "_report_sections", None)  # pytest's, copied into every later report
            if isinstance(held, list):
                held[:] = [(when, key, _shown_section(f"Captured {key}", text, secrets))
                           for when, key, text in held]
            report.sections = [(title, _shown_section(title, text, secrets)) for title, text in report.sections]
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """pytest-xdist's hook, on the controller: a trial whose worker died becomes an
        errored trial (left out of pass^k, never a pass), carried by the report xdist
        logs next like any other trial's result."""
        why = str(report.longrepr or "the worker crashed")
        result = crashed_trial(crashitem, self.config.rootpath, run_seed=self.run.seed, why=why)
        if result is not None:
            report.sandtable = self._line(result)  # type: ignore[attr-defined]
            _give_junit_properties(self.config, report, result)

    def _line(self, result: TrialResult) -> str:
        """``result`` as the one string a report carries to the xdist controller: the line
        the spool stores (``report.spool.trial_line``: within the caps, this process's
        secrets redacted, lone surrogates replaced), which execnet writes as it is and the
        controller stores without encoding it again."""
        from ..report.spool import trial_line

        if self._secrets is None:
            from ..report.safe import secret_values

            self._secrets = secret_values()
        return trial_line(result, self._secrets).decode("utf-8")

    def _spool(self) -> TrialSpool:
        """The run's spool, made with its first trial, in the folder results.json goes to
        (or the one run folders are made in)."""
        if self.spool is None:
            from ..report.spool import TrialSpool, spool_folder

            self.spool = TrialSpool(spool_folder(self.run.out_dir, self.config.rootpath))
        return self.spool

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker or not (self.spool or self.collection_errors):
            return
        results = self._results(session)
        mutation, mutation_checks = self._mutation(results)
        comparison, regression = self._against_baseline(results)
        if regression is not None or mutation_checks:
            self._regate(results, [*(regression or ()), *mutation_checks])
        coverage = self._policy_coverage(results)
        from .judging import judge_results  # after the gate: judged scores never reach it

        judged = judge_results(self.config, results)
        out_dir, write_error = self._write(results)
        if self.otel is not None:
            self.otel_lines = self.otel.finish(out_dir)
        self.report = RunReport(results, out_dir, write_error, comparison, coverage, mutation, judged)
        self._apply_exit_status(session, self.report)

    def pytest_unconfigure(self) -> None:
        """The spool file goes (the results are written, the summary shown); SIGTERM's
        handler is the one before the run again."""
        if self._sigterm is not None:
            _restore_sigterm(self._sigterm)
            self._sigterm = None
        if self.spool is not None:
            self.spool.close()

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Any:
        """The summary's tables first; then what other plugins add (junitxml's file,
        --durations); then where the files went and the gate's verdict, last before
        pytest's short test summary."""
        report = self.report  # None on a worker, and when no trial ran and no domain file broke
        if report is not None and report.results["trials"]:
            from ..report.terminal import render_terminal

            terminalreporter.section("sandtable")
            for line in render_terminal(report.results["summary"], all_tasks=self.run.all_tasks):
                terminalreporter.write_line(line)
            if "adaptive" in report.results:
                from ..report.adaptive import terminal_lines

                terminalreporter.write_line("")
                for line in terminal_lines(report.results["adaptive"]) + _unneeded_lines(terminalreporter):
                    terminalreporter.write_line(line)
            if report.coverage:
                terminalreporter.write_line("")
            for line in report.coverage:
                terminalreporter.write_line(line)
            if report.mutation:
                terminalreporter.write_line("")
            for line in report.mutation:
                terminalreporter.write_line(line)
            for line in [""] * bool(report.judged) + report.judged:
                terminalreporter.write_line(line)
        outcome = yield
        if report is not None:
            self._write_outcome(terminalreporter, report)
        return outcome

    # -- building, writing and telling the run's results ------------------------------

    def _results(self, session: pytest.Session) -> Results:
        from ..report.results_json import build_results, build_spooled

        run = self.run
        if self.spool is None:  # no trial, only domain files that did not load
            return build_results([], self._run_meta([], session), fail_under=run.fail_under, floors=run.floors,
                                 prices=run.prices)
        trials = _name_unknown_sides(self.spool.trials(), run)
        self.spool.rename_sides(trials)
        section = self._adaptive(trials) if run.adaptive is not None else None
        failing: frozenset[tuple[str, str]] = frozenset()
        if section is not None:
            from ..report.adaptive import failing_tasks

            # a task settled unreliable counts as failing past its graded trials, the gate's figures too
            failing = failing_tasks(section)
        results = build_spooled(self.spool, self._run_meta(trials, session), fail_under=run.fail_under,
                                floors=run.floors, prices=run.prices, failing=failing)
        if section is not None:
            from ..report.adaptive import attach

            attach(results, section)
        return results

    def _adaptive(self, trials: list[TrialResult]) -> AdaptiveSection:
        """--sandtable-adaptive: results.json's ``adaptive`` section, from the design and the
        recorded trials (``report.adaptive``)."""
        from ..report.adaptive import adaptive_section

        run = self.run
        a = run.adaptive
        assert a is not None  # only then
        tasks: list[tuple[str, str]] = []
        stopped = None
        needs = self.decider.needs if self.decider is not None else None
        if needs is None and RUN_STATE in self.config.stash:
            from .session import run_state

            needs = run_state(self.config).needs
        if needs is not None:
            tasks, stopped = needs.collected_names(), needs.stopped
        baseline = pairs = None
        in_job = run.baseline is not None and run.baseline.agent is not None
        if in_job:
            pairs = {key: {n: (None if side.get("verdict") == "errored" else side.get("verdict") == "passed")
                           for n, side in by_trial.items()} for key, by_trial in self.baseline_sides.items()}
        elif run.baseline is not None and run.baseline.doc is not None:
            from ..report.adaptive import baseline_counts, paired_outcomes

            if run.baseline.paired:
                pairs = paired_outcomes(run.baseline.doc, run.seed, a.cap)
            else:
                baseline = baseline_counts(run.baseline.doc)
        from .adaptive import regression_alpha

        section = adaptive_section(
            {"p0": a.p0, "p1": a.p1, "alpha": a.alpha, "beta": a.beta, "cap": a.cap,
             "max_trials": a.max_trials, "max_cost": run.max_cost},
            trials, tasks=tasks, stopped=stopped, baseline=baseline, regression_alpha=regression_alpha(run),
            pairs=pairs, in_job=in_job)
        if in_job and "regression" in section:
            from ..engine.redact import public_spec

            assert run.baseline is not None and run.baseline.agent is not None  # in_job
            section["regression"]["baseline_agent"] = public_spec(run.baseline.agent)
        return section

    def _against_baseline(self, results: Results) -> tuple[list[str], list[GateCheck] | None]:
        """Compare the run with ``--sandtable-baseline``: the lines the terminal summary shows,
        and with ``--sandtable-fail-on-regression`` the comparison's checks, which join the
        gate (``None`` without it)."""
        base = self.run.baseline
        if base is not None and base.agent is not None and "adaptive" in results and results["trials"]:
            lines, checks = _sequential_regression(results["adaptive"], _critical_pairs(results),
                                                   base.fail_on_regression)
            return lines + self._baseline_spend(), (checks if base.fail_on_regression else None)
        if base is None or base.doc is None or not results["trials"]:
            return [], None
        from ..report.compare import CompareError, RunDoc, compare, labels, regression_checks, summary_lines
        from ..report.gates import GateCheck

        this = RunDoc(labels([("", results)])[0], "this run", results)
        try:
            cmp = compare(RunDoc("baseline", base.given, base.doc), this, base.alpha)
        except CompareError as e:  # under xdist, where the controller cannot check it before the run
            checks = [GateCheck(False, f"--sandtable-baseline: {e}")]
            lines = [f"sandtable: cannot compare with the baseline: {e}"]
        else:
            checks = regression_checks(cmp, base.max_drop)
            if self.run.adaptive is not None and "adaptive" in results:
                lines, checks = _sequential_regression(results["adaptive"], checks, base.fail_on_regression)
            else:
                lines = summary_lines(cmp, checks, verdict=not base.fail_on_regression)
        return lines, (checks if base.fail_on_regression else None)

    def _baseline_spend(self) -> list[str]:
        """--sandtable-baseline-agent: the baseline side's trials and cost, apart from the run's."""
        from ..report.fmt import format_cost, plural
        from ..report.prices import builtin_prices, estimate_cost

        sides = [side for by_trial in self.baseline_sides.values() for side in by_trial.values()]
        prices = self.run.prices if self.run.prices is not None else builtin_prices()
        cost, priced = 0.0, False
        for side in sides:
            usage = side.get("usage") or {}
            if side.get("replayed") or not isinstance(usage, dict):
                continue
            for part in ("agent", "user"):
                for c in estimate_cost(usage.get(part) or {}, prices).values():
                    if c is not None:
                        cost, priced = cost + c, True
        counts = {v: sum(side.get("verdict") == v for side in sides) for v in ("passed", "failed", "errored")}
        return [f"sandtable: the baseline agent's {plural(len(sides), 'trial')}: {counts['passed']} passed, "
                f"{counts['failed']} failed, {counts['errored']} errored; cost "
                f"{format_cost(cost) if priced else 'not priced'} (not in the run's)"]

    def _regate(self, results: Results, checks: list[GateCheck]) -> None:
        """The gate evaluated anew (in ``results``) with the regression's and the mutation's checks."""
        if self.spool is None:
            return
        from ..report.gates import evaluate

        run = self.run
        outcome = evaluate(results["summary"], run.fail_under, run.floors, self.spool.ordered()[0],
                           results["run"].get("collection_errors") or (),
                           stopped_early=results["run"].get("stopped_early"), regression=checks)
        results["gate"] = outcome.to_dict(run.fail_under, run.floors)  # type: ignore[typeddict-item]

    def _domains_of(self, results: Results) -> Callable[[str], Any]:
        """A loader of the run's domains by the path its trials give (relative to the root):
        the ones this process collected, else (the xdist controller collects none) each
        read once through the domain cache."""
        root = Path(self.config.rootpath)
        loaded: dict[str, Any] = {}
        if RUN_STATE in self.config.stash:
            from .session import run_state

            loaded = {_rel(Path(path), root): dom for path, dom in run_state(self.config).domains.items()}

        def domain_at(path: str) -> Any:
            domain = loaded.get(path)
            if domain is None:
                from ..domain.cache import load_domain_cached

                run = self.run
                domain = load_domain_cached(root / path, run.domain_cache_dir if run.domain_cache else None)
                loaded[path] = domain
            return domain

        return domain_at

    def _mutation(self, results: Results) -> tuple[list[str], list[GateCheck]]:
        """``--sandtable-mutate``: the tasks of the run mutated (docs/mutate.md), per domain
        file, into ``results["mutation"]``; its lines for the terminal and the mutation
        gate's checks. A failure is one line and, with a mutation gate given, a failed check."""
        gate = self.run.mutate
        if gate is None or not results["trials"]:
            return [], []
        stopped = results["run"].get("stopped_early")
        if stopped:  # the user stopped the run (or a budget did): it ends now, as it would without mutation
            return [f"sandtable: mutation not run: the run stopped early ({stopped})"], []
        try:
            from ..mutate.session import Target, mutate_run

            tasks: dict[tuple[str, str], set[str]] = {}
            for stored in results["trials"]:
                location = str(stored.get("location") or "")
                path = location.rpartition(":")[0] if ":" in location else location
                tasks.setdefault((str(stored["domain"]), path), set()).add(str(stored["task"]))
            domain_at = self._domains_of(results)
            targets = [Target(domain_at(path), path, tasks[(name, path)]) for name, path in sorted(tasks)]
            outcome = mutate_run(targets, fail_under=gate.fail_under, fail_on_weak=gate.fail_on_weak)
            results["mutation"] = outcome.doc
            return outcome.lines, outcome.checks
        except Exception as e:  # mutation is a report: never the run's end
            from ..report.gates import GateCheck

            line = f"sandtable: mutation not run: {type(e).__name__}: {e}"
            gated = gate.fail_under is not None or gate.fail_on_weak
            return [line], ([GateCheck(False, f"the mutation run failed ({type(e).__name__}: {e})")] if gated else [])

    def _policy_coverage(self, results: Results) -> list[str]:
        """The policy coverage of the run's trials (docs/grading.md, "Policy coverage"),
        off the per-trial path: at the end, the stored trials read back one at a time, each
        fed to its domain's accumulator. Per domain its summary line; a failure is one line
        and never breaks the run."""
        if not results["trials"]:
            return []
        try:
            from ..engine.results import TrialResult
            from ..policy_coverage import CoverageAccumulator, coverage_json
            from ..policy_coverage.render import summary_line

            domain_at = self._domains_of(results)
            accs: dict[tuple[str, str], CoverageAccumulator] = {}
            for stored in results["trials"]:
                t = TrialResult.from_dict(dict(stored))
                path = t.location.rpartition(":")[0] if ":" in t.location else t.location
                acc = accs.get((t.domain, path))
                if acc is None:
                    acc = accs[(t.domain, path)] = CoverageAccumulator(domain_at(path))
                acc.add(t)
            keys = sorted(accs)
            covs = [accs[key].result() for key in keys]
            # built whole before it is set: a failure leaves results.json without the field
            results["coverage"] = [{"domain": cov.domain, "path": path, **coverage_json(cov)}
                                   for cov, (_, path) in zip(covs, keys)]
            return [summary_line(cov).replace("policy coverage:", f"policy coverage {cov.domain}:", 1) for cov in covs]
        except Exception as e:  # coverage is a report: never the run's end
            return [f"sandtable: policy coverage not computed: {type(e).__name__}: {e}"]

    def _write(self, results: Results) -> tuple[Path | None, str | None]:
        """Write results.json and report.html; where they went, or why they could not be written."""
        from ..report.results_json import default_run_dir, write_run
        from ..report.spool import SpooledTrials

        try:
            trials = results["trials"]
            names = trials.domains() if isinstance(trials, SpooledTrials) else (t["domain"] for t in trials)
            target = self.run.out_dir or default_run_dir(self.config.rootpath, names)
            return write_run(results, target), None
        except OSError as e:
            return None, f"sandtable: could not write results.json and report.html: {e}"

    def _apply_exit_status(self, session: pytest.Session, report: RunReport) -> None:
        gate = report.results["gate"]
        status = session.exitstatus
        run_completed = not (session.shouldfail or session.shouldstop)
        only_trials_decide = not self.foreign_failures and not self.collect_errors and run_completed
        if gate["set"] and status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and only_trials_decide:
            # the gate decides: failing trials may still give a passing run
            session.exitstatus = pytest.ExitCode.OK if gate["passed"] else pytest.ExitCode.TESTS_FAILED
        elif not gate["passed"] and status == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if report.write_error and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write_outcome(self, terminalreporter: Any, report: RunReport) -> None:
        from ..report.gates import DETAIL_FAILED, PREFIX_FAILED, collection_errors_line

        if report.out_dir is not None:
            terminalreporter.write_line(f"sandtable: results in {self._shown(report.out_dir)}{os.sep}")
        if report.write_error:
            terminalreporter.write_line(report.write_error, red=True, bold=True)
        if self.collection_errors:
            terminalreporter.write_line(collection_errors_line(self._broken_domains()), red=True, bold=True)
        for line in self.otel_lines:  # --sandtable-otel
            terminalreporter.write_line(line, yellow="could not" in line or "not written" in line)
        budget = self._budget_line()
        if budget:
            terminalreporter.write_line(budget, yellow=True)
        for line in report.comparison:
            terminalreporter.write_line(line)
        for line in report.results["gate"]["lines"]:
            bad = line.startswith((PREFIX_FAILED, DETAIL_FAILED))
            terminalreporter.write_line(line, red=bad, green=not bad, bold=line.startswith(PREFIX_FAILED))

    def _budget_line(self) -> str:
        """A fixed-k run that --sandtable-max-cost stopped says so (an adaptive run's saving
        line does)."""
        if self.run.adaptive is not None or self.run.max_cost is None:
            return ""
        needs = self.decider.needs if self.decider is not None else None
        if needs is None and RUN_STATE in self.config.stash:
            from .session import run_state

            needs = run_state(self.config).needs
        if needs is None or needs.stopped != "max_cost":
            return ""
        from ..report.fmt import format_cost

        return (f"sandtable: the cost budget of {format_cost(self.run.max_cost)} is spent ({format_cost(needs.cost)} "
                f"recorded; --sandtable-max-cost): the trials after it were not run")

    def _shown(self, path: Path) -> str:
        try:
            return os.path.relpath(path, self.config.invocation_params.dir)
        except ValueError:  # another drive (Windows)
            return str(path)

    def _broken_domains(self) -> list[dict[str, str]]:
        """The domain files that did not load, by path."""
        return sorted(self.collection_errors, key=lambda c: c["path"])

    def _run_meta(self, trials: list[TrialResult], session: pytest.Session) -> RunMeta:
        from ..engine.redact import public_spec
        from ..report.results_json import RunMeta, iso_utc, safe_url

        run = self.run
        root = Path(self.config.rootpath)
        known = dict(self._loaded_domains(root))
        domains: dict[tuple[str, str], dict[str, str]] = {}
        for t in trials:
            path = t.location.rpartition(":")[0] if ":" in t.location else t.location
            if (t.domain, path) not in domains:
                sha = known.get(path) or _sha256(root / path)
                domains[(t.domain, path)] = {"name": t.domain, "path": path, "sha256": sha}
        options: dict[str, Any] = {
            "agent_base_url": safe_url(run.agent_base_url),
            "user_base_url": safe_url(run.user_base_url),
            "temperature": run.temperature,
            "timeout": run.timeout,
            "trial_timeout": run.trial_timeout,
            "retries": run.retries,
            "concurrency": run.concurrency,
            "prices": _rel(Path(self.config.invocation_params.dir, run.prices_file), root) if run.prices_file else None,
            "fail_under": run.fail_under,
            "floors": dict(run.floors),
        }
        if run.baseline is not None:  # recorded only when given, so files without one stay as they were
            options.update({
                "baseline": _rel(run.baseline.path, root) if run.baseline.agent is None else None,
                "fail_on_regression": run.baseline.fail_on_regression,
                "regression_alpha": run.baseline.alpha,
                "max_drop": run.baseline.max_drop,
            })
        return RunMeta(
            domains=sorted(domains.values(), key=lambda d: (d["name"], d["path"])),
            agent=public_spec(run.agent),
            user=public_spec(run.user),
            k=run.k,
            run_seed=run.seed,
            options=options,
            started_at=self.started_at,
            finished_at=iso_utc(),
            collection_errors=self._broken_domains(),
            stopped_early=_stopped_early(session),
        )

    def _loaded_domains(self, root: Path) -> Iterator[tuple[str, str]]:
        """(path relative to the rootdir, sha256) of each domain this process loaded: the
        content its trials ran on, even if the file changed since."""
        if RUN_STATE not in self.config.stash:
            return  # none loaded here: the xdist controller, which collects nothing
        from .session import run_state

        for path, dom in run_state(self.config).domains.items():
            yield _rel(Path(path), root), dom.sha256


def _shown_section(title: str, text: str, secrets: list[str]) -> str:
    """A report section of a trial as the terminal and JUnit XML show it: the plugin's
    own (``Captured sandtable transcript ...``: made safe and bounded where it was
    written) with secrets redacted; captured output redacted, with lone surrogates
    replaced, and past :data:`~pytest_sandtable.report.safe.TEXT_LIMIT` characters cut
    to that many: its start and its last quarter of them (where a log says how it
    ended), a line between saying how long it was."""
    from ..report.safe import TEXT_LIMIT, for_terminal, scrub_text

    if not isinstance(text, str):
        return text
    if title.startswith("Captured sandtable "):
        return scrub_text(text, secrets) if secrets else text
    text = for_terminal(text, secrets)
    if len(text) <= TEXT_LIMIT:
        return text
    marker = f"\n… [clipped: {len(text):,} characters of captured output; its start and end shown] …\n"
    tail = TEXT_LIMIT // 4
    head = TEXT_LIMIT - tail - len(marker)  # TEXT_LIMIT in all: clipped again, it stays as it is
    return f"{text[:head]}{marker}{text[-tail:]}"


def _sigterm_as_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM (a CI job cancelled, ``timeout``, ``docker stop``, Kubernetes) stops the
    run as Ctrl-C does: pytest ends the session, and the trials that finished are written
    with the run marked interrupted (exit status 2)."""
    raise KeyboardInterrupt("SIGTERM: the run stops as with Ctrl-C")


def _stop_on_sigterm() -> Any:
    """Handle SIGTERM as Ctrl-C in this run, if nobody else handles it (its handler is
    the default, which ends the process at once, every finished trial lost) and this is
    the main thread (where Python runs signal handlers). The handler replaced, or None.

    On every process: the xdist controller, where ``timeout`` or ``docker stop`` sends
    it, writes what it has; a worker that gets it too (a signal to the process group)
    stops like one interrupted, as with Ctrl-C."""
    import signal
    import threading

    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is None or threading.current_thread() is not threading.main_thread():
        return None
    try:
        if signal.getsignal(sigterm) is not signal.SIG_DFL:
            return None  # the user's, a CI runner's or an outer run's (pytester): theirs to keep
        return signal.signal(sigterm, _sigterm_as_ctrl_c)
    except (ValueError, OSError):  # pragma: no cover - no signals here (an embedded interpreter)
        return None


def _restore_sigterm(previous: Any) -> None:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return  # pragma: no cover - unconfigure on another thread than configure
    if signal.getsignal(signal.SIGTERM) is _sigterm_as_ctrl_c:  # unless someone set another since
        signal.signal(signal.SIGTERM, previous)


def _name_unknown_sides(trials: list[TrialResult], run: RunConfig) -> list[TrialResult]:
    """The trials, one that never reached its agent or user (its worker crashed, or it was
    skipped) naming those the other trials of its domain used (else those of any domain,
    else the specs)."""

    def most_used(side: str, domain: str | None) -> str | None:
        used = Counter(getattr(t, side) for t in trials if getattr(t, side) and domain in (None, t.domain))
        return used.most_common(1)[0][0] if used else None

    def named(t: TrialResult) -> TrialResult:
        return dataclasses.replace(
            t,
            agent=t.agent or most_used("agent", t.domain) or most_used("agent", None) or run.agent,
            user=t.user or most_used("user", t.domain) or most_used("user", None) or run.user,
        )

    return [t if t.agent and t.user else named(t) for t in trials]


def _critical_pairs(results: Results) -> list[GateCheck]:
    """--sandtable-baseline-agent: the critical-task rule on the pairs, apart from the
    sequential test: a critical task may not drop at all, so one whose counted pairs have
    more drops (the baseline passed, this run failed) than gains is a failed check."""
    from ..report.adaptive import task_name
    from ..report.fmt import plural
    from ..report.gates import GateCheck

    critical = {(t["domain"], t["task"]) for t in results["tasks"] if t.get("critical")}
    section = results["adaptive"]
    several = len({t["domain"] for t in section["tasks"]}) > 1
    checks = []
    for t in section["tasks"]:
        r = t.get("regression")
        if (t["domain"], t["task"]) not in critical or r is None or "pairs" not in r:
            continue
        drops, gains = r["pairs"]
        if drops > gains:
            checks.append(GateCheck(False, f"critical task {task_name(t['domain'], t['task'], several)} regressed "
                                           f"against the baseline agent: {plural(drops, 'drop')} and "
                                           f"{plural(gains, 'gain')} in {plural(r['graded'], 'pair')} (a critical "
                                           f"task may not drop at all)"))
    return checks


def _skip_reason(report: Any) -> str:
    """A skipped item's reason as pytest's -rs shows it (without its ``Skipped: ``)."""
    longrepr = getattr(report, "longrepr", None)
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return text.removeprefix("Skipped: ")


def _unneeded_lines(terminalreporter: Any) -> list[str]:
    """What pytest's ``N skipped`` holds of an adaptive run: the trial items that were not
    needed (their task's verdict settled first) and those a budget left unrun, each
    counted from the items' own skip reasons (``plugin.adaptive``)."""
    from ..report.fmt import plural
    from .adaptive import BUDGET_SPENT, NOT_NEEDED

    reasons = [_skip_reason(r) for r in terminalreporter.stats.get("skipped", ())]
    settled = sum(r.startswith(NOT_NEEDED) for r in reasons)
    budget = sum(r.startswith(BUDGET_SPENT) for r in reasons)
    lines = []
    if settled:
        lines.append(f"{plural(settled, 'trial item')} not needed: {'its' if settled == 1 else 'their'} task's "
                     f"verdict was settled first (pytest counts {'it' if settled == 1 else 'them'} as skipped; "
                     f"-rs says why)")
    if budget:
        lines.append(f"{plural(budget, 'trial item')} not run: the run's budget was spent (pytest counts "
                     f"{'it' if budget == 1 else 'them'} as skipped)")
    return lines


def _sequential_regression(section: AdaptiveSection, fisher: list[GateCheck],
                           gated: bool) -> tuple[list[str], list[GateCheck]]:
    """An adaptive run against a stored baseline: the terminal's lines and the gate's checks
    from the section's sequential regression tests (e-BH across tasks), in place of Fisher's
    test, which does not hold after adaptive stopping. Of ``fisher``'s checks only the
    critical-task rule (any drop of a critical task) and ``--sandtable-max-drop`` are kept,
    as separate rules; ``gated``: the gate's lines will show the checks."""
    from ..report.adaptive import regression_how, regression_line, task_name
    from ..report.fmt import plural
    from ..report.gates import GateCheck

    part = section.get("regression")
    if part is None:  # the baseline was not read (cannot be: the controller reads it)
        return [], fisher
    how = regression_how(part)
    several = len({t["domain"] for t in section["tasks"]}) > 1
    by_name = {task_name(t["domain"], t["task"], several): t for t in section["tasks"] if "regression" in t}
    checks = []
    for name in part["flagged"]:
        r = by_name[name]["regression"]
        if "pairs" in r:
            checks.append(GateCheck(False, f"task {name} regressed against the baseline's trials of the same seeds "
                                           f"({how}: e-value {r['e_value']:.3g} after {plural(r['graded'], 'pair')}, "
                                           f"{plural(r['pairs'][0], 'drop')} and {plural(r['pairs'][1], 'gain')})"))
            continue
        base = r.get("baseline") or [0, 0]
        checks.append(GateCheck(False, f"task {name} regressed from {base[0]}/{base[1]} in the "
                                       f"baseline ({how}: e-value {r['e_value']:.3g} after "
                                       f"{plural(r['graded'], 'graded trial')})"))
    kept = [c for c in fisher if not c.text.startswith(("task ", "no regression from the baseline"))]
    checks += [c for c in kept if not c.passed]
    if not checks:
        checks.append(GateCheck(True, f"no regression from the baseline: {plural(part['tasks'], 'task')} tested "
                                      f"sequentially, none flagged ({how}) and no critical task dropped"))
    checks += [c for c in kept if c.passed]
    lines = [f"sandtable: {regression_line(part)}"]
    if not gated:
        lines += [f"  {c.text}" for c in kept if not c.passed]
    return lines, checks


def _stopped_early(session: pytest.Session) -> str | None:
    """Why the run ended before every collected item ran, if it did."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    for reason in (session.shouldfail, session.shouldstop):
        if reason:
            return str(reason)
    return None


def _rel(path: Path, root: Path) -> str:
    """A path relative to the rootdir with / separators; the file name alone when outside it."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


def _sha256(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def trial_ended(item: Any, when: str, result: TrialResult) -> None:
    """The trial of ``item`` (an ``items.TrialItem``) came to ``result``, which the report
    of phase ``when`` tells: the item holds it until the run's recorder takes it with that
    report. (With the recorder blocked, ``-p no:sandtable-recorder``, nothing records it.)"""
    item.sandtable_result = (when, result)
    recorder = item.config.pluginmanager.get_plugin(RECORDER)
    if recorder is not None:
        recorder.carry(item, result)


def crashed_trial(nodeid: str, rootdir: Path, *, run_seed: int, why: str) -> TrialResult | None:
    """An errored TrialResult for the trial whose xdist worker died (``nodeid`` is
    ``path::task[i-k]``); None when the nodeid is not a trial or its domain cannot be loaded."""
    m = _NODEID.match(nodeid)
    if m is None:
        return None
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain

    path = m.group("path")
    try:
        domain = load_domain(rootdir / path)
        task = domain.task(m.group("task"))
    except (DomainError, KeyError, OSError):
        return None
    from .session import ungraded_trial

    line = task.pos.line if task.pos else 1
    return ungraded_trial(
        domain, task, int(m.group("trial")), int(m.group("k")),
        run_seed=run_seed,
        error=f"the pytest-xdist worker running this trial died ({why}); the trial was not graded",
        ended_by=_WORKER_CRASHED,
        location=f"{path}:{line}",
    )


def _give_junit_properties(config: pytest.Config, report: pytest.TestReport, result: TrialResult) -> None:
    """A crashed item has no teardown report, where junitxml reads properties from:
    give its test case the properties directly (best effort; junitxml's API is internal)."""
    try:
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        if xml is None:
            return
        node = xml.node_reporter(report)
        for name, value in _junit_properties(result):
            node.add_property(name, value)
    except Exception:  # pragma: no cover - a pytest without this internal API
        return


def _junit_properties(t: TrialResult) -> list[tuple[str, str]]:
    """The JUnit XML properties of one trial (short strings)."""
    return [
        (_JUNIT_PREFIX + "domain", t.domain),
        (_JUNIT_PREFIX + "task", t.task),
        (_JUNIT_PREFIX + "trial", str(t.trial)),
        (_JUNIT_PREFIX + "tags", ",".join(t.tags)),
        (_JUNIT_PREFIX + "verdict", t.verdict),
        (_JUNIT_PREFIX + "critical", "true" if t.critical else "false"),
    ]
