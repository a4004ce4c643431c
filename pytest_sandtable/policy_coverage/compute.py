"""How much of a domain's policy a set of trials exercises: :func:`coverage`.

Every trial is replayed off the hot path (the engine records only which rules a call
broke): its calls run again, in order, on a fresh world with the task's ``given`` and
events, through the engine's own tool path (:func:`~pytest_sandtable.engine.handlers.run_tool`),
so each call's rules are evaluated on the world that call saw, with the engine's own
checkers (:func:`~pytest_sandtable.engine.rules.check_call`). Whether a call broke a
rule is taken from the trial's record (``calls[].violations``, and for
``never_disclose`` its violations); the replay says whether the rule *applied* and
whether it *could have fired*.

What "could have fired" is, per rule kind (each computed with the rule's own checker
on the world at the call, with the call's arguments changed as said):

- ``before``: a call of ``then`` it held for held only because a ``first`` succeeded
  earlier: the same call made before it breaks the rule, so every call it applied to.
- ``require``: another record of the table (one that exists at the call) fails the
  rule's ``where``: the call's key argument pointed at it breaks the rule (only when the
  key is exactly ``$name``; for ``each``, an array of that one record).
- ``limit``: the user said, before the call, a number that would break the bound
  (the bound read at the call): the value requested exceeds it.
- ``match``: the call's key argument of either side pointed at another existing record
  makes the two sides differ.
- ``never`` with ``when``: a value the condition names (``eq``, ``in``, the bound of
  ``gte``/``lte``, the bound ±1 of ``gt``/``lt``) put in the call breaks the rule;
  without ``when`` any call of its tool breaks it, so every call it applied to.
- ``never_disclose``: a tool result before an agent reply held a protected value
  (the agent had it in hand), found by the engine's disclosure scanner.

A rule *applies* to a call of its tool with valid arguments when what it reads
resolves (its records exist, its argument is given); ``never_disclose`` applies to
every agent reply. It is *held* on a call it applied to and the call did not break,
*broken* on a call that broke it. A ``never`` without ``when`` cannot hold on a call:
it is held by a trial of a task in which another trial broke it, and that made no
call of its tool. A ``limit``'s *boundary* pair is the value at the bound held
(``lte``/``gte``: the bound; ``lt``: the bound − 1 step; ``gt``: + 1 step) and the
value one step past it broken, for one of its bounds; the step is 1 for an
``integer`` argument or a whole-number bound, else one unit of the bound's last decimal.
"""

from __future__ import annotations

import json
import marshal
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from ..domain.conditions import ABSENT, argument_name, as_number, has_absent, resolve, resolve_conditions
from ..domain.model import Domain, Invariant, Task
from ..engine.faults import apply_event
from ..engine.handlers import HandlerState, run_tool
from ..engine.results import TrialResult
from ..engine.rules import DisclosureScanner, check_call, numbers_in
from ..engine.tools import coerce_args
from ..engine.trial import apply_given
from ..engine.world import World, seed_for

DECLARED = "declared"
APPLIED = "applied"
COULD_FIRE = "could-fire"
BOTH = "both-outcomes"
BOUNDARY = "boundary"
LEVELS = (DECLARED, APPLIED, COULD_FIRE, BOTH, BOUNDARY)
"""A rule's coverage levels, lowest first; a rule is at the highest it reached."""

# records of a table tried per call for `require` and `match` (could-fire): a bound on the
# cost of a big table, not on soundness (a rule found to fire is one that can)
MAX_RECORDS_TRIED = 1000

_LIMIT_OPS = ("lte", "lt", "gte", "gt")


@dataclass
class RuleCoverage:
    """What the trials did with one rule."""

    id: str
    kind: str
    soft: bool
    tool: str | None
    quote: str | None
    reached: int = 0  # calls of its tool with valid arguments (never_disclose: agent replies)
    applied: int = 0  # of those, the ones it applied to
    held: int = 0
    broken: int = 0
    could_fire: bool = False
    # limit: per bound op, [held at the bound, broken one step past it]
    boundary: dict[str, list[bool]] = field(default_factory=dict)
    tasks: set[str] = field(default_factory=set)  # tasks with a trial it applied to

    @property
    def level(self) -> str:
        if self.kind == "limit" and any(all(pair) for pair in self.boundary.values()):
            return BOUNDARY
        if self.held and self.broken:
            return BOTH
        if self.could_fire or self.broken:
            return COULD_FIRE
        return APPLIED if self.applied else DECLARED


@dataclass
class DomainCoverage:
    """A domain's policy coverage by a set of trials (see the module's docstring)."""

    domain: str
    trials: int
    rules: list[RuleCoverage]
    sentences: list[str]  # the policy's sentences
    unquoted: list[str]  # sentences no rule's source.quote quotes
    quotes_not_found: list[tuple[str, str]]  # (rule id, quote) found in no sentence of the policy
    tasks_without_rules: list[str]  # tasks with trials that exercise no rule
    tasks_not_run: list[str]  # tasks with no trial among the results
    notes: list[str] = field(default_factory=list)  # trials that could not be replayed to the end

    @property
    def unreached(self) -> list[str]:
        """Rules no trial reaches: no call of their tool (never_disclose: no agent reply)."""
        return [r.id for r in self.rules if not r.reached]

    def counts(self) -> dict[str, int]:
        """How many rules are at each level."""
        out = dict.fromkeys(LEVELS, 0)
        for r in self.rules:
            out[r.level] += 1
        return out


def coverage(domain: Domain, results: Iterable[TrialResult]) -> DomainCoverage:
    """The policy coverage of ``domain`` by ``results`` (any trials of its tasks: the
    references' replays, a run's results, mutants' replays); trials of another domain
    or of a task the domain does not have are left out."""
    acc = CoverageAccumulator(domain)
    for result in results:
        acc.add(result)
    return acc.result()


class CoverageAccumulator:
    """:func:`coverage` one trial at a time: :meth:`add` each trial as it comes (nothing
    of it is kept but the counts), then :meth:`result`. For a producer that cannot be
    iterated, such as ``mutate``'s replays (``mutate_domain(on_trial=acc.add)``)."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self._rules = {inv.id: RuleCoverage(inv.id, inv.kind, inv.soft, inv.tool, inv.source_quote)
                       for inv in domain.invariants}
        self._by_tool: dict[str, list[Invariant]] = {}
        for inv in domain.invariants:
            if inv.tool is not None:
                self._by_tool.setdefault(inv.tool, []).append(inv)
        self._disclose = [inv for inv in domain.invariants if inv.kind == "never_disclose"]
        self._scanner = DisclosureScanner(domain) if self._disclose else None
        self._tasks = {t.id: t for t in domain.tasks}
        self._exercised: dict[str, bool] = {}
        self._unconditional = [inv for inv in domain.invariants if inv.kind == "never" and not inv.spec.get("when")]
        # never without when: rule -> task -> [trials of the task that did not call the tool, that did]
        self._per_task: dict[str, dict[str, list[int]]] = {inv.id: {} for inv in self._unconditional}
        self._notes: list[str] = []
        self._trials = 0
        self._replays: dict[bytes, _Replayed] = {}  # what each distinct trial's replay did

    def add(self, result: TrialResult) -> None:
        """Count one trial (left out when of another domain or of a task the domain lacks)."""
        task = self._tasks.get(result.task)
        if result.domain != self.domain.name or task is None:
            return
        self._trials += 1
        touched = self._replayed(task, result)
        self._exercised[task.id] = self._exercised.get(task.id, False) or touched
        for inv in self._unconditional:
            called = any(c.get("tool") == inv.tool and inv.id in (c.get("violations") or ()) for c in result.calls)
            self._per_task[inv.id].setdefault(task.id, [0, 0])[int(called)] += 1

    def _replayed(self, task: Task, result: TrialResult) -> bool:
        """:func:`_replay` of the trial, or what the replay of the same trial did (its
        task, transcript, calls and violations alike: the k trials of a task an agent
        played the same way), when no handler read the seed in it, or read the same."""
        try:
            key: bytes | None = marshal.dumps((task.id, result.transcript, result.calls,
                                               [(v.invariant, v.turn, v.call) for v in result.violations]), 2)
        except (ValueError, TypeError, RecursionError):
            key = None
        done = self._replays.get(key) if key is not None else None
        if done is not None and (done.seed is None or done.seed == result.seed):
            done.apply(self._rules, task.id)
            return done.touched
        before = {k: _counts(rc) for k, rc in self._rules.items()}
        notes = len(self._notes)
        handlers = HandlerState(self.domain, task, result.seed)
        touched = _replay(self.domain, task, result, self._rules, self._by_tool, self._disclose, self._scanner,
                          self._notes, handlers)
        if key is not None and len(self._notes) == notes and len(self._replays) < _REPLAYS_KEPT:
            # (a replay that left a note names its trial: it is made again for every trial)
            self._replays[key] = _Replayed.between(before, self._rules, task.id, touched,
                                                   result.seed if handlers.shared.seeded else None)
        return touched

    def result(self) -> DomainCoverage:
        """The coverage of the trials added so far."""
        domain = self.domain
        rules = {k: replace(r, boundary={op: list(p) for op, p in r.boundary.items()}, tasks=set(r.tasks))
                 for k, r in self._rules.items()}
        for inv in self._unconditional:
            rules[inv.id].held = sum(quiet for quiet, called in self._per_task[inv.id].values() if called)
        sentences = policy_sentences(domain.policy)
        unquoted, not_found = _quoted(sentences, domain.invariants)
        return DomainCoverage(
            domain=domain.name,
            trials=self._trials,
            rules=list(rules.values()),
            sentences=sentences,
            unquoted=unquoted,
            quotes_not_found=not_found,
            tasks_without_rules=[t.id for t in domain.tasks if t.id in self._exercised and not self._exercised[t.id]],
            tasks_not_run=[t.id for t in domain.tasks if t.id not in self._exercised],
            notes=list(self._notes),
        )


_REPLAYS_KEPT = 4096


def _counts(rc: RuleCoverage) -> tuple[int, int, int, int, bool, dict[str, tuple[bool, ...]]]:
    return (rc.reached, rc.applied, rc.held, rc.broken, rc.could_fire,
            {op: tuple(pair) for op, pair in rc.boundary.items()})


@dataclass
class _Replayed:
    """What one trial's replay did to the rules' counts, to count again for a trial that
    is the same: counts added, and the flags it set (they are only ever set, never
    cleared, so setting them again is what a replay would do)."""

    touched: bool
    seed: int | None  # the seed a handler read in the replay (None: none read it)
    changes: list[tuple[str, tuple[int, int, int, int], bool, list[tuple[str, int]], bool]]

    @classmethod
    def between(cls, before: Mapping[str, tuple[Any, ...]], rules: Mapping[str, RuleCoverage], task: str,
                touched: bool, seed: int | None) -> _Replayed:
        changes = []
        for k, rc in rules.items():
            reached, applied, held, broken, could_fire, boundary = before[k]
            added = (rc.reached - reached, rc.applied - applied, rc.held - held, rc.broken - broken)
            fired = rc.could_fire and not could_fire
            points = [(op, i) for op, pair in rc.boundary.items() for i, hit in enumerate(pair)
                      if hit and not (op in boundary and boundary[op][i])]
            if any(added) or fired or points or task in rc.tasks:
                changes.append((k, added, fired, points, task in rc.tasks))
        return cls(touched, seed, changes)

    def apply(self, rules: Mapping[str, RuleCoverage], task: str) -> None:
        for k, added, fired, points, in_task in self.changes:
            rc = rules[k]
            rc.reached += added[0]
            rc.applied += added[1]
            rc.held += added[2]
            rc.broken += added[3]
            if fired:
                rc.could_fire = True
            for op, i in points:
                rc.boundary.setdefault(op, [False, False])[i] = True
            if in_task:
                rc.tasks.add(task)


def _replay(
    domain: Domain,
    task: Task,
    result: TrialResult,
    rules: dict[str, RuleCoverage],
    by_tool: Mapping[str, list[Invariant]],
    disclose: Sequence[Invariant],
    scanner: DisclosureScanner | None,
    notes: list[str],
    handlers: HandlerState,
) -> bool:
    """Replay one trial, counting what each rule did; whether it exercised any rule."""
    world = World(seed_for(domain))
    touched = False
    try:
        apply_given(world, task)
    except Exception as e:
        notes.append(f"{task.id} trial {result.trial}: its given could not be applied: {e}")
        return False
    succeeded: list[tuple[str, Mapping[str, Any]]] = []
    shown = _Seen()  # what the trial showed so far
    seen: set[str] = set()  # never_disclose rules whose protected value a tool result held
    broken_at = {(v.invariant, v.turn) for v in result.violations if v.call is None}
    for entry in result.transcript:
        role = entry.get("role")
        if role == "user":
            text = str(entry.get("text", ""))
            shown.user_said(text)
            continue
        if role == "agent":
            for inv in disclose:
                rc = rules[inv.id]
                rc.reached += 1
                rc.applied += 1
                rc.tasks.add(task.id)
                if inv.id in seen:
                    rc.could_fire = True
                    touched = True
                if (inv.id, entry.get("turn")) in broken_at:
                    rc.broken += 1
                else:
                    rc.held += 1
            continue
        if role == "event":
            try:
                apply_event(world, task.events[entry["event"] - 1])
            except Exception as e:
                notes.append(f"{task.id} trial {result.trial}: event {entry.get('event')} could not be replayed: {e}")
                return touched
            continue
        if role != "tool":
            continue
        at = entry.get("call")
        if not isinstance(at, int) or not 0 <= at < len(result.calls):
            notes.append(f"{task.id} trial {result.trial}: its transcript names call {at}, which it does not hold")
            return touched
        call = result.calls[at]
        tool = domain.tools.get(call.get("tool", ""))
        if tool is None:
            continue
        try:
            args = coerce_args(tool, call["args"])
        except Exception:
            continue  # invalid arguments: the engine checked no rule on it
        broke = set(call.get("violations") or ())
        for inv in by_tool.get(tool.name, ()):
            if _evaluate(domain, inv, rules[inv.id], tool.name, args, world, succeeded,
                         shown, inv.id in broke, task):
                touched = True
        fault = call.get("fault") or {}
        value: Any = call.get("result")
        if not (fault.get("kind") and not fault.get("after_commit")):  # the tool ran
            try:
                ran = run_tool(tool, args, world, handlers, call["index"])
            except Exception as e:
                notes.append(f"{task.id} trial {result.trial}: call {call['index'] + 1} {tool.name} could not be "
                             f"replayed: {type(e).__name__}: {e}")
                return touched
            if ran.ok:
                value = ran.value
        if call.get("ok"):
            succeeded.append((tool.name, args))
        if value is not None:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            shown.add(text)
            if scanner is not None:
                seen.update(inv.id for inv, _ in scanner.scan(text, world))
    return touched


def _evaluate(
    domain: Domain,
    inv: Invariant,
    rc: RuleCoverage,
    tool: str,
    args: dict[str, Any],
    world: World,
    succeeded: Sequence[tuple[str, Mapping[str, Any]]],
    seen: _Seen,
    broke: bool,
    task: Task,
) -> bool:
    """Count one call of the rule's tool; whether the rule applied to it."""
    rc.reached += 1
    if not broke and not _applies(domain, inv, args, world):
        return False
    rc.applied += 1
    rc.tasks.add(task.id)
    if broke:
        rc.broken += 1
    elif not (inv.kind == "never" and not inv.spec.get("when")):
        rc.held += 1
    if inv.kind == "limit":
        _limit_points(domain, inv, rc, tool, args, world, seen, broke)
    elif not rc.could_fire and not broke:
        rc.could_fire = _could_fire(domain, inv, tool, args, world, succeeded, seen)
    return True


class _Seen:
    """What a trial showed before a call: the numbers the user said, the user's
    messages, and the text of those and of every tool result."""

    __slots__ = ("heard", "said", "shown", "words")

    def __init__(self) -> None:
        self.said: list[float] = []
        self.heard: list[str] = []
        self.shown: list[str] = []
        self.words: set[str] = set()  # every word of what was shown, and each without its end punctuation

    def user_said(self, text: str) -> None:
        self.said.extend(numbers_in(text))
        self.heard.append(text)
        self.add(text)

    def add(self, text: str) -> None:
        self.shown.append(text)
        for word in _WORD_OF_TEXT.findall(text):
            self.words.add(word)
            self.words.add(word.rstrip(".?!"))

    def numbers(self, args: Mapping[str, Any], arg: str) -> list[float]:
        """The numbers the user said that are not another argument of the call (an MC
        number, a load id's digits): the values the user could have asked for."""
        others = {n for k, v in args.items() if k != arg for n in _as_numbers(v)}
        return [n for n in self.said if n not in others]

    def shows(self, key: Any) -> bool:
        """Whether the key, as text, appeared as a word in what the trial showed."""
        text = str(key)
        if not text:
            return False
        if _WORD_OF_TEXT.fullmatch(text):
            return text in self.words
        pattern = re.compile(r"(?<![\w-])" + re.escape(text) + r"(?![\w-])")
        return any(text in s and pattern.search(s) for s in self.shown)


# a word of a text or of a tool result's JSON, as a key is written: what JSON and prose put
# around a key (spaces, quotes, brackets, commas, colons) ends it
_WORD_OF_TEXT = re.compile(r"[^\s\"',:;(){}\[\]<>]+")


def _as_numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, str):
        return list(numbers_in(value))
    return []


def _applies(domain: Domain, inv: Invariant, args: Mapping[str, Any], world: World) -> bool:
    """Whether the rule judges this call: what it reads resolves."""
    s = inv.spec
    if inv.kind in ("before",):
        return True
    if inv.kind == "never":
        when = s.get("when")
        return not when or not has_absent(resolve_conditions(when, args, world.get))
    if inv.kind == "require":
        if "each" in s:
            items = args.get(s["each"])
            return isinstance(items, list) and any(
                _resolves(s["record"], {**args, "item": x}, world) for x in items)
        return _resolves(s["record"], args, world)
    if inv.kind == "match":
        return _side(s["left"], args, world) is not ABSENT and _side(s["right"], args, world) is not ABSENT
    if inv.kind == "limit":
        value = args.get(s["arg"], ABSENT)
        if value is ABSENT or as_number(value) is None:
            return False
        return any(_bound_now(s[op], args, world) is not None for op in _LIMIT_OPS if op in s)
    return False


def _resolves(ref: Mapping[str, Any], args: Mapping[str, Any], world: World) -> bool:
    key = resolve(ref.get("key"), args)
    return key is not ABSENT and not isinstance(key, (dict, list)) and world.get(ref["table"], key) is not None


def _side(ref: Any, args: Mapping[str, Any], world: World) -> Any:
    """A `match` side's value now, ABSENT when it does not resolve."""
    if isinstance(ref, dict) and "table" in ref:
        if not _resolves(ref, args, world):
            return ABSENT
        row = world.get(ref["table"], resolve(ref.get("key"), args))
        return ABSENT if row is None or row.get(ref["field"]) is None else row[ref["field"]]
    return resolve(ref, args)


def _bound_now(ref: Any, args: Mapping[str, Any], world: World) -> float | None:
    value = _side(ref, args, world)
    return None if value is ABSENT else as_number(value)


def limit_step(domain: Domain, inv: Invariant, bound: float) -> float:
    """One step of a `limit` rule's value: 1 for an integer argument or a whole-number
    bound, else one unit of the bound's last decimal."""
    tool = domain.tools.get(inv.spec["tool"])
    param = tool.params.get(inv.spec["arg"]) if tool is not None else None
    if (param is not None and param.type == "integer") or float(bound).is_integer():
        return 1.0
    text = repr(float(bound))
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 2
    return float(10 ** -min(decimals, 6))


_HOLDS: dict[str, Callable[[float, float], bool]] = {
    "lte": operator.le, "lt": operator.lt, "gte": operator.ge, "gt": operator.gt,
}


def _limit_points(
    domain: Domain, inv: Invariant, rc: RuleCoverage, tool: str, args: Mapping[str, Any], world: World,
    seen: _Seen, broke: bool,
) -> None:
    """A `limit` call: could it fire (the user asked for a value past a bound), and the
    boundary pair of each bound."""
    s = inv.spec
    value = as_number(args.get(s["arg"]))
    if value is None:
        return
    if broke:
        rc.could_fire = True
    for op in _LIMIT_OPS:
        if op not in s:
            continue
        bound = _bound_now(s[op], args, world)
        if bound is None:
            continue
        holds = _HOLDS[op]
        if not rc.could_fire and any(
            not holds(n, bound) and _near(n, bound) for n in seen.numbers(args, s["arg"])
        ):
            rc.could_fire = True
        step = limit_step(domain, inv, bound)
        at = {"lte": bound, "lt": bound - step, "gte": bound, "gt": bound + step}[op]
        past = {"lte": bound + step, "lt": bound, "gte": bound - step, "gt": bound}[op]
        pair = rc.boundary.setdefault(op, [False, False])
        close = step / 1000
        if holds(value, bound) and math.isclose(value, at, abs_tol=close):
            pair[0] = True
        if not holds(value, bound) and math.isclose(value, past, abs_tol=close):
            pair[1] = True
    if not rc.could_fire:  # the same value against another record the trial showed
        rc.could_fire = any(
            check_call(inv, tool, changed, world, ()) for changed in _variants(domain, inv, args, world, seen)
        )


def _near(n: float, bound: float) -> bool:
    """Whether a number the user said is of the bound's order (within a factor of 10):
    a value that could be asked for, not a year, a phone number or an id."""
    if bound == 0:
        return abs(n) < 10
    return abs(bound) / 10 < abs(n) < abs(bound) * 10


def _could_fire(
    domain: Domain, inv: Invariant, tool: str, args: dict[str, Any], world: World,
    succeeded: Sequence[tuple[str, Mapping[str, Any]]], seen: _Seen,
) -> bool:
    """Whether the rule, which held on this call, would break on the call changed as
    the module's docstring says for its kind (checked with the rule's own checker)."""
    s = inv.spec
    if inv.kind == "before" or (inv.kind == "never" and not s.get("when")):
        return True
    for changed in _variants(domain, inv, args, world, seen):
        if check_call(inv, tool, changed, world, succeeded):
            return True
    return False


def _variants(
    domain: Domain, inv: Invariant, args: Mapping[str, Any], world: World, seen: _Seen
) -> Iterable[dict[str, Any]]:
    s = inv.spec
    if inv.kind == "require":
        name = argument_name(s["record"].get("key"))
        if "each" in s:
            if name == "item":
                for key in _keys(domain, world, seen, s["record"]["table"]):
                    yield {**args, s["each"]: [key]}
        elif name is not None:
            for key in _keys(domain, world, seen, s["record"]["table"]):
                yield {**args, name: key}
    elif inv.kind == "match":
        for side in (s["left"], s["right"]):
            name = argument_name(side.get("key")) if isinstance(side, dict) and "table" in side else None
            if name is not None:
                for key in _keys(domain, world, seen, side["table"]):
                    yield {**args, name: key}
    elif inv.kind == "limit":
        for op in _LIMIT_OPS:
            ref = s.get(op)
            if not (isinstance(ref, dict) and "table" in ref):
                continue
            name = argument_name(ref.get("key"))
            if name is not None:
                for key in _keys(domain, world, seen, ref["table"]):
                    yield {**args, name: key}
    elif inv.kind == "never":
        for fieldname, cond in (s.get("when") or {}).items():
            for value in _named_values(cond, seen.heard):
                yield {**args, fieldname: value}


def _keys(domain: Domain, world: World, seen: _Seen, table: str) -> list[Any]:
    """The keys of a table's records at the call (at most :data:`MAX_RECORDS_TRIED`)
    that the trial showed before it: the records a call could point at."""
    t = domain.tables.get(table)
    if t is None:
        return []
    rows = islice(world.rows(table), MAX_RECORDS_TRIED)
    return [row[t.key] for row in rows if t.key in row and seen.shows(row[t.key])]


def _named_values(cond: Any, heard: Sequence[str]) -> list[Any]:
    """The values a `never` condition names, those just past its bounds, and for a
    ``matches`` or ``contains`` the user's messages (the user's words passed on)."""
    if not isinstance(cond, dict):
        return [] if isinstance(cond, str) and cond.startswith("$") else [cond]
    out: list[Any] = []
    for op, v in cond.items():
        if op in ("eq", "ieq"):
            out.append(v)
        elif op == "in" and isinstance(v, list):
            out.extend(v)
        elif op in ("gte", "lte"):
            out.append(v)
        elif op in ("gt", "lt") and isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(v + 1 if op == "gt" else v - 1)
        elif op in ("matches", "contains"):
            out.extend(heard)
    return [v for v in out if not (isinstance(v, str) and v.startswith("$"))]


# --------------------------------------------------------------------------- the policy's sentences

_PARAGRAPH = re.compile(r"\n\s*\n")
_LIST_ITEM = re.compile(r"\n\s*(?=(?:\d+[.)]|[-*•])\s)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_MARKER = re.compile(r"^(?:\d+[.)]|[-*•])\s+")
_WS = re.compile(r"\s+")


def policy_sentences(policy: str) -> list[str]:
    """The policy's sentences, whitespace made single spaces and list markers (``1.``,
    ``-``) dropped: each piece ending in ``.``, ``!`` or ``?``, and a paragraph's last
    piece of four words or more (a heading above a list is not a sentence)."""
    out: list[str] = []
    for paragraph in _PARAGRAPH.split(policy):
        items = _LIST_ITEM.split(paragraph)
        for j, item in enumerate(items):
            pieces = [_MARKER.sub("", _WS.sub(" ", p).strip()) for p in _SENTENCE_END.split(item.strip())]
            pieces = [p for p in pieces if p and not _MARKER.fullmatch(p + " ")]
            for i, piece in enumerate(pieces):
                last = i == len(pieces) - 1 and j == len(items) - 1
                if piece[-1] in ".!?" or (last and len(piece.split()) >= 4):
                    out.append(piece)
    return out


def _flat(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


def _quoted(sentences: Sequence[str], invariants: Sequence[Invariant]) -> tuple[list[str], list[tuple[str, str]]]:
    """The sentences no rule's quote quotes, and the quotes (by rule) found in no
    sentence. A quote quotes each sentence that holds one of its own sentences (its
    final punctuation aside, case and whitespace aside): a quote may be part of a
    sentence, or span several."""
    flat = [_flat(s) for s in sentences]
    covered = [False] * len(sentences)
    not_found: list[tuple[str, str]] = []
    for inv in invariants:
        if not inv.source_quote:
            continue
        parts = [_flat(p).rstrip(".!?;:, ") for p in _SENTENCE_END.split(inv.source_quote.strip())]
        missing = False
        for part in filter(None, parts):
            hits = [i for i, s in enumerate(flat) if part in s]
            for i in hits:
                covered[i] = True
            missing = missing or not hits
        if missing:
            not_found.append((inv.id, inv.source_quote))
    return [s for s, c in zip(sentences, covered) if not c], not_found
