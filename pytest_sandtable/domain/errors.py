"""Problems found in a domain file, and the exception that carries them.

A :class:`Problem` points at one place in one file. Its ``path`` names the node
the way JSONPath does: mapping keys joined by dots, list positions in brackets,
counted from 0 (``tasks[3].expect.state[0].table``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PathTuple = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: Sequence[str | int]) -> str:
    """``("tools", 2, "params", "rate")`` -> ``tools[2].params.rate``.

    Keys that are not plain names are written as ``["a key"]``.
    """
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.match(part):
            out.append(f".{part}" if out else part)
        else:
            escaped = part.replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'["{escaped}"]')
    return "".join(out)


@dataclass(frozen=True)
class Problem:
    """One mistake in a domain file: where it is and what is wrong."""

    file: str
    line: int | None
    col: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.col is not None:
                where += f":{self.col}"
        if self.path:
            return f"{where}: {self.path}: {self.message}"
        return f"{where}: {self.message}"

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.line or 0, self.col or 0, self.path, self.message)


class DomainError(Exception):
    """A domain file could not be loaded. ``problems`` lists every mistake found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)
