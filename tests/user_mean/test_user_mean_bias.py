"""The user-level mean's ``bias_bound`` (``hdp_spark/core/user_mean/bias.py``) checked
exactly: on real designs, S - ȳ stays within [D⁻, D⁺] for random and extreme users' means,
and the extremes of the proof attain max(D⁺, -D⁻) (so the bound cannot be smaller)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from hdp_spark import hdp_user_mean
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.user_mean.bias import final_bias_bound
from hdp_spark.core.user_mean.solver import FinalDesign, design_final


def _design(p_init: float, n_other: int) -> tuple[FinalDesign, int]:
    spec = hdp_user_mean("x", user="u", eps="eps", lower=0, upper=1)
    counts = {(1, 0.5): 30, (3, 1.0): 20, (12, 4.0): 10, (40, 1.0): 5}
    n = sum(counts.values()) + n_other
    return design_final(counts, n, p_init, 0.05, 0.02, spec), n


def _users(design: FinalDesign) -> tuple[list[Fraction], list[Fraction], list[Fraction]]:
    """Per G_fin user: its weight v, clip interval [a, b] (exact)."""
    vs, a_s, b_s = [], [], []
    for (k, _), users, u in zip(design.classes, design.users, design.weights, strict=True):
        lo, hi = design.bounds[k]
        for _ in range(users):
            vs.append(u / design.z)
            a_s.append(Fraction(lo, k * FIXED_ONE))
            b_s.append(Fraction(hi, k * FIXED_ONE))
    return vs, a_s, b_s


def _gap(vs: list[Fraction], a_s: list[Fraction], b_s: list[Fraction], fin: list[Fraction],
         other: list[Fraction], n: int) -> Fraction:
    s = sum((v * min(max(y, a), b) for v, a, b, y in zip(vs, a_s, b_s, fin, strict=True)),
            Fraction(0))
    return s - (sum(fin, Fraction(0)) + sum(other, Fraction(0))) / n


@pytest.mark.parametrize(("p_init", "n_other"), [(0.5, 8), (0.1, 0), (0.9, 20)])
def test_the_gap_stays_within_the_bound_and_reaches_it(p_init: float, n_other: int) -> None:
    design, n = _design(p_init, n_other)
    bound = final_bias_bound(design, n)
    vs, a_s, b_s = _users(design)
    assert sum(vs) == 1
    rng = np.random.default_rng(48)
    for _ in range(200):  # random users' means, some at the ends
        fin = [Fraction(int(q), 8) for q in rng.integers(0, 9, len(vs))]
        other = [Fraction(int(q), 8) for q in rng.integers(0, 9, n - len(vs))]
        assert abs(_gap(vs, a_s, b_s, fin, other, n)) <= bound
    inv = Fraction(1, n)
    # the maximizer of the proof: each G_fin user at 0 or b, the others at 0
    up_fin = [Fraction(0) if v * a >= (v - inv) * b else b
              for v, a, b in zip(vs, a_s, b_s, strict=True)]
    up = _gap(vs, a_s, b_s, up_fin, [Fraction(0)] * (n - len(vs)), n)
    # the minimizer: each G_fin user at a or 1, the others at 1
    down_fin = [a if (v - inv) * a <= v * b - inv else Fraction(1)
                for v, a, b in zip(vs, a_s, b_s, strict=True)]
    down = _gap(vs, a_s, b_s, down_fin, [Fraction(1)] * (n - len(vs)), n)
    assert max(up, -down) == bound  # attained: no smaller bound is valid
    assert bound >= Fraction(n - len(vs), 2 * n)  # half the unread users' share at least
