"""The k-RAPPOR baseline as histogram methods ``k-rappor-c`` / ``k-rappor-w`` (the FORC
paper's local-DP comparison, App. B.1; spec/seed-000.md §4.1 and oracle O30).

Checked: the closed-form combination weights (computed independently here), the exact
keyed sampler of the keep probability 1/(1 + e^-γ), unbiasedness and the released standard
deviation, the Hoeffding interval's coverage, an empirical privacy audit (Clopper-Pearson
lower bound on ε), ε = 0 rows that cannot change anything, explain and engine parity.
Every statistical assertion has a false-failure probability <= 1e-4.
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
from histogram_testlib import engines_agree, stats_from_rows, true_frequencies
from scipy import stats as sst

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.core.histogram.finalize import (
    bin_statistics,
    finalize_histogram,
    plan_histogram,
    released_counts,
)
from hdp_spark.core.histogram.spec import RAPPOR_METHODS, HistogramSpec, histogram_weights
from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.binomial import binomial_logistic
from hdp_spark.errors import InternalError

INF = math.inf
ALPHA = 1e-4


def spec_k(k: int, method: str, other: str | None = None) -> HistogramSpec:
    return hdp_histogram("c", eps="eps", categories=[f"c{j}" for j in range(k)],
                         method=method, other=other)  # type: ignore[arg-type]


def proxy(eps: np.ndarray) -> np.ndarray:
    """v = coth(ε/4)/ε, written independently of the library (v(∞) = 0, v(0) = ∞)."""
    out = np.full(eps.shape, np.inf)
    fin = np.isfinite(eps) & (eps > 0)
    out[fin] = np.cosh(eps[fin] / 4) / np.sinh(eps[fin] / 4) / eps[fin]
    out[np.isinf(eps)] = 0.0
    return out


def rappor_objective(w: np.ndarray, pv: np.ndarray, lf: float) -> float:
    """(n||w - 1/n||₂² ∧ L||w||₂²) + L·Σ w² v, per user (0·∞ := 0)."""
    n = len(w)
    var = float(np.sum(np.where(w > 0, w * w * np.where(np.isinf(pv), 0, pv), 0.0)))
    return float(min(n * np.sum((w - 1 / n) ** 2), lf * np.sum(w * w)) + lf * var)


def tables(seed: int, count: int) -> list[tuple[list[float], list[int]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        pool = [float(x) for x in np.exp(rng.uniform(-6, 4, size=int(rng.integers(1, 7))))]
        pool += [0.0] * int(rng.random() < 0.3) + [INF] * int(rng.random() < 0.3)
        v = sorted(set(pool))
        out.append((v, [int(c) for c in rng.integers(1, 400, size=len(v))]))
    return out


def test_weights_are_the_closed_forms() -> None:
    """C: w ∝ 1/(n + L·v); W: the better of that and w ∝ 1/(1 + v) under
    (n||w - 1/n||₂² ∧ L||w||₂²) + L·Σ w² v (per-user objective computed here)."""
    branches = set()
    for v, m in tables(31, 60):
        if not any(x > 0 for x in v):
            continue
        k = 4
        lf = math.log(k / 0.05)
        eps = np.repeat(np.array(v), m)
        n = len(eps)
        pv = proxy(eps)
        wa = 1 / (n + lf * pv)
        wa /= wa.sum()
        wb = np.where(np.isinf(pv), 0.0, 1 / (1 + pv))
        wb /= wb.sum()
        got_c = np.repeat([float(x) for x in histogram_weights(spec_k(k, "k-rappor-c"), v, m).w], m)
        assert got_c == pytest.approx(wa, rel=1e-12, abs=1e-300)

        got_w = np.repeat([float(x) for x in histogram_weights(spec_k(k, "k-rappor-w"), v, m).w], m)
        want = wa if rappor_objective(wa, pv, lf) <= rappor_objective(wb, pv, lf) else wb
        assert got_w == pytest.approx(want, rel=1e-12, abs=1e-300)
        branches.add(rappor_objective(wa, pv, lf) <= rappor_objective(wb, pv, lf))
        assert np.all(got_c[eps == 0] == 0)
    assert branches == {True, False}


def test_binomial_logistic_has_the_keep_probability() -> None:
    """Mean of Bin(n, 1/(1 + e^-γ)) draws within 5 standard errors (P < 1e-6 each)."""
    for gamma in (Fraction(1, 20), Fraction(1, 2), Fraction(3)):
        p = 1 / (1 + math.exp(-float(gamma)))
        rng = ReleaseKey.from_unsafe_seed(f"logistic{gamma}").stream(b"t")
        total, n = 0, 0
        for size in (1, 7, 100, 4000) * 20:
            total += binomial_logistic(size, gamma, rng)
            n += size
        assert abs(total / n - p) <= 5 * math.sqrt(p * (1 - p) / n)
    rng = ReleaseKey.from_unsafe_seed(1).stream(b"t")
    assert binomial_logistic(0, Fraction(1), rng) == 0
    with pytest.raises(InternalError, match="gamma > 0"):
        binomial_logistic(3, Fraction(0), rng)


def mixed_group(method: str) -> tuple[HistogramSpec, Any]:
    """k = 3 released bins, other=None (unmatched rows report all zeros), ε = 0, small,
    medium and public rows, the most private rows all in bin 0."""
    spec = spec_k(3, method)
    eps = [0.0] * 5 + [0.3] * 40 + [1.5] * 60 + [6.0] * 50 + [INF] * 10
    codes = ([1] * 5 + [0] * 40 + [j % 4 for j in range(60)] + [(j % 3) + 1 for j in range(50)]
             + [2] * 10)
    codes = [3 if c == 3 else c for c in codes]  # code 3 = unmatched
    return spec, stats_from_rows(spec, eps, codes)


@pytest.mark.parametrize("method", RAPPOR_METHODS)
def test_unbiased_with_the_released_standard_deviation(method: str) -> None:
    """O30: E[bin] = Σ_l w_l·C_lj (5 standard errors per bin, Bonferroni-safe); the pooled
    sample variance of the noise is noise_scale² within 10 % (> 5 sd of the estimate at
    6000 samples); the Hoeffding interval covers the noise with probability >= 1 - β."""
    trials = 2000
    spec, stats = mixed_group(method)
    w = histogram_weights(spec, stats.levels, stats.counts)
    target = [float(x) for x in bin_statistics(w, released_counts(spec, stats), spec.k)]
    results = [finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(f"{method}{t}"), ())
               for t in range(trials)]
    sd = results[0].noise_scale
    assert sd > 0
    noise = np.array([[float(y) - a for y, a in zip(r.noisy, target, strict=True)]
                      for r in results])
    for j in range(spec.k):
        assert abs(noise[:, j].mean()) <= 5 * sd / math.sqrt(trials)
    assert np.var(noise.ravel()) == pytest.approx(sd**2, rel=0.10)
    half = results[0].half_width
    assert half > 1.96 * sd  # Hoeffding is conservative
    exceed = int((np.abs(noise) > half).sum())
    assert exceed <= sst.binom.isf(ALPHA, trials * spec.k, spec.beta)
    # ε levels: each row gets exactly its ε (0 for ε = 0), n and bias bound as for HPF
    assert [lv.eps_effective for lv in results[0].levels] == [0.0, 0.3, 1.5, 6.0, INF]
    assert results[0].levels[0].weight == 0
    assert plan_histogram(spec, stats.levels, stats.counts).half_width == half


@pytest.mark.parametrize("method", RAPPOR_METHODS)
def test_public_rows_report_exactly_and_zero_rows_are_never_read(method: str) -> None:
    spec = spec_k(3, method, other="other")
    stats = stats_from_rows(spec, [INF] * 7, [0, 0, 1, 2, 2, 2, 3])
    result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(3), ())
    assert result.noise_scale == 0
    assert result.half_width == 0
    mu = true_frequencies(spec, stats)
    assert result.frequencies() == pytest.approx([float(x) for x in mu], abs=1e-12)
    eps = [0.0, 0.0, 1.0, 2.0, INF]
    base = stats_from_rows(spec, eps, [0, 1, 2, 0, 1])
    moved = stats_from_rows(spec, eps, [3, 2, 2, 0, 1])  # only the ε = 0 rows change
    a = finalize_histogram(spec, base, ReleaseKey.from_unsafe_seed(4), ())
    b = finalize_histogram(spec, moved, ReleaseKey.from_unsafe_seed(4), ())
    assert a.noisy == b.noisy  # bit-identical, randomness included
    c = finalize_histogram(spec, stats_from_rows(spec, eps, [0, 1, 0, 0, 1]),
                           ReleaseKey.from_unsafe_seed(4), ())
    assert c.noisy != a.noisy  # a private row's value does enter (the check can fail)
    # huge finite ε (no overflow): reports are exact up to e^(-ε/2), the noise vanishes
    huge = finalize_histogram(spec, stats_from_rows(spec, [1e200] * 4 + [0.5], [0, 1, 1, 2, 0]),
                              ReleaseKey.from_unsafe_seed(5), ())
    assert math.isfinite(huge.noise_scale)
    assert huge.levels[1].eps_effective == 1e200


@pytest.mark.statistical
@pytest.mark.parametrize("method", RAPPOR_METHODS)
def test_empirical_audit_lower_bound_stays_below_eps(method: str) -> None:
    """A private row (ε = 1) in bin a and a public row in bin b; the neighbour moves the
    private row to b. {y_a > 0, y_b < w_pub} is {the private row reports (1, 0)}: probability
    (1-q)² against q², ratio exactly e^ε. The Clopper-Pearson lower bound on ε
    (α = 1e-6: a correct mechanism fails w.p. <= 1e-6) stays <= 1 and is informative
    (above a floor missed w.p. <= 1e-6)."""
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"], other=None, method=method)  # type: ignore[arg-type]
    base = stats_from_rows(spec, [1.0, INF], [0, 1])
    moved = stats_from_rows(spec, [1.0, INF], [1, 1])
    weights = histogram_weights(spec, base.levels, base.counts)
    w_pub = weights.w[1]
    trials = 3000

    def hits(stats: Any, tag: str) -> int:
        count = 0
        for t in range(trials):
            r = finalize_histogram(spec, stats, audit_key(f"hist-audit-{tag}{t}"), (),
                                   weights)
            count += int(r.noisy[0] > 0 and r.noisy[1] < w_pub)
        return count

    k_base, k_moved = hits(base, f"{method}p"), hits(moved, f"{method}q")
    # one direction, fixed in advance: CP bounds at α/2 = 5e-7 a side (audit_stats); the floor
    # is derived from the event probabilities (1-q)² and q² (moved 1e-3
    # against the audit)
    eps_lower = eps_lower_bound(k_base, k_moved, trials, AUDIT_ALPHA)
    assert_private(eps_lower, 1.0)
    q = 1 / (1 + math.exp(0.5))  # each bit flips w.p. q: (1 - q)/q = e^(ε/2)
    floor = power_floor(trials, (1 - q) ** 2 - 1e-3, q * q + 1e-3, directions=1)
    assert eps_lower > floor > 0.2  # informative


def test_w_form_is_far_more_accurate_on_the_w_standin() -> None:
    """On the spec's BENCH-F-W-SYN-5 ε (exp(U[-6, 4]), n = 10,000) the W weights take the
    1/(1 + v) branch and their noise is > 10× smaller than the C weights' (the reason both
    forms exist: C keeps nearly uniform weights unless L·v > n)."""
    rng = np.random.default_rng(2)
    eps = np.exp(rng.uniform(-6, 4, 10000))
    v, m = np.unique(levels_numpy(eps, EpsGrid(ratio=1.01, lowest=1e-5, highest=1e3)),
                     return_counts=True)
    vl, ml = [float(x) for x in v], [int(c) for c in m]
    c = plan_histogram(spec_k(5, "k-rappor-c"), vl, ml)
    w = plan_histogram(spec_k(5, "k-rappor-w"), vl, ml)
    assert w.noise_scale * 10 < c.noise_scale
    pv = proxy(np.array(vl))
    phi = np.where(np.isinf(pv), 0.0, 1 / (1 + pv))
    assert w.weights is not None
    assert [float(x) for x in w.weights.w] == pytest.approx(list(phi / np.dot(phi, ml)),
                                                            rel=1e-12)


@pytest.mark.parametrize("method", RAPPOR_METHODS)
def test_engines_agree_on_rappor(spark: Any, method: str) -> None:
    local = engines_agree(spark, method, 4, 1.3, (-3.0, 3.0))
    live = local[local["g"] != "w"]
    assert (live["noise_scale"] > 0).all()
    assert not live["fallback"].any()
