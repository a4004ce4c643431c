"""Model prices and estimated cost.

Prices are USD per million tokens, per model, for four kinds of tokens: ``input``
(uncached prompt tokens), ``output``, ``cache_read`` and ``cache_write``. The package
ships Anthropic's list prices for Claude models (``prices/claude.json``, dated); a
``--sandtable-prices`` file adds or overrides models::

    # prices.yaml (JSON works too)
    gpt-4.1: {input: 2.0, output: 8.0, cache_read: 0.5}
    qwen2.5:7b: {input: 0, output: 0}

or, with a date kept alongside, ``{as_of: 2026-11-01, models: {...}}``. ``input`` and
``output`` are required; a missing ``cache_read`` or ``cache_write`` is charged at the
``input`` price. A model without a price has no cost estimate (shown as ``n/a``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
"""The kinds of tokens a price entry prices (USD per million tokens)."""
_ENTRY_KEYS = (*PRICE_FIELDS, "note")
_FILE_KEYS = ("models", "as_of", "source", "currency", "unit", "notes")
_SUFFIX = re.compile(r"(-\d{8}|-latest)$")

Prices = dict[str, dict[str, float]]


class PricesError(ValueError):
    """A prices file cannot be used; the message names the file and the key."""


@lru_cache(maxsize=1)
def _builtin() -> tuple[str, Prices]:
    text = resources.files("pytest_sandtable").joinpath("prices/claude.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return str(data["as_of"]), _entries(data["models"], "pytest_sandtable/prices/claude.json")


def builtin_prices() -> Prices:
    """The Claude list prices shipped with the package (a fresh copy)."""
    return {m: dict(p) for m, p in _builtin()[1].items()}


def builtin_prices_as_of() -> str:
    """The date the shipped Claude prices were checked (``YYYY-MM-DD``)."""
    return _builtin()[0]


def load_prices(path: str | os.PathLike[str]) -> Prices:
    """Read a prices file (YAML, or JSON when it ends in ``.json``): model -> prices.

    Raises :class:`PricesError` naming the file and, where it applies, the model and key.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise PricesError(f"prices file {name}: no such file") from None
    except IsADirectoryError:
        raise PricesError(f"prices file {name}: is a directory") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PricesError(f"prices file {name}: cannot be read: {e}") from None
    if name.endswith(".json"):
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as e:
            raise PricesError(f"prices file {name}: not valid JSON: {e.msg} (line {e.lineno})") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise PricesError(f"prices file {name}: not valid YAML: {problem}{where}") from None
    if data is None:
        raise PricesError(f"prices file {name}: empty; expected a mapping of model name to prices")
    if not isinstance(data, Mapping):
        raise PricesError(f"prices file {name}: expected a mapping of model name to prices, got {_kind(data)}")
    if "models" in data:
        unknown = [str(k) for k in data if k not in _FILE_KEYS]
        if unknown:
            raise PricesError(f"prices file {name}: unknown key {unknown[0]!r} next to 'models' "
                              f"(allowed: {', '.join(_FILE_KEYS)})")
        models = data["models"]
        if not isinstance(models, Mapping):
            raise PricesError(f"prices file {name}: 'models' must be a mapping of model name to prices, "
                              f"got {_kind(models)}")
    else:
        models = data
    return _entries(models, name)


def _entries(models: Mapping[Any, Any], name: str) -> Prices:
    out: Prices = {}
    for model, entry in models.items():
        where = f"prices file {name}: model {str(model)!r}"
        if not isinstance(entry, Mapping):
            raise PricesError(f"{where}: expected a mapping with input and output prices, got {_kind(entry)}")
        for key in entry:
            if key not in _ENTRY_KEYS:
                raise PricesError(f"{where}: unknown key {str(key)!r} (allowed: {', '.join(_ENTRY_KEYS)})")
        for key in ("input", "output"):
            if key not in entry:
                raise PricesError(f"{where}: missing {key!r} (USD per million tokens)")
        price: dict[str, float] = {}
        for key in PRICE_FIELDS:
            if key not in entry:
                continue
            v = entry[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise PricesError(f"{where}: {key!r} must be a number >= 0 (USD per million tokens), got {v!r}")
            price[key] = float(v)
        price.setdefault("cache_read", price["input"])
        price.setdefault("cache_write", price["input"])
        out[str(model)] = price
    return out


def _kind(v: Any) -> str:
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, str):
        return f"the text {v!r}"
    return repr(v)


def all_prices(path: str | os.PathLike[str] | None = None) -> Prices:
    """The shipped Claude prices, with a ``--sandtable-prices`` file's entries added
    on top (a file's entry wins over the shipped one for the same model)."""
    prices = builtin_prices()
    if path is not None:
        prices.update(load_prices(path))
    return prices


def price_for(model: str, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The price entry of ``model``: as named, else without a trailing ``-YYYYMMDD`` or
    ``-latest`` (``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``)."""
    if model in prices:
        return prices[model]
    base = _SUFFIX.sub("", model)
    return prices.get(base)


def estimate_cost(
    usage_by_model: Mapping[str, Mapping[str, int]], prices: Mapping[str, Mapping[str, float]]
) -> dict[str, float | None]:
    """Estimated USD cost per model from token counts (``input``, ``output``,
    ``cache_read``, ``cache_write`` as in :class:`~pytest_sandtable.Usage`); None for
    a model without a price."""
    out: dict[str, float | None] = {}
    for model, u in usage_by_model.items():
        p = price_for(model, prices)
        if p is None:
            out[model] = None
            continue
        total = sum(int(u.get(k, 0) or 0) * float(p.get(k, p["input"])) for k in PRICE_FIELDS)
        out[model] = total / 1_000_000
    return out
