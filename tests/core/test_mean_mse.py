"""Monte-Carlo accuracy of the released mean (seed-001 §5 oracle 10, seed-000 O6).

Each trial draws a NEW dataset from P (numpy, test-side data generation only), encodes it
with the library's encoder, builds the level table and releases it with
:func:`finalize_mean` under a fresh per-trial key. The target is the population mean μ_P,
and the exact MSE of the unclipped ADPM estimate is Δ²(σ_u²‖w‖² + 2η'²) (σ_u² the variance of
P in unit scale, η' the scale actually used).

Tolerance: the relative standard deviation of (error)² is at most √5 (kurtosis of a sum of
a Laplace and an independent bounded sum is at most Laplace's 6), so the empirical MSE over
K trials is within 5√(5/K) of the truth except with probability ~1e-6. Seeds are fixed:
the test is deterministic.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from mean_oracles import INF, spec, stats_of

from hdp_spark.core.encoding import encode_numpy
from hdp_spark.core.mean.finalize import finalize_mean, mean_weights
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.exact import GRID_SLACK

LOWER, UPPER = 2.0, 7.0
SPAN = UPPER - LOWER
V = [0.05, 0.5, 3.0, INF]
M = [10, 20, 8, 2]


def _draw_unit(name: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    if name == "bernoulli":
        return rng.integers(0, 2, size=shape).astype(np.float64)  # ±1/2 after centring
    if name == "uniform":
        return rng.random(shape)
    return rng.beta(2.0, 3.0, size=shape)


MOMENTS = {"bernoulli": (0.5, 0.25), "uniform": (0.5, 1 / 12), "beta23": (0.4, 0.04)}


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["bernoulli", "uniform", "beta23"])
def test_mse_matches_the_exact_formula(dist: str) -> None:
    k_trials = 8000
    sp = spec("adpm", LOWER, UPPER)
    assert not sp.clips  # paper-faithful, unbiased
    w = mean_weights(sp, V, M)
    l2 = sum(float(x) ** 2 * c for x, c in zip(w.w, M, strict=True))
    eta_used = float(w.eta * (1 + GRID_SLACK))
    assert l2 / 4 + 2 * float(w.eta) ** 2 < 0.25  # no fallback
    mu_u, var_u = MOMENTS[dist]
    sampling, noise = var_u * l2, 2 * eta_used**2
    assert 0.1 < sampling / noise < 10  # both terms matter
    expected = SPAN**2 * (sampling + noise)
    mu = LOWER + SPAN * mu_u

    rng = np.random.default_rng([7, len(dist)])
    n = sum(M)
    unit = _draw_unit(dist, rng, (k_trials, n))
    codes = encode_numpy(LOWER + SPAN * unit.ravel(), LOWER, UPPER, 0.0).reshape(k_trials, n)
    bounds = np.cumsum([0, *M])
    totals = np.stack([codes[:, a:b].sum(axis=1) for a, b in pairwise(bounds)], axis=1)
    est = np.empty(k_trials)
    for t in range(k_trials):
        st = stats_of(V, M, [int(x) for x in totals[t]])
        key = ReleaseKey.from_unsafe_seed(f"mse-{dist}-{t}")
        r = finalize_mean(sp, st, 0, key, (), "x")
        assert not r.fallback
        est[t] = r.estimate
    err2 = (est - mu) ** 2
    assert abs(float(err2.mean()) / expected - 1) <= 5 * math.sqrt(5 / k_trials)
    assert abs(float(est.mean()) - mu) <= 5 * math.sqrt(expected / k_trials)  # unbiased


def test_homogeneous_error_quantile_is_b_ln20() -> None:
    """O6: all ε = e -> w = 1/n and the 95th percentile of |error| is b·ln 20."""
    n, e, k_trials = 20, 0.8, 3000
    v, m = [e], [n]
    values = [(i % 4) / 4 for i in range(n)]  # dyadic: encoded exactly
    total = sum(math.floor(u * 2**31 + 0.5) for u in values)
    sp = spec("adpm", LOWER, UPPER)
    st = stats_of(v, m, [total])
    mean = LOWER + SPAN * sum(values) / n
    b = SPAN / (n * e) * (1 + 2.0**-20)
    beyond = 0
    for t in range(k_trials):
        r = finalize_mean(sp, st, 0, ReleaseKey.from_unsafe_seed(f"q95-{t}"), (), "x")
        assert b * (1 - 1e-15) <= r.noise_scale <= b * (1 + 2.0**-18)  # whole grid steps
        beyond += abs(r.estimate - mean) > b * math.log(20)
    # Binomial(K, 0.05): within 5.5 standard deviations
    assert abs(beyond - 0.05 * k_trials) <= 5.5 * math.sqrt(k_trials * 0.05 * 0.95)
