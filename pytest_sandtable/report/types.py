"""The results.json document as types: what :func:`~pytest_sandtable.report.summary.summarize`
returns, what :func:`~pytest_sandtable.report.results_json.build_results` writes, and what
the terminal tables and report.html read.

Each TypedDict mirrors one object of ``pytest_sandtable/schemas/results.schema.json``
(documented in docs/results.md), field for field; ``NotRequired`` marks a field the
schema does not require (added in a minor version, or present only in a merged file).
The dict literals that build them keep the order results.json has always written
the fields in, and with it the file's bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    # typing.NotRequired is Python 3.11+; the annotations are never evaluated at run time
    from typing import NotRequired

PassHat = dict[str, float | None]
"""pass^j for j = 1, 2, ... (keys are j as text); None where no task has j graded trials."""

UsageByModel = dict[str, dict[str, int]]
"""model -> token counters (``input``, ``output``, ``cache_read``, ``cache_write``, ``calls``)."""

ModelCosts = dict[str, float | None]
"""model -> estimated cost in USD; None for a model without a price."""

Interval = list[float]
"""A 95% interval ``[low, high]`` of a fraction (two numbers from 0 to 1)."""

Intervals = dict[str, Interval | None]
"""A 95% interval per j (keys are j as text), beside a :data:`PassHat`; None where the score is."""

TasksPerJ = dict[str, int]
"""How many tasks a pass^j counts, per j: those with at least j graded trials."""


# --------------------------------------------------------------------------- summary


class TaskVerdict(TypedDict):
    """One entry of ``tasks[]``: a task's verdict over its trials. ``flaky`` means
    flakiness is established (a pass and a fail were both seen); ``rate_ci`` (since 1.2)
    is the Wilson interval of its success rate, which says how flaky a task that always
    passed may still be."""

    domain: str
    task: str
    verdict: str  # passed | failed | flaky | skipped
    critical: bool
    tags: list[str]
    trials: int
    graded: int  # trials that were not errored
    passed: int
    errored: int
    rate_ci: NotRequired[Interval | None]  # since 1.2; None without graded trials


class TaskSummary(TaskVerdict):
    """One entry of ``summary.tasks``: the verdict, the task's name as the tables show it
    (``domain/task`` with several domains), its pass^j and (since 1.2) its success rate,
    pass@j and their 95% intervals (from its own counts)."""

    name: str
    pass_hat: PassHat
    rate: NotRequired[float | None]
    pass_hat_ci: NotRequired[Intervals]
    pass_at: NotRequired[PassHat]
    pass_at_ci: NotRequired[Intervals]


class Score(TypedDict):
    """The scores of a group of tasks (a tag, a domain): how many tasks, pass^j and
    (since 1.2) pass@j with their 95% intervals (the bootstrap over its tasks) and the
    tasks each j counts."""

    tasks: int
    pass_hat: PassHat
    pass_hat_ci: NotRequired[Intervals]
    pass_hat_tasks: NotRequired[TasksPerJ]
    pass_at: NotRequired[PassHat]
    pass_at_ci: NotRequired[Intervals]
    pass_at_tasks: NotRequired[TasksPerJ]  # only where pass@j counted other tasks than pass^j (adaptive)


class TagScore(Score):
    """One entry of ``summary.tags``. In a run of several domains a tag no domain declares
    shared is scored per domain, under ``domain/tag``; ``domain`` (since 1.2) names it."""

    domain: NotRequired[str]


class FailureExample(TypedDict):
    task: str
    domain: str
    trial: int
    detail: str


class FailureMode(TypedDict):
    """Failed checks of one ``(kind, id)`` across trials, with the first as an example,
    and (since 1.2) the likely owners of those trials: owner -> trials, most first."""

    kind: str
    id: str
    trials: int
    tasks: list[str]
    example: FailureExample
    owners: NotRequired[dict[str, int]]


class OwnerCluster(TypedDict):
    """One entry of ``summary.owners``: the failed trials one owner likely owns."""

    owner: str  # agent | task | user
    trials: int
    tasks: list[str]  # names as the tables show them


class PendingItem(TypedDict):
    """One entry of ``summary.provisional``: a drafted item nobody has accepted yet."""

    domain: str
    kind: str  # task | rule
    id: str
    trials: int  # trials that ran under it


class IntervalMethod(TypedDict):
    """``summary.intervals``: how the intervals were computed."""

    level: float
    task: str  # "wilson"
    aggregate: str  # "two-level bootstrap"
    resamples: int
    seed: int


class SoftRuleRate(TypedDict):
    """How often a soft rule was broken among the trials where it applied."""

    id: str
    tool: str | None
    applied: int
    broken: int
    rate: float | None


class SummaryUsage(TypedDict):
    agent: UsageByModel
    user: UsageByModel


class CacheSaving(TypedDict):
    """What prompt caching saved (``summary.cost.cache_saving``, present when a model
    reported cache reads or writes)."""

    cache_read: int  # input tokens read from the cache, all models
    cache_write: int  # input tokens written to it, all models
    # USD: the priced models' cached tokens at the input price, less at the cache prices
    # (negative when writes cost more than the reads saved); None when none is priced
    saved: float | None
    # saved / what the priced models' input (uncached, read, written) costs at the input
    # price; None when that is 0 or unknown
    input_share: float | None


class Replayed(TypedDict):
    """The trials replayed from recordings (``summary.cost.replayed``, present when any
    was: ``--sandtable-record``)."""

    trials: int  # trials whose every model call was replayed
    live: float  # USD: what their recorded usage would have cost live, priced models only
    now: float  # USD: the run's total less ``live`` (replayed calls cost nothing now)


class Cost(TypedDict):
    """The estimated cost at list prices (``summary.cost``)."""

    currency: str
    prices_as_of: str
    agent: ModelCosts
    user: ModelCosts
    total: float  # of the priced models only
    unpriced: list[str]
    cache_saving: NotRequired[CacheSaving]
    replayed: NotRequired[Replayed]


class Latency(TypedDict):
    """Seconds per agent turn over all trials."""

    turns: int
    p50: float | None
    p95: float | None


class ErroredTrial(TypedDict):
    task: str
    domain: str
    trial: int
    error: str | None


class Summary(TypedDict):
    """The run's figures: what the terminal, results.json and report.html all show."""

    k: int
    trials: int
    passed: int
    failed: int
    errored: int
    errored_trials: list[ErroredTrial]
    pass_hat: PassHat
    # since 1.2 (absent in older files): the intervals, pass@j, the tasks per j
    pass_hat_ci: NotRequired[Intervals]
    pass_hat_tasks: NotRequired[TasksPerJ]
    pass_at: NotRequired[PassHat]
    pass_at_ci: NotRequired[Intervals]
    pass_at_tasks: NotRequired[TasksPerJ]  # only where pass@j counted other tasks than pass^j (adaptive)
    tags: dict[str, TagScore]
    domain_scores: NotRequired[dict[str, Score]]  # since 1.2, only with several domains
    tasks: list[TaskSummary]
    failure_modes: list[FailureMode]
    owners: NotRequired[list[OwnerCluster]]  # since 1.2
    provisional: NotRequired[list[PendingItem]]  # since 1.2; empty when nothing is pending
    soft_rules: list[SoftRuleRate]
    usage: SummaryUsage
    # always written; optional in the schema, where a reader accepts any JSON value, so
    # a renderer checks it before use
    cost: NotRequired[Cost]
    latency: Latency
    agents: list[str]
    users: list[str]
    domains: list[str]
    intervals: NotRequired[IntervalMethod]  # since 1.2


# --------------------------------------------------------------------------- trials as stored


class StoredCheck(TypedDict):
    kind: str  # invariant | state | called | not_called | reply | assert | runtime
    id: str
    passed: bool
    detail: str
    counted: NotRequired[Literal[False]]  # (issue 22) a kind the task's basis leaves out; absent: it counts


class StoredViolation(TypedDict):
    invariant: str
    kind: str
    soft: bool
    detail: str
    turn: int
    call: int | None  # index into the trial's calls; None for something the agent said
    quote: NotRequired[str | None]


class CallError(TypedDict):
    code: int | None
    message: str | None


class StoredCall(TypedDict):
    index: int
    turn: int
    tool: str
    args: dict[str, Any]
    ok: bool
    result: Any  # any JSON value the tool returned; None when it failed
    error: CallError | None
    violations: list[str]
    fault: NotRequired[dict[str, Any]]  # the task's fault the call met; only on a faulted call
    by: NotRequired[str]  # (issue 22) who made it when not the agent: user, sync, setup, history


class Message(TypedDict):
    role: Literal["user", "agent"]
    text: str
    turn: int


class ToolStep(TypedDict):
    role: Literal["tool"]
    call: int  # index into the trial's calls


class EventStep(TypedDict):
    """One of the task's events (docs/spec.md, "Faults and events"); ``key`` for update
    and delete, ``values`` for update and create, ``skipped`` only when it was."""

    role: Literal["event"]
    turn: int
    after_call: int  # index into the trial's calls
    event: int  # which of the task's events, from 1
    op: Literal["update", "create", "delete"]
    table: str
    key: NotRequired[Any]
    values: NotRequired[dict[str, Any]]
    skipped: NotRequired[str]


TranscriptEntry = Message | ToolStep | EventStep


class CreatedRow(TypedDict):
    table: str
    key: Any
    row: dict[str, Any]


class FieldChange(TypedDict):
    before: Any
    after: Any


class ChangedRow(TypedDict):
    table: str
    key: Any
    fields: dict[str, FieldChange]


class Diff(TypedDict):
    created: list[CreatedRow]
    changed: list[ChangedRow]
    deleted: NotRequired[list[CreatedRow]]  # since 1.3, only when a row was deleted
    user: NotRequired[Diff]  # the user world's changes (dual control), only for a domain with one


class TrialUsage(TypedDict, total=False):
    agent: UsageByModel
    user: UsageByModel
    cost: Any  # reserved for cost accounting


class SoftFlags(TypedDict):
    tool: str | None
    applied: bool  # its tool was attempted
    broken: bool


class PendingRef(TypedDict):
    kind: str  # task | rule
    id: str


class Attribution(TypedDict):
    owner: str  # agent | task | user
    evidence: str


class StoredTrial(TypedDict):
    """One trial as ``trials[]`` stores it (``TrialResult.to_dict()``)."""

    domain: str
    task: str
    trial: int
    k: int
    seed: int
    verdict: str  # passed | failed | errored
    tags: list[str]
    critical: bool
    error: str | None
    ended_by: str
    turns: int
    agent: str
    user: str
    transcript: list[TranscriptEntry]
    calls: list[StoredCall]
    checks: list[StoredCheck]
    violations: list[StoredViolation]
    diff: Diff
    usage: TrialUsage
    latency: list[float]
    duration: float
    location: str
    traceback: NotRequired[str | None]
    soft: dict[str, SoftFlags]
    shared_tags: NotRequired[list[str]]  # since 1.2
    pending: NotRequired[list[PendingRef]]  # since 1.2
    attribution: NotRequired[Attribution | None]  # since 1.2


# --------------------------------------------------------------------------- the document


class DomainRef(TypedDict):
    name: str
    path: str  # relative to the rootdir, with / separators
    sha256: str


class CollectionError(TypedDict):
    path: str
    message: str


class ShardRef(TypedDict):
    writer_version: str
    started_at: str
    finished_at: str
    trials: int


class Options(TypedDict, total=False):
    agent_base_url: str | None
    user_base_url: str | None
    temperature: float | None
    timeout: float | None
    trial_timeout: float | None
    retries: int | None
    concurrency: int | None
    prices: str | None
    fail_under: float | None
    floors: dict[str, float]


class Run(TypedDict):
    domains: list[DomainRef]
    agent: str
    user: str
    k: int
    run_seed: int
    options: Options
    started_at: str
    finished_at: str
    shards: NotRequired[list[ShardRef]]  # only in a merged file
    collection_errors: NotRequired[list[CollectionError]]  # since 1.1
    stopped_early: NotRequired[str]  # since 1.1, only when it did


class Writer(TypedDict):
    name: str
    version: str
    command: str  # pytest | merge


class GateCheckRecord(TypedDict):
    passed: bool
    text: str


class Gate(TypedDict):
    set: bool
    passed: bool
    fail_under: float | None
    floors: dict[str, float]
    lines: list[str]
    checks: NotRequired[list[GateCheckRecord]]  # since 1.1


class AdaptiveDesign(TypedDict):
    """An adaptive run's design, fixed before its first trial."""

    p0: float  # the bar: "reliable" means a pass rate of at least p0
    p1: float  # a good task's pass rate
    alpha: float  # the chance of "reliable" at p = p0
    beta: float  # the chance of "unreliable" at p = p1
    cap: int  # the most graded trials a task may get (--sandtable-k)
    max_trials: int | None  # --sandtable-max-trials
    max_cost: float | None  # --sandtable-max-cost, USD


class AdaptiveTaskRegression(TypedDict):
    """With a stored baseline: one task's sequential regression test (sequential.StoredRegression;
    with --sandtable-paired, sequential.PairedRegression: ``pairs`` in place of ``floor`` and ``baseline``)."""

    verdict: str  # regressed | no-regression | inconclusive | open
    e_value: float  # the stopped e-value of a drop (against the floor; paired: the McNemar mixture)
    graded: int  # graded trials the test counted (paired: pairs counted, both sides graded)
    floor: NotRequired[float]  # the baseline's exact lower bound at alpha/2
    baseline: NotRequired[list[int]]  # [passes, graded] of the task in the baseline
    pairs: NotRequired[list[int]]  # paired: [drops, gains], the discordant pairs counted


class AdaptiveTask(TypedDict):
    """One task of an adaptive run: its verdict and what it rests on."""

    domain: str
    task: str
    verdict: str  # reliable | unreliable | inconclusive | open
    open_reason: str | None  # for an open task: "budget" (a budget ran out) or "not run"
    graded: int  # graded trials the verdict counted
    passes: int
    trials: int  # trials recorded (errored and uncounted ones too)
    stopped_at: int | None  # the trial that settled it
    e_value: float  # the likelihood ratio of p1 against p0 at the stop
    interval: Interval  # the anytime-valid 95% interval of its pass rate
    uncounted: list[int]  # trials recorded after it settled (started before): not in its verdict
    regression: NotRequired[AdaptiveTaskRegression]  # with a stored baseline that has the task


class AdaptiveRegression(TypedDict):
    """With a stored baseline: the tasks e-BH flags from their stopped regression e-values."""

    design: str  # "stored", or "paired" (--sandtable-paired)
    alpha: float
    method: str  # "e-BH"
    tasks: int  # tasks with a regression test (in the baseline and in this run)
    flagged: list[str]  # task names (domain/task with several domains), largest e-value first
    task_alpha: NotRequired[float]  # each task's test's level: alpha over the baseline's tasks (paired: with pairs)
    baseline_agent: NotRequired[str]  # --sandtable-baseline-agent: the baseline build's spec (credentials removed)


class AdaptiveSection(TypedDict):
    """``adaptive``: what --sandtable-adaptive decided."""

    design: AdaptiveDesign
    spent: int  # trials recorded
    fixed_k_trials: int  # what a fixed k = cap would have run: cap x tasks
    stopped: str | None  # max_trials | max_cost: the budget that stopped the run, if one did
    counts: dict[str, int]  # tasks per verdict
    tasks: list[AdaptiveTask]
    regression: NotRequired[AdaptiveRegression]  # with --sandtable-baseline


class Results(TypedDict):
    """The whole results.json document."""

    schema_version: str
    writer: Writer
    run: Run
    # a list, or the trials of a run's spool read from disk when iterated (report.spool)
    trials: Sequence[StoredTrial]
    tasks: list[TaskVerdict]
    summary: Summary
    gate: Gate
    coverage: NotRequired[list[dict[str, Any]]]  # since 1.4: the policy coverage, per domain file
    mutation: NotRequired[dict[str, Any]]  # since 1.5: --sandtable-mutate's run of the trials' tasks
    adaptive: NotRequired[AdaptiveSection]  # an adaptive run's design and verdicts
    judged: NotRequired[dict[str, Any]]  # --sandtable-judge: judged soft scores (docs/judges.md), never gating
