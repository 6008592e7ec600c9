"""Statistical oracles of the released noise (spec/seed-000.md §5 O6, O17-O21, §3.9).

Every statistical assertion has a false-failure probability <= 1e-4 (stated next to it).
The noise is drawn through the real finalize step, one release key per trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from histogram_testlib import (
    harmonic,
    max_abs_laplace_quantile,
    noise_matrix,
    releases,
    statistics_of,
    stats_from_rows,
    true_frequencies,
)
from scipy import stats as sst

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.core.histogram.finalize import HistogramResult, finalize_histogram
from hdp_spark.core.histogram.spec import HistogramSpec, histogram_weights
from hdp_spark.core.mean.weights import r_c2
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.stats import GroupStats

ALPHA = 1e-4
TRIALS = 2000


def spec_k(k: int, method: str = "hpf-a") -> HistogramSpec:
    return hdp_histogram(
        "c", eps="eps", categories=[f"c{j}" for j in range(k)], method=method,  # type: ignore[arg-type]
        other=None,
    )


@dataclass
class Homogeneous:
    """k = 10 bins, n = 400 rows at ε = 0.5, μ_j = 0.1 for every bin (clipping is rare)."""

    k: int
    spec: HistogramSpec
    stats: GroupStats
    results: list[HistogramResult]
    noise: np.ndarray
    scale: float


@pytest.fixture(scope="module")
def homogeneous() -> Homogeneous:
    spec = spec_k(10)
    stats = stats_from_rows(spec, [0.5] * 400, [i % 10 for i in range(400)])
    results = releases(spec, stats, TRIALS, tag="homog")
    noise = noise_matrix(results, statistics_of(spec, stats))
    scale = results[0].noise_scale
    assert scale == pytest.approx(2 / (400 * 0.5), rel=1e-5)
    return Homogeneous(10, spec, stats, results, noise, scale)


def test_o18_noise_is_laplace_in_every_bin(homogeneous: Homogeneous) -> None:
    """Per-bin KS against Laplace(0, claimed scale), Bonferroni over the k bins at 5e-5;
    pooled mean and neighbour correlations within 5 standard errors (< 1e-5 together):
    P(false failure) < 1e-4."""
    h = homogeneous
    law = sst.laplace(scale=h.scale)
    for j in range(h.k):
        assert sst.kstest(h.noise[:, j], law.cdf).pvalue > ALPHA / 2 / h.k
    # unbiased (O18)
    pooled = h.noise.ravel()
    assert abs(pooled.mean()) <= 5 * math.sqrt(2) * h.scale / math.sqrt(pooled.size)
    # bins are independent: no correlation between neighbouring bins
    for j in range(h.k - 1):
        r = np.corrcoef(h.noise[:, j], h.noise[:, j + 1])[0, 1]
        assert abs(r) * math.sqrt(TRIALS) < 5


def test_noise_scale_is_resolved_to_10_percent(homogeneous: Homogeneous) -> None:
    """The scale is the claimed one and not 10 % off either way.

    |Laplace(b)| is Exponential(b); folding doubles the KS distance between scales b and
    1.1·b (to 0.035) so that N = 20,000 pooled samples separate them: with the KS threshold
    at p = 1e-4, DKW gives P(no rejection of a wrong scale) <= 2·exp(-2N(0.035-0.0157)²)
    < 1e-6, and P(rejecting the right scale at p = 5e-5) <= 5e-5.
    """
    h = homogeneous
    folded = np.abs(h.noise.ravel())
    assert folded.size >= 20_000
    assert sst.kstest(folded, sst.expon(scale=h.scale).cdf).pvalue > ALPHA / 2
    for factor in (0.9, 1.1):
        assert sst.kstest(folded, sst.expon(scale=factor * h.scale).cdf).pvalue < ALPHA


def test_o6_homogeneous_quantile_of_linf_error(homogeneous: Homogeneous) -> None:
    """O6: the ℓ∞ error is max_j |Laplace| with 95th percentile b·(-ln(1 - 0.95^(1/k)))."""
    h = homogeneous
    q95 = max_abs_laplace_quantile(h.scale, h.k, 0.95)
    exceed = int((np.abs(h.noise).max(axis=1) > q95).sum())
    lo, hi = sst.binom.ppf(ALPHA / 2, TRIALS, 0.05), sst.binom.isf(ALPHA / 2, TRIALS, 0.05)
    assert lo <= exceed <= hi
    mu = np.array([float(x) for x in true_frequencies(h.spec, h.stats)])
    clipped = np.array([r.frequencies() for r in h.results])
    assert int((np.abs(clipped - mu).max(axis=1) > q95).sum()) <= hi  # clipping only helps


def test_o21_linf_mse_is_exact_for_unbiased_weights(homogeneous: Homogeneous) -> None:
    """§3.9.4 with B = 0: E‖N‖∞² = b²(H_k² + Σ 1/i²) (Lemma 2, exact). 5 standard errors."""
    h = homogeneous
    sq = np.abs(h.noise).max(axis=1) ** 2
    hk, hk2 = harmonic(h.k)
    want = h.scale**2 * (hk**2 + hk2)
    assert abs(sq.mean() - want) <= 5 * sq.std(ddof=1) / math.sqrt(TRIALS)


@dataclass
class Adversarial:
    """Correlated setting: the most private rows all hold bin 0 (spec O20)."""

    k: int
    spec: HistogramSpec
    stats: GroupStats
    results: list[HistogramResult]


@pytest.fixture(scope="module")
def adversarial() -> Adversarial:
    spec = spec_k(5, "hpf-cp")
    eps = [0.05] * 10 + [1.0] * 20 + [5.0] * 30
    codes = [0] * 10 + [j % 5 for j in range(20)] + [(j % 4) + 1 for j in range(30)]
    stats = stats_from_rows(spec, eps, codes)
    return Adversarial(5, spec, stats, releases(spec, stats, TRIALS, tag="adv"))


def test_o20_linf_pac_bound_with_explicit_constants(adversarial: Adversarial) -> None:
    """P{‖y - μ‖∞ > B + q} <= β with q = b·(-ln(1 - (1-β)^(1/k))) (§3.9.2), β = 0.05.

    The number of exceedances over T = 2000 trials is Binomial(T, p <= 0.05); it exceeds the
    1 - 1e-4 binomial quantile with probability <= 1e-4. The grid adds at most g.
    """
    a = adversarial
    first = a.results[0]
    w = histogram_weights(a.spec, a.stats.levels, a.stats.counts)
    n = a.stats.n
    mu = true_frequencies(a.spec, a.stats)
    stats = statistics_of(a.spec, a.stats)
    bias = max(abs(s - m) for s, m in zip(stats, mu, strict=True))  # B = max_j |d_j|
    assert bias > 0
    q = max_abs_laplace_quantile(first.noise_scale, a.k, 0.95)
    bound = float(bias) + q + float(first.granularity)
    errors = np.array(
        [max(abs(f - float(m)) for f, m in zip(r.frequencies(), mu, strict=True))
         for r in a.results]
    )
    assert (errors > bound).sum() <= sst.binom.isf(ALPHA, TRIALS, 0.05)
    # the explicit-constant chain of §3.9.2: B + q <= ‖w-1/n‖₁/2 + 2 ln(k/β)·s <= 2.062·r_C
    l1 = float(sum(abs(x - Fraction(1, n)) * c for x, c in
                   zip(w.w, a.stats.counts, strict=True)))
    assert first.bias_bound == pytest.approx(l1 / 2)
    s = first.noise_scale / 2
    loose = l1 / 2 + 2 * math.log(a.k / 0.05) * s
    assert bound <= loose
    assert loose <= 2.062 * math.sqrt(r_c2(a.stats.levels, a.stats.counts, w,
                                            math.log(a.k / 0.05))) * (1 + 1e-5)


def test_o21_linf_mse_bound(adversarial: Adversarial) -> None:
    """§3.9.4: E‖err‖∞² <= B² + 2B·b·H_k + b²(H_k² + Σ1/i²); MC mean + 5 standard errors."""
    a = adversarial
    mu = true_frequencies(a.spec, a.stats)
    bias = float(max(abs(s - m) for s, m in
                     zip(statistics_of(a.spec, a.stats), mu, strict=True)))
    b = a.results[0].noise_scale
    hk, hk2 = harmonic(a.k)
    bound = bias**2 + 2 * bias * b * hk + b**2 * (hk**2 + hk2)
    sq = np.array(
        [max(abs(f - float(m)) for f, m in zip(r.frequencies(), mu, strict=True)) ** 2
         for r in a.results]
    )
    assert sq.mean() <= bound + 5 * sq.std(ddof=1) / math.sqrt(TRIALS)


def test_o19_clipping(adversarial: Adversarial) -> None:
    a = adversarial
    mu = [float(m) for m in true_frequencies(a.spec, a.stats)]
    sums = set()
    for r in a.results[:300]:
        freqs = r.frequencies()
        assert all(0.0 <= f <= 1.0 for f in freqs)
        for f, y, m in zip(freqs, r.noisy, mu, strict=True):
            assert abs(f - m) <= abs(float(y) - m) + 1e-15
        sums.add(round(sum(freqs), 12))
    assert len(sums) > 1  # not renormalised: the bins need not sum to 1


def test_o17_app_k_exact_mse() -> None:
    """O17 (App. K), exact: k = 2, n/2 rows at ε = 0 and n/2 public, n/2 ones, W setting.

    HPF-WE puts 2/n on the public half and no noise; over a uniform permutation the number
    h of ones among the public half is hypergeometric, and the exact MSE of the released
    ℓ∞ error equals 1/(4(n-1)) >= 1/(8n).
    """
    n = 20
    spec = hdp_histogram("c", eps="eps", categories=["zero", "one"], method="hpf-we",
                         other=None)
    half = n // 2
    mse = Fraction(0)
    for h in range(half + 1):
        p = Fraction(math.comb(half, h) * math.comb(half, half - h), math.comb(n, half))
        codes = [1] * h + [0] * (half - h) + [1] * (half - h) + [0] * h  # public then private
        stats = stats_from_rows(spec, [math.inf] * half + [0.0] * half, codes)
        result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(h), ())
        assert result.noise_scale == 0
        assert [lv.weight for lv in result.levels] == [0.0, 2 / n]
        err = max(abs(Fraction(y) - Fraction(1, 2)) for y in result.noisy)
        mse += p * err**2
    assert mse == Fraction(1, 4 * (n - 1))
    assert mse >= Fraction(1, 8 * n)
