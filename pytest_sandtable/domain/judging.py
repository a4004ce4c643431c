"""The ``judge:`` criteria of a domain and of its tasks: their checks (stage 2 of loading)
and their build (stage 3) (docs/spec.md, "Judged criteria"; docs/judges.md).

The schema checks each entry's shape (a question that is text, a known ``scope``, the
``turns`` pair, the ``after_tool`` name's form). What it cannot say is checked here: a
task criterion whose id is already a domain criterion, a ``turns`` pair whose first is
after its last, an ``after_tool`` that names no declared tool, and more than one of
``scope``, ``turns`` and ``after_tool`` in one entry (each says what part of the
transcript the judge reads).

The checker is :mod:`.check`'s, read through :class:`Checker` as :mod:`.faults` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .errors import PathTuple
from .model import Criterion, Pos
from .wording import clip
from .yaml_reader import Document

_PARTS = ("scope", "turns", "after_tool")


class Checker(Protocol):
    """What these checks use of :class:`.check._Checker`."""

    doc: Document
    data: dict[str, Any]

    def add(self, path: PathTuple, message: str, *, at_key: bool = False) -> None: ...
    def tool(self, name: Any, path: PathTuple) -> str | None: ...


def check_domain(c: Checker) -> None:
    """The domain's ``judge:`` entries, and each task's against them."""
    domain_ids = _check_entries(c, c.data.get("judge"), ("judge",))
    tasks = c.data.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            continue
        path: PathTuple = ("tasks", i, "judge")
        for cid in _check_entries(c, task.get("judge"), path):
            if cid in domain_ids:
                pos = c.doc.pos(("judge", cid))
                where = f" (line {pos.line})" if pos else ""
                c.add((*path, cid), f"criterion '{clip(cid)}' is already a domain criterion{where}; "
                                    "give this one its own id", at_key=True)


def _check_entries(c: Checker, entries: Any, path: PathTuple) -> list[str]:
    """The ids of the entries at ``path``, each entry's cross-checks reported."""
    if not isinstance(entries, dict):
        return []
    for cid, entry in entries.items():
        if not isinstance(entry, dict):
            continue
        here = (*path, cid)
        given = [k for k in _PARTS if k in entry]
        if len(given) > 1:
            c.add((*here, given[1]), f"give one of 'scope', 'turns' and 'after_tool', not both "
                                     f"'{given[0]}' and '{given[1]}'", at_key=True)
        turns = entry.get("turns")
        if (isinstance(turns, list) and len(turns) == 2 and all(type(n) is int for n in turns)
                and turns[0] > turns[1]):
            c.add((*here, "turns"), f"turns [{turns[0]}, {turns[1]}]: the first is after the last")
        if isinstance(entry.get("after_tool"), str):
            c.tool(entry["after_tool"], (*here, "after_tool"))
    return [str(k) for k in entries]


def build_criteria(entries: Mapping[str, Any], pos_of: Callable[[PathTuple], Pos | None],
                   path: PathTuple) -> tuple[Criterion, ...]:
    """The :class:`Criterion` of each entry at ``path``, in the file's order."""
    built = []
    for cid, entry in entries.items():
        spec = {"question": entry} if isinstance(entry, str) else entry
        turns = spec.get("turns")
        built.append(Criterion(
            id=str(cid),
            question=spec["question"],
            scope=spec.get("scope", "all"),
            turns=(int(turns[0]), int(turns[1])) if turns else None,
            after_tool=spec.get("after_tool"),
            pos=pos_of((*path, cid)),
        ))
    return tuple(built)
