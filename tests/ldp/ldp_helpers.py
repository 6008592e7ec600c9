"""Shared helpers of the local-DP tests: exact ratio checks and the Clopper-Pearson audit.

Statistical conventions (spec seed-003 §5): z-tests use |z| <= 4.5 against exact
variances (two-sided false-failure probability 6.8e-6), binomial/KS/chi-square tests reject
below p = 1e-6, the CP audit runs at α = 1e-6. Every statistical test below thus has a
false-failure probability <= 1e-5 per check; seeds are fixed where the test allows it.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
from audit_stats import ALPHA, audit_bound
from scipy import stats

Z_MAX = 4.5
P_MIN = 1e-6
TWO64 = 2**64


def exp_decimal(eps: float) -> Decimal:
    """e^ε for the exact float ε, correctly rounded to 80 digits (decimal.exp is)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(eps).exp()


def ratio_at_most_exp(num: int, den: int, eps: float) -> bool:
    """num/den <= e^ε, decided rigorously (the 80-digit rounding error is far below the
    margins the samplers keep, and the comparison keeps a 1e-70 relative guard)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return Decimal(num) / Decimal(den) <= exp_decimal(eps) * (1 - Decimal(10) ** -70)


def audit_counts(k1: int, k2: int, n: int, eps: float, alpha: float = ALPHA) -> tuple[bool, float]:
    """Four-direction CP event test (noise-and-audit §3.2, Bonferroni α/4; ``audit_stats``).

    Sound for any ε-DP mechanism when the event is fixed in advance and the 2n draws are
    independent (one key per draw, or one seeded call whose rows draw from distinct
    contexts). Returns (violation found, best lower bound on ε).
    """
    best = audit_bound(k1, k2, n, alpha)
    return best > eps, best


def binom_ok(k: int, n: int, p: float) -> bool:
    return bool(stats.binomtest(k, n, p).pvalue > P_MIN)


def z_ok(mean: float, target: float, var_of_mean: float) -> bool:
    return abs(mean - target) <= Z_MAX * math.sqrt(var_of_mean)


def discrete_laplace_pmf(y: np.ndarray, t: int) -> np.ndarray:
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(y)
