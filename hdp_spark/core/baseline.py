"""Public figures shared by ``explain`` and the release report: the single-ε baseline and
whether a row's privacy was partly free.

Both are functions of public facts only (the ε histogram of a group, the bounds, β and the
charged ε_eff of a level), so ``explain`` may compute them before a release and the report
after it from the published outputs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["FULL_TOLERANCE", "is_free", "single_eps_half_width"]

FULL_TOLERANCE = 1e-9
"""Relative slack below which a charge counts as the full ε (solver rounding)."""


def single_eps_half_width(
    levels: Iterable[tuple[float, int]], beta: float, span: float | None
) -> float | None:
    """The (1 - β) half-width of a single-ε library with every row of the group at its
    smallest positive finite ε (the report's and explain's baseline).

    Args:
        levels: ``(ε level, rows)`` of the group.
        beta: the interval's miss probability.
        span: ``upper - lower`` of a mean; None for a histogram (frequencies).

    Returns:
        The half-width, or None when the group has no private row.

    Privacy:
        A function of public facts only: the ε histogram, the bounds and β.
    """
    kept = [(e, n) for e, n in levels if n > 0 and e > 0]
    private = [e for e, _ in kept if math.isfinite(e)]
    if not private:
        return None
    n, eps_min = sum(n for _, n in kept), min(private)
    log_term = math.log(1.0 / beta)
    if span is not None:
        return span * log_term / (n * eps_min)
    return 2.0 * log_term / (n * eps_min)


def is_free(allowed: float, charged: float) -> bool:
    """Charged less than allowed, beyond solver rounding (public rows, ε = ∞, are not
    "free": nothing to protect).

    Privacy:
        Compares two public numbers (a level's ε and its charged ε_eff).
    """
    return math.isfinite(allowed) and charged < allowed * (1 - FULL_TOLERANCE)
