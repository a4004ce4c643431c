"""Where a trial starts when its task says so (issue 22, part B; docs/spec.md, "Setup",
"History"): the task's ``setup`` steps, then the agent's calls of its ``history``, run on
the trial's world before the first message.

A setup ``call`` runs its tool the way the engine runs any call with valid arguments
(:func:`~pytest_sandtable.engine.handlers.run_tool`: the tool's checks, then its ops or its
handler), without the rules, faults or events, which are about the agent under test; it is
logged with ``"by": "setup"``. A setup ``handler`` is called ``fn(args, world, ctx)`` with
a writable handle, as a tool's handler is. A step that fails (a tool error, a handler that
raises) is the domain's fault: :class:`StartFailed`, and the trial is errored.

A history message of the agent's runs its ``calls`` first (logged ``"by": "history"``;
an error result is part of the history, as it would have been in the conversation), then
its text is said. The messages go to the transcript (turn 0) and to the conversation the
agent and the simulated user are given; the calls are written into the agent's message
there as text (``[called get_line({"line": "L-1"}) -> {...}]``), since a message of the
conversation is text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..domain.handlers import HandlerImportError, handler_folder, resolve_handler
from ..domain.model import Domain, Task
from ..domain.wording import clip
from .api import ToolResult
from .handlers import (
    DomainHook,
    HandlerBug,
    HandlerContext,
    HandlerState,
    ToolError,
    WorldHandle,
    call_bounded,
    run_tool,
)
from .invoke import exception_text
from .tools import ArgError, coerce_args
from .world import World, copy_row

__all__ = ["StartFailed", "run_start"]

# the most characters of a history call's result written into the agent's message
_RESULT_TEXT_MAX = 2000


class StartFailed(Exception):
    """A setup step failed, or a setup or history call met a bug of the domain: the trial
    is errored (the text says which step and why), never the agent's fault."""


def run_start(
    domain: Domain,
    task: Task,
    world: World,
    handlers: HandlerState,
    calls: list[dict[str, Any]] | None = None,
    transcript: list[dict[str, Any]] | None = None,
    conversation: list[dict[str, str]] | None = None,
    after_step: Callable[[], None] | None = None,
) -> None:
    """The task's setup, then its history, on ``world``; the calls logged to ``calls``, the
    messages (and the calls' places) to ``transcript`` and ``conversation``, when given.
    ``after_step``: the trial's sync step (dual control), run after every setup step and
    every call of the history, as after every step of the conversation (τ² syncs after
    each of its initialization actions)."""
    log: list[dict[str, Any]] = calls if calls is not None else []
    for n, step in enumerate(task.setup, 1):
        if step.handler is not None:
            _setup_handler(domain, n, step.handler, step.args, world, handlers, len(log))
        else:
            assert step.call is not None
            result = _call(domain, step.call, step.args, world, handlers, log, transcript, "setup", step.by == "user")
            if not result.ok:
                raise StartFailed(f"setup step {n} ({step.call}) failed: error {result.error}: {result.message}")
        _synced(after_step)
    for m in task.history:
        said = m.say
        if m.calls:
            notes = []
            for c in m.calls:
                assert c.call is not None
                result = _call(domain, c.call, c.args, world, handlers, log, transcript, "history")
                notes.append(_call_note(c.call, log[-1]["args"], result))
                _synced(after_step)
            said = "\n".join([*notes, m.say])
        if transcript is not None:
            transcript.append({"role": m.role, "text": m.say, "turn": 0})
        if conversation is not None:
            conversation.append({"role": "user" if m.role == "user" else "assistant", "content": said})



def _synced(after_step: Callable[[], None] | None) -> None:
    if after_step is not None:
        try:
            after_step()
        except Exception as e:  # the sync hook raised (dual.DualBug): the domain's fault
            raise StartFailed(str(e)) from None


def _call(
    domain: Domain,
    name: str,
    raw: dict[str, Any],
    world: World,
    handlers: HandlerState,
    log: list[dict[str, Any]],
    transcript: list[dict[str, Any]] | None,
    by: str,
    user: bool = False,
) -> ToolResult:
    """A setup or history call of an agent tool or (``user``: a ``by: user`` setup step) a
    user tool, whose handler sees the user's tables only; logged ``by`` (with ``side: user``)."""
    tool = (domain.user_tools if user else domain.tools)[name]  # the loader checked the name
    if user:
        from .dual import user_handlers

        handlers = user_handlers(handlers)
    index = len(log)
    try:
        args = coerce_args(tool, dict(raw))
    except ArgError as e:  # the loader checked the arguments too: kept as a call would keep it
        result = ToolResult(False, error=400, message=f"invalid arguments for {tool.name}: {e}")
        args = dict(raw)
    else:
        try:
            result = run_tool(tool, args, world, handlers, index)
        except HandlerBug as e:
            raise StartFailed(f"the domain failed running {tool.name} ({by}): {e}") from None
        except Exception as e:
            raise StartFailed(f"the domain failed running {tool.name} ({by}): {type(e).__name__}: {e}") from None
    log.append({
        "index": index,
        "turn": 0,
        "tool": name,
        "args": args,
        "ok": result.ok,
        "result": result.value if result.ok else None,
        "error": None if result.ok else {"code": result.error, "message": result.message},
        "violations": [],
        "by": by,
        **({"side": "user"} if user else {}),
    })
    if transcript is not None:
        transcript.append({"role": "tool", "call": index})
    return result


def _setup_handler(
    domain: Domain, n: int, spec: str, args: dict[str, Any], world: World, handlers: HandlerState, index: int
) -> None:
    try:
        fn = resolve_handler(spec, handler_folder(domain.path))
    except HandlerImportError as e:
        raise StartFailed(f"setup step {n} ({spec}) could not be loaded: {e}") from None
    try:
        # over both worlds with dual control (the design: a setup function prepares either side)
        handle = (WorldHandle(world, domain, handlers.over, tables={**domain.tables, **domain.user_tables})
                  if domain.user_tables else handlers.handle(world))
        # bounded by the trial's deadline, as a tool's handler is (issue 37 #8)
        call_bounded(handlers, DomainHook(f"setup step {n} ({spec})"), fn, copy_row(args), handle,
                     HandlerContext(handlers, spec, index))
    except HandlerBug as e:  # it did not return before the trial timeout
        raise StartFailed(str(e)) from None
    except ToolError as e:
        raise StartFailed(f"setup step {n} ({spec}) failed: error {e.status}: {e.message}") from None
    except Exception as e:
        raise StartFailed(f"setup step {n} ({spec}) raised {exception_text(e)}") from None


def _call_note(name: str, args: Any, result: ToolResult) -> str:
    """``[called get_line({"line": "L-1"}) -> {...}]``: a history call as the agent's message shows it."""
    shown_args = json.dumps(args, ensure_ascii=False, sort_keys=False, default=str)
    if result.ok:
        outcome = clip(json.dumps(result.value, ensure_ascii=False, default=str), _RESULT_TEXT_MAX)
    else:
        outcome = f"error {result.error}: {result.message}"
    return f"[called {name}({shown_args}) -> {outcome}]"
