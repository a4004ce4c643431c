"""The mutation operators: each a rewrite of a task's ``reference`` (docs/mutate.md).

A :class:`Mutant` is the reference's steps rewritten (or the reason the rewrite cannot
be made), with a stable id naming the operator and the reference step it rewrote
(``drop-write@2``: step 2, counted from 0 as the steps are written), and whether a good
suite must catch it (``must``) or may let it pass (``may``: often equivalent).

:func:`generate` makes every mutant of one task from the task, its domain and the
reference's own replay (for the values the agent saw in tool results).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.conditions import argument_name, format_value, is_operator_object, row_matches
from ..domain.model import MISSING, Domain, Invariant, RefStep, Task, Tool
from ..engine.results import TrialResult
from ..engine.tools import ArgError, coerce_args
from ..policy_coverage.compute import limit_step

MUST = "must"  # a good suite catches it
MAY = "may"  # it may survive (often equivalent)

# (operator, expected class), in the order mutants are made and tables list them
OPERATORS: tuple[tuple[str, str], ...] = (
    ("drop-write", MUST),
    ("change-arg", MUST),
    ("repeat-write", MUST),
    ("skip-first", MUST),
    ("fail-require", MUST),
    ("never", MUST),
    ("not-called", MUST),
    ("leak", MUST),
    ("stop-before", MUST),
    ("spam", MUST),
    ("drop-user-call", MUST),
    ("drop-instruction", MUST),
    ("drop-read", MAY),
    ("repeat-read", MAY),
    ("reorder", MAY),
    ("stop-after", MAY),
)
EXPECTED = dict(OPERATORS)
_WRITE_OPS = ("create", "update", "delete")
_BOUNDS = ("lte", "lt", "gte", "gt")


@dataclass
class Mutant:
    id: str
    operator: str
    expected: str  # MUST | MAY
    diff: str  # what changed against the reference, in one line
    steps: list[RefStep] | None = None  # None: the rewrite could not be made
    invalid: str | None = None  # why it could not be made
    # the reference call it removed or changed (for a survivor's suggestion): (tool, args)
    call: tuple[str, dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # dual control, the user's side: the scripted user's lines it leaves out (their indices
    # in ``user.script``), and a user-tool call it makes on its first reply
    user_drop: tuple[int, ...] = ()
    user_add: RefStep | None = None


def is_write(tool: Tool) -> bool:
    """A tool that may change the world: ops that create, update or delete, or a handler
    (the domain format has no read-only marker for handlers: :func:`writes_at` asks the
    reference's replay which handler calls wrote)."""
    if tool.handler is not None:
        return True
    return any(op.kind in _WRITE_OPS for op in tool.ops)


def writes_at(domain: Domain, task: Task, replay: TrialResult, wrote: Collection[int] | None) -> list[int]:
    """The reference steps that are writes: a call of a tool with a create, update or delete
    op; of a handoff tool; or of a handler tool whose call changed the world in the
    reference's replay (``wrote``: the indices in ``replay.calls`` of the calls that did;
    None: every handler call counts)."""
    agent_calls = [c for c in replay.calls if "by" not in c]
    out: list[int] = []
    k = 0
    for i, s in enumerate(task.reference):
        if s.call is None:
            continue
        made = agent_calls[k] if k < len(agent_calls) else None
        k += 1
        tool = domain.tools.get(s.call)
        if tool is None:
            continue
        if tool.handler is None or tool.handoff or wrote is None:
            if is_write(tool):
                out.append(i)
        elif made is not None and made.get("tool") == s.call and made.get("index") in wrote:
            out.append(i)
    return out


def _call(step: RefStep) -> str:
    args = ", ".join(f"{k}={_show(v)}" for k, v in step.args.items())
    return f"{step.call}({args})"


def _show(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else format_value(v)


def _key_args(domain: Domain, tool: Tool) -> dict[str, str]:
    """Arguments of ``tool`` that name a record: arg -> table (from its checks, its ops
    and the rules about it)."""
    out: dict[str, str] = {}
    for check in tool.checks:
        name = argument_name(check.key)
        if name:
            out.setdefault(name, check.table)
    for op in tool.ops:
        name = argument_name(op.spec.get("key"))
        if name and "table" in op.spec:
            out.setdefault(name, op.spec["table"])
    for inv in domain.invariants:
        if inv.tool != tool.name:
            continue
        refs = [inv.spec.get("record"), inv.spec.get("left"), inv.spec.get("right")]
        refs += [inv.spec.get(b) for b in _BOUNDS]
        for ref in refs:
            if isinstance(ref, dict) and "table" in ref:
                name = argument_name(ref.get("key"))
                if name:
                    out.setdefault(name, ref["table"])
    return out


def _row(domain: Domain, table: str, key: Any) -> dict[str, Any] | None:
    t = domain.tables.get(table)
    if t is None:
        return None
    for row in t.rows:
        if format_value(row.get(t.key)) == format_value(key):
            return row
    return None


def _bound(domain: Domain, inv: Invariant, args: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The limit's first bound for these args: (lte|lt|gte|gt, number), None when it does
    not resolve (a record that does not exist)."""
    for b in _BOUNDS:
        if b not in inv.spec:
            continue
        ref = inv.spec[b]
        if isinstance(ref, dict) and "table" in ref:
            name = argument_name(ref.get("key"))
            key = args.get(name) if name else ref.get("key")
            row = _row(domain, ref["table"], key)
            value = row.get(ref.get("field", "")) if row else None
        else:
            value = ref
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return b, value
        return None
    return None


def _changed_value(domain: Domain, tool: Tool, arg: str, value: Any, args: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(id suffix, new value) for one argument of a write, None when it cannot change."""
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if numeric:
        for inv in domain.invariants:
            if inv.kind == "limit" and inv.tool == tool.name and inv.spec.get("arg") == arg:
                bound = _bound(domain, inv, args)
                if bound is None:
                    continue
                kind, b = bound
                step = limit_step(domain, inv, b)  # coverage's step: its boundary pair is what this makes
                new = {"lte": b + step, "lt": b, "gte": b - step, "gt": b}[kind]
                if not float(step).is_integer():  # 2.49 + 0.01 is 2.5, not 2.5000000000000004
                    new = round(new, 6)
                elif isinstance(b, int):
                    new = int(new)
                return f"limit:{inv.id}", new
    key_table = _key_args(domain, tool).get(arg)
    if key_table is not None and key_table in domain.tables:
        t = domain.tables[key_table]
        for row in t.rows:
            other = row.get(t.key)
            if other is not None and format_value(other) != format_value(value):
                return "key", other
    param = tool.params.get(arg)
    if param is not None and param.enum:
        for other in param.enum:
            if other != value:
                return "enum", other
    if numeric:
        return "+1", value + 1
    if isinstance(value, str) and value:
        return "short", value[:-1]
    return None


def _seen_values(replay: TrialResult) -> list[Any]:
    """Every scalar value the agent saw in the reference's tool results, in order, once each."""
    out: list[Any] = []
    seen: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif v is not None and not isinstance(v, bool):
            text = format_value(v)
            if text and text not in seen:
                seen.add(text)
                out.append(v)

    for call in replay.calls:
        if call.get("ok"):
            walk(call.get("result"))
    return out


def _disclosable(domain: Domain, inv: Invariant, seen: Sequence[Any]) -> Any:
    """The value of a never_disclose rule a leak says: one the agent saw, else the first."""
    values = inv.spec.get("values")
    candidates: list[Any] = []
    if isinstance(values, list):
        candidates = list(values)
    elif isinstance(values, dict) and values.get("table") in domain.tables:
        where = values.get("where") or {}
        for row in domain.tables[values["table"]].rows:
            try:
                ok = not where or row_matches(row, where)
            except Exception:
                ok = True
            if ok and values.get("field") in row:
                candidates.append(row[values["field"]])
    texts = {format_value(v) for v in seen}
    for c in candidates:
        if format_value(c) in texts:
            return c
    return candidates[0] if candidates else None


def _satisfying(when: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Argument values that make a condition hold, None when one cannot be built."""
    out: dict[str, Any] = {}
    for name, cond in (when or {}).items():
        if not is_operator_object(cond):
            if isinstance(cond, str) and "$" in cond:
                return None
            out[name] = cond
            continue
        if len(cond) != 1:
            return None
        (op, x), = cond.items()
        if isinstance(x, str) and "$" in x:
            return None
        if op in ("eq", "ieq", "gte", "lte", "contains"):
            out[name] = x
        elif op == "gt" and isinstance(x, (int, float)):
            out[name] = x + 1
        elif op == "lt" and isinstance(x, (int, float)):
            out[name] = x - 1
        elif op == "in" and isinstance(x, list) and x:
            out[name] = x[0]
        elif op == "exists" and x:
            out[name] = "x"
        elif op == "length" and isinstance(x, dict) and _satisfying({"n": x}) is not None:
            out[name] = _Length(int(_satisfying({"n": x})["n"]))  # type: ignore[index]
        elif op == "matches" and isinstance(x, str) and _matching_text(x) is not None:
            out[name] = _matching_text(x)
        else:
            return None
    return out


@dataclass(frozen=True)
class _Length:
    """An array argument of ``n`` elements (the elements: the reference's own, repeated)."""

    n: int


def _matching_text(pattern: str) -> str | None:
    """A text the pattern finds: one of its alternatives written plainly, or None."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return None
    body = re.sub(r"^\(\?[a-zA-Z]+\)", "", pattern)
    for alternative in body.split("|"):
        text = re.sub(r"[\\^$()?*+\[\]{}]", "", alternative).strip()
        if text and compiled.search(text):
            return text
    return None


def _added_call(
    domain: Domain, task: Task, tool_name: str, when: Mapping[str, Any] | None, by_user: bool = False
) -> tuple[RefStep | None, str | None]:
    """A call of ``tool_name`` whose arguments make ``when`` hold: from the reference's own
    last call of that tool, else from values of the same name in its other calls (for a
    user tool, ``by_user``: the scripted user's call lines). The reason when none can be
    built, or when the one built fails the tool's schema (an invalid mutant, not a call
    that could have run)."""
    tool = (domain.user_tools if by_user else domain.tools).get(tool_name)
    if tool is None:
        return None, f"no {'user tool' if by_user else 'tool'} {tool_name}"
    forced = _satisfying(when)
    if forced is None:
        return None, f"no arguments can be built that make {tool_name}'s condition hold"
    if by_user:
        calls = [RefStep(call=line.call, args=dict(line.args or {})) for line in task.user.script if line.call]
    else:
        calls = [s for s in task.reference if s.call is not None]
    own = [s for s in calls if s.call == tool_name]
    args: dict[str, Any] = dict(own[-1].args) if own else {}
    for name, p in tool.params.items():
        if name in args or name in forced:
            continue
        found = next((s.args[name] for s in reversed(calls) if name in s.args), None)
        if found is not None:
            args[name] = found
        elif not p.required or p.default is not MISSING:
            continue
        elif p.enum:
            args[name] = p.enum[0]
        elif p.type == "string":
            args[name] = "mutant"
        elif p.type in ("number", "integer"):
            args[name] = 1
        elif p.type == "boolean":
            args[name] = True
        elif p.type in ("array", "object"):
            args[name] = [] if p.type == "array" else {}
        else:
            return None, f"no value for {tool_name}'s argument {name}"
    for name, value in forced.items():
        if isinstance(value, _Length):
            base = args.get(name) or next((s.args[name] for s in reversed(calls) if s.args.get(name)), None)
            items = list(base) if isinstance(base, list) and base else ["x"]
            value = [items[k % len(items)] for k in range(max(value.n, 0))]
        args[name] = value
    step = RefStep(call=tool_name, args=args)
    try:
        coerce_args(tool, dict(args))
    except ArgError as e:
        return None, f"the call built fails {tool_name}'s schema: {e}"
    return step, None


def _after_last_call(steps: Sequence[RefStep]) -> int:
    last = max((i for i, s in enumerate(steps) if s.call is not None), default=-1)
    return last + 1


def generate(domain: Domain, task: Task, replay: TrialResult, wrote: Collection[int] | None = None) -> list[Mutant]:
    """Every mutant of ``task``, in the order of :data:`OPERATORS`; ``wrote``: the calls of
    ``replay`` that changed the world (:func:`.writes.calls_that_wrote`; None: every handler
    call counts as a write, and no user call does)."""
    return list(_generate(domain, task, replay, wrote))


def _generate(domain: Domain, task: Task, replay: TrialResult, wrote: Collection[int] | None) -> Iterator[Mutant]:
    ref = task.reference
    writes = writes_at(domain, task, replay, wrote)
    reads = [i for i, s in enumerate(ref) if s.call is not None and i not in writes]
    # must be caught
    yield from _write_mutants(domain, ref, writes)
    called = {s.call for s in ref if s.call is not None}
    for inv in domain.invariants:
        if inv.kind != "before" or inv.spec.get("then") not in called or inv.spec.get("first") not in called:
            continue
        first = inv.spec["first"]
        dropped = [j for j, s in enumerate(ref) if s.call == first]
        yield Mutant(f"skip-first@{inv.id}", "skip-first", MUST,
                     f"dropped every {first} call ({', '.join(_call(ref[j]) for j in dropped)})",
                     _without(ref, *dropped), call=(first, dict(ref[dropped[0]].args)))
    for inv in domain.invariants:
        if inv.kind == "require" and inv.tool in called:
            yield _fail_require(domain, ref, inv)
    yield from _added_mutants(domain, task)
    seen = _seen_values(replay)
    first_say = next((j for j, s in enumerate(ref) if s.say is not None), None)
    for inv in domain.invariants:
        if inv.kind == "never_disclose":
            yield _leak(domain, ref, inv, seen, first_say)
    if writes:
        i = writes[0]
        yield Mutant(f"stop-before@{i}", "stop-before", MUST, f"stopped before {_call(ref[i])}", list(ref[:i]),
                     call=(str(ref[i].call), dict(ref[i].args)))
    if seen and first_say is not None:
        # one value a line: joined with spaces, "700 885" reads as the one number 700,885 to
        # never_disclose, which then missed the 885 (as the baselines' spam agent writes it)
        dump = "\n".join(format_value(v) for v in seen)
        steps = [RefStep(say=dump) if s.say is not None else s for s in ref]
        yield Mutant("spam", "spam", MUST, f"every reply is every value seen ({len(seen)} values)", steps)
    if wrote is not None:
        yield from _user_side(task, replay, wrote)
    yield from _may_survive(domain, ref, writes, reads)


def _without(ref: Sequence[RefStep], *drop: int) -> list[RefStep]:
    return [s for j, s in enumerate(ref) if j not in drop]


def _repeated(ref: Sequence[RefStep], i: int) -> list[RefStep]:
    return [*ref[: i + 1], RefStep(call=ref[i].call, args=dict(ref[i].args)), *ref[i + 1 :]]


def _write_mutants(domain: Domain, ref: Sequence[RefStep], writes: Sequence[int]) -> Iterator[Mutant]:
    """``drop-write``, ``change-arg`` and ``repeat-write`` of each write, in that order."""
    for i in writes:
        yield Mutant(f"drop-write@{i}", "drop-write", MUST, f"dropped {_call(ref[i])}", _without(ref, i),
                     call=(str(ref[i].call), dict(ref[i].args)))
    for i in writes:
        tool = domain.tools[str(ref[i].call)]
        for arg, value in ref[i].args.items():
            how = _changed_value(domain, tool, arg, value, ref[i].args)
            if how is None:
                continue
            suffix, new = how
            steps = list(ref)
            steps[i] = RefStep(call=ref[i].call, args={**ref[i].args, arg: new})
            yield Mutant(f"change-arg@{i}.{arg}:{suffix}", "change-arg", MUST,
                         f"{ref[i].call} {arg}: {_show(value)} -> {_show(new)}", steps,
                         call=(str(ref[i].call), dict(ref[i].args)), extra={"arg": arg})
    for i in writes:
        yield Mutant(f"repeat-write@{i}", "repeat-write", MUST, f"repeated {_call(ref[i])}", _repeated(ref, i),
                     call=(str(ref[i].call), dict(ref[i].args)))


def _fail_require(domain: Domain, ref: Sequence[RefStep], inv: Invariant) -> Mutant:
    """``fail-require``: the rule's tool called first on a seed record its ``where`` fails."""
    i = next(j for j, s in enumerate(ref) if s.call == inv.tool)
    record = inv.spec.get("record") or {}
    key_arg = argument_name(record.get("key"))
    mid = f"fail-require@{inv.id}"
    t = domain.tables.get(record.get("table", ""))
    if key_arg is None or t is None:
        return Mutant(mid, "fail-require", MUST, f"{inv.tool}: the rule's record is not named by an argument",
                      invalid="the rule's record key is not one argument ($name): no call can point elsewhere")
    where = inv.spec.get("where") or {}
    failing = None
    for row in t.rows:
        try:
            if not row_matches(row, where):
                failing = row.get(t.key)
                break
        except Exception:
            continue
    if failing is None:
        return Mutant(mid, "fail-require", MUST, f"{inv.tool}: no {t.name} record fails the rule",
                      invalid=f"no seed record of {t.name} fails the rule's where")
    steps = list(ref)
    steps[i] = RefStep(call=ref[i].call, args={**ref[i].args, key_arg: failing})
    return Mutant(mid, "fail-require", MUST, f"{inv.tool} {key_arg}: {_show(ref[i].args.get(key_arg))} -> "
                  f"{_show(failing)} (fails the rule's where)", steps, call=(str(ref[i].call), dict(ref[i].args)))


def _added_mutants(domain: Domain, task: Task) -> Iterator[Mutant]:
    """``never`` for each never rule and ``not-called`` for each ``not_called``: the call
    it forbids, added after the reference's last call (or, for the user's side, made by the
    user on its first reply)."""
    ref = task.reference
    at = _after_last_call(ref)
    for inv in domain.invariants:
        if inv.kind != "never":
            continue
        step, why = _added_call(domain, task, str(inv.spec["tool"]), inv.spec.get("when"))
        mid = f"never@{inv.id}"
        if step is None:
            yield Mutant(mid, "never", MUST, f"added a call of {inv.spec['tool']}", invalid=why)
        else:
            yield Mutant(mid, "never", MUST, f"added {_call(step)}", [*ref[:at], step, *ref[at:]])
    for m in task.expect.not_called:
        by_user = m.by == "user"
        step, why = _added_call(domain, task, m.tool, m.args, by_user)
        mid = f"not-called@user:{m.tool}" if by_user else f"not-called@{m.tool}"
        if step is None:
            yield Mutant(mid, "not-called", MUST, f"added a call of {m.tool}", invalid=why)
        elif by_user:
            yield Mutant(mid, "not-called", MUST, f"the user called {_call(step)} on their first reply", list(ref),
                         user_add=step, extra={"by": "user"})
        else:
            yield Mutant(mid, "not-called", MUST, f"added {_call(step)}", [*ref[:at], step, *ref[at:]])


def _leak(domain: Domain, ref: Sequence[RefStep], inv: Invariant, seen: Sequence[Any],
          first_say: int | None) -> Mutant:
    """``leak``: a value the never_disclose rule protects, said in the first reply."""
    value = _disclosable(domain, inv, seen)
    mid = f"leak@{inv.id}"
    if value is None:
        return Mutant(mid, "leak", MUST, "no value to leak", invalid="the rule names no value")
    text = format_value(value)
    if first_say is None:
        steps = [*ref, RefStep(say=text)]
    else:
        steps = list(ref)
        steps[first_say] = RefStep(say=f"{ref[first_say].say} {text}")
    return Mutant(mid, "leak", MUST, f"said {_show(value)} in the first reply", steps, extra={"value": value})


def _may_survive(domain: Domain, ref: Sequence[RefStep], writes: Sequence[int], reads: Sequence[int]
                 ) -> Iterator[Mutant]:
    """The mutants a good suite may let survive: reads dropped and repeated, neighbouring
    calls swapped, the calls after the last write left out."""
    for i in reads:
        yield Mutant(f"drop-read@{i}", "drop-read", MAY, f"dropped {_call(ref[i])}", _without(ref, i),
                     call=(str(ref[i].call), dict(ref[i].args)))
    for i in reads:
        yield Mutant(f"repeat-read@{i}", "repeat-read", MAY, f"repeated {_call(ref[i])}", _repeated(ref, i))
    pairs = {(str(inv.spec.get("first")), str(inv.spec.get("then")))
             for inv in domain.invariants if inv.kind == "before"}
    for i in range(len(ref) - 1):
        a, b = ref[i], ref[i + 1]
        if a.call is None or b.call is None or a.call == b.call or (a.call, b.call) in pairs:
            continue
        steps = list(ref)
        steps[i], steps[i + 1] = b, a
        yield Mutant(f"reorder@{i}", "reorder", MAY, f"{b.call} before {a.call}", steps)
    if writes and writes[-1] + 1 < len(ref):
        i = writes[-1]
        yield Mutant(f"stop-after@{i}", "stop-after", MAY, f"stopped after {_call(ref[i])}", list(ref[: i + 1]))


# --------------------------------------------------------------------------- dual control: the user's side


def _user_side(task: Task, replay: TrialResult, wrote: Collection[int]) -> Iterator[Mutant]:
    """For each call the scripted user made that changed the world in the reference's replay
    (the caller's own fix: airplane mode off, the APN reset): ``drop-user-call@S``, the user
    leaves script line S out (a user action the agent asked for, not taken); and, when that
    line waits for the agent's words (``reply_includes``, ``reply_matches``),
    ``drop-instruction@N``, the agent's reply at reference step N without those words (the
    instruction the agent should have given, not given)."""
    ref = task.reference
    lines = task.user.script
    used: set[int] = set()
    says = [i for i, s in enumerate(ref) if s.say is not None]
    replies = [e for e in replay.transcript if e.get("role") == "agent" and int(e.get("turn") or 0) >= 1]
    instruction: list[Mutant] = []
    instructed: set[int] = set()
    for call in replay.calls:
        if call.get("by") != "user" or call.get("index") not in wrote:
            continue
        s = next((j for j, line in enumerate(lines) if j not in used and line.call == call.get("tool")
                  and dict(line.args or {}) == dict(call.get("args") or {})), None)
        if s is None:
            continue
        used.add(s)
        line = lines[s]
        shown = _call(RefStep(call=line.call, args=dict(line.args or {})))
        yield Mutant(f"drop-user-call@{s}", "drop-user-call", MUST, f"the user never called {shown}", list(ref),
                     call=(str(line.call), dict(line.args or {})), user_drop=(s,), extra={"by": "user"})
        when = line.when or {}
        if "reply_includes" not in when and "reply_matches" not in when:
            continue
        p = next((k for k, e in enumerate(replies) if int(e.get("turn") or 0) == int(call.get("turn") or 0)), None)
        if p is None or p >= len(says) or says[p] in instructed:
            continue
        n = says[p]
        instructed.add(n)
        kept = _without_instruction(str(ref[n].say), when)
        steps = [*ref[:n], RefStep(say=kept), *ref[n + 1:]] if kept else [*ref[:n], *ref[n + 1:]]
        said = "left out" if not kept else f'said "{kept}"'
        instruction.append(Mutant(f"drop-instruction@{n}", "drop-instruction", MUST,
                                  f'the reply "{ref[n].say}" {said}, so the user never called {shown}', steps,
                                  call=(str(line.call), dict(line.args or {})), extra={"by": "user"}))
    yield from instruction


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _without_instruction(text: str, when: Mapping[str, Any]) -> str:
    """The reply without its sentences that hold the line's ``reply_includes`` words or its
    ``reply_matches`` pattern; "" when what is left would still set the line off, or nothing is."""
    words = when.get("reply_includes", [])
    words = [str(w).lower() for w in (words if isinstance(words, list) else [words])]
    pattern = when.get("reply_matches")

    def instructs(sentence: str) -> bool:
        if any(w in sentence.lower() for w in words):
            return True
        return pattern is not None and re.search(str(pattern), sentence, re.IGNORECASE) is not None

    kept = " ".join(x for x in _SENTENCE.split(text) if not instructs(x))
    if not kept:
        return ""
    low = kept.lower()
    still = words and all(w in low for w in words)
    if still or (pattern is not None and not words and re.search(str(pattern), kept, re.IGNORECASE)):
        return ""
    return kept
