"""Collecting domain files into pytest items: one item per (task, trial)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..domain.model import Domain, Task
from ..engine.results import ERRORED, FAILED, TrialResult
from .artifacts import trial_ended
from .interplay import item_timeout
from .session import RunState, overriding_fixture, run_state, trial_location, ungraded_trial


class TrialFailed(AssertionError):
    """A graded trial that failed: an assertion of the agent's behaviour that did not hold
    (so allure-pytest and other reporters show it as failed, not broken)."""

    def __init__(self, result: TrialResult) -> None:
        super().__init__(result.task)
        self.result = result


class TrialErrored(Exception):
    """A trial that could not be graded (the simulated user or the domain failed): an error."""

    def __init__(self, result: TrialResult) -> None:
        super().__init__(result.error)
        self.result = result


class DomainFile(pytest.File):
    """A sandtable.yaml: its tasks, each repeated k times."""

    # its items' fixtures when they are the plugin's two session-scoped defaults and
    # nothing else (see _plugin_defaults_only); None when anything else takes part
    sandtable_defaults: tuple[Any, Any] | None = None

    def collect(self) -> Iterator[pytest.Item]:
        from ..domain.cache import load_domain_cached
        from ..domain.errors import DomainError

        st = run_state(self.config)
        try:
            domain = load_domain_cached(self.path, lambda: domain_cache_dir(self.config))
        except DomainError as e:
            st.domain_errors += 1
            raise self.CollectError(_relative_problems(e, self.config)) from None
        st.domains[str(self.path)] = domain
        for tag in sorted({t for task in domain.tasks for t in task.tags}):
            self.config.addinivalue_line("markers", f"{tag}: sandtable tag")
        k = st.run.k
        # every trial item of this file has the same fixtures (the same function, the same
        # parents, so the same conftest.py files and autouse fixtures, and no marker yet
        # when they are resolved): the first item resolves them, the others share its
        # answer, as pytest's own parametrized items share their definition's
        fixtureinfo = None
        for task in domain.tasks:
            marks = [pytest.mark.sandtable, *(getattr(pytest.mark, tag) for tag in task.tags)]
            callobj = _trial_function(domain, task)
            for i in range(1, k + 1):
                item = TrialItem.from_parent(
                    self,
                    name=f"{task.id}[{i}-{k}]",
                    callobj=callobj,
                    fixtureinfo=fixtureinfo,
                    domain=domain,
                    task=task,
                    trial=i,
                )
                if fixtureinfo is None:
                    self.sandtable_defaults = _plugin_defaults_only(item)
                fixtureinfo = item._fixtureinfo
                for mark in marks:
                    item.add_marker(mark)
                item.skip_if_silent(st)
                yield item


def _skipped(reason: str) -> BaseException:
    """A skip of a trial pytest reports at the item's own location (its task's line), as a
    skip marker's is, not at this module's line."""
    try:
        from _pytest.outcomes import Skipped

        return Skipped(reason, pytrace=False, _use_item_location=True)
    except (ImportError, TypeError):  # pragma: no cover - a pytest without it
        return pytest.skip.Exception(reason, pytrace=False)


def domain_cache_dir(config: pytest.Config) -> Path | None:
    """Where built domains are kept (``domain.cache``): --sandtable-cache-dir, else
    ``sandtable-domains`` in pytest's cache folder; None when the option says ``off`` or
    pytest's cache is off (``-p no:cacheprovider``) or cannot be made there."""
    run = run_state(config).run
    if not run.domain_cache:
        return None
    if run.domain_cache_dir is not None:
        return run.domain_cache_dir
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    try:
        path: Path = cache.mkdir("sandtable-domains")
    except OSError:  # a read-only checkout: no cache, never an error
        return None
    return path


def _id_as_pytest_reads_it(item: pytest.Item) -> None:
    """Give a trial item the node id pytest makes of its id's text.

    pytest >= 9 keeps a node id in parts, and reads a recorded id (``--lf``, ``--ff``,
    ``--sw``, the cache) by taking a trailing ``[...]`` as the item's parameters:
    ``path::task[1-2]`` is names ``('task',)``, params ``'1-2'``. A trial's ``[i-k]`` is
    part of its name, so pytest built its id as names ``('task[1-2]',)``, no params: the
    same text, yet no recorded failure ever matched it. Re-reading the id's own text
    makes both the same. pytest 8 keeps a node id as plain text: nothing to do."""
    parts = getattr(item, "_id", None)
    if parts is not None and not isinstance(parts, str):
        item._id = type(parts).parse(str(parts))


def _relative_problems(e: Any, config: pytest.Config) -> str:
    text = str(e)
    root = str(config.rootpath) + "/"
    return text.replace(root, "")


def _sandtable_trial(sandtable_agent: Any, sandtable_user: Any) -> None:
    """Stands in for a test function so pytest resolves the trial's fixtures."""


def _trial_function(domain: Domain, task: Task) -> Any:
    """The stand-in test function of ``task``'s trials (one a task, shared by its k items):
    :func:`_sandtable_trial` with the task's own docstring, which allure-pytest and IDEs
    show as the test's description: the task's ``description``, else what the task is
    (never the simulated user's instructions, which the agent must not see either)."""
    fn = types.FunctionType(_sandtable_trial.__code__, _sandtable_trial.__globals__, _sandtable_trial.__name__)
    fn.__qualname__ = _sandtable_trial.__qualname__
    fn.__module__ = _sandtable_trial.__module__
    text = task.description.strip()
    fn.__doc__ = text or f"Task {task.id!r} of the sandtable domain {domain.name!r}."
    return fn


_DEFAULTS = ("sandtable_agent", "sandtable_user")


def _plugin_defaults_only(item: pytest.Function) -> tuple[Any, Any] | None:
    """The definitions of the plugin's own ``sandtable_agent`` and ``sandtable_user``
    fixtures when they are all an item of this file needs: no conftest.py or plugin
    overrides either, no autouse fixture, no fixture-inspecting option (--setup-show,
    --setup-only, --setup-plan, which report or replace each fixture's setup).

    Both are session-scoped and depend on nothing, so once set up their values are the
    same for every trial: :meth:`TrialItem.setup` then takes them as pytest's fixture
    machinery would hand them over, without its per-item lookup (about 15 µs an item,
    a tenth of what a trial item costs beyond pytest's own). None: every item takes
    pytest's own way."""
    opt = item.config.option
    if getattr(opt, "setupshow", False) or getattr(opt, "setuponly", False) or getattr(opt, "setupplan", False):
        return None
    info = item._fixtureinfo
    if sorted(info.names_closure) != sorted(_DEFAULTS):
        return None
    defs = []
    for name in _DEFAULTS:
        found = info.name2fixturedefs.get(name) or ()
        if len(found) != 1 or overriding_fixture(item, name) is not None:
            return None
        fd = found[0]
        if fd.scope != "session" or tuple(fd.argnames) or fd.params is not None:
            return None
        defs.append(fd)
    return defs[0], defs[1]


def _set_up_defaults(defs: tuple[Any, Any]) -> tuple[Any, Any] | None:
    """The values of the two default fixtures, when pytest has set both up (their
    cached result, without an error): None before the first item set them up, after
    the session tore them down, or when setting one up failed (pytest's own way then
    raises it for each item, as always)."""
    agent, user = defs[0].cached_result, defs[1].cached_result
    if agent is None or user is None or agent[2] is not None or user[2] is not None:
        return None
    return agent[0], user[0]


class TrialItem(pytest.Function):
    """One trial of one task. The trial runs in setup (so that a trial errored by
    the simulated user or the domain shows as a pytest error); the call phase
    reports its verdict.

    The result reaches the recorder (``plugin.artifacts.trial_ended``) with
    the report of the phase that tells it: setup for an errored trial (no call phase
    follows), else call. The item holds it until then."""

    is_sandtable_trial = True

    def __init__(self, *, domain: Domain, task: Task, trial: int, **kw: Any) -> None:
        super().__init__(**kw)
        _id_as_pytest_reads_it(self)
        self.domain = domain
        self.task = task
        self.trial = trial
        # the phase whose report carries the result, and the result (once the trial ran)
        self.sandtable_result: tuple[str, TrialResult] | None = None
        # --sandtable-baseline-agent: the baseline agent's trial of the same seed (plugin.adaptive.baseline_side)
        self.sandtable_baseline: dict[str, Any] | None = None
        # when its protocol began, pytest-timeout's timer with it (plugin.interplay.ItemTimeout)
        self.sandtable_started: float | None = None
        self.skip_reason = ""  # why the trial is skipped, if it is (it never runs)

    def skip_if_silent(self, st: RunState) -> None:
        """Skip the trial when the scripted user would have nothing to say: a task with no
        `user.opening` and no `user.script` is valid (a model user writes its own lines),
        yet every trial of it would error. Only for the scripted user --sandtable-user
        names: a user from a conftest.py fixture is not known until the trial runs.

        The skipped trial still counts, as an errored one carried by its setup report (no
        graded trial, so its task's verdict is "skipped")."""
        if self.task.user.opening or self.task.user.script or self.task.solo:  # (issue 22: a solo task has no user)
            return
        if (st.run.user or "scripted").strip() != "scripted" or overriding_fixture(self, "sandtable_user"):
            return
        self.skip_reason = (
            f"task {self.task.id!r} gives the scripted user nothing to say (no user.opening or user.script): "
            f"write an opening, or run it with a model user (--sandtable-user claude:<model>)"
        )
        self.add_marker(pytest.mark.skip(reason=self.skip_reason))
        result = ungraded_trial(
            self.domain, self.task, self.trial, st.run.k,
            run_seed=st.run.seed, error=self.skip_reason, location=trial_location(self), user="scripted",
        )
        trial_ended(self, "setup", result)

    def reportinfo(self) -> tuple[Path, int, str]:
        line = self.task.pos.line - 1 if self.task.pos else 0
        return self.path, line, self.name

    def setup(self) -> None:
        st = run_state(self.config)
        needs = st.needs
        if needs is not None:
            reason = needs.why_not(self)
            if reason is None:
                needs.hand_out(self)
            elif not st.started_early(self):  # never run, never failed: skipped, saying why
                needs.reached(self)
                raise _skipped(reason)
            # else its trial started before the task settled: it ends and is recorded, and
            # the report leaves it out of the task's verdict
        defs = getattr(self.parent, "sandtable_defaults", None)
        # a plugin or conftest.py may add a fixture to the items' shared list of names
        # after collection (pytest_collection_modifyitems, pytest_runtest_setup): pytest's way then
        values = _set_up_defaults(defs) if defs is not None and len(self.fixturenames) == 2 else None
        if values is None:
            super().setup()
            agent = self.funcargs["sandtable_agent"]
            user = self.funcargs["sandtable_user"]
        else:  # the plugin's session-scoped defaults, set up: as pytest would hand them over
            agent, user = values
            self.funcargs["sandtable_agent"], self.funcargs["sandtable_user"] = values
        if st.run.concurrency > 1:
            result, output = st.run_concurrently(self, agent, user)
            for name, text in output.items():
                if text:
                    self.add_report_section("call", name, text)
        else:
            result = st.run_now(self.domain, self.task, self.trial, agent, user, location=trial_location(self),
                                pytest_timeout=item_timeout(self, self.sandtable_started))
        if st.baseline_results:  # --sandtable-baseline-agent: its trial of the same seed
            from .adaptive import baseline_side

            other = st.baseline_results.pop((str(self.domain.name), str(self.task.id), self.trial), None)
            if other is not None:
                self.sandtable_baseline = baseline_side(other)
        errored = result.verdict == ERRORED
        if needs is not None:
            needs.ended(self, result)
            needs.reached(self)
        trial_ended(self, "setup" if errored else "call", result)
        if errored:
            raise TrialErrored(result)

    def runtest(self) -> None:
        assert self.sandtable_result is not None
        result = self.sandtable_result[1]
        if result.verdict == FAILED:
            raise TrialFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        from ..report.text import failure_text, traceback_text, transcript_text

        if isinstance(excinfo.value, (TrialFailed, TrialErrored)):
            result = excinfo.value.result
            when = "setup" if isinstance(excinfo.value, TrialErrored) else "call"
            self.add_report_section(when, "sandtable transcript", transcript_text(result))
            if result.traceback:
                self.add_report_section(when, "sandtable agent traceback", traceback_text(result))
            return failure_text(result)
        return super().repr_failure(excinfo)

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # pytest renders setup errors through this method, not repr_failure
        if isinstance(excinfo.value, (TrialFailed, TrialErrored)):
            return self.repr_failure(excinfo)
        return super()._repr_failure_py(excinfo, style=style)
