"""The "Turbo" histograms HPF-CT and HPF-WT (Algorithm 3, App. M of the FORC paper).

Oracles of spec/seed-000.md for the S2-based variants: the §2.6 objective table (c = L²/n
for CT and WT branch A', c = L for WT branch B), the O25 τ golden value, O9 (fixed point,
the per-user recursion eq. 133 = the grouped scan), optimality against brute force, the
WT branch rule, criterion 3 of §4.6 (WT ≡ WP weights on the W stand-ins), the correlated
PAC bound with explicit constants, the noise law and an empirical privacy audit.
The per-level privacy checks and the O1/O2/O6/O7/O14 oracles run for every method,
Turbo included, in test_histogram_weights.py and test_histogram_privacy.py.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from audit_stats import ALPHA as AUDIT_ALPHA
from audit_stats import assert_private, eps_lower_bound, power_floor
from audit_stats import key as audit_key
from histogram_testlib import (
    engines_agree,
    max_abs_laplace_quantile,
    noise_matrix,
    releases,
    statistics_of,
    stats_from_rows,
    true_frequencies,
)
from scipy import stats as sst

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.core.histogram.finalize import (
    bin_statistics,
    finalize_histogram,
    released_counts,
)
from hdp_spark.core.histogram.spec import HistogramSpec, histogram_weights
from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.mean.weights import (
    normalize,
    r_ct2,
    r_wt2,
    solve_clip_level,
    turbo_weights,
)
from hdp_spark.core.noise.exact import GRID_SLACK
from hdp_spark.errors import InternalError

INF = math.inf
ALPHA = 1e-4


def spec_k(k: int, method: str, beta: float = 0.05) -> HistogramSpec:
    return hdp_histogram(
        "c", eps="eps", categories=[f"c{j}" for j in range(k)], method=method,  # type: ignore[arg-type]
        beta=beta, other=None,
    )


def expand(v: list[float], m: list[int], w: Any = None) -> tuple[np.ndarray, np.ndarray]:
    eps = np.repeat(np.array(v, dtype=float), m)
    if w is None:
        return eps, np.array([])
    return eps, np.repeat(np.array([float(x) for x in w.w]), m)


def s_of(w: np.ndarray, eps: np.ndarray) -> float:
    """||w/ε||∞ over users with w > 0 and finite ε (ε = 0 with w > 0: infeasible)."""
    live = (w > 0) & np.isfinite(eps)
    if np.any(live & (eps <= 0)):
        return INF
    return float(np.max(w[live] / eps[live], initial=0.0))


def ct_objective(w: np.ndarray, eps: np.ndarray, lf: float) -> float:
    """n||w - 1/n||₂² + L² s² on a per-user vector (independent of the library's code)."""
    n = len(w)
    return float(n * np.sum((w - 1 / n) ** 2) + lf**2 * s_of(w, eps) ** 2)


def wt_objective(w: np.ndarray, eps: np.ndarray, lf: float) -> float:
    n = len(w)
    return float(min(n * np.sum((w - 1 / n) ** 2), lf * np.sum(w**2))
                 + lf**2 * s_of(w, eps) ** 2)


def random_tables(seed: int, count: int, zero: bool = True) -> list[tuple[list[float], list[int]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        pool = [float(x) for x in np.exp(rng.uniform(-6, 4, size=int(rng.integers(1, 7))))]
        if zero and rng.random() < 0.3:
            pool.append(0.0)
        if rng.random() < 0.3:
            pool.append(INF)
        v = sorted(set(pool))
        m = [int(x) for x in rng.integers(1, 30, size=len(v))]
        out.append((v, m))
    return out


TABLES = random_tables(19, 80)


def test_objective_constants_and_golden_tau() -> None:
    """§2.6 table + O25: ε = (0.1, 0.1, 1, 1, 10), k = 2, β = 0.05 (L = ln 40, n = 5):
    CT is S2 with c = L²/n, τ = 2.1552574; WT branch B is S2 with c = L, τ = 2.5949452."""
    v, m = [0.1, 1.0, 10.0], [2, 2, 1]
    lf = math.log(40)
    ct = spec_k(2, "hpf-ct")
    assert ct.log_factor == lf
    w = histogram_weights(ct, v, m)
    assert w.tau == pytest.approx(2.1552574, abs=1e-7)
    b = sum(c * min(x, w.tau) for x, c in zip(v, m, strict=True))
    assert [float(x) for x in w.w] == pytest.approx([min(x, w.tau) / b for x in v], rel=1e-12)
    phi_b, tau_b = solve_clip_level(v, m, lf)
    assert tau_b == pytest.approx(2.5949452, abs=1e-7)
    # WT: the smaller WT objective of the two branches, computed here per user
    wa = normalize(v, m, *solve_clip_level(v, m, lf * lf / 5))
    wb = normalize(v, m, phi_b, tau_b)
    eps = expand(v, m)[0]
    obj_a = wt_objective(expand(v, m, wa)[1], eps, lf)
    obj_b = wt_objective(expand(v, m, wb)[1], eps, lf)
    assert obj_a != pytest.approx(obj_b)
    wt = histogram_weights(spec_k(2, "hpf-wt"), v, m)
    assert wt == (wa if obj_a <= obj_b else wb)
    assert r_wt2(v, m, wt, lf) == pytest.approx(min(obj_a, obj_b), rel=1e-12)
    assert r_ct2(v, m, w, lf) == pytest.approx(ct_objective(expand(v, m, w)[1], eps, lf),
                                               rel=1e-12)


def recursion_133(eps: np.ndarray, c: float) -> np.ndarray:
    """The paper's per-user recursion (eq. 133) on sorted ε, literally, with the guard of
    the spec review: leading ε = 0 users get r = 0 (the paper assumes ε > 0)."""
    e = np.sort(eps)
    r = np.zeros_like(e)
    start = int(np.searchsorted(e, 0.0, side="right"))
    r[start] = e[start]
    s1, s2 = r[start], r[start] ** 2
    for i in range(start + 1, len(e)):
        r[i] = min((s2 + c) / s1, e[i])
        s1 += r[i]
        s2 += r[i] ** 2
    return r / r.sum()


@pytest.mark.parametrize("method", ["hpf-ct", "hpf-wt"])
def test_o9_fixed_point_and_recursion_133(method: str) -> None:
    for k in (2, 7):
        spec = spec_k(k, method)
        lf = spec.log_factor
        for v, m in TABLES:
            pos = [x for x in v if x > 0]
            if not pos or math.isinf(pos[0]):
                continue  # no positive finite ε: uniform over the public rows (O14)
            n = sum(m)
            w = histogram_weights(spec, v, m)
            c = lf * lf / n
            if method == "hpf-wt" and w != normalize(v, m, *solve_clip_level(v, m, c)):
                c = lf  # branch B won
            tau = w.tau
            capped = [min(x, tau) for x in v if x > 0]
            cm = [ml for x, ml in zip(v, m, strict=True) if x > 0]
            s1 = sum(a * b for a, b in zip(capped, cm, strict=True))
            s2 = sum(a * a * b for a, b in zip(capped, cm, strict=True))
            if math.isinf(tau):
                assert (s2 + c) / s1 >= max(pos)  # τ = ∞ iff (Σε² + c)/Σε >= max ε
            else:
                assert tau == pytest.approx((s2 + c) / s1, rel=1e-12)
            eps = expand(v, m)[0]
            want = recursion_133(eps, c)
            got = np.sort(expand(v, m, w)[1])
            assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_ct_is_optimal_against_brute_force() -> None:
    """r_CT(w_CT) <= r_CT(w) for capped weights on a dense τ grid, the other rules and
    1000 Dirichlet points per table (the objective is computed per user, independently)."""
    rng = np.random.default_rng(5)
    worse = 0
    for v, m in TABLES[:40]:
        if not any(0 < x < INF for x in v):
            continue
        spec = spec_k(5, "hpf-ct")
        lf = spec.log_factor
        eps = expand(v, m)[0]
        best = ct_objective(expand(v, m, histogram_weights(spec, v, m))[1], eps, lf)
        finite = [x for x in v if 0 < x < INF]
        for tau in np.geomspace(min(finite) / 2, max(finite) * 2, 400):
            phi = [min(x, float(tau)) if x > 0 else 0.0 for x in v]
            w = normalize(v, m, phi, float(tau))
            assert best <= ct_objective(expand(v, m, w)[1], eps, lf) * (1 + 1e-12)
        for other in ("hpf-a", "hpf-cp", "hpf-wp", "uniform", "proportional"):
            w = histogram_weights(spec_k(5, other), v, m)
            if w.trivial:
                continue
            assert best <= ct_objective(expand(v, m, w)[1], eps, lf) * (1 + 1e-12)
        mask = eps > 0
        for _ in range(1000):
            w = np.zeros(len(eps))
            w[mask] = rng.dirichlet(np.full(int(mask.sum()), 2.0))
            obj = ct_objective(w, eps, lf)
            assert best <= obj * (1 + 1e-12)
            worse += obj > best
    assert worse > 0


def test_wt_branch_rule() -> None:
    """WT = the better of the two S2 branches under the WT objective (the analogue of O11):
    its objective is the smaller branch optimum, and never above CT's or any random w."""
    rng = np.random.default_rng(6)
    picked = set()
    for v, m in TABLES:
        if not any(0 < x < INF for x in v):
            continue
        spec = spec_k(5, "hpf-wt")
        lf = spec.log_factor
        n = sum(m)
        eps = expand(v, m)[0]
        wt = histogram_weights(spec, v, m)
        wa = normalize(v, m, *solve_clip_level(v, m, lf * lf / n))
        wb = normalize(v, m, *solve_clip_level(v, m, lf))
        # branch optima: n||w-1/n||² + L²s² at wa, L||w||² + L²s² at wb
        ua, ub = expand(v, m, wa)[1], expand(v, m, wb)[1]
        branch_a = n * float(np.sum((ua - 1 / n) ** 2)) + lf**2 * s_of(ua, eps) ** 2
        branch_b = lf * float(np.sum(ub**2)) + lf**2 * s_of(ub, eps) ** 2
        got = wt_objective(expand(v, m, wt)[1], eps, lf)
        assert got == pytest.approx(min(branch_a, branch_b), rel=1e-9)
        picked.add(wt == wb)
        ct = histogram_weights(spec_k(5, "hpf-ct"), v, m)
        assert got <= wt_objective(expand(v, m, ct)[1], eps, lf) * (1 + 1e-12)
        mask = eps > 0
        for _ in range(200):
            w = np.zeros(len(eps))
            w[mask] = rng.dirichlet(np.ones(int(mask.sum())))
            assert got <= wt_objective(w, eps, lf) * (1 + 1e-12)
    assert picked == {True, False}  # both branches occur


def test_turbo_relaxes_cp() -> None:
    """n||·||₂² >= ||·||₁² (Cauchy-Schwarz): r_CT(w_CT) >= min r_C = r_C(w_CP), and the
    Turbo weights differ from CP's on heterogeneous ε (the relaxation is not exact)."""
    from hdp_spark.core.mean.weights import r_c2

    differ = 0
    for v, m in TABLES:
        if not any(0 < x < INF for x in v):
            continue
        lf = math.log(5 / 0.05)
        ct = histogram_weights(spec_k(5, "hpf-ct"), v, m)
        cp = histogram_weights(spec_k(5, "hpf-cp"), v, m)
        assert r_ct2(v, m, ct, lf) >= r_c2(v, m, cp, lf) * (1 - 1e-12)
        assert r_c2(v, m, ct, lf) >= r_c2(v, m, cp, lf) * (1 - 1e-9)
        differ += ct != cp
    assert differ > 10


def test_turbo_edge_cases() -> None:
    spec = spec_k(3, "hpf-ct")
    # all public: uniform over the public rows, no noise
    w = histogram_weights(spec, [INF], [4])
    assert w.w == (Fraction(1, 4),)
    assert w.eta == 0
    # zeros and public only: weight 0 on ε = 0, uniform on the public rows
    w = histogram_weights(spec, [0.0, INF], [2, 3])
    assert w.w == (0, Fraction(1, 3))
    assert w.eta == 0
    # all ε = 0: trivial output
    assert histogram_weights(spec, [0.0], [5]).trivial
    # O16: one very private row and public rows: almost no weight, almost no noise
    w = histogram_weights(spec, [1e-9, INF], [1, 99])
    assert float(w.w[0]) < 1e-10
    assert float(w.eta) < 1e-10
    with pytest.raises(InternalError, match="L > 0"):
        turbo_weights([1.0], [1], 0.0, weak=False)


W_STANDINS = {
    # spec §4.6: (n, k, log ε range, category probabilities or None = uniform)
    "CANCER": (17000, 10, (-5.0, 5.0),
               [0.22, 0.16, 0.13, 0.11, 0.09, 0.07, 0.06, 0.06, 0.05, 0.05]),
    "SYN-5": (10000, 5, (-6.0, 4.0), None),
    "SYN-20": (10000, 20, (-6.0, 4.0), None),
}


@pytest.mark.parametrize("name", sorted(W_STANDINS))
@pytest.mark.parametrize("grid", [None, EpsGrid(ratio=1.01, lowest=1e-5, highest=1e3)])
def test_criterion_3_wt_equals_wp_on_the_w_standins(name: str, grid: EpsGrid | None) -> None:
    """spec §4.6 criterion 3 (the paper's App. M: HPF-WP and HPF-WT "perform exactly the
    same"): on the W stand-ins both take branch B (S2 with c = L), so the weights are
    identical; CT and CP, which have no such branch, differ."""
    n, k, (lo, hi), _ = W_STANDINS[name]
    rng = np.random.default_rng(100 + k)
    eps = np.exp(rng.uniform(lo, hi, n))
    v, m = np.unique(levels_numpy(eps, grid), return_counts=True)
    vl, ml = [float(x) for x in v], [int(c) for c in m]
    wp = histogram_weights(spec_k(k, "hpf-wp"), vl, ml)
    wt = histogram_weights(spec_k(k, "hpf-wt"), vl, ml)
    assert wt == wp
    lf = math.log(k / 0.05)
    assert wt == normalize(vl, ml, *solve_clip_level(vl, ml, lf))  # branch B
    ct = histogram_weights(spec_k(k, "hpf-ct"), vl, ml)
    cp = histogram_weights(spec_k(k, "hpf-cp"), vl, ml)
    assert ct != cp
    assert ct != wt


def adversarial(method: str) -> tuple[HistogramSpec, Any]:
    spec = spec_k(5, method)
    eps = [0.05] * 10 + [1.0] * 20 + [5.0] * 30
    codes = [0] * 10 + [j % 5 for j in range(20)] + [(j % 4) + 1 for j in range(30)]
    return spec, stats_from_rows(spec, eps, codes)


def test_ct_pac_bound_with_explicit_constants() -> None:
    """§3.9.2 for HPF-CT on the adversarial dataset of O20: P{‖y - μ‖∞ > B + q} <= β, and
    B + q <= ||w-1/n||₁/2 + 2L·s <= √(1/4 + 4)·r_CT (Cauchy-Schwarz twice:
    ||w-1/n||₁ <= (n||w-1/n||₂²)^½ and a·x + b·y <= (a² + b²)^½ (x² + y²)^½).
    Exceedances over 2000 trials are Binomial(2000, <= 0.05): P(false failure) <= 1e-4."""
    trials = 2000
    spec, stats = adversarial("hpf-ct")
    results = releases(spec, stats, trials, tag="ct-adv")
    w = histogram_weights(spec, stats.levels, stats.counts)
    mu = true_frequencies(spec, stats)
    a = statistics_of(spec, stats)
    bias = float(max(abs(x - y) for x, y in zip(a, mu, strict=True)))
    assert bias > 0
    first = results[0]
    q = max_abs_laplace_quantile(first.noise_scale, 5, 0.95)
    bound = bias + q + float(first.granularity)
    errors = np.array([max(abs(f - float(y)) for f, y in zip(r.frequencies(), mu, strict=True))
                       for r in results])
    assert (errors > bound).sum() <= sst.binom.isf(ALPHA, trials, 0.05)
    assert (errors > 0.5 * bound).sum() > sst.binom.isf(ALPHA, trials, 0.05)  # not vacuous
    lf = spec.log_factor
    loose = first.bias_bound + 2 * lf * first.noise_scale / 2
    assert bound <= loose
    assert loose <= math.sqrt(0.25 + 4) * math.sqrt(
        r_ct2(stats.levels, stats.counts, w, lf)) * (1 + 1e-5)


@pytest.mark.parametrize("method", ["hpf-ct", "hpf-wt"])
def test_turbo_noise_is_laplace_of_the_claimed_scale(method: str) -> None:
    """O18 on heterogeneous ε: y - a is iid Laplace(2η(1 + 2^-20)) per bin, η from the
    final weights. Per-bin KS (Bonferroni over k at 5e-5) and a pooled folded KS that
    rejects the scale ×0.9 and ×1.1 (the argument of test_histogram_noise.py)."""
    trials = 2000
    spec, stats = adversarial(method)
    w = histogram_weights(spec, stats.levels, stats.counts)
    results = releases(spec, stats, trials, tag=f"{method}-noise")
    scale = results[0].noise_scale
    wanted = 2 * w.eta * (1 + GRID_SLACK)  # rounded up to whole grid steps (exact.py)
    assert wanted <= results[0].scale < wanted + results[0].granularity
    noise = noise_matrix(results, statistics_of(spec, stats))
    law = sst.laplace(scale=scale)
    for j in range(spec.k):
        assert sst.kstest(noise[:, j], law.cdf).pvalue > ALPHA / 2 / spec.k
    folded = np.abs(noise.ravel())
    assert sst.kstest(folded, sst.expon(scale=scale).cdf).pvalue > ALPHA / 2
    for factor in (0.9, 1.1):
        assert sst.kstest(folded, sst.expon(scale=factor * scale).cdf).pvalue < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["hpf-ct", "hpf-wt"])
def test_turbo_empirical_audit_lower_bound_stays_below_eps(method: str) -> None:
    """One private row (ε = 1) in bin a, one public row in bin b; the neighbour moves the
    private row to bin b. Turbo gives the private row the loss w/η = 1 exactly, so the
    event {y_a >= a_a, y_b <= a_b} has probability ratio e^1. Clopper-Pearson lower bound
    on ε (α = 1e-6: a correct mechanism fails w.p. <= 1e-6) <= 1, and informative (above a
    floor missed w.p. <= 1e-6)."""
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"], other=None, method=method)  # type: ignore[arg-type]
    base = stats_from_rows(spec, [1.0, INF], [0, 1])
    moved = stats_from_rows(spec, [1.0, INF], [1, 1])
    weights = histogram_weights(spec, base.levels, base.counts)
    assert weights.w[0] / weights.eta == 1  # the private row gets exactly its ε
    thresholds = bin_statistics(weights, released_counts(spec, base), 2)
    trials = 3000

    def hits(stats: Any, tag: str) -> int:
        count = 0
        for t in range(trials):
            r = finalize_histogram(spec, stats, audit_key(f"hist-audit-{tag}{t}"), (),
                                   weights)
            count += int(r.noisy[0] >= thresholds[0] and r.noisy[1] <= thresholds[1])
        return count

    k_base, k_moved = hits(base, f"{method}p"), hits(moved, f"{method}q")
    # one direction, fixed in advance: CP bounds at α/2 = 5e-7 a side (audit_stats); the floor
    # is derived from the event probabilities 1/4 and e^-1/4 (losses
    # of the two bins add to 1; grid atoms only help), moved 1e-3 against the audit
    eps_lower = eps_lower_bound(k_base, k_moved, trials, AUDIT_ALPHA)
    assert_private(eps_lower, 1.0)
    floor = power_floor(trials, 0.25 - 1e-3, math.exp(-1) / 4 + 1e-3, directions=1)
    assert eps_lower > floor > 0.2  # informative


@pytest.mark.parametrize("method", ["hpf-ct", "hpf-wt"])
def test_engines_agree_on_turbo(spark: Any, method: str) -> None:
    """O27 for Turbo: same seed and data give identical outputs on pandas and Spark."""
    local = engines_agree(spark, method, 3, 1.2, (-4.0, 3.0))
    assert np.isfinite(local["tau"][local["g"] != "w"]).all()
    assert not local["fallback"][local["g"] != "w"].any()
