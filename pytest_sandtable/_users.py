"""Simulated users. The scripted user needs no model: it says the task's opening,
then one `script` line per agent reply, in order, then ends."""

from __future__ import annotations

from ._agent_api import UserCallable, UserReply, UserTurn
from ._options import AdapterOptions


class ScriptError(Exception):
    """The task gives the scripted user nothing to say (a domain bug: the trial errors)."""


class ScriptedUser:
    """Deterministic: does not react to what the agent says."""

    name = "scripted"

    def __call__(self, turn: UserTurn) -> UserReply:
        lines = ([turn.opening] if turn.opening else []) + list(turn.script)
        if not lines:
            raise ScriptError(f"task {turn.trial.task_id!r} has no user.opening and no user.script to say")
        said = sum(1 for m in turn.messages if m["role"] == "user")
        if turn.handed_off:
            return UserReply("", "handed_off")
        if said < len(lines):
            return UserReply(lines[said])
        return UserReply("", "script_end")


def make_user(spec: str, options: AdapterOptions | None = None) -> tuple[UserCallable, str]:
    """The simulated user named by `--sandtable-user`."""
    spec = (spec or "scripted").strip()
    if spec == "scripted":
        return ScriptedUser(), "scripted"
    raise ValueError(f"unknown simulated user {spec!r}; expected 'scripted'")
