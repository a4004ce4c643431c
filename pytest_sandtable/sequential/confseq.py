"""Anytime-valid intervals for a pass rate: a beta-binomial mixture confidence sequence.

Where the number of trials was chosen by looking at the results (an adaptive run), a
Wilson interval no longer covers at its stated level. The mixture martingale

    M_n(p) = B(a + S, b + F) / B(a, b) / (p^S (1 - p)^F)

(S passes and F failures in n trials, a Beta(a, b) mixing prior) is a nonnegative
martingale at the true p, so by Ville's inequality {p : M_n(p) < 1/alpha} covers the true
rate at every n at once with probability at least 1 - alpha, whenever the run stopped.
"""

from __future__ import annotations

import math


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def interval(passes: int, n: int, alpha: float = 0.05, a: float = 1.0, b: float = 1.0) -> tuple[float, float]:
    """The (low, high) bounds of the confidence sequence after ``passes`` of ``n`` trials."""
    if n < 0 or not 0 <= passes <= n:
        raise ValueError(f"passes must be between 0 and n, not {passes} of {n}")
    if not 0.0 < alpha < 1.0 or not a > 0.0 or not b > 0.0:
        raise ValueError(f"alpha must be in (0, 1) and a, b positive, not alpha={alpha:g}, a={a:g}, b={b:g}")
    if n == 0:
        return 0.0, 1.0
    fails = n - passes
    # p is in the set while S log p + F log(1 - p) > log B(a+S, b+F) - log B(a, b) + log(alpha)
    floor = _log_beta(a + passes, b + fails) - _log_beta(a, b) + math.log(alpha)

    def inside(p: float) -> bool:
        if p <= 0.0:
            return passes == 0 and floor < 0.0
        if p >= 1.0:
            return fails == 0 and floor < 0.0
        return passes * math.log(p) + fails * math.log1p(-p) > floor

    centre = passes / n

    def edge(lo: float, hi: float, towards_lo: bool) -> float:
        # the boundary between an inside point and an outside one, by bisection
        if towards_lo and inside(lo):
            return lo
        if not towards_lo and inside(hi):
            return hi
        for _ in range(60):
            mid = (lo + hi) / 2.0
            if inside(mid) == towards_lo:
                hi = mid
            else:
                lo = mid
        return lo if towards_lo else hi

    low = edge(0.0, centre, towards_lo=True) if passes else 0.0
    high = edge(centre, 1.0, towards_lo=False) if fails else 1.0
    return low, high
