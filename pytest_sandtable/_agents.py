"""Agents that need no model, and resolving `--sandtable-agent` to an agent."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from typing import Any

from ._agent_api import AgentCallable, Turn
from ._model import RefStep, Task
from ._options import AdapterOptions


class ReferenceAgent:
    """Replays the task's `reference`: the calls before a `say` happen in the same
    turn and the `say` is that turn's reply; once it is used up it says nothing more.

    The trial runner binds it to the task being run (:meth:`for_task`), so the
    agent interface stays what any other agent gets: no hidden task data in `Turn`.
    """

    name = "reference"

    def __init__(self, steps: Sequence[RefStep] = ()) -> None:
        self.steps = list(steps)

    def for_task(self, task: Task) -> ReferenceAgent:
        return ReferenceAgent(task.reference)

    def __call__(self, turn: Turn) -> str:
        i = turn.state.get("_reference_i", 0)
        reply = ""
        while i < len(self.steps):
            step = self.steps[i]
            i += 1
            if step.call is not None:
                turn.call_tool(step.call, dict(step.args))
            else:
                reply = step.say or ""
                break
        turn.state["_reference_i"] = i
        return reply


def agent_label(agent: Any) -> str:
    """A readable name for an agent object."""
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name:
        return name
    target = agent if inspect.isfunction(agent) or inspect.isclass(agent) else type(agent)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', repr(agent))}"


def load_object(spec: str) -> Any:
    """Import `module:attr` (attr may be dotted)."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"expected module:attr, got {spec!r}")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"cannot import module {mod_name!r} for agent {spec!r}: {e}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"module {mod_name!r} has no attribute {attr!r} (agent {spec!r})") from None
    return obj


def make_agent(spec: str, options: AdapterOptions | None = None) -> tuple[AgentCallable, str]:
    """The agent named by `--sandtable-agent`: `reference` or `module:attr`."""
    spec = (spec or "reference").strip()
    if spec == "reference":
        return ReferenceAgent(), "reference"
    if ":" in spec and not spec.startswith(("http://", "https://")):
        obj = load_object(spec)
        if inspect.isclass(obj):
            obj = obj()
        if not callable(obj):
            raise ValueError(f"agent {spec!r} is not callable")
        return obj, spec
    raise ValueError(f"unknown agent {spec!r}; expected 'reference' or 'module:attr'")
