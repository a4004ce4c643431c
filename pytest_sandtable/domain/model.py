"""The validated, in-memory form of a domain file.

`loader.load_domain` builds these (in `build`) from YAML after schema and
cross-reference validation; the engine (`world`, `tools`, `rules`, `grading`, `trial`)
only ever reads them. Seed rows are shared by every trial and never mutated.

Value expressions: wherever the spec allows `$name`, the raw YAML value is kept
(a string like "$load_id", or any literal); `conditions.resolve` turns it into
a concrete value for one tool call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SPEC_VERSION = 1

PARAM_TYPES = ("string", "number", "integer", "boolean", "object", "array")
OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "ieq", "matches", "exists", "length",
             "each")
INVARIANT_KINDS = ("before", "require", "limit", "match", "never", "never_disclose")
OP_KINDS = ("get", "list", "create", "update", "delete", "respond")
# A task's tags become pytest markers on its trials; these markers already mean
# something to pytest (or are the one every trial carries), so no tag may be one.
RESERVED_TAGS = frozenset(
    {"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings", "tryfirst", "trylast", "sandtable"}
)

DEFAULT_MAX_TURNS = 20


class _Missing:
    """Marker for 'no default given' (None is a valid default)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Pos:
    """1-based line and column of a node in the domain file."""

    line: int
    col: int


@dataclass
class Table:
    name: str
    key: str
    rows: list[dict[str, Any]]
    key_format: str | None = None
    # every field a row of this table may have: seed rows, `fields:`, create rows, update sets
    fields: set[str] = field(default_factory=set)


@dataclass
class Param:
    name: str
    type: str
    description: str | None = None
    required: bool = True
    default: Any = MISSING
    enum: list[Any] | None = None
    # the JSON Schema of this param as agents see it (includes properties/items for object/array)
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass
class Check:
    """What the real API would enforce. `require` fails when no matching record
    exists; `forbid` fails when one does."""

    kind: Literal["require", "forbid"]
    table: str
    key: Any = None  # value expression or None
    where: dict[str, Any] | None = None  # field -> value expr or operator object
    error: int = 400
    message: str = ""
    each: str | None = None  # an array param: the check runs per element, as `$item`


@dataclass
class Op:
    """One operation of a tool. `spec` is the op's mapping as written, e.g.
    for `get`: {"table": "carriers", "key": "$mc_number"};
    for `list`: {"table", "where"?, "limit"?, "order_by"?};
    for `create`: {"table", "row"}; for `update`: {"table", "key", "set"?, "add"?,
    "subtract"?, "append"?}; for `delete`: {"table", "key"};
    for `respond`: {"value": <any JSON value>} (the op's value as written)."""

    kind: str
    spec: dict[str, Any]


@dataclass
class Tool:
    name: str
    description: str = ""
    params: dict[str, Param] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    handoff: bool = False
    pos: Pos | None = None
    # `module:function` in place of ops (docs/handlers.md); kept as text, resolved once per
    # process (domain/handlers.py), so a built domain pickles (domain/cache.py) without code
    handler: str | None = None

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of this tool's arguments, as shown to agents."""
        props = {name: dict(p.schema) for name, p in self.params.items()}
        required = [name for name, p in self.params.items() if p.required and p.default is MISSING]
        schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema


@dataclass
class Invariant:
    """A policy rule. `spec` keeps the kind-specific keys as written:
    before: first, then, same (list of param names)
    require: tool, record {table, key}, where
    limit: tool, arg, and one or more of lt/lte/gt/gte (a constant or {table, key, field})
    match: tool, left {table, key, field}, right {table, key, field}
    never: tool, when (optional conditions on args)
    never_disclose: values ({table, field, where?} or a list of literals)
    """

    id: str
    kind: str
    spec: dict[str, Any]
    soft: bool = False
    source_quote: str | None = None
    description: str | None = None
    pos: Pos | None = None
    pending: bool = False  # drafted (by `init`) and not yet accepted by a person

    @property
    def tool(self) -> str | None:
        """The tool this rule is about (`then` for before; None for never_disclose)."""
        if self.kind == "before":
            return str(self.spec["then"])
        if self.kind == "never_disclose":
            return None
        return str(self.spec["tool"])


# The conditions a script line's `when` may give (docs/spec.md, "A scripted user that reacts").
SCRIPT_CONDITIONS = ("reply_includes", "reply_matches", "called", "not_called")
# --- dual control (issue 22 A): the conditions on the simulated user's own tool calls
USER_SCRIPT_CONDITIONS = ("result_includes", "result_matches", "user_called", "user_not_called")
# the most call lines a scripted user runs in one of its turns (and calls a model user makes)
MAX_USER_CALLS_PER_TURN = 8
# --- end dual control


@dataclass(frozen=True)
class ScriptLine:
    """One line of a task's `user.script`: what the scripted user says, and when.

    A plain line (``when`` is None) is said in its turn, after the plain lines before
    it. A line with ``when`` is said, once, in reply to the first agent message after
    which all its conditions hold: each maps a name of :data:`SCRIPT_CONDITIONS` to a
    list of texts (``reply_includes``), one pattern (``reply_matches``) or a list of
    tool names (``called``, ``not_called``). ``end`` ends the conversation after it.
    """

    say: str
    when: dict[str, Any] | None = None
    end: bool = False
    pos: Pos | None = None
    # --- dual control (issue 22 A): a call line runs this user tool in place of saying `say` ("")
    call: str | None = None
    args: dict[str, Any] | None = None
    # --- end dual control


@dataclass
class UserSpec:
    persona: str = ""
    instructions: str = ""
    opening: str | None = None
    script: list[ScriptLine] = field(default_factory=list)
    # what the scripted user says when no line applies; None: it ends the conversation
    say_unknown: str | None = None


@dataclass
class StateExpectation:
    """Either {table, key, fields} (a record matches) or {table, where, count}."""

    table: str
    key: Any = None
    fields: dict[str, Any] | None = None
    where: dict[str, Any] | None = None
    count: int | None = None
    index: int = 0  # 1-based position within its table's entries, for check ids (`#1`)
    id: str | None = None  # the check id's name, `state:<id>`, in place of the position


@dataclass
class CallMatcher:
    tool: str
    args: dict[str, Any] | None = None  # conditions on the call's arguments
    # issue 22 (part B): whose calls it matches, "agent" or "user" (a call's log entry
    # without `by` is the agent's; `setup`, `history` and `sync` entries match neither)
    by: str = "agent"


@dataclass
class Expect:
    state: list[StateExpectation] = field(default_factory=list)
    called: list[CallMatcher] = field(default_factory=list)
    not_called: list[CallMatcher] = field(default_factory=list)
    reply_includes: list[str] = field(default_factory=list)
    # the final world must equal the world the task's reference calls make (τ-bench's
    # criterion; engine/reference_world.py grades it field by field)
    world_matches_reference: bool = False
    # issue 22 (part B): code on the final world (`assert`), and the kinds that decide the
    # verdict (`basis`; None: every kind counts)
    asserts: list[Assertion] = field(default_factory=list)
    basis: tuple[str, ...] | None = None


@dataclass
class RefStep:
    """One step of a task's reference: a tool call (`call` + `args`) or a reply (`say`)."""

    call: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    say: str | None = None


# --------------------------------------------------------------------------- issue 22, part B
# Tasks that start mid-way (setup, history, solo) and expectations that call code (assert),
# graded by the kinds a task's `basis` names (docs/spec.md).

# The expectation kinds a task's `basis` may name (`state` covers world_matches_reference).
BASIS_KINDS = ("state", "called", "not_called", "reply", "assert")
# Who a called / not_called matcher is about.
CALLERS = ("agent", "user")


@dataclass(frozen=True)
class Assertion:
    """An ``expect.assert`` entry: ``function`` (``module:function``, resolved as handlers
    are) called ``fn(world, **args)`` on the final world through a read-only handle; it
    returns a bool or ``(bool, message)``. ``id`` names its check (``assert:<id>``)."""

    function: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    pos: Pos | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SetupStep:
    """A task's ``setup`` step, run before the first message: a tool call (``call`` and
    ``args``, by ``by``) or a function (``handler``: ``fn(args, world, ctx)``)."""

    call: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    by: str = "agent"
    handler: str | None = None
    pos: Pos | None = field(default=None, compare=False)


@dataclass(frozen=True)
class HistoryMessage:
    """A message of a task's ``history`` (the conversation the trial starts from): who
    said it (``user`` or ``agent``), what, and the agent's tool calls with it."""

    role: str
    say: str
    calls: tuple[RefStep, ...] = ()
    pos: Pos | None = field(default=None, compare=False)


# --------------------------------------------------------------------------- end of issue 22, part B


# A task's faults (docs/spec.md, "Faults and events"): what a flaky dependency does to a call.
FAULT_KINDS = ("timeout", "rate_limit", "server_error")


@dataclass(frozen=True)
class Fault:
    """Calls of ``tool`` failing like a flaky dependency's. ``kind`` is one of
    :data:`FAULT_KINDS`, or None for ``latency_ms`` alone. Which calls of the tool it
    hits (counted from 1, calls with valid arguments only): ``calls`` (a list of
    numbers), or all of them (``every``), or a ``fraction`` drawn from the trial's seed.
    ``after_commit``: the tool runs first (its writes land), then the agent gets the
    error. The defaults of ``status``, ``retry_after`` and ``message`` are filled in at
    build time, so the engine reads them as they are."""

    tool: str
    kind: str | None
    calls: tuple[int, ...] = ()
    every: bool = False
    fraction: float | None = None
    after_commit: bool = False
    status: int | None = None  # the error code the agent sees; None for latency alone
    retry_after: float | None = None  # rate_limit: the seconds the agent is told to wait
    latency_ms: int = 0
    message: str = ""
    index: int = 0  # its position in the task's `faults`, counted from 1 (for lint and the seed)
    pos: Pos | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Event:
    """The world changing under the agent, as someone else would change it: right after
    the ``call``-th call of ``tool`` (counted as faults count), the ``op`` (``update``,
    ``create`` or ``delete``) with literal values, in ``spec`` as written."""

    tool: str
    call: int
    op: str
    spec: dict[str, Any]
    index: int = 0  # its position in the task's `events`, counted from 1
    pos: Pos | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Accept:
    """A mutant of the task's reference that the policy allows (the task's ``accept:``
    list): ``mutant`` is its id as ``mutate`` prints it, ``reason`` why it is allowed.
    ``mutate`` counts it as accepted, not as a survivor, and checks that the id names a
    mutant it generates (the loader only checks the entry's shape)."""

    mutant: str
    reason: str
    pos: Pos | None = field(default=None, compare=False)


# What a judged criterion reads of a trial's transcript (docs/judges.md, "Criteria").
JUDGE_SCOPES = ("all", "final")


@dataclass(frozen=True)
class Criterion:
    """A judged criterion (a ``judge:`` entry, of the domain or of a task): a yes/no
    ``question`` a model judge answers about a trial's transcript, never part of its
    verdict. What it reads: ``scope`` ``all`` (the whole transcript) or ``final`` (the
    agent's last message); ``turns``, the agent's messages first to last (from 1);
    ``after_tool``, what follows the first call of that tool."""

    id: str
    question: str
    scope: str = "all"
    turns: tuple[int, int] | None = None
    after_tool: str | None = None
    pos: Pos | None = field(default=None, compare=False)


@dataclass
class Task:
    id: str
    description: str = ""
    tags: list[str] = field(default_factory=list)
    critical: bool = False
    max_turns: int = DEFAULT_MAX_TURNS
    given: list[Op] = field(default_factory=list)  # create/update ops with literal values
    user: UserSpec = field(default_factory=UserSpec)
    expect: Expect = field(default_factory=Expect)
    reference: list[RefStep] = field(default_factory=list)
    pos: Pos | None = None
    pending: bool = False  # drafted (by `init`) and not yet accepted by a person
    # the task's point is that nothing should happen (a refusal): lint expects it to
    # pass when the agent does nothing, and says so as a note, not a warning
    expect_nothing: bool = False
    # the simulated clock's start for this task (`clock: {now}`), ISO 8601 with an offset;
    # None: the domain's. Text, not a datetime, so the domain cache's unpickler needs no more classes
    clock_now: str | None = None
    # calls that fail and changes that happen under the agent (docs/spec.md, "Faults and events")
    faults: list[Fault] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # mutants of the reference the policy allows, each with its reason (docs/spec.md, "Accepted mutants")
    accept: tuple[Accept, ...] = ()
    # judged criteria of this task, asked besides the domain's (docs/judges.md); never in the verdict
    judge: tuple[Criterion, ...] = ()
    # issue 22 (part B): where the trial starts from (docs/spec.md, "Setup", "History", "Solo")
    setup: list[SetupStep] = field(default_factory=list)
    history: list[HistoryMessage] = field(default_factory=list)
    solo: bool = False
    ticket: str | None = None
    # --- dual control (issue 22 A): changes to the fresh user world, as `given` makes to the world
    user_given: list[Op] = field(default_factory=list)
    # --- end dual control


@dataclass
class Domain:
    name: str
    description: str
    policy: str
    tables: dict[str, Table]
    tools: dict[str, Tool]
    invariants: list[Invariant]
    tasks: list[Task]
    version: int = SPEC_VERSION
    tags: dict[str, str] = field(default_factory=dict)  # declared tags (optional)
    # declared tags scored pooled across the domains of a run (the others per domain)
    shared_tags: set[str] = field(default_factory=set)
    path: str | None = None  # the file it was loaded from
    sha256: str = ""  # of the file's bytes
    # the simulated clock's start for handlers (`clock: {now}`), ISO 8601 with an offset; None: the default
    clock_now: str | None = None
    # judged criteria asked of every task's trials (docs/judges.md); never in a verdict
    judge: tuple[Criterion, ...] = ()
    # --- dual control (issue 22 A): the caller's own tables and the tools only the simulated
    # user calls (docs/spec.md, "The caller's world"); `sync` is `module:function` text
    user_tables: dict[str, Table] = field(default_factory=dict)
    user_tools: dict[str, Tool] = field(default_factory=dict)
    sync: str | None = None
    # --- end dual control

    def criteria_for(self, task: Task) -> tuple[Criterion, ...]:
        """The judged criteria of a trial of ``task``: the domain's, then the task's."""
        return self.judge + task.judge

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(task_id)

    def pending_for(self, task: Task) -> list[dict[str, str]]:
        """The drafted, not yet accepted items a trial of ``task`` runs under: the task
        itself and every pending rule (rules apply to every task)."""
        items = [{"kind": "task", "id": task.id}] if task.pending else []
        return items + [{"kind": "rule", "id": inv.id} for inv in self.invariants if inv.pending]

    def system_prompt(self) -> str:
        """The default system prompt: the domain's description and policy."""
        parts = []
        if self.description.strip():
            parts.append(self.description.strip())
        if self.policy.strip():
            parts.append("Policy you must follow:\n" + self.policy.strip())
        return "\n\n".join(parts)
