"""Many trials in flight in one pytest process (`--sandtable-concurrency N`).

A model-backed trial spends nearly all its time waiting on the network, so a
process can keep N of them in flight. Trials run as tasks on an event loop in a
background thread, at most N at once; pytest still runs one item per trial, in
order, and each item waits for its own trial, so reports, `-x`/`--maxfail` and
Ctrl-C behave as usual. When an item starts, the trials of the items this
process will run next are started too (prefetch), provided their agent and user
come from the same session-scoped fixtures, whose values are already known.
Under pytest-xdist, "the items this process will run next" is the worker's own
queue, so `-n W` gives W x N trials in flight; the plugin asks xdist for work
stealing then. Another worker takes only items whose trials have not begun here
(:func:`guard_steals`, with pytest-xdist 3.6 and later); a trial started ahead whose
item was taken while it waited for a slot does not begin. With an older xdist a stolen
trial that had begun is cancelled (its model calls stop) but was started twice; only
the run that is reported counts, in results and usage.

Output: while trials overlap, what an agent prints (print(), and writes to
sys.stdout/sys.stderr while pytest waits for a trial) or logs is routed by a
context variable to its own trial and shown in that item's report, not in
whichever item happens to be running. (Log records also still reach pytest's
own log capture of the item running at that moment.)
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import contextvars
import io
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .config import RunConfig, is_xdist_worker

if TYPE_CHECKING:
    from ..engine.results import TrialResult

_TRIAL_OUTPUT: contextvars.ContextVar[dict[str, io.StringIO] | None] = contextvars.ContextVar(
    "sandtable_trial_output", default=None
)


class _Router(io.TextIOBase):
    """A stream that sends a trial's writes to that trial's buffer, the rest to `target`."""

    def __init__(self, target: TextIO, which: str) -> None:
        self.target = target
        self.which = which

    def write(self, s: str) -> int:
        buffers = _TRIAL_OUTPUT.get()
        if buffers is not None:
            return buffers[self.which].write(s)
        return self.target.write(s)

    def flush(self) -> None:
        if _TRIAL_OUTPUT.get() is None:
            self.target.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


class _LogRouter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter("%(levelname)-8s %(name)s:%(filename)s:%(lineno)d %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        buffers = _TRIAL_OUTPUT.get()
        if buffers is not None:
            buffers["log"].write(self.format(record) + "\n")


_print = builtins.print


def _routed_print(*args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None,
                  flush: bool = False) -> None:
    """print(), but a trial's output goes to its own buffer whatever sys.stdout is now
    (pytest swaps sys.stdout between phases, so a stream wrapper alone would miss some)."""
    buffers = _TRIAL_OUTPUT.get()
    if buffers is not None and (file is None or file is sys.stdout or file is sys.stderr):
        which = "stderr" if file is sys.stderr else "stdout"
        _print(*args, sep=sep, end=end, file=buffers[which])
        return
    _print(*args, sep=sep, end=end, file=file, flush=flush)


class TrialPool:
    def __init__(self, limit: int, keeps: Callable[[str], bool] | None = None) -> None:
        self.limit = limit
        # under xdist: whether this worker still runs an item (another may have taken it
        # since its trial was started ahead; it then does not begin here when a slot frees)
        self._keeps = keeps
        self.loop = asyncio.new_event_loop()
        self._sem = asyncio.Semaphore(limit)
        self._futures: dict[str, concurrent.futures.Future[tuple[TrialResult, dict[str, str]]]] = {}
        self._thread = threading.Thread(target=self._serve, name="sandtable-pool", daemon=True)
        self._thread.start()
        self._log = _LogRouter()
        logging.getLogger().addHandler(self._log)
        builtins.print = _routed_print

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submitted(self, key: str) -> bool:
        return key in self._futures

    def pending(self) -> int:
        """Trials submitted whose items have not collected them yet."""
        return len(self._futures)

    def submit(self, key: str, make_coro: Any) -> concurrent.futures.Future[tuple[TrialResult, dict[str, str]]]:
        """Start a trial (once per key); `make_coro()` builds its coroutine."""
        fut = self._futures.get(key)
        if fut is None:
            fut = asyncio.run_coroutine_threadsafe(self._guarded(key, make_coro), self.loop)
            self._futures[key] = fut
        return fut

    def forget_others(self, keep: set[str]) -> None:
        """Cancel the prefetched trials whose items this process will no longer run (under
        xdist's work stealing another worker took them), running ones too: their model
        calls would be paid for and never reported."""
        for key in [k for k in self._futures if k not in keep]:
            self._futures.pop(key).cancel()

    async def _guarded(self, key: str, make_coro: Any) -> tuple[TrialResult, dict[str, str]]:
        while True:
            async with self._sem:
                if self._keeps is None or self._keeps(key):
                    buffers = {"stdout": io.StringIO(), "stderr": io.StringIO(), "log": io.StringIO()}
                    token = _TRIAL_OUTPUT.set(buffers)
                    try:
                        result = await make_coro()
                    finally:
                        _TRIAL_OUTPUT.reset(token)
                    return result, {k: v.getvalue() for k, v in buffers.items()}
            # not in this worker's queue now: another worker took it while it waited for a slot
            # (this worker cancels it at its next item), or xdist is moving it from the queue to
            # the item it runs next; it waits without a slot and looks again
            await asyncio.sleep(0.05)

    def wait(self, key: str) -> tuple[TrialResult, dict[str, str]]:
        """Wait for a trial; while waiting, route trial output away from the current item."""
        fut = self._futures[key]
        with _routed():
            while True:
                try:
                    result = fut.result(timeout=1.0)
                    break
                except concurrent.futures.TimeoutError:
                    if not self._thread.is_alive():  # never wait on a loop that is gone
                        raise RuntimeError("the trial pool's event loop stopped; the trial cannot finish") from None
        del self._futures[key]
        return result

    def close(self) -> None:
        """Cancel what has not finished (-x, --maxfail, Ctrl-C) and stop the loop."""
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()
        logging.getLogger().removeHandler(self._log)
        if builtins.print is _routed_print:
            builtins.print = _print

        async def _drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(_drain(), self.loop).result(timeout=5)
            except Exception:  # a trial that ignores cancellation must not block exit
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class _routed:
    """Install the routers on sys.stdout/sys.stderr for the duration of a wait."""

    def __enter__(self) -> None:
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout = _Router(sys.stdout, "stdout")
        sys.stderr = _Router(sys.stderr, "stderr")

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self.saved


def worker_keeps(session: Any, begun: set[str] | None = None) -> Callable[[str], bool] | None:
    """Under xdist, whether this worker still runs the item of a node id: the item it runs,
    the next, or one in its queue (looked for from its front, where the items started ahead
    are). None outside xdist. With ``begun``, a node id it keeps is added to it, under the
    queue's lock, as its trial begins here (:func:`guard_steals` reads it under the same lock)."""
    interactor = _xdist_worker(session.config)
    if interactor is None or getattr(interactor, "torun", None) is None:
        return None
    items = session.items

    def keeps(nodeid: str) -> bool:
        with _queue_lock(interactor):
            i = getattr(interactor, "item_index", None)  # the item it runs
            kept = (isinstance(i, int) and 0 <= i < len(items) and items[i].nodeid == nodeid) or any(
                item.nodeid == nodeid for item in pending_items(session, None))
            if kept and begun is not None:
                begun.add(nodeid)
        return kept

    return keeps


def guard_steals(session: Any, begun: set[str]) -> None:
    """Under xdist, make this worker refuse a steal (give none of the items asked for, as
    xdist's worker does when one of them has left its queue) when the trial of one of them
    has begun here (``begun``, kept by :func:`worker_keeps`). The controller's scheduler
    guesses which trials run from the reports it has had, which lag: without this, a trial
    that began while its worker's reports were on their way could be taken and started
    twice. Only where xdist's queue has its lock (``TestQueue.lock``, pytest-xdist 3.6 and
    later); elsewhere steals stay as xdist makes them."""
    interactor = _xdist_worker(session.config)
    if interactor is not None:
        guard_interactor(interactor, session.items, begun)


def guard_interactor(interactor: Any, items: Sequence[Any], begun: set[str]) -> None:
    """:func:`guard_steals` on xdist's ``WorkerInteractor`` (``items``: the session's)."""
    torun: Any = getattr(interactor, "torun", None)
    if not hasattr(torun, "lock") or getattr(interactor, "_sandtable_guarded", False):
        return
    original = interactor.steal

    def steal(indices: Any) -> None:
        with torun.lock():  # a re-entrant lock: xdist's own steal takes it again
            if any(isinstance(i, int) and 0 <= i < len(items) and items[i].nodeid in begun for i in indices):
                interactor.sendevent("unscheduled", indices=[])
                return
            original(indices)

    interactor.steal = steal
    interactor._sandtable_guarded = True


def _queue_lock(interactor: Any) -> Any:
    torun: Any = getattr(interactor, "torun", None)
    return torun.lock() if hasattr(torun, "lock") else contextlib.nullcontext()


def pending_items(session: Any, current: Any) -> Iterator[Any]:
    """The items this process will run after `current`, in order."""
    items = session.items
    interactor = _xdist_worker(session.config)
    if interactor is not None:
        queue: list[Any] = []
        nxt = getattr(interactor, "nextitem_index", None)
        if isinstance(nxt, int):
            queue.append(nxt)
        torun = getattr(interactor, "torun", None)
        if torun is not None:
            with torun.lock() as q:
                queue.extend(i for i in q if isinstance(i, int))
        for i in queue:
            if 0 <= i < len(items):
                yield items[i]
        return
    index = _position(session, current)
    if index is not None:
        yield from items[index + 1 :]


_POSITIONS: dict[int, dict[str, int]] = {}


def _position(session: Any, item: Any) -> int | None:
    pos = _POSITIONS.get(id(session))
    if pos is None or len(pos) != len(session.items):
        pos = {it.nodeid: i for i, it in enumerate(session.items)}
        _POSITIONS.clear()
        _POSITIONS[id(session)] = pos
    return pos.get(item.nodeid)


def items_moved() -> None:
    """The session's items were reordered (``adaptive.Needs``): their positions are read anew."""
    _POSITIONS.clear()


def _xdist_worker(config: Any) -> Any:
    if not is_xdist_worker(config):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor":
            return plugin
    return None


def work_stealing(config: Any, log: Any) -> Any:
    """The scheduler for the xdist controller when trials are in flight
    (--sandtable-concurrency > 1); None leaves the choice to xdist.

    xdist's `load` scheduler starves trials in flight: it holds items back from a
    worker whose items take long (they wait on their trials) and has at least two
    pending, so a worker can only prefetch two. Work stealing hands each worker its
    share up front; idle workers steal. Other --dist modes are left alone."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped,unused-ignore]

    in_flight = RunConfig.of(config).concurrency

    class InFlightStealing(WorkStealingScheduling):  # type: ignore[misc,unused-ignore]
        """xdist's work stealing, except that a steal never takes the items whose trials
        are running on their worker. A worker runs its queue in order, its first N items'
        trials in flight (N = --sandtable-concurrency) and the next N started ahead and
        waiting for a slot. xdist steals the tail half of a queue: near the end of a run
        that is trials half done, which the victim cancels and the thief runs again from
        the start, a whole trial's time added to the run. Here only the items past the
        first N are taken; with none such, the idle worker stops, as xdist's does when
        nothing is left to steal."""

        steal_requested_from_node: Any  # xdist's: the worker asked to give items up, if any
        node2pending: Any  # xdist's: each worker's items sent and not reported done

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # a worker that refused a steal (a trial it was asked for had begun: guard_steals),
            # and how many items it then had: not asked again until that changes
            self.refused: dict[Any, int] = {}

        def remove_pending_tests_from_node(self, node: Any, indices: Any) -> None:
            if not indices:
                self.refused[node] = len(self.node2pending.get(node, ()))
            super().remove_pending_tests_from_node(node, indices)

        def check_schedule(self) -> None:
            up = {node: pending for node, pending in self.node2pending.items() if not node.shutting_down}
            idle = [node for node, pending in up.items() if len(pending) < MIN_PENDING]
            if not idle:
                return
            if self.pending:  # the items not sent yet, shared out among the idle workers
                for i, node in enumerate(idle):
                    self._send_tests(node, len(self.pending) // (len(idle) - i))
                idle = [node for node in idle if len(up[node]) < MIN_PENDING]
                if not idle:
                    return
            if self.steal_requested_from_node is not None:  # one steal at a time
                return
            victim = max(up, key=lambda node: len(up[node]))  # `up` holds the idle ones at least
            if self.refused.get(victim) == len(up[victim]):
                return  # it refused with these items: asked again once one is done
            spare = len(up[victim]) - max(MIN_PENDING, in_flight)
            if spare <= 0:
                for node in idle:  # nothing to take that is not running: the idle ones stop
                    node.shutdown()
                return
            victim.send_steal(up[victim][-((spare + 1) // 2):])
            self.steal_requested_from_node = victim

    return InFlightStealing(config, log)


MIN_PENDING = 2  # xdist's: a worker with fewer pending items is idle
