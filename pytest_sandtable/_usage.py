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

from ._prices import estimate_cost

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
