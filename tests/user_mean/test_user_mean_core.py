"""Engine-agnostic oracles of the user-level mean (spec seed-002 §5): spec validation,
solver optimality, weight caps, limits, group plan."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize

from hdp_spark.core import user_mean as core
from hdp_spark.core.noise import ReleaseKey, exponential_mechanism
from hdp_spark.core.user_mean import (
    CensusCell,
    hdp_user_mean,
    plan_group,
    proxy_objective,
    solve_user_weights,
)
from hdp_spark.errors import ParameterError

SPEC = hdp_user_mean("x", user="u", eps="e", lower=0, upper=1)


# -- spec ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"lower": 1, "upper": 0}, "`lower` must be < `upper`"),
        ({"cap": "sigma"}, "`cap` must be one of width, paper; got 'sigma'"),
        ({"beta": 1.5}, "`beta` must be in (0, 1), got 1.5"),
        ({"var_users": 1}, "`var_users` must be an integer >= 2 or None, got 1"),
        ({"public_variance": -1.0}, "`public_variance` must be finite and >= 0, got -1.0"),
        ({"public_variance": 0.1, "var_users": 4}, "exclude each other"),
        ({"tau_d": 0}, "`tau_d` must be finite and > 0, got 0"),
        ({"fill": 2.0}, "`fill` must lie in [lower, upper], got 2.0"),
        ({"user": "x"}, "three different columns"),
        ({"alias": ""}, "`alias` must be a non-empty column name"),
    ],
)
def test_spec_rejects_bad_parameters(kwargs: dict[str, object], needle: str) -> None:
    base: dict[str, object] = {"user": "u", "eps": "e", "lower": 0, "upper": 1}
    base.update(kwargs)
    with pytest.raises(ParameterError) as info:
        hdp_user_mean("x", **base)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_spec_defaults() -> None:
    assert SPEC.cap == "width"
    assert SPEC.name == "x_user_mean"
    assert SPEC.fill_value == 0.5


# -- solver -------------------------------------------------------------------------------------


def _random_instance(rng: np.random.Generator, size: int, cap: str) -> tuple[np.ndarray, ...]:
    c = rng.integers(1, 50, size).astype(float)
    s = np.exp(rng.uniform(-4, -0.7, size))
    w = np.minimum(np.exp(rng.uniform(-3, 0, size)), 1.0)
    eps = np.exp(rng.uniform(-3, 1, size)) if rng.random() < 0.5 else np.full(size, 0.3)
    rho = (w if cap == "width" else s) / eps
    return c, s, w / eps, rho


@pytest.mark.parametrize("cap", ["width", "paper"])
def test_solver_beats_dense_grid(cap: str) -> None:
    """Oracle 8: g(T̂) <= g(T) on a dense log grid over [min τ/100, 100 max τ]."""
    rng = np.random.default_rng(8)
    for _ in range(60):
        c, s, wn, rho = _random_instance(rng, int(rng.integers(1, 12)), cap)
        for kappa in (1.0, 2.0):
            sol = solve_user_weights(c, s, wn, rho, kappa)
            tau = rho / s**2
            grid = np.exp(np.linspace(np.log(tau.min() / 100), np.log(tau.max() * 100), 4000))
            u = np.minimum(1 / s**2, grid[:, None] / rho)
            g = (np.sum(c * u * u * s * s, axis=1) + kappa * np.max(u * wn, axis=1) ** 2) / (
                np.sum(c * u, axis=1) ** 2)
            best = float(g.min())
            direct = proxy_objective(sol.t, c, s, wn, rho, kappa)
            assert direct <= best * (1 + 1e-9)
            assert sol.objective == pytest.approx(direct, rel=1e-12)
            assert tau.min() <= sol.t <= tau.max()


def test_width_cap_is_the_simplex_optimum() -> None:
    """Oracle 9: a generic QP over the simplex (epigraph + SLSQP) finds nothing better than
    the width-cap solution; with W ∝ σ the paper cap matches too."""
    rng = np.random.default_rng(9)
    for trial in range(12):
        size = int(rng.integers(2, 7))
        s = np.exp(rng.uniform(-3, -0.7, size))
        w = s * 3.0 if trial % 2 else np.minimum(np.exp(rng.uniform(-3, 0, size)), 1.0)
        eps = 0.5
        kappa = 2.0
        sol = solve_user_weights(np.ones(size), s, w / eps, w / eps, kappa)
        u = sol.u / sol.u.sum()

        def obj(x: np.ndarray, s: np.ndarray = s, kappa: float = kappa) -> float:
            return float(np.sum(x[:-1] ** 2 * s**2) + kappa * x[-1] ** 2)

        def cap(x: np.ndarray, i: int, w: np.ndarray = w, eps: float = eps) -> float:
            return float(x[-1] - x[i] * w[i] / eps)

        cons = [{"type": "eq", "fun": lambda x: np.sum(x[:-1]) - 1.0}] + [
            {"type": "ineq", "fun": cap, "args": (i,)} for i in range(size)
        ]
        x0 = np.append(np.full(size, 1.0 / size), np.max(w) / eps)
        res = optimize.minimize(obj, x0, constraints=cons, bounds=[(0, 1)] * size + [(0, None)],
                                method="SLSQP", options={"ftol": 1e-15, "maxiter": 500})
        ours = float(np.sum(u**2 * s**2) + kappa * np.max(u * w / eps) ** 2)
        assert ours <= res.fun * (1 + 1e-8)
        if trial % 2:  # W ∝ σ: the paper's cap gives the same weights
            paper = solve_user_weights(np.ones(size), s, w / eps, s / eps, kappa)
            np.testing.assert_allclose(paper.u / paper.u.sum(), u, rtol=1e-9)


def test_weight_caps_hold() -> None:
    """Oracle 7: ŵ >= 0, Σŵ = 1, u <= 1/σ̂², u <= T̂/ρ (u·ρ <= T̂ for both caps)."""
    rng = np.random.default_rng(7)
    for cap in ("width", "paper"):
        for _ in range(40):
            c, s, wn, rho = _random_instance(rng, int(rng.integers(1, 10)), cap)
            sol = solve_user_weights(c, s, wn, rho)
            w = sol.u / np.sum(c * sol.u)
            assert np.all(w >= 0)
            assert float(np.sum(c * w)) == pytest.approx(1.0, abs=1e-12)
            assert np.all(sol.u <= 1 / s**2 * (1 + 1e-15))
            assert np.all(sol.u * rho <= sol.t * (1 + 1e-12))


def _design(eps: float | dict[int, float], cap: str = "width", s2: float = 0.01,
            ks: tuple[int, ...] = (1, 2, 4, 8, 16, 64, 256), p: float = 0.4,
            alpha: float = 0.05) -> core.FinalDesign:
    def e_of(k: int) -> float:
        return eps if isinstance(eps, float) else eps[k]

    counts = {(k, e_of(k)): 10 + k % 7 for k in ks}
    spec = hdp_user_mean("x", user="u", eps="e", lower=0, upper=1, cap=cap)  # type: ignore[arg-type]
    return core.design_final(counts, 1000, p, alpha, s2, spec)


def _normalised(d: core.FinalDesign) -> np.ndarray:
    u = np.array([float(x) for x in d.weights])
    return u / float(np.sum(u * np.array(d.users)))


def test_weights_non_decreasing_in_k() -> None:
    """Oracle 7 (C5 clamp): heavier users never get less weight, even if s2 > p(1-p)."""
    for s2 in (1e-4, 0.01, 0.5, 3.0):
        for cap in ("width", "paper"):
            for eps in (0.05, 1.0, 20.0):
                w = _normalised(_design(eps, cap, s2=s2))
                assert np.all(np.diff(w) >= -1e-15)


def test_eps_to_infinity_gives_inverse_variance() -> None:
    """Oracle 11: ε -> ∞ makes the weights normalised 1/σ̂² (Algorithm 1 on G_fin)."""
    for cap in ("width", "paper"):
        d = _design(1e9, cap)
        inv = 1 / np.array(d.sigma) ** 2
        np.testing.assert_allclose(_normalised(d), inv / np.sum(inv * d.users), rtol=1e-9)


def test_eps_to_zero_limits() -> None:
    """Oracle 12: ε -> 0: paper cap with W ∝ σ gives ŵ ∝ 1/σ̂; width cap gives ŵ ∝ 1/W."""
    ks = (1, 2, 4, 8, 16, 64, 256)
    c = np.array([10 + k % 7 for k in ks], dtype=float)
    s = np.array([math.sqrt(0.24 / k + 0.01) for k in ks])
    eps = 1e-6
    w = 4.0 * s  # W ∝ σ
    paper = solve_user_weights(c, s, w / eps, s / eps)
    np.testing.assert_allclose(paper.u / paper.u[0], s[0] / s, rtol=1e-9)
    d = _design(eps, "width")
    widths = np.array([float(x) for x in d.widths])
    np.testing.assert_allclose(_normalised(d) / _normalised(d)[0], widths[0] / widths, rtol=1e-9)


def test_sigma_p_zero_weights() -> None:
    """Oracle 13: σ_p = 0, W ∝ σ: u ∝ min(k, sqrt(k k*)) with k* = T̂² v."""
    v = 0.21
    ks = np.array([1, 2, 3, 5, 8, 13, 40, 100, 400, 2000], dtype=float)
    c = np.array([400, 200, 120, 80, 50, 30, 10, 4, 2, 1], dtype=float)
    s = np.sqrt(v / ks)
    w = 5.0 * s
    for eps in (0.1, 1.0):
        sol = solve_user_weights(c, s, w / eps, s / eps)
        k_star = sol.t**2 * v * eps**2  # T in the ε-normalised problem: T_paper = T ε
        target = np.minimum(ks, np.sqrt(ks * k_star))
        np.testing.assert_allclose(sol.u / sol.u[0], target / target[0], rtol=1e-9)


def test_heterogeneous_eps_weights_and_noise_bound() -> None:
    """§6.4-E1: w ∝ min(1/σ̂², T ε_i/W_i) and every class satisfies ŵ W <= ε·b_het."""
    eps = {1: 0.2, 2: 5.0, 4: 0.2, 8: 1.0, 16: 5.0, 64: 0.5, 256: 2.0}
    d = _design(eps)
    u = np.array([float(x) for x in d.weights])
    s = np.array(d.sigma)
    widths = np.array([float(x) for x in d.widths])
    e = np.array([cls[1] for cls in d.classes])
    np.testing.assert_allclose(u, np.minimum(1 / s**2, d.t * e / widths), rtol=1e-12)
    cells = [core.FinalCell(k, ee, n, 0) for (k, ee), n in zip(d.classes, d.users, strict=True)]
    rel = core.final_step(d, cells, 0.05, ReleaseKey.from_unsafe_seed(1), ("t",))
    for cls in rel.classes:
        assert cls.eps_effective <= cls.eps
    assert max(c.eps_effective / c.eps for c in rel.classes) == pytest.approx(1.0)


def test_all_equal_eps_is_the_papers_estimator() -> None:
    """With one ε the E1 solver equals the paper's problem (W, ρ and ε kept apart)."""
    for cap in ("width", "paper"):
        d = _design(0.7, cap)
        s = np.array(d.sigma)
        widths = np.array([float(x) for x in d.widths])
        rho = widths if cap == "width" else s
        # paper's formulation: u = min(1/s², T/ρ), noise κ max(u W)²/ε²
        c = np.array(d.users, dtype=float)

        def g(t: float, s: np.ndarray = s, rho: np.ndarray = rho, c: np.ndarray = c,
              widths: np.ndarray = widths) -> float:
            u = np.minimum(1 / s**2, t / rho)
            return float((np.sum(c * u * u * s * s) + 2 * np.max(u * widths) ** 2 / 0.49)
                         / np.sum(c * u) ** 2)

        t_paper = d.t * 0.7
        grid = np.exp(np.linspace(-8, 12, 20000))
        assert g(t_paper) <= min(g(float(t)) for t in grid) * (1 + 1e-9)
        u = np.minimum(1 / s**2, t_paper / rho)
        np.testing.assert_allclose(_normalised(d), u / np.sum(c * u), rtol=1e-9)


# -- group plan ---------------------------------------------------------------------------------


def test_group_sizes_and_cover() -> None:
    """Oracle 4: |G_var| = ⌈ln n⌉, |G_mean| = n - ⌊9n/10⌋, |G_fin| = ⌊9n/10⌋ - L."""
    for n in (20, 57, 1000, 12345):
        cells = [CensusCell(k, 1.0, n // 4) for k in (1, 2, 3)]
        cells.append(CensusCell(9, 1.0, n - 3 * (n // 4)))
        plan = plan_group(cells, SPEC)
        big_l = max(math.ceil(math.log(n)), 2)
        assert (plan.n_var, plan.n_mean, plan.n_fin) == (
            big_l, n - (9 * n) // 10, (9 * n) // 10 - big_l)
        assert plan.n_var + plan.n_mean + plan.n_fin == n
        assert not plan.fallback


def test_small_group_falls_back() -> None:
    plan = plan_group([CensusCell(3, 1.0, 19), CensusCell(3, 0.0, 50)], SPEC)
    assert plan.fallback
    assert plan.excluded == 50
    assert plan.n == 19
    assert plan.queries(0) == []


def test_exponential_mechanism_probabilities() -> None:
    """The exact EM sampler: frequencies match exp(ε·score) (chi-square, p > 1e-6)."""
    from scipy import stats

    scores = [-3, -1, 0, -2, -5]
    eps = Fraction(1, 2)
    key = ReleaseKey.from_unsafe_seed("em")
    draws = 8000
    counts = np.zeros(len(scores))
    for i in range(draws):
        counts[exponential_mechanism(scores, eps, key.stream(str(i).encode()))] += 1
    p = np.exp(0.5 * np.array(scores, dtype=float))
    p /= p.sum()
    assert stats.chisquare(counts, p * draws).pvalue > 1e-6
