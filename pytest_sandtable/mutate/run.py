"""Replay each mutant of each task and say what became of it (docs/mutate.md).

:func:`mutate_domain` replays every task's reference once (the baseline every mutant
is compared with), then each of its mutants (:mod:`.operators`) with the reference
agent against the task's scripted user, through the engine's own trial and grading,
on one event loop. Each mutant ends in one state, as Stryker names them:

- ``killed``: the mutant's trial failed; ``killed_by`` are its failed checks' ids;
- ``equivalent``: it passed with the reference's final world, replies and violations;
- ``accepted``: it passed and the task's ``accept:`` names it (with a reason);
- ``survived``: it passed otherwise;
- ``invalid``: it could not run (the rewrite cannot be made, or the trial errored).

The replays are also trials of the domain's policy: ``on_trial`` is given each one as
it is made (each reference's, then each mutant's that ran: an invalid mutant's is not),
and with ``coverage=True`` the report's :attr:`DomainReport.coverage` is the policy
coverage of them all (:mod:`pytest_sandtable.policy_coverage`), counted as they come:
no trial is kept.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.conditions import format_value, row_matches
from ..domain.errors import Problem
from ..domain.model import Domain, RefStep, Task
from ..engine.reference import ReferenceAgent
from ..engine.results import ERRORED, FAILED, PASSED, TrialResult
from ..engine.scripted_user import ScriptedUser
from ..engine.trial import _graded_trial
from ..policy_coverage import CoverageAccumulator, DomainCoverage, coverage_json
from ..engine.api import UserReply, UserTurn
from .operators import EXPECTED, MUST, OPERATORS, Mutant, generate
from .writes import calls_that_wrote

KILLED = "killed"
SURVIVED = "survived"
EQUIVALENT = "equivalent"
ACCEPTED = "accepted"
INVALID = "invalid"
STATES = (KILLED, SURVIVED, EQUIVALENT, ACCEPTED, INVALID)


@dataclass
class MutantResult:
    id: str
    operator: str
    expected: str  # must | may
    state: str
    diff: str
    killed_by: list[str] = field(default_factory=list)
    reason: str = ""  # invalid: why; accepted: the accept entry's reason
    suggestion: str = ""  # survived: an expectation that would catch it

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "operator": self.operator, "expected": self.expected, "state": self.state,
            "diff": self.diff, "killed_by": self.killed_by, "reason": self.reason or None,
            "suggestion": self.suggestion or None,
        }


def _counts(mutants: Sequence[MutantResult]) -> dict[str, int]:
    out = {s: 0 for s in STATES}
    for m in mutants:
        out[m.state] += 1
    out["generated"] = len(mutants)
    return out


def score_of(counts: dict[str, int]) -> float | None:
    """killed / (generated - invalid - equivalent - accepted); None when nothing is left."""
    scored = counts["generated"] - counts[INVALID] - counts[EQUIVALENT] - counts[ACCEPTED]
    return counts[KILLED] / scored if scored > 0 else None


@dataclass
class TaskReport:
    task: str
    line: int
    mutants: list[MutantResult] = field(default_factory=list)
    skipped: str | None = None  # not mutated: why
    checks: dict[str, int] = field(default_factory=dict)  # the task's own check ids -> mutants killed

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.mutants)

    @property
    def score(self) -> float | None:
        return score_of(self.counts)

    @property
    def weak(self) -> bool:
        """A must-be-caught mutant survived."""
        return any(m.state == SURVIVED and m.expected == MUST for m in self.mutants)

    def as_json(self) -> dict[str, Any]:
        return {
            "task": self.task, "line": self.line, "skipped": self.skipped, "counts": self.counts,
            "score": self.score, "weak": self.weak, "checks": self.checks,
            "mutants": [m.as_json() for m in self.mutants],
        }


@dataclass
class DomainReport:
    domain: str
    file: str
    tasks: list[TaskReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # accept entries naming no generated mutant
    rules: dict[str, int] = field(default_factory=dict)  # hard rule id -> mutants it killed
    coverage: DomainCoverage | None = None  # policy coverage by the references and the valid mutants

    @property
    def mutants(self) -> list[MutantResult]:
        return [m for t in self.tasks for m in t.mutants]

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.mutants)

    @property
    def score(self) -> float | None:
        return score_of(self.counts)

    @property
    def weak_tasks(self) -> list[str]:
        return [t.task for t in self.tasks if t.weak]

    def by_operator(self) -> list[tuple[str, str, dict[str, int]]]:
        """(operator, expected, counts) for each operator that made a mutant, in operator order."""
        out = []
        for op, expected in OPERATORS:
            ms = [m for m in self.mutants if m.operator == op]
            if ms:
                out.append((op, expected, _counts(ms)))
        return out

    def decorative(self) -> list[str]:
        """Checks that killed no mutant: ``rule <id>`` and ``<task>: <check id>``."""
        if not self.mutants:  # nothing ran that a check could kill
            return []
        out = [f"rule {r}" for r, n in self.rules.items() if n == 0]
        out += [f"{t.task}: {c}" for t in self.tasks for c, n in t.checks.items() if n == 0]
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "domain": self.domain, "file": self.file, "counts": self.counts, "score": self.score,
            "weak_tasks": self.weak_tasks,
            "problems": [{"file": p.file, "line": p.line, "column": p.col, "key": p.path, "severity": "error",
                          "message": p.message, "task": None} for p in self.problems],
            "operators": [{"operator": op, "expected": ex, "counts": c} for op, ex, c in self.by_operator()],
            "rules": self.rules, "decorative": self.decorative(),
            "tasks": [t.as_json() for t in self.tasks],
            **({"coverage": coverage_json(self.coverage)} if self.coverage is not None else {}),
        }


OnTrial = Callable[[TrialResult], object]
"""Given each replay that ran: a reference's, or a valid mutant's."""


class MutantAgent(ReferenceAgent):
    """The reference agent replaying a mutant's steps in place of the task's reference."""

    name = "mutant"

    def for_task(self, task: Task) -> ReferenceAgent:
        return self


class MutantUser(ScriptedUser):
    """The scripted user of a mutant of the user's side (dual control): some of its script
    lines left out (``drop``), and a user-tool call (``add``) made on its first reply."""

    def __init__(self, drop: Collection[int] = (), add: RefStep | None = None) -> None:
        self.drop = tuple(drop)
        self.add = add

    def next_line(self, turn: UserTurn) -> tuple[int | None, UserReply]:
        state = turn.state
        said = state.get("script_said")
        if said is None:
            said = state["script_said"] = set()
        said.update(self.drop)
        if self.add is not None and not state.get("mutant_added") and any(m["role"] == "user" for m in turn.messages):
            state["mutant_added"] = True
            turn.call(str(self.add.call), dict(self.add.args))
        return super().next_line(turn)


async def _replay(domain: Domain, task: Task, mutant: Mutant | None) -> TrialResult:
    """The task's reference (``mutant`` None), or a mutant, replayed and graded."""
    agent = ReferenceAgent() if mutant is None or mutant.steps is None else MutantAgent(mutant.steps)
    user = ScriptedUser() if mutant is None or not (mutant.user_drop or mutant.user_add) else \
        MutantUser(mutant.user_drop, mutant.user_add)
    return await _graded_trial(domain, task, agent, user, 1, 1, 0, "reference", "scripted", None, "",
                               None, False)


def _signature(r: TrialResult) -> str:
    replies = [e.get("text", "") for e in r.transcript if e["role"] == "agent"]
    violations = [(v.invariant, v.detail) for v in r.violations]
    return json.dumps([r.diff, replies, violations], sort_keys=True, default=str, ensure_ascii=False)


def mutate_domain(domain: Domain, *, on_trial: OnTrial | None = None, coverage: bool = False,
                  tasks: Collection[str] | None = None) -> DomainReport:
    """Every task's mutants replayed and classified (see the module's docstring); with
    ``tasks``, only the tasks of those ids (a pytest run's selection)."""
    return asyncio.run(amutate_domain(domain, on_trial=on_trial, coverage=coverage, tasks=tasks))


async def amutate_domain(domain: Domain, *, on_trial: OnTrial | None = None, coverage: bool = False,
                         tasks: Collection[str] | None = None) -> DomainReport:
    file = domain.path or "<string>"
    report = DomainReport(domain.name, file)
    report.rules = {inv.id: 0 for inv in domain.invariants if not inv.soft}
    acc = CoverageAccumulator(domain) if coverage else None
    sink = _sink(on_trial, acc)
    for index, task in enumerate(domain.tasks):
        if tasks is not None and task.id not in tasks:
            continue
        tr, mutant_ids = await _mutate_task(domain, task, sink)
        report.tasks.append(tr)
        for m in tr.mutants:
            for c in m.killed_by:
                if c in report.rules:
                    report.rules[c] += 1
        report.problems += _accept_problems(file, index, task, mutant_ids)
    if acc is not None:
        report.coverage = acc.result()
    return report


def _sink(on_trial: OnTrial | None, acc: CoverageAccumulator | None) -> OnTrial | None:
    """One callback for the caller's ``on_trial`` and the coverage accumulator."""
    if acc is None or on_trial is None:
        return on_trial if acc is None else acc.add

    def both(result: TrialResult) -> None:
        acc.add(result)
        on_trial(result)

    return both


def _accept_entries(task: Task) -> list[Any]:
    return list(getattr(task, "accept", ()) or ())


def _accept_problems(file: str, index: int, task: Task, ids: list[str] | None) -> list[Problem]:
    out: list[Problem] = []
    if ids is None:  # not mutated: nothing to name
        return out
    for j, entry in enumerate(_accept_entries(task)):
        name = getattr(entry, "mutant", None)
        if name in ids:
            continue
        pos = getattr(entry, "pos", None) or task.pos
        listed = ", ".join(ids) if ids else "(none)"
        out.append(Problem(file, pos.line if pos else None, pos.col if pos else None,
                           f"tasks[{index}].accept[{j}].mutant",
                           f"no mutant '{name}' was generated for task '{task.id}'; the mutants are: {listed}"))
    return out


async def _mutate_task(domain: Domain, task: Task, sink: OnTrial | None) -> tuple[TaskReport, list[str] | None]:
    tr = TaskReport(task.id, task.pos.line if task.pos else 0)
    if not task.reference:
        tr.skipped = "no reference: nothing to mutate"
        return tr, None
    if not task.user.opening and not task.user.script:
        tr.skipped = "the scripted user has nothing to say: give user.opening or user.script"
        return tr, None
    ref = await _replay(domain, task, None)
    if sink is not None:  # as policy_coverage.reference_results: every reference replayed, whatever its verdict
        sink(ref)
    if ref.verdict == ERRORED:
        tr.skipped = f"the reference trial errored: {ref.error}"
        return tr, None
    if ref.verdict == FAILED:
        failed = ", ".join(c.id for c in ref.failed_checks)
        tr.skipped = f"the reference fails its own task ({failed}): fix the task first (see lint)"
        return tr, None
    tr.checks = {c.id: 0 for c in ref.checks}
    accepted = {getattr(e, "mutant", None): str(getattr(e, "reason", "")) for e in _accept_entries(task)}
    signature = _signature(ref)
    mutants = generate(domain, task, ref, calls_that_wrote(domain, task, ref))
    for mutant in mutants:
        result = await _classify(domain, task, mutant, ref, signature, accepted, sink)
        tr.mutants.append(result)
        for c in result.killed_by:
            if c in tr.checks:
                tr.checks[c] += 1
    return tr, [m.id for m in mutants]


async def _classify(
    domain: Domain, task: Task, mutant: Mutant, ref: TrialResult, signature: str, accepted: dict[Any, str],
    sink: OnTrial | None = None,
) -> MutantResult:
    out = MutantResult(mutant.id, mutant.operator, EXPECTED[mutant.operator], INVALID, mutant.diff)
    if mutant.steps is None:
        out.reason = mutant.invalid or "the rewrite cannot be made"
        return out
    try:
        result = await _replay(domain, task, mutant)
    except Exception as e:  # the engine never raises for a trial; should it, this mutant only is lost
        out.reason = f"{type(e).__name__}: {e}"
        return out
    if result.verdict == ERRORED:  # invalid: its trial is not one of the policy's (nor given to sink)
        out.reason = result.error or "the trial errored"
        return out
    if sink is not None:
        sink(result)
    if result.verdict != PASSED:
        out.state = KILLED
        out.killed_by = [c.id for c in result.failed_checks]
    elif _signature(result) == signature:
        out.state = EQUIVALENT
    elif mutant.id in accepted:
        out.state = ACCEPTED
        out.reason = accepted[mutant.id]
    else:
        out.state = SURVIVED
        out.suggestion = suggest(task, mutant, ref, result)
    return out


# --------------------------------------------------------------------------- suggestions

_PLAIN = re.compile(r"[A-Za-z_][\w.\-/ ]*")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def flow(v: Any) -> str:
    """A value as YAML flow text that reads back as the same value."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{flow(k)}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    if isinstance(v, str):
        if _PLAIN.fullmatch(v) and v == v.strip() and v.lower() not in _YAML_WORDS and ": " not in v \
                and " #" not in v:
            return v
        return json.dumps(v, ensure_ascii=False)
    return format_value(v)


def _key_field(domain_tables: dict[str, str], table: str) -> str:
    return domain_tables.get(table, "")


def suggest(task: Task, mutant: Mutant, ref: TrialResult, result: TrialResult) -> str:
    """An expectation that would catch this survivor, as pasteable YAML: from what the
    reference's final world has that the mutant's lacks (or the other way round), else from
    the call the mutant removed, changed or added."""
    found = _world_suggestion(task, ref.diff, result.diff)
    if found:
        return found
    if mutant.operator in ("never", "not-called"):
        added = [c for c in result.calls if c["tool"] not in {x["tool"] for x in ref.calls}]
        tool = added[0]["tool"] if added else mutant.id.split("@", 1)[1]
        return f"add not_called: {flow({'tool': tool})}"
    if mutant.operator == "leak":
        value = mutant.extra.get("value")
        return (f"rule {mutant.id.split('@', 1)[1]} did not see {flow(value)} in the reply: "
                "check the rule's values and where")
    if mutant.operator == "spam":
        return "no check reads what the replies say: add reply_includes or a never_disclose rule"
    said = _new_word(ref, result)
    if said is not None:
        return f"add reply_includes: {flow([said])}"
    if mutant.call is not None:
        tool, args = mutant.call
        arg = mutant.extra.get("arg")
        shown = {arg: args[arg]} if arg in args else args
        return f"add called: {flow({'tool': tool, 'args': shown} if shown else {'tool': tool})}"
    return "no suggestion: the mutant changes neither the world nor a call the checks can see"


_WORD = re.compile(r"[A-Za-z][A-Za-z-]{3,}")


def _new_word(ref: TrialResult, result: TrialResult) -> str | None:
    """A word the reference's replies say and the mutant's never do (the longest, first)."""
    def words(r: TrialResult) -> list[str]:
        return [w.lower() for e in r.transcript if e["role"] == "agent" for w in _WORD.findall(e.get("text", ""))]

    theirs = set(words(result))
    missing = [w for w in words(ref) if w not in theirs]
    return max(missing, key=len) if missing else None


def _rows_by_table(diff: dict[str, Any], kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in diff.get(kind, []):
        out.setdefault(entry["table"], []).append(entry)
    return out


def _matching(rows: Sequence[dict[str, Any]], where: dict[str, Any]) -> int:
    return sum(1 for r in rows if row_matches(r["row"], where))


def _where_of(entry: dict[str, Any]) -> dict[str, Any]:
    return {f: v for f, v in entry["row"].items() if v != entry["key"]}


def _world_suggestion(task: Task, ref_diff: dict[str, Any], mut_diff: dict[str, Any]) -> str | None:
    ref_created, mut_created = _rows_by_table(ref_diff, "created"), _rows_by_table(mut_diff, "created")
    for table, rows in ref_created.items():
        for entry in rows:
            where = _where_of(entry)
            want = _matching(rows, where)
            theirs = mut_created.get(table, [])
            if _matching(theirs, where) != want:
                narrow = _narrowed(task, table, where, theirs, len(rows))
                return narrow or f"add state: {flow({'table': table, 'where': where, 'count': want})}"
    for table, rows in mut_created.items():
        for entry in rows:
            where = _where_of(entry)
            want = _matching(ref_created.get(table, []), where)
            if _matching(rows, where) != want:
                return f"add state: {flow({'table': table, 'where': where, 'count': want})}"
    ref_changed = {(c["table"], format_value(c["key"])): c for c in ref_diff.get("changed", [])}
    mut_changed = {(c["table"], format_value(c["key"])): c for c in mut_diff.get("changed", [])}
    for k, c in ref_changed.items():
        theirs = mut_changed.get(k, {}).get("fields", {})
        fields = {f: v["after"] for f, v in c["fields"].items()
                  if theirs.get(f, {}).get("after", object()) != v["after"]}
        if fields:
            return _fields_suggestion(task, c["table"], c["key"], fields)
    for k, c in mut_changed.items():
        ours = ref_changed.get(k, {}).get("fields", {})
        fields = {f: v["before"] for f, v in c["fields"].items() if f not in ours}
        if fields:
            return _fields_suggestion(task, c["table"], c["key"], fields)
    ref_deleted = {(d["table"], format_value(d["key"])) for d in ref_diff.get("deleted", [])}
    mut_deleted = {(d["table"], format_value(d["key"])): d for d in mut_diff.get("deleted", [])}
    for d in ref_diff.get("deleted", []):
        if (d["table"], format_value(d["key"])) not in mut_deleted:
            return f"add state: {flow({'table': d['table'], 'where': _where_of(d), 'count': 0})}"
    for k, d in mut_deleted.items():
        if k not in ref_deleted:
            return f"add state: {flow({'table': d['table'], 'key': d['key'], 'fields': _where_of(d)})}"
    return None


def _narrowed(task: Task, table: str, where: dict[str, Any], theirs: Sequence[dict[str, Any]], n: int) -> str | None:
    """When the mutant made as many rows as the reference with other values: the fields
    that differ, added to the task's own expectation on that table (``add where: ... to
    state:...``), when it has one."""
    if len(theirs) != n:
        return None
    differ = {f: v for f, v in where.items() if all(r["row"].get(f) != v for r in theirs)}
    if not differ:
        return None
    for e in task.expect.state:
        if e.table != table:
            continue
        if e.key is None and e.where is not None:
            name = e.id if e.id is not None else f"{table}[where]#{e.index}"
            return f"add where: {flow(differ)} to state:{name}"
    return None


def _fields_suggestion(task: Task, table: str, key: Any, fields: dict[str, Any]) -> str:
    for e in task.expect.state:
        if e.table == table and e.key is not None and format_value(e.key) == format_value(key):
            name = e.id if e.id is not None else f"{table}[{format_value(key)}]#{e.index}"
            return f"add fields: {flow(fields)} to state:{name}"
    return f"add state: {flow({'table': table, 'key': key, 'fields': fields})}"
