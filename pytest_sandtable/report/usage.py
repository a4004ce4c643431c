"""The usage table: tokens per side and model, with the estimated cost; and what prompt
caching saved (:func:`cache_saving`, :func:`cache_saving_text`).

``summary_usage`` is the shape :func:`pytest_sandtable.summarize` returns under
``"usage"``: ``{"agent": {model: {"input", "output", "cache_read", "cache_write",
"calls"}}, "user": {...}}``. :func:`usage_rows` renders it for ``tabulate``::

    from tabulate import tabulate
    print(tabulate(usage_rows(summary["usage"], all_prices(path)), headers=USAGE_HEADERS))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..engine.api import UNKNOWN_MODEL
from .fmt import count, format_cost, pct
from .prices import estimate_cost, price_for
from .types import CacheSaving, SummaryUsage, UsageByModel

USAGE_HEADERS = ["side", "model", "input", "output", "cache read", "cache write", "cost"]
"""Column headers matching :func:`usage_rows`."""

COST_HEADERS_WITH_CALLS = ["side", "model", "calls", "input", "output", "cache read", "cache write", "cost"]
"""Column headers matching :func:`cost_rows` with ``calls=True``."""

_TOKENS = ("input", "output", "cache_read", "cache_write")


def model_name(model: object) -> str:
    """A model as the tables, results.json and the cost show it: its name, or
    ``(unknown model)`` (:data:`~pytest_sandtable.engine.api.UNKNOWN_MODEL`, which has no
    price) for None or a blank name. ``Usage.add`` records it so; this holds the reports
    to it for usage that reached them another way (an agent writing ``turn.usage.models``,
    a results.json from elsewhere)."""
    if model is None:
        return UNKNOWN_MODEL
    name = str(model)
    return name if name.strip() else UNKNOWN_MODEL


def _sides(summary_usage: SummaryUsage) -> dict[str, UsageByModel]:
    """The models of each side, agent first (a side left out has none)."""
    return {"agent": summary_usage.get("agent") or {}, "user": summary_usage.get("user") or {}}


def usage_rows(summary_usage: SummaryUsage, prices: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    """One row per side (agent, then user) and model, sorted by model, then a ``total``
    row when there is more than one: side, model, input, output, cache read, cache
    write (token counts with thousands separators) and the estimated cost (``n/a``
    for a model without a price; the total adds ``+ n/a`` when some are unknown)."""
    costs = {side: estimate_cost(models, prices) for side, models in _sides(summary_usage).items()}
    return _rows(summary_usage, lambda side, model: costs[side][model], None, calls=False)


def _cost_of(cost: Mapping[str, Any], side: str, model: str) -> float | None:
    by_model = cost.get(side)
    value = by_model.get(model) if isinstance(by_model, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cost_rows(summary_usage: SummaryUsage, cost: Mapping[str, Any] | None, *, calls: bool = False) -> list[list[str]]:
    """Like :func:`usage_rows`, but with the costs already in a summary's ``"cost"``
    (``{currency, prices_as_of, agent: {model: usd | None}, user: {...}, total,
    unpriced}``) instead of prices: one row per side and model, then a ``total`` row
    when there is more than one. With ``calls``, a ``calls`` column follows the model
    (see :data:`COST_HEADERS_WITH_CALLS`). A missing or malformed ``cost`` gives ``n/a``."""
    cost = cost if isinstance(cost, Mapping) else {}
    total = cost.get("total")
    recorded = float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None
    return _rows(summary_usage, lambda side, model: _cost_of(cost, side, model), recorded, calls=calls)


def _rows(summary_usage: SummaryUsage, cost_of: Callable[[str, str], float | None], total_cost: float | None,
          *, calls: bool) -> list[list[str]]:
    """The rows of :func:`usage_rows` and :func:`cost_rows`: ``cost_of(side, model)`` prices
    a row; the total row shows ``total_cost``, or the sum of the known costs when None."""
    rows: list[list[str]] = []
    totals = dict.fromkeys(_TOKENS, 0)
    n_calls = 0
    unknown = 0
    known = 0.0
    for side, models in _sides(summary_usage).items():
        for model in sorted(models, key=model_name):
            u = models[model]
            counts = [int(u.get(k, 0) or 0) for k in _TOKENS]
            for k, n in zip(_TOKENS, counts):
                totals[k] += n
            n_calls += int(u.get("calls", 0) or 0)
            c = cost_of(side, model)
            if c is None:
                unknown += 1
            else:
                known += c
            extra = [count(int(u.get("calls", 0) or 0))] if calls else []
            rows.append([side, model_name(model), *extra, *(count(n) for n in counts), format_cost(c)])
    if len(rows) > 1:
        if unknown == len(rows):
            total = "n/a"
        else:
            total = format_cost(known if total_cost is None else total_cost) + (" + n/a" if unknown else "")
        extra = [count(n_calls)] if calls else []
        rows.append(["total", "", *extra, *(count(totals[k]) for k in _TOKENS), total])
    return rows


# --------------------------------------------------------------------------- prompt cache saving


def cache_saving(summary_usage: SummaryUsage, prices: Mapping[str, Mapping[str, float]]) -> CacheSaving | None:
    """What prompt caching saved, or None when no model read from or wrote to a cache.

    The cached tokens of each priced model are charged at its ``cache_read`` and
    ``cache_write`` prices against what they would have cost as plain ``input``; the
    difference, summed, is ``saved`` (negative when cache writes cost more than the
    reads saved). ``input_share`` is ``saved`` over what the priced models' whole
    input (uncached, read and written) would have cost at the input price, so 0.62
    reads "the input bill is 62% lower than without the cache". Token counts cover
    every model; money only the priced ones (None when none is)."""
    read = written = 0
    saved = plain = 0.0
    priced = False
    for models in _sides(summary_usage).values():
        for model, u in models.items():
            uncached, r, w = (int(u.get(k, 0) or 0) for k in ("input", "cache_read", "cache_write"))
            read += r
            written += w
            p = price_for(model_name(model), prices)
            if p is None:
                continue
            base = float(p["input"])
            saved += (r * (base - float(p.get("cache_read", base))) + w * (base - float(p.get("cache_write", base))))
            plain += (uncached + r + w) * base
            priced = priced or bool(r or w)
    if not (read or written):
        return None
    return {"cache_read": read, "cache_write": written,
            "saved": saved / 1_000_000 if priced else None,
            "input_share": saved / plain if priced and plain > 0 else None}


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _amount(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cache_saving_text(cost: object) -> str | None:
    """The saving of a summary's ``cost`` (any JSON value: results.json readers accept
    anything there) in words, e.g. ``41,200 input tokens read from cache, 3,100
    written to it, saving $0.1100 (62.0% of input cost)``; None without a well-formed
    ``cache_saving``. The terminal prefixes ``prompt cache:``, report.html shows it
    under that name."""
    saving = cost.get("cache_saving") if isinstance(cost, Mapping) else None
    if not isinstance(saving, Mapping):
        return None
    read, written = _whole(saving.get("cache_read")), _whole(saving.get("cache_write"))
    if read is None or written is None:
        return None
    words = f"{count(read)} input tokens read from cache" + (f", {count(written)} written to it" if written else "")
    saved, share = _amount(saving.get("saved")), _amount(saving.get("input_share"))
    if saved is None:
        return f"{words}, saving n/a (no price for the models that used it)"
    of_input = "" if share is None else f" ({pct(abs(share))} {'of' if saved >= 0 else 'more'} input cost)"
    if saved >= 0:
        return f"{words}, saving {format_cost(saved)}{of_input}"
    return f"{words}, costing {format_cost(-saved)} more than without it{of_input}"


# --------------------------------------------------------------------------- replayed trials


def replayed_text(cost: object, trials: int) -> str | None:
    """The replayed trials of a summary's ``cost`` (any JSON value) in words, e.g.
    ``48 of 50 trials from recordings; cost live $1.23, cost now $0.0512``: what the
    run would have cost with every call live, and what it cost. None when no trial was
    replayed (or ``replayed`` is not well-formed). The terminal prefixes ``replayed:``."""
    replayed = cost.get("replayed") if isinstance(cost, Mapping) else None
    if not isinstance(replayed, Mapping):
        return None
    n, live, now = _whole(replayed.get("trials")), _amount(replayed.get("live")), _amount(replayed.get("now"))
    if n is None or live is None or now is None:
        return None
    return f"{n} of {trials} trials from recordings; cost live {format_cost(live + now)}, cost now {format_cost(now)}"
