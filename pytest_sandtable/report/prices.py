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

A file that cannot be used gives one short line: the file, the line where known, what
was expected, and at most the first 80 characters of an offending value.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from .fmt import clip

PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
"""The kinds of tokens a price entry prices (USD per million tokens)."""
_ENTRY_KEYS = (*PRICE_FIELDS, "note")
_FILE_KEYS = ("models", "as_of", "source", "currency", "unit", "notes")
_SUFFIX = re.compile(r"(-\d{8}|-latest)$")
_EXPECTED = "expected a mapping of model name to prices, e.g. gpt-4.1: {input: 2.0, output: 8.0}"
_CLIP = 80  # at most this many characters of an offending value in a message

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

    Raises :class:`PricesError` naming the file and, where it applies, the line, the
    model and the key.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise PricesError(f"prices file {name}: no such file") from None
    except IsADirectoryError:
        raise PricesError(f"prices file {name}: is a directory") from None
    except UnicodeDecodeError:
        raise PricesError(f"prices file {name}: not a text file (not UTF-8); {_EXPECTED}") from None
    except OSError as e:
        raise PricesError(f"prices file {name}: cannot be read: {e.strerror or e}") from None
    if name.endswith(".json"):
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as e:
            raise PricesError(f"prices file {name}, line {e.lineno}: not valid JSON: {clip(e.msg, _CLIP)}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f", line {mark.line + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise PricesError(f"prices file {name}{where}: not valid YAML: {clip(problem, _CLIP)}") from None
    if data is None:
        raise PricesError(f"prices file {name}: empty; {_EXPECTED}")
    if not isinstance(data, Mapping):
        raise PricesError(f"prices file {name}: {_EXPECTED}; got {_kind(data)}")
    lines = _key_lines(text)
    if "models" in data:
        unknown = [str(k) for k in data if k not in _FILE_KEYS]
        if unknown:
            raise PricesError(f"prices file {name}{_at(lines(unknown[0], False))}: unknown key {_shown(unknown[0])} "
                              f"next to 'models' (allowed: {', '.join(_FILE_KEYS)})")
        models = data["models"]
        if not isinstance(models, Mapping):
            raise PricesError(f"prices file {name}{_at(lines('models', False))}: 'models' must be a mapping of "
                              f"model name to prices, got {_kind(models)}")
        return _entries(models, name, lambda model: lines(model, True))
    return _entries(data, name, lambda model: lines(model, False))


def _at(line: int | None) -> str:
    return f", line {line}" if line else ""


def _key_lines(text: str) -> Callable[[str, bool], int | None]:
    """A lookup of the line (1-based) of a top-level key, or of a key under ``models``
    (``nested=True``), from the file's YAML node tree (JSON parses as YAML too); it
    answers None where the text does not compose. Composed on first use only."""
    cache: dict[str, Any] = {}

    def lookup(key: str, nested: bool) -> int | None:
        if "top" not in cache:
            cache["top"] = cache["models"] = None
            try:
                import yaml

                root = yaml.compose(text, Loader=yaml.SafeLoader)
            except Exception:  # line numbers are a nicety: never fail over them
                return None
            if isinstance(root, yaml.MappingNode):
                cache["top"] = {str(k.value): k.start_mark.line + 1 for k, _ in root.value
                                if isinstance(k, yaml.ScalarNode)}
                for k, v in root.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == "models" and isinstance(v, yaml.MappingNode):
                        cache["models"] = {str(kk.value): kk.start_mark.line + 1 for kk, _ in v.value
                                           if isinstance(kk, yaml.ScalarNode)}
        table = cache["models" if nested else "top"]
        return table.get(key) if table else None

    return lookup


def _entries(models: Mapping[Any, Any], name: str,
             line_of: Callable[[str], int | None] | None = None) -> Prices:
    out: Prices = {}
    for model, entry in models.items():
        at = _at(line_of(str(model))) if line_of else ""
        where = f"prices file {name}{at}: model {_shown(str(model))}"
        if not isinstance(entry, Mapping):
            raise PricesError(f"{where}: expected a mapping with input and output prices, got {_kind(entry)}")
        for key in entry:
            if key not in _ENTRY_KEYS:
                raise PricesError(f"{where}: unknown key {_shown(str(key))} (allowed: {', '.join(_ENTRY_KEYS)})")
        for key in ("input", "output"):
            if key not in entry:
                raise PricesError(f"{where}: missing {key!r} (USD per million tokens)")
        price: dict[str, float] = {}
        for key in PRICE_FIELDS:
            if key not in entry:
                continue
            v = entry[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise PricesError(f"{where}: {key!r} must be a number >= 0 (USD per million tokens), "
                                  f"got {_shown(v)}")
            price[key] = float(v)
        price.setdefault("cache_read", price["input"])
        price.setdefault("cache_write", price["input"])
        out[str(model)] = price
    return out


def _shown(v: Any) -> str:
    """``repr(v)``, cut to at most 80 characters."""
    return clip(repr(v), _CLIP)


def _kind(v: Any) -> str:
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, str):
        return f"the text {_shown(v)}"
    return _shown(v)


def all_prices(path: str | os.PathLike[str] | None = None) -> Prices:
    """The shipped Claude prices, with a ``--sandtable-prices`` file's entries added
    on top (a file's entry wins over the shipped one for the same model)."""
    prices = builtin_prices()
    if path is not None:
        prices.update(load_prices(path))
    return prices


def price_for(model: str | None, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The price entry of ``model``: as named, else without a trailing ``-YYYYMMDD`` or
    ``-latest`` (``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``). None for a
    model without a name (None or empty: a server that did not say): it has no price."""
    if not isinstance(model, str) or not model:
        return None
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
