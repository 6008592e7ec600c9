"""Finalize step: fallback, simplex projection, counts view, replay and fresh noise."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from histogram_testlib import backend, stats_from_rows

from hdp_spark import hdp_histogram, histogram
from hdp_spark.core.histogram.finalize import finalize_histogram, project_simplex
from hdp_spark.core.noise import ReleaseKey

F = Fraction
hpd = backend("pandas")


@pytest.mark.parametrize(
    ("y", "want"),
    [
        ([F(1, 2)] * 3, [F(1, 3)] * 3),
        ([F(2), F(0)], [F(1), F(0)]),
        ([F(-1), F(-1)], [F(1, 2), F(1, 2)]),
        ([F(1, 5), F(3, 10), F(1, 2)], [F(1, 5), F(3, 10), F(1, 2)]),  # already on it
        ([F(7, 10), F(6, 10), F(-3)], [F(11, 20), F(9, 20), F(0)]),
    ],
)
def test_projection_examples(y: list[Fraction], want: list[Fraction]) -> None:
    assert project_simplex(y) == want


def test_projection_is_the_nearest_simplex_point() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(1, 7))
        y = [F(int(v), 1000) for v in rng.integers(-1500, 1500, k)]
        x = project_simplex(y)
        assert sum(x) == 1
        assert all(v >= 0 for v in x)
        # KKT: x = max(y - θ, 0) for one θ, i.e. y_j - x_j is the same on the support and
        # >= that value off it.
        support = [yj - xj for yj, xj in zip(y, x, strict=True) if xj > 0]
        theta = support[0]
        assert all(d == theta for d in support)
        assert all(yj <= theta for yj, xj in zip(y, x, strict=True) if xj == 0)
        # and no vertex or grid point of the simplex is closer
        d = sum((yj - xj) ** 2 for yj, xj in zip(y, x, strict=True))
        for p in itertools.product(range(5), repeat=k):
            if sum(p) == 4:
                assert d <= sum((yj - F(pj, 4)) ** 2 for yj, pj in zip(y, p, strict=True))


def test_fallback_when_no_row_may_carry_weight() -> None:
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"])
    stats = stats_from_rows(spec, [0.0, 0.0, 0.0], [0, 1, 2])
    r = finalize_histogram(spec, stats, ReleaseKey.from_unsafe_seed(0), ())
    assert r.fallback
    assert r.noise_scale == 0
    assert math.isnan(r.tau)
    assert r.frequencies() == [0.5, 0.5, 0.5]
    assert r.frequencies(project=True) == pytest.approx([1 / 3] * 3)
    assert r.intervals() == [(0.0, 1.0)] * 3
    assert r.bias_bound == 0.5
    assert [lv.weight for lv in r.levels] == [0.0]
    uni = hdp_histogram("c", eps="eps", categories=["a", "b"], method="uniform")
    mixed = stats_from_rows(uni, [0.0, 1.0, 2.0], [0, 1, 2])
    assert finalize_histogram(uni, mixed, ReleaseKey.from_unsafe_seed(0), ()).fallback


def frame(n: int = 300, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "c": rng.choice(["a", "b", "c", "d", "zz"], n).tolist(),
            "eps": rng.choice([0.1, 0.5, 2.0, np.inf], n),
        }
    )


def test_projection_and_counts_views() -> None:
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "c", "d"])
    pdf = frame()
    plain = hpd.histogram(pdf, spec, unsafe_seed=5, counts=True)
    proj = hpd.histogram(pdf, spec, unsafe_seed=5, project=True, counts=True)
    assert proj["frequency"].sum() == pytest.approx(1.0, abs=1e-12)
    assert (proj["frequency"] >= 0).all()
    # same noise, different post-processing: intervals and scales are identical
    for col in ("noise_scale", "ci_low", "ci_high", "bias_bound", "n"):
        assert plain[col].tolist() == proj[col].tolist()
    assert np.allclose(proj["count"], proj["frequency"] * len(pdf))
    assert proj["count"].sum() == pytest.approx(len(pdf))


@pytest.mark.statistical
def test_replay_and_fresh_noise() -> None:
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "c", "d"])
    pdf = frame()
    one = hpd.histogram(pdf, spec, unsafe_seed=7)
    pd.testing.assert_frame_equal(one, hpd.histogram(pdf.sample(frac=1.0, random_state=2),
                                                     spec, unsafe_seed=7))  # same data
    changed = pdf.copy()
    changed.loc[0, "c"] = "b" if changed.loc[0, "c"] != "b" else "a"
    changed.loc[0, "eps"] = 0.5
    other = hpd.histogram(changed, spec, unsafe_seed=7)
    assert all(a != b for a, b in zip(one["frequency"], other["frequency"], strict=True))
    fresh = [hpd.histogram(pdf, spec)["frequency"].tolist() for _ in range(2)]
    # a fresh key per release by default (fresh keys are the point: five independent exact
    # draws on grids far finer than their scales all agree by chance w.p. far below 1e-6)
    assert fresh[0] != fresh[1]
    # bins get independent noise: the noise differs across bins of one release
    r = hpd.histogram_release(pdf, spec, unsafe_seed=7).results[()]
    assert len(set(r.noisy)) == len(r.noisy)


def test_dispatcher_runs_pandas() -> None:
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"], alias="h1")
    out = histogram(frame(40), spec, unsafe_seed=1)
    assert out["category"].tolist() == ["a", "b", "other"]
    assert spec.name == "h1"
    assert hdp_histogram("c", eps="e", categories=["a"]).name == "c_histogram"


def test_alias_separates_noise() -> None:
    pdf = frame()
    a = hpd.histogram(pdf, hdp_histogram("c", eps="eps", categories=["a"], alias="x"),
                      unsafe_seed=3)
    b = hpd.histogram(pdf, hdp_histogram("c", eps="eps", categories=["a"], alias="y"),
                      unsafe_seed=3)
    assert a["frequency"].tolist() != b["frequency"].tolist()
