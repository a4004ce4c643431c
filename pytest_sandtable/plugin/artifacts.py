"""pytest hooks for run artefacts and gates: results.json, report.html, the gate's exit
status, JUnit XML properties and trials lost with a dying pytest-xdist worker.

``plugin.pytest_configure`` registers :class:`ArtifactsPlugin`. This module imports
only pytest at load; the writers, the summary and the engine are imported inside
the hooks that need them, so a pytest run without domain files pays nothing.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..report.gates import GateOutcome

__all__ = ["PLUGIN_NAME", "ArtifactsPlugin", "crashed_trial", "register"]

PLUGIN_NAME = "sandtable-artifacts"

_NODEID = re.compile(r"^(?P<path>.+?)::(?P<task>[^:\[]+)\[(?P<trial>\d+)-(?P<k>\d+)\]$")
_JUNIT_PREFIX = "sandtable."


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def register(config: pytest.Config) -> None:
    """Register :class:`ArtifactsPlugin` once (idempotent); call from ``pytest_configure``."""
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is None:
        config.pluginmanager.register(ArtifactsPlugin(config), PLUGIN_NAME)


def pytest_configure(config: pytest.Config) -> None:
    """Lets ``-p pytest_sandtable.plugin.artifacts`` enable the artefacts by itself."""
    register(config)


class ArtifactsPlugin:
    """Writes results.json and report.html at the end of a run (on the xdist controller,
    or the only process), applies the gates to the exit status, and reports both in
    the terminal summary. Parses the gate options at configure time (a malformed
    ``--sandtable-floor`` is a usage error)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # not _artifacts.iso_utc: that module is imported only when there is something to write
        self.started_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.fail_under: float | None = None
        self.floors: dict[str, float] = {}
        raw_fail_under = config.getoption("--sandtable-fail-under", None)
        raw_floors = config.getoption("--sandtable-floor", None) or []
        if raw_fail_under is not None or raw_floors:
            from ..report.gates import GateError, parse_fail_under, parse_floor

            try:
                self.fail_under = parse_fail_under(raw_fail_under)
                for raw in raw_floors:
                    tag, pct = parse_floor(raw)
                    self.floors[tag] = pct
            except GateError as e:
                raise pytest.UsageError(str(e)) from None
        self.foreign_failures = 0  # failed reports that are not sandtable trials
        self.collect_errors = 0
        # domain files that did not load: {path (relative to the rootdir), message}
        self.collection_errors: list[dict[str, str]] = []
        self.crashed: list[dict[str, Any]] = []
        self.out_dir: Path | None = None
        self.outcome: GateOutcome | None = None
        self.write_error: str | None = None
        if not _is_worker(config) and config.pluginmanager.hasplugin("xdist"):
            # pytest_handlecrashitem is an xdist hook: only registrable when xdist is there
            config.pluginmanager.register(_CrashHandler(self), "sandtable-xdist-crash")

    # -- on every process (xdist workers too) ----------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Task, trial, tags and verdict as JUnit XML properties (short strings).

        The trial runs in setup, so its verdict is known when the setup report is made;
        junitxml reads the properties from the teardown report."""
        if call.when == "setup":
            payload = getattr(item, "sandtable_payload", None)
            if payload is not None:
                item.user_properties[:] = [
                    p for p in item.user_properties if not str(p[0]).startswith(_JUNIT_PREFIX)
                ] + [(_JUNIT_PREFIX + name, value) for name, value in _props(payload[1])]
        return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """A ``--sandtable-floor`` on a tag no collected trial has is a usage error before any
        trial runs (after -k/-m deselection, like the end-of-run check). Not on an xdist
        worker: there the controller reports it at the end of the run, as it never collects."""
        if not self.floors or _is_worker(self.config):
            return
        trials = [it for it in items if getattr(it, "is_sandtable_trial", False)]
        if not trials:
            return  # no trial to gate: nothing is written, nothing is gated
        tags = {tag for it in trials for tag in getattr(getattr(it, "task", None), "tags", ())}
        unknown = [tag for tag in self.floors if tag not in tags]
        if not unknown:
            return
        from ..report.gates import _num

        known = ", ".join(sorted(tags)) or "(none: no task has a tag)"
        broken = ""
        if self.collection_errors:
            n = len(self.collection_errors)
            broken = (f" ({n} domain file{'s' if n != 1 else ''} did not load: "
                      f"{', '.join(c['path'] for c in self.collection_errors)})")
        raise pytest.UsageError(*(
            f"--sandtable-floor {tag}={_num(self.floors[tag])}: no collected trial is tagged {tag!r}; "
            f"the tags are {known}{broken}"
            for tag in unknown
        ))

    # -- controller only ---------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and getattr(report, "sandtable", None) is None:
            self.foreign_failures += 1

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

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if _is_worker(self.config):
            return
        collector = self.config.pluginmanager.get_plugin("sandtable-collector")
        results: list[dict[str, Any]] = list(getattr(collector, "results", None) or [])
        if not results and not self.collection_errors:
            return
        from ..engine.results import TrialResult
        from ..report.results_json import build_results, default_run_dir, iso_utc, write_run

        self._fill_crashed_labels(results)
        trials = [TrialResult.from_dict(d) for d in results]
        meta = self._run_meta(trials, iso_utc())
        meta.stopped_early = _stopped_early(session)
        from . import run_prices

        doc = build_results(
            trials, meta, fail_under=self.fail_under, floors=self.floors, prices=run_prices(self.config)
        )
        from ..report.gates import GateOutcome

        gate = doc["gate"]
        self.outcome = GateOutcome(passed=gate["passed"], lines=list(gate["lines"]), gate_set=gate["set"])
        self.summary = doc["summary"]  # the terminal summary shows these figures; no second summarize
        self.collection_errors.sort(key=lambda c: c["path"])
        try:
            out = self.config.getoption("--sandtable-out", None)
            if out:
                target = Path(self.config.invocation_params.dir, out)
            else:
                target = default_run_dir(self.config.rootpath, (t.domain for t in trials))
            self.out_dir = write_run(doc, target)
        except OSError as e:
            self.write_error = f"sandtable: could not write results.json and report.html: {e}"
        self._apply_exit_status(session)

    def _apply_exit_status(self, session: pytest.Session) -> None:
        outcome = self.outcome
        if outcome is None:
            return
        status = session.exitstatus
        run_completed = not (session.shouldfail or session.shouldstop)
        only_trials_decide = not self.foreign_failures and not self.collect_errors and run_completed
        if outcome.gate_set and status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and only_trials_decide:
            # the gate decides: failing trials may still give a passing run
            session.exitstatus = pytest.ExitCode.OK if outcome.passed else pytest.ExitCode.TESTS_FAILED
        elif not outcome.passed and status == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.write_error and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if _is_worker(self.config):
            return
        if self.out_dir is not None:
            terminalreporter.write_line(f"sandtable: results in {self._shown(self.out_dir)}{os.sep}")
        if self.write_error:
            terminalreporter.write_line(self.write_error, red=True, bold=True)
        if self.collection_errors and self.outcome is not None:
            from ..report.gates import collection_errors_line

            terminalreporter.write_line(collection_errors_line(self.collection_errors), red=True, bold=True)
        if self.outcome is not None:
            from ..report.gates import DETAIL_FAILED, PREFIX_FAILED

            for line in self.outcome.lines:
                bad = line.startswith((PREFIX_FAILED, DETAIL_FAILED))
                terminalreporter.write_line(line, red=bad, green=not bad, bold=line.startswith(PREFIX_FAILED))

    # -- helpers -----------------------------------------------------------------------

    def _shown(self, path: Path) -> str:
        try:
            return os.path.relpath(path, self.config.invocation_params.dir)
        except ValueError:  # another drive (Windows)
            return str(path)

    def _fill_crashed_labels(self, results: list[dict[str, Any]]) -> None:
        """A crashed trial never reached its agent: name the agent and user the other trials of its domain used."""
        for d in self.crashed:
            for side in ("agent", "user"):
                if d.get(side):
                    continue
                same = Counter(r[side] for r in results if r.get(side) and r.get("domain") == d.get("domain"))
                anyd = Counter(r[side] for r in results if r.get(side))
                pick = same or anyd
                d[side] = pick.most_common(1)[0][0] if pick else str(self._opt(side) or "")

    def _opt(self, name: str) -> Any:
        v = self.config.getoption(f"--sandtable-{name}", None)
        if v is not None:
            return v
        try:
            return self.config.getini(f"sandtable_{name.replace('-', '_')}")
        except (ValueError, KeyError):
            return None

    def _settings(self) -> dict[str, Any]:
        """The numeric options as the plugin checked them at configure time."""
        from . import _settings

        return _settings(self.config)

    def _run_meta(self, trials: list[Any], finished_at: str) -> Any:
        from ..engine.redact import public_spec
        from ..report.results_json import RunMeta, safe_url

        root = Path(self.config.rootpath)
        known: dict[str, str] = {}
        st = self._run_state()
        if st is not None:
            for path, dom in st.domains.items():
                known[_rel(Path(path), root)] = dom.sha256
        domains: dict[tuple[str, str], dict[str, str]] = {}
        for t in trials:
            path = t.location.rpartition(":")[0] if ":" in t.location else t.location
            if (t.domain, path) not in domains:
                sha = known.get(path) or _sha256(root / path)
                domains[(t.domain, path)] = {"name": t.domain, "path": path, "sha256": sha}
        prices = self._opt("prices")
        n = self._settings()
        options: dict[str, Any] = {
            "agent_base_url": safe_url(self._opt("agent-base-url")),
            "user_base_url": safe_url(self._opt("user-base-url")),
            "temperature": n["temperature"],
            "timeout": n["timeout"],
            "trial_timeout": n["trial_timeout"],
            "retries": n["retries"],
            "concurrency": n["concurrency"],
            "prices": _rel(Path(self.config.invocation_params.dir, prices), root) if prices else None,
            "fail_under": self.fail_under,
            "floors": dict(self.floors),
        }
        from . import _K

        return RunMeta(
            domains=sorted(domains.values(), key=lambda d: (d["name"], d["path"])),
            agent=public_spec(str(self._opt("agent") or "")),
            user=public_spec(str(self._opt("user") or "")),
            k=int(self.config.stash.get(_K, max((t.k for t in trials), default=1))),
            run_seed=n["seed"],
            options=options,
            started_at=self.started_at,
            finished_at=finished_at,
            collection_errors=sorted(self.collection_errors, key=lambda c: c["path"]),
        )

    def _run_state(self) -> Any:
        from . import _STATE

        return self.config.stash.get(_STATE, None)


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


def crashed_trial(nodeid: str, rootdir: Path, *, run_seed: int, why: str) -> dict[str, Any] | None:
    """An errored TrialResult dict for the trial whose xdist worker died (``nodeid`` is
    ``path::task[i-k]``); None when the nodeid is not a trial or its domain cannot be loaded."""
    m = _NODEID.match(nodeid)
    if m is None:
        return None
    from ..domain.errors import DomainError
    from ..domain.loader import load_domain
    from ..engine.results import ERRORED, TrialResult
    from ..engine.trial import trial_seed

    path = m.group("path")
    try:
        domain = load_domain(rootdir / path)
        task = domain.task(m.group("task"))
    except (DomainError, KeyError, OSError):
        return None
    i, k = int(m.group("trial")), int(m.group("k"))
    line = task.pos.line if task.pos else 1
    return TrialResult(
        domain=domain.name,
        task=task.id,
        trial=i,
        k=k,
        seed=trial_seed(run_seed, domain.name, task.id, i),
        verdict=ERRORED,
        tags=list(task.tags),
        critical=task.critical,
        error=f"the pytest-xdist worker running this trial died ({why}); the trial was not graded",
        ended_by="worker_crashed",
        usage={"agent": {}, "user": {}},
        location=f"{path}:{line}",
    ).to_dict()


class _CrashHandler:
    """Registered on the xdist controller only: a trial whose worker died becomes an
    errored trial (left out of pass^k, never a pass) and is aggregated with the rest."""

    def __init__(self, owner: ArtifactsPlugin) -> None:
        self.owner = owner

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        owner = self.owner
        seed = owner._settings()["seed"]
        why = str(report.longrepr or "the worker crashed")
        data = crashed_trial(crashitem, Path(owner.config.rootpath), run_seed=seed, why=why)
        if data is not None:
            # the collector picks it up from the report, like any other trial's result
            report.sandtable = data  # type: ignore[attr-defined]
            owner.crashed.append(data)
            _junit_properties(owner.config, report, data)


def _junit_properties(config: pytest.Config, report: pytest.TestReport, data: dict[str, Any]) -> None:
    """A crashed item has no teardown report, where junitxml reads properties from:
    give its test case the properties directly (best effort; junitxml's API is internal)."""
    try:
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        if xml is None:
            return
        node = xml.node_reporter(report)
        for name, value in _props(data):
            node.add_property(_JUNIT_PREFIX + name, value)
    except Exception:  # pragma: no cover - a pytest without this internal API
        return


def _props(d: dict[str, Any]) -> list[tuple[str, str]]:
    """The JUnit XML properties of one trial (short strings)."""
    return [
        ("domain", str(d.get("domain", ""))),
        ("task", str(d.get("task", ""))),
        ("trial", str(d.get("trial", ""))),
        ("tags", ",".join(d.get("tags") or [])),
        ("verdict", str(d.get("verdict", ""))),
        ("critical", "true" if d.get("critical") else "false"),
    ]
