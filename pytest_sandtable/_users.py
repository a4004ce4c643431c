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


USER_FORMS = "'scripted', 'claude:<model>', 'openai:<model>' or 'module:attr'"


def make_user(spec: str, options: AdapterOptions | None = None) -> tuple[UserCallable, str]:
    """The simulated user named by `--sandtable-user`, and its label:

    - ``scripted``: says the task's opening and script lines (no model);
    - ``claude:<model>``: played by Claude (key from ``$ANTHROPIC_API_KEY``);
    - ``openai:<model>``: played by a model behind an OpenAI-compatible endpoint (base URL
      from ``options.user_base_url``, else ``$OPENAI_BASE_URL``; key from ``$OPENAI_API_KEY``);
    - ``module:attr``: your own user, a callable or a class instantiated without arguments.

    Raises ValueError for anything else, or when a model user lacks its key.
    """
    spec = (spec or "scripted").strip()
    options = options or AdapterOptions()
    if spec == "scripted":
        return ScriptedUser(), "scripted"
    if spec.startswith(("claude:", "openai:")):
        kind, _, model = spec.partition(":")
        model = model.strip()
        if not model:
            example = "claude-haiku-4-5" if kind == "claude" else "gpt-4.1-mini"
            raise ValueError(f"{spec!r} names no model; expected {kind}:<model>, e.g. {kind}:{example}")
        from ._agents import import_adapter

        import_adapter("claude" if kind == "claude" else "openai", spec)  # is its client library installed?
        users = import_adapter("model_user", spec)
        user = (users.ClaudeUser if kind == "claude" else users.OpenAIUser)(model, options)
        return user, str(user.name)
    if ":" in spec:
        from ._agents import load_callable

        return load_callable(spec, "simulated user"), spec
    raise ValueError(f"unknown simulated user {spec!r}; expected {USER_FORMS}")
