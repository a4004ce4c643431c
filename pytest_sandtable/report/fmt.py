"""How the reports write numbers: percentages, durations, costs, counts, plurals and
clipped text. One place, so the terminal, results.json's gate lines, report.html and
the failure messages say the same figure the same way.

Pure functions of their arguments (no I/O, no locale).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "clip",
    "count",
    "duration",
    "format_cost",
    "fraction_as_percent",
    "number",
    "one_line",
    "pct",
    "pct_range",
    "plural",
    "points",
    "secs",
]


def pct(x: float | None) -> str:
    """A fraction as a percentage with one decimal: 0.625 -> ``62.5%``; None -> ``n/a``."""
    return "n/a" if x is None else f"{x * 100:.1f}%"


def pct_range(interval: Sequence[float] | None) -> str:
    """A 95% interval of a fraction in whole percents: [0.6756, 1.0] -> ``68-100%``; None -> ``n/a``.
    Whole percents keep a column of intervals narrow beside the one-decimal scores."""
    if interval is None:
        return "n/a"
    lo, hi = interval
    return f"{lo * 100:.0f}-{hi * 100:.0f}%"


def points(x: float) -> str:
    """A margin in percentage points: one decimal, more for a margin that would show as 0.0."""
    return f"{x:.1f}" if abs(x) >= 0.05 else f"{x:.2g}"


def number(x: float) -> str:
    """85.0 -> ``85``, 62.5 -> ``62.5`` (thresholds as the user typed them)."""
    return f"{x:g}"


def fraction_as_percent(value: float) -> str:
    """0.85 -> ``85``: a fraction given where a percentage was meant, as that percentage
    (rounded off float noise, so 0.07 is ``7``, not ``7.000000000000001``)."""
    return f"{round(value * 100, 6):g}"


def secs(x: float | None) -> str:
    """Seconds for the terminal: ``12 ms`` below a second, else ``1.23 s``; None -> ``n/a``."""
    if x is None:
        return "n/a"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def duration(x: float | None) -> str:
    """Seconds for report.html, from a sub-millisecond turn to a long run: ``0.25 ms``,
    ``12 ms``, ``4.2 s``, then minutes from two minutes up (``3.5 min``); None -> ``n/a``."""
    if x is None:
        return "n/a"
    if x < 1:
        return f"{x * 1000:.0f} ms" if x >= 0.001 else f"{x * 1000:.2f} ms"
    if x < 120:
        return f"{x:.1f} s"
    return f"{x / 60:.1f} min"


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


def count(n: int) -> str:
    """A count with thousands separators: 1234567 -> ``1,234,567``."""
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    """``1 trial``, ``2 trials``, ``0 trials``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, ``...`` marking a cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str, width: int) -> str:
    """``text`` on one line (runs of whitespace, newlines included, become one space), clipped
    to ``width`` characters; the full text is in results.json and the report."""
    return clip(" ".join(text.split()), width)
