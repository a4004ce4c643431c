"""The built-in reference agent: replays a task's `reference` path, needs no model.

Used by ``--sandtable-agent reference`` (the default), by lint and by the
benchmarks. It runs inline on the trial's event loop (see :attr:`inline`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..domain.model import RefStep, Task
from .api import Turn


class ReferenceAgent:
    """Replays the task's `reference`: the calls before a `say` happen in the same
    turn and the `say` is that turn's reply; once it is used up it says nothing more.

    The trial runner binds it to the task being run (:meth:`for_task`), so the
    agent interface stays what any other agent gets: no hidden task data in `Turn`.
    """

    name = "reference"
    inline = True  # sync, never blocks: runs on the trial's loop (see engine.api.runs_inline)

    def __init__(self, steps: Sequence[RefStep] = ()) -> None:
        self.steps = list(steps)

    def for_task(self, task: Task) -> ReferenceAgent:
        return ReferenceAgent(task.reference)

    def __call__(self, turn: Turn) -> str:
        state = turn.state
        steps = self.steps
        i = state.get("_reference_i", 0)
        reply = ""
        # the turn's own caller, which Turn.call_tool only passes on: one frame fewer a call
        call_tool = turn._call
        while i < len(steps):
            step = steps[i]
            i += 1
            if step.call is not None:
                call_tool(step.call, dict(step.args))
            else:
                reply = step.say or ""
                break
        state["_reference_i"] = i
        return reply
