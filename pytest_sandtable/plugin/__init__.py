"""The pytest plugin (the `pytest11` entry point): its hooks and fixtures.

Each hook hands its work to one of the plugin's modules: ``config`` (every option,
checked once), ``items`` (domain files into trial items), ``session`` (the run's
agent, user, domains and event loop), ``pool`` (trials in flight) and ``artifacts``
(the recorder: results.json, report.html, gates, the terminal summary).

Kept light on purpose: pytest imports this module in every run of a project that
installs the plugin, so it imports nothing but pytest and ``config`` at start-up. The
engine, YAML and the reports are imported when a domain file is collected.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import (
    REFERENCE_NOTICE,
    RUN_STATE,
    RunConfig,
    add_options,
    check_option_names,
    is_xdist_controller,
    is_xdist_worker,
)

if TYPE_CHECKING:
    from ..engine.api import AgentCallable, UserCallable


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> Any:
    result = yield  # the initial conftest.py files, whose options count as known
    check_option_names(parser, args)  # a misspelt --sandtable-* option gets a did-you-mean
    return result


# The configs of the pytest runs going on in this process, the innermost last: pytester
# runs pytest inside a test of another run. The fixtures read the innermost (see them).
_CONFIGS: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sandtable: a trial of a sandtable.yaml task")
    run = RunConfig.load(config)  # a bad option value is a usage error before anything runs
    _CONFIGS.append(config)
    if (run.adaptive is not None or run.max_cost is not None) and is_xdist_controller(config):
        from .adaptive import DECIDER, Decider  # the controller decides which trials are still needed

        config.pluginmanager.register(Decider(config), DECIDER)
    from .artifacts import Recorder

    config.pluginmanager.register(Recorder(config), "sandtable-recorder")
    config.pluginmanager.import_plugin("pytest_sandtable.plugin.interplay")  # beside rerunfailures, timeout, allure


def pytest_report_header(config: pytest.Config) -> list[str]:
    """k and the run seed. Which agent and user play is known only once the trials are
    collected (a conftest.py may override their fixtures): that line comes after
    collection (``session.RunState.describe_agent_source``). The xdist controller
    collects nothing, so it names the options' agent and user here, and says what they
    are subject to."""
    run = RunConfig.of(config)
    a = run.adaptive
    lines = [f"sandtable: k={run.k}, run seed={run.seed}" if a is None else
             f"sandtable: adaptive, at most k={a.cap} trials a task (p0={a.p0:g}, p1={a.p1:g}, alpha={a.alpha:g}, "
             f"beta={a.beta:g}), run seed={run.seed}"]
    if is_xdist_controller(config):
        from ..engine.redact import public_spec

        lines.append(f"sandtable: agent={public_spec(run.agent)}, user={public_spec(run.user)} where no "
                     f"conftest.py overrides the sandtable_agent / sandtable_user fixture (the workers collect; "
                     f"the summary names what played)")
        if not run.agent_named:
            lines.append(f"sandtable: where no sandtable_agent fixture overrides it, {REFERENCE_NOTICE}")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    # under xdist a worker cannot stop the run cleanly: the controller checks the specs
    run = RunConfig.of(session.config)
    if is_xdist_controller(session.config) and (run.agent_arg or run.user_arg):
        from .session import run_state

        st = run_state(session.config)
        st.look_under_the_args(session.config)  # for a module:attr spec beside a domain file
        st.default_agent()
        st.default_user()


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    from ..domain.files import is_domain_file

    if is_domain_file(file_path):
        from .items import DomainFile

        return DomainFile.from_parent(parent, path=file_path)
    return None


# The hooks below have work only once the run state exists: a domain file was collected
# in this process (or the xdist controller checked the specs). Until then they import nothing.


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if RUN_STATE in config.stash and not is_xdist_worker(config):
        from .session import run_state

        st = run_state(config)
        st.check_defaults(items)
        if st.needs is not None:  # --sandtable-adaptive: trials in rounds; budgets
            st.needs.arrange(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    if RUN_STATE in session.config.stash:
        from .session import run_state

        run_state(session.config).describe_agent_source(session)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    if RUN_STATE in session.config.stash:
        from .session import run_state

        run_state(session.config).continue_past_broken_domains(session)
    return (yield)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config in _CONFIGS:  # not when pytest_configure stopped at a usage error
        _CONFIGS.remove(config)
    if RUN_STATE in config.stash:
        from .session import run_state

        run_state(config).close()
        _skip_the_exit_walk()
    handlers = sys.modules.get("pytest_sandtable.engine.handlers")
    if handlers is not None:  # no alarm of a trial's outlives the run (issue 37 #7): none should be left
        handlers.disarm_left()


_EXIT_FREEZE: list[bool] = []


def _skip_the_exit_walk() -> None:
    """At the process's exit, ``gc.freeze()``: the interpreter's last garbage collections
    then skip what the run left (the domains' rows, their indexes, the run's results),
    and the objects in cycles among it are not freed one by one. On an imported τ-bench
    retail run at k = 1 that is 70-100 ms of a 0.5 s process (benchmarks/README.md,
    "Fixed costs"). Only at exit (``atexit``): a run inside another process's test
    (pytester) leaves that process's collector as it was. What it costs is what Python
    never promises anyway: a ``__del__`` of an object left in a reference cycle at exit
    does not run (docs/limitations.md)."""
    if not _EXIT_FREEZE:
        import atexit
        import gc

        _EXIT_FREEZE.append(True)
        atexit.register(gc.freeze)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if RunConfig.of(config).concurrency <= 1:
        return None  # xdist's own choice; and no pool, nor asyncio, is loaded for it
    from .pool import work_stealing

    return work_stealing(config, log)


# The fixtures take no argument. pytest re-enters every fixture an item uses, session-
# scoped and cached ones included, and resolves their arguments each time: ``request``
# costs a new RequestFixtureDef an item (three ``inspect.signature`` calls), and
# ``pytestconfig`` (itself a fixture taking ``request``) more. They read the config of
# the run being set up instead, the innermost of this process's runs (``_CONFIGS``):
# a session fixture is set up within its own run. (As a method of a per-config plugin
# object a session fixture is deprecated in pytest 9.)


def _config() -> pytest.Config:
    return _CONFIGS[-1]


@pytest.fixture(scope="session")
def sandtable_agent() -> AgentCallable:
    """The agent under test. Override this fixture in a conftest.py to wrap your own agent."""
    from .session import run_state

    try:
        return run_state(_config()).default_agent()
    except pytest.UsageError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def sandtable_user() -> UserCallable:
    """The simulated user (from --sandtable-user). Override to bring your own."""
    from .session import run_state

    try:
        return run_state(_config()).default_user()
    except pytest.UsageError as e:
        pytest.fail(str(e), pytrace=False)
