"""Serving one trial's world: a port of its own on 127.0.0.1, started before the
trial's first turn and shut down at its end, whatever happens.

Every server of the process runs on one event loop in a daemon thread of its own
(``sandtable-serve``), never on the trial's loop. So the agent may reach the server
from anywhere: async code awaiting on the trial's loop, a thread, or code that
blocks the loop with a synchronous HTTP client (which would deadlock a server on
that loop). The trial's loop only awaits the start and the stop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ..engine.api import ToolResult, ToolSpec
from .app import build_app  # starlette loads with this package, not in a trial's first second

HOST = "127.0.0.1"
_T = TypeVar("_T")


class ServeError(Exception):
    """The trial's world could not be served (its port is in use, the server failed to start)."""


class _ServeLoop:
    """The event loop every served trial of this process runs on, in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.finishing: set[asyncio.Task[None]] = set()  # shutdowns still closing connections
        threading.Thread(target=self.loop.run_forever, name="sandtable-serve", daemon=True).start()

    async def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """``coro`` run on the serve loop, awaited from the caller's loop. Cancelling the
        caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_LOOP: _ServeLoop | None = None
_LOOP_LOCK = threading.Lock()


def _serve_loop() -> _ServeLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = _ServeLoop()
        return _LOOP


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1: ``port`` 0 takes a free port from the system
    (so trials in flight and xdist workers never clash); a given port in use is a
    ServeError naming it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # a port the previous trial just let go of is free again at once (its closed connections wait in TIME_WAIT)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ServeError(f"could not serve the world on {HOST}:{port}: the port is in use "
                             "(another process holds it)") from None
        raise ServeError(f"could not serve the world on {HOST}:{port}: {e.strerror or e}") from None
    sock.setblocking(False)
    return sock


class _Served:
    """One trial's uvicorn server, started and stopped by hand on the serve loop (not
    ``uvicorn.Server.serve``, whose main loop would poll for the stop every 0.1 s)."""

    def __init__(self, app: Any, sock: socket.socket, owner: _ServeLoop) -> None:
        import uvicorn

        self.sock = sock
        self.owner = owner
        # log_config=None: uvicorn must not reconfigure the process's logging (pytest's capture)
        config = uvicorn.Config(app, lifespan="on", log_config=None, log_level="warning", access_log=False,
                                timeout_graceful_shutdown=2, ws="none")
        config.load()
        self.server = uvicorn.Server(config)
        self.server.lifespan = config.lifespan_class(config)

    async def start(self) -> None:
        try:
            await self.server.startup(sockets=[self.sock])
        except BaseException as e:  # uvicorn calls sys.exit() when the app's startup fails
            self.sock.close()
            raise ServeError(f"the server of the world did not start: {type(e).__name__}: {e}") from None
        if not self.server.started:
            self.sock.close()
            raise ServeError("the server of the world did not start")

    async def stop(self) -> None:
        """Stop listening at once (the port is free when this returns); the rest of the
        shutdown (open connections, MCP sessions) goes on in the background, and every
        call that still arrives meanwhile finds the trial closed (410)."""
        for s in getattr(self.server, "servers", []):
            s.close()
        self.sock.close()
        task = asyncio.get_running_loop().create_task(self._finish())
        self.owner.finishing.add(task)
        task.add_done_callback(self.owner.finishing.discard)

    async def _finish(self) -> None:
        try:
            await self.server.shutdown()
        except BaseException:  # nothing waits for this: a failure closing a connection is nobody's
            pass


@asynccontextmanager
async def serve_world(
    tools: list[ToolSpec], call: Callable[[str, Any], ToolResult], title: str, port: int = 0
) -> AsyncIterator[tuple[str, str]]:
    """Serve ``tools`` through ``call`` while the block runs; yields the REST base
    (``http://127.0.0.1:<port>/t/<token>/tools``) and the MCP endpoint (``.../mcp``),
    ``<token>`` new for each trial. Raises ServeError when the world cannot be served."""
    owner = _serve_loop()
    sock = bind(port)
    bound = sock.getsockname()[1]
    # the trial's URLs hold a secret of their own: another process on the machine
    # cannot guess its way to the trial's tools (it can still read them off the agent)
    prefix = f"/t/{secrets.token_urlsafe(16)}"
    base = f"http://{HOST}:{bound}{prefix}"
    try:
        served = _Served(build_app(tools, call, title, base, prefix=prefix, port=bound), sock, owner)
    except BaseException:
        sock.close()
        raise
    try:
        await owner.run(served.start())
    except BaseException:  # a start cancelled half-way (the run stopping) must leave no server behind
        owner.submit(served.stop())
        raise
    try:
        yield f"{base}/tools", f"{base}/mcp"
    finally:
        # on the serve loop whatever happens here: even when this trial is being cancelled
        stopping = owner.submit(served.stop())
        await asyncio.shield(asyncio.wrap_future(stopping))
