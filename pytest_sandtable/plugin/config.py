"""Every sandtable option, read and checked once, and every stash key.

:class:`RunConfig` is built at configure time (:meth:`RunConfig.load`): a bad value
is a ``pytest.UsageError`` naming the option before anything is collected, never a
traceback later. Every other module of the plugin reads options from it
(:meth:`RunConfig.of`), never from ``config.getoption``.

pytest imports this module at start-up in every run of a project that installs the
plugin, so it imports only the standard library and pytest at load. The report
modules that check a prices file or a gate value load only when one is given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

__all__ = ["REFERENCE_NOTICE", "RUN_STATE", "Adaptive", "Baseline", "RunConfig", "add_options", "check_option_names",
           "is_xdist_controller", "is_xdist_worker"]


def add_options(parser: pytest.Parser) -> None:
    """The command-line options and their ini keys (``pytest_addoption``)."""
    group = parser.getgroup("sandtable", "pytest-sandtable: rehearse an AI agent against sandtable.yaml domains")
    group.addoption("--sandtable-k", type=int, default=None, metavar="K",
                    help="trials per task (ini: sandtable_k; default 1)")
    group.addoption("--sandtable-agent", default=None, metavar="AGENT",
                    help="the agent under test when no sandtable_agent fixture overrides it: 'reference', "
                         "'claude:<model>', 'openai:<model>', 'http(s)://<url>' or 'module:attr' "
                         "(ini: sandtable_agent; default reference)")
    group.addoption("--sandtable-user", default=None, metavar="USER",
                    help="the simulated user: 'scripted', 'claude:<model>', 'openai:<model>' or 'module:attr' "
                         "(ini: sandtable_user; default scripted)")
    group.addoption("--sandtable-seed", type=int, default=None, metavar="N",
                    help="run seed; each trial's seed derives from (run seed, task, trial) (default 0)")
    group.addoption("--sandtable-agent-base-url", default=None, metavar="URL",
                    help="base URL of the OpenAI-compatible endpoint for openai:<model> agents "
                         "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1)")
    group.addoption("--sandtable-user-base-url", default=None, metavar="URL",
                    help="base URL of the OpenAI-compatible endpoint for openai:<model> simulated users")
    group.addoption("--sandtable-temperature", type=float, default=None, metavar="T",
                    help="sampling temperature for model-backed agents and users (default: the model's)")
    group.addoption("--sandtable-max-tokens", type=int, default=None, metavar="N",
                    help="output-token limit per model call of model-backed agents and users (default 4096)")
    group.addoption("--sandtable-timeout", type=float, default=None, metavar="SECONDS",
                    help="timeout of one model or endpoint call (ini: sandtable_timeout; default 60)")
    group.addoption("--sandtable-trial-timeout", type=float, default=None, metavar="SECONDS",
                    help="timeout of a whole trial (ini: sandtable_trial_timeout; default 900)")
    group.addoption("--sandtable-retries", type=int, default=None, metavar="N",
                    help="retries of a model or endpoint call where safe (default 4)")
    group.addoption("--sandtable-prompt-cache", default=None, metavar="on|off",
                    help="mark the stable prefix of claude:<model> requests (tools, system prompt, history) "
                         "for Anthropic's prompt cache (ini: sandtable_prompt_cache; default on)")
    group.addoption("--sandtable-prices", default=None, metavar="FILE",
                    help="a YAML or JSON file of per-model prices for models without built-in list prices")
    group.addoption("--sandtable-concurrency", type=int, default=None, metavar="N",
                    help="trials in flight at once in one pytest process (ini: sandtable_concurrency; default 1)")
    group.addoption("--sandtable-out", default=None, metavar="DIR",
                    help="where results.json and report.html go (default .sandtable/runs/<timestamp>-<domain>/)")
    group.addoption("--sandtable-cache-dir", default=None, metavar="DIR",
                    help="where built domain files are kept for later processes and xdist workers, or 'off' "
                         "(ini: sandtable_cache_dir; default: sandtable-domains in pytest's cache folder)")
    group.addoption("--sandtable-all-tasks", action="store_true", default=False,
                    help="list every task in the terminal summary; a run of more than 20 tasks lists only "
                         "those that did not pass unless this or -v is given")
    group.addoption("--sandtable-fail-under", type=float, default=None, metavar="PCT",
                    help="gate: fail the run when the highest pass^k is below PCT percent (0-100, e.g. 85)")
    group.addoption("--sandtable-floor", action="append", default=[], metavar="TAG=PCT",
                    help="gate: fail the run when a tag's highest pass^k is below PCT percent (repeatable)")
    group.addoption("--sandtable-baseline", default=None, metavar="PATH",
                    help="compare this run with a baseline results.json (or run folder); the terminal summary "
                         "says which tasks regressed or improved beyond chance")
    group.addoption("--sandtable-fail-on-regression", action="store_true", default=False,
                    help="gate: fail the run when it regressed from --sandtable-baseline (a task's drop beyond "
                         "chance, any drop of a critical task, or pass^k dropping more than --sandtable-max-drop)")
    group.addoption("--sandtable-regression-alpha", default=None, metavar="A",
                    help="significance level of the per-task regression test (one-sided Fisher exact; "
                         "default 0.05)")
    group.addoption("--sandtable-paired", action="store_true", default=False,
                    help="with --sandtable-adaptive and --sandtable-baseline: pair each trial with the baseline's "
                         "trial of the same task and trial seed, a sequential McNemar test per task "
                         "(docs/adaptive.md, \"Regression, paired\")")
    group.addoption("--sandtable-baseline-agent", default=None, metavar="AGENT",
                    help="with --sandtable-adaptive: the baseline build, run in this job (the forms "
                         "--sandtable-agent takes): each trial runs again with it, same task and trial seed, "
                         "and the pairs feed a sequential McNemar test per task (docs/adaptive.md)")
    group.addoption("--sandtable-max-drop", default=None, metavar="PCT",
                    help="gate: fail the run when pass^k over the tasks in both runs drops more than PCT points "
                         "from --sandtable-baseline")
    group.addoption("--sandtable-serve", action="store_true", default=False,
                    help="serve each trial's world on 127.0.0.1 over REST and MCP for agents that call their "
                         "tools themselves (turn.tools_url, turn.mcp_url; needs the 'serve' extra)")
    group.addoption("--sandtable-serve-port", type=int, default=None, metavar="PORT",
                    help="with --sandtable-serve: serve on this port instead of a free one per trial "
                         "(for an agent whose tool URL is fixed; needs --sandtable-concurrency 1 and no -n)")
    group.addoption("--sandtable-record", default=None, metavar="MODE",
                    help="record model calls and replay them (docs/recording.md): 'none' replays only, 'once' "
                         "records trials that have no recording, 'new_episodes' records what has none, 'all' "
                         "records everything again (default: off, every call live)")
    group.addoption("--sandtable-model-proxy", action="store_const", const=True, default=None,
                    dest="sandtable_model_proxy",
                    help="run a local model proxy under agents on any framework: each trial's model calls, "
                         "sent to turn.model_base_url(...), forwarded to OPENAI_BASE_URL / ANTHROPIC_BASE_URL "
                         "(or the APIs), counted, recorded with --sandtable-record and capped by "
                         "--sandtable-max-cost (default: on whenever --sandtable-record is)")
    group.addoption("--sandtable-no-model-proxy", action="store_const", const=False, dest="sandtable_model_proxy",
                    help="no model proxy, even with --sandtable-record")
    group.addoption("--sandtable-cassettes", default=None, metavar="DIR",
                    help="with --sandtable-record: where recordings are kept, as DIR/<domain>/<task>.json "
                         "(default: a cassettes folder beside each domain file)")
    group.addoption("--sandtable-mutate", action="store_true", default=False,
                    help="at the end, rewrite each task's reference into faults and replay them (no model): "
                         "the mutation score, weak tasks and trivial-agent baselines of the run's tasks, in the "
                         "terminal, results.json and report.html (docs/mutate.md)")
    group.addoption("--sandtable-mutate-fail-under", default=None, metavar="SCORE",
                    help="fail the run when the mutation score of its tasks is below SCORE percent "
                         "(turns --sandtable-mutate on)")
    group.addoption("--sandtable-mutate-fail-on-weak", action="store_true", default=False,
                    help="fail the run when a task lets a must-be-caught mutant survive (turns --sandtable-mutate on)")
    group.addoption("--sandtable-adaptive", action="store_true", default=False,
                    help="adaptive trials: each task runs trials until its verdict (reliable, unreliable, "
                         "inconclusive at the cap) is settled by a sequential test, then gets no more; "
                         "--sandtable-k is the cap (default 32) (docs/adaptive.md)")
    group.addoption("--sandtable-reliability", default=None, metavar="P0",
                    help="with --sandtable-adaptive: the bar, 'reliable' means a pass rate of at least P0 "
                         "(default 0.8)")
    group.addoption("--sandtable-good-rate", default=None, metavar="P1",
                    help="with --sandtable-adaptive: a good task's pass rate, above P0 (default 0.97)")
    group.addoption("--sandtable-alpha", default=None, metavar="A",
                    help="with --sandtable-adaptive: the chance of calling a task at P0 reliable (default 0.05)")
    group.addoption("--sandtable-beta", default=None, metavar="B",
                    help="with --sandtable-adaptive: the chance of calling a task at P1 unreliable (default 0.05)")
    group.addoption("--sandtable-max-trials", default=None, metavar="N",
                    help="with --sandtable-adaptive: the most trials the run hands out; the run then ends "
                         "with what was decided")
    group.addoption("--sandtable-max-cost", default=None, metavar="USD",
                    help="start no more trials once the trials' recorded cost (from the usage the adapters "
                         "record, at list prices) reaches USD; the run ends with what ran")
    group.addoption("--sandtable-judge", default=None, metavar="SPEC",
                    help="judge each graded trial's judge: criteria with a panel of models, e.g. "
                         "'claude:<model>,openai:<model>'; scores reported beside pass^k, never in a verdict, "
                         "a gate or the exit status (docs/judges.md)")
    group.addoption("--sandtable-judge-max-cost", type=float, default=None, metavar="USD",
                    help="with --sandtable-judge: no more judge calls once the judges spent this much "
                         "(their verdicts void, 'judge budget reached')")
    group.addoption("--sandtable-otel", default=None, metavar="json|otlp",
                    help="OpenTelemetry spans of each trial, its turns, tool calls and model use: 'json' writes "
                         "traces.json beside results.json, 'otlp' sends them over OTLP/HTTP (the 'otel' extra; "
                         "docs/telemetry.md)")
    group.addoption("--sandtable-otel-endpoint", default=None, metavar="URL",
                    help="with --sandtable-otel=otlp: the OTLP/HTTP collector's base URL "
                         "(default: $OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318)")
    parser.addini("sandtable_k", "trials per task", default="1")
    parser.addini("sandtable_timeout", "timeout of one model or endpoint call, seconds", default="60")
    parser.addini("sandtable_trial_timeout", "timeout of a whole trial, seconds", default="900")
    parser.addini("sandtable_retries", "retries of a model or endpoint call where safe", default="4")
    parser.addini("sandtable_concurrency", "trials in flight at once in one pytest process", default="1")
    # no default here: a run that names no agent is told the reference agent plays (RunConfig.agent_named)
    parser.addini("sandtable_agent", "the agent under test (see --sandtable-agent; default reference)", default="")
    parser.addini("sandtable_user", "the simulated user (see --sandtable-user)", default="scripted")
    parser.addini("sandtable_seed", "run seed", default="0")
    parser.addini("sandtable_cache_dir", "where built domain files are kept, or off (see --sandtable-cache-dir)",
                  default="")
    parser.addini("sandtable_prompt_cache", "prompt caching of claude:<model> requests: on or off", default="on")
    parser.addini("sandtable_record_ignore", "with --sandtable-record: parts of a model request that matching leaves "
                  "out, one a line, PATH or PATH ~ REGEX (docs/recording.md)", type="linelist", default=[])


# what a run that names no agent is told (the reference agent then plays)
REFERENCE_NOTICE = ("the reference agent replays each task's reference: this checks the suite, not an agent; "
                    "point --sandtable-agent at yours (docs/agents.md)")


def check_option_names(parser: pytest.Parser, args: list[str]) -> None:
    """A misspelt sandtable option is a usage error with a did-you-mean
    (``unrecognized option --sandtable-agnet; did you mean --sandtable-agent?``), not
    argparse's bare "unrecognized arguments". Run after the initial conftest.py files
    (``pytest_load_initial_conftests``), whose options are known by then. Cheap when no
    argument looks like one: the arguments are parsed again, and difflib loaded, only then."""
    named = args[: args.index("--")] if "--" in args else args  # after "--" every argument is a path
    suspects = [a for a in named if a.startswith("--") and ("sand" in a.lower() or "table" in a.lower())]
    if not suspects:
        return
    unknown = {a.split("=", 1)[0] for a in parser.parse_known_and_unknown_args(list(args))[1] if a.startswith("--")}
    bad = [a.split("=", 1)[0] for a in suspects if a.split("=", 1)[0] in unknown]
    if not bad:
        return
    import difflib

    ours = [name for opt in parser.getgroup("sandtable").options for name in opt.names() if name.startswith("--")]
    prefix = "--sandtable-"
    tails = {name[len(prefix):].lower(): name for name in ours if name.startswith(prefix)}
    for name in bad:
        key = name.lower().replace("_", "-")
        if key.startswith(prefix):  # the part after the prefix is what was misspelt
            close = difflib.get_close_matches(key[len(prefix):], list(tails), n=1, cutoff=0.6)
        else:  # the prefix itself: --sandtabel-agent
            close = [c[len(prefix):] for c in difflib.get_close_matches(key, [prefix + t for t in tails], n=1,
                                                                        cutoff=0.85)]
        match = tails[close[0]] if close else None
        if match is not None:
            raise pytest.UsageError(f"unrecognized option {name}; did you mean {match}?")
        if name.lower().startswith("--sandtable"):
            raise pytest.UsageError(f"unrecognized option {name}; `pytest --help` lists the sandtable options "
                                    f"under 'pytest-sandtable'")


@dataclass(frozen=True)
class RunConfig:
    """Every sandtable option of one pytest run, checked. An option given on the command
    line wins over its ini key; both name the option in a usage error."""

    k: int  # trials per task
    agent: str  # the agent spec: --sandtable-agent, else the ini's sandtable_agent
    user: str  # the simulated user's spec, likewise
    # --sandtable-agent / --sandtable-user as given on the command line (None: not given)
    agent_arg: str | None
    user_arg: str | None
    seed: int  # the run seed
    agent_base_url: str | None
    user_base_url: str | None
    temperature: float | None  # None: the model's own
    max_tokens: int
    timeout: float  # seconds, of one model or endpoint call
    trial_timeout: float  # seconds, of a whole trial
    retries: int
    prices_file: str | None  # --sandtable-prices, as given
    # the built-in list prices with the prices file's on top; None without a file (the
    # summary then prices with the built-in ones alone)
    prices: Mapping[str, Mapping[str, float]] | None
    concurrency: int  # trials in flight at once in this process
    out_dir: Path | None  # --sandtable-out, resolved against where pytest started; None: the default
    fail_under: float | None  # percent
    floors: Mapping[str, float]  # tag -> percent
    baseline: Baseline | None = None  # --sandtable-baseline and the options that go with it
    record: str | None = None  # --sandtable-record: none | once | new_episodes | all; None: off
    cassettes: Path | None = None  # --sandtable-cassettes, resolved; None: beside each domain file
    serve: bool = False  # --sandtable-serve: each trial's world served over REST and MCP
    serve_port: int = 0  # --sandtable-serve-port; 0: a free port per trial
    # --sandtable-model-proxy: the proxy's targets, (kind, base URL) as the environment gave
    # them when the run started; () when the proxy is off
    model_proxy: tuple[tuple[str, str], ...] = ()
    record_ignore: tuple[str, ...] = ()  # the ini's sandtable_record_ignore: adapters.recording.Volatile lines
    prompt_cache: bool = True  # --sandtable-prompt-cache: cache_control on claude:<model> requests
    all_tasks: bool = False  # --sandtable-all-tasks or -v: the terminal summary lists every task
    # --sandtable-cache-dir: where built domains are kept (None: pytest's cache folder, if on)
    domain_cache_dir: Path | None = None
    domain_cache: bool = True  # False: --sandtable-cache-dir=off
    # False when neither --sandtable-agent nor the ini's sandtable_agent names an agent (the
    # reference agent then plays, and the run says so)
    agent_named: bool = True
    # --sandtable-mutate (or either mutation gate): the run's tasks mutated at its end; None: off
    mutate: MutationGate | None = None
    # --sandtable-adaptive and its design (k is then the cap); None: every task gets k trials
    adaptive: Adaptive | None = None
    max_cost: float | None = None  # --sandtable-max-cost, USD
    # --sandtable-judge: the judge panel's spec, checked (judge/spec.py); None: no judging
    judge: str | None = None
    judge_max_cost: float | None = None  # --sandtable-judge-max-cost, USD
    otel: str | None = None  # --sandtable-otel: json | otlp; None: no telemetry
    # with otlp: the collector's base URL (--sandtable-otel-endpoint, else $OTEL_EXPORTER_OTLP_ENDPOINT)
    otel_endpoint: str | None = None

    @classmethod
    def load(cls, config: pytest.Config) -> RunConfig:
        """Read and check every option (``pytest_configure``); :meth:`of` returns it from then on."""
        run = cls._read(config)
        config.stash[_RUN_CONFIG] = run
        return run

    @staticmethod
    def of(config: pytest.Config) -> RunConfig:
        """The options :meth:`load` checked for this run."""
        return config.stash[_RUN_CONFIG]

    @classmethod
    def _read(cls, config: pytest.Config) -> RunConfig:
        # checked in this order, so that of two bad values the same one is reported first
        k = _number(config, "k", int, 1, maximum=MAX_K)
        adaptive = _adaptive(config)
        if adaptive is not None:
            k = adaptive.cap
        temperature = _temperature(config)
        seed = _number(config, "seed", int, -(2**63))
        timeout = _number(config, "timeout", float, 0.001)
        retries = _number(config, "retries", int, 0)
        trial_timeout = _number(config, "trial-timeout", float, 0.001)
        concurrency = _number(config, "concurrency", int, 1)
        max_tokens = (_number(config, "max-tokens", int, 1, ini=False)
                      if config.getoption("--sandtable-max-tokens") is not None else 4096)
        prices_file = config.getoption("--sandtable-prices")
        prices = _prices(prices_file) if prices_file else None
        fail_under, floors = _gates(config)
        baseline = _baseline(config)
        if adaptive is not None and baseline is not None and not baseline.alpha < 0.5:  # a sequential test's level
            raise pytest.UsageError(f"--sandtable-regression-alpha: an adaptive run's regression test takes a level "
                                    f"below 0.5, got {baseline.alpha:g}")
        if baseline is not None and baseline.paired and baseline.agent is None:
            _check_paired(baseline, adaptive, seed)
        elif adaptive is not None and baseline is not None and baseline.agent is None:
            _check_stored(baseline, adaptive)
        record, cassettes = _record(config)
        if record is not None and baseline is not None and baseline.agent is not None:
            raise pytest.UsageError("--sandtable-baseline-agent does not take --sandtable-record: the two builds' "
                                    "trials of a seed would share one recording")
        serve, serve_port = _serve(config, concurrency)
        prompt_cache = _on_off(config, "prompt-cache")
        out = config.getoption("--sandtable-out")
        domain_cache, domain_cache_dir = _domain_cache(config)
        judge, judge_max_cost = _judge(config, prices)
        agent = str(_opt(config, "agent")).strip()
        otel, otel_endpoint = _otel(config)
        return cls(
            k=k,
            agent=agent or "reference",
            agent_named=bool(agent),
            user=str(_opt(config, "user")),
            agent_arg=config.getoption("--sandtable-agent"),
            user_arg=config.getoption("--sandtable-user"),
            seed=seed,
            agent_base_url=config.getoption("--sandtable-agent-base-url"),
            user_base_url=config.getoption("--sandtable-user-base-url"),
            temperature=temperature,
            max_tokens=max_tokens,
            timeout=timeout,
            trial_timeout=trial_timeout,
            retries=retries,
            prices_file=prices_file,
            prices=prices,
            concurrency=concurrency,
            out_dir=Path(config.invocation_params.dir, out) if out else None,
            fail_under=fail_under,
            floors=floors,
            baseline=baseline,
            record=record,
            cassettes=cassettes,
            serve=serve,
            serve_port=serve_port,
            model_proxy=_model_proxy(config, record),
            record_ignore=_record_ignore(config),
            prompt_cache=prompt_cache,
            all_tasks=bool(config.getoption("--sandtable-all-tasks")) or config.get_verbosity() > 0,
            domain_cache_dir=domain_cache_dir,
            domain_cache=domain_cache,
            mutate=_mutate(config),
            adaptive=adaptive,
            max_cost=_max_cost(config),
            judge=judge,
            judge_max_cost=judge_max_cost,
            otel=otel,
            otel_endpoint=otel_endpoint,
        )


def _otel(config: pytest.Config) -> tuple[str | None, str | None]:
    """--sandtable-otel and --sandtable-otel-endpoint, checked: the mode, and for otlp the
    collector's base URL (the option, else $OTEL_EXPORTER_OTLP_ENDPOINT, else the
    exporter's default). The telemetry package loads only when the option is given."""
    mode = config.getoption("--sandtable-otel")
    endpoint = config.getoption("--sandtable-otel-endpoint")
    if mode is None:
        if endpoint is not None:
            raise pytest.UsageError("--sandtable-otel-endpoint needs --sandtable-otel=otlp")
        return None, None
    mode = str(mode).strip().lower()
    from ..telemetry.export import DEFAULT_ENDPOINT as DEFAULT_OTLP
    from ..telemetry.export import MODES, TelemetryError, check_available, check_endpoint

    if mode not in MODES:
        raise pytest.UsageError(f"--sandtable-otel: {config.getoption('--sandtable-otel')!r} is not one of "
                                f"{', '.join(MODES)}")
    if endpoint is not None and mode != "otlp":
        raise pytest.UsageError("--sandtable-otel-endpoint needs --sandtable-otel=otlp")
    try:
        if mode == "otlp":
            if endpoint is not None:
                endpoint = check_endpoint(endpoint)
            elif os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
                endpoint = check_endpoint(os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], "OTEL_EXPORTER_OTLP_ENDPOINT")
            else:
                endpoint = DEFAULT_OTLP
        check_available(mode)
    except TelemetryError as e:
        raise pytest.UsageError(str(e)) from None
    return mode, endpoint


@dataclass(frozen=True)
class Adaptive:
    """``--sandtable-adaptive`` and its design (``sequential.design.Design``, checked):
    per task a truncated SPRT between ``p0`` and ``p1``, at most ``cap`` trials."""

    p0: float
    p1: float
    alpha: float
    beta: float
    cap: int
    max_trials: int | None = None  # --sandtable-max-trials: the most trials the run hands out


ADAPTIVE_CAP = 32  # the cap of an adaptive run that gives no --sandtable-k
# the statistics options, which mean something only with --sandtable-adaptive
_ADAPTIVE_ONLY = ("reliability", "good-rate", "alpha", "beta", "max-trials")


def _adaptive(config: pytest.Config) -> Adaptive | None:
    """--sandtable-adaptive and its options, checked before any trial runs: a design that
    cannot work (``sequential.design.DesignError``) is a usage error saying why, and so is
    a statistics option without --sandtable-adaptive."""
    on = bool(config.getoption("--sandtable-adaptive"))
    if not on:
        given = [name for name in _ADAPTIVE_ONLY if config.getoption(f"--sandtable-{name}") is not None]
        if given:
            raise pytest.UsageError(f"--sandtable-{given[0]} needs --sandtable-adaptive: it is a parameter of the "
                                    f"sequential test that decides when a task has had enough trials")
        return None
    raw_k = config.getoption("--sandtable-k")
    if raw_k is None and str(config.getini("sandtable_k")).strip() != "1":  # an ini file's sandtable_k
        raw_k = config.getini("sandtable_k")
    if raw_k is None:
        cap = ADAPTIVE_CAP
    else:
        cap = _number(config, "k", int, 1, maximum=MAX_K)
        if cap < 2:
            raise pytest.UsageError(f"--sandtable-adaptive: --sandtable-k is the most trials a task may get, and one "
                                    f"trial settles nothing; give --sandtable-k=N with N of at least 2, or leave it "
                                    f"out for {ADAPTIVE_CAP}")
    p0 = _fraction(config, "reliability", 0.8)
    p1 = _fraction(config, "good-rate", 0.97)
    alpha = _fraction(config, "alpha", 0.05)
    beta = _fraction(config, "beta", 0.05)
    max_trials = None
    raw = config.getoption("--sandtable-max-trials")
    if raw is not None:
        try:
            max_trials = int(str(raw).strip())
        except ValueError:
            raise pytest.UsageError(f"--sandtable-max-trials: expected a whole number, got {raw!r}") from None
        if max_trials < 1:
            raise pytest.UsageError(f"--sandtable-max-trials: expected at least 1, got {raw}")
    from ..sequential.design import Design, DesignError

    try:
        Design(p0=p0, p1=p1, alpha=alpha, beta=beta, cap=cap).check()
    except DesignError as e:
        raise pytest.UsageError(f"--sandtable-adaptive: {e}") from None
    return Adaptive(p0=p0, p1=p1, alpha=alpha, beta=beta, cap=cap, max_trials=max_trials)


def _fraction(config: pytest.Config, name: str, default: float) -> float:
    """A number option of the adaptive design (its range is the design's to check)."""
    raw = config.getoption(f"--sandtable-{name}")
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise pytest.UsageError(f"--sandtable-{name}: expected a number, got {raw!r}") from None
    if value != value:
        raise pytest.UsageError(f"--sandtable-{name}: expected a number, got {raw!r}")
    return value


def _max_cost(config: pytest.Config) -> float | None:
    """--sandtable-max-cost: USD (a leading ``$`` allowed), above 0."""
    raw = config.getoption("--sandtable-max-cost")
    if raw is None:
        return None
    text = str(raw).strip().removeprefix("$").strip()
    try:
        value = float(text)
    except ValueError:
        raise pytest.UsageError(f"--sandtable-max-cost: expected an amount in USD such as 5 or 2.50, "
                                f"got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise pytest.UsageError(f"--sandtable-max-cost: expected an amount above 0, got {raw!r}")
    return value


def _opt(config: pytest.Config, name: str) -> Any:
    """``--sandtable-NAME`` when given, else the ini's ``sandtable_NAME`` (or its default)."""
    v = config.getoption(f"--sandtable-{name}")
    return v if v is not None else config.getini(f"sandtable_{name.replace('-', '_')}")


_N = TypeVar("_N", int, float)


MAX_K = 100_000  # the most trials of a task results.json's schema (run.k) admits


def _number(
    config: pytest.Config, name: str, kind: type[_N], minimum: float, *, ini: bool = True, maximum: float | None = None
) -> _N:
    raw = _opt(config, name) if ini else config.getoption(f"--sandtable-{name}")
    where = f"--sandtable-{name}" + (f" / sandtable_{name.replace('-', '_')}" if ini else "")
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        raise pytest.UsageError(f"{where}: expected {what}, got {raw!r}") from None
    if value != value or value < minimum:  # NaN, or below the least it may be
        raise pytest.UsageError(f"{where}: expected at least {minimum:g}, got {raw}")
    if maximum is not None and value > maximum:
        raise pytest.UsageError(f"{where}: expected at most {maximum:,g}, got {raw} (results.json holds at most "
                                f"{maximum:,g} trials of a task)")
    return value


def _on_off(config: pytest.Config, name: str) -> bool:
    """``on`` or ``off`` (any case, spaces around ignored), from the option or its ini key."""
    raw = _opt(config, name)
    value = str(raw).strip().lower()
    if value not in ("on", "off"):
        raise pytest.UsageError(f"--sandtable-{name} / sandtable_{name.replace('-', '_')}: "
                                f"expected on or off, got {raw!r}")
    return value == "on"


SERVE_EXTRA = ("starlette", "uvicorn")  # what --sandtable-serve imports (the 'serve' extra; MCP needs no mcp)


def _serve(config: pytest.Config, concurrency: int) -> tuple[bool, int]:
    """--sandtable-serve and its port, checked: the extra installed (looked up, not
    imported: this runs at start-up), a fixed port only where no two trials share it."""
    serve = bool(config.getoption("--sandtable-serve"))
    port: int | None = config.getoption("--sandtable-serve-port")
    if not serve:
        if port is not None:
            raise pytest.UsageError("--sandtable-serve-port needs --sandtable-serve")
        return False, 0
    import importlib.util

    if any(importlib.util.find_spec(name) is None for name in SERVE_EXTRA):
        raise pytest.UsageError("--sandtable-serve needs the 'serve' extra: pip install 'pytest-sandtable[serve]'")
    if port is None:
        return True, 0
    if not 1 <= port <= 65535:
        raise pytest.UsageError(f"--sandtable-serve-port: expected 1 to 65535, got {port}")
    if concurrency > 1 or is_xdist_worker(config) or is_xdist_controller(config):
        raise pytest.UsageError("--sandtable-serve-port: trials running at once would share the port; "
                                "use it with --sandtable-concurrency 1 and without -n, or leave it out "
                                "for a free port per trial")
    return True, port


@dataclass(frozen=True)
class MutationGate:
    """--sandtable-mutate and its gates: the least mutation score (percent), and whether
    a weak task fails the run."""

    fail_under: float | None = None
    fail_on_weak: bool = False


def _mutate(config: pytest.Config) -> MutationGate | None:
    raw: str | None = config.getoption("--sandtable-mutate-fail-under")
    on_weak = bool(config.getoption("--sandtable-mutate-fail-on-weak"))
    if not (config.getoption("--sandtable-mutate") or raw is not None or on_weak):
        return None
    fail_under = None
    if raw is not None:
        text = raw.strip().removesuffix("%").strip()
        try:
            fail_under = float(text)
        except ValueError:
            raise pytest.UsageError(f"--sandtable-mutate-fail-under: expected a percentage from 0 to 100, "
                                    f"got {raw!r}") from None
        if not 0 <= fail_under <= 100:  # NaN fails this too
            raise pytest.UsageError(f"--sandtable-mutate-fail-under: expected a percentage from 0 to 100, got {raw}")
    return MutationGate(fail_under, on_weak)


MODEL_TARGETS = (("openai", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
                 ("anthropic", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"))
"""The model proxy's targets: kind, the variable the SDKs read, the SDKs' default."""


def _model_proxy(config: pytest.Config, record: str | None) -> tuple[tuple[str, str], ...]:
    """--sandtable-model-proxy / --sandtable-no-model-proxy: the proxy's targets when it
    is on (as asked, or by default whenever --sandtable-record is on), read from the
    environment now, before any agent runs; () when off."""
    given: bool | None = config.getoption("sandtable_model_proxy")
    on = record is not None if given is None else given
    if not on:
        return ()
    return tuple((kind, (os.environ.get(var) or "").strip() or default) for kind, var, default in MODEL_TARGETS)


def _record_ignore(config: pytest.Config) -> tuple[str, ...]:
    """The ini's sandtable_record_ignore lines, each checked as an adapters.recording.Volatile."""
    lines = tuple(line.strip() for line in config.getini("sandtable_record_ignore") if line.strip())
    if lines:
        from ..adapters.recording import Volatile

        for i, line in enumerate(lines, 1):
            try:
                Volatile.parse(line)
            except ValueError as e:
                raise pytest.UsageError(f"sandtable_record_ignore (ini), line {i}: {e}") from None
    return lines


RECORD_MODES = ("none", "once", "new_episodes", "all")  # adapters.recording.MODES (not imported at start-up)


def _record(config: pytest.Config) -> tuple[str | None, Path | None]:
    """--sandtable-record and --sandtable-cassettes, checked (a folder without a mode is a
    usage error: it would silently record nothing)."""
    mode: str | None = config.getoption("--sandtable-record")
    folder: str | None = config.getoption("--sandtable-cassettes")
    if mode is None:
        if folder is not None:
            raise pytest.UsageError("--sandtable-cassettes needs --sandtable-record=MODE (none, once, new_episodes "
                                    "or all)")
        return None, None
    mode = mode.strip().lower().replace("-", "_")
    if mode not in RECORD_MODES:
        raise pytest.UsageError(f"--sandtable-record: expected none, once, new_episodes or all, "
                                f"got {config.getoption('--sandtable-record')!r}")
    if folder is not None and not folder.strip():
        raise pytest.UsageError("--sandtable-cassettes: expected a folder, got ''")
    return mode, Path(config.invocation_params.dir, folder) if folder is not None else None


def _domain_cache(config: pytest.Config) -> tuple[bool, Path | None]:
    """--sandtable-cache-dir (relative to where pytest started) or the ini's sandtable_cache_dir
    (relative to the ini file): whether built domains are cached, and where (None: pytest's cache folder)."""
    raw = config.getoption("--sandtable-cache-dir")
    base = config.invocation_params.dir
    if raw is None:
        raw = str(config.getini("sandtable_cache_dir")).strip()
        base = config.inipath.parent if config.inipath else config.rootpath
    if raw.lower() == "off":
        return False, None
    return True, (Path(base, os.path.expanduser(raw)) if raw else None)


def _judge(config: pytest.Config, prices: Mapping[str, Mapping[str, float]] | None
           ) -> tuple[str | None, float | None]:
    """--sandtable-judge (its panel parsed here once, so a bad spec stops the run before it
    starts) and --sandtable-judge-max-cost (every judge then needs a price: a budget that
    counts a model as free would never be reached)."""
    spec: str | None = config.getoption("--sandtable-judge")
    max_cost: float | None = config.getoption("--sandtable-judge-max-cost")
    if spec is None:
        if max_cost is not None:
            raise pytest.UsageError("--sandtable-judge-max-cost needs --sandtable-judge=SPEC")
        return None, None
    from ..judge.spec import JudgeSpecError, parse_panel

    try:
        judges = parse_panel(spec)
    except JudgeSpecError as e:
        raise pytest.UsageError(f"--sandtable-judge: {e}") from None
    if max_cost is not None:
        if not max_cost >= 0:
            raise pytest.UsageError(f"--sandtable-judge-max-cost: expected at least 0, got {max_cost:g}")
        from ..report.prices import builtin_prices, price_for

        known = prices if prices is not None else builtin_prices()
        unpriced = [j.name for j in judges if price_for(j.model, known) is None]
        if unpriced:
            raise pytest.UsageError(f"--sandtable-judge-max-cost: no price for judge {', '.join(unpriced)}; "
                                    "give one in --sandtable-prices FILE")
    return spec, max_cost


def _temperature(config: pytest.Config) -> float | None:
    temperature: float | None = config.getoption("--sandtable-temperature")
    if temperature is not None and not 0 <= temperature <= 2:
        raise pytest.UsageError(f"--sandtable-temperature: expected 0 to 2, got {temperature:g}")
    return temperature


def _prices(path: str) -> Mapping[str, Mapping[str, float]]:
    from ..report.prices import PricesError, all_prices

    try:
        return all_prices(path)
    except PricesError as e:
        raise pytest.UsageError(f"--sandtable-prices: {e}") from None


def _gates(config: pytest.Config) -> tuple[float | None, dict[str, float]]:
    """--sandtable-fail-under and the --sandtable-floor values (a later floor on a tag wins)."""
    raw_fail_under = config.getoption("--sandtable-fail-under")
    raw_floors = config.getoption("--sandtable-floor") or []
    if raw_fail_under is None and not raw_floors:
        return None, {}
    from ..report.gates import GateError, parse_fail_under, parse_floor

    try:
        return parse_fail_under(raw_fail_under), dict(parse_floor(raw) for raw in raw_floors)
    except GateError as e:
        raise pytest.UsageError(str(e)) from None


@dataclass(frozen=True)
class Baseline:
    """``--sandtable-baseline`` and its options: the results this run is compared with."""

    given: str  # as given on the command line (messages show it)
    path: Path  # resolved against where pytest started
    fail_on_regression: bool
    alpha: float  # the level of the per-task one-sided Fisher exact test
    max_drop: float | None  # points of pass^k
    alpha_given: bool = False  # --sandtable-regression-alpha given (else an adaptive run uses its design's alpha)
    paired: bool = False  # --sandtable-paired: the baseline's trials paired with this run's by seed
    # --sandtable-baseline-agent: the baseline build's agent spec, run in this job (paired; no file)
    agent: str | None = None
    # the baseline's results.json, read and checked at configure time; None on an xdist
    # worker, where the controller alone compares
    doc: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


def _baseline(config: pytest.Config) -> Baseline | None:
    """The baseline and its options, checked, and its results read before any trial runs:
    a missing, unreadable or other-major baseline is a usage error naming the file.
    ``--sandtable-fail-on-regression``, ``--sandtable-regression-alpha`` or
    ``--sandtable-max-drop`` without a baseline is a usage error too."""
    raw = config.getoption("--sandtable-baseline")
    fail = bool(config.getoption("--sandtable-fail-on-regression"))
    raw_alpha = config.getoption("--sandtable-regression-alpha")
    raw_drop = config.getoption("--sandtable-max-drop")
    paired = bool(config.getoption("--sandtable-paired"))
    agent = config.getoption("--sandtable-baseline-agent")
    if agent is not None:
        return _baseline_agent(config, str(agent).strip(), raw, fail, raw_alpha, raw_drop, paired)
    if raw is None:
        given = [name for name, v in (("--sandtable-fail-on-regression", fail or None),
                                      ("--sandtable-regression-alpha", raw_alpha),
                                      ("--sandtable-paired", paired or None),
                                      ("--sandtable-max-drop", raw_drop)) if v is not None]
        if given:
            raise pytest.UsageError(f"{given[0]} needs --sandtable-baseline=PATH: the results to compare with")
        return None
    from ..report.compare import CompareError, parse_alpha
    from ..report.gates import parse_pct
    from ..report.results_json import ResultsError, counts_problem, read_results

    try:
        alpha = parse_alpha(raw_alpha, "--sandtable-regression-alpha")
        max_drop = parse_pct(raw_drop, "--sandtable-max-drop") if raw_drop is not None else None
    except (CompareError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None
    path = Path(config.invocation_params.dir, raw)
    doc = None
    if not is_xdist_worker(config):
        try:
            doc = read_results(path)
        except ResultsError as e:
            raise pytest.UsageError(f"--sandtable-baseline: {_shown(e.file, config)}: {e.problem}") from None
        problem = counts_problem(doc)
        if problem is not None:
            shown = _shown(str(path / "results.json" if path.is_dir() else path), config)
            raise pytest.UsageError(f"--sandtable-baseline: {shown}: {problem}")
    return Baseline(given=raw, path=path, fail_on_regression=fail, alpha=alpha, max_drop=max_drop,
                    alpha_given=raw_alpha is not None, paired=paired, doc=doc)


def _baseline_agent(config: pytest.Config, agent: str, raw: str | None, fail: bool, raw_alpha: Any,
                    raw_drop: Any, paired: bool) -> Baseline:
    """--sandtable-baseline-agent: the baseline build runs in this job, each trial paired
    with the candidate's of the same seed; checked before any trial runs."""
    if not config.getoption("--sandtable-adaptive"):
        raise pytest.UsageError("--sandtable-baseline-agent needs --sandtable-adaptive: each task's regression is "
                                "tested sequentially on the pairs, and its trials stop once it is settled")
    if raw is not None:
        raise pytest.UsageError("--sandtable-baseline-agent and --sandtable-baseline: give one: the baseline "
                                "agent runs in this job, a baseline file is a run stored before")
    if not agent:
        raise pytest.UsageError("--sandtable-baseline-agent: expected an agent spec (the forms --sandtable-agent "
                                "takes), got nothing")
    for name, given in (("--sandtable-max-drop", raw_drop), ("--sandtable-paired", paired or None)):
        if given is not None:
            raise pytest.UsageError(f"{name} takes --sandtable-baseline=PATH, not --sandtable-baseline-agent")
    from ..report.compare import CompareError, parse_alpha

    try:
        alpha = parse_alpha(raw_alpha, "--sandtable-regression-alpha")
    except (CompareError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None
    return Baseline(given="the baseline agent", path=Path(config.invocation_params.dir), fail_on_regression=fail,
                    alpha=alpha, max_drop=None, alpha_given=raw_alpha is not None, paired=True, agent=agent)


def _check_paired(baseline: Baseline, adaptive: Adaptive | None, seed: int) -> None:
    """--sandtable-paired, checked before any trial runs: it needs --sandtable-adaptive (a
    sequential test), a design the paired test can work in, and a baseline whose trials
    carry the seeds this run's trials will have."""
    if adaptive is None:
        raise pytest.UsageError("--sandtable-paired needs --sandtable-adaptive: the paired design is a sequential "
                                "test that runs each task until its regression is settled (docs/adaptive.md)")
    if baseline.doc is None:  # an xdist worker: the controller checked it
        return
    from ..report.adaptive import paired_alpha, paired_outcomes, paired_problem
    from ..sequential.design import DesignError
    from ..sequential.regression import PairedRegression

    problem = paired_problem(baseline.doc, seed, adaptive.cap, baseline.given)
    if problem is not None:
        raise pytest.UsageError(f"--sandtable-paired: {problem}")
    alpha = baseline.alpha if baseline.alpha_given else adaptive.alpha
    pairs = paired_outcomes(baseline.doc, seed, adaptive.cap)
    try:
        PairedRegression(alpha=paired_alpha(alpha, len(pairs)), beta=adaptive.beta, cap=adaptive.cap)
    except DesignError as e:
        raise pytest.UsageError(f"--sandtable-paired: {e} (alpha {alpha:g} over the baseline's "
                                f"{len(pairs)} tasks with pairs)") from None


def _check_stored(baseline: Baseline, adaptive: Adaptive) -> None:
    """An adaptive run against a stored baseline's counts, checked before any trial runs:
    the cap leaves room for at least one task's test, at alpha over the baseline's tasks,
    to say "regressed" (a task whose baseline never passed has nothing to drop from)."""
    if baseline.doc is None:  # an xdist worker: the controller checked it
        return
    from ..report.adaptive import baseline_counts, paired_alpha, task_name
    from ..sequential.regression import StoredRegression

    counts = baseline_counts(baseline.doc)
    alpha = baseline.alpha if baseline.alpha_given else adaptive.alpha
    level = paired_alpha(alpha, len(counts))
    tests = {key: StoredRegression(p, n, alpha=level, beta=adaptive.beta, cap=adaptive.cap)
             for key, (p, n) in counts.items()}
    able = [(t.least_trials(), key) for key, t in tests.items() if t.sequence is not None]
    if not able and any(p > 0 for p, _ in counts.values()):
        raise pytest.UsageError(
            f"--sandtable-baseline: at alpha = {level!r} ({alpha!r} over the baseline's {len(counts)} tasks) the "
            f"baseline's lower bounds are 0 to a float's precision, so no task could say \"regressed\": give a "
            f"larger --sandtable-regression-alpha (or --sandtable-alpha)")
    if not able or any(tests[key].can_regress for _, key in able):
        return
    least, key = min(able)
    several = len({domain for domain, _ in counts}) > 1
    raise pytest.UsageError(
        f"--sandtable-baseline: detecting a drop from {baseline.given}'s {counts[key][0]}/{counts[key][1]} of "
        f"task {task_name(key[0], key[1], several)}, its strongest, at alpha = {level:g} needs at least {least} "
        f"graded trials; the cap is {adaptive.cap} (alpha {alpha:g} over the baseline's {len(counts)} tasks), so "
        f"no task could say \"regressed\": give a larger --sandtable-k or a baseline of more trials")


def _shown(file: str, config: pytest.Config) -> str:
    """A file as the user would name it: relative to where pytest started, when inside it."""
    try:
        return Path(file).relative_to(config.invocation_params.dir).as_posix()
    except ValueError:
        return file


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker process."""
    return hasattr(config, "workerinput")


def is_xdist_controller(config: pytest.Config) -> bool:
    """True in the process that hands items to pytest-xdist workers and collects their reports."""
    return not is_xdist_worker(config) and getattr(config.option, "dist", "no") != "no"


_RUN_CONFIG = pytest.StashKey[RunConfig]()

# The run's shared state, a plugin.session.RunState, made when it is first needed (a
# domain file is collected, or the xdist controller checks the specs). Typed as object:
# naming RunState here would make this module import session, which imports it.
RUN_STATE = pytest.StashKey[object]()
