"""The projection mechanism for marginals (seed-004 §2.4, §5 oracles 20-22; Theorem 11).

* budget: Δ, Δ₀ and ε/ε₀ = √(d/k) for contingency tables (oracle 20, ×√2 of conjunctions);
* sensitivity argument checked by enumerating every record pair of small domains;
* the exact discrete Gaussian: sampler pmf against the exact law; the exact Rényi
  divergences of the released counts at the worst-case shift stay at the reported ρ;
* projection (oracle 21): never farther from 𝒬(x) than Y, in the hull, variational
  inequality, equal to an independent solver; Monte-Carlo MSE (oracle 22);
* engines: identical pre-noise counts and releases; errors name parameter, rule, value.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from hdp_spark.core.noise import ReleaseKey, discrete_gaussian
from hdp_spark.core.partial import accounting
from hdp_spark.core.partial.consistency import TableGeometry, project
from hdp_spark.core.partial.projection import MarginalsSpec, finalize_marginals, hdp_marginals
from hdp_spark.errors import ParameterError


def _binary_spec(d: int, k: int, eps0: float = 1.0, **kw) -> MarginalsSpec:
    cols = [f"a{j}" for j in range(d)]
    return hdp_marginals(cols, domains={c: [0, 1] for c in cols}, eps0=eps0, k=k,
                         other={c: 0 for c in cols}, **kw)


# -- budget (oracle 20) ---------------------------------------------------------------------------


def test_oracle20_diameters_and_ratio() -> None:
    """d = 20, k = 3: m = 1140, Δ = √2·33.764, Δ₀ = √2·13.077 (full tables: two cells move),
    per-person / per-attribute = √(20/3) = 2.582."""
    spec = _binary_spec(20, 3)
    b = spec.budget
    assert len(spec.workload) == 1140
    assert math.sqrt(b.sens_person_sq) == pytest.approx(math.sqrt(2) * 33.764, abs=1e-3)
    assert math.sqrt(b.sens_attr_sq) == pytest.approx(math.sqrt(2) * 13.077, abs=1e-3)
    assert b.eps_person / b.eps_attribute == pytest.approx(math.sqrt(20 / 3), abs=1e-9)
    assert b.eps_person / b.eps_attribute == pytest.approx(2.582, abs=1e-3)
    # σ² >= Δ₀²/ε₀², rounded up on the 1/1024 grid: eps_attribute <= eps0, barely
    assert b.sigma2 >= Fraction(b.sens_attr_sq)
    assert b.sigma2 - Fraction(b.sens_attr_sq) < Fraction(1, 1024)
    assert b.eps_attribute <= 1.0
    assert b.eps_attribute > 1.0 - 1e-4
    assert b.rho_person_prop8 == pytest.approx(0.5 * 20**2 * b.eps_attribute**2)


def test_uneven_workload_gives_per_attribute_costs() -> None:
    cols = ["a", "b", "c", "d"]
    spec = hdp_marginals(cols, domains={c: [0, 1, 2] for c in cols}, eps0=0.8,
                         marginals=[["a", "b"], ["a", "c"], ["a", "d"], ["b"]],
                         other={c: 0 for c in cols})
    b = spec.budget
    assert b.degrees == (3, 2, 1, 1)
    assert b.sens_attr_sq == 6
    s2 = float(b.sigma2)
    assert b.rho_attributes == pytest.approx((3 / s2, 2 / s2, 1 / s2, 1 / s2))
    assert b.rho_attribute == pytest.approx(0.5 * 0.8**2, rel=1e-3)
    assert b.rho_person == pytest.approx(4 / s2)


@pytest.mark.parametrize(("sizes", "workload"), [
    ((2, 2, 2), ((0, 1), (0, 2), (1, 2))),
    ((3, 2, 4), ((0,), (0, 1), (1, 2), (0, 1, 2))),
    ((2, 3, 2, 2), ((0, 1), (2, 3), (1, 3))),
])
def test_sensitivity_argument_by_enumeration(sizes, workload) -> None:
    """Every pair of records differing in attribute j moves 𝒬 by exactly 2·deg(j) in L2²;
    the worst whole-record change by 2|W| (the sensitivities the budget uses)."""
    geo = TableGeometry(sizes, workload)
    d = len(sizes)
    records = list(itertools.product(*(range(s) for s in sizes)))

    def q(rec: tuple[int, ...]) -> np.ndarray:
        v = np.zeros(geo.m)
        v[geo.vertex(int(np.ravel_multi_index(rec, sizes)))] = 1.0
        return v

    vec = {r: q(r) for r in records}
    deg = [sum(1 for s in workload if j in s) for j in range(d)]
    person = 0.0
    for u, v in itertools.combinations(records, 2):
        diff = float(((vec[u] - vec[v]) ** 2).sum())
        changed = [j for j in range(d) if u[j] != v[j]]
        if len(changed) == 1:
            assert diff == 2 * deg[changed[0]]
        assert diff <= 2 * sum(deg[j] for j in changed)
        person = max(person, diff)
    assert person == 2 * len(workload)


# -- exact discrete Gaussian and the claimed zCDP -----------------------------------------------


def _dg_pmf(sigma2: float, lim: int) -> tuple[np.ndarray, np.ndarray]:
    z = np.arange(-lim, lim + 1)
    p = np.exp(-(z.astype(float) ** 2) / (2 * sigma2))
    return z, p / p.sum()


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(2), Fraction(45, 4)])
def test_discrete_gaussian_sampler_matches_exact_law(sigma2: Fraction) -> None:
    rng = ReleaseKey.from_unsafe_seed(f"dg-{sigma2}").stream(b"dg")
    n = 20000
    draws = Counter(discrete_gaussian(sigma2, rng) for _ in range(n))
    z, p = _dg_pmf(float(sigma2), 60)
    lim = int(3 * math.sqrt(float(sigma2))) + 1
    inner = np.abs(z) <= lim
    obs = [draws.get(int(v), 0) for v in z[inner]]
    obs.append(n - sum(obs))
    exp = [*(p[inner] * n), (1 - p[inner].sum()) * n]
    keep = np.array(exp) > 5
    obs_k, exp_k = np.array(obs)[keep], np.array(exp)[keep]
    exp_k = exp_k * obs_k.sum() / exp_k.sum()
    assert stats.chisquare(obs_k, exp_k).pvalue > 1e-4


def _renyi_shift(sigma2: float, shift: int, alpha: float) -> float:
    """Exact D_α(N_Z(shift, σ²) ‖ N_Z(0, σ²)) by summing the pmfs."""
    z = np.arange(-400, 401).astype(float)
    lp = -(z**2) / (2 * sigma2)
    lq = -((z - shift) ** 2) / (2 * sigma2)
    lp -= np.logaddexp.reduce(lp)
    lq -= np.logaddexp.reduce(lq)
    return float(np.logaddexp.reduce(alpha * lq + (1 - alpha) * lp) / (alpha - 1))


@pytest.mark.parametrize(("d", "k"), [(4, 2), (5, 3), (3, 1)])
def test_released_counts_meet_reported_zcdp(d: int, k: int) -> None:
    """Worst one-attribute and whole-record changes (from enumeration): the exact Rényi
    divergence of the noisy counts, Σ over the changed cells, is α·ρ with ρ the reported
    ρ_attribute / ρ_person (tight: a smaller σ² or sensitivity would fail)."""
    spec = _binary_spec(d, k, eps0=1.3)
    b = spec.budget
    geo = TableGeometry(spec.sizes, spec.workload)
    zero = np.zeros(geo.m)
    zero[geo.vertex(0)] = 1.0
    one_attr = np.zeros(geo.m)
    one_attr[geo.vertex(int(np.ravel_multi_index((1,) + (0,) * (d - 1), spec.sizes)))] = 1.0
    flipped = np.zeros(geo.m)
    flipped[geo.vertex(2**d - 1)] = 1.0
    s2 = float(b.sigma2)
    for other, rho in ((one_attr, b.rho_attribute), (flipped, b.rho_person)):
        shift = (other - zero).astype(int)
        for alpha in (1.5, 2.0, 8.0):
            div = sum(_renyi_shift(s2, int(c), alpha) for c in shift if c)
            assert div <= alpha * rho * (1 + 1e-9)
            assert div >= alpha * rho * (1 - 1e-6)
    assert b.rho_attribute <= 0.5 * 1.3**2


def test_conversions_in_report() -> None:
    pdf = pd.DataFrame({"a0": [0, 1] * 50, "a1": [1, 1, 0, 0] * 25, "a2": [0] * 100})
    spec = _binary_spec(3, 2, eps0=0.7, delta=1e-5)
    ph = importlib.import_module("hdp_spark.pandas")
    r = ph.marginals(pdf, spec, unsafe_seed=2).report
    b = spec.budget
    assert r.eps_delta_person_cks20 == pytest.approx(accounting.eps_cks20(b.rho_person, 1e-5))
    assert r.eps_delta_person_bs16 == pytest.approx(accounting.eps_bs16(b.rho_person, 1e-5))
    assert r.eps_delta_person_cks20 <= r.eps_delta_person_bs16
    assert r.eps_delta_attribute_cks20 == pytest.approx(
        accounting.eps_cks20(b.rho_attribute, 1e-5))
    assert r.eps_person == pytest.approx(math.sqrt(2 * r.rho_person))
    assert r.rho_person < r.rho_person_prop8  # much better than Proposition 8
    assert r.n == 100


# -- projection (oracles 21, 22) ------------------------------------------------------------------


def _exact_tables(x: np.ndarray, sizes, workload) -> list[np.ndarray]:
    out = []
    for s in workload:
        key = np.zeros(len(x), dtype=np.int64)
        for j in s:
            key = key * sizes[j] + x[:, j]
        out.append(np.bincount(key, minlength=math.prod(sizes[j] for j in s)).astype(float))
    return out


@pytest.mark.parametrize(("sizes", "workload", "n", "noise"), [
    ((2, 2, 2, 2), tuple(itertools.combinations(range(4), 2)), 40, 4.0),
    ((3, 2, 2, 3), ((0, 1), (1, 2), (2, 3), (0, 3)), 25, 6.0),
    ((2,) * 6, tuple(itertools.combinations(range(6), 3)), 200, 3.0),
])
def test_oracle21_projection(sizes, workload, n: int, noise: float) -> None:
    rng = np.random.default_rng(n)
    x = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
    exact = [t / n for t in _exact_tables(x, sizes, workload)]
    noisy = [t + rng.normal(0, noise / n, t.shape) for t in exact]
    tol = 1e-9
    p = project(sizes, workload, noisy, tol=tol)
    assert p.converged
    qx, y, yh = np.concatenate(exact), np.concatenate(noisy), np.concatenate(p.tables)
    assert np.linalg.norm(yh - qx) <= np.linalg.norm(y - qx) + 1e-7
    # in the hull: the returned weights are a distribution whose marginals are Ŷ
    w = np.array(list(p.weights.values()))
    assert np.all(w >= 0)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    geo = TableGeometry(sizes, workload)
    rebuilt = np.zeros(geo.m)
    for u, wu in p.weights.items():
        rebuilt[geo.vertex(u)] += wu
    assert np.allclose(rebuilt, yh, atol=1e-12)
    # variational inequality over every record, and at Q(x)
    for u in range(math.prod(sizes)):
        qu = np.zeros(geo.m)
        qu[geo.vertex(u)] = 1.0
        assert float((qu - yh) @ (y - yh)) <= 2 * tol
    assert float((qx - yh) @ (y - yh)) <= 2 * tol


def test_projection_matches_independent_solver() -> None:
    """Same Ŷ as SLSQP over the simplex of all 8 records (d = 3 binary, 2-way)."""
    sizes, workload = (2, 2, 2), ((0, 1), (0, 2), (1, 2))
    geo = TableGeometry(sizes, workload)
    a = np.zeros((geo.m, 8))
    for u in range(8):
        a[geo.vertex(u), u] = 1.0
    rng = np.random.default_rng(5)
    y = rng.normal(0.25, 0.3, geo.m)
    target = [y[o:o + c] for o, c in zip(geo.offsets, geo.cells, strict=True)]
    ours = np.concatenate(project(sizes, workload, target, tol=1e-12).tables)
    res = optimize.minimize(lambda w: float(((a @ w - y) ** 2).sum()), np.full(8, 1 / 8),
                            jac=lambda w: 2 * a.T @ (a @ w - y), method="SLSQP",
                            bounds=[(0, 1)] * 8,
                            constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
                            options={"ftol": 1e-15, "maxiter": 1000})
    assert np.allclose(ours, a @ res.x, atol=1e-6)


@pytest.mark.slow
def test_oracle22_monte_carlo_mse() -> None:
    """E[(1/m)‖M(x) − 𝒬(x)‖²] <= min{σ², σΔ√(2 ln|𝒳|)/m} (answer space, σ = σ_count/n)."""
    spec = _binary_spec(6, 2, eps0=0.5)
    rng = np.random.default_rng(0)
    n = 60
    x = rng.integers(0, 2, (n, 6))
    exact = _exact_tables(x, spec.sizes, spec.workload)
    counts = [{c: int(v) for c, v in enumerate(t) if v} for t in exact]
    qx = np.concatenate(exact) / n
    errs = []
    for r in range(40):
        res = finalize_marginals(spec, counts, ReleaseKey.from_unsafe_seed(f"mse-{r}"))
        errs.append(float(((np.concatenate(res.projection.tables) - qx) ** 2).mean()))
    b = spec.budget
    m = qx.size
    sigma = math.sqrt(float(b.sigma2)) / n
    bound = min(sigma**2, sigma * math.sqrt(b.sens_person_sq) * math.sqrt(2 * math.log(64)) / m)
    assert np.mean(errs) <= bound
    # and projection helps: the raw noisy answers have MSE ≈ σ²
    assert np.mean(errs) < sigma**2


# -- release: keyed noise, engines, errors --------------------------------------------------------


def _frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "sex": rng.choice(["F", "M", None], n, p=[.48, .48, .04]),
        "age": rng.choice([1, 2, 3, 4, 7], n),
        "smoker": rng.random(n) < 0.2,
        "region": rng.choice(["N", "S", "E", "W"], n),
    })


def _spec(**kw) -> MarginalsSpec:
    args = {"domains": {"sex": ["F", "M"], "age": [1, 2, 3, 4], "smoker": [False, True],
                        "region": ["N", "S", "E", "W"]},
            "eps0": 1.0, "k": 2, "other": {"region": "N"}} | kw
    return hdp_marginals(["sex", "age", "smoker", "region"], **args)


def test_noise_keyed_to_the_counts() -> None:
    spec = _spec()
    sizes = spec.sizes
    rng = np.random.default_rng(1)
    x = np.stack([rng.integers(0, s, 200) for s in sizes], axis=1)
    exact = _exact_tables(x, sizes, spec.workload)
    counts = [{c: int(v) for c, v in enumerate(t) if v} for t in exact]
    key = ReleaseKey.from_unsafe_seed(9)
    a = finalize_marginals(spec, counts, key)
    b = finalize_marginals(spec, counts, key)
    assert a.rows == b.rows  # same data: same release (re-evaluation replays)
    x2 = x.copy()
    x2[0, 1] = (x2[0, 1] + 1) % sizes[1]
    counts2 = [{c: int(v) for c, v in enumerate(t) if v}
               for t in _exact_tables(x2, sizes, spec.workload)]
    c = finalize_marginals(spec, counts2, key)
    noise_a = [r["noisy_count"] - e for r, e in zip(a.rows, np.concatenate(exact), strict=True)]
    ex2 = np.concatenate(_exact_tables(x2, sizes, spec.workload))
    noise_c = [r["noisy_count"] - e for r, e in zip(c.rows, ex2, strict=True)]
    assert noise_a != noise_c  # changed data: unrelated noise (no differencing)


def test_release_on_engine(engine) -> None:
    mod = importlib.import_module(f"hdp_spark.{engine.name}")
    pdf = _frame()
    out = mod.marginals(engine.frame(pdf), _spec(), unsafe_seed=3)
    table = out.table if engine.name == "pandas" else out.table.toPandas()
    assert list(table.columns) == ["marginal", "sex", "age", "smoker", "region", "noisy_count",
                                   "projected_count", "projected_fraction"]
    # sizes: sex 3 (extra null category), age 5, smoker 3, region 4 -> 6 tables
    assert len(table) == 15 + 9 + 12 + 15 + 20 + 12
    for _, g in table.groupby("marginal"):
        assert g["projected_fraction"].sum() == pytest.approx(1.0, abs=1e-9)
        assert (g["projected_fraction"] >= -1e-12).all()
    sa = table[table["marginal"] == "sex,age"]
    assert sa["smoker"].isna().all()
    assert out.report.projection_converged
    assert out.report.n == len(pdf)


def test_release_identical_across_engines(spark) -> None:
    ph = importlib.import_module("hdp_spark.pandas")
    sh = importlib.import_module("hdp_spark.spark")
    pdf = _frame(seed=2)
    spec = _spec()
    a = ph.marginals(pdf, spec, unsafe_seed=8).table
    b = ph.marginals(pdf.sample(frac=1.0, random_state=1), spec, unsafe_seed=8).table
    c = sh.marginals(spark.createDataFrame(pdf).repartition(3), spec,
                     unsafe_seed=8).table.toPandas()
    pd.testing.assert_frame_equal(a, b)
    assert a.astype(object).where(a.notna(), None).to_dict("records") == \
        c.astype(object).where(c.notna(), None).to_dict("records")


def test_budget_is_data_independent() -> None:
    ph = importlib.import_module("hdp_spark.pandas")
    spec = _spec()
    r1 = ph.marginals(_frame(seed=1), spec).report.as_dict()
    r2 = ph.marginals(_frame(n=500, seed=4), spec).report.as_dict()
    dp_fields = {"n", "projection_gap", "projection_iterations", "projection_converged"}
    assert {k: v for k, v in r1.items() if k not in dp_fields} == {
        k: v for k, v in r2.items() if k not in dp_fields}


@pytest.mark.parametrize(("kw", "match"), [
    ({"k": None}, "exactly one of `k`"),
    ({"marginals": [["sex"]]}, "exactly one of `k`"),
    ({"k": 5}, r"`k` must be an int in \[1, 4\].*got 5"),
    ({"k": None, "marginals": [["sex", "nope"]]}, "distinct columns of `cols`"),
    ({"k": None, "marginals": [["age", "sex"], ["sex", "age"]]}, "must not repeat"),
    ({"k": None, "marginals": "sex"}, "non-empty list of column lists"),
    ({"eps0": 0}, "`eps0` must be a positive finite number, got 0"),
    ({"delta": 1.5}, r"`delta` must be in \(0, 1\), got 1.5"),
    ({"max_domain": 100}, r"`max_domain` = 100, got 180"),
    ({"tol": -1.0}, "`tol` must be a positive finite number, got -1.0"),
    ({"max_iter": 0}, "`max_iter` must be a positive int, got 0"),
])
def test_parameter_errors(kw, match) -> None:
    with pytest.raises(ParameterError, match=match):
        _spec(**kw)


def test_empty_table_raises() -> None:
    spec = _spec()
    with pytest.raises(ParameterError, match="public n, which must be > 0"):
        finalize_marginals(spec, [{} for _ in spec.workload], ReleaseKey.from_unsafe_seed(1))


def test_unit_rule() -> None:
    with pytest.raises(ParameterError, match="`privacy_unit` must not be one of `cols`"):
        _spec(privacy_unit="sex")
    with pytest.raises(ParameterError, match="`workload` must be a non-empty tuple"):
        MarginalsSpec(_spec().domains, ((2, 1),), 1.0)
