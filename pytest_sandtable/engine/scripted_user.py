"""The scripted simulated user. It needs no model: it says the task's opening,
then one `script` line per agent reply, in order, then ends."""

from __future__ import annotations

from .api import UserReply, UserTurn


class ScriptError(Exception):
    """The task gives the scripted user nothing to say (a domain bug: the trial errors)."""


class ScriptedUser:
    """Deterministic: does not react to what the agent says."""

    name = "scripted"
    inline = True  # sync, never blocks: runs on the trial's loop (see engine.api.runs_inline)

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
