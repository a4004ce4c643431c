"""The pytest plugin (the `pytest11` entry point).

Kept light on purpose: pytest imports this module in every run of a project
that installs the plugin, so it imports nothing but pytest at start-up. The
engine, YAML and the summary are imported when a domain file is collected.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..engine.api import AgentCallable, UserCallable
    from .session import RunState


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sandtable", "pytest-sandtable: rehearse an AI agent against sandtable.yaml domains")
    group.addoption("--sandtable-k", type=int, default=None, metavar="K",
                    help="trials per task (ini: sandtable_k; default 1)")
    group.addoption("--sandtable-agent", default=None, metavar="AGENT",
                    help="the agent under test when no sandtable_agent fixture overrides it: 'reference', "
                         "'claude:<model>', 'openai:<model>', 'http(s)://<url>' or 'module:attr' "
                         "(ini: sandtable_agent; default reference)")
    group.addoption("--sandtable-user", default=None, metavar="USER",
                    help="the simulated user: 'scripted', 'claude:<model>', 'openai:<model>' or 'module:attr' "
                         "(ini: sandtable_user; default scripted)")
    group.addoption("--sandtable-seed", type=int, default=None, metavar="N",
                    help="run seed; each trial's seed derives from (run seed, task, trial) (default 0)")
    group.addoption("--sandtable-agent-base-url", default=None, metavar="URL",
                    help="base URL of the OpenAI-compatible endpoint for openai:<model> agents "
                         "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1)")
    group.addoption("--sandtable-user-base-url", default=None, metavar="URL",
                    help="base URL of the OpenAI-compatible endpoint for openai:<model> simulated users")
    group.addoption("--sandtable-temperature", type=float, default=None, metavar="T",
                    help="sampling temperature for model-backed agents and users (default: the model's)")
    group.addoption("--sandtable-max-tokens", type=int, default=None, metavar="N",
                    help="output-token limit per model call of model-backed agents and users (default 4096)")
    group.addoption("--sandtable-timeout", type=float, default=None, metavar="SECONDS",
                    help="timeout of one model or endpoint call (ini: sandtable_timeout; default 60)")
    group.addoption("--sandtable-trial-timeout", type=float, default=None, metavar="SECONDS",
                    help="timeout of a whole trial (ini: sandtable_trial_timeout; default 900)")
    group.addoption("--sandtable-retries", type=int, default=None, metavar="N",
                    help="retries of a model or endpoint call where safe (default 4)")
    group.addoption("--sandtable-prices", default=None, metavar="FILE",
                    help="a YAML or JSON file of per-model prices for models without built-in list prices")
    group.addoption("--sandtable-concurrency", type=int, default=None, metavar="N",
                    help="trials in flight at once in one pytest process (ini: sandtable_concurrency; default 1)")
    group.addoption("--sandtable-out", default=None, metavar="DIR",
                    help="where results.json and report.html go (default .sandtable/runs/<timestamp>-<domain>/)")
    group.addoption("--sandtable-fail-under", type=float, default=None, metavar="PCT",
                    help="gate: fail the run when the highest pass^k is below PCT percent (0-100, e.g. 85)")
    group.addoption("--sandtable-floor", action="append", default=[], metavar="TAG=PCT",
                    help="gate: fail the run when a tag's highest pass^k is below PCT percent (repeatable)")
    parser.addini("sandtable_k", "trials per task", default="1")
    parser.addini("sandtable_timeout", "timeout of one model or endpoint call, seconds", default="60")
    parser.addini("sandtable_trial_timeout", "timeout of a whole trial, seconds", default="900")
    parser.addini("sandtable_retries", "retries of a model or endpoint call where safe", default="4")
    parser.addini("sandtable_concurrency", "trials in flight at once in one pytest process", default="1")
    parser.addini("sandtable_agent", "the agent under test (see --sandtable-agent)", default="reference")
    parser.addini("sandtable_user", "the simulated user (see --sandtable-user)", default="scripted")
    parser.addini("sandtable_seed", "run seed", default="0")


def _opt(config: pytest.Config, name: str) -> Any:
    v = config.getoption(f"--sandtable-{name}")
    return v if v is not None else config.getini(f"sandtable_{name.replace('-', '_')}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sandtable: a trial of a sandtable.yaml task")
    k = _opt(config, "k")
    try:
        k_int = int(k)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"--sandtable-k / sandtable_k: expected a whole number, got {k!r}") from None
    if k_int < 1:
        raise pytest.UsageError(f"--sandtable-k / sandtable_k: expected at least 1, got {k_int}")
    config.stash[_K] = k_int
    _settings(config)
    if config.getoption("--sandtable-prices"):
        run_prices(config)  # a bad prices file is a usage error before anything runs
    config.pluginmanager.register(_Collector(config), "sandtable-collector")
    from .artifacts import register as register_artifacts

    register_artifacts(config)
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistScheduling(), "sandtable-xdist-scheduling")


class _XdistScheduling:
    """With trials in flight (--sandtable-concurrency > 1), xdist's `load` scheduler
    starves them: it holds items back from a worker whose items take long (they wait
    on their trials) and has at least two pending, so a worker can only prefetch two.
    Work stealing hands each worker its share up front; idle workers steal."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load" or _settings(config)["concurrency"] <= 1:
            return None
        from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped,unused-ignore]

        return WorkStealingScheduling(config, log)


_K = pytest.StashKey[int]()
_PRICES = pytest.StashKey[dict[str, dict[str, float]]]()


def run_prices(config: pytest.Config) -> dict[str, dict[str, float]]:
    """Built-in list prices plus the --sandtable-prices file (loaded once)."""
    prices = config.stash.get(_PRICES, None)
    if prices is None:
        from ..report.prices import PricesError, all_prices

        try:
            prices = all_prices(config.getoption("--sandtable-prices"))
        except PricesError as e:
            raise pytest.UsageError(f"--sandtable-prices: {e}") from None
        config.stash[_PRICES] = prices
    return prices
_STATE = pytest.StashKey["RunState"]()


def _number(config: pytest.Config, name: str, kind: type, minimum: float, *, ini: bool = True) -> Any:
    raw = _opt(config, name) if ini else config.getoption(f"--sandtable-{name}")
    where = f"--sandtable-{name}" + (f" / sandtable_{name.replace('-', '_')}" if ini else "")
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        raise pytest.UsageError(f"{where}: expected {what}, got {raw!r}") from None
    if value != value or value < minimum:  # NaN, or below the least it may be
        raise pytest.UsageError(f"{where}: expected at least {minimum:g}, got {raw}")
    return value


_SETTINGS = pytest.StashKey[dict[str, Any]]()


def _settings(config: pytest.Config) -> dict[str, Any]:
    """Every numeric option, checked once at configure time: a bad value is a usage
    error before anything is collected, never a traceback later."""
    got = config.stash.get(_SETTINGS, None)
    if got is None:
        temperature = config.getoption("--sandtable-temperature")
        if temperature is not None and not 0 <= temperature <= 2:
            raise pytest.UsageError(f"--sandtable-temperature: expected 0 to 2, got {temperature:g}")
        got = {
            "seed": _number(config, "seed", int, -(2**63)),
            "timeout": _number(config, "timeout", float, 0.001),
            "retries": _number(config, "retries", int, 0),
            "trial_timeout": _number(config, "trial-timeout", float, 0.001),
            "concurrency": _number(config, "concurrency", int, 1),
            "max_tokens": (_number(config, "max-tokens", int, 1, ini=False)
                           if config.getoption("--sandtable-max-tokens") is not None else 4096),
            "temperature": temperature,
        }
        config.stash[_SETTINGS] = got
    return got


def run_state(config: pytest.Config) -> RunState:
    """The run's shared state (created on first use: the engine is imported then)."""
    st = config.stash.get(_STATE, None)
    if st is None:
        from ..adapters.options import AdapterOptions
        from .session import RunState

        n = _settings(config)
        options = AdapterOptions(
            agent_base_url=config.getoption("--sandtable-agent-base-url"),
            user_base_url=config.getoption("--sandtable-user-base-url"),
            temperature=n["temperature"],
            max_tokens=n["max_tokens"],
            timeout=n["timeout"],
            retries=n["retries"],
            run_seed=n["seed"],
        )
        st = RunState(
            k=config.stash[_K],
            agent_spec=str(_opt(config, "agent")),
            user_spec=str(_opt(config, "user")),
            run_seed=n["seed"],
            rootdir=Path(str(config.rootpath)),
            options=options,
            trial_timeout=n["trial_timeout"],
            concurrency=n["concurrency"],
        )
        config.stash[_STATE] = st
    return st


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    from ..domain.files import is_domain_file

    if is_domain_file(file_path):
        from .items import DomainFile

        return DomainFile.from_parent(parent, path=file_path)
    return None


def pytest_report_header(config: pytest.Config) -> str:
    from ..engine.redact import public_spec

    return (
        f"sandtable: k={config.stash[_K]}, agent={public_spec(str(_opt(config, 'agent')))}, "
        f"user={public_spec(str(_opt(config, 'user')))}, run seed={_opt(config, 'seed')}"
    )


def _xdist_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no"


def pytest_sessionstart(session: pytest.Session) -> None:
    # under xdist a worker cannot stop the run cleanly: the controller checks the specs
    if _xdist_controller(session.config) and (
        session.config.getoption("--sandtable-agent") or session.config.getoption("--sandtable-user")
    ):
        st = run_state(session.config)
        st.default_agent()
        st.default_user()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    st = config.stash.get(_STATE, None)
    if st is not None and not hasattr(config, "workerinput"):
        st.check_defaults(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    st = session.config.stash.get(_STATE, None)
    if st is not None:
        st.describe_agent_source(session)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    # A broken domain is one collection error, and the other domains still run.
    st = session.config.stash.get(_STATE, None)
    if st is not None and session.testsfailed and session.testsfailed == st.domain_errors:
        session.config.option.continue_on_collection_errors = True
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    payload = getattr(item, "sandtable_payload", None)
    if payload is not None and call.when == payload[0]:
        # carried to the xdist controller inside the report (TestReport keeps extra attributes)
        report.sandtable = payload[1]
    return report


class _Collector:
    """Receives trial results from reports; on the xdist controller, from every worker."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "sandtable", None)
        # a trial retried by pytest-rerunfailures counts once: its final run
        if data is not None and str(report.outcome) != "rerun":
            self.results.append(data)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.results:
            return
        from ..report.summary import render_terminal

        # the artefacts plugin summarized the run for results.json at session finish
        summary = getattr(self.config.pluginmanager.get_plugin("sandtable-artifacts"), "summary", None)
        if summary is None:
            from ..engine.results import TrialResult
            from ..report.summary import summarize

            trials = [TrialResult.from_dict(d) for d in self.results]
            summary = summarize(trials, k=self.config.stash[_K], prices=run_prices(self.config))
        terminalreporter.section("sandtable")
        for line in render_terminal(summary):
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    st = config.stash.get(_STATE, None)
    if st is not None:
        st.close()


@pytest.fixture(scope="session")
def sandtable_agent(pytestconfig: pytest.Config) -> AgentCallable:
    """The agent under test. Override this fixture in a conftest.py to wrap your own agent."""
    try:
        return run_state(pytestconfig).default_agent()
    except pytest.UsageError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def sandtable_user(pytestconfig: pytest.Config) -> UserCallable:
    """The simulated user (from --sandtable-user). Override to bring your own."""
    try:
        return run_state(pytestconfig).default_user()
    except pytest.UsageError as e:
        pytest.fail(str(e), pytrace=False)
