"""How a problem words what it found and what it expected, and its "did you mean".

Shared by the two stages that report problems, :mod:`.translate` (the schema's)
and :mod:`.check` (cross-references), so a value, a list of names or an unknown
name reads the same whichever stage found it. Every value or name a problem repeats
goes through :func:`show` or :func:`clip`, which cut a long one short and give its
size (docs/spec.md, "Limits").
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from .conditions import json_type

# The most characters of a name (a key, a table, a tool) a problem repeats. Names
# are short; a longer one is clipped with its size, so that a 10 MB key is not
# repeated in full in every problem that names it.
NAME_MAX = 100
# The most characters of a string value `show` repeats: enough to recognise it.
_VALUE_MAX = 40


def clip(text: str, limit: int = NAME_MAX) -> str:
    """``text`` itself, or its first ``limit`` characters and its size."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def show(value: Any) -> str:
    """A short literal form of a value, as the user would write it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if len(value) <= _VALUE_MAX:
            return repr(value)
        return f"{value[: _VALUE_MAX - 3] + '...'!r} ({len(value):,} characters)"
    if isinstance(value, (int, float)):
        return clip(repr(value))
    return json_type(value, integer=True)


def found(value: Any) -> str:
    """``found string 'x'``, ``found an empty array``: what a value is, to say it is wrong."""
    kind = json_type(value, integer=True)
    if isinstance(value, (dict, list)):
        return f"found an empty {kind}" if not value else f"found an {kind}"
    if value is None:
        return "found null"
    return f"found {kind} {show(value)}"


def quoted(names: Iterable[str]) -> str:
    """``'a', 'b', 'c'``"""
    return ", ".join(f"'{clip(n)}'" for n in names)


def quoted_and(names: Sequence[str]) -> str:
    """``'a', 'b' and 'c'``"""
    q = [f"'{clip(n)}'" for n in names]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


def joined_or(words: Sequence[str]) -> str:
    """``a, b or c``"""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def bare(value: Any) -> str:
    """A value as it appears in the file: strings without quotes, the rest as JSON."""
    return clip(value if isinstance(value, str) else json.dumps(value))


def suggest(name: str, known: Iterable[str], prefix: str = "", suffix: str = "") -> str | None:
    """``did you mean 'status'?`` when one of ``known`` is close to ``name``.

    Names longer than :data:`NAME_MAX` are nobody's typo, and comparing them costs
    time that grows with the square of their length: they get no suggestion."""
    match = closest(name, known)
    return f"did you mean '{prefix}{match}{suffix}'?" if match else None


def closest(name: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` that ``name`` is most likely a typo of, if any (see :func:`suggest`)."""
    if len(name) > NAME_MAX:
        return None
    candidates = [k for k in known if len(k) <= NAME_MAX]
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


_SUFFIX = {"{": "}"}


def unknown(kind: str, name: str, known: Sequence[str], owner: str = "", prefix: str = "", hint: str = "") -> str:
    """``unknown field 'stauts' of table loads; did you mean 'status'?``

    ``prefix`` marks how the name was written: ``$`` for ``$name``, ``{`` for ``{name}``.
    """
    suffix = _SUFFIX.get(prefix, "")
    msg = f"unknown {kind} '{prefix}{clip(name)}{suffix}'" + (f" {owner}" if owner else "")
    suggestion = suggest(name, known, prefix, suffix)
    if suggestion:
        return f"{msg}; {suggestion}"
    if hint:
        return f"{msg}; {hint}"
    if not known:
        return f"{msg}; none are declared"
    shown = [prefix + clip(k) + suffix for k in known[:12]] + (["..."] if len(known) > 12 else [])
    return f"{msg}; expected one of: {', '.join(shown)}"
