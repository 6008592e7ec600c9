"""Mean oracles of spec/seed-000.md §5 (O1, O2, O5-O11, O13-O16, O24-O26, O28, O29).

``solve_l1(v, m, L)`` takes the log factor L directly: the O25 golden values with
"L = ln 40 (k = 2, β = .05)" are a frequency setting and are passed as L = ln 40.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import pairwise

import numpy as np
import pytest
from mean_oracles import (
    ALL_METHODS,
    CAPPED_METHODS,
    INF,
    bruteforce_min_rc2,
    g_of_s,
    histogram,
    level_weights,
    per_user,
    r_c2,
    r_wc2,
    recursion_133,
    s_of,
    spec,
    stats_of,
    unit_totals,
)

from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.mean.finalize import finalize_mean
from hdp_spark.core.mean.weights import normalize, solve_clip_level, solve_l1
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.stats import build_groups

LN40 = math.log(40)


def _random_eps(rng: np.random.Generator, size: int, special: bool = True) -> list[float]:
    pool = list(np.exp(rng.uniform(-7, 5, size=6)))
    if special:
        pool += [0.0, INF, 1e-9]
    return [float(x) for x in rng.choice(pool, size=size)]


def l1_weights(eps: list[float], big_l: float) -> list[float]:
    """Per-user weights of the S1 solver for log factor L (canonical water-filling)."""
    v, m = histogram(eps)
    phi, tau = solve_l1(v, m, big_l)
    w = normalize(v, m, phi, tau)
    by = dict(zip(v, w.w, strict=True))
    return [float(by[e]) for e in eps]


def s2_weights(eps: list[float], c: float) -> tuple[list[float], float]:
    v, m = histogram(eps)
    phi, tau = solve_clip_level(v, m, c)
    w = normalize(v, m, phi, tau)
    by = dict(zip(v, w.w, strict=True))
    return [float(by[e]) for e in eps], tau


# ---------------------------------------------------------------- O1, O2


def test_o1_o2_simplex_and_calibration_every_rule() -> None:
    rng = np.random.default_rng(1)
    for _ in range(120):
        eps = _random_eps(rng, int(rng.integers(1, 10)))
        v, m = histogram(eps)
        for method in ALL_METHODS:
            w = level_weights(method, v, m)
            assert all(wl >= 0 for wl in w.w)
            if w.trivial:
                continue
            assert sum(wl * c for wl, c in zip(w.w, m, strict=True)) == 1
            tight = [wl / Fraction(x) for wl, x in zip(w.w, v, strict=True)
                     if wl > 0 and math.isfinite(x)]
            assert w.eta == max(tight, default=Fraction(0))  # from the final weights
            for wl, x in zip(w.w, v, strict=True):
                if wl > 0 and math.isfinite(x):
                    assert wl <= w.eta * Fraction(x)
                if x == 0:
                    assert wl == 0


# ---------------------------------------------------------------- O5, O6, O7, O8


def test_o5_permutation_and_symmetry() -> None:
    rng = np.random.default_rng(5)
    eps = _random_eps(rng, 30)
    v, m = histogram(eps)
    cells = [((), x, c, [int(rng.integers(0, c * 2**31))]) for x, c in zip(v, m, strict=True)]
    sorted_table = build_groups("eps", cells)[()]
    shuffled_table = build_groups("eps", [cells[i] for i in rng.permutation(len(cells))])[()]
    assert shuffled_table == sorted_table  # engines may return cells in any order
    order = rng.permutation(len(eps))
    for method in ALL_METHODS:
        per, _ = per_user(eps, method)
        per_shuffled, _ = per_user([eps[i] for i in order], method)
        assert per_shuffled == [per[i] for i in order]  # equal ε -> equal weight
        key = ReleaseKey.from_unsafe_seed(5)
        a = finalize_mean(spec(method), sorted_table, 0, key, (), "x")
        b = finalize_mean(spec(method), shuffled_table, 0, key, (), "x")
        assert a == b


@pytest.mark.parametrize("method", ALL_METHODS)
@pytest.mark.parametrize("e", [1e-9, 0.3, 1.0, 12.0])
def test_o6_homogeneous_reduction(method: str, e: float) -> None:
    n = 25
    w = level_weights(method, [e], [n])
    assert w.w == (Fraction(1, n),)
    assert w.eta == 1 / (n * Fraction(e))


def test_o7_monotone_weights() -> None:
    rng = np.random.default_rng(7)
    for _ in range(150):
        eps = _random_eps(rng, int(rng.integers(2, 12)))
        v, m = histogram(eps)
        for method in ("uniform", "proportional", "hpm-a", *CAPPED_METHODS):
            w = [float(x) for x in level_weights(method, v, m).w]
            live = [(x, wl) for x, wl in zip(v, w, strict=True) if x > 0]
            for (x1, w1), (x2, w2) in pairwise(live):
                assert w1 <= w2 * (1 + 1e-12), (method, v)
                r1 = w1 / x1 if math.isfinite(x1) else 0.0
                r2 = w2 / x2 if math.isfinite(x2) else 0.0
                assert r1 >= r2 * (1 - 1e-12), (method, v)


def test_o8_capped_form() -> None:
    rng = np.random.default_rng(8)
    for _ in range(150):
        eps = _random_eps(rng, int(rng.integers(1, 12)))
        v, m = histogram(eps)
        for method in CAPPED_METHODS:
            w = level_weights(method, v, m)
            if w.trivial:
                continue
            if math.isnan(w.tau):  # public-only marker: uniform over the ε = inf rows
                phi = [1.0 if math.isinf(x) else 0.0 for x in v]
            else:
                phi = [min(x, w.tau) for x in v]
            total = sum(p * c for p, c in zip(phi, m, strict=True))
            for wl, p in zip(w.w, phi, strict=True):
                assert float(wl) == pytest.approx(p / total, rel=1e-9, abs=1e-300)


# ---------------------------------------------------------------- O9 (S2)


def test_o9_s2_fixed_point_and_recursion() -> None:
    rng = np.random.default_rng(9)
    for _ in range(200):
        eps = _random_eps(rng, int(rng.integers(1, 25)))
        n = len(eps)
        for c in (8.0, 1.0, LN40, LN40**2 / n, 1e-3, 1e3):
            per, tau = s2_weights(eps, c)
            pos = [e for e in eps if e > 0]
            if not pos:
                continue
            if math.isfinite(tau):
                clipped = [min(e, tau) for e in pos]
                fixed = (sum(x * x for x in clipped) + c) / sum(clipped)
                assert tau == pytest.approx(fixed, rel=1e-12)
            fin = [e for e in pos if math.isfinite(e)]
            if fin and len(fin) == len(pos):
                prop_wins = (sum(e * e for e in fin) + c) / sum(fin) >= max(fin)
                assert prop_wins == math.isinf(tau)
            assert per == pytest.approx(recursion_133(eps, c), rel=1e-9, abs=1e-300)


# ---------------------------------------------------------------- O10, O11, O13 (S1)


def _competitors(eps: list[float], rng: np.random.Generator) -> list[list[float]]:
    n = len(eps)
    out = [[1.0 / n] * n]  # uniform (may be infeasible: then r_C = inf, fine)
    if any(math.isinf(e) for e in eps):
        k = sum(1 for e in eps if math.isinf(e))
        out.append([1.0 / k if math.isinf(e) else 0.0 for e in eps])  # Prop with public users
    elif sum(eps) > 0:
        out.append([e / sum(eps) for e in eps])  # Prop
    a = [1.0 if math.isinf(e) else -math.expm1(-e) for e in eps]
    out.append([x / sum(a) for x in a])  # A
    order = sorted(range(n), key=lambda i: eps[i])
    for t in range(n):  # DROP-t
        w = [0.0] * n
        for i in order[t:]:
            w[i] = 1.0 / (n - t)
        out.append(w)
    live = [i for i in range(n) if eps[i] > 0]
    for d in rng.dirichlet(np.ones(len(live)), size=1000):
        w = [0.0] * n
        for i, x in zip(live, d, strict=True):
            w[i] = float(x)
        out.append(w)
    return out


def test_o10_s1_optimality() -> None:
    rng = np.random.default_rng(10)
    for k in range(60):
        eps = _random_eps(rng, int(rng.integers(1, 7)))
        if not any(e > 0 for e in eps):
            continue
        big_l = float(rng.choice([1.0, LN40, math.log(20), 0.3, 5.0]))
        w = l1_weights(eps, big_l)
        best = r_c2(w, eps, big_l)
        assert sum(w) == pytest.approx(1.0, abs=1e-12)
        for other in _competitors(eps, rng):
            assert best <= r_c2(other, eps, big_l) + 1e-12
        if k < 12:  # LP brute force: never beaten by its feasible point, nor by its value
            lp_value, lp_point = bruteforce_min_rc2(eps, big_l)
            assert best <= lp_point + 1e-12
            assert best <= lp_value * (1 + 1e-6) + 1e-12  # HiGHS tolerance ~1e-9
        s = s_of(w, eps)
        assert best == pytest.approx(g_of_s(s, eps, big_l), rel=1e-9, abs=1e-15)
        # g has its minimum at s* (convex in s): moving s either way never helps
        fin = [e for e in eps if math.isfinite(e) and e > 0]
        s_lo = 0.0 if any(math.isinf(e) for e in eps) else 1.0 / sum(fin)
        for step in (1 + 1e-6, 1 - 1e-6):
            if s * step >= s_lo and s > 0:
                assert g_of_s(s * step, eps, big_l) >= best * (1 - 1e-9)


def test_o11_w_branch_rule() -> None:
    rng = np.random.default_rng(11)
    for _ in range(80):
        eps = _random_eps(rng, int(rng.integers(1, 12)))
        if not any(e > 0 for e in eps):
            continue
        for method, big_l in (("hpm-wp", math.log(1 / 0.05)), ("hpm-we", 1.0)):
            w_wp, _ = per_user(eps, method)
            w_cp, _ = per_user(eps, "hpm-cp" if method == "hpm-wp" else "hpm-ce")
            min_rc2 = r_c2(l1_weights(eps, big_l), eps, big_l)
            wb, _ = s2_weights(eps, big_l)
            min_b = big_l * sum(x * x for x in wb) + big_l**2 * s_of(wb, eps) ** 2
            got = r_wc2(w_wp, eps, big_l)
            assert got == pytest.approx(min(r_wc2(l1_weights(eps, big_l), eps, big_l),
                                            r_wc2(wb, eps, big_l)), rel=1e-12, abs=1e-15)
            assert got <= min(min_rc2, min_b) * (1 + 1e-12) + 1e-15
            assert got <= r_wc2(w_cp, eps, big_l) * (1 + 1e-12) + 1e-15
            assert got <= min_rc2 * (1 + 1e-12) + 1e-15


def test_o13_bounds_on_the_optimum() -> None:
    rng = np.random.default_rng(13)
    for _ in range(150):
        eps = sorted(_random_eps(rng, int(rng.integers(1, 15)), special=False))
        n = len(eps)
        big_l = float(rng.choice([1.0, LN40, 3.0]))
        rc = math.sqrt(r_c2(l1_weights(eps, big_l), eps, big_l))
        w_wp = l1_weights(eps, big_l)
        wb, _ = s2_weights(eps, big_l)
        rwc = math.sqrt(min(r_wc2(w_wp, eps, big_l), r_wc2(wb, eps, big_l)))
        tol = 1 + 1e-12
        assert big_l / sum(eps) <= rwc * tol
        assert rwc <= rc * tol
        prop = [e / sum(eps) for e in eps]
        a = [-math.expm1(-e) for e in eps]
        a = [x / sum(a) for x in a]
        assert rc <= big_l / (n * eps[0]) * tol
        assert rc <= math.sqrt(r_c2(prop, eps, big_l)) * tol
        assert rc <= math.sqrt(r_c2(a, eps, big_l)) * tol
        for t in range(n):
            drop = math.sqrt((2 * t / n) ** 2 + big_l**2 / ((n - t) * eps[t]) ** 2)
            assert rc <= drop * tol


# ---------------------------------------------------------------- O14, O15, O16


def test_o14_public_rows() -> None:
    n = 16
    values = [(3 * i % 16) / 16 for i in range(n)]
    total = sum(math.floor(u * 2**31 + 0.5) for u in values)
    for method in ALL_METHODS:
        r = finalize_mean(spec(method, 0.0, 16.0), stats_of([INF], [n], [total]), 0,
                          ReleaseKey.fresh(), (), "x")
        assert r.estimate == pytest.approx(16 * sum(values) / n, abs=1e-12)
        assert r.noise_scale == 0.0
    # Prop with any public user puts all the weight on the public users
    per, w = per_user([0.5, 2.0, INF, INF], "proportional")
    assert per == [0.0, 0.0, 0.5, 0.5]
    assert w.eta == 0
    # mixed input: public users add nothing to s (their weight is the largest, yet η is set
    # by the finite levels only)
    for method in ALL_METHODS:
        w = level_weights(method, [0.5, 2.0, INF], [1, 1, 1])
        assert w.eta == max(w.w[0] / Fraction(0.5), w.w[1] / 2)


@pytest.mark.parametrize("method", ALL_METHODS)
def test_o15_zero_eps_rows_do_not_influence_the_output(method: str) -> None:
    v, m = [0.0, 0.4, 2.0, INF], [3, 5, 4, 2]
    w = level_weights(method, v, m)
    assert w.w[0] == 0
    key = ReleaseKey.from_unsafe_seed("o15")
    outs = set()
    for zero_value in (0.0, 0.25, 1.0):
        totals = unit_totals(m, [zero_value, 0.3, 0.6, 0.9])
        r = finalize_mean(spec(method), stats_of(v, m, totals), 0, key, (), "x")
        outs.add((r.estimate, r.ci_low, r.ci_high, r.noise_scale))
    assert len(outs) == 1  # bit-identical under the same key


@pytest.mark.parametrize("method", ["hpm-cp", "hpm-ce"])
def test_o16_one_private_user_and_public_rest(method: str) -> None:
    n = 50
    per, w = per_user([1e-9] + [INF] * (n - 1), method)
    assert per[0] <= 1e-12
    assert per[1:] == pytest.approx([1 / (n - 1)] * (n - 1), rel=1e-9)
    assert float(w.eta) <= 1e-3
    v, m = [1e-9, INF], [1, n - 1]
    totals = unit_totals(m, [1.0, 0.0])  # adversarial: the private user at the top
    for i in range(200):
        r = finalize_mean(spec(method), stats_of(v, m, totals), 0,
                          ReleaseKey.from_unsafe_seed(f"o16-{i}"), (), "x")
        assert abs(r.estimate - 1 / n) <= 1 / n + 1e-9


# ---------------------------------------------------------------- golden values


def test_o24_hpm_a_golden() -> None:
    per, w = per_user([0.1, 0.1, 1, 1, 10], "hpm-a")
    assert per == pytest.approx([0.03877033, 0.03877033, 0.25753318, 0.25753318, 0.40739299],
                                abs=5e-9)
    assert float(w.eta) == pytest.approx(0.38770329, abs=5e-9)


def test_o25_golden_values() -> None:
    eps = [0.1, 0.1, 1.0, 1.0, 10.0]
    w = l1_weights(eps, LN40)
    assert w == pytest.approx([0.02, 0.02, 0.2, 0.2, 0.56], abs=5e-8)
    assert s_of(w, eps) == pytest.approx(0.2, abs=5e-8)
    assert r_c2(w, eps, LN40) == pytest.approx(1.0627133, abs=5e-8)
    wb, _ = s2_weights(eps, LN40)  # WP = CP at L = ln 40: branch B loses
    assert r_wc2(wb, eps, LN40) == pytest.approx(1.1053, abs=5e-5)
    assert min(r_wc2(w, eps, LN40), r_wc2(wb, eps, LN40)) == r_wc2(w, eps, LN40)

    w = l1_weights(eps, 1.0)
    assert w == pytest.approx([0.0275862, 0.0275862, 0.2758621, 0.2758621, 0.3931034], abs=5e-8)
    assert r_c2(w, eps, 1.0) == pytest.approx(0.5517241, abs=5e-8)
    per, _ = per_user(eps, "hpm-we")  # L = 1, W: branch B wins
    assert per == pytest.approx([0.0279898, 0.0279898, 0.2798982, 0.2798982, 0.3842239],
                                abs=5e-8)
    assert r_wc2(per, eps, 1.0) == pytest.approx(0.3842239, abs=5e-8)
    assert r_wc2(w, eps, 1.0) == pytest.approx(0.3843520, abs=5e-8)

    v, m = histogram(eps)
    assert solve_clip_level(v, m, LN40**2 / 5)[1] == pytest.approx(2.1552574, abs=5e-8)
    assert solve_clip_level(v, m, LN40)[1] == pytest.approx(2.5949452, abs=5e-8)
    assert solve_clip_level(v, m, 1.0)[1] == pytest.approx(1.3727273, abs=5e-8)

    eps = [0.01, 0.5, 0.5, 2.0, INF, INF]
    w = l1_weights(eps, LN40)
    assert w == pytest.approx([0.0011420, 0.0571001, 0.0571001, 0.2284004, 0.3281287, 0.3281287],
                              abs=5e-8)
    assert s_of(w, eps) == pytest.approx(0.1142002, abs=5e-8)
    assert r_c2(w, eps, LN40) == pytest.approx(0.7693155, abs=5e-8)

    eps = [0.0, 0.2, 0.3, 5.0]
    w = l1_weights(eps, LN40)
    assert w == pytest.approx([0.0, 0.0363636, 0.0545455, 0.9090909], abs=5e-8)
    assert r_c2(w, eps, LN40) == pytest.approx(2.1874490, abs=5e-8)


def test_review_p3_s1_with_zero_eps_users_stays_on_the_simplex() -> None:
    """ε = (0, 1, 1): s_lo = 1/2 > 1/(n ε_min⁺) = 1/3; the literal clip gave weights 2/3."""
    for big_l in (0.1, 1.0, LN40, 10.0):
        assert l1_weights([0.0, 1.0, 1.0], big_l) == [0.0, 0.5, 0.5]
    rng = np.random.default_rng(3)
    for _ in range(300):
        eps = [0.0] * int(rng.integers(1, 6)) + _random_eps(rng, int(rng.integers(1, 6)), False)
        w = l1_weights(eps, float(rng.choice([0.5, 1.0, LN40])))
        assert sum(w) == pytest.approx(1.0, abs=1e-12)
        assert all(x == 0 for x, e in zip(w, eps, strict=True) if e == 0)


def test_o26_grouped_equals_per_user() -> None:
    rng = np.random.default_rng(26)
    for _ in range(100):
        eps = sorted(_random_eps(rng, int(rng.integers(1, 15))))
        v, m = histogram(eps)
        for solver, arg in ((solve_l1, 1.0), (solve_l1, LN40), (solve_clip_level, 8.0)):
            phi_g, tau_g = solver(v, m, arg)
            wg = normalize(v, m, phi_g, tau_g)
            ones = [1] * len(eps)
            phi_u, tau_u = solver(eps, ones, arg)  # one "level" per user, ties repeated
            wu = normalize(eps, ones, phi_u, tau_u)
            by = dict(zip(v, wg.w, strict=True))
            assert [float(by[e]) for e in eps] == pytest.approx([float(x) for x in wu.w],
                                                                 rel=1e-9, abs=1e-300)


def test_o28_grid_rounding_is_privacy_safe() -> None:
    rng = np.random.default_rng(28)
    grid = EpsGrid(ratio=1.3, lowest=1e-4, highest=50.0)
    for _ in range(60):
        raw = np.concatenate([np.exp(rng.uniform(np.log(1e-4), np.log(1e3), size=20)),
                              [0.0, np.inf, 1e-4, 50.0]])
        levels = levels_numpy(raw, grid)
        assert np.all(levels <= raw)
        v, m = histogram([float(x) for x in levels])
        for method in ALL_METHODS:
            w = level_weights(method, v, m)
            eff = {x: (wl / w.eta if w.eta else Fraction(0)) for x, wl in zip(v, w.w, strict=True)}
            for lvl, orig in zip(levels, raw, strict=True):
                if math.isfinite(orig):
                    assert eff[float(lvl)] <= Fraction(float(orig))


def test_o29_free_privacy() -> None:
    rng = np.random.default_rng(29)
    for _ in range(100):
        eps = [float(x) for x in np.exp(rng.uniform(-4, 4, size=int(rng.integers(1, 10))))]
        v, m = histogram(eps)
        w = level_weights("proportional", v, m)
        assert all(wl / w.eta == Fraction(x) for wl, x in zip(w.w, v, strict=True))
        for method in CAPPED_METHODS:
            w = level_weights(method, v, m)
            for wl, x in zip(w.w, v, strict=True):
                assert float(wl / w.eta) == pytest.approx(min(x, w.tau), rel=1e-12)
        w = level_weights("hpm-a", v, m)
        h = -math.expm1(-v[0]) / v[0]
        for wl, x in zip(w.w, v, strict=True):
            assert float(wl / w.eta) == pytest.approx(-math.expm1(-x) / h, rel=1e-12)


def test_released_metadata_are_plain_python_floats() -> None:
    """Spark's createDataFrame rejects numpy scalars in a DoubleType column: every field a
    release outputs must be a Python float/int/bool (τ of S1 was a numpy.float64)."""
    rng = np.random.default_rng(30)
    for _ in range(40):
        eps = _random_eps(rng, int(rng.integers(1, 10)))
        v, m = histogram(eps)
        for method in ALL_METHODS:
            r = finalize_mean(spec(method), stats_of(v, m, unit_totals(m, [0.5] * len(v))), 0,
                              ReleaseKey.from_unsafe_seed(1), (), "x")
            for value in (r.estimate, r.noise_scale, r.ci_low, r.ci_high, r.tau):
                assert type(value) is float, (method, v)
            assert type(r.n) is int
            assert type(r.fallback) is bool
            for lv in r.levels:
                assert all(type(x) is float for x in (lv.eps, lv.weight, lv.eps_effective))
                assert type(lv.n) is int
