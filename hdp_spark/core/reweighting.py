"""The worst-case reweighting error of a weighted estimator: ``bias_bound``.

Every central estimator of the mean and of the histogram releases Σ_i w_i·y_i + noise,
with weights w_i that depend only on the public ε histogram and sum to 1 over the group's
n rows (y_i is the row's clamped value in unit scale, or the indicator of a bin). The user
asks for the table's own statistic, the plain average ȳ = Σ_i y_i/n. Apart from the noise,
the release misses it by the *reweighting error* Σ_i w_i·y_i - ȳ, which is 0 when the
weights are uniform or the values do not depend on ε, and otherwise is not: a release that
gives low-ε rows less weight shifts the estimate towards the high-ε rows' values.

Claim. For every data set with every y_i in an interval of length Δ (Δ = 1 in unit scale:
[0, 1] for a clamped value, {0, 1} for a bin indicator),

    |Σ_i w_i·y_i - ȳ| <= Δ·||w - 1/n||₁/2 =: bias_bound.

Proof. Let d_i = w_i - 1/n. Since Σ_i w_i = 1 = Σ_i 1/n, Σ_i d_i = 0, so for any constant c,
Σ_i w_i·y_i - ȳ = Σ_i d_i·y_i = Σ_i d_i·(y_i - c). Take c the midpoint of the interval:
|y_i - c| <= Δ/2, hence |Σ_i d_i·(y_i - c)| <= (Δ/2)·Σ_i |d_i| = Δ·||w - 1/n||₁/2. ∎
(||w - 1/n||₁/2 is the total-variation distance between the weight vector and the uniform
distribution; the bound is attained by putting y_i at the upper end where d_i > 0 and at
the lower end where d_i < 0, so no bound that reads only public facts can be smaller.)

Consequently, if the noise interval [est - h, est + h] holds the noiseless Σ_i w_i·y_i with
probability >= 1 - β, the interval [est - h - bias_bound, est + h + bias_bound] holds ȳ with
probability >= 1 - β for every data set in range: the released ``ci_low``/``ci_high``.
Cutting it to the public range [lower, upper] (or [0, 1]) keeps ȳ inside, since ȳ is in
that range.

Every row counts in n, whatever its weight: rows of ε = 0 (weight 0) and rows that a
method drops contribute |0 - 1/n| each; public rows (ε = +inf) contribute |w_l - 1/n| like
any other. The methods whose weights come from a solver (``hpm-cp/ce/wp/we``, ``drop``,
``adpm``) are covered by the same argument: it only needs Σ_i w_i = 1 and weights fixed
before the data are read, which every method's normalization guarantees. A release whose
output is data-independent (no rows, no row may carry weight, ADPM's fallback) has w = 0
and outputs the midpoint: the bound is Δ/2, the whole range around it.

Floating point. The bound is attained (by the data set above), so an interval that adds it
to a noise half-width of 0 (every weighted row public) has an end exactly on the target, and
one rounding of the float arithmetic could put it a hair inside. Every released interval's
half-width is therefore :func:`widened` by :data:`ROUND_OUT` times the magnitudes involved
(far below what any output format shows, and a function of public figures only, so
``explain`` predicts it exactly), which exceeds the few roundings of its arithmetic: where an
end of the interval can reach the target (in [lower, upper]), the estimate is within
reach + max(|lower|, |upper|) of 0, so every rounding is at most 2^-52 of
|lower| + |upper| + reach. ``bias_bound`` itself is published as computed (the exact value,
correctly rounded).

Privacy: a function of the public ε histogram (through the weights) and n only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["FALLBACK_BOUND", "ROUND_OUT", "reweighting_bound", "widened"]

ROUND_OUT = 2.0**-48
"""Relative outward margin of every released interval: 16 units in the last place of the
largest magnitude in its arithmetic, against at most a few roundings of 2^-53 each."""


def widened(reach: Any, lower: float, upper: float) -> Any:
    """The released half-width for the exact ``reach`` (noise half-width + bias bound) of
    an interval cut to [lower, upper]: ``reach`` plus the rounding margin
    (|lower| + |upper| + reach)·:data:`ROUND_OUT` (floats or numpy arrays, the same IEEE
    operations).

    Privacy:
        A function of public figures (the bounds and the half-width).
    """
    return reach + (abs(lower) + abs(upper) + reach) * ROUND_OUT

FALLBACK_BOUND = 0.5
"""The unit-scale bound of a data-independent output (w = 0: ||0 - 1/n||₁/2 = 1/2)."""


def reweighting_bound(m: Sequence[int], nums: Sequence[int], den: int) -> float:
    """||w - 1/n||₁/2 in unit scale for per-row weights ``nums[l]/den`` of the ``m[l]``
    rows of each level (n = Σ m > 0, Σ_l m_l·nums[l] = den):
    Σ_l m_l·|nums[l]·n - den| / (2·n·den), one correctly rounded division of integers.

    Privacy:
        A function of the public ε histogram (the counts and the weights) only.
    """
    n = sum(m)
    if not n or not den:
        return FALLBACK_BOUND
    total = sum(c * abs(p * n - den) for p, c in zip(nums, m, strict=True))
    return total / (2 * n * den)
