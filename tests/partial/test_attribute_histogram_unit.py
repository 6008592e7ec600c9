"""``attribute_histograms(..., privacy_unit=, max_rows=R)``: persons with at most R rows
count with all their rows, the noise scale is 2R/ε₀, and a person's loss over any change of
their rows is at most ε₀ per attribute (exact), on both engines."""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.api import attribute_histogram_spec
from hdp_spark.core.partial.budget import SCALE_GRID
from hdp_spark.core.partial.histograms import finalize_histograms
from hdp_spark.errors import ParameterError
from hdp_spark.pandas._heavy_hitters import attribute_counts

COLS = ["color", "size"]
DOMAINS = {"color": ["red", "green", "blue"], "size": [1, 2, 3, 4]}


def _frame(seed: int = 0, persons: int = 300) -> pd.DataFrame:
    """Persons with 1 to 6 rows each, attributes drawn per row."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 7, persons)
    ids = np.repeat(np.arange(persons), rows)
    n = ids.size
    return pd.DataFrame({"id": ids, "color": rng.choice(DOMAINS["color"], n),
                         "size": rng.choice(DOMAINS["size"], n)})


def _spec(max_rows: int, eps0: float = 1.0):
    return attribute_histogram_spec(COLS, domains=DOMAINS, eps0=eps0, privacy_unit="id",
                                    max_rows=max_rows)


def _counts(df: pd.DataFrame, max_rows: int) -> list[np.ndarray]:
    spec = _spec(max_rows)
    tables = attribute_counts(df, spec)
    return [np.array([t.get(c, 0) for c in range(d.size)])
            for t, d in zip(tables, spec.domains, strict=True)]


@pytest.mark.parametrize("max_rows", [1, 3, 7])
@pytest.mark.parametrize("eps0", [0.5, 1.3])
def test_scale_is_2r_over_eps0_rounded_up(max_rows: int, eps0: float) -> None:
    result = finalize_histograms(_spec(max_rows, eps0), [{}, {}], ReleaseKey.resolve(1))
    report = result.report
    scale = Fraction(report.noise_scale)
    exact = Fraction(2 * max_rows) / Fraction(eps0)
    assert exact <= scale < exact + Fraction(1, SCALE_GRID)
    assert report.max_rows == max_rows
    assert report.eps_attribute == pytest.approx(2 * max_rows / float(scale))
    assert report.eps_attribute <= eps0
    assert report.eps_person == pytest.approx(2 * report.eps_attribute)


def test_one_row_is_the_row_model() -> None:
    plain = attribute_histogram_spec(COLS, domains=DOMAINS, eps0=0.7)
    unit = attribute_histogram_spec(COLS, domains=DOMAINS, eps0=0.7, privacy_unit="id")
    key = ReleaseKey.resolve(5)
    a = finalize_histograms(plain, [{0: 4}, {1: 2}], key)
    b = finalize_histograms(unit, [{0: 4}, {1: 2}], key)
    assert a.rows == b.rows
    assert a.report.noise_scale == b.report.noise_scale


def _loss(f: list[np.ndarray], g: list[np.ndarray], scale: float) -> list[float]:
    """Exact privacy loss per attribute histogram: discrete Laplace on every cell,
    P(k) ∝ t^|k|, so the largest log ratio over outputs is Σ_c |f_c - g_c| / scale."""
    return [float(np.abs(a - b).sum()) / scale for a, b in zip(f, g, strict=True)]


@pytest.mark.parametrize("max_rows", [1, 3])
def test_a_persons_loss_is_at_most_eps0_over_any_change(max_rows: int) -> None:
    df = _frame()
    scale = finalize_histograms(_spec(max_rows), [{}, {}], ReleaseKey.resolve(1)
                                ).report.noise_scale
    sizes = df.groupby("id").size()
    counted = int(sizes[sizes == max_rows].index[0])  # a counted person with R rows
    heavy = int(sizes[sizes > max_rows].index[0])  # a person counted nowhere
    base = _counts(df, max_rows)
    # one attribute of the counted person, in every row: all red against all blue
    red, blue = df.copy(), df.copy()
    red.loc[red["id"] == counted, "color"] = "red"
    blue.loc[blue["id"] == counted, "color"] = "blue"
    loss = _loss(_counts(red, max_rows), _counts(blue, max_rows), scale)
    assert loss[1] == 0  # the other attribute's histogram does not move
    assert loss[0] == pytest.approx(2 * max_rows / scale)  # the bound, attained
    assert loss[0] <= 1.0 + 1e-12
    # all of their rows replaced, one more row (they stop counting), or removed
    extra = pd.concat([df, df[df["id"] == counted].iloc[:1]], ignore_index=True)
    gone = df[df["id"] != counted]
    for table in (extra, gone):
        assert max(_loss(base, _counts(table, max_rows), scale)) <= 1.0 + 1e-12
    # a person counted nowhere changes nothing
    heavy_moved = df.copy()
    heavy_moved.loc[heavy_moved["id"] == heavy, ["color", "size"]] = ["green", 4]
    assert _loss(base, _counts(heavy_moved, max_rows), scale) == [0.0, 0.0]


def test_noise_has_the_discrete_laplace_variance() -> None:
    """noisy - exact over many cells: the variance 2t/(1-t)² of the discrete Laplace of
    the report's scale (t = e^{-1/scale})."""
    domains = {"a": list(range(400)), "b": list(range(400))}
    spec = attribute_histogram_spec(["a", "b"], domains=domains, eps0=1.0, privacy_unit="id",
                                    max_rows=4)
    diffs = []
    for seed in range(4):
        result = finalize_histograms(spec, [{}, {}], ReleaseKey.resolve(seed))
        diffs += [r["noisy_count"] for r in result.rows]
    scale = result.report.noise_scale
    t = math.exp(-1.0 / scale)
    expected = 2 * t / (1 - t) ** 2
    x = np.array(diffs, dtype=float)
    assert abs(x.mean()) < 4 * math.sqrt(expected / x.size)
    assert x.var() == pytest.approx(expected, rel=0.1)


def test_engines_keep_the_same_persons(engine) -> None:
    df = _frame(seed=3)
    mod = importlib.import_module(f"hdp_spark.{engine.name}")
    kw = {"domains": DOMAINS, "eps0": 1.0, "privacy_unit": "id", "max_rows": 3,
          "unsafe_seed": 9}
    out = mod.attribute_histograms(engine.frame(df), COLS, **kw)
    table = out.table if engine.name == "pandas" else out.table.toPandas()
    sizes = df.groupby("id")["id"].transform("size")
    ref = __import__("hdp_spark.pandas", fromlist=["x"]).attribute_histograms(
        df[sizes <= 3], COLS, **kw).table
    pd.testing.assert_frame_equal(table.reset_index(drop=True), ref.reset_index(drop=True),
                                  check_dtype=False)
    assert out.report.max_rows == 3


@pytest.mark.parametrize(("kw", "match"), [
    ({"max_rows": 2}, "`max_rows` bounds the rows of a person: it needs `privacy_unit`"),
    ({"privacy_unit": "id", "max_rows": 0}, "`max_rows` must be a positive int, got 0"),
    ({"privacy_unit": "id", "max_rows": True}, "`max_rows` must be a positive int, got True"),
    ({"privacy_unit": "id", "max_rows": 1.5}, "`max_rows` must be a positive int, got 1.5"),
])
def test_max_rows_errors(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        attribute_histogram_spec(COLS, domains=DOMAINS, eps0=1.0, **kw)  # type: ignore[arg-type]
