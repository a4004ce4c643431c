"""Problems found in a domain file, and the exception that carries them.

A :class:`Problem` points at one place in one file. Its ``path`` names the node
the way JSONPath does: mapping keys joined by dots, list positions in brackets,
counted from 0 (``tasks[3].expect.state[0].table``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .wording import clip

PathTuple = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

# What a line of text on a terminal must not hold: control characters (a newline
# would split a problem in two, an ESC would drive the terminal), line and
# paragraph separators, invisible characters that hide or reorder text (zero-width,
# bidirectional controls, the byte order mark) and lone surrogates (not text:
# printing one raises).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _printable(text: str) -> str:
    """``text`` with each character a terminal line cannot hold written as an escape."""
    return _UNPRINTABLE.sub(_escape, text)


def format_path(path: Sequence[str | int]) -> str:
    """``("tools", 2, "params", "rate")`` -> ``tools[2].params.rate``.

    Keys that are not plain names are written as ``["a key"]``; a key longer than a
    name ever is, clipped (:func:`~.wording.clip`).
    """
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
            continue
        text = clip(part)  # a clipped key is no plain name: it is written in brackets
        if _PLAIN_KEY.fullmatch(text):
            out.append(f".{text}" if out else text)
        else:
            escaped = text.replace("\\", "\\\\").replace('"', '\\"')
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

    def __post_init__(self) -> None:
        # A problem is a line for a terminal, whatever text of the file it repeats.
        for name in ("file", "path", "message"):
            text = getattr(self, name)
            if _UNPRINTABLE.search(text):
                object.__setattr__(self, name, _printable(text))

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
