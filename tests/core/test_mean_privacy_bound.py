"""Every ε level's privacy-loss bound, on the real release path, exactly in Fractions.

For each release :func:`finalize_mean` makes, the call to ``laplace_mechanism`` is recorded
(the scale b' and grid g it ACTUALLY used). The loss of a row at level l is bounded by
(w_l + g) / b' (mechanism docstring: the grid moves the statistic by at most one extra
step), and must be <= ε_l for every finite level, for every method, on ε histograms with
0, tiny (1e-9), huge (1e90), +inf, ties and one row. A release that draws no noise must give
no weight to any finite-ε row.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from mean_oracles import ALL_METHODS, INF, spec, stats_of

import hdp_spark.core.mean.finalize as mean_module
from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.mean.weights import Weights
from hdp_spark.core.noise import LaplaceDraw, ReleaseKey
from hdp_spark.core.noise.exact import GRID_SLACK, grid_for, laplace_mechanism


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Records every call finalize_mean makes to the Laplace mechanism."""
    calls: list[dict[str, Any]] = []

    def spy(value: Fraction, scale: Fraction, min_sensitivity: Fraction, rng: Any) -> LaplaceDraw:
        draw = laplace_mechanism(value, scale, min_sensitivity, rng)
        calls.append({"value": value, "scale": scale, "min_sens": min_sensitivity,
                      "draw": draw})
        return draw

    monkeypatch.setattr(mean_module, "laplace_mechanism", spy)
    return calls


def _histograms(rng: np.random.Generator) -> Iterator[tuple[list[float], list[int]]]:
    special = [0.0, 1e-9, 1e90, INF, 1.0]
    yield [1.0], [1]
    yield [1e-9], [1]
    yield [INF], [1]
    yield [0.0], [1]
    yield [1e90], [3]
    yield [1e-9, 1e90], [1, 1]
    yield [0.0, 1e-9, INF], [2, 1, 5]
    yield [0.5], [40]  # all equal
    for _ in range(150):
        pool = sorted(set(special + [float(x) for x in np.exp(rng.uniform(-20, 20, size=4))]))
        k = int(rng.integers(1, 7))
        v = sorted({float(x) for x in rng.choice(pool, size=k)})
        m = [int(rng.choice([1, 1, 2, 3, 50, 1000])) for _ in v]
        yield v, m


def _check_release(method: str, v: list[float], m: list[int], weights: Weights,
                   calls: list[dict[str, Any]], result: Any) -> None:
    levels = result.levels
    if not calls:  # no noise: no finite-ε row may carry weight
        assert result.noise_scale == 0.0
        for lv in levels:
            if math.isfinite(lv.eps):
                assert lv.weight == 0, (method, v, m)
        return
    (call,) = calls
    draw: LaplaceDraw = call["draw"]
    w = weights.w
    constrained = [wl for wl, x in zip(w, v, strict=True) if wl > 0 and math.isfinite(x)]
    if not constrained:  # public rows only: the mechanism must add nothing
        assert draw.scale == 0
        return
    assert call["scale"] == weights.eta
    wanted = weights.eta * (1 + GRID_SLACK)  # rounded up to whole grid steps (exact.py)
    assert wanted <= draw.scale < wanted + draw.granularity
    assert call["min_sens"] == min(constrained)
    g = draw.granularity
    assert g == grid_for(call["min_sens"])
    assert g <= call["min_sens"] * GRID_SLACK
    assert draw.value % g == 0  # the output lies on the grid
    for wl, x, lv in zip(w, v, levels, strict=True):
        if x == 0:
            assert wl == 0
        if wl > 0 and math.isfinite(x):
            loss = (wl + g) / draw.scale
            assert loss <= Fraction(x), (method, v, m, x)
            assert lv.eps_effective <= x
    assert result.noise_scale == float(draw.scale)  # unit range


@pytest.mark.parametrize("method", [*ALL_METHODS, "auto"])
def test_privacy_loss_bound_of_every_level(method: str,
                                           recorder: list[dict[str, Any]]) -> None:
    rng = np.random.default_rng(sum(map(ord, method)))
    key = ReleaseKey.from_unsafe_seed("bound")
    for v, m in _histograms(rng):
        totals = [int(rng.integers(0, c * 2**31 + 1)) for c in m]
        st = stats_of(v, m, totals)
        weights = mean_module.mean_weights(spec(method), v, m)
        recorder.clear()
        result = mean_module.finalize_mean(spec(method), st, 0, key, (), "x")
        if result.fallback:
            assert not recorder
            assert result.estimate == 0.5
            assert all(lv.weight == 0 for lv in result.levels)
            continue
        _check_release(method, v, m, weights, recorder, result)


@pytest.mark.parametrize("method", [*ALL_METHODS, "auto"])
def test_privacy_loss_bound_after_grid_rounding(method: str,
                                                recorder: list[dict[str, Any]]) -> None:
    """O28 on the release path: the bound holds against each row's ORIGINAL ε."""
    rng = np.random.default_rng(28)
    grid = EpsGrid(ratio=1.5, lowest=1e-3, highest=1e3)
    key = ReleaseKey.from_unsafe_seed("grid")
    for _ in range(40):
        raw = np.concatenate([np.exp(rng.uniform(np.log(1e-3), np.log(1e5), size=30)),
                              [0.0, np.inf]])
        levels = levels_numpy(raw, grid)
        v = sorted({float(x) for x in levels})
        m = [int(np.sum(levels == x)) for x in v]
        st = stats_of(v, m, [c * 2**30 for c in m])
        recorder.clear()
        result = mean_module.finalize_mean(spec(method), st, 0, key, (), "x")
        if not recorder or recorder[0]["draw"].scale == 0:
            continue
        draw = recorder[0]["draw"]
        weight = {lv.eps: Fraction(lv.weight) for lv in result.levels}
        # LevelPrivacy.weight is a float: use the exact weights for the bound
        exact = dict(zip(v, mean_module.mean_weights(spec(method), v, m).w, strict=True))
        for lvl, orig in zip(levels, raw, strict=True):
            if math.isfinite(orig) and exact[float(lvl)] > 0:
                assert (exact[float(lvl)] + draw.granularity) / draw.scale <= Fraction(orig)
                assert float(weight[float(lvl)]) == pytest.approx(float(exact[float(lvl)]))


def test_grid_rounding_never_moves_a_statistic_more_than_one_step() -> None:
    """The fact the (w + g)/b' bound rests on: |round(a/g) - round(a'/g)| <= |a - a'|/g + 1."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        g = Fraction(1, 2 ** int(rng.integers(0, 60)))
        a = Fraction(int(rng.integers(-(10**12), 10**12)), int(rng.integers(1, 10**9)))
        d = Fraction(int(rng.integers(0, 10**6)), int(rng.integers(1, 10**6)))
        assert abs(round(a / g) - round((a + d) / g)) <= d / g + 1
