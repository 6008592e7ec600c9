"""Exact vectorized samplers (hdp_spark.core.noise.vector): laws, exactness, keying, fork."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from ldp_helpers import P_MIN, TWO64, binom_ok, discrete_laplace_pmf, ratio_at_most_exp
from scipy import stats

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise import vector as vx

EPS_GRID = [2.0**-20, 1e-6 * 1.5, 1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 37.0, 60.0, 700.0]


def _rng(tag: str) -> np.random.Generator:
    return vx.generator(ReleaseKey.from_unsafe_seed("samplers"), tag.encode())


def _random_eps(n: int) -> np.ndarray:
    r = np.random.default_rng(7)  # design-ok: test inputs (public ε values), not noise
    return np.exp(r.uniform(math.log(2.0**-20), math.log(60.0), n))


@pytest.mark.parametrize("t", [1, 3, 40])
def test_discrete_laplace_matches_exact_pmf(t: int) -> None:
    y = vx.discrete_laplace(_rng(f"dl{t}"), np.full(200_000, t, dtype=np.int64))
    cut = 4 * t
    edges = np.arange(-cut, cut + 1)
    observed = np.array(
        [np.count_nonzero(y == k) for k in edges] + [np.count_nonzero(np.abs(y) > cut)]
    )
    pmf = discrete_laplace_pmf(edges, t)
    expected = np.append(pmf, 1.0 - pmf.sum()) * y.size
    keep = expected > 20
    obs = observed[keep]
    exp = expected[keep]
    if (~keep).any():
        obs = np.append(obs, observed[~keep].sum())
        exp = np.append(exp, expected[~keep].sum())
    assert stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > P_MIN


def test_discrete_laplace_large_scale_variance() -> None:
    t = 2**40
    y = vx.discrete_laplace(_rng("big"), np.full(100_000, t, dtype=np.int64)).astype(float) / t
    # Var(Y/t) = 2q/((1-q)^2 t^2) -> 2; relative SE of a Laplace variance is sqrt(5/n)
    assert abs(y.var() / 2.0 - 1.0) < 4.5 * math.sqrt(5 / y.size)


@pytest.mark.parametrize(("num", "den"), [(0, 1), (1, 3), (1, 1), (7, 8)])
def test_bern_exp_le1_rate(num: int, den: int) -> None:
    n = 200_000
    out = vx.bern_exp_le1(_rng(f"be{num}/{den}"), np.full(n, num), np.full(n, den))
    assert binom_ok(int(out.sum()), n, math.exp(-num / den))


def test_keep_numerator_ratio_is_at_most_exp_eps_exactly() -> None:
    eps = np.array(EPS_GRID + list(_random_eps(300)))
    k = vx.keep_numerator(eps)
    for e, kk in zip(eps.tolist(), k.tolist(), strict=True):
        assert 2**63 <= kk < TWO64
        assert ratio_at_most_exp(kk, TWO64 - kk, e), e
        # tightness: realized tanh within 2**-38 relative of the exact one (for e < 40)
        if e < 40:
            realized = Fraction(kk - 2**63, 2**63)
            assert float(realized) >= math.tanh(e / 2) * (1 - 2.0**-37)


def test_laplace_grid_scale_pays_for_the_grid_exactly() -> None:
    eps = np.array(EPS_GRID + list(_random_eps(1000)))
    t = vx.laplace_grid_scale(eps)
    for e, tt in zip(eps.tolist(), t.tolist(), strict=True):
        # privacy loss of a full-range shift D between snapped inputs: D/t <= ε, exactly
        assert Fraction(vx.LAPLACE_SPAN_UNITS, tt) <= Fraction(e)
        # and the scale is not inflated by more than one grid step beyond D/ε + 1
        assert tt <= Fraction(vx.LAPLACE_SPAN_UNITS) / Fraction(e) + 2


def test_laplace_unit_stays_on_grid_and_rounds_unbiasedly() -> None:
    n = 200_000
    u = np.full(n, 0.5 + 2.0**-31)  # halfway between two grid points
    s = u * 2.0**30
    k = vx.laplace_unit(_rng("grid"), u, np.full(n, 1e9))  # tiny noise: t = 2
    assert k.dtype == np.int64
    assert np.all(np.abs(k - s) < 200)
    # rounding is stochastic and unbiased: mean(k) = s within noise (Var <= 0.25 + Var(Y))
    t = int(vx.laplace_grid_scale(np.array([1e9]))[0])
    q = math.exp(-1 / t)
    var = 0.25 + 2 * q / (1 - q) ** 2
    assert abs(k.mean() - s[0]) <= 4.5 * math.sqrt(var / n)


def test_rr_never_uses_bitwise_not() -> None:
    out = vx.rr_pm1(_rng("rr"), np.array([1.0, -1.0] * 5000), np.full(10_000, 0.5))
    assert set(np.unique(out).tolist()) <= {-1, 1}


def test_hemisphere_side_is_antisymmetric_including_ties() -> None:
    r = np.random.default_rng(3)  # design-ok: test inputs, not noise
    g = r.standard_normal((20_000, 5))
    g[:100, 1:] = 0.0  # ties for u = e_2
    g[100:200] = np.round(g[100:200])
    u = np.zeros((20_000, 5))
    u[:, 1] = 1.0
    u[10_000:] = r.standard_normal((10_000, 5))
    s1 = vx.hemisphere_side(g, u)
    s2 = vx.hemisphere_side(-g, u)
    assert np.all(s1 == -s2)
    assert set(np.unique(s1).tolist()) == {-1.0, 1.0}


def test_generator_is_keyed_and_context_bound() -> None:
    key = ReleaseKey.from_unsafe_seed(1)
    a = vx.generator(key, b"ctx").integers(0, 2**62, 4)
    b = vx.generator(key, b"ctx").integers(0, 2**62, 4)
    c = vx.generator(key, b"ctx2").integers(0, 2**62, 4)
    d = vx.generator(ReleaseKey.from_unsafe_seed(2), b"ctx").integers(0, 2**62, 4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, d)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fresh_keys_after_fork_differ() -> None:
    """A generator is never created before a fork: parent and child draw independently."""
    from hdp_spark.ldp import laplace

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        draws = laplace(np.zeros(4), 1.0)
        os.write(write, draws.tobytes())
        os._exit(0)
    os.close(write)
    mine = laplace(np.zeros(4), 1.0)
    data = b""
    while chunk := os.read(read, 4096):
        data += chunk
    os.waitpid(pid, 0)
    theirs = np.frombuffer(data, dtype=np.float64)
    assert theirs.shape == (4,)
    assert not np.array_equal(mine, theirs)
