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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..domain.errors import Problem
from ..domain.model import Domain, RefStep, Task
from ..engine.api import UserReply, UserTurn
from ..engine.reference import ReferenceAgent
from ..engine.results import ERRORED, FAILED, PASSED, TrialResult
from ..engine.scripted_user import ScriptedUser
from ..engine.trial import _graded_trial
from ..policy_coverage import CoverageAccumulator, DomainCoverage, coverage_json
from ..report.fmt import plural
from .operators import EXPECTED, MUST, OPERATORS, Mutant, generate
from .suggest import candidates, message
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
        out.suggestion = await checked_suggestion(domain, task, mutant, ref, result)
    return out


# --------------------------------------------------------------------------- suggestions

MAX_TRIED = 6  # the candidate expectations replayed for one survivor before it is said none was found


async def checked_suggestion(domain: Domain, task: Task, mutant: Mutant, ref: TrialResult,
                             result: TrialResult) -> str:
    """The first of :func:`.suggest.candidates` that, made in the task's ``expect``, keeps
    the reference passing and fails the mutant, both replayed; else what is known."""
    tried = 0
    for text, edit in candidates(task, mutant, ref, result):
        if tried >= MAX_TRIED:
            break
        tried += 1
        edited = replace(task, expect=edit(task.expect))
        try:
            if (await _replay(domain, edited, None)).verdict != PASSED:
                continue
            if (await _replay(domain, edited, mutant)).verdict == FAILED:
                return text
        except Exception:  # an edit the grading cannot read: not a suggestion
            continue
    said = message(task, mutant)
    if said is not None:
        return said
    if tried:
        return f"no suggestion: none of the {plural(tried, 'expectation')} tried catches it when replayed"
    return "no suggestion: the mutant changes neither the world nor a call the checks can see"
