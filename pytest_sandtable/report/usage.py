"""The usage table: tokens per side and model, with the estimated cost.

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
from .fmt import count, format_cost
from .prices import estimate_cost
from .types import SummaryUsage, UsageByModel

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
