"""Exact keyed Binomial sampler and uniform subsets (hdp_spark.core.noise.binomial).

Goodness-of-fit tests use fixed unsafe seeds (deterministic) and thresholds whose
false-failure probability under the null is <= 1e-4 for a fresh seed.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.binomial import (
    binomial_discrete_laplace_sf,
    binomial_exp,
    binomial_rational,
    uniform_subset,
)
from hdp_spark.core.partial.budget import dlap_sf
from hdp_spark.errors import InternalError

P_MIN = 1e-4


def _stream(tag: str):
    return ReleaseKey.from_unsafe_seed("binomial-tests").stream(tag.encode())


def _gof(draws: list[int], pmf) -> float:
    """Chi-square p-value of integer draws against a pmf (cells pooled to E >= 5)."""
    n = len(draws)
    counts = Counter(draws)
    lo, hi = min(draws), max(draws)
    cells, obs, exp = [], [], []
    acc_o, acc_e = 0, 0.0
    support = range(lo - 50, hi + 51)
    for x in support:
        acc_o += counts.get(x, 0)
        acc_e += n * pmf(x)
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            cells.append(x)
            acc_o, acc_e = 0, 0.0
    if obs:
        obs[-1] += acc_o
        exp[-1] += acc_e
    exp_arr = np.array(exp) * (n / sum(exp))
    return float(stats.chisquare(obs, exp_arr).pvalue)


@pytest.mark.parametrize(("n", "p"), [(50, Fraction(3, 10)), (9, Fraction(5, 8)),
                                      (1000, Fraction(1, 3))])
def test_binomial_rational_matches_binomial_law(n: int, p: Fraction) -> None:
    s = _stream(f"rational-{n}-{p}")
    draws = [binomial_rational(n, p, s) for _ in range(4000)]
    assert _gof(draws, lambda x: stats.binom.pmf(x, n, float(p))) > P_MIN


def test_binomial_rational_edges() -> None:
    s = _stream("edges")
    assert binomial_rational(0, Fraction(1, 3), s) == 0
    assert binomial_rational(10, Fraction(0), s) == 0
    assert binomial_rational(10, Fraction(1), s) == 10
    with pytest.raises(InternalError):
        binomial_rational(-1, Fraction(1, 2), s)
    with pytest.raises(InternalError):
        binomial_rational(3, Fraction(3, 2), s)


@pytest.mark.parametrize("gamma", [Fraction(1, 2), Fraction(1), Fraction(7, 3)])
def test_binomial_exp_matches_binomial_law(gamma: Fraction) -> None:
    s = _stream(f"exp-{gamma}")
    n = 60
    p = math.exp(-float(gamma))
    draws = [binomial_exp(n, gamma, s) for _ in range(3000)]
    assert _gof(draws, lambda x: stats.binom.pmf(x, n, p)) > P_MIN


@pytest.mark.parametrize(("m", "scale"), [(31, Fraction(8)), (1, Fraction(8)), (0, Fraction(8)),
                                          (-4, Fraction(3)), (2, Fraction(1, 2))])
def test_binomial_discrete_laplace_tail(m: int, scale: Fraction) -> None:
    """Bin(n, P[Z >= m]) with the exact discrete Laplace tail (review P2 law)."""
    s = _stream(f"dlap-{m}-{scale}")
    n = 400
    p = dlap_sf(m, float(scale))
    draws = [binomial_discrete_laplace_sf(n, m, scale, s) for _ in range(2000)]
    assert _gof(draws, lambda x: stats.binom.pmf(x, n, p)) > P_MIN


def test_binomial_large_n_mean() -> None:
    """Large N (the unseen candidates of a big node): mean of K within 4.5 sd."""
    s = _stream("large")
    n, m, scale = 10**6, 40, Fraction(8195, 1024)
    p = dlap_sf(m, float(scale))
    draws = [binomial_discrete_laplace_sf(n, m, scale, s) for _ in range(60)]
    sd = math.sqrt(n * p * (1 - p) / len(draws))
    assert abs(np.mean(draws) - n * p) <= 4.5 * sd


def test_draws_are_keyed_and_deterministic() -> None:
    a = ReleaseKey.from_unsafe_seed(1)
    b = ReleaseKey.from_unsafe_seed(2)
    draw = [binomial_discrete_laplace_sf(10**5, 5, Fraction(8), k.stream(b"ctx"))
            for k in (a, a, b)]
    assert draw[0] == draw[1]
    sub = [uniform_subset(10**6, 20, k.stream(b"ctx")) for k in (a, a, b)]
    assert sub[0] == sub[1]
    assert sub[0] != sub[2]


def test_uniform_subset_is_uniform() -> None:
    s = _stream("subset")
    n, k, reps = 6, 2, 15000
    seen = Counter(tuple(uniform_subset(n, k, s)) for _ in range(reps))
    assert len(seen) == math.comb(n, k)
    assert all(len(set(c)) == k and list(c) == sorted(c) for c in seen)
    obs = [seen[c] for c in sorted(seen)]
    assert stats.chisquare(obs).pvalue > P_MIN
    assert uniform_subset(5, 0, s) == []
    assert uniform_subset(5, 5, s) == [0, 1, 2, 3, 4]
    with pytest.raises(InternalError):
        uniform_subset(3, 4, s)
