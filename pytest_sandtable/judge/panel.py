"""A panel of judges answering a trial's criteria, after the trial was graded.

Each judge is called through the adapters' clients (Claude through the anthropic SDK,
OpenAI-compatible through httpx), with their retry policy and timeouts, at temperature
0. An answer not in the verdict format is asked again once, then void with the reason;
a quote not in the transcript shown voids that verdict; a judge that times out or fails
is void with its one-line error, and the others go on. The majority of the verdicts
that stand is the panel's; a tie is ``split``. Every judge's verdict, quote and void
reason is kept, and whether they disagreed.

Nothing here decides a trial's verdict: :meth:`Panel.judge_trial` only reads the
finished trial and returns what it found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..domain.model import Criterion
from ..engine.api import Usage
from .cache import JudgeCache, cache_key
from .prompt import RETRY, SYSTEM, Line, find_quote, parse_answer, scoped_lines, snippet, user_message
from .spec import JudgeSpec

YES, NO, VOID, SPLIT, NOT_APPLICABLE = "yes", "no", "void", "split", "n/a"
BUDGET_REACHED = "judge budget reached"
NOT_RECORDED = "not in the judge cache (--sandtable-record=none replays only)"


class JudgeCallError(Exception):
    """A judge's call failed for good (retries spent, a timeout, a 4xx): one line."""


@dataclass(frozen=True)
class PanelOptions:
    """How the panel's judges are reached and what they may spend."""

    timeout: float = 60.0  # seconds per judge call attempt
    retries: int = 2
    max_tokens: int = 512
    max_cost: float | None = None  # USD for the judges of the whole run; None: no cap
    cache_dir: Path | None = None
    replay_only: bool = False  # --sandtable-record=none: no call that is not cached
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


class _Client(Protocol):
    async def ask(self, messages: list[dict[str, str]], usage: Usage) -> str: ...


class _Claude:
    def __init__(self, model: str, options: PanelOptions) -> None:
        from ..adapters.claude import ClaudeMessages
        from ..adapters.options import AdapterOptions

        opts = AdapterOptions(temperature=0.0, max_tokens=options.max_tokens, timeout=options.timeout,
                              retries=options.retries, prompt_cache=False)
        self.api = ClaudeMessages(model, opts, role="judge", error=JudgeCallError)

    async def ask(self, messages: list[dict[str, str]], usage: Usage) -> str:
        msg = await self.api.create(usage, system=SYSTEM, messages=messages)
        return "".join(b.text for b in msg.content if b.type == "text")


class _OpenAI:
    def __init__(self, model: str, options: PanelOptions) -> None:
        from ..adapters.openai import OpenAIChat
        from ..adapters.options import AdapterOptions

        opts = AdapterOptions(temperature=0.0, max_tokens=options.max_tokens, timeout=options.timeout,
                              retries=options.retries, prompt_cache=False)
        self.api = OpenAIChat(model, opts, role="judge", error=JudgeCallError)

    async def ask(self, messages: list[dict[str, str]], usage: Usage) -> str:
        from ..adapters.openai import message_text

        body = self.api.payload([{"role": "system", "content": SYSTEM}, *messages], None)
        choice = await self.api.complete(usage, body)
        return message_text(choice["message"])


def majority(verdicts: Sequence[str]) -> tuple[str, bool]:
    """The panel's verdict from its judges' (void ones aside), and whether they disagreed."""
    yes, no = verdicts.count(YES), verdicts.count(NO)
    if yes == no:
        return (VOID if yes == 0 else SPLIT), yes > 0
    return (YES if yes > no else NO), yes > 0 and no > 0


@dataclass
class Panel:
    """The run's judges, their cache, their spending and their calls."""

    judges: tuple[JudgeSpec, ...]
    options: PanelOptions = field(default_factory=PanelOptions)
    usage: Usage = field(default_factory=Usage)  # every judge call's tokens, all trials
    calls: int = 0  # model calls made (cache hits are none)
    cached: int = 0  # verdicts found in the cache
    _clients: dict[str, _Client | Exception] = field(default_factory=dict)
    cache: JudgeCache = field(init=False)

    def __post_init__(self) -> None:
        self.cache = JudgeCache(self.options.cache_dir)

    @property
    def names(self) -> list[str]:
        return [j.name for j in self.judges]

    def cost(self) -> float:
        """What the judges' calls cost so far, in USD, at the known prices (a model
        without a price counts 0; the report says its cost is unknown)."""
        from ..report.prices import estimate_cost

        return sum(c for c in estimate_cost(self.usage.models, self.options.prices).values() if c)

    def budget_reached(self) -> bool:
        return self.options.max_cost is not None and self.cost() >= self.options.max_cost

    def _client(self, judge: JudgeSpec) -> _Client:
        got = self._clients.get(judge.name)
        if got is None:
            try:
                got = _Claude(judge.model, self.options) if judge.provider == "claude" else _OpenAI(
                    judge.model, self.options)
            except (ValueError, ImportError) as e:  # a missing key or client library: each call says so
                got = e
            self._clients[judge.name] = got
        if isinstance(got, Exception):
            raise JudgeCallError(f"{judge.provider} judge {judge.model}: {got}")
        return got

    async def judge_trial(self, policy: str, criteria: Sequence[Criterion],
                          trial: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
        """Each criterion's judged verdict on ``trial`` (a ``TrialResult.to_dict()`` or a
        results.json trial), and the judges' usage of the calls made for it."""
        usage = Usage()
        out = []
        # one criterion after the other, its judges at once: the budget is checked between
        for c in criteria:
            lines = scoped_lines(trial, c)
            if lines is None:
                out.append({"criterion": c.id, "verdict": NOT_APPLICABLE, "disagreement": False, "judges": []})
                continue
            judged = list(await asyncio.gather(*(self._verdict(j, policy, c, lines, usage) for j in self.judges)))
            verdict, split = majority([a["verdict"] for a in judged])
            out.append({"criterion": c.id, "verdict": verdict, "disagreement": split, "judges": judged})
        return out, usage.to_dict()

    async def _verdict(self, judge: JudgeSpec, policy: str, criterion: Criterion, lines: Sequence[Line],
                       usage: Usage) -> dict[str, Any]:
        key = cache_key(judge.name, policy, criterion, lines)
        hit = self.cache.get(key)
        if hit is not None:
            self.cached += 1
            return _shown(judge, hit, cached=True)
        if self.options.replay_only:
            return _void(judge, NOT_RECORDED)
        if self.budget_reached():
            return _void(judge, BUDGET_REACHED)
        own = Usage()
        try:
            entry = await self._ask(judge, policy, criterion, lines, own)
        except JudgeCallError as e:
            return _void(judge, str(e))
        finally:
            for model, u in own.models.items():
                self.calls += u["calls"]
                # each call's tokens into the trial's and the run's judge usage
                for target in (usage, self.usage):
                    m = target.models.setdefault(model, {"input": 0, "output": 0, "cache_read": 0,
                                                         "cache_write": 0, "calls": 0})
                    for k in m:
                        m[k] += u[k]
                    target.calls += u["calls"]
        self.cache.put(key, entry)
        return _shown(judge, entry, cached=False)

    async def _ask(self, judge: JudgeSpec, policy: str, criterion: Criterion, lines: Sequence[Line],
                   usage: Usage) -> dict[str, Any]:
        client = self._client(judge)
        messages = [{"role": "user", "content": user_message(policy, criterion, lines)}]
        text = await client.ask(messages, usage)
        answer = parse_answer(text)
        if answer.problem is not None:  # asked once more, with the format again
            again = [*messages, {"role": "assistant", "content": text or "(empty)"}, {"role": "user", "content": RETRY}]
            answer = parse_answer(await client.ask(again, usage))
            if answer.problem is not None:
                return {"verdict": VOID, "quote": "", "at": None,
                        "void": f"answer not in the verdict format, twice: {answer.problem}"}
        at = find_quote(answer.quote, lines) if answer.quote else None
        if answer.quote and at is None:
            return {"verdict": VOID, "quote": answer.quote, "at": None,
                    "void": f"quote not in the transcript: {snippet(answer.quote)}"}
        if answer.verdict == YES and not answer.quote:
            return {"verdict": VOID, "quote": "", "at": None, "void": "a yes without a quote"}
        return {"verdict": answer.verdict, "quote": answer.quote, "at": at, "void": None}


def _shown(judge: JudgeSpec, entry: Mapping[str, Any], *, cached: bool) -> dict[str, Any]:
    return {"judge": judge.name, "verdict": entry.get("verdict", VOID), "quote": entry.get("quote", ""),
            "at": entry.get("at"), "void": entry.get("void"), "cached": cached}


def _void(judge: JudgeSpec, reason: str) -> dict[str, Any]:
    return {"judge": judge.name, "verdict": VOID, "quote": "", "at": None, "void": reason, "cached": False}


def judge_trial_sync(panel: Panel, policy: str, criteria: Sequence[Criterion],
                     trial: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """:meth:`Panel.judge_trial` on an event loop of its own (for commands and tests)."""
    return asyncio.run(panel.judge_trial(policy, criteria, trial))
