"""T-UNB, T-VAR, T-HP, T-W, T-SYS-2: the aggregators over randomized reports (pandas path).

Trials are stacked in one table with a ``trial`` group column, so each test is one
aggregation (this also exercises grouped releases with a public key set).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from ldp_helpers import Z_MAX, z_ok

import hdp_spark.ldp as L
from hdp_spark.core.ldp.common import duchi_scale, rr_factor, weight_phi
from hdp_spark.core.ldp.mean import laplace_radius, laplace_radius_eq29, level_weights
from hdp_spark.pandas import ldp_agg as _ldp_agg

TRIALS = 300


def ldp_agg(df: pd.DataFrame, *specs: object, **kw: object) -> pd.DataFrame:
    """The reports here come from the numpy randomizers: declared as randomized."""
    return _ldp_agg(df, *specs, already_randomized=True, **kw)  # type: ignore[arg-type]


def _data_rng(tag: str) -> np.random.Generator:
    return np.random.default_rng(abs(hash(tag)) % 2**32)  # design-ok: synthetic test data


def _row_weights(mech: str, rule: str, eps: np.ndarray) -> np.ndarray:
    phi = np.array([weight_phi(mech, rule, float(e)) for e in eps])  # type: ignore[arg-type]
    return phi / phi.sum()


@pytest.fixture(autouse=True)
def _quiet_large_eps() -> None:
    warnings.simplefilter("ignore", L.LdpEpsilonWarning)


def _stack(
    x: np.ndarray, eps: np.ndarray, trials: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    trial = np.repeat(np.arange(trials), x.shape[0])
    return np.tile(x, (trials,) + (1,) * (x.ndim - 1)), np.tile(eps, trials), trial


EPS_MIX = np.array([0.05] * 300 + [1.0] * 1200 + [3.0] * 500)


def test_laplace_mean_unbiased_with_exact_variance() -> None:
    r = _data_rng("lapdata")
    x = r.uniform(-1, 1, EPS_MIX.size)
    xs, es, trial = _stack(x, EPS_MIX, TRIALS)
    y = L.laplace(xs, es, unsafe_seed="lap-unb")
    df = pd.DataFrame({"y": y, "eps": es, "trial": trial})
    rules = ("paper", "uniform", "inverse_variance")
    out = ldp_agg(
        df,
        *[L.ldp_mean("y", eps="eps", mechanism="laplace", weights=w, alias=w)  # type: ignore[arg-type]
          for w in rules],
        by="trial", keys=list(range(TRIALS)),
    )
    for weights in rules:
        w = _row_weights("laplace", weights, EPS_MIX)
        target = float(np.sum(w * x))
        var = float(np.sum(w**2 * 8 / EPS_MIX**2))
        est = out[f"{weights}_raw"].to_numpy()
        assert z_ok(float(est.mean()), target, var / TRIALS)
        assert abs(est.var(ddof=1) / var - 1) < 10 * math.sqrt(2 / TRIALS)


def test_rr_mean_unbiased_with_exact_variance() -> None:
    r = _data_rng("rrdata")
    x = np.where(r.random(EPS_MIX.size) < 0.7, 1, -1)
    xs, es, trial = _stack(x, EPS_MIX, TRIALS)
    y = L.randomized_response(xs, es, unsafe_seed="rr-unb")
    df = pd.DataFrame({"y": y, "eps": es, "trial": trial})
    out = ldp_agg(df, L.ldp_mean("y", eps="eps", mechanism="rr"), by="trial",
                  keys=list(range(TRIALS)))
    w = _row_weights("rr", "paper", EPS_MIX)
    c = np.array([rr_factor(float(e)) for e in EPS_MIX])
    target = float(np.sum(w * x))
    var = float(np.sum(w**2 * (c**2 - 1.0)))
    est = out["y_mean_raw"].to_numpy()
    assert z_ok(float(est.mean()), target, var / TRIALS)
    assert abs(est.var(ddof=1) / var - 1) < 5 * math.sqrt(2 / TRIALS)
    # data units: lower=0, upper=1 maps ±1 reports back to the mean of a 0/1 variable
    out01 = ldp_agg(df, L.ldp_mean("y", eps="eps", mechanism="rr", lower=0, upper=1),
                    by="trial", keys=list(range(TRIALS)))
    assert np.allclose(out01["y_mean_raw"], (est + 1) / 2)


def test_duchi_mean_unbiased_with_exact_mse() -> None:
    d, r_ball = 3, 2.0
    eps = EPS_MIX[::4]
    rng = _data_rng("duchidata")
    x = rng.normal(size=(eps.size, d))
    x *= (r_ball * rng.uniform(0, 1, eps.size) / np.linalg.norm(x, axis=1))[:, None]
    xs, es, trial = _stack(x, eps, TRIALS)
    y = L.duchi(xs, es, radius=r_ball, unsafe_seed="duchi-unb")
    df = pd.DataFrame({"y": list(y), "eps": es, "trial": trial})
    out = ldp_agg(df, L.ldp_mean_vector("y", eps="eps", d=d, radius=r_ball), by="trial",
                  keys=list(range(TRIALS)))
    w = _row_weights("duchi", "paper", eps)
    b = np.array([duchi_scale(float(e), r_ball, d) for e in eps])
    target = (w[:, None] * x).sum(axis=0)
    est = np.vstack(out["y_mean_raw"].to_numpy())
    bound = float(np.sum(w**2 * b**2))
    for k in range(d):
        assert z_ok(float(est[:, k].mean()), float(target[k]), bound / TRIALS)
    mse = float(np.sum(w**2 * (b**2 - np.sum(x**2, axis=1))))
    err2 = np.sum((est - target) ** 2, axis=1)
    assert abs(err2.mean() / mse - 1) < Z_MAX * math.sqrt(1.0 / TRIALS)


def test_distribution_unbiased_hadamard_and_jl_given_phi() -> None:
    d = 5
    eps = np.array([0.2] * 500 + [1.0] * 1500)
    x = _data_rng("fodata").integers(0, d, eps.size)
    x[:40] = -1  # ⊥ rows
    xs, es, trial = _stack(x.astype(float), eps, TRIALS)
    w = _row_weights("jl", "paper", eps)
    c = np.array([rr_factor(float(e)) for e in eps])
    for projection in ("hadamard", "jl"):
        oracle = L.FrequencyOracle.plan(eps, d, projection=projection, phi_seed=77)  # type: ignore[arg-type]
        rep = L.jl_frequency_report(xs, es, oracle=oracle, unsafe_seed=f"fo-{projection}")
        df = pd.DataFrame({"j": rep.index, "b": rep.sign, "eps": es, "trial": trial})
        out = ldp_agg(df, L.ldp_distribution("j", "b", eps="eps", oracle=oracle), by="trial",
                      keys=list(range(TRIALS)))
        est = np.vstack(out["j_pmf_raw"].to_numpy())
        jj = np.arange(oracle.m)
        signs = oracle.signs(jj[:, None], np.arange(d)[None, :]).astype(float)
        gram = signs.T @ signs / oracle.m  # <Φe_a, Φe_v> for the realized Φ
        for v in range(d):
            mu = np.where(x >= 0, gram[np.maximum(x, 0), v], 0.0)  # ⊥ rows have mean 0
            target = float(np.sum(w * mu))
            var = float(np.sum(w**2 * (c**2 - mu**2)))
            assert z_ok(float(est[:, v].mean()), target, var / TRIALS)
            if projection == "hadamard":
                assert math.isclose(target, float(np.sum(w * (x == v))), abs_tol=1e-12)


def _fails(err: np.ndarray, radius: np.ndarray, beta: float, trials: int) -> None:
    failures = int(np.count_nonzero(err > radius))
    assert failures <= beta * trials + 4 * math.sqrt(beta * (1 - beta) * trials) + 1


def test_interval_failure_rate_scalar_and_vector() -> None:
    trials, n = 400, 1000
    rng = _data_rng("hp")
    grid = 0.05 * 20.0 ** (np.arange(10) / 9)  # 10 log-spaced levels in [0.05, 1]
    eps = rng.choice(grid, n)
    theta = 0.3
    x = np.where(rng.random((trials, n)) < (1 + theta) / 2, 1.0, -1.0).ravel()
    es, trial = np.tile(eps, trials), np.repeat(np.arange(trials), n)
    y_lap = L.laplace(x, es, unsafe_seed="hp-lap")
    y_rr = L.randomized_response(x, es, unsafe_seed="hp-rr")
    r_ball = 1.0
    vec = np.zeros((x.size, 3))
    vec[:, 0] = x * r_ball
    y_du = L.duchi(vec, es, radius=r_ball, unsafe_seed="hp-du")
    df = pd.DataFrame({"lap": y_lap, "rr": y_rr, "du": list(y_du), "eps": es, "trial": trial})
    specs = []
    for beta in (0.1, 0.01):
        specs += [
            L.ldp_mean("lap", eps="eps", mechanism="laplace", beta=beta, alias=f"lap{beta}"),
            L.ldp_mean("rr", eps="eps", mechanism="rr", beta=beta, alias=f"rr{beta}"),
            L.ldp_mean_vector("du", eps="eps", d=3, beta=beta, alias=f"du{beta}"),
        ]
    out = ldp_agg(df, *specs, by="trial", keys=list(range(trials)))
    for beta in (0.1, 0.01):
        for name in (f"lap{beta}", f"rr{beta}"):
            err = np.abs(out[f"{name}_raw"].to_numpy() - theta)
            _fails(err, out[f"{name}_radius"].to_numpy(), beta, trials)
            inside = (out[f"{name}_ci_low"] <= theta) & (theta <= out[f"{name}_ci_high"])
            assert int((~inside).sum()) <= int(np.count_nonzero(err > out[f"{name}_radius"]))
        est = np.vstack(out[f"du{beta}_raw"].to_numpy())
        err = np.linalg.norm(est - np.array([theta * r_ball, 0.0, 0.0]), axis=1)
        _fails(err, out[f"du{beta}_radius"].to_numpy(), beta, trials)


def test_distribution_failure_rate_with_fresh_phi() -> None:
    beta, d, n = 0.1, 8, 3000
    rng = _data_rng("fohp")
    pmf = rng.dirichlet(np.full(d, 0.3))
    eps = np.where(np.arange(n) < n // 2, 0.2, 1.0)
    radius_h, err_h, radius_j, err_j = [], [], [], []
    for t in range(40):
        x = rng.choice(d, size=n, p=pmf)
        for projection, radius, err in (("hadamard", radius_h, err_h), ("jl", radius_j, err_j)):
            oracle = L.FrequencyOracle.plan(eps, d, projection=projection, beta=beta)  # type: ignore[arg-type]
            rep = L.jl_frequency_report(x, eps, oracle=oracle, unsafe_seed=f"fohp{t}{projection}")
            df = pd.DataFrame({"j": rep.index, "b": rep.sign, "eps": eps})
            out = ldp_agg(df, L.ldp_distribution("j", "b", eps="eps", oracle=oracle, beta=beta))
            radius.append(float(out["j_pmf_radius"][0]))
            err.append(float(np.max(np.abs(np.array(out["j_pmf_raw"][0]) - pmf))))
    _fails(np.array(err_h), np.array(radius_h), beta, 40)
    _fails(np.array(err_j), np.array(radius_j), beta, 40)


def test_spec_radius_reference_values_and_our_radius_is_tighter() -> None:
    levels, counts = [0.1, 1.0], [1500, 1500]
    w = level_weights("laplace", "paper", levels, counts)
    assert round(laplace_radius_eq29(w, levels, counts, 0.1), 3) == 0.505
    assert round(laplace_radius_eq29(w, levels, counts, 0.01), 3) == 0.672
    assert laplace_radius(w, levels, counts, 0.1) <= laplace_radius_eq29(w, levels, counts, 0.1)


def test_weight_invariants() -> None:
    rng = _data_rng("weights")
    for mech in ("laplace", "rr", "duchi", "jl"):
        for rule in ("paper", "uniform", "inverse_variance"):
            levels = sorted(set(np.round(rng.uniform(0.01, 3, 6), 3).tolist()))
            counts = rng.integers(1, 100, len(levels)).tolist()
            w = level_weights(mech, rule, levels, counts)  # type: ignore[arg-type]
            assert all(x >= 0 for x in w)
            assert math.isclose(sum(c * x for c, x in zip(counts, w, strict=True)), 1.0,
                                rel_tol=1e-12)
            homo = level_weights(mech, rule, [0.7], [40])  # type: ignore[arg-type]
            assert math.isclose(homo[0], 1 / 40, rel_tol=1e-12)
    e = 0.5
    assert math.isclose(weight_phi("laplace", "paper", e), e * e / (1 + e * e))
    assert math.isclose(weight_phi("rr", "paper", e), math.tanh(e / 2) ** 2)
    assert math.isclose(weight_phi("duchi", "paper", e), e * e)
    assert math.isclose(weight_phi("jl", "paper", e), math.tanh(e / 2) ** 2)


def _exact_mse(mech: str, rule: str, eps: np.ndarray, theta2: float, d: int = 10) -> float:
    w = _row_weights(mech, rule, eps)
    if mech == "laplace":
        return float(np.sum(w**2 * (1 - theta2 + 8 / eps**2)))
    if mech == "rr":
        c = 1 + 2 / np.expm1(eps)
        return float(np.sum(w**2 * (c**2 - theta2)))
    b = np.array([duchi_scale(float(e), 1.0, d) for e in eps])
    return float(np.sum(w**2 * (b**2 - theta2)))


@pytest.mark.parametrize(("alpha", "ref"), [
    (0.0, (0.00468, 0.00468, 0.00900, 0.00900, 0.0700, 0.0700)),
    (0.5, (0.00926, 0.20267, 0.01791, 0.40500, 0.1384, 3.0286)),
    (0.9, (0.04235, 0.36107, 0.08518, 0.72180, 0.6343, 5.3955)),
    (1.0, (0.40065, 0.40065, 0.80098, 0.80098, 5.9871, 5.9871)),
])
def test_exact_mse_matches_spec_table_and_paper_beats_uniform(
    alpha: float, ref: tuple[float, ...]
) -> None:
    n, beta = 1000, 0.05
    k = round(alpha * n)
    eps = np.array([0.1] * k + [1.0] * (n - k))
    s2 = float(np.sum(eps**2))
    theta2 = min(math.log(1 / (4 * beta * (1 - beta))) / (8 * s2), 1.0)
    psi2 = min(10**2 / (16 * s2), 1.0)
    got = (
        _exact_mse("rr", "paper", eps, theta2), _exact_mse("rr", "uniform", eps, theta2),
        _exact_mse("laplace", "paper", eps, theta2), _exact_mse("laplace", "uniform", eps, theta2),
        _exact_mse("duchi", "paper", eps, psi2 / 10),
        _exact_mse("duchi", "uniform", eps, psi2 / 10),
    )
    for g, r in zip(got, ref, strict=True):
        assert abs(g - r) <= 6e-4 * max(r, 1e-3) + 5e-6
    for i in (0, 2, 4):
        if 0 < alpha < 1:
            assert got[i] < got[i + 1]
        else:
            assert math.isclose(got[i], got[i + 1], rel_tol=1e-12)


def test_table_path_equals_per_row_computation() -> None:
    """T-SYS-2: grouped-by-ε sufficient statistics give the per-row weighted sum."""
    rng = _data_rng("sys2")
    eps = rng.choice([0.1, 0.4, 1.0, 2.5], 5000)
    x = rng.uniform(-1, 1, eps.size)
    y = L.laplace(x, eps, unsafe_seed="sys2")
    b = L.randomized_response(x, eps, unsafe_seed="sys2")
    df = pd.DataFrame({"y": y, "b": b, "eps": eps})
    out = ldp_agg(df, L.ldp_mean("y", eps="eps", mechanism="laplace"),
                  L.ldp_mean("b", eps="eps", mechanism="rr"))
    w = _row_weights("laplace", "paper", eps)
    assert math.isclose(float(out["y_mean_raw"][0]), float(np.sum(w * y)), rel_tol=1e-9)
    wr = _row_weights("rr", "paper", eps)
    c = 1 + 2 / np.expm1(eps)
    assert math.isclose(float(out["b_mean_raw"][0]), float(np.sum(wr * c * b)), rel_tol=1e-9)
    # permuting rows changes nothing (weights depend on ε only)
    perm = rng.permutation(eps.size)
    out2 = ldp_agg(df.iloc[perm], L.ldp_mean("y", eps="eps", mechanism="laplace"),
                   L.ldp_mean("b", eps="eps", mechanism="rr"))
    pd.testing.assert_frame_equal(out, out2)


def test_fallback_and_projection() -> None:
    eps = np.full(6, 0.1)
    y = L.laplace(np.ones(6), eps, unsafe_seed="fb")
    df = pd.DataFrame({"y": y, "eps": eps})
    out = ldp_agg(df, L.ldp_mean("y", eps="eps", mechanism="laplace", lower=-1, upper=1))
    assert bool(out["y_mean_fallback"][0])
    assert out["y_mean"][0] == 0.0
    assert out["y_mean_radius"][0] >= 1.0
    out = ldp_agg(df, L.ldp_mean("y", eps="eps", mechanism="laplace", fallback=False))
    assert not bool(out["y_mean_fallback"][0])
    assert out["y_mean"][0] == min(max(out["y_mean_raw"][0], -1.0), 1.0)
    assert out["y_mean_ci_low"][0] == -1.0
    assert out["y_mean_ci_high"][0] == 1.0


def test_large_eps_warns_with_counts_only() -> None:
    df = pd.DataFrame({"b": [1, -1, 1], "eps": [0.5, 2.0, 3.0]})
    warnings.simplefilter("always", L.LdpEpsilonWarning)
    with pytest.warns(L.LdpEpsilonWarning, match="2 row"):
        ldp_agg(df, L.ldp_mean("b", eps="eps", mechanism="rr"))
