"""Weight oracles of spec/seed-000.md §5 for the frequency methods (O1, O2, O6, O7, O11,
O14, O15, O24, O25, O29) and the log factor L of each variant."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from histogram_testlib import run_histogram, stats_from_rows, true_frequencies

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.core.histogram.finalize import finalize_histogram
from hdp_spark.core.histogram.spec import (
    HISTOGRAM_METHODS,
    LAPLACE_METHODS,
    HistogramSpec,
    histogram_weights,
)
from hdp_spark.core.mean.weights import r_c2, r_wc2
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.exact import GRID_SLACK
from hdp_spark.core.reweighting import widened

INF = math.inf


def spec_k(k: int, method: str = "hpf-a", beta: float = 0.05) -> HistogramSpec:
    """A spec with exactly k released bins (no other bin)."""
    return hdp_histogram(
        "c", eps="eps", categories=[f"c{j}" for j in range(k)], method=method, beta=beta,
        other=None,
    )  # type: ignore[arg-type]


def levels_of(eps: list[float]) -> tuple[list[float], list[int]]:
    vals = sorted(set(eps))
    return vals, [eps.count(x) for x in vals]


def random_level_tables(seed: int, count: int) -> list[tuple[list[float], list[int]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        g = int(rng.integers(1, 7))
        pool = list(np.exp(rng.uniform(-6, 4, size=g)))
        if rng.random() < 0.3:
            pool.append(0.0)
        if rng.random() < 0.3:
            pool.append(INF)
        v = sorted(set(float(x) for x in pool))
        m = [int(x) for x in rng.integers(1, 40, size=len(v))]
        out.append((v, m))
    return out


TABLES = random_level_tables(7, 60)


@pytest.mark.parametrize("method", HISTOGRAM_METHODS)
def test_o1_weights_on_simplex(method: str) -> None:
    spec = spec_k(5, method)
    for v, m in TABLES:
        w = histogram_weights(spec, v, m)
        if w.trivial:  # uniform with an ε = 0 row; auto when that (1/4) predicts best
            assert method in ("uniform", "auto")
            assert 0.0 in v
            continue
        assert all(x >= 0 for x in w.w)
        assert sum(x * c for x, c in zip(w.w, m, strict=True)) == 1  # exact
        for x, vl in zip(w.w, v, strict=True):
            if vl == 0:
                assert x == 0


@pytest.mark.parametrize("method", LAPLACE_METHODS)
def test_o2_o7_calibration_and_monotone_weights(method: str) -> None:
    spec = spec_k(4, method)
    for v, m in TABLES:
        w = histogram_weights(spec, v, m)
        if w.trivial:
            continue
        private = [(x, vl) for x, vl in zip(w.w, v, strict=True) if x > 0 and vl < INF]
        eta = max((x / Fraction(vl) for x, vl in private), default=Fraction(0))
        assert w.eta == eta
        stats = stats_from_rows(
            spec, [vl for vl, c in zip(v, m, strict=True) for _ in range(c)],
            [i % 5 for i in range(sum(m))],
        )
        result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(1), ())
        wanted = 2 * eta * (1 + GRID_SLACK)  # scale from the final weights, whole grid steps
        assert wanted <= result.scale <= wanted + result.granularity  # noiseless: 0 = 0 + 0
        assert result.scale < wanted + result.granularity or not wanted
        effective = [lv.eps_effective for lv in result.levels]
        for lv, x, vl in zip(result.levels, w.w, v, strict=True):
            assert lv.eps_effective <= vl * (1 + 1e-12)
            assert lv.weight == float(x)
        if private:
            top = max(range(len(v)), key=lambda i: (w.w[i] / Fraction(v[i])) if v[i] < INF
                      and w.w[i] > 0 else Fraction(-1))
            assert effective[top] == pytest.approx(v[top], rel=1e-12)  # equality at argmax
        order = [i for i in range(len(v)) if v[i] > 0]
        for a, b in itertools.pairwise(order):  # O7 monotone
            assert w.w[a] <= w.w[b]


@pytest.mark.parametrize("method", LAPLACE_METHODS)
def test_o6_homogeneous_eps_gives_uniform_weights(method: str) -> None:
    spec = spec_k(6, method)
    e, n = 0.7, 50
    w = histogram_weights(spec, [e], [n])
    assert w.w == (Fraction(1, n),)
    stats = stats_from_rows(spec, [e] * n, [i % 6 for i in range(n)])
    result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(2), ())
    wanted = 2 * Fraction(1, n) / Fraction(e) * (1 + GRID_SLACK)
    assert wanted <= result.scale < wanted + result.granularity
    assert result.noise_scale == pytest.approx(2 / (n * e), rel=1e-6)
    assert result.bias_bound == 0


@pytest.mark.parametrize("method", HISTOGRAM_METHODS)
def test_o14_all_public_output_is_exact(method: str) -> None:
    spec = spec_k(3, method)
    codes = [0, 0, 1, 2, 2, 2, 1]
    stats = stats_from_rows(spec, [INF] * len(codes), codes)
    result = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(3), ())
    assert result.noise_scale == 0
    mu = true_frequencies(spec, stats)
    assert result.frequencies() == pytest.approx([float(x) for x in mu], abs=1e-12)
    # no noise, and all rows public with one weight each: no reweighting either; the
    # interval is the exact frequency widened by the rounding margin only
    assert result.bias_bound == 0
    margin = widened(0.0, 0.0, 1.0)
    assert result.intervals() == [(max(float(x) - margin, 0.0), min(float(x) + margin, 1.0))
                                  for x in result.frequencies()]


def test_o14_mixed_public_rows_add_nothing_to_the_noise() -> None:
    v, m = [0.5, 2.0, INF], [3, 2, 4]
    for method in HISTOGRAM_METHODS:
        w = histogram_weights(spec_k(3, method), v, m)
        finite = [x / Fraction(vl) for x, vl in zip(w.w, v, strict=True) if x > 0 and vl < INF]
        assert w.eta == max(finite, default=Fraction(0))
    prop = histogram_weights(spec_k(3, "proportional"), v, m)
    assert prop.w == (0, 0, Fraction(1, 4))
    assert prop.eta == 0


def test_o15_zero_eps_rows_cannot_change_the_output(engine: Any) -> None:
    pdf = pd.DataFrame(
        {"c": ["a", "b", "b", "a", "c", "a"], "eps": [0.0, 0.0, 1.0, 2.0, 1.0, 0.5]}
    )
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "c"])
    w = histogram_weights(spec, [0.0, 0.5, 1.0, 2.0], [2, 1, 2, 1])
    assert w.w[0] == 0
    changed = pdf.assign(c=["zz", None, "b", "a", "c", "a"])
    base = run_histogram(engine, pdf, spec, unsafe_seed=11)
    other = run_histogram(engine, changed, spec, unsafe_seed=11)
    pd.testing.assert_frame_equal(base, other)  # bit-identical under the same seed
    moved = run_histogram(engine, pdf.assign(c=["a", "b", "a", "a", "c", "a"]), spec,
                          unsafe_seed=11)
    assert not moved["frequency"].equals(base["frequency"])  # a weighted row: fresh noise


def test_o24_agnostic_closed_form() -> None:
    v, m = levels_of([0.1, 0.1, 1, 1, 10])
    w = histogram_weights(spec_k(2), v, m)
    assert [float(x) for x in w.w] == pytest.approx(
        [0.03877033, 0.25753318, 0.40739299], abs=1e-8
    )
    assert float(w.eta) == pytest.approx(0.38770329, abs=1e-8)
    h = -math.expm1(-0.1) / 0.1
    total = sum(-math.expm1(-e) * c for e, c in zip(v, m, strict=True))
    assert float(w.eta) == pytest.approx(h / total)


def test_o25_golden_weights_with_l_ln40() -> None:
    spec = spec_k(2, "hpf-cp", beta=0.05)
    assert spec.log_factor == pytest.approx(math.log(40))
    v, m = levels_of([0.1, 0.1, 1, 1, 10])
    cp = histogram_weights(spec, v, m)
    assert [float(x) for x in cp.w] == pytest.approx([0.02, 0.2, 0.56], abs=1e-12)
    assert float(cp.eta) == pytest.approx(0.2, abs=1e-12)
    assert r_c2(v, m, cp, math.log(40)) == pytest.approx(1.0627133, abs=1e-7)
    wp = histogram_weights(spec_k(2, "hpf-wp"), v, m)
    assert wp.w == cp.w  # branch A wins: r_WC(w_B)² = 1.1053 > 1.0627

    v, m = levels_of([0.01, 0.5, 0.5, 2, INF, INF])
    cp = histogram_weights(spec, v, m)
    assert [float(x) for x in cp.w] == pytest.approx(
        [0.0011420, 0.0571001, 0.2284004, 0.3281287], abs=1e-7
    )
    assert float(cp.eta) == pytest.approx(0.1142002, abs=1e-7)
    assert r_c2(v, m, cp, math.log(40)) == pytest.approx(0.7693155, abs=1e-7)

    v, m = levels_of([0, 0.2, 0.3, 5])
    cp = histogram_weights(spec, v, m)
    assert [float(x) for x in cp.w] == pytest.approx(
        [0, 0.0363636, 0.0545455, 0.9090909], abs=1e-7
    )
    assert r_c2(v, m, cp, math.log(40)) == pytest.approx(2.1874490, abs=1e-7)


def test_log_factor_per_variant() -> None:
    # k = 3 categories + the appended other bin = 4 released bins.
    for method, want in [
        ("hpf-cp", math.log(4 / 0.1)),
        ("hpf-wp", math.log(4 / 0.1)),
        ("hpf-ce", math.log(4)),
        ("hpf-we", math.log(4)),
    ]:
        spec = hdp_histogram("c", eps="e", categories=["a", "b", "c"], method=method,  # type: ignore[arg-type]
                             beta=0.1)
        assert spec.k == 4
        assert spec.log_factor == pytest.approx(want)


def test_o11_w_branch_is_no_worse_than_c() -> None:
    for v, m in TABLES:
        for metric in ("p", "e"):
            c = spec_k(5, f"hpf-c{metric}")
            w = spec_k(5, f"hpf-w{metric}")
            lf = c.log_factor
            wc, ww = histogram_weights(c, v, m), histogram_weights(w, v, m)
            if wc.trivial:
                continue
            assert r_wc2(v, m, ww, lf) <= r_wc2(v, m, wc, lf) + 1e-12
            assert r_c2(v, m, wc, lf) <= r_c2(v, m, histogram_weights(spec_k(5), v, m), lf) + 1e-12


def test_o29_free_privacy_of_capped_weights() -> None:
    v, m = levels_of([0.1, 0.1, 1, 1, 10])
    w = histogram_weights(spec_k(2, "hpf-cp"), v, m)
    stats = stats_from_rows(spec_k(2), [0.1, 0.1, 1, 1, 10], [0, 1, 0, 1, 0])
    result = finalize_histogram(spec_k(2, "hpf-cp"), stats, ReleaseKey.from_unsafe_seed(4), (), w)
    tau = result.tau
    assert [lv.eps_effective for lv in result.levels] == pytest.approx(
        [min(x, tau) for x in v], rel=1e-9
    )
