"""Which calls of a task's reference replay wrote (docs/mutate.md, "The operators and their ids").

A tool with ops is a write when it has a ``create``, ``update`` or ``delete`` op; the
format has no such marker for a ``handler:`` tool, so a handler call counts as a write
only when it changed the world in the reference's own replay: ``get_user_details``, whose
handler reads, is a read. :func:`calls_that_wrote` replays the reference trial's call log
(the agent's calls and, with dual control, the user's) on a fresh world, as the trial
started (``given``, ``user_given``, setup and history), and says which calls changed it.
The domain's ``sync`` hook is not run: its writes are the network's, not the call's.
"""

from __future__ import annotations

from typing import Any

from ..domain.model import Domain, Task
from ..engine.dual import apply_user_given, user_handlers
from ..engine.handlers import HandlerState, run_tool
from ..engine.results import TrialResult
from ..engine.start import run_start
from ..engine.tools import ArgError, coerce_args
from ..engine.trial import apply_given
from ..engine.world import World, seed_for

__all__ = ["calls_that_wrote"]


def calls_that_wrote(domain: Domain, task: Task, replay: TrialResult) -> set[int]:
    """The ``index`` of each call in ``replay.calls`` (the agent's, or ``by: user``) that
    changed the world when replayed in order; a call that fails, or raises, changed nothing."""
    world = World(seed_for(domain))
    try:
        apply_given(world, task)
        apply_user_given(world, task)
    except Exception:  # the trial ran, so this does not happen; should it, nothing is known to write
        return set()
    agent = HandlerState(domain, task, replay.seed)
    user = user_handlers(agent)
    out: set[int] = set()
    try:
        if task.setup or task.history:
            run_start(domain, task, world, agent)
        for call in replay.calls:
            if _replayed_a_write(domain, call, world, agent, user):
                out.add(int(call["index"]))
    except Exception:  # a start or handler that fails outside its trial: what was seen so far stands
        pass
    finally:
        agent.close()
    return out


def _replayed_a_write(domain: Domain, call: dict[str, Any], world: World, agent: HandlerState,
                      user: HandlerState) -> bool:
    by = call.get("by")
    if by not in (None, "user"):  # setup, history (run above) and sync
        return False
    tool = (domain.user_tools if by == "user" else domain.tools).get(str(call.get("tool")))
    if tool is None or not isinstance(call.get("args"), dict):
        return False
    try:
        args = coerce_args(tool, dict(call["args"]))
    except ArgError:
        return False
    sp = world.savepoint()
    try:
        run_tool(tool, args, world, user if by == "user" else agent, int(call["index"]))
    except Exception:
        world.rollback(sp)
        return False
    return any(world.diff(sp).values())
