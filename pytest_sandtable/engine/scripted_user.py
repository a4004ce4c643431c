"""The scripted simulated user. It needs no model: it says the task's opening, then
one line per agent reply, chosen by the rules below (docs/spec.md, "A scripted user
that reacts"), then ends.

After each agent reply it says, in this order of preference:

1. the first line with ``when`` (in file order) not said yet whose conditions all
   hold for the agent's last reply and the tools that have succeeded so far;
2. the next plain line (one without ``when``), in file order;
3. the task's ``say_unknown``, at most :data:`MAX_UNKNOWN_IN_A_ROW` times in a row;
4. nothing: it ends the conversation (``script_end``).

A line with ``end: true`` ends the conversation after it is said. The first message
(when the task has no opening) is the first plain line: there is no reply to react
to yet. A script of plain lines only is said in order, as it always was.

Dual control (issue 22 A): a line may ``call`` a user tool in place of saying something.
A call line is picked as any line is; the user calls the tool (``turn.call``), keeps its
result, and picks again, at most :data:`MAX_USER_CALLS_PER_TURN` call lines in one turn,
until it picks a line that says something (or ``say_unknown``, or the end). The
conditions ``result_includes`` / ``result_matches`` read the JSON text of the user's last
tool result, ``user_called`` / ``user_not_called`` the user tools that succeeded;
``called`` / ``not_called`` are about the agent's calls only.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..domain.model import MAX_USER_CALLS_PER_TURN, ScriptLine
from .api import UserReply, UserTurn

# How often in a row the user says `say_unknown` before it gives up and ends: an agent
# that twice said nothing the script knows an answer to is not moving the
# conversation anywhere, and running on to max_turns would only pad the transcript.
MAX_UNKNOWN_IN_A_ROW = 2


class ScriptError(Exception):
    """The task gives the scripted user nothing to say (a domain bug: the trial errors)."""


def holds(when: Mapping[str, Any], reply: str, succeeded: Collection[str],
          user_succeeded: Collection[str] = (), result: str = "") -> bool:
    """Whether every condition of a script line's ``when`` holds: ``reply`` is the
    agent's last reply, ``succeeded`` the tools that have succeeded so far; for dual
    control, ``user_succeeded`` the user tools that have and ``result`` the JSON text of
    the user's last tool result."""
    text = reply.lower()
    for name, want in when.items():
        if name == "reply_includes" and not all(str(w).lower() in text for w in _listed(want)):
            return False
        if name == "reply_matches" and re.search(str(want), reply, re.IGNORECASE) is None:
            return False
        if name == "called" and not all(tool in succeeded for tool in _listed(want)):
            return False
        if name == "not_called" and any(tool in succeeded for tool in _listed(want)):
            return False
        # --- dual control: the user's own calls
        if name == "result_includes" and not all(str(w).lower() in result.lower() for w in _listed(want)):
            return False
        if name == "result_matches" and re.search(str(want), result, re.IGNORECASE) is None:
            return False
        if name == "user_called" and not all(tool in user_succeeded for tool in _listed(want)):
            return False
        if name == "user_not_called" and any(tool in user_succeeded for tool in _listed(want)):
            return False
    return True


def _listed(value: Any) -> list[Any]:
    """A condition's texts or tools: the loader makes a list of one, a hand-built line may not."""
    return value if isinstance(value, list) else [value]


def _has_spoken(messages: Sequence[Mapping[str, str]]) -> bool:
    """Whether the user has said anything yet (its first message is then no reaction)."""
    for m in messages:
        if m["role"] == "user":
            return True
    return False


def _lines(turn: UserTurn) -> Sequence[ScriptLine]:
    """The task's lines; a turn built by hand with only ``script`` texts has plain ones."""
    return turn.lines or [ScriptLine(say=s) for s in turn.script]


class ScriptedUser:
    """Deterministic: the same conversation always gets the same lines."""

    name = "scripted"
    inline = True  # sync, never blocks: runs on the trial's loop (see engine.api.runs_inline)

    def __call__(self, turn: UserTurn) -> UserReply:
        return self.next_line(turn)[1]

    def next_line(self, turn: UserTurn) -> tuple[int | None, UserReply]:
        """The reply, and the index in the script of the line it says (None for the
        opening, ``say_unknown`` or the end). Remembers what it said in ``turn.state``.
        Call lines picked on the way are called (dual control), at most
        :data:`MAX_USER_CALLS_PER_TURN` in the turn."""
        calls = 0
        while True:
            index, reply = self._pick(turn)
            line = turn.lines[index] if index is not None and turn.lines else None
            if line is None or line.call is None:
                return index, reply
            if calls >= MAX_USER_CALLS_PER_TURN:  # that line waits for the user's next turn
                turn.state["script_said"].discard(index)
                return None, UserReply(turn.say_unknown) if turn.say_unknown else UserReply("", "script_end")
            calls += 1
            result = turn.call(line.call, dict(line.args or {}))
            turn.state["script_result"] = result.to_json()
            if result.ok:  # kept here too: a turn's `calls` may be a copy made before this call
                turn.state.setdefault("script_user_ok", set()).add(line.call)
            if line.end:
                return None, UserReply("", "script_end")

    def _pick(self, turn: UserTurn) -> tuple[int | None, UserReply]:
        """The next line to say or call, as the module docstring orders them."""
        lines = _lines(turn)
        if not turn.opening and not lines:
            raise ScriptError(f"task {turn.trial.task_id!r} has no user.opening and no user.script to say")
        if turn.handed_off:
            return None, UserReply("", "handed_off")
        said: set[int] | None = turn.state.get("script_said")
        if said is None:
            said = turn.state["script_said"] = set()
        if not _has_spoken(turn.messages):
            if turn.opening:
                return None, UserReply(turn.opening)
            first = self._next_plain(lines, said)
            if first is None:
                raise ScriptError(
                    f"task {turn.trial.task_id!r} has no user.opening and no plain script line to start with"
                )
            return self._say(turn, lines, said, first)
        index = self._reaction(turn, lines, said)
        if index is None:
            index = self._next_plain(lines, said)
        if index is not None:
            return self._say(turn, lines, said, index)
        unknown_run = int(turn.state.get("script_unknown_run", 0))
        if turn.say_unknown and unknown_run < MAX_UNKNOWN_IN_A_ROW:
            turn.state["script_unknown_run"] = unknown_run + 1
            return None, UserReply(turn.say_unknown)
        return None, UserReply("", "script_end")

    @staticmethod
    def _reaction(turn: UserTurn, lines: Sequence[ScriptLine], said: set[int]) -> int | None:
        """The first line with ``when``, not said yet, whose conditions hold now. The reply
        and the calls are read only once such a line waits (a script of plain lines has none)."""
        reply: str | None = None
        succeeded: set[str] = set()
        user_succeeded: set[str] = set()
        for i, line in enumerate(lines):
            when = line.when
            if when is None or i in said:
                continue
            if reply is None:
                reply = next((m["content"] for m in reversed(turn.messages) if m["role"] == "assistant"), "")
                succeeded = {str(c.get("tool")) for c in turn.calls if c.get("ok") and "by" not in c}
                # the user tools this user called that succeeded (dual control: next_line keeps them)
                user_succeeded = turn.state.get("script_user_ok", user_succeeded)
            if holds(when, reply, succeeded, user_succeeded, str(turn.state.get("script_result", ""))):
                return i
        return None

    @staticmethod
    def _next_plain(lines: Sequence[ScriptLine], said: set[int]) -> int | None:
        for i, line in enumerate(lines):
            if line.when is None and i not in said:
                return i
        return None

    @staticmethod
    def _say(turn: UserTurn, lines: Sequence[ScriptLine], said: set[int], index: int) -> tuple[int, UserReply]:
        said.add(index)
        turn.state["script_unknown_run"] = 0
        line = lines[index]
        return index, UserReply(line.say, "script_end" if line.end else None)
