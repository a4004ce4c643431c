"""Trial items beside other pytest plugins: pytest-rerunfailures, pytest-timeout,
pytest-repeat, allure-pytest and pytest-xdist. A plugin module of its own, registered
from ``pytest_configure``; it imports nothing but the standard library and pytest.

- **Every attempt counts.** pytest-rerunfailures would run a failed trial again and
  report only its last attempt: an agent failing one attempt in three would show
  pass^k 100%. A trial item runs pytest's own protocol instead (once), whatever
  ``--reruns`` or a ``flaky`` marker asks; one line of the terminal says so. More
  attempts of a task are more trials: ``--sandtable-k``.
- **pytest-repeat's --count** parametrizes test functions; trials are not functions,
  so it never repeats them: one line says so.
- **pytest-timeout's timeout** (its ``timeout`` marker, else ``--timeout``,
  ``PYTEST_TIMEOUT`` or the ini value, as pytest-timeout resolves them) makes the
  trial's own deadline a little shorter (:func:`within_timeout`), and counted from
  where pytest-timeout's is, the item's start (not the trial's, which comes after its
  fixtures), so the engine stops a hung agent first and the trial fails as at
  ``--sandtable-trial-timeout``.
- **allure-pytest** times a test from the start to the end of its call phase; a trial
  runs in setup, so the start of its allure result is moved back by the trial's duration.
- **The run id** in every ``trial_id`` is made once, on the xdist controller (or the
  only process), and handed to the workers.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, NamedTuple

import pytest

_RUN_ID = pytest.StashKey[str]()
_FOUND = pytest.StashKey["Found"]()
_WORKER_KEY = "sandtable_interplay"  # in a worker's workeroutput: what its collection found


class Found:
    """What the collection found: trial items, and those pytest-rerunfailures would rerun."""

    def __init__(self) -> None:
        self.trials = 0
        self.not_rerun = 0


def _found(config: pytest.Config) -> Found:
    found = config.stash.get(_FOUND, None)
    if found is None:
        found = config.stash[_FOUND] = Found()
    return found


def run_id(config: pytest.Config) -> str:
    """This run's id (8 hex digits): made once, the same in every xdist worker."""
    found = config.stash.get(_RUN_ID, None)
    if found is None:
        given = getattr(config, "workerinput", {}).get("sandtable_run_id")
        found = given if isinstance(given, str) and given else secrets.token_hex(4)
        config.stash[_RUN_ID] = found
    return found


def within_timeout(seconds: float) -> float:
    """The trial's own deadline under pytest-timeout's ``seconds``: a tenth shorter, by at
    least 0.5 s and at most 5 s (time to grade the trial and report it), never below half."""
    margin = min(max(0.5, seconds / 10), 5.0)
    return round(max(seconds - margin, seconds / 2), 3)


class ItemTimeout(NamedTuple):
    """pytest-timeout's timeout of an item, ``seconds``, and ``started``: when its timer
    was set (``time.monotonic()``, as the item's protocol began), or None where the trial
    does not run inside the item's protocol (``--sandtable-concurrency``)."""

    seconds: float
    started: float | None = None


def trial_deadline(timeout: ItemTimeout, now: float) -> tuple[float, float]:
    """The trial's own deadline under pytest-timeout's: what it is said to be
    (:func:`within_timeout`), and what is left of it at ``now``, the trial's start, once
    the item's setup since ``started`` is taken off (at least a millisecond)."""
    said = within_timeout(timeout.seconds)
    if timeout.started is None:
        return said, said
    return said, max(round(said - (now - timeout.started), 3), 0.001)


def item_timeout(item: Any, started: float | None = None) -> ItemTimeout | None:
    """pytest-timeout's timeout for this item in seconds, as it resolves it (its
    ``timeout`` marker first, then the run's ``--timeout``, ``PYTEST_TIMEOUT`` or ini
    value), with ``started`` (:class:`ItemTimeout`); None without pytest-timeout or
    without a timeout (0 switches it off)."""
    try:
        seconds = item.config._env_timeout  # the run's value, set by pytest-timeout's pytest_configure
    except AttributeError:
        return None
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        if value is not None:
            seconds = value
    try:
        seconds = float(seconds) if seconds is not None else None
    except (TypeError, ValueError):  # pytest-timeout reports a bad marker itself
        return None
    return ItemTimeout(seconds, started) if seconds is not None and seconds > 0 else None


def _is_trial(item: Any) -> bool:
    return getattr(item, "is_sandtable_trial", False)


def pytest_configure(config: pytest.Config) -> None:
    run_id(config)


# -- pytest-rerunfailures ---------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A trial runs once: pytest's own protocol (the one in ``_pytest.runner``), before
    pytest-rerunfailures' would (hook wrappers, pytest-timeout's and xdist's, still wrap
    it). Other items, or a run without pytest-rerunfailures: None, the next one's turn.
    A trial item is told when its protocol began, which is when pytest-timeout's hook
    wrapper set its timer (:class:`ItemTimeout`)."""
    if not _is_trial(item):
        return None
    item.sandtable_started = time.monotonic()  # type: ignore[attr-defined]
    if not item.config.pluginmanager.has_plugin("rerunfailures"):
        return None
    from _pytest.runner import runtestprotocol

    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=nextitem)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Count the trials, and those pytest-rerunfailures would rerun (``--reruns``, a
    ``flaky`` marker a conftest.py hook added, a task tagged ``flaky``)."""
    found = _found(config)
    trials = [item for item in items if _is_trial(item)]
    found.trials = len(trials)
    reruns = config.pluginmanager.get_plugin("rerunfailures")
    count = getattr(reruns, "get_reruns_count", None)
    if count is None:
        return
    for item in trials:
        try:
            asked = count(item)
        except Exception:  # a marker it cannot read: it says so itself when it runs
            asked = None
        if asked:
            found.not_rerun += 1


# -- xdist: the run id to the workers, their collections to the controller ----------------


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["sandtable_run_id"] = run_id(node.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        found = _found(session.config)
        output[_WORKER_KEY] = [found.trials, found.not_rerun]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    told = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if isinstance(told, list) and len(told) == 2:  # every worker collects every item
        found = _found(node.config)
        found.trials = max(found.trials, int(told[0]))
        found.not_rerun = max(found.not_rerun, int(told[1]))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in notes(terminalreporter.config):
        terminalreporter.write_line(line, yellow=True)


def notes(config: pytest.Config) -> list[str]:
    """The lines the terminal shows about other plugins' options that trials ignore."""
    found = _found(config)
    lines = []
    if found.not_rerun:
        lines.append(
            f"sandtable: pytest-rerunfailures reran no trial ({found.not_rerun} asked for by --reruns or a flaky "
            f"marker): every attempt of a task is a trial and counts; for more attempts use --sandtable-k"
        )
    count = getattr(config.option, "count", 1)
    if found.trials and isinstance(count, int) and count > 1:
        from .config import RunConfig

        k = RunConfig.of(config).k
        lines.append(
            f"sandtable: --count {count} (pytest-repeat) repeats test functions, not trials; "
            f"for {count} times the {k} trial{'' if k == 1 else 's'} of each task use --sandtable-k {k * count}"
        )
    return lines


# -- allure-pytest --------------------------------------------------------------------


class AllureTime:
    """Registered only when allure-pytest records (``--alluredir``), so that no other run
    pays for a wrapper of every item's call phase."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """allure-pytest times a test from the start to the end of its call phase (its own
        wrapper of this hook, inside this one); a trial ran in setup, before it: once allure
        has timed the call, its start is moved back by the trial's duration."""
        try:
            return (yield)
        finally:
            if _is_trial(item):
                _allure_duration(item)


def pytest_sessionstart(session: pytest.Session) -> None:
    manager = session.config.pluginmanager
    if manager.has_plugin("allure_listener") and not manager.has_plugin("sandtable-allure-time"):
        manager.register(AllureTime(), "sandtable-allure-time")


def _allure_duration(item: Any) -> None:
    allure = item.config.pluginmanager.get_plugin("allure_listener")
    held = getattr(item, "sandtable_result", None)
    if allure is None or held is None:
        return
    test = allure.allure_logger.get_test(None)  # the test whose call allure just timed: the last it scheduled
    if test is None or not isinstance(test.stop, int):
        return
    test.start = min(test.start or test.stop, test.stop - round(held[1].duration * 1000))
