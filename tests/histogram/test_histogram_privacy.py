"""Privacy of the histogram, checked exactly (Fractions, grid included) and empirically.

* every ε level's loss bound 2·(w_l + g)/b' is <= ε_l (module docstring of
  :mod:`hdp_spark.core.histogram`), for every method and random ε histograms;
* the grid must come from the per-bin sensitivity w_min, not from 2·w_min;
* exact neighbour audit: for every row and every replacement value (in or out of the
  domain, each ``other`` rule), the worst-case log-probability ratio of the discrete
  mechanism, Σ_j |round(a_j/g) - round(a'_j/g)|·g/b', is <= ε_i;
* an empirical audit with a Clopper-Pearson lower bound on ε.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from audit_stats import ALPHA, assert_private, eps_lower_bound, power_floor
from audit_stats import key as audit_key
from histogram_testlib import stats_from_rows

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.core.histogram.auto import resolve_histogram
from hdp_spark.core.histogram.finalize import (
    bin_statistics,
    finalize_histogram,
    level_loss_bounds,
    released_counts,
)
from hdp_spark.core.histogram.spec import (
    LAPLACE_METHODS,
    HistogramSpec,
    histogram_weights,
)
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.exact import GRID_SLACK, grid_for

INF = math.inf


def spec3(method: str, other: str | None = "other") -> HistogramSpec:
    return hdp_histogram("c", eps="eps", categories=["a", "b", "c"], method=method,  # type: ignore[arg-type]
                         other=other)


def random_rows(seed: int) -> tuple[list[float], list[int]]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    pool = [float(x) for x in np.exp(rng.uniform(-7, 5, size=int(rng.integers(1, 6))))]
    pool += [0.0] * int(rng.random() < 0.3) + [INF] * int(rng.random() < 0.3)
    eps = [pool[i] for i in rng.integers(0, len(pool), n)]
    codes = [int(c) for c in rng.integers(0, 4, n)]
    return eps, codes


@pytest.mark.parametrize("method", [*LAPLACE_METHODS, "auto"])
def test_every_level_loss_is_at_most_its_eps(method: str) -> None:
    spec = spec3(method)
    for seed in range(40):
        eps, codes = random_rows(seed)
        stats = stats_from_rows(spec, eps, codes)
        result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(seed), ())
        if result.fallback or result.scale == 0:
            continue
        w = histogram_weights(spec, stats.levels, stats.counts).w
        w_min = min(x for x, v in zip(w, stats.levels, strict=True) if x > 0 and v < INF)
        assert result.granularity <= w_min * GRID_SLACK
        bounds = level_loss_bounds(w, stats.levels, result.granularity, result.scale)
        for bound, v in zip(bounds, stats.levels, strict=True):
            if bound is not None:
                assert bound <= Fraction(v)  # exact, grid term included


def test_grid_from_twice_the_weight_would_break_the_bound() -> None:
    """Homogeneous n = 3, ε = 1: w = 1/3, b = 2/3. With g from 2·w_min (2^-21 > w·2^-20) the
    exact bound 2(w + g)/b' exceeds ε; with g from w_min (what finalize uses) it does not."""
    spec = spec3("hpf-a")
    stats = stats_from_rows(spec, [1.0] * 3, [0, 1, 2])
    result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(0), ())
    w = Fraction(1, 3)
    assert 2 * w * (1 + GRID_SLACK) <= result.scale < 2 * w * (1 + GRID_SLACK) + grid_for(w)
    naive = grid_for(2 * w)
    assert naive > w * GRID_SLACK
    assert 2 * (w + naive) / result.scale > 1
    assert result.granularity == grid_for(w)
    assert 2 * (w + result.granularity) / result.scale <= 1


def worst_ratio(spec: HistogramSpec, stats_a: object, stats_b: object, weights: object,
                g: Fraction, scale: Fraction) -> Fraction:
    """Exact worst-case log-probability ratio between the outputs on two neighbours."""
    a = bin_statistics(weights, released_counts(spec, stats_a), spec.k)  # type: ignore[arg-type]
    b = bin_statistics(weights, released_counts(spec, stats_b), spec.k)  # type: ignore[arg-type]
    if scale == 0:  # noiseless: only public rows carry weight, so nothing may move
        assert a == b
        return Fraction(0)
    shift = sum(abs(round(x / g) - round(y / g)) for x, y in zip(a, b, strict=True))
    return shift * g / scale


@pytest.mark.parametrize("other", ["other", "b", None])
@pytest.mark.parametrize("method", [*LAPLACE_METHODS, "auto"])
def test_exact_neighbour_audit(method: str, other: str | None) -> None:
    _audit(method, other, [0.0, 0.2, 0.2, 0.9, 3.0, 3.0, INF, 0.45])


@pytest.mark.parametrize("other", ["other", None])
@pytest.mark.parametrize("scale", [8.0, 40.0])
def test_exact_neighbour_audit_of_auto_choices(other: str | None, scale: float) -> None:
    """``auto`` at ε where it releases a noisy histogram (at the ε above, 8 rows, it
    predicts the data-independent output best): each row's loss is the chosen method's."""
    eps = [x * scale for x in (0.0, 0.2, 0.2, 0.9, 3.0, 3.0, 0.45)] + [INF]
    levels = sorted(set(eps))
    counts = [eps.count(x) for x in levels]
    assert resolve_histogram(spec3("auto", other), levels, counts).method != "uniform"
    _audit("auto", other, eps)


def _audit(method: str, other: str | None, eps: list[float]) -> None:
    spec = spec3(method, other)
    codes = [0, 1, 3, 0, 2, 1, 3, 2]  # code 3 = null / out of domain
    stats = stats_from_rows(spec, eps, codes)
    weights = histogram_weights(spec, stats.levels, stats.counts)
    result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(1), (), weights)
    if result.fallback:  # ε = 0 rows: no uniform mechanism exists (auto: chose that)
        assert method in ("uniform", "auto")
        assert method == "uniform" or resolve_histogram(
            spec, stats.levels, stats.counts).method == "uniform"
        return
    worst = Fraction(0)
    for i, e in enumerate(eps):
        if e == INF:
            continue
        for alt in range(4):
            changed = [*codes[:i], alt, *codes[i + 1:]]
            neighbour = stats_from_rows(spec, eps, changed)
            loss = worst_ratio(spec, stats, neighbour, weights, result.granularity, result.scale)
            assert loss <= Fraction(e)  # exact: ratio <= exp(ε_i)
            if e == 0:
                assert loss == 0
            worst = max(worst, loss / Fraction(e)) if e else worst
    if result.scale:  # some row attains (almost) its ε: the bound is tight
        assert worst >= 1 - Fraction(1, 10**5)


@pytest.mark.statistical
def test_empirical_audit_lower_bound_stays_below_eps() -> None:
    """Two rows: a private one (ε = 1) in bin a, a public one in bin b; the neighbour moves
    the private row to bin b. The event {y_a >= a_a, y_b <= a_b} has probability ratio
    exactly e^ε between the datasets. A Clopper-Pearson lower bound on ε (confidence
    α = 1e-6) must stay <= 1 (a correct mechanism fails w.p. <= 1e-6), and it is informative:
    above a floor derived from the exact event probabilities (missed w.p. <= 1e-6)."""
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"], other=None)
    base = stats_from_rows(spec, [1.0, INF], [0, 1])
    moved = stats_from_rows(spec, [1.0, INF], [1, 1])
    weights = histogram_weights(spec, base.levels, base.counts)
    thresholds = bin_statistics(weights, released_counts(spec, base), 2)
    trials = 3000

    def hits(stats: object, tag: str) -> int:
        count = 0
        for t in range(trials):
            r = finalize_histogram(spec, stats, audit_key(f"hist-audit-{tag}{t}"), (),  # type: ignore[arg-type]
                                   weights)
            count += int(r.noisy[0] >= thresholds[0] and r.noisy[1] <= thresholds[1])
        return count

    k_base, k_moved = hits(base, "p"), hits(moved, "q")
    # one direction, fixed in advance: CP bounds at α/2 = 5e-7 a side (audit_stats); the floor
    # is derived from the event probabilities 1/4 and e^-1/4 (each bin
    # centred on its threshold; grid atoms only raise p1 and lower p2), moved 1e-3 against it
    eps_lower = eps_lower_bound(k_base, k_moved, trials, ALPHA)
    assert_private(eps_lower, 1.0)
    floor = power_floor(trials, 0.25 - 1e-3, math.exp(-1) / 4 + 1e-3, directions=1)
    assert eps_lower > floor > 0.2  # informative


def test_release_refuses_a_grid_that_breaks_the_bound() -> None:
    """The integer self-check that finalize runs before releasing anything."""
    from hdp_spark.core.histogram.finalize import check_level_losses
    from hdp_spark.errors import InternalError

    w = Fraction(1, 3)
    scale = 2 * w * (1 + GRID_SLACK)
    check_level_losses([1.0], [1], 3, grid_for(w), scale)
    with pytest.raises(InternalError, match=r"privacy loss bound exceeds its ε"):
        check_level_losses([1.0], [1], 3, grid_for(2 * w), scale)
