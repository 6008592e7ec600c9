"""The local-DP baseline of the mean (``ldp-cp``, ``ldp-ce``, ``ldp-wp``, ``ldp-we``).

Chaudhuri & Courtade, *Private Estimation When Data and Privacy Demands Are Correlated*,
Appendix B.1: users report Y_i = X_i + Laplace(1/ε_i) on [0, 1] and the server releases
Σ_i w_i Y_i with the HPM weights. The library runs it centrally; these tests check that

* the weights and the privacy figures (eps_effective) are those of the HPM method;
* the released noise has the law of the LDP baseline: a two-sample KS test against a
  direct numpy simulation of Σ_i w_i·Laplace(1/ε_i), its variance against the closed form
  2 Σ_i (w_i/ε_i)², and the reported noise_scale and interval;
* the noise is keyed (same key and data: same output; changed data: new noise);
* the Clopper-Pearson audit (harness of ``test_mean_audit``) does not flag it.

Every statistical test draws seeded keys (``_key``, or ``audit_stats.key`` where every
check is stated at <= 1e-6: fresh under HDP_TEST_FRESH_KEYS=1), so its outcome is the same on
every run; the false-failure probability a fresh key would have is stated beside each
(<= 1e-6, except the two z-tests of the noise law, whose normal approximation says ~1e-6).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from audit_stats import MISS, assert_audit, max_count, power_floor
from audit_stats import key as audit_key
from mean_oracles import INF, exact_statistic, spec, stats_of, unit_totals
from scipy import integrate, stats

import hdp_spark.core.mean.finalize as mean_module
from hdp_spark.core.mean.ldp_baseline import LDP_BASE_METHOD, ldp_noise_figures
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.exact import laplace_noise
from hdp_spark.core.reweighting import widened
from hdp_spark.core.stats import GroupStats

# a small mixed table: two private levels, a many-row level, public rows
V = [0.5, 1.0, 3.0, INF]
M = [2, 5, 40, 3]
UNIT = [0.25, 0.5, 0.75, 0.125]


def _key(tag: str, i: int = 0) -> ReleaseKey:
    """A seeded key per (test, sample): deterministic draws, i.i.d. across samples."""
    return ReleaseKey.from_unsafe_seed(f"ldp-baseline-{tag}-{i}")


def _release(method: str, table: GroupStats, key: ReleaseKey) -> mean_module.MeanResult:
    return mean_module.finalize_mean(spec(method, clip_output=False), table, 0, key, (), "x")


def _unit_scales(method: str, m: list[int] = M) -> np.ndarray:
    """Per-row b_i = w_i/ε_i of the LDP baseline (0 for public rows)."""
    w = mean_module.mean_weights(spec(method), V, m)
    per_level = [float(wl / Fraction(e)) if math.isfinite(e) else 0.0
                 for wl, e in zip(w.w, V, strict=True)]
    return np.repeat(per_level, m)


@pytest.mark.parametrize("method", sorted(LDP_BASE_METHOD))
def test_weights_and_privacy_are_those_of_the_hpm_method(method: str) -> None:
    base = LDP_BASE_METHOD[method]
    assert mean_module.mean_weights(spec(method), V, M) == mean_module.mean_weights(
        spec(base), V, M)
    plan = mean_module.plan_mean(spec(method), V, M)
    assert plan.levels == mean_module.plan_mean(spec(base), V, M).levels
    assert all(lv.eps_effective <= lv.eps for lv in plan.levels)
    # the most constrained level gets exactly its ε (w/η = ε), like HPM
    assert max(lv.eps_effective / lv.eps for lv in plan.levels if math.isfinite(lv.eps)) == 1.0


@pytest.mark.statistical
def test_noise_has_the_law_of_the_ldp_baseline() -> None:
    table = stats_of(V, M, unit_totals(M, UNIT))
    w = mean_module.mean_weights(spec("ldp-wp"), V, M)
    centre = float(exact_statistic(w, table.totals(0)))
    draws = 3000
    ours = np.array([_release("ldp-wp", table, _key("law", i)).estimate - centre
                     for i in range(draws)])
    b = _unit_scales("ldp-wp")
    rng = np.random.default_rng(7)  # design-ok: reference simulation of the LDP baseline
    ldp = (rng.laplace(0.0, 1.0, (draws, b.size)) * b).sum(axis=1)
    assert stats.ks_2samp(ours, ldp).pvalue > MISS  # same law: fails w.p. <= 1e-6
    var = 2.0 * float(np.sum(b * b))
    # mean 0 and variance 2 Σ b² (two-sided z-tests at 1e-6 by the normal approximation;
    # Laplace sums have kurtosis <= 6, so Var(sample variance) <= 5 var² / draws)
    z = float(stats.norm.isf(MISS / 2))
    assert abs(ours.mean()) <= z * math.sqrt(var / draws)
    assert abs(ours.var() / var - 1.0) <= z * math.sqrt(5.0 / draws)
    # the HPM release with the same weights is far less noisy: the baseline is not HPM
    # (true ratio of variances 2η²/var = 0.086; with 400 draws the sample variance is within
    # z·sqrt(5/400) = 55% of its mean except w.p. ~1e-6, so below 0.14 var)
    hpm = np.array([_release("hpm-wp", table, _key("hpm", i)).estimate - centre
                    for i in range(400)])
    assert hpm.var() < 0.5 * var


@pytest.mark.statistical
def test_noise_scale_and_interval() -> None:
    big = [20 * c for c in M]  # enough rows that the interval is not cut by [0, 1]
    table = stats_of(V, big, unit_totals(big, UNIT))
    w = mean_module.mean_weights(spec("ldp-we"), V, big)
    centre = float(exact_statistic(w, table.totals(0)))
    b = _unit_scales("ldp-we", big)
    beta = 0.05
    first = _release("ldp-we", table, _key("interval"))
    assert first.noise_scale == pytest.approx(math.sqrt(2.0 * float(np.sum(b * b))), rel=1e-5)
    # the released interval is estimate ± (noise half-width + bias_bound)
    half = first.ci_high - first.estimate - first.bias_bound
    assert first.ci_high - first.estimate == pytest.approx(first.estimate - first.ci_low)
    # the sub-exponential half-width is wider than a Gaussian one but of the same order
    assert 1.96 * first.noise_scale < half < 6.0 * first.noise_scale
    runs = (_release("ldp-we", table, audit_key(f"ldp-cover-{i}")) for i in range(1000))
    misses = sum(not (r.ci_low <= centre <= r.ci_high) for r in runs)
    # misses ~ at most Binomial(1000, β): above max_count w.p. <= 1e-6
    assert misses <= max_count(1000, beta)


def test_figures_are_functions_of_the_eps_histogram() -> None:
    w = mean_module.mean_weights(spec("ldp-wp"), V, M)
    per_row = [p / w.denominator for p in w.numerators]
    noise = laplace_noise(w.eta, Fraction(1, 2**10))
    sd, half = ldp_noise_figures(V, M, per_row, noise.scale, noise.granularity, 0.05)
    assert sd == pytest.approx(math.sqrt(2.0 * float(np.sum(_unit_scales("ldp-wp") ** 2))),
                               rel=1e-5)
    log_term = math.log(40.0)
    # subE(ν² = 4 Σ b² = 2 sd², α = 2 max b): t = max(sqrt(2 ν² ln(2/β)), 2 α ln(2/β))
    expected = max(math.sqrt(4.0 * sd * sd * log_term), 4.0 * float(noise.scale) * log_term)
    assert half == pytest.approx(expected + float(noise.granularity), rel=1e-12)
    # only public rows carry weight: no noise at all
    assert ldp_noise_figures([INF], [4], [0.25], Fraction(0), Fraction(0), 0.05) == (0.0, 0.0)


@pytest.mark.statistical
def test_noise_is_keyed_to_the_release_and_the_data() -> None:
    key = _key("keyed")
    table = stats_of(V, M, unit_totals(M, UNIT))
    again = stats_of(V, M, unit_totals(M, UNIT))
    assert _release("ldp-wp", table, key) == _release("ldp-wp", again, key)
    changed = stats_of(V, M, unit_totals(M, [0.25, 0.5, 0.75 + 2**-20, 0.125]))
    a, c = _release("ldp-wp", table, key), _release("ldp-wp", changed, key)
    # a changed statistic moves the output by far more than the change itself: fresh noise
    # (the noise difference has sd ~0.1: |diff| <= 1e-3 w.p. ~1e-2 for a fresh key, hence
    # the seeded key)
    assert abs(a.estimate - c.estimate) > 1e-3
    assert _release("ldp-wp", table, _key("keyed", 1)).estimate != a.estimate


def test_public_rows_only_are_released_exactly() -> None:
    table = stats_of([INF], [4], unit_totals([4], [0.375]))
    r = _release("ldp-cp", table, ReleaseKey.fresh())
    margin = widened(0.0, 0.0, 1.0)  # the released interval's rounding margin only
    assert (r.estimate, r.noise_scale, r.bias_bound) == (0.375, 0.0, 0.0)
    assert (r.ci_low, r.ci_high) == (0.375 - margin, 0.375 + margin)


# ------------------------------------------------------------------ privacy audit

N_PER_SIDE = 3000
AV = [1.0, 4.0, INF]
AM = [1, 1, 2]


def _event_probabilities(method: str) -> tuple[float, float]:
    """P(S | D) and P(S | D') of the correct mechanism, moved 1e-3 against the audit.

    Unit-scale noise: η·L + b_1·L' (L, L' standard Laplace; the exact draw of the attacked
    level and the remainder of the ε = 4 row, b_1 = w_1/4). Under D the location is the
    threshold: P = 1/2 up to the grid atom. Under D' it moves by w_0 = η (one noise scale):
    P = P(L + r L' <= -1), r = b_1/η, by quadrature."""
    w = mean_module.mean_weights(spec(method), AV, AM)
    r = float(w.w[1] / 4 / w.eta)
    p2, _ = integrate.quad(lambda y: stats.laplace.pdf(y) * stats.laplace.cdf(-1 - r * y),
                           -80, 80, points=[0.0, -1 / r], limit=200)
    return 0.5 - 1e-3, p2 + 1e-3


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("method", ["ldp-cp", "ldp-wp"])
def test_audit_real_release_path(method: str) -> None:
    """Neighbours differ in the single row of the most private level (ε = 1, loss bound
    w/η = 1), at 0 in D and at 1 in D'; event S = {estimate <= exact statistic under D},
    fixed before sampling; four one-sided CP tests at α/4 (``audit_stats``). Seeded keys,
    one per sample. With fresh keys a correct mechanism would fail the privacy side w.p.
    <= 1e-6 and the derived floor (0.188: the remainder noise dilutes the event to a true
    loss of ln(0.5/0.2757) = 0.595) w.p. <= 1e-6."""
    sp = spec(method)
    base = [c * math.floor(u * 2**31 + 0.5) for c, u in zip(AM[1:], [0.8, 0.3], strict=True)]
    d, d2 = stats_of(AV, AM, [0, *base]), stats_of(AV, AM, [2**31, *base])
    w = mean_module.mean_weights(sp, AV, AM)
    assert w.w[0] / w.eta == 1  # the attacked row's bound is tight
    threshold = float(exact_statistic(w, d.totals(0)))
    counts = []
    for side, table in (("D", d), ("D'", d2)):
        counts.append(sum(
            mean_module.finalize_mean(sp, table, 0, audit_key(f"ldp-audit-{method}-{side}-{i}"), (),
                                      "x").estimate <= threshold
            for i in range(N_PER_SIDE)))
    floor = power_floor(N_PER_SIDE, *_event_probabilities(method))
    assert floor > 0.15  # informative: the remainder noise does not hide the row
    assert_audit(*counts, N_PER_SIDE, 1.0, floor)


def test_report_names_the_local_baselines() -> None:
    from hdp_spark.report.words import method_words as _method_words

    for method in (*LDP_BASE_METHOD, "k-rappor-c", "k-rappor-w"):
        assert _method_words(method).startswith("the local-DP baseline")
    assert "local-DP" not in _method_words("hpm-wp")
