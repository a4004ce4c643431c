"""State shared by one pytest run: the default agent and user, the loaded domains, the
event loop trials run on and the pool of trials in flight. Its options come from
:class:`~pytest_sandtable.plugin.config.RunConfig`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..adapters.options import AdapterOptions
from ..adapters.registry import agent_label, make_agent, make_user
from ..domain.conditions import format_value
from ..domain.model import Domain, Task
from ..engine.api import AgentCallable, ToolSpec, UserCallable, runs_inline
from ..engine.invoke import agent_traceback, exception_text
from ..engine.redact import public_spec
from ..engine.results import ERRORED, TrialResult
from ..engine.trial import ServeHook, ToolCaller, arun_trial, trial_seed
from .config import REFERENCE_NOTICE, RUN_STATE, RunConfig, is_xdist_worker
from .interplay import ItemTimeout, item_timeout, run_id, trial_deadline
from .pool import TrialPool, guard_steals, pending_items, worker_keeps

if TYPE_CHECKING:
    from ..adapters.recording import Settings, Tape
    from ..proxy import ModelProxy, ProxiedTrial
    from .adaptive import Needs


def run_state(config: pytest.Config) -> RunState:
    """The run's shared state (made on first use: the engine is imported then)."""
    st = config.stash.get(RUN_STATE, None)
    if not isinstance(st, RunState):
        st = RunState(RunConfig.of(config), config.rootpath, spec_folders(config))
        st.run_id = run_id(config)
        if st.run.adaptive is not None or st.run.max_cost is not None:
            from .adaptive import worker_needs

            st.needs = worker_needs(config, st.run)
        config.stash[RUN_STATE] = st
    return st


def spec_folders(config: pytest.Config) -> list[Path]:
    """The rootdir, the ini file's folder, then the folder of each argument of the
    command line (a file's folder, or the folder itself): where a ``module:attr`` spec
    is looked for, with the domain files' folders (:meth:`RunState.spec_folders`)."""
    folders = [Path(config.rootpath)] + ([Path(config.inipath).parent] if config.inipath else [])
    for path in _arg_paths(config):
        if path.is_file():
            folders.append(path.parent)
        elif path.is_dir():
            folders.append(path)
    return list(dict.fromkeys(folders))


def _arg_paths(config: pytest.Config) -> list[Path]:
    """The paths the command line's arguments name (``::`` node ids cut off)."""
    return [Path(config.invocation_params.dir, arg.split("::", 1)[0]) for arg in config.args]


class RunState:
    """What the items of one pytest run share; see :func:`run_state`."""

    def __init__(self, run: RunConfig, rootdir: Path, folders: Sequence[Path] = ()) -> None:
        self.run = run
        self.options = AdapterOptions(
            agent_base_url=run.agent_base_url,
            user_base_url=run.user_base_url,
            temperature=run.temperature,
            max_tokens=run.max_tokens,
            timeout=run.timeout,
            retries=run.retries,
            run_seed=run.seed,
            prompt_cache=run.prompt_cache,
        )
        self.rootdir = rootdir
        self.run_id = ""  # set by run_state: interplay.run_id
        self.folders = list(folders)  # where a module:attr spec is looked for, with the domains' folders
        self.recording = _recording_settings(run, rootdir, lambda: self.run_id)
        self.domains: dict[str, Domain] = {}
        self.domain_errors = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: TrialPool | None = None
        self._agent: AgentCallable | None = None
        self._baseline_agent: AgentCallable | None = None  # --sandtable-baseline-agent, built once
        # --sandtable-baseline-agent: the baseline agent's trial of each trial run in this
        # process, by (domain name, task id, trial), until its item takes it
        self.baseline_results: dict[tuple[str, str, int], TrialResult] = {}
        self._user: UserCallable | None = None
        # what names each trial (``TrialInfo.trial_id``) besides the run's id: each domain
        # file relative to the rootdir, and how often a trial started in this process
        self._files: dict[str, str] = {}
        self._started: dict[tuple[str, str, int], int] = {}
        self.bad_spec = False  # --sandtable-agent or --sandtable-user named nothing usable: the run stops
        # which trials the run still needs: with --sandtable-adaptive or a budget (plugin.adaptive)
        self.needs: Needs | None = None  # made by run_state
        # --sandtable-model-proxy: the process's one proxy (started at the first trial), the
        # trials open on it, and the cost of this process's trials that ended (for the budget)
        self._proxy: ModelProxy | None = None
        self._proxy_lock = threading.Lock()
        self._proxied: dict[int, ProxiedTrial] = {}
        self._spent = 0.0
        self._prices: Mapping[str, Mapping[str, float]] | None = None

    # -- the defaults behind the sandtable_agent / sandtable_user fixtures ----------

    def spec_folders(self) -> list[Path]:
        """Where a ``module:attr`` agent or user is looked for after ``sys.path``: the
        rootdir, the ini file's folder, the folders of the command line's arguments, then
        the folder of each domain file collected so far."""
        return list(dict.fromkeys(self.folders + [Path(path).parent for path in self.domains]))

    def look_under_the_args(self, config: pytest.Config) -> None:
        """Add the folders of the domain files under the command line's folders to
        :meth:`spec_folders`: for the xdist controller, which checks the specs and
        collects no domain file itself."""
        from ..domain.files import find_domain_files

        found = [path.parent for arg in _arg_paths(config) if arg.is_dir() for path in find_domain_files(arg)]
        self.folders = list(dict.fromkeys(self.folders + found))

    def default_agent(self) -> AgentCallable:
        """The agent --sandtable-agent names (built once); a bad spec is a usage error."""
        if self._agent is None:
            try:
                self._agent, _ = make_agent(self.run.agent, self.options, self.spec_folders())
            except ValueError as e:
                self.bad_spec = True
                raise pytest.UsageError(f"--sandtable-agent: {e}") from None
        return self._agent

    def baseline_agent(self) -> AgentCallable | None:
        """The agent --sandtable-baseline-agent names (built once), or None; a bad spec is a usage error."""
        spec = self.run.baseline.agent if self.run.baseline is not None else None
        if spec is None:
            return None
        if self._baseline_agent is None:
            try:
                self._baseline_agent, _ = make_agent(spec, self.options, self.spec_folders())
            except ValueError as e:
                self.bad_spec = True
                raise pytest.UsageError(f"--sandtable-baseline-agent: {e}") from None
        return self._baseline_agent

    def default_user(self) -> UserCallable:
        """The simulated user --sandtable-user names (built once); a bad spec is a usage error."""
        if self._user is None:
            try:
                self._user, _ = make_user(self.run.user, self.options, self.spec_folders())
            except ValueError as e:
                self.bad_spec = True
                raise pytest.UsageError(f"--sandtable-user: {e}") from None
        return self._user

    def check_defaults(self, items: list[pytest.Item]) -> None:
        """Before any trial runs: build the default agent and user if some trial uses them,
        so that a bad --sandtable-agent / --sandtable-user stops the run with one line."""
        uses_agent = uses_user = False
        for item in items:
            info = getattr(item, "_fixtureinfo", None)
            if info is None or not getattr(item, "is_sandtable_trial", False):
                continue
            uses_agent = uses_agent or overriding_fixture(item, "sandtable_agent") is None
            uses_user = uses_user or overriding_fixture(item, "sandtable_user") is None
            if uses_agent and uses_user:
                break
        if uses_agent:
            self.default_agent()
        if any(getattr(item, "is_sandtable_trial", False) for item in items):
            self.baseline_agent()
        if uses_user:
            self.default_user()

    def describe_agent_source(self, session: pytest.Session) -> None:
        """Once the trials are collected, say which agent and user play them, once:
        ``sandtable: agent=fixture sandtable_agent (conftest.py), user=scripted``. A
        fixture a conftest.py overrides is named with its file; an option it replaces is
        said to be ignored there; the reference agent, when it plays because nothing
        named an agent, is said to check the suite, not an agent."""
        trials = [item for item in session.items if getattr(item, "is_sandtable_trial", False)]
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if not trials or tr is None or session.config.option.collectonly or self.bad_spec:
            return  # nothing plays
        agent, agent_fixtures, agent_default = self._played_by(trials, "sandtable_agent", self.run.agent)
        user, _, _ = self._played_by(trials, "sandtable_user", self.run.user)
        tr.write_line(f"sandtable: agent={agent}, user={user}")
        if agent_fixtures and self.run.agent_arg is not None:
            tr.write_line(
                f"sandtable: --sandtable-agent={public_spec(self.run.agent_arg)} is ignored "
                f"for the trials whose sandtable_agent fixture is overridden there",
                yellow=True,
            )
        if agent_default and not self.run.agent_named:
            tr.write_line(f"sandtable: {REFERENCE_NOTICE}", yellow=True)

    def _played_by(self, trials: list[pytest.Item], name: str, spec: str) -> tuple[str, list[str], bool]:
        """Who plays ``name`` (``sandtable_agent`` or ``sandtable_user``) in these trials:
        the text the header shows, the conftest.py files that override the fixture, and
        whether the option's spec plays in some trial."""
        files: set[str] = set()
        default = False
        for item in trials:
            fixture = overriding_fixture(item, name)
            if fixture is None:
                default = True
                continue
            code = getattr(fixture.func, "__code__", None)
            files.add(os.path.relpath(code.co_filename, self.rootdir) if code else "?")
        if not files:
            return public_spec(spec), [], default
        shown = f"fixture {name} ({', '.join(sorted(files))})"
        if default:
            shown += f" where defined, else {public_spec(spec)}"
        return shown, sorted(files), default

    def continue_past_broken_domains(self, session: pytest.Session) -> None:
        """A broken domain file is one collection error, and the other domains still run:
        when domain files are all that failed to collect, go on as with
        --continue-on-collection-errors."""
        if session.testsfailed and session.testsfailed == self.domain_errors:
            session.config.option.continue_on_collection_errors = True

    # -- running ----------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def run_now(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, *, location: str = "",
        pytest_timeout: ItemTimeout | None = None,
    ) -> TrialResult:
        """Run one trial now (concurrency 1). Whatever escapes running it makes it an
        errored trial (see :meth:`escaped`), except Ctrl-C, which stops the run.
        ``pytest_timeout``: pytest-timeout's timeout of the item (see :meth:`_live_trial`)."""
        try:
            return self._drive(self._trial(domain, task, trial, agent, user, location, pytest_timeout), agent, user)
        except KeyboardInterrupt:
            raise  # Ctrl-C (an inline agent's own KeyboardInterrupt cannot be told from it)
        except BaseException as e:
            return self.escaped(e, domain, task, trial, agent, user, location)

    def _drive(self, coro: Coroutine[Any, Any, TrialResult], agent: Any, user: Any) -> TrialResult:
        base = self._baseline_agent
        if runs_inline(agent) and runs_inline(user) and not self.run.serve and (base is None or runs_inline(base)):
            # neither ever awaits (nor does starting a server): drive the coroutine directly, no event loop round trip
            try:
                coro.send(None)
            except StopIteration as done:
                result: TrialResult = done.value
                return result
            coro.close()
            raise RuntimeError("an inline trial suspended; inline agents and users never await")  # pragma: no cover
        return self.loop.run_until_complete(coro)

    def escaped(
        self, e: BaseException, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str
    ) -> TrialResult:
        """The errored result of a trial that `e` escaped from: the engine turns what an
        agent or user raises into a verdict, so this is a safety net for what it does not
        (an exception that is not an Exception, such as CancelledError, GeneratorExit or
        one of the agent's own): the trial still counts, with the reason and where it was raised."""
        return ungraded_trial(
            domain, task, trial, self.run.k,
            run_seed=self.run.seed,
            error=f"running the trial raised {exception_text(e)}; the trial was not graded",
            location=location,
            agent=_label(agent),
            user=_label(user),
            traceback=agent_traceback(e, _NOT_WHERE_IT_WAS_RAISED),
        )

    def _trial(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str,
        pytest_timeout: ItemTimeout | None = None,
    ) -> Coroutine[Any, Any, TrialResult]:
        if self.recording is not None:
            coro = self._recorded(domain, task, trial, agent, user, location, pytest_timeout)
        else:
            coro = self._live_trial(domain, task, trial, agent, user, location, pytest_timeout)
        base = self.baseline_agent()
        if base is None:
            return coro
        return self._paired(coro, domain, task, trial, base, user, location, pytest_timeout)

    async def _paired(
        self, candidate: Coroutine[Any, Any, TrialResult], domain: Domain, task: Task, trial: int, base: Any,
        user: Any, location: str, pytest_timeout: ItemTimeout | None,
    ) -> TrialResult:
        """--sandtable-baseline-agent: the candidate's trial, then the baseline agent's trial of
        the same task and trial number, so the same trial seed (a fresh world, the same user
        seed, the same faults), kept for the item (``baseline_results``). What escapes the
        baseline's trial makes it errored (the pair is then not counted)."""
        result = await candidate
        try:
            other = await self._live_trial(domain, task, trial, base, user, location, pytest_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            other = self.escaped(e, domain, task, trial, base, user, location)
        self.baseline_results[(str(domain.name), str(task.id), trial)] = other
        return result

    async def _recorded(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str,
        pytest_timeout: ItemTimeout | None,
    ) -> TrialResult:
        """A trial with --sandtable-record: its model calls go through its tape (replayed or
        recorded, docs/recording.md), its exchanges are written when it ends. A recording
        that cannot be used, or a request without one where the mode only replays, makes
        this trial errored with a message naming the file; the run goes on."""
        from ..adapters.recording import RecordingError, playing

        assert self.recording is not None  # _trial comes here only then
        domain_file = Path(domain.path) if domain.path else self.rootdir / "sandtable.yaml"
        try:
            tape = self.recording.open(domain.name, domain_file, task.id, trial)
        except RecordingError as e:
            return self._unrecorded(domain, task, trial, agent, user, location, str(e))
        with playing(tape):
            result = await self._live_trial(domain, task, trial, agent, user, location, pytest_timeout, tape)
        if tape.miss is not None:  # the agent or user was never answered: not graded, errored
            result.verdict, result.error, result.attribution, result.checks = ERRORED, tape.miss, None, []
        result.replayed = tape.all_replayed
        try:
            tape.write(result.verdict == ERRORED)
        except RecordingError as e:
            return self._unrecorded(domain, task, trial, agent, user, location, str(e))
        return result

    def _unrecorded(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str, error: str
    ) -> TrialResult:
        return ungraded_trial(domain, task, trial, self.run.k, run_seed=self.run.seed, error=error,
                              location=location, agent=_label(agent), user=_label(user))

    def _live_trial(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str,
        pytest_timeout: ItemTimeout | None = None, tape: Tape | None = None,
    ) -> Coroutine[Any, Any, TrialResult]:
        """The trial's coroutine. Its deadline is --sandtable-trial-timeout, or a little less
        than pytest-timeout's timeout of the item when that comes first
        (``interplay.trial_deadline``: counted from the item's start, as pytest-timeout's
        is): the engine then stops a hung agent and fails the trial before pytest-timeout
        would stop the item (or, with its thread method, the whole process)."""
        trial_timeout = self.run.trial_timeout
        said, own = trial_deadline(pytest_timeout, time.monotonic()) if pytest_timeout is not None else (None, None)
        if own is not None and (trial_timeout is None or own < trial_timeout):
            trial_timeout = own
        else:
            own = None
        args = (domain, task, agent, user)
        kwargs: dict[str, Any] = dict(
            trial=trial,
            k=self.run.k,
            run_seed=self.run.seed,
            agent_name=agent_label(agent),
            user_name=agent_label(user),
            location=location,
            trial_timeout=trial_timeout,
            serve=self._serve_hook(),
            trial_id=self.trial_id(domain, task, trial, location),
        )
        if self.run.model_proxy or self.run.max_cost is not None:
            coro = self._counted(args, kwargs, tape)
        else:
            coro = arun_trial(*args, **kwargs)
        if own is None:
            return coro
        assert pytest_timeout is not None and said is not None  # own comes from it
        return _named_timeout(coro, own, said, pytest_timeout.seconds)

    def trial_id(self, domain: Domain, task: Task, trial: int, location: str) -> str:
        """``<domain file>::<task>/<trial>@<run id>``, and ``.<n>`` after it for the n-th start of
        the same trial in this process (a plugin that runs an item again): unique within
        the run and across runs, so an agent keyed on it (memory, idempotency keys) never
        carries one attempt's state into another (docs/agents.md)."""
        path = domain.path or ""
        file = self._files.get(path)
        if file is None:
            file = location.rpartition(":")[0] if location else ""
            if not file and path:
                try:
                    file = Path(os.path.relpath(path, self.rootdir)).as_posix()
                except ValueError:  # another drive (Windows)
                    file = Path(path).as_posix()
            self._files[path] = file = file or domain.name
        key = (file, task.id, trial)
        n = self._started.get(key, 0) + 1
        self._started[key] = n
        name = f"{file}::{task.id}/{trial}@{self.run_id}"
        return name if n == 1 else f"{name}.{n}"

    # -- the model proxy (--sandtable-model-proxy) ---------------------------------

    def _open_proxied(self, trial_id: str, tape: Tape | None) -> ProxiedTrial:
        """The trial's routes through the process's model proxy, started on the first
        trial that asks (the proxy package loads only then)."""
        with self._proxy_lock:
            if self._proxy is None:
                from ..proxy import ModelProxy

                self._proxy = ModelProxy(dict(self.run.model_proxy), refuse=self._budget_refusal).start()
            proxied = self._proxy.open_trial(trial_id, tape)
            self._proxied[id(proxied)] = proxied
        return proxied

    async def _counted(self, args: tuple[Any, ...], kwargs: dict[str, Any], tape: Tape | None) -> TrialResult:
        """The trial (``arun_trial(*args, **kwargs)``), with its routes through the model
        proxy when it is on: opened before its first turn, closed when it ends (a call
        still in flight from an abandoned agent then gets ``404``), what its agent's calls
        through them used added to its agent usage. Its cost counts for --sandtable-max-cost."""
        proxied = self._open_proxied(kwargs["trial_id"], tape) if self.run.model_proxy else None
        try:
            result = await arun_trial(*args, **kwargs, models=proxied)
        finally:
            if proxied is not None:
                proxied.close()
                with self._proxy_lock:
                    self._proxied.pop(id(proxied), None)
        if proxied is not None:
            _add_usage(result.usage.setdefault("agent", {}), proxied.usage.to_dict())
            if proxied.refused is not None and result.verdict != ERRORED:
                # the budget stopped the trial, not the agent: errored, as a trial not run
                result.verdict, result.error, result.attribution = ERRORED, proxied.refused, None
        if not (result.replayed or (tape is not None and tape.all_replayed)):  # a replay costs nothing
            self._spent += self._cost_of(result.usage)
        return result

    def _cost_of(self, usage: Any) -> float:
        """USD of a trial's usage (both sides) at the run's prices; a model without a price counts 0."""
        from ..report.prices import builtin_prices, estimate_cost

        prices = self._prices
        if prices is None:
            prices = self._prices = self.run.prices if self.run.prices is not None else builtin_prices()
        total = 0.0
        for side in ("agent", "user"):
            models = usage.get(side) if isinstance(usage, dict) else None
            if isinstance(models, dict):
                total += sum(c for c in estimate_cost(models, prices).values() if c is not None)
        return total

    def _budget_refusal(self) -> str | None:
        """Why the proxy refuses a request (on the proxy's threads): the run's recorded cost
        (this process's ended trials, and what the trials in flight used live through the
        proxy) has reached --sandtable-max-cost; None while it has not, or without a budget."""
        budget = self.run.max_cost
        if budget is None:
            return None
        with self._proxy_lock:
            flying = list(self._proxied.values())
        spent = self._spent
        for p in flying:
            if p.tape is None or p.tape.live > 0:
                spent += self._cost_of({"agent": p.usage.to_dict()})
        if spent < budget:
            return None
        from ..report.fmt import format_cost

        return (f"the run's cost budget of {format_cost(budget)} is spent ({format_cost(spent)} recorded; "
                f"--sandtable-max-cost); this model call was not sent")

    def _serve_hook(self) -> ServeHook | None:
        """With --sandtable-serve, what serves each trial's world (the serve package loads
        only then: it imports starlette, uvicorn and mcp)."""
        if not self.run.serve:
            return None
        from ..serve import serve_world

        port = self.run.serve_port

        def hook(tools: list[ToolSpec], call: ToolCaller, title: str) -> AbstractAsyncContextManager[tuple[str, str]]:
            return serve_world(tools, call, title, port)

        return hook

    # -- many trials in flight (--sandtable-concurrency N) ------------------------

    @property
    def pool(self) -> TrialPool:
        if self._pool is None:
            self._pool = TrialPool(self.run.concurrency)
        return self._pool

    def started_early(self, item: Any) -> bool:
        """Whether ``item``'s trial was started before pytest reached it (the prefetch)."""
        return self._pool is not None and self._pool.submitted(item.nodeid)

    def run_concurrently(self, item: Any, agent: Any, user: Any) -> tuple[TrialResult, dict[str, str]]:
        """Start this item's trial (unless prefetched), top up the prefetch window, wait for
        it. As in :meth:`run_now`, whatever escapes the trial makes it errored, except Ctrl-C."""
        if self._pool is None:  # under xdist it knows which items are still this worker's
            begun: set[str] = set()  # the items whose trials began here: never given up to a steal
            self._pool = TrialPool(self.run.concurrency, worker_keeps(item.session, begun))
            guard_steals(item.session, begun)
        self._prefetch(item, agent, user)
        try:
            return self.pool.wait(item.nodeid)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # the trial's own CancelledError, or a pool that stopped
            return self.escaped(e, item.domain, item.task, item.trial, agent, user, trial_location(item)), {}

    def _prefetch(self, item: Any, agent: Any, user: Any) -> None:
        """Submit this item's trial and those of the next items that share its agent and user.

        Every scan and submission is work of pytest's thread, which the pool's thread then
        waits for (the interpreter's lock): outside xdist the window is topped up when half
        a pool of it has been used, not at each item. (Under xdist each item still looks,
        to cancel at once the trials whose items another worker stole.)"""
        pool = self.pool
        self._submit(item, agent, user)
        key = _fixture_key(item)
        if key is not None:
            window = 2 * self.run.concurrency
            if is_xdist_worker(item.config):
                # the worker's own queue; what left it was stolen by another worker
                upcoming = list(pending_items(item.session, item))
                pool.forget_others({item.nodeid} | {nxt.nodeid for nxt in upcoming})
            elif pool.pending() > window - max(1, self.run.concurrency // 2):
                return  # enough started ahead: top up by half a pool at a time, not a scan per item
            else:  # the rest of the session, of which only the next few matter
                upcoming = list(islice(pending_items(item.session, item), 8 * window + 64))
            needs = self.needs
            for nxt in upcoming:
                if window <= 0:
                    break
                if getattr(nxt, "is_sandtable_trial", False) and not nxt.skip_reason and _fixture_key(nxt) == key:
                    if needs is not None and not needs.may_start_early(nxt, pool.pending()):
                        continue  # its task is settled, or the budget would not cover it
                    window -= 1
                    self._submit(nxt, agent, user)

    def _submit(self, item: Any, agent: Any, user: Any) -> None:
        if self.pool.submitted(item.nodeid):
            return
        args = (item.domain, item.task, item.trial, agent, user, trial_location(item), item_timeout(item))
        self.pool.submit(item.nodeid, lambda: self._settled(*args))

    async def _settled(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str,
        pytest_timeout: ItemTimeout | None = None,
    ) -> TrialResult:
        """A trial on the pool's loop, whatever escapes it made an errored result there: a
        KeyboardInterrupt or SystemExit would stop the loop for every trial in flight. (On
        that thread it never is Ctrl-C, which reaches the main thread.) CancelledError goes
        on: the pool cancels trials itself; the item's own wait tells the trial's from those."""
        try:
            return await self._trial(domain, task, trial, agent, user, location, pytest_timeout)
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            return self.escaped(e, domain, task, trial, agent, user, location)

    def close(self) -> None:
        if self.recording is not None:
            from ..adapters.recording import configure

            configure(None)
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._proxy is not None:  # after the pool: no trial is in flight any more
            self._proxy.close()
            self._proxy = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _recording_settings(run: RunConfig, rootdir: Path, run_id: Callable[[], str]) -> Settings | None:
    """With --sandtable-record, switch recording on for this process and return its
    settings (an ``adapters.recording.Settings``); None otherwise, and then nothing of
    recording is imported. Secrets of the environment are scrubbed from recordings as
    from every other file the run writes, and the run's id (in each ``trial_id`` an HTTP
    step agent is sent) is stored as ``@run``, so a later run's requests match them."""
    if run.record is None:
        return None
    from ..adapters.recording import VOLATILE, Settings, Volatile, configure
    from ..report.safe import scrub_secrets, secret_values

    ours = [Volatile.parse(line) for line in run.record_ignore]  # checked by RunConfig.load

    secrets = secret_values()
    def scrub(value: Any) -> Any:
        value, made = scrub_secrets(value, secrets), run_id()
        return _without_run_id(value, "@" + made) if made else value

    settings = Settings(run.record, run.cassettes, rootdir, scrub, (*VOLATILE, *ours))
    configure(settings)
    return settings


def _add_usage(into: dict[str, Any], more: dict[str, dict[str, int]]) -> None:
    """``more`` (usage by model, as ``Usage.to_dict`` gives it) added into ``into``."""
    for model, fields in more.items():
        have = into.setdefault(model, {})
        for name, n in fields.items():
            have[name] = int(have.get(name, 0)) + n


def _without_run_id(value: Any, token: str) -> Any:
    """``value`` (JSON-compatible, as a recording stores it) with ``token`` (``@<run id>``)
    written ``@run`` in every string."""
    if isinstance(value, str):
        return value.replace(token, "@run") if token in value else value
    if isinstance(value, dict):
        return {_without_run_id(k, token): _without_run_id(v, token) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_run_id(v, token) for v in value]
    return value


def ungraded_trial(
    domain: Domain,
    task: Task,
    trial: int,
    k: int,
    *,
    run_seed: int,
    error: str,
    location: str,
    ended_by: str = "",
    agent: str = "",
    user: str = "",
    traceback: str | None = None,
) -> TrialResult:
    """An errored TrialResult for a trial that has no result of its own (its worker died,
    something escaped running it, or it was skipped): it is still one trial of the run,
    counted in results.json and the summary (never a pass), with ``error`` saying why.
    An empty ``agent`` / ``user`` is filled in at session finish (``artifacts._name_unknown_sides``)."""
    return TrialResult(
        domain=domain.name,
        task=task.id,
        trial=trial,
        k=k,
        seed=trial_seed(run_seed, domain.name, task.id, trial),
        verdict=ERRORED,
        tags=list(task.tags),
        critical=task.critical,
        error=error,
        ended_by=ended_by,
        agent=agent,
        user=user,
        usage={"agent": {}, "user": {}},
        location=location,
        traceback=traceback,
    )


async def _named_timeout(
    trial: Coroutine[Any, Any, TrialResult], seconds: float, deadline: float, pytest_timeout: float
) -> TrialResult:
    """The trial, its timeout message saying where the deadline came from: the engine
    writes "the trial timeout of 1.2s" (``seconds``, what was left of ``deadline`` when the
    trial began); the trial's deadline was pytest-timeout's, less a margin, from the item's
    start: "the trial timeout of 1.5s, pytest-timeout's 2s less 0.5s to grade the trial"."""
    result = await trial
    said = f"the trial timeout of {format_value(seconds)}s"
    margin = format_value(round(pytest_timeout - deadline, 3))
    told = (f"the trial timeout of {format_value(deadline)}s, pytest-timeout's {format_value(pytest_timeout)}s "
            f"less {margin}s to grade the trial")
    if result.error and said in result.error:
        result.error = result.error.replace(said, told)
    for check in result.checks:
        if check.kind == "runtime" and said in check.detail:
            check.detail = check.detail.replace(said, told)
    why = result.attribution
    if why and said in why.get("evidence", ""):
        why["evidence"] = why["evidence"].replace(said, told)
    return result


def _label(x: Any) -> str:
    """An agent's or user's label, for a result made after something escaped its trial:
    naming it must not raise in turn (its `name` may be what raised)."""
    try:
        return agent_label(x)
    except Exception:
        return ""  # filled in at session finish, as for a trial that never reached it


def trial_location(item: Any) -> str:
    """A trial item's `FILE:LINE` (its task's line), as results.json gives it."""
    return f"{item.location[0]}:{(item.location[1] or 0) + 1}"


# frames that only carried an escaped exception: the plugin's and concurrent.futures'
_NOT_WHERE_IT_WAS_RAISED = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(concurrent.futures.__file__)) + os.sep,
)


def _fixture_key(item: Any) -> tuple[int, int] | None:
    """Items whose agent and user come from the same session-scoped fixtures get the
    same objects, so their trials can start before pytest reaches them."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    a = info.name2fixturedefs.get("sandtable_agent")
    u = info.name2fixturedefs.get("sandtable_user")
    if not a or not u or a[-1].scope != "session" or u[-1].scope != "session":
        return None
    return (id(a[-1]), id(u[-1]))


def overriding_fixture(item: Any, name: str) -> Any:
    """The fixture definition a conftest.py gives `name` for this item, or None when the
    plugin's own default serves it."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get(name) if info is not None else None
    if not defs or getattr(defs[-1].func, "__module__", "") == "pytest_sandtable.plugin":
        return None
    return defs[-1]
