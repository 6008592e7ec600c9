"""The reweighting bound (issue 48): ``bias_bound`` = Δ·||w - 1/n||₁/2 bounds
|Σ w_i y_i - ȳ| on every data set in range, is attained, and is what the mean and the
histogram publish (scalar and batch finalize, fallbacks, public rows, ε = 0 rows)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hdp_spark.aggregators import hdp_histogram, hdp_mean
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.finalize import finalize_histogram
from hdp_spark.core.mean.batch import MeanCells, finalize_mean_columns
from hdp_spark.core.mean.finalize import finalize_mean, mean_weights
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.reweighting import FALLBACK_BOUND, reweighting_bound, widened
from hdp_spark.core.stats import GroupStats, LevelRow

KEY = ReleaseKey.from_unsafe_seed("reweighting")


def _exact_bound(m: list[int], nums: list[int], den: int) -> Fraction:
    n = sum(m)
    return sum((c * abs(Fraction(p, den) - Fraction(1, n)) for p, c in
                zip(nums, m, strict=True)), Fraction(0)) / 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 1000)), min_size=1,
                max_size=8), st.randoms(use_true_random=False))
def test_the_bound_holds_on_every_data_set_and_is_attained(
        cells: list[tuple[int, int]], rnd: object) -> None:
    m = [c for c, _ in cells]
    raw = [p for _, p in cells]
    if not any(raw):
        raw[0] = 1
    den = sum(c * p for c, p in zip(m, raw, strict=True))
    n = sum(m)
    bound = reweighting_bound(m, raw, den)
    assert bound == float(_exact_bound(m, raw, den))  # one correctly rounded division
    w = [Fraction(p, den) for p in raw]
    # any data in [0, 1]: within the bound (exact arithmetic)
    for _ in range(5):
        ys = [[Fraction(rnd.randint(0, 8), 8) for _ in range(c)] for c in m]  # type: ignore[attr-defined]
        error = sum(wl * sum(y) for wl, y in zip(w, ys, strict=True)) - sum(
            sum(y) for y in ys) / n
        assert abs(error) <= _exact_bound(m, raw, den)
    # the extremal data set (y = 1 where w > 1/n, 0 elsewhere) attains it
    ys_ext = [Fraction(1) if wl > Fraction(1, n) else Fraction(0) for wl in w]
    error = sum(wl * c * y for wl, c, y in zip(w, m, ys_ext, strict=True)) - sum(
        c * y for c, y in zip(m, ys_ext, strict=True)) / n
    assert error == _exact_bound(m, raw, den)


def test_uniform_weights_and_no_weights() -> None:
    assert reweighting_bound([3, 5], [1, 1], 8) == 0.0
    assert reweighting_bound([3, 5], [0, 0], 0) == FALLBACK_BOUND
    assert reweighting_bound([], [], 0) == FALLBACK_BOUND
    # ε = 0 rows (weight 0) count in n: 2 of 6 rows left out -> ||w - 1/n||₁/2 = 1/3
    assert reweighting_bound([2, 4], [0, 1], 4) == pytest.approx(1 / 3)


def _table(v: list[float], m: list[int], unit: float = 0.25) -> GroupStats:
    return GroupStats(tuple(LevelRow(lv, c, (int(c * unit * FIXED_ONE),))
                            for lv, c in zip(v, m, strict=True)))


@pytest.mark.parametrize("method", ["adpm", "hpm-a", "hpm-cp", "uniform", "proportional",
                                    "drop", "ldp-we", "auto"])
@pytest.mark.parametrize(("v", "m"), [([0.05, 0.5, 5.0], [300, 300, 300]),
                                      ([0.0, 0.5, math.inf], [50, 400, 100]),
                                      ([1.0], [500])])
def test_mean_publishes_the_bound_and_widens_its_interval(method: str, v: list[float],
                                                          m: list[int]) -> None:
    spec = hdp_mean("x", eps="eps", lower=-10, upper=30, method=method)  # type: ignore[arg-type]
    table = _table(v, m)
    r = finalize_mean(spec, table, 0, KEY, ("g",), "x_mean")
    if r.fallback:
        assert r.bias_bound == 40 * FALLBACK_BOUND
        assert (r.ci_low, r.ci_high) == (-10.0, 30.0)
        return
    w = mean_weights(spec, v, m)
    assert r.bias_bound == 40 * reweighting_bound(m, w.numerators, w.denominator)
    # the interval reaches at least bias_bound beyond the estimate on each side (or the
    # range's end)
    assert r.ci_low <= max(r.estimate - r.bias_bound, -10.0)
    assert r.ci_high >= min(r.estimate + r.bias_bound, 30.0)
    # the batch finalize publishes the same figures, bit for bit
    cells = MeanCells(np.array([0, len(v)], dtype=np.int64), np.array(v),
                      np.array(m, dtype=np.int64),
                      np.array([row.totals[0] for row in table.rows], dtype=np.int64))
    b = finalize_mean_columns(spec, cells, 0, KEY, [("g",)], "x_mean").results()[0]
    assert (b.estimate, b.ci_low, b.ci_high, b.bias_bound) == (
        r.estimate, r.ci_low, r.ci_high, r.bias_bound)


def test_uniform_weights_publish_no_bias_and_the_noise_interval() -> None:
    spec = hdp_mean("x", eps="eps", lower=0, upper=1, method="uniform")
    r = finalize_mean(spec, _table([0.5, 2.0], [400, 400]), 0, KEY, (), "x_mean")
    assert r.bias_bound == 0.0
    assert not r.fallback


def test_histogram_interval_includes_the_bound() -> None:
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"], method="hpf-a")
    stats = GroupStats((LevelRow(0.1, 300, (100, 150, 50)), LevelRow(2.0, 300, (200, 60, 40))))
    r = finalize_histogram(spec, stats, KEY, ())
    assert r.bias_bound > 0
    for (lo, hi), (nlo, nhi), x in zip(r.intervals(), r.noise_intervals(), r.noisy,
                                       strict=True):
        y = float(x)
        reach = widened(r.half_width + r.bias_bound, 0.0, 1.0)
        assert lo == max(min(y - reach, 1.0), 0.0) or lo == 0.0
        assert hi == min(max(y + reach, 0.0), 1.0) or hi == 1.0
        assert lo <= nlo <= nhi <= hi


@pytest.mark.parametrize("public", [1, 7, 400, 1999])
def test_an_attained_bound_without_noise_still_covers(public: int) -> None:
    """Every weighted row public (``proportional`` gives them all the weight): no noise,
    and the data set puts them at the upper bound / in one bin, the others at the lower
    bound / elsewhere, which attains the bound exactly: the released interval's end sits
    on the target and must not round inside it."""
    n = 2000
    v, m = [0.5, math.inf], [n - public, public]
    spec = hdp_mean("x", eps="eps", lower=-3.7, upper=11.3, method="proportional")
    table = GroupStats((LevelRow(0.5, n - public, (0,)), LevelRow(math.inf, public,
                                                                   (public * FIXED_ONE,))))
    r = finalize_mean(spec, table, 0, KEY, (), "x_mean")
    target = -3.7 + 15.0 * public / n
    assert r.noise_scale == 0.0
    assert r.ci_low <= target <= r.ci_high
    assert r.bias_bound == pytest.approx(15.0 * (1 - public / n))
    hspec = hdp_histogram("c", eps="eps", categories=["a", "b"], method="proportional")
    hstats = GroupStats((LevelRow(v[0], m[0], (m[0], 0, 0)), LevelRow(v[1], m[1], (0, m[1], 0))))
    h = finalize_histogram(hspec, hstats, KEY, ())
    for (lo, hi), f in zip(h.intervals(), [m[0] / n, m[1] / n, 0.0], strict=True):
        assert lo <= f <= hi
