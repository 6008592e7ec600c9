"""ADPM (seed 001) oracles of spec/seed-001.md §5, with the seed-000-001 review's corrections.

Oracle numbers refer to seed-001 §5. Weights are checked as exact Fractions where the
library promises exactness, otherwise to the spec's tolerances.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from mean_oracles import (
    ALL_METHODS,
    INF,
    adpm_objective,
    histogram,
    level_weights,
    per_user,
    qp_clip_level,
    recursion_133,
    spec,
    stats_of,
    unit_totals,
)

from hdp_spark.core.levels import EPS_CAP, EPS_FLOOR, levels_numpy
from hdp_spark.core.mean.finalize import finalize_mean
from hdp_spark.core.mean.weights import Weights, solve_clip_level
from hdp_spark.core.noise import ReleaseKey


def j_star(v: list[float], m: list[int], w: Weights) -> float:
    """Worst-case MSE ||w||²/4 + 2η² of the level weights (unit range)."""
    l2 = sum(float(wl) ** 2 * c for wl, c in zip(w.w, m, strict=True))
    return l2 / 4 + 2 * float(w.eta) ** 2


def two_group(n: int, n1: int, e1: float, e2: float) -> tuple[float, float, float, float]:
    """Library weights (w1, w2), η and J* for n1 users at e1 and n - n1 at e2 >= e1."""
    eps = [e1] * n1 + [e2] * (n - n1)
    v, m = histogram(eps)
    w = level_weights("adpm", v, m)
    by = dict(zip(v, w.w, strict=True))
    return float(by[e1]), float(by[e2]), float(w.eta), j_star(v, m, w)


def table_one(n: int, f: float, e1: float, e2: float) -> tuple[float, float, float, float, float]:
    """Table I / Theorem 1 of seed 001: (w1, w2, η, J* first form, J* second form)."""
    big_r = 1 + 8 / (e1 * e1 * n * f)
    r = e2 / e1
    if r <= big_r:
        ebar = f * e1 + (1 - f) * e2
        e2bar = f * e1 * e1 + (1 - f) * e2 * e2
        w1, w2, eta = e1 / (n * ebar), e2 / (n * ebar), 1 / (n * ebar)
        j_a = e2bar / (4 * n * ebar**2) + 2 / (n * ebar) ** 2
        j_b = (f * big_r + (1 - f) * r * r) / (4 * n * (f + (1 - f) * r) ** 2)
    else:
        d = n * (f + (1 - f) * big_r)
        w1, w2 = 1 / d, big_r / d
        eta = w1 / e1
        j_a = big_r / (4 * d)
        j_b = (n * f * e1 * e1 + 8) / (4 * n * (n * f * e1 * e1 + 8 * (1 - f)))
    return w1, w2, eta, j_a, j_b


# ---------------------------------------------------------------- oracles 1-2


def _random_eps(rng: np.random.Generator, size: int) -> list[float]:
    pool = [0.0, INF, 1e-9, 1e90, *np.exp(rng.uniform(-6, 6, size=5))]
    return [float(x) for x in rng.choice(pool, size=size)]


def test_oracle1_simplex_and_feasibility() -> None:
    rng = np.random.default_rng(101)
    for _ in range(300):
        eps = _random_eps(rng, int(rng.integers(1, 12)))
        v, m = histogram(eps)
        w = level_weights("adpm", v, m)
        if w.trivial:  # only when no user has ε > 0
            assert all(x == 0 for x in v)
            continue
        assert all(wl >= 0 for wl in w.w)
        assert sum(wl * c for wl, c in zip(w.w, m, strict=True)) == 1  # exact
        ratios = [wl / Fraction(x) for wl, x in zip(w.w, v, strict=True)
                  if wl > 0 and math.isfinite(x)]
        assert w.eta == max(ratios, default=Fraction(0))
        for wl, x in zip(w.w, v, strict=True):
            if x == 0:
                assert wl == 0
            elif math.isfinite(x) and wl > 0:
                assert wl <= w.eta * Fraction(x)  # w_i/η <= ε_i, exactly


def test_oracle2_effective_privacy_is_min_eps_tau() -> None:
    rng = np.random.default_rng(102)
    for _ in range(200):
        eps = [float(x) for x in np.exp(rng.uniform(-4, 4, size=int(rng.integers(2, 15))))]
        v, m = histogram(eps)
        w = level_weights("adpm", v, m)
        tau = w.tau
        for wl, x in zip(w.w, v, strict=True):
            eff = wl / w.eta
            if x <= tau:
                assert eff == Fraction(x)  # tight, exactly
            else:
                assert float(eff) == pytest.approx(tau, rel=1e-12)
        assert w.w[0] / w.eta == Fraction(v[0])  # the most private user is always tight


# ---------------------------------------------------------------- oracles 3-6


@pytest.mark.parametrize("e0", [1e-9, 0.01, 0.5, 1.0, 7.0, 1e90])
@pytest.mark.parametrize("n", [1, 2, 37, 1000])
def test_oracle3_homogeneous_reduction(e0: float, n: int) -> None:
    w = level_weights("adpm", [e0], [n])
    assert w.w == (Fraction(1, n),)
    assert w.eta == Fraction(1, n) / Fraction(e0)
    assert j_star([e0], [n], w) == pytest.approx(1 / (4 * n) + 2 / (n * e0) ** 2, rel=1e-12)


@pytest.mark.parametrize(("n", "n1"), [(10, 0), (10, 10), (1000, 0), (1000, 1000)])
def test_oracle3_two_group_degenerate_f(n: int, n1: int) -> None:
    w1, w2, eta, j = two_group(n, n1, 0.3, 0.3)
    assert w1 == w2 == pytest.approx(1 / n, rel=1e-15)
    assert eta == pytest.approx(1 / (n * 0.3), rel=1e-15)
    assert j == pytest.approx(1 / (4 * n) + 2 / (n * 0.3) ** 2, rel=1e-12)


def test_oracle4_two_group_closed_form() -> None:
    rng = np.random.default_rng(104)
    branches = set()
    for _ in range(400):
        n = int(rng.integers(2, 3000))
        n1 = int(rng.integers(1, n))
        f = n1 / n
        e1 = float(np.exp(rng.uniform(-5, 2)))
        e2 = e1 * float(np.exp(rng.uniform(0, 6)))
        w1, w2, eta, j = two_group(n, n1, e1, e2)
        t1, t2, teta, ja, jb = table_one(n, f, e1, e2)
        branches.add(e2 / e1 <= 1 + 8 / (e1 * e1 * n * f))
        assert w1 == pytest.approx(t1, rel=1e-12)
        assert w2 == pytest.approx(t2, rel=1e-12)
        assert eta == pytest.approx(teta, rel=1e-12)
        assert w2 / w1 == pytest.approx(min(e2 / e1, 1 + 8 / (e1 * e1 * n * f)), rel=1e-12)
        assert j == pytest.approx(ja, rel=1e-12)
        assert ja == pytest.approx(jb, rel=1e-12)  # both displayed forms agree
    assert branches == {True, False}  # both branches of Table I were exercised


def test_oracle5_continuity_at_threshold() -> None:
    for n, n1, e1 in [(1000, 700, 0.1), (50, 10, 1.0), (7, 3, 0.01)]:
        big_r = 1 + 8 / (e1 * e1 * n1)
        at = table_one(n, n1 / n, e1, big_r * e1)
        below = table_one(n, n1 / n, e1, big_r * e1 * (1 - 1e-12))
        above = table_one(n, n1 / n, e1, big_r * e1 * (1 + 1e-12))
        lib = two_group(n, n1, e1, big_r * e1)
        for a, b, c, d in zip(at[:4], below[:4], above[:4], lib, strict=True):
            assert a == pytest.approx(b, rel=1e-9)
            assert a == pytest.approx(c, rel=1e-9)
            assert a == pytest.approx(d, rel=1e-9)


def test_oracle6_saturation_fixture() -> None:
    """n = 1000, f = 0.7, ε1 = 0.1: weights frozen for ε2 >= R ε1 = 0.2142857."""
    results = []
    for e2 in [0.2143, 1.0, 10.0, INF]:
        eps = [0.1] * 700 + [e2] * 300
        v, m = histogram(eps)
        w = level_weights("adpm", v, m)
        results.append((w.w, w.eta, w.tau))
        w1, w2 = float(w.w[0]), float(w.w[1])
        assert w1 == pytest.approx(7.44681e-4, rel=1e-5)
        assert w2 == pytest.approx(1.59574e-3, rel=1e-5)
        assert float(w.eta) == pytest.approx(7.44681e-3, rel=1e-5)
        assert j_star(v, m, w) == pytest.approx(3.98936e-4, rel=1e-5)
        assert w.tau == pytest.approx(0.2142857, rel=1e-6)
    assert all(r == results[0] for r in results)  # identical, exactly


# ---------------------------------------------------------------- oracles 7-9


def test_oracle7_saturation_general() -> None:
    rng = np.random.default_rng(107)
    checked = 0
    for _ in range(300):
        eps = [float(x) for x in np.exp(rng.uniform(-3, 3, size=int(rng.integers(2, 12))))]
        per, w = per_user(eps, "adpm")
        if not math.isfinite(w.tau):
            continue
        raised = [
            (e * float(rng.uniform(1, 100)) if rng.random() < 0.5 else INF) if e >= w.tau else e
            for e in eps
        ]
        if raised == eps:
            continue
        per2, w2 = per_user(raised, "adpm")
        assert per2 == per
        assert w2.eta == w.eta
        assert w2.tau == w.tau
        checked += 1
    assert checked > 50


def test_oracle8_monotonicity() -> None:
    rng = np.random.default_rng(108)
    for _ in range(200):
        eps = [float(x) for x in np.exp(rng.uniform(-4, 4, size=int(rng.integers(1, 10))))]
        v, m = histogram(eps)
        base = j_star(v, m, level_weights("adpm", v, m))
        i = int(rng.integers(len(eps)))
        up = list(eps)
        up[i] = eps[i] * float(np.exp(rng.uniform(0, 3))) if rng.random() < 0.8 else INF
        v2, m2 = histogram(up)
        assert j_star(v2, m2, level_weights("adpm", v2, m2)) <= base * (1 + 1e-12)
    # two groups: w1 non-increasing, w2 non-decreasing in ε2, constant past R ε1
    prev = None
    for e2 in np.exp(np.linspace(np.log(0.1), np.log(50), 200)):
        w1, w2, _, _ = two_group(1000, 700, 0.1, float(e2))
        if prev is not None:
            assert w1 <= prev[0] * (1 + 1e-14)
            assert w2 >= prev[1] * (1 - 1e-14)
        prev = (w1, w2)
    assert prev == pytest.approx(two_group(1000, 700, 0.1, INF)[:2], rel=1e-15)


def test_oracle9_dominance_over_prop_uni_and_qp() -> None:
    rng = np.random.default_rng(109)
    for k in range(40):
        eps = [float(x) for x in np.exp(rng.uniform(-3, 3, size=int(rng.integers(1, 7))))]
        n = len(eps)
        v, m = histogram(eps)
        j = j_star(v, m, level_weights("adpm", v, m))
        s = sum(eps)
        assert j <= (sum(e * e for e in eps) / 4 + 2) / s**2 * (1 + 1e-12)  # PropDPM
        assert j <= (1 / (4 * n) + 2 / (n * min(eps)) ** 2) * (1 + 1e-12)  # UNI
        if k < 15:  # the QP oracle (SLSQP) is slow: a subset
            assert j <= qp_clip_level(eps, 8.0) / 4 + 1e-9


# ---------------------------------------------------------------- oracles 11-13


def test_oracle11_fallback_is_the_deterministic_midpoint() -> None:
    """n = 10, f = 0.5, ε = (0.1, 0.15): J* = 1.306 > 1/4 -> midpoint, no noise."""
    v, m = [0.1, 0.15], [5, 5]
    w = level_weights("adpm", v, m)
    assert j_star(v, m, w) == pytest.approx(1.306, abs=5e-4)
    sp = spec("adpm", lower=-3.0, upper=5.0)
    outs = set()
    for values in ([0.0, 1.0], [1.0, 1.0], [0.3, 0.9]):
        st = stats_of(v, m, unit_totals(m, values))
        for key in (ReleaseKey.fresh(), ReleaseKey.fresh()):
            r = finalize_mean(sp, st, 0, key, (), "x")
            assert r.fallback
            assert r.noise_scale == 0.0
            assert (r.ci_low, r.ci_high) == (-3.0, 5.0)
            assert all(lv.weight == 0 and lv.eps_effective == 0 for lv in r.levels)
            outs.add(r.estimate)
    assert outs == {1.0}


def test_oracle12_public_private_limit() -> None:
    for n, n1, e1 in [(1000, 700, 0.1), (100, 30, 0.5), (20, 10, 2.0)]:
        f = n1 / n
        _, w2, _, j = two_group(n, n1, e1, INF)
        formula = (n * f * e1**2 + 8) / (4 * n * (n * f * e1**2 + 8 * (1 - f)))
        assert j == pytest.approx(formula, rel=1e-12)
        v1 = 1 / (4 * n1) + 2 / (e1 * n1) ** 2  # LDPE: per-group mean + Lap(1/(ε n_g))
        v2 = 1 / (4 * (n - n1))
        assert j == pytest.approx(1 / (1 / v1 + 1 / v2), rel=1e-12)
        # ε1 -> 0+: group 1 is ignored
        w1, w2, _, j = two_group(n, n1, 1e-8, INF)
        assert w1 < 1e-9
        assert w2 == pytest.approx(1 / (n * (1 - f)), rel=1e-6)
        assert j == pytest.approx(1 / (4 * n * (1 - f)), rel=1e-6)


def test_oracle13_all_public_and_all_zero() -> None:
    for n in (1, 3, 64):
        w = level_weights("adpm", [INF], [n])
        assert w.w == (Fraction(1, n),)
        assert w.eta == 0
        assert j_star([INF], [n], w) == pytest.approx(1 / (4 * n), rel=1e-15)
        # output: the exact sample mean (dyadic values are encoded exactly), no noise
        values = [(i % 8) / 8 for i in range(n)]
        total = sum(math.floor(u * 2**31 + 0.5) for u in values)
        r = finalize_mean(spec("adpm", lower=0.0, upper=8.0), stats_of([INF], [n], [total]),
                          0, ReleaseKey.fresh(), (), "x")
        assert r.estimate == 8 * sum(values) / n
        assert r.noise_scale == 0.0
        assert not r.fallback
    st = stats_of([0.0], [5], [123456])
    r = finalize_mean(spec("adpm", lower=2.0, upper=4.0), st, 0, ReleaseKey.fresh(), (), "x")
    assert (r.estimate, r.fallback, r.noise_scale) == (3.0, True, 0.0)


def test_oracle14_scale_invariance() -> None:
    v, m = [0.2, 1.0, 3.0, INF], [40, 30, 20, 10]
    totals = unit_totals(m, [0.1, 0.7, 0.4, 0.9])
    unit = finalize_mean(spec("adpm", -0.5, 0.5), stats_of(v, m, totals), 0,
                         ReleaseKey.fresh(), (), "x")
    for lo, hi in [(0.0, 1.0), (-10.0, 30.0), (0.0, 0.001), (1e6, 1e6 + 3.0)]:
        r = finalize_mean(spec("adpm", lo, hi), stats_of(v, m, totals), 0,
                          ReleaseKey.fresh(), (), "x")
        assert [lv.weight for lv in r.levels] == [lv.weight for lv in unit.levels]
        assert r.noise_scale == pytest.approx((hi - lo) * unit.noise_scale, rel=1e-12)
        assert r.tau == unit.tau


# ---------------------------------------------------------------- oracles 16-17


def test_oracle16_grouped_solver_equals_recursion_and_qp() -> None:
    rng = np.random.default_rng(116)
    for k in range(120):
        size = int(rng.integers(1, 40 if k >= 20 else 7))
        eps = _random_eps(rng, size)
        per, w = per_user(eps, "adpm")
        ref = recursion_133(eps, 8.0)
        if w.trivial:
            assert all(x == 0 for x in ref)
            continue
        assert per == pytest.approx(ref, rel=1e-9, abs=1e-300)
        if k < 20:
            j = adpm_objective(per, eps)
            assert j <= qp_clip_level(eps, 8.0) / 4 + 1e-7


def test_oracle17_fixtures() -> None:
    eps = [0.5, 1.0, 2.0, 5.0, INF]
    per, w = per_user(eps, "adpm")
    assert w.tau == pytest.approx(53 / 14, rel=1e-15)
    assert float(w.eta) == pytest.approx(0.0903226, abs=5e-8)
    assert 1 / float(w.eta) == pytest.approx(11.071428571, rel=1e-9)
    assert per == pytest.approx([0.0451613, 0.0903226, 0.1806452, 0.3419355, 0.3419355],
                                abs=5e-8)
    assert adpm_objective(per, eps) == pytest.approx(0.0854839, abs=5e-8)
    per0, w0 = per_user([0.0, *eps], "adpm")  # prepending an ε = 0 user
    assert per0 == [0.0, *per]
    assert (w0.eta, w0.tau) == (w.eta, w.tau)

    eps = [0.1] * 999 + [1e6]
    per, w = per_user(eps, "adpm")
    assert w.tau == pytest.approx(0.1800801, abs=5e-8)
    assert adpm_objective(per, eps) == pytest.approx(4.4984e-4, rel=1e-4)
    prop = [e / sum(eps) for e in eps]
    assert adpm_objective(prop, eps) == pytest.approx(0.24995, abs=5e-5)
    assert adpm_objective([1 / 1000] * 1000, eps) == pytest.approx(4.5e-4, rel=1e-3)

    eps = [1e-6] + [1.0] * 999
    per, w = per_user(eps, "adpm")
    assert per[0] == pytest.approx(1.0e-9, rel=0.01)
    assert adpm_objective(per, eps) == pytest.approx(2.5225e-4, rel=1e-4)
    assert adpm_objective([1 / 1000] * 1000, eps) == pytest.approx(2e6, rel=1e-3)


# ---------------------------------------------------------------- review P3 / P4 / P6


def test_review_p4_public_only_after_dropping_zero_eps() -> None:
    """ε = (0, ∞, ∞): weight 1/n_pub on the public users only, η = 0 (never 1/n to all)."""
    per, w = per_user([0.0, INF, INF], "adpm")
    assert per == [0.0, 0.5, 0.5]
    assert w.eta == 0
    assert math.isnan(w.tau)  # the public-only marker, not τ = +inf
    assert j_star([0.0, INF], [1, 2], w) == pytest.approx(1 / (4 * 2))


def test_review_p6_huge_eps_is_capped_before_solving() -> None:
    """ε = (1e200, 1e201) in floats would overflow ε²; the public cap keeps the answer."""
    levels = levels_numpy(np.array([1e200, 1e201, 1e300, 1.7e308]), None)
    assert list(levels) == [EPS_CAP] * 4
    per, w = per_user([float(x) for x in levels[:2]], "adpm")
    assert per == [0.5, 0.5]
    assert j_star([EPS_CAP], [2], w) == pytest.approx(0.125, rel=1e-12)
    # the solver stays finite at the cap even with many rows
    phi, tau = solve_clip_level([1e-3, EPS_CAP], [10, 2**40], 8.0)
    assert all(math.isfinite(p) for p in phi)
    assert math.isfinite(tau)


def test_eps_floor_keeps_tiny_eps_inside_the_float_range() -> None:
    """ε = 1e-300 or subnormal made the solvers and the finalize step overflow; the public
    floor lowers positive ε < 1e-100 to 0 (privacy-safe), and every method then works."""
    raw = np.array([5e-324, 1e-300, math.nextafter(EPS_FLOOR, 0.0), EPS_FLOOR, 1.0, INF])
    levels = levels_numpy(raw, None)
    assert list(levels) == [0.0, 0.0, 0.0, EPS_FLOOR, 1.0, INF]
    for v, m in (([0.0, EPS_FLOOR], [2, 1]), ([EPS_FLOOR], [1]), ([EPS_FLOOR, 1.0], [1, 100]),
                 ([EPS_FLOOR, EPS_CAP], [3, 1]), ([0.0, EPS_FLOOR, INF], [1, 1, 1])):
        for method in ALL_METHODS:
            st = stats_of(v, m, [c * 2**30 for c in m])
            r = finalize_mean(spec(method), st, 0, ReleaseKey.fresh(), (), "x")
            assert all(lv.eps_effective <= lv.eps for lv in r.levels)
            if v[-1] == INF and method not in ("uniform", "hpm-a"):  # public row at 0.5
                assert r.estimate == pytest.approx(0.5, abs=1e-12)


def test_review_p5_baselines_carry_the_range() -> None:
    """PropDPM's noise is Laplace(Δ/||ε||₁) (not 1/||ε||₁), UNI's Δ/(n ε_min)."""
    v, m = [0.5, 2.0], [3, 1]
    totals = unit_totals(m, [0.5, 0.5])
    for lo, hi in ((0.0, 0.1), (0.0, 1.0), (-50.0, 150.0)):
        st = stats_of(v, m, totals)
        prop = finalize_mean(spec("proportional", lo, hi), st, 0, ReleaseKey.fresh(), (), "x")
        # the scale b(1 + 2**-20) rounded up to whole grid steps (< 2**-20 of d_min more)
        want = (hi - lo) / 3.5 * (1 + 2.0**-20)
        assert want * (1 - 1e-15) <= prop.noise_scale <= want * (1 + 2.0**-18)
        uni = finalize_mean(spec("uniform", lo, hi), st, 0, ReleaseKey.fresh(), (), "x")
        want = (hi - lo) / (4 * 0.5) * (1 + 2.0**-20)
        assert want * (1 - 1e-15) <= uni.noise_scale <= want * (1 + 2.0**-18)
    # UNI with an ε = 0 row has no finite noise: the trivial output
    st = stats_of([0.0, 1.0], [1, 3], unit_totals([1, 3], [0.5, 0.5]))
    assert finalize_mean(spec("uniform"), st, 0, ReleaseKey.fresh(), (), "x").fallback
