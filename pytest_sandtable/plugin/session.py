"""State shared by one pytest run: options, loaded domains, the event loop trials run on."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from ..adapters.options import AdapterOptions
from ..adapters.registry import agent_label, make_agent, make_user
from ..domain.model import Domain, Task
from ..engine.api import AgentCallable, UserCallable
from ..engine.redact import public_spec
from ..engine.reference import ReferenceAgent
from ..engine.results import TrialResult
from ..engine.scripted_user import ScriptedUser
from ..engine.trial import arun_trial
from .pool import TrialPool, is_xdist_worker, pending_items


class RunState:
    def __init__(
        self,
        *,
        k: int,
        agent_spec: str,
        user_spec: str,
        run_seed: int,
        rootdir: Path,
        options: AdapterOptions | None = None,
        trial_timeout: float = 900.0,
        concurrency: int = 1,
    ) -> None:
        self.k = k
        self.options = options or AdapterOptions(run_seed=run_seed)
        self.trial_timeout = trial_timeout
        self.concurrency = concurrency
        self.agent_spec = agent_spec
        self.user_spec = user_spec
        self.run_seed = run_seed
        self.rootdir = rootdir
        self.domains: dict[str, Domain] = {}
        self.domain_errors = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: TrialPool | None = None
        self._agent: AgentCallable | None = None
        self._user: UserCallable | None = None
        self.agent_source = ""

    # -- the defaults behind the sandtable_agent / sandtable_user fixtures ----------

    def default_agent(self) -> AgentCallable:
        """The agent --sandtable-agent names (built once); a bad spec is a usage error."""
        if self._agent is None:
            try:
                self._agent, _ = make_agent(self.agent_spec, self.options)
            except ValueError as e:
                raise pytest.UsageError(f"--sandtable-agent: {e}") from None
        return self._agent

    def default_user(self) -> UserCallable:
        """The simulated user --sandtable-user names (built once); a bad spec is a usage error."""
        if self._user is None:
            try:
                self._user, _ = make_user(self.user_spec, self.options)
            except ValueError as e:
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
            uses_agent = uses_agent or _overriding_fixture(item, "sandtable_agent") is None
            uses_user = uses_user or _overriding_fixture(item, "sandtable_user") is None
            if uses_agent and uses_user:
                break
        if uses_agent:
            self.default_agent()
        if uses_user:
            self.default_user()

    def describe_agent_source(self, session: pytest.Session) -> None:
        """Say in the header when a conftest.py's sandtable_agent fixture replaces --sandtable-agent."""
        seen: set[str] = set()
        for item in session.items:
            fixture = _overriding_fixture(item, "sandtable_agent")
            if fixture is None:
                continue
            code = getattr(fixture.func, "__code__", None)
            where = os.path.relpath(code.co_filename, self.rootdir) if code else "?"
            if where not in seen:
                seen.add(where)
        if seen:
            tr = session.config.pluginmanager.get_plugin("terminalreporter")
            self.agent_source = ", ".join(sorted(seen))
            if tr is not None:
                tr.write_line(f"sandtable: agent from the sandtable_agent fixture in {self.agent_source}")
                if session.config.getoption("--sandtable-agent") is not None:
                    tr.write_line(
                        f"sandtable: --sandtable-agent={public_spec(session.config.getoption('--sandtable-agent'))} "
                        f"is ignored "
                        f"for the trials whose sandtable_agent fixture is overridden there",
                        yellow=True,
                    )

    # -- running ----------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def run(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, *, location: str = ""
    ) -> TrialResult:
        """Run one trial now (concurrency 1)."""
        coro = self._trial(domain, task, trial, agent, user, location)
        if type(agent) is ReferenceAgent and type(user) is ScriptedUser:
            # neither ever awaits: drive the coroutine directly, no event loop round trip
            try:
                coro.send(None)
            except StopIteration as done:
                result: TrialResult = done.value
                return result
            coro.close()
            raise RuntimeError("a reference trial suspended; it never awaits")  # pragma: no cover
        return self.loop.run_until_complete(coro)

    def _trial(
        self, domain: Domain, task: Task, trial: int, agent: Any, user: Any, location: str
    ) -> Coroutine[Any, Any, TrialResult]:
        return arun_trial(
            domain,
            task,
            agent,
            user,
            trial=trial,
            k=self.k,
            run_seed=self.run_seed,
            agent_name=agent_label(agent),
            user_name=agent_label(user),
            location=location,
            trial_timeout=self.trial_timeout,
        )

    # -- many trials in flight (--sandtable-concurrency N) ------------------------

    @property
    def pool(self) -> TrialPool:
        if self._pool is None:
            self._pool = TrialPool(self.concurrency)
        return self._pool

    def run_concurrently(self, item: Any, agent: Any, user: Any) -> tuple[TrialResult, dict[str, str]]:
        """Start this item's trial (unless prefetched), top up the prefetch window, wait for it."""
        pool = self.pool
        self._submit(item, agent, user)
        key = _fixture_key(item)
        if key is not None:
            window = 2 * self.concurrency
            if is_xdist_worker(item.config):
                # the worker's own queue; what left it was stolen by another worker
                upcoming = list(pending_items(item.session, item))
                pool.forget_others({item.nodeid} | {nxt.nodeid for nxt in upcoming})
            else:  # the rest of the session, of which only the next few matter
                upcoming = list(islice(pending_items(item.session, item), 8 * window + 64))
            for nxt in upcoming:
                if window <= 0:
                    break
                if getattr(nxt, "is_sandtable_trial", False) and _fixture_key(nxt) == key:
                    window -= 1
                    self._submit(nxt, agent, user)
        return pool.wait(item.nodeid)

    def _submit(self, item: Any, agent: Any, user: Any) -> None:
        if self.pool.submitted(item.nodeid):
            return
        loc = f"{item.location[0]}:{(item.location[1] or 0) + 1}"
        self.pool.submit(
            item.nodeid, lambda: self._trial(item.domain, item.task, item.trial, agent, user, loc)
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None


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


def _overriding_fixture(item: Any, name: str) -> Any:
    """The fixture definition a conftest.py gives `name` for this item, or None when the
    plugin's own default serves it."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get(name) if info is not None else None
    if not defs or getattr(defs[-1].func, "__module__", "") == "pytest_sandtable.plugin":
        return None
    return defs[-1]
