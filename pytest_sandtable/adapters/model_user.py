"""Simulated users played by a model: ``claude:<model>`` and ``openai:<model>``.

The user model gets the task's persona and hidden instructions, never the policy or
the tools. It is told to speak as the customer only, to say it doesn't know rather
than invent facts, and to end the conversation with an explicit signal on a line of
its own, one per reason:

- ``###GOAL_MET###``: what it called for is done;
- ``###IMPOSSIBLE###``: the agent made clear it cannot be done;
- ``###HANDED_OFF###``: it was transferred to a human.

:func:`parse_reply` turns that into ``UserReply(text_without_the_signal, stop)``; a
closing message with text still gets one last agent turn (the trial loop does that).

Roles are flipped for the user model: in ``UserTurn.messages`` the role ``user`` is the
simulated user itself and ``assistant`` the agent under test, so the agent's lines are
sent as ``user`` and the simulated user's own earlier lines as ``assistant``.

Dual control (issue 22 A): in a domain with ``user_tools`` the user model gets them as
tools (``UserTurn.tools``). It acts one call at a time, as τ²-bench's users do: each
call runs through ``UserTurn.call`` and its result goes back to the model; a second
call in the same response is not run and is answered :data:`ONE_AT_A_TIME`. After
:data:`~pytest_sandtable.domain.model.MAX_USER_CALLS_PER_TURN` calls in a turn, further
calls are answered :data:`NO_MORE_ACTIONS` until the model writes its message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..domain.model import MAX_USER_CALLS_PER_TURN
from ..engine.api import UserError, UserReply, UserTurn
from .options import AdapterOptions

SIGNALS = {"GOAL_MET": "goal_met", "IMPOSSIBLE": "impossible", "HANDED_OFF": "handed_off"}
_SIGNAL_RE = re.compile(r"#{2,}\s*(GOAL[ _-]?MET|IMPOSSIBLE|HANDED[ _-]?OFF)\s*#{2,}", re.IGNORECASE)

START = "[You are now connected to the agent. Write your first message to them.]"
TRANSFERRED = ("[The agent has transferred your call to a human colleague. Write a short closing line, "
               "then end with ###HANDED_OFF###.]")
SILENT = "[The agent said nothing.]"
ONE_AT_A_TIME = "Not done: one action at a time. Make one tool call, see its result, then the next."
NO_MORE_ACTIONS = (f"Not done: at most {MAX_USER_CALLS_PER_TURN} actions before you answer. Write your "
                   "message to the agent now.")
# the model calls of one user turn: its actions, and a few answers of NO_MORE_ACTIONS
_MAX_USER_STEPS = MAX_USER_CALLS_PER_TURN + 3


def user_system_prompt(turn: UserTurn) -> str:
    """The user model's instructions: persona, hidden goal, how to behave and stop."""
    parts = [
        "You are role-playing a customer who contacts a company's support agent. This is a rehearsal "
        "that tests the agent; play the customer faithfully and never mention that it is a rehearsal.",
        f"Who you are:\n{turn.persona.strip() or '(a customer)'}",
        f"Your situation and goal (private: share details only when they are relevant or asked for):\n"
        f"{turn.instructions.strip() or '(no further instructions)'}",
        "How to behave:\n"
        "- Write only your own next message as the customer: plain conversational text, no role labels, "
        "no stage directions, never the agent's lines.\n"
        "- Use only the facts given above. If the agent asks for something you were not given, say you "
        "don't know or don't have it. Never invent names, numbers, dates, ids or other facts.\n"
        "- Give information a piece at a time, as a real caller would, and stick to your goal.\n"
        "- Do not accept something that does not meet your goal just to end the conversation.",
        "How to end the conversation: when you are done, write your last message and put one of these "
        "signals alone on its final line:\n"
        "###GOAL_MET### - the agent did what you needed.\n"
        "###IMPOSSIBLE### - the agent made clear that what you need cannot be done.\n"
        "###HANDED_OFF### - the agent transferred you to a human colleague.\n"
        "Do not use these signals otherwise.",
    ]
    if turn.tools:  # dual control: the user's own tools, and what it did with them in earlier turns
        parts.append(_tools_part(turn))
    return "\n\n".join(parts)


def _tools_part(turn: UserTurn) -> str:
    """How the user acts on its own device, and the actions it took so far (the model
    gets only the text of earlier turns)."""
    text = ("Your own device: the tools you are given act on it (only you can use them; the agent cannot). "
            "When the agent asks you to check or change something on it, do it with a tool, one action at a "
            "time, then tell the agent what you see. Do not act unless it helps your goal.")
    done = [c for c in turn.calls if c.get("by") == "user"]
    if done:
        lines = [f"- {c['tool']}({json.dumps(c['args'], ensure_ascii=False)}) -> "
                 f"{json.dumps(c['result'] if c['ok'] else c['error'], ensure_ascii=False)}" for c in done[-20:]]
        text += "\nWhat you did on it so far, oldest first:\n" + "\n".join(lines)
    return text


def user_messages(turn: UserTurn) -> list[dict[str, str]]:
    """The conversation as the user model sees it: roles flipped, a first line that
    starts the call, consecutive lines of one side merged, the transfer announced."""
    out: list[dict[str, str]] = [{"role": "user", "content": START}]
    for m in turn.messages:
        role = "assistant" if m["role"] == "user" else "user"
        text = m["content"] if m["content"].strip() else (SILENT if role == "user" else "...")
        if out[-1]["role"] == role:
            out[-1] = {"role": role, "content": out[-1]["content"] + "\n\n" + text}
        else:
            out.append({"role": role, "content": text})
    if turn.handed_off:
        if out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + TRANSFERRED}
        else:
            out.append({"role": "user", "content": TRANSFERRED})
    return out


def parse_reply(text: str) -> UserReply:
    """The user model's message: the stop signal (the last one given) and the text without it."""
    stop = None
    for m in _SIGNAL_RE.finditer(text):
        stop = SIGNALS[re.sub(r"[ _-]", "_", m.group(1).upper())]
    clean = _SIGNAL_RE.sub("", text)
    clean = "\n".join(line.rstrip() for line in clean.strip().splitlines()).strip()
    return UserReply(clean, stop)


class _ModelUser:
    def __init__(self, model: str, options: AdapterOptions) -> None:
        self.model = model
        self.options = options

    def _finish(self, text: str, label: str, cut: bool = False) -> UserReply:
        reply = parse_reply(text)
        if not reply.text and reply.stop is None:
            if cut:  # e.g. a reasoning model that spent the whole limit thinking
                raise UserError(f"{label}: the response hit max_tokens ({self.options.max_tokens}) before any text")
            raise UserError(f"{label}: the model returned an empty message")
        return reply


class ClaudeUser(_ModelUser):
    """A simulated user played by Claude (``claude:<model>``); key from ``$ANTHROPIC_API_KEY``.

    The Messages API takes no seed, so runs with a Claude user vary with the model's sampling.
    """

    def __init__(
        self, model: str, options: AdapterOptions, *, api_key: str | None = None, base_url: str | None = None
    ) -> None:
        from .claude import ClaudeMessages

        super().__init__(model, options)
        self.name = f"claude:{model}"
        self._api = ClaudeMessages(model, options, role="user", error=UserError, api_key=api_key, base_url=base_url)

    def __repr__(self) -> str:
        return f"ClaudeUser(model={self.model!r})"

    async def __call__(self, turn: UserTurn) -> UserReply:
        messages: list[dict[str, Any]] = list(user_messages(turn))
        params: dict[str, Any] = {"system": user_system_prompt(turn)}
        if turn.tools:  # dual control: the user's own tools, one call at a time
            params["tools"] = [t.anthropic() for t in turn.tools]
        acted = 0
        for _ in range(_MAX_USER_STEPS):
            msg = await self._api.create(turn.usage, messages=messages, **params)
            uses = [b for b in msg.content if b.type == "tool_use"] if turn.tools else []
            if not uses:
                break
            messages.append({"role": "assistant",
                             "content": [b.to_dict(mode="json", warnings=False) for b in msg.content]})
            results: list[dict[str, Any]] = []
            for i, b in enumerate(uses):
                content, ok = _act(turn, b.name, b.input, i, acted)
                acted += i == 0 and acted < MAX_USER_CALLS_PER_TURN
                results.append({"type": "tool_result", "tool_use_id": b.id, "content": content,
                                **({} if ok else {"is_error": True})})
            messages.append({"role": "user", "content": results})
        else:
            raise UserError(f"{self._api.label}: no message after {_MAX_USER_STEPS} model calls in one turn")
        text = "".join(b.text for b in msg.content if b.type == "text")
        if msg.stop_reason == "refusal" and not text.strip():
            raise UserError(f"{self._api.label}: the model refused to play the user (stop_reason 'refusal')")
        return self._finish(text, self._api.label, msg.stop_reason == "max_tokens")


class OpenAIUser(_ModelUser):
    """A simulated user played by a model behind an OpenAI-compatible endpoint
    (``openai:<model>``): base URL from ``options.user_base_url``, else ``$OPENAI_BASE_URL``,
    else the public API; key from ``$OPENAI_API_KEY``. The trial's seed is sent as ``seed``.
    """

    def __init__(self, model: str, options: AdapterOptions, *, api_key: str | None = None) -> None:
        from .openai import OpenAIChat

        super().__init__(model, options)
        self.name = f"openai:{model}"
        self._api = OpenAIChat(model, options, role="user", error=UserError,
                               base_url=options.user_base_url, api_key=api_key)

    def __repr__(self) -> str:
        return f"OpenAIUser(model={self.model!r}, base_url={self._api.base_url!r})"

    async def __call__(self, turn: UserTurn) -> UserReply:
        from .openai import message_text, tool_arguments, tool_calls

        messages: list[dict[str, Any]] = [{"role": "system", "content": user_system_prompt(turn)}]
        messages.extend(user_messages(turn))
        extra: dict[str, Any] = {}
        if turn.tools:  # dual control: the user's own tools, one call at a time
            extra["tools"] = [t.openai() for t in turn.tools]
        ids: dict[str, Any] = {}
        acted = 0
        for _ in range(_MAX_USER_STEPS):
            choice = await self._api.complete(turn.usage, self._api.payload(messages, turn.trial.seed, **extra))
            calls = tool_calls(choice["message"], ids) if turn.tools else []
            if not calls:
                break
            messages.append({"role": "assistant", "content": message_text(choice["message"]) or None,
                             "tool_calls": calls})
            for i, c in enumerate(calls):
                content, _ = _act(turn, c["function"]["name"], tool_arguments(c["function"]["arguments"]), i, acted)
                acted += i == 0 and acted < MAX_USER_CALLS_PER_TURN
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": content})
        else:
            raise UserError(f"{self._api.label}: no message after {_MAX_USER_STEPS} model calls in one turn")
        return self._finish(message_text(choice["message"]), self._api.label, choice.get("finish_reason") == "length")


def _act(turn: UserTurn, name: str, args: Any, i: int, acted: int) -> tuple[str, bool]:
    """The answer to the ``i``-th tool call of one model response, ``acted`` calls into the
    turn: the first is run (unless the turn's calls are used up); a second one is not."""
    if i > 0:
        return ONE_AT_A_TIME, False
    if acted >= MAX_USER_CALLS_PER_TURN:
        return NO_MORE_ACTIONS, False
    r = turn.call(name, args)
    return r.to_json(), r.ok
