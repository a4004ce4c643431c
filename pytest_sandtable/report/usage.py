"""The usage table: tokens per side and model, with the estimated cost.

``summary_usage`` is the shape :func:`pytest_sandtable.summarize` returns under
``"usage"``: ``{"agent": {model: {"input", "output", "cache_read", "cache_write",
"calls"}}, "user": {...}}``. :func:`usage_rows` renders it for ``tabulate``::

    from tabulate import tabulate
    print(tabulate(usage_rows(summary["usage"], all_prices(path)), headers=USAGE_HEADERS))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .prices import estimate_cost

USAGE_HEADERS = ["side", "model", "input", "output", "cache read", "cache write", "cost"]
"""Column headers matching :func:`usage_rows`."""

_TOKENS = ("input", "output", "cache_read", "cache_write")


def format_cost(cost: float | None) -> str:
    """``$1.23`` from a dollar up, ``$0.0123`` below, ``<$0.0001`` for crumbs, ``n/a`` when unknown."""
    if cost is None:
        return "n/a"
    if cost == 0:
        return "$0.00"
    if cost < 0.0001:
        return "<$0.0001"
    if cost < 1:
        return f"${cost:.4f}"
    return f"${cost:,.2f}"


def usage_rows(summary_usage: Mapping[str, Mapping[str, Mapping[str, Any]]],
               prices: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    """One row per side (agent, then user) and model, sorted by model, then a ``total``
    row when there is more than one: side, model, input, output, cache read, cache
    write (token counts with thousands separators) and the estimated cost (``n/a``
    for a model without a price; the total adds ``+ n/a`` when some are unknown)."""
    rows: list[list[str]] = []
    totals = dict.fromkeys(_TOKENS, 0)
    known = 0.0
    unknown = 0
    for side in ("agent", "user"):
        models = summary_usage.get(side) or {}
        costs = estimate_cost(models, prices)
        for model in sorted(models):
            u = models[model]
            counts = [int(u.get(k, 0) or 0) for k in _TOKENS]
            for k, n in zip(_TOKENS, counts):
                totals[k] += n
            cost = costs[model]
            if cost is None:
                unknown += 1
            else:
                known += cost
            rows.append([side, model, *(f"{n:,}" for n in counts), format_cost(cost)])
    if len(rows) > 1:
        if unknown == len(rows):
            total = "n/a"
        else:
            total = format_cost(known) + (" + n/a" if unknown else "")
        rows.append(["total", "", *(f"{totals[k]:,}" for k in _TOKENS), total])
    return rows


def _cost_of(cost: Mapping[str, Any], side: str, model: str) -> float | None:
    by_model = cost.get(side)
    value = by_model.get(model) if isinstance(by_model, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cost_rows(summary_usage: Mapping[str, Mapping[str, Mapping[str, Any]]], cost: Mapping[str, Any] | None,
              *, calls: bool = False) -> list[list[str]]:
    """Like :func:`usage_rows`, but with the costs already in a summary's ``"cost"``
    (``{currency, prices_as_of, agent: {model: usd | None}, user: {...}, total,
    unpriced}``) instead of prices: one row per side and model, then a ``total`` row
    when there is more than one. With ``calls``, a ``calls`` column follows the model
    (see :data:`COST_HEADERS_WITH_CALLS`). A missing or malformed ``cost`` gives ``n/a``."""
    cost = cost if isinstance(cost, Mapping) else {}
    rows: list[list[str]] = []
    totals = dict.fromkeys(_TOKENS, 0)
    n_calls = 0
    unknown = 0
    known = 0.0
    for side in ("agent", "user"):
        models = summary_usage.get(side) or {}
        for model in sorted(models):
            u = models[model]
            counts = [int(u.get(k, 0) or 0) for k in _TOKENS]
            for k, n in zip(_TOKENS, counts):
                totals[k] += n
            n_calls += int(u.get("calls", 0) or 0)
            c = _cost_of(cost, side, model)
            if c is None:
                unknown += 1
            else:
                known += c
            extra = [f"{int(u.get('calls', 0) or 0):,}"] if calls else []
            rows.append([side, model, *extra, *(f"{n:,}" for n in counts), format_cost(c)])
    if len(rows) > 1:
        total_cost = cost.get("total")
        if unknown == len(rows):
            total = "n/a"
        else:
            base = float(total_cost) if isinstance(total_cost, (int, float)) and not isinstance(total_cost, bool) \
                else known
            total = format_cost(base) + (" + n/a" if unknown else "")
        extra = [f"{n_calls:,}"] if calls else []
        rows.append(["total", "", *extra, *(f"{totals[k]:,}" for k in _TOKENS), total])
    return rows


COST_HEADERS_WITH_CALLS = ["side", "model", "calls", "input", "output", "cache read", "cache write", "cost"]
"""Column headers matching :func:`cost_rows` with ``calls=True``."""
