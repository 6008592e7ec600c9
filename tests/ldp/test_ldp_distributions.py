"""T-DIST: output distributions of the randomizers (statistical, fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ldp_helpers import P_MIN, TWO64, binom_ok, z_ok
from scipy import stats

import hdp_spark.ldp as L
from hdp_spark.core.ldp.common import duchi_scale, rr_factor, sphere_constant
from hdp_spark.core.noise import vector as vx


@pytest.mark.parametrize("eps", [0.2, 1.0, 4.0])
def test_laplace_noise_law(eps: float) -> None:
    n = 100_000
    x = np.full(n, 0.25)
    z = L.laplace(x, eps, unsafe_seed=f"lap{eps}") - x
    scale = 2.0 / eps
    assert stats.kstest(z, stats.laplace(scale=scale).cdf).pvalue > P_MIN
    # variance 8/ε² within 4.5 SE (relative SE of a Laplace variance: sqrt(5/n))
    assert abs(z.var() / (2 * scale**2) - 1) < 4.5 * math.sqrt(5 / n)
    # the KS test has power against a 10% smaller scale
    assert stats.kstest(z, stats.laplace(scale=scale * 0.9).cdf).pvalue < P_MIN


def test_laplace_reports_are_on_the_grid_and_data_units_map_back() -> None:
    y = L.laplace(np.linspace(-1, 1, 1001), 0.5, unsafe_seed=1)
    assert all((v * 2**30).is_integer() for v in y.tolist())
    # general bounds: reports are x + Lap((upper - lower)/ε) in data units
    n = 100_000
    a = L.laplace(np.full(n, 15.0), 1.0, lower=10.0, upper=30.0, unsafe_seed=2)
    assert z_ok(float(a.mean()), 15.0, 2 * 20.0**2 / n)
    assert abs(a.var() / (2 * 20.0**2) - 1) < 4.5 * math.sqrt(5 / n)


@pytest.mark.parametrize("eps", [1e-3, 0.3, 1.0, 3.0])
def test_rr_flip_frequency(eps: float) -> None:
    n = 200_000
    x = np.ones(n, dtype=np.int64)
    y = L.randomized_response(x, eps, unsafe_seed=f"rr{eps}")
    assert binom_ok(int(np.count_nonzero(y == -1)), n, 1 / (1 + math.exp(eps)))


def test_rr_stochastic_rounding_is_unbiased() -> None:
    n, eps, x = 200_000, 1.0, 0.3
    y = L.randomized_response(np.full(n, x), eps, unsafe_seed="round")
    c = rr_factor(eps)
    est = c * y.mean()
    assert z_ok(est, x, (c * c - x * x) / n)


def _duchi_reports(x: np.ndarray, eps: float, seed: str, radius: float = 1.0) -> np.ndarray:
    return L.duchi(x, eps, radius=radius, unsafe_seed=seed)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 50])
def test_duchi_norm_unbiasedness_and_e1_regression(d: int) -> None:
    n, eps, r = (100_000 if d <= 10 else 30_000), 0.5, 2.0
    x = np.zeros((n, d))
    x[:, 0] = 0.6 * r
    y = _duchi_reports(x, eps, f"duchi{d}", radius=r)
    b = duchi_scale(eps, r, d)
    assert np.allclose(np.linalg.norm(y, axis=1), b, rtol=1e-9)
    # E[Y] = x per coordinate (variance <= B²); the paper's radius would give 2x
    mean = y.mean(axis=0)
    for k in range(d):
        assert z_ok(float(mean[k]), float(x[0, k]), b * b / n)
    assert abs(mean[0] / x[0, 0] - 1) < 4.5 * b / math.sqrt(n) / x[0, 0]
    assert abs(mean[0] / x[0, 0] - 2) > 0.5  # erratum E1 regression


@pytest.mark.parametrize(("d", "a"), [(3, 0.0), (3, 0.4), (5, 1.0), (10, 0.7)])
def test_duchi_hemisphere_probability_and_cap_law(d: int, a: float) -> None:
    n, eps = 100_000, 1.0
    u = np.zeros(d)
    u[1] = 1.0
    y = _duchi_reports(np.tile(a * u, (n, 1)), eps, f"hemi{d}{a}")
    t = (y @ u) / np.linalg.norm(y, axis=1)
    k = int(vx.keep_numerator(np.array([eps]))[0])
    tanh_real = (2 * k - TWO64) / TWO64
    q = 0.5 + 0.5 * a * tanh_real
    assert binom_ok(int(np.count_nonzero(t > 0)), n, q)
    # given the side, |t| has density ∝ (1 - t²)^((d-3)/2) on (0, 1]
    if d == 3:
        assert stats.kstest(np.abs(t), "uniform").pvalue > P_MIN
    if d == 5:
        assert stats.kstest(np.abs(t), lambda s: (3 * s - s**3) / 2).pvalue > P_MIN
    if d == 10:
        # E|t| = 1/A_d
        at = np.abs(t)
        assert z_ok(float(at.mean()), 1 / sphere_constant(d), float(at.var()) / n)


def test_frequency_oracle_report_law() -> None:
    n, eps, d = 200_000, 0.8, 6
    oracle = L.FrequencyOracle(d=d, m=16, phi_seed=123)
    x = np.full(n, 4)
    rep = L.jl_frequency_report(x, eps, oracle=oracle, unsafe_seed="fo")
    s = oracle.signs(rep.index, x)
    p_keep = 1 / (1 + math.exp(-eps))
    assert binom_ok(int(np.count_nonzero(rep.sign == s)), n, p_keep)
    counts = np.bincount(rep.index, minlength=16)
    assert stats.chisquare(counts).pvalue > P_MIN
    # E[c b s(j, v)] = <Φe_x, Φe_v> = (1/m) Σ_j s(j,x) s(j,v)
    c = rr_factor(eps)
    j_all = np.arange(16)
    for v in range(d):
        target = float(np.mean(oracle.signs(j_all, 4) * oracle.signs(j_all, v)))
        vals = c * rep.sign * oracle.signs(rep.index, v)
        assert z_ok(float(vals.mean()), target, c * c / n)


def test_frequency_oracle_bottom_is_a_fair_coin() -> None:
    n = 100_000
    oracle = L.FrequencyOracle(d=3, m=8, phi_seed=5)
    values = np.array([np.nan, -1.0, 3.0, 1.5] * (n // 4))
    rep = L.jl_frequency_report(values, 2.0, oracle=oracle, unsafe_seed="bot")
    assert binom_ok(int(np.count_nonzero(rep.sign == 1)), n, 0.5)


def test_j_is_independent_of_the_value() -> None:
    n = 50_000
    oracle = L.FrequencyOracle(d=4, m=8, phi_seed=9)
    a = L.jl_frequency_report(np.zeros(n), 1.0, oracle=oracle, unsafe_seed="ja").index
    b = L.jl_frequency_report(np.full(n, 3), 1.0, oracle=oracle, unsafe_seed="jb").index
    table = np.vstack([np.bincount(a, minlength=8), np.bincount(b, minlength=8)])
    assert stats.chi2_contingency(table).pvalue > P_MIN
