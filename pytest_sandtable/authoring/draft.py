"""``init``: draft a domain from SOP notes with a model, repair it until it validates.

The loop: send the notes (and :data:`.prompt.SYSTEM`); take the YAML out of the
answer; load it as ``validate`` does, plus the checks a draft owes its notes (every
rule quotes the sentence it enforces, word for word; every task has a persona, a
goal, an opening, expectations and a reference). Problems go back to the model, one
``FILE:LINE:COL: PATH: MESSAGE`` line each, for at most ``repairs`` rounds. A draft
that validates gets ``pending: true`` on any rule or task that lacks it and a
``# copied from FILE:LINE`` comment above every value whose sentences come word for
word from the notes, is loaded once more, and is written in one piece. One that never
validates is kept as ``sandtable.draft.yaml`` with its problems listed at its end,
and ``sandtable.yaml`` is not touched.

Model calls go through the adapters' clients (:class:`..adapters.claude.ClaudeMessages`,
:class:`..adapters.openai.OpenAIChat`), with their timeouts, retries and key handling.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from ..adapters.options import AdapterOptions
from ..domain.errors import DomainError, Problem
from ..domain.files import write_atomic
from ..domain.loader import load_domain_text
from ..domain.model import Domain
from ..engine.api import Usage
from ..report.fmt import count, format_cost, plural
from ..report.prices import Prices, builtin_prices_as_of, estimate_cost, price_for
from .notes import Note, find_copy, quote_found
from .prompt import SYSTEM, notes_message, repair_message
from .yamltext import EditError, add_comments, anchored_strings, find_items, insert_pending, safe_data

__all__ = ["DOMAIN_FILE", "DRAFT_FILE", "DraftError", "DraftOutcome", "DraftRequest", "parse_model", "plan_lines",
           "run_draft"]

DOMAIN_FILE = "sandtable.yaml"
DRAFT_FILE = "sandtable.draft.yaml"
CHARS_PER_TOKEN = 4
"""The rough size of a token, for the dry run's estimate (English prose and YAML)."""
REPAIR_OVERHEAD_TOKENS = 400
"""What a repair request adds to the conversation besides the previous draft."""
MODEL_FORMS = "claude:<model> or openai:<model>"
_FENCE = re.compile(r"```[ \t]*(?:ya?ml)?[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TOP_KEYS = ("version", "name", "description", "policy", "world", "tools", "invariants", "tasks")
_TOP_KEY = re.compile(rf"^({'|'.join(_TOP_KEYS)})\s*:", re.MULTILINE)


class DraftError(Exception):
    """A model call failed for good (after the retries); the message is one line."""


@dataclass(frozen=True)
class DraftRequest:
    """What to draft, from what, with which model."""

    notes: Sequence[Note]
    provider: str  # "claude" or "openai"
    model: str
    out_dir: Path
    base_url: str | None = None
    repairs: int = 2
    max_tokens: int = 16_000
    timeout: float = 600.0
    retries: int = 2
    prices: Prices = field(default_factory=dict)

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def target(self) -> Path:
        return self.out_dir / DOMAIN_FILE

    @property
    def draft_path(self) -> Path:
        return self.out_dir / DRAFT_FILE

    @property
    def max_calls(self) -> int:
        return self.repairs + 1


@dataclass
class DraftOutcome:
    ok: bool
    path: Path  # sandtable.yaml when ok, else the kept draft
    problems: list[str]
    calls: int
    usage: Usage
    domain: Domain | None = None
    copied: int = 0


def parse_model(spec: str) -> tuple[str, str]:
    """``(provider, model)`` of ``claude:<model>`` / ``openai:<model>``; ValueError else."""
    kind, _, model = spec.strip().partition(":")
    if kind not in ("claude", "openai") or not model.strip():
        raise ValueError(f"--model {spec!r}: expected {MODEL_FORMS}, e.g. claude:claude-sonnet-4-5")
    return kind, model.strip()


# --------------------------------------------------------------------------- the plan


def estimated_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _cost(model: str, prices: Prices, inputs: int, outputs: int) -> float | None:
    return estimate_cost({model: {"input": inputs, "output": outputs}}, prices)[model]


def plan_lines(req: DraftRequest, endpoint: str, key_note: str) -> list[str]:
    """What ``init --dry-run`` prints: the notes, what is drafted, the model calls and
    the most they can cost at list prices."""
    first_input = estimated_tokens(SYSTEM + notes_message(req.notes))
    per_round = req.max_tokens + REPAIR_OVERHEAD_TOKENS
    one = _cost(req.model, req.prices, first_input, req.max_tokens)
    every = [_cost(req.model, req.prices, first_input + i * per_round, req.max_tokens) for i in range(req.max_calls)]
    total = None if any(c is None for c in every) else sum(c for c in every if c is not None)
    notes = "; ".join(f"{n.name} ({count(n.size)} bytes, {plural(n.line_count, 'line')})" for n in req.notes)
    if price_for(req.model, req.prices) is None:
        prices_note = f"no list price for {req.model}; pass --prices FILE"
    else:
        prices_note = f"list prices of {builtin_prices_as_of()}" if req.provider == "claude" else "prices from --prices"
    return [
        f"plan: draft {req.target} from {plural(len(req.notes), 'notes file')}: {notes}",
        f"  model:  {req.spec} at {endpoint} ({key_note})",
        "  drafts: description, policy, tables with fictional seed rows, tools, rules (each with source.quote), "
        "tasks (persona, goal, opening, script, expectations, reference); every rule and task pending: true; "
        "text copied from the notes marked # copied from FILE:LINE",
        f"  calls:  1 model call, at most {req.max_calls} "
        f"({plural(req.repairs, 'repair round')} when a draft does not validate)",
        f"  tokens: about {count(first_input)} input for the first call ({CHARS_PER_TOKEN} characters a token), "
        f"at most {count(req.max_tokens)} output per call",
        f"  cost:   at most {format_cost(one)} for one call, at most {format_cost(total)} for "
        f"{plural(req.max_calls, 'call')} ({prices_note})",
    ]


def cost_line(usage: Usage, prices: Prices) -> str:
    """What the calls made cost, from the usage the server reported."""
    parts = []
    costs = estimate_cost(usage.models, prices)
    for model, u in usage.models.items():
        tokens = f"{count(u['input'])} input + {count(u['output'])} output tokens"
        cached = u["cache_read"] + u["cache_write"]
        if cached:
            tokens += f" + {count(cached)} cache"
        parts.append(f"{model}: {plural(u['calls'], 'call')}, {tokens}")
    known = [c for c in costs.values() if c is not None]
    total = sum(known) if len(known) == len(costs) and costs else None
    why = "" if total is not None or not costs else "; no list price: pass --prices FILE"
    return f"cost: {format_cost(total)} ({'; '.join(parts) or 'no model calls'}{why})"


# --------------------------------------------------------------------------- the model


class _Model(Protocol):
    async def answer(self, history: list[dict[str, Any]], usage: Usage) -> tuple[str, bool]:
        """The model's text and whether it was cut off at max_tokens."""
        ...


class _Claude:
    def __init__(self, req: DraftRequest, options: AdapterOptions) -> None:
        from ..adapters.claude import ClaudeMessages

        self.api = ClaudeMessages(req.model, options, role="drafter", error=DraftError, base_url=req.base_url)

    async def answer(self, history: list[dict[str, Any]], usage: Usage) -> tuple[str, bool]:
        msg = await self.api.create(usage, system=SYSTEM, messages=history)
        text = "".join(b.text for b in msg.content if b.type == "text")
        if msg.stop_reason == "refusal" and not text.strip():
            raise DraftError(f"{self.api.label}: the model refused to draft (stop_reason 'refusal')")
        return text, msg.stop_reason == "max_tokens"


class _OpenAI:
    def __init__(self, req: DraftRequest, options: AdapterOptions) -> None:
        from ..adapters.openai import OpenAIChat

        self.api = OpenAIChat(req.model, options, role="drafter", error=DraftError, base_url=req.base_url)

    async def answer(self, history: list[dict[str, Any]], usage: Usage) -> tuple[str, bool]:
        from ..adapters.openai import message_text

        body = self.api.payload([{"role": "system", "content": SYSTEM}, *history], None)
        choice = await self.api.complete(usage, body)
        return message_text(choice["message"]), choice.get("finish_reason") == "length"


def endpoint_of(req: DraftRequest) -> str:
    """The host a real run would call, for the plan (no key needed)."""
    import os

    from ..adapters._common import anthropic_base_url, host_of, openai_base_url

    if req.provider == "claude":
        given = req.base_url if req.base_url is not None else os.environ.get("ANTHROPIC_BASE_URL")
        return host_of(anthropic_base_url(given) or "https://api.anthropic.com")
    given = (req.base_url or "").strip() or (os.environ.get("OPENAI_BASE_URL") or "").strip()
    return host_of(openai_base_url(given or "https://api.openai.com/v1"))


def make_model(req: DraftRequest) -> _Model:
    """The model client; ValueError when its key is missing (named as the adapters name it)."""
    # prompt caching (--sandtable-prompt-cache) is for the agents and users of a run; the
    # drafter's requests stay as they were, since `init` has no option to turn it off
    options = AdapterOptions(max_tokens=req.max_tokens, timeout=req.timeout, retries=req.retries,
                             prompt_cache=False)
    return _Claude(req, options) if req.provider == "claude" else _OpenAI(req, options)


# --------------------------------------------------------------------------- checking a draft


def extract_yaml(answer: str) -> str | None:
    """The YAML of an answer: the longest fenced block if there is one, else the whole
    answer; None when the answer is prose."""
    blocks = _FENCE.findall(answer)
    text = max(blocks, key=len) if blocks else answer.strip() + "\n"
    try:
        data = safe_data(text)
    except yaml.YAMLError:
        data = None
    # prose with a colon in it parses as a mapping: a draft names at least one key of a domain file
    if (isinstance(data, dict) and any(k in _TOP_KEYS for k in data)) or _TOP_KEY.search(text):
        return text
    return None


def _problem(file: str, pos: Any, path: str, message: str) -> str:
    return str(Problem(file, pos.line if pos else None, pos.col if pos else None, path, message))


def draft_problems(domain: Domain, notes: Sequence[Note], file: str) -> list[str]:
    """What a draft owes its notes beyond validating."""
    out = []
    for i, inv in enumerate(domain.invariants):
        where = f"invariants[{i}]"
        if not inv.source_quote:
            out.append(_problem(file, inv.pos, f"{where}.source", "every drafted rule needs source: {quote: ...}, "
                                "the sentence of the notes it enforces"))
        elif not quote_found(inv.source_quote, notes):
            out.append(_problem(file, inv.pos, f"{where}.source.quote", "not found word for word in the notes; "
                                "quote the sentence this rule enforces exactly"))
    for i, task in enumerate(domain.tasks):
        where = f"tasks[{i}]"
        missing = [name for name, present in (
            ("user.persona", task.user.persona.strip()), ("user.instructions", task.user.instructions.strip()),
            ("user.opening", task.user.opening), ("expect", task.expect.state or task.expect.called
                                                  or task.expect.not_called or task.expect.reply_includes),
            ("reference", task.reference)) if not present]
        if missing:
            out.append(_problem(file, task.pos, where, f"task {task.id} needs {', '.join(missing)}"))
    return out


def check_answer(answer: str, notes: Sequence[Note], file: str) -> tuple[str, list[str], Domain | None]:
    """``(yaml text, problems, domain)`` of one answer."""
    text = extract_yaml(answer)
    if text is None:
        start = " ".join(answer.split())[:60]
        return answer, [f"{file}: the model answered with prose, not a YAML domain file (it begins: {start!r}); "
                        "answer with the YAML file only"], None
    try:
        domain = load_domain_text(text, file)
    except DomainError as e:
        return text, [str(p) for p in e.problems], None
    return text, draft_problems(domain, notes, file), domain


def finish(text: str, req: DraftRequest) -> tuple[str, int]:
    """A valid draft made ready to write: ``pending: true`` on every rule and task, the
    copied text marked, a header saying what it is. Returns the text and how many
    values are marked as copied."""
    while True:
        lacking = [item for item in find_items(text) if not item.pending]
        if not lacking:
            break
        text = insert_pending(text, lacking[0])
    marks: dict[int, list[str]] = {}
    copied = 0
    for line, value in anchored_strings(text):
        places = find_copy(value, req.notes)
        if not places:
            continue
        copied += 1
        by_file: dict[str, list[str]] = {}
        for name, at in places:
            by_file.setdefault(name, []).append(str(at))
        mark = "copied from " + "; ".join(f"{name}:{', '.join(lines)}" for name, lines in by_file.items())
        if mark not in marks.setdefault(line, []):
            marks[line].append(mark)
    text = add_comments(text, marks)
    header = (f"# Drafted by `python -m pytest_sandtable init` with {req.spec} from "
              f"{', '.join(n.name for n in req.notes)}.\n"
              "# Every rule and task is pending review (pending: true) until a person accepts it:\n"
              f"#   python -m pytest_sandtable review {req.out_dir}\n"
              "# A '# copied from FILE:LINE' comment marks a value whose sentences are copied word for word from "
              "the notes.\n\n")
    return header + text, copied


# --------------------------------------------------------------------------- the loop


async def _draft(req: DraftRequest, model: _Model, usage: Usage) -> DraftOutcome:
    file = str(req.draft_path)
    history: list[dict[str, Any]] = [{"role": "user", "content": notes_message(req.notes)}]
    text, problems = "", list[str]()
    for call in range(1, req.max_calls + 1):
        answer, cut = await model.answer(history, usage)
        history.append({"role": "assistant", "content": answer or "(empty)"})
        if cut:
            return _failed(req, answer, [f"{file}: the draft was cut off at --max-tokens {count(req.max_tokens)}; "
                                         "raise --max-tokens, or draft from fewer notes"], call, usage)
        text, problems, domain = check_answer(answer, req.notes, file)
        if domain is not None and not problems:
            try:
                final, copied = finish(text, req)
                domain = load_domain_text(final, str(req.target))
            except EditError as e:
                problems = [f"{file}: {e}"]
            except DomainError as e:
                problems = [str(p) for p in e.problems]
            else:
                _write_domain(req, final)
                return DraftOutcome(True, req.target, [], call, usage, domain, copied)
        if call < req.max_calls:
            history.append({"role": "user", "content": repair_message(problems)})
    return _failed(req, text, problems, req.max_calls, usage)


def _failed(req: DraftRequest, text: str, problems: list[str], calls: int, usage: Usage) -> DraftOutcome:
    """Keep the last draft, with its problems listed at its end (as comments, so that
    the lines the problems name stay where they are)."""
    listed = "".join(f"#   {' '.join(p.split())}\n" for p in problems)
    body = text if text.endswith("\n") or not text else text + "\n"
    footer = (f"\n# pytest-sandtable init: this draft does not validate after {plural(calls, 'model call')}; "
              f"{req.target.name} was not written.\n# Problems:\n{listed}")
    write_atomic(req.draft_path, (body + footer).encode("utf-8"))
    return DraftOutcome(False, req.draft_path, problems, calls, usage)


def _write_domain(req: DraftRequest, text: str) -> None:
    write_atomic(req.target, text.encode("utf-8"))
    if req.draft_path.exists():  # an earlier failed draft is superseded
        req.draft_path.unlink()


def run_draft(req: DraftRequest, model: _Model, usage: Usage) -> DraftOutcome:
    """Draft, repair and write (see the module docstring). ``usage`` collects what every
    call used, also when a call fails with :class:`DraftError`."""
    return asyncio.run(_draft(req, model, usage))
