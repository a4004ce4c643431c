"""What an agent under test sees and returns.

An agent is any callable (or object with ``__call__``) taking a :class:`Turn`
and returning its reply as a string, or an awaitable of one. During the turn
it may call ``turn.call_tool(name, args)`` as often as it likes; each call is
checked against the domain's invariants, then run against the trial's world.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.model import ScriptLine

if TYPE_CHECKING:
    from datetime import datetime

AgentReply = str | None


class ModelRoutes(Protocol):
    """A trial's routes to the models through the run's model proxy
    (``--sandtable-model-proxy``, ``proxy.ProxiedTrial``): the base URL for a target kind
    (``openai``, ``anthropic``) and the environment variables the SDKs read."""

    def base_url(self, kind: str) -> str: ...

    def env(self) -> dict[str, str]: ...

    def transport(self, kind: str, sync: bool = False, lib: Any = None) -> Any: ...


@dataclass(frozen=True)
class ToolSpec:
    """A tool as shown to the agent: its name, description and JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def anthropic(self) -> dict[str, Any]:
        """The tool in the Anthropic Messages API's `tools` format."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def openai(self, strict: bool = False) -> dict[str, Any]:
        """The tool in the OpenAI chat-completions `tools` format. With ``strict``, in the
        form OpenAI's strict mode (structured outputs) takes, ``"strict": true`` and
        :meth:`strict_input_schema`; a tool that form cannot say (see there) stays as it
        is, with ``"strict": false``."""
        function: dict[str, Any] = {"name": self.name, "description": self.description,
                                    "parameters": self.input_schema}
        if strict:
            schema = strict_schema(self.input_schema)
            function["strict"] = schema is not None
            if schema is not None:
                function["parameters"] = schema
        return {"type": "function", "function": function}

    @property
    def strict_ok(self) -> bool:
        """Whether OpenAI's strict mode can say this tool's arguments (see
        :meth:`strict_input_schema`)."""
        return strict_schema(self.input_schema) is not None

    def strict_input_schema(self) -> dict[str, Any]:
        """The arguments' JSON Schema as OpenAI's strict mode takes it (the OpenAI Agents
        SDK's default, ``strict_json_schema=True``): every property required, an optional
        one nullable (null is what the engine reads as leaving it out, so its default
        applies), ``additionalProperties: false`` on every object, ``default`` said in the
        description instead. ValueError for a tool strict mode cannot say: an object
        argument without ``properties`` (any keys) or an array without ``items``."""
        schema = strict_schema(self.input_schema)
        if schema is None:
            raise ValueError(f"tool {self.name!r}: OpenAI's strict mode cannot say its arguments (an object "
                             f"without properties or an array without items); use input_schema, not strict")
        return schema


TOOL_DIALECTS = ("anthropic", "openai", "openai-strict")
"""The forms :meth:`Turn.tool_schemas` gives the tools in."""


def tool_schemas(tools: list[ToolSpec], dialect: str = "anthropic") -> list[dict[str, Any]]:
    """The tools in one of :data:`TOOL_DIALECTS`: ``anthropic`` (name, description and
    plain JSON Schema as ``input_schema``: also MCP's and the served ``GET /tools``
    shape), ``openai`` (chat-completions ``tools``), ``openai-strict`` (the same for
    OpenAI's strict mode, see :meth:`ToolSpec.strict_input_schema`)."""
    if dialect == "anthropic":
        return [t.anthropic() for t in tools]
    if dialect in ("openai", "openai-strict"):
        strict = dialect == "openai-strict"
        return [t.openai(strict=strict) for t in tools]
    raise ValueError(f"unknown tool schema dialect {dialect!r}; expected one of {', '.join(TOOL_DIALECTS)}")


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` (an object's) in OpenAI's strict form (see
    :meth:`ToolSpec.strict_input_schema`), or None when that form cannot say it."""
    return _strict(schema, optional=False)


def _strict(schema: dict[str, Any], optional: bool) -> dict[str, Any] | None:
    out = {k: v for k, v in schema.items() if k not in ("default", "required", "properties", "items")}
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):  # any keys: strict mode has no way to say so
            return None
        required = set(schema.get("required") or ())
        strict_props: dict[str, Any] = {}
        for name, sub in props.items():
            made = _strict(sub, optional=name not in required) if isinstance(sub, dict) else None
            if made is None:
                return None
            strict_props[name] = made
        out["properties"] = strict_props
        out["required"] = list(props)
        out["additionalProperties"] = False
    elif t == "array":
        items = schema.get("items")
        made_items = _strict(items, optional=False) if isinstance(items, dict) else None
        if made_items is None:
            return None
        out["items"] = made_items
    if optional:
        if isinstance(t, str) and t != "null":
            out["type"] = [t, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        said = (f"optional: null for the default, {json.dumps(schema['default'], ensure_ascii=False)}"
                if "default" in schema else "optional: null leaves it out")
        described = schema.get("description")
        out["description"] = f"{described} ({said})" if described else said[0].upper() + said[1:]
    return out


@dataclass(frozen=True, init=False)
class ToolResult:
    """What a tool call returned: a value, or an error with a code and message."""

    ok: bool
    value: Any = None
    error: int | None = None
    message: str | None = None

    def __init__(self, ok: bool, value: Any = None, error: int | None = None, message: str | None = None) -> None:
        # The generated __init__ of a frozen dataclass sets each field with object.__setattr__
        # (a call a field); every tool call makes one of these, so the fields go straight into
        # the instance's dict. Still frozen: assigning a field afterwards raises.
        d = self.__dict__
        d["ok"], d["value"], d["error"], d["message"] = ok, value, error, message

    def to_json(self) -> str:
        """The result as the agent should see it (JSON text)."""
        if self.ok:
            return json.dumps(self.value, ensure_ascii=False, default=str)
        return json.dumps({"error": self.error, "message": self.message}, ensure_ascii=False)


@dataclass(frozen=True, init=False)
class TrialInfo:
    """Who this trial is. Never contains the user's hidden instructions.

    ``trial_id`` names this one attempt: under pytest it is
    ``<domain file>::<task>/<trial>@<run id>`` (the domain file relative to the rootdir,
    the run id made once per run, shared by its xdist workers), unique within a run and
    across runs, so an agent may key its memory (a checkpointer's thread) or its
    idempotency keys on it. Outside pytest (``run_trial`` without ``trial_id``) it is
    ``<domain>/<task>/<trial>``."""

    domain: str
    task_id: str
    trial: int
    k: int
    seed: int
    trial_id: str

    def __init__(self, domain: str, task_id: str, trial: int, k: int, seed: int, trial_id: str = "") -> None:
        # one a trial: set as ToolResult's are (see there), frozen all the same
        d = self.__dict__
        d["domain"], d["task_id"], d["trial"], d["k"], d["seed"] = domain, task_id, trial, k, seed
        d["trial_id"] = trial_id or f"{domain}/{task_id}/{trial}"


UNKNOWN_MODEL = "(unknown model)"
"""The model that usage added without a model name (None or blank: a server that omits
``model``) is recorded under. It has no price; the reports show it as it is."""


@dataclass
class Usage:
    """Tokens used, per model. Adapters call :meth:`add` after every model call."""

    models: dict[str, dict[str, int]] = field(default_factory=dict)
    calls: int = 0

    def add(
        self,
        model: str | None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read: int = 0,
        cache_write: int = 0,
    ) -> None:
        """Count one model call. A model that is None or blank is recorded as
        :data:`UNKNOWN_MODEL`: results key usage by model name, which must be text."""
        name = model if isinstance(model, str) else "" if model is None else str(model)
        m = self.models.setdefault(
            name if name.strip() else UNKNOWN_MODEL,
            {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "calls": 0},
        )
        m["input"] += int(input_tokens or 0)
        m["output"] += int(output_tokens or 0)
        m["cache_read"] += int(cache_read or 0)
        m["cache_write"] += int(cache_write or 0)
        m["calls"] += 1
        self.calls += 1

    def to_dict(self) -> dict[str, dict[str, int]]:
        if not self.models:  # the built-ins and most agents under test record none: every trial asks
            return {}
        return {k: dict(v) for k, v in self.models.items()}


class _Clock(Protocol):
    """The trial's simulated clock (``engine.handlers.HandlerState``): what ``ctx.now`` reads."""

    @property
    def now(self) -> datetime: ...


@dataclass
class Turn:
    """One agent turn: the conversation so far, the tools, and a handle to call them.

    ``messages`` holds the text conversation, oldest first, as
    ``{"role": "user" | "assistant", "content": str}``; the last one is the
    user's newest message. ``state`` is a dict kept for the whole trial, where a
    stateful agent (a model adapter keeping its native history) stores what it
    needs between turns. ``now`` is the simulated clock when the domain or the task
    declares one (``clock: {now: ...}``), else None (docs/handlers.md).
    """

    messages: list[dict[str, str]]
    tools: list[ToolSpec]
    system_prompt: str
    trial: TrialInfo
    state: dict[str, Any]
    _call: Callable[[str, Any], ToolResult] = field(repr=False)
    # waits out the latency faults (docs/spec.md, "Faults and events") of calls made on the
    # trial's event loop; None outside a trial (a Turn built by hand)
    _wait: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    usage: Usage = field(default_factory=Usage)
    # with --sandtable-serve, where this trial's world is served (docs/serve.md): the
    # REST routes' base (POST {tools_url}/<tool>) and the MCP endpoint; None otherwise
    tools_url: str | None = None
    mcp_url: str | None = None
    # the trial's simulated clock when the domain or the task declares one, read when
    # `now` is asked for (nothing to build per turn); None otherwise
    _clock: _Clock | None = field(default=None, repr=False)
    # with --sandtable-model-proxy, this trial's routes through the proxy; None otherwise
    _models: ModelRoutes | None = field(default=None, repr=False)

    def model_base_url(self, kind: str = "openai") -> str | None:
        """With ``--sandtable-model-proxy``, the base URL this trial's model client is to use
        for ``kind`` (``openai`` or ``anthropic``): the run's model proxy, which forwards to
        the real API and counts, records and caps the calls as this trial's
        (docs/agents.md, "Agents on any framework: the model proxy"). None without the
        proxy: the SDK's own default (or ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``) then."""
        return None if self._models is None else self._models.base_url(kind)

    def model_env(self) -> dict[str, str]:
        """The environment variables the SDKs read (``OPENAI_BASE_URL``,
        ``ANTHROPIC_BASE_URL``) pointed at this trial's routes through the model proxy, for
        an agent that starts a subprocess (``env={**os.environ, **turn.model_env()}``); empty
        without ``--sandtable-model-proxy``. Never set them in ``os.environ``: trials in
        flight at once would share them."""
        return {} if self._models is None else self._models.env()

    def model_transport(self, kind: str = "openai", *, sync: bool = False, lib: Any = None) -> Any:
        """With ``--sandtable-model-proxy``, an HTTP transport that sends every request to
        this trial's route for ``kind`` through the model proxy, whatever URL the client
        was made with: for a framework that takes an HTTP client but no base URL
        (``openai.AsyncOpenAI(http_client=openai.DefaultAsyncHttpxClient(transport=...))``).
        An ``httpx2`` transport (the client library of the openai and anthropic SDKs) when
        httpx2 is installed, else an ``httpx`` one; ``lib`` names the module to build it on
        (``lib=httpx`` for a client of plain httpx). ``sync=True`` for a sync client. None
        without the proxy: the client's own transport then (``transport=None``)."""
        return None if self._models is None else self._models.transport(kind, sync, lib)

    @property
    def now(self) -> datetime | None:
        """The simulated clock, a timezone-aware ``datetime``: the very instant a handler
        reads as ``ctx.now`` (moved by ``ctx.advance`` in an earlier call, it has moved
        here too). None when neither the domain nor the task declares a ``clock``: the
        default clock handlers run on then is a placeholder, not a date the domain means."""
        return None if self._clock is None else self._clock.now

    def call_tool(self, name: str, arguments: dict[str, Any] | str | None = None) -> ToolResult:
        """Run a tool of the domain. ``arguments`` may be a dict or JSON text.

        Never raises for a bad call: unknown tools, bad arguments and failed
        checks come back as a :class:`ToolResult` with ``ok=False``. Arguments
        that are no JSON data (an integer too long to write as text, a structure
        that contains itself, nesting deeper than 64 levels, more than 100,000
        values) are bad arguments too (400). It raises only to end the turn (the
        agent stuck in a tool loop, or the domain failing), with a BaseException
        an agent's ``except Exception`` lets through.
        """
        return self._call(name, arguments)

    async def acall_tool(self, name: str, arguments: dict[str, Any] | str | None = None) -> ToolResult:
        """:meth:`call_tool` for an agent on the event loop (an ``async def`` agent): the same
        call, then a task's ``latency_ms`` fault waited out with ``asyncio.sleep``, so the
        agent meets the slow dependency where it called it without holding up the other
        trials in flight. (``call_tool`` from the loop cannot wait; its latency is waited
        after the turn.) From a thread, ``call_tool`` waits with ``time.sleep``."""
        result = self._call(name, arguments)
        if self._wait is not None:
            await self._wait()
        return result

    def tool_schemas(self, dialect: str = "anthropic") -> list[dict[str, Any]]:
        """This turn's tools in the form a model API or framework takes: ``anthropic``,
        ``openai`` or ``openai-strict`` (see :func:`tool_schemas`). ``turn.tools`` holds
        them as plain JSON Schema."""
        return tool_schemas(self.tools, dialect)

    @property
    def last_user_message(self) -> str:
        for m in reversed(self.messages):
            if m["role"] == "user":
                return m["content"]
        return ""


STOP_REASONS = ("goal_met", "impossible", "handed_off")


@dataclass
class UserReply:
    """What the simulated user says, and whether it ends the conversation.

    ``stop`` is None to go on, or one of ``goal_met``, ``impossible``,
    ``handed_off`` (a model user's explicit end signal) or ``script_end``.
    A closing message with text still gets one last agent turn.
    """

    text: str
    stop: str | None = None


@dataclass
class UserTurn:
    """What the simulated user is given: its own persona and hidden instructions,
    never the policy. In ``messages`` the role ``user`` is the simulated user
    itself and ``assistant`` the agent under test.

    ``script`` is the text of every script line; ``lines`` the same lines with their
    conditions, and ``say_unknown`` the task's line for when none applies (what the
    scripted user reacts with). ``calls`` is the trial's tool calls so far, as in
    results.json (``tool``, ``args``, ``ok``, ...): a copy of the list, whose entries
    a user reads and never changes."""

    messages: list[dict[str, str]]
    persona: str
    instructions: str
    opening: str | None
    script: list[str]
    trial: TrialInfo
    state: dict[str, Any]
    handed_off: bool = False
    usage: Usage = field(default_factory=Usage)
    lines: list[ScriptLine] = field(default_factory=list)
    say_unknown: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    # --- dual control (issue 22 A): the user tools the simulated user may call (empty for a
    # domain without a user world), and the engine's path for one call (see `call`)
    tools: list[ToolSpec] = field(default_factory=list)
    _call: Callable[[str, Any], ToolResult] | None = field(default=None, repr=False)

    def call(self, name: str, args: Any = None) -> ToolResult:
        """Call one of the user tools (``tools``) against the user's own world: checked and
        run as an agent's call is, logged in the trial's calls with ``"by": "user"``, the
        domain's ``sync`` run after it. A name that is not a user tool is a 404 error."""
        if self._call is None:
            return ToolResult(False, error=404, message=f"unknown user tool {name!r}; this domain has no user tools")
        return self._call(name, {} if args is None else args)
    # --- end dual control


UserCallable = Callable[[UserTurn], UserReply | str | Awaitable[UserReply | str]]


class Agent(Protocol):
    """The protocol an in-house agent implements."""

    def __call__(self, turn: Turn) -> AgentReply | Awaitable[AgentReply]: ...


AgentCallable = Callable[[Turn], AgentReply | Awaitable[AgentReply]]


def runs_inline(obj: object) -> bool:
    """True when an agent or user says it may run inline on the trial's event loop:
    a synchronous callable that never blocks, never awaits and never sleeps (the
    built-in reference agent and scripted user). Say so with a class attribute
    ``inline = True``. Anything else sync runs in a daemon thread, so a hung call
    can be timed out."""
    return getattr(obj, "inline", False) is True


class AgentError(Exception):
    """The agent under test failed (its endpoint errored, timed out, answered garbage).

    Raised by adapters; the trial fails with a `runtime` check carrying the message.
    """


class UserError(Exception):
    """The simulated user failed (its model errored). The trial is errored, not failed."""
