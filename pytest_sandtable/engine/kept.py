"""Values the engine makes once per domain object and keeps for the process.

A domain does not change once loaded, so what the engine reads from one of its objects
(a domain's seed tables, a tool's plan, a rule's checker, an expectation's plan, a
param's validator) is made on first use and kept. It is kept here, by the object's
identity, not on the object: the domain cache pickles domains, and their parts need
not be hashable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class KeptPer(Generic[K, V]):
    """``make(obj)``, made on the first call for ``obj`` and kept by its identity.

    The object is kept with its value, so its id is not reused while the value is kept.
    Past ``limit`` objects (domains loaded again and again in one process) it starts
    over. A ``make`` that raises keeps nothing: the next call raises again."""

    __slots__ = ("_kept", "_limit", "_make")

    def __init__(self, make: Callable[[K], V], limit: int = 4096) -> None:
        self._make = make
        self._limit = limit
        self._kept: dict[int, tuple[Any, V]] = {}

    def __call__(self, obj: K) -> V:
        hit = self._kept.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._make(obj)
        if len(self._kept) >= self._limit:
            self._kept.clear()
        self._kept[id(obj)] = (obj, value)
        return value
