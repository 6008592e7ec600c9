"""SQL text built by the Spark backend: exact double literals, quoted identifiers, and the
encoder built from text against the numpy reference."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import hdp_spark.pandas as hpd
import hdp_spark.spark as hs
from hdp_spark.core.encoding import encode_numpy
from hdp_spark.core.levels import EpsGrid
from hdp_spark.errors import InternalError
from hdp_spark.spark.expressions import encode_expr
from hdp_spark.spark.sql_text import double_array_lit, double_lit, ident


def _bits(x: float) -> int:
    return int(struct.unpack(">q", struct.pack(">d", x))[0])


def _doubles() -> list[float]:
    rnd = random.Random(20261126)
    out = [0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, 0.1, 1 / 3, 2.0**31, 1e-100, 1e100, 123456789.0]
    out += [struct.unpack(">d", struct.pack(">Q", rnd.getrandbits(64)))[0] for _ in range(300)]
    out += [rnd.uniform(-1e6, 1e6) for _ in range(100)]
    return [x for x in out if math.isfinite(x)]


def test_double_literals_are_exact(spark: Any) -> None:
    values = _doubles()
    row = spark.range(1).select(
        *[F.expr(double_lit(x)).alias(f"c{i}") for i, x in enumerate(values)]
    ).collect()[0]
    assert [_bits(v) for v in row] == [_bits(x) for x in values]


def test_double_array_literal_is_exact_and_folded(spark: Any) -> None:
    values = _doubles()
    df = spark.range(3).select(F.expr(double_array_lit(values)).alias("a"))
    rows = df.collect()
    for row in rows:
        assert [_bits(v) for v in row.a] == [_bits(x) for x in values]
    # folded into one constant by the optimizer: nothing is split or cast per row
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    assert "split(" not in plan.lower()
    # the finest grid the library accepts in the tests (~2,800 points), bit for bit
    pts = EpsGrid(ratio=1.01).points()
    got = spark.range(1).select(F.expr(double_array_lit(pts)).alias("a")).collect()[0].a
    assert [_bits(v) for v in got] == [_bits(x) for x in pts]
    empty = spark.range(1).select(F.expr(double_array_lit([])).alias("a")).collect()[0].a
    assert empty == []


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_double_array_literal_rejects_non_finite(bad: float) -> None:
    with pytest.raises(InternalError, match="finite"):
        double_array_lit([1.0, bad])


def test_special_double_literals(spark: Any) -> None:
    row = spark.range(1).select(
        F.expr(double_lit(math.inf)), F.expr(double_lit(-math.inf)), F.expr(double_lit(math.nan))
    ).collect()[0]
    assert row[0] == math.inf
    assert row[1] == -math.inf
    assert math.isnan(row[2])


def test_ident_quotes_top_level_names(spark: Any) -> None:
    df = spark.createDataFrame([(1.0, 2.0, 3.0)], ["a.b", "we`ird", "sp ace"])
    row = df.select(*[F.expr(ident(c)) for c in df.columns]).collect()[0]
    assert tuple(row) == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(("lower", "upper", "fill"), [(0.0, 100.0, 50.0), (-10.5, 0.3, -1.0),
                                                     (-1e6, 1e-3, 0.0)])
def test_encoder_from_text_matches_numpy(spark: Any, lower: float, upper: float,
                                         fill: float) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(lower - 5, upper + 5, 500), [np.nan, lower, upper, -0.0]])
    pdf = pd.DataFrame({"x": x})
    sdf = spark.createDataFrame(pdf.astype(object).where(pdf.notna(), None)).repartition(3)
    got = [r[0] for r in sdf.select(encode_expr("x", lower, upper, fill)).collect()]
    want = encode_numpy(x, lower, upper, fill).tolist()
    assert sorted(got) == sorted(want)


def test_odd_column_names_release_on_both_engines(spark: Any) -> None:
    """A value, ε and group column with a dot, a backtick and a space: Spark reads the
    top-level columns (no nested-field lookup) and agrees with pandas."""
    pdf = pd.DataFrame({"sal.ary": [10.0, 20.0, 30.0, 40.0], "e`ps": [1.0, 1.0, 2.0, 2.0],
                        "dept name": ["a", "a", "b", "b"]})
    spec = hs.hdp_mean("sal.ary", eps="e`ps", lower=0.0, upper=50.0, alias="m")
    got = hs.release(spark.createDataFrame(pdf), spec, by="dept name", keys=["a", "b"])
    want = hpd.release(pdf, hpd.hdp_mean("sal.ary", eps="e`ps", lower=0.0, upper=50.0,
                                         alias="m"), by="dept name", keys=["a", "b"])
    for key in (("a",), ("b",)):
        assert got.results["m"][key].n == want.results["m"][key].n == 2
        assert got.results["m"][key].noise_scale == want.results["m"][key].noise_scale


@pytest.mark.parametrize("grid", [False, True])
def test_odd_column_names_histogram_and_grid(spark: Any, grid: bool) -> None:
    """The histogram, and the ε-grid level path of both aggregators, read odd top-level
    names too, with the same pre-noise tables as pandas."""
    pdf = pd.DataFrame({"c.at": ["x", "y", "x", "z"], "e`ps": [1.0, 1.5, 2.0, 2.0],
                        "dept name": ["a", "a", "b", "b"]})
    sdf = spark.createDataFrame(pdf)
    eps_grid = hs.EpsGrid(lowest=0.5, ratio=2.0) if grid else None
    kw: dict[str, Any] = dict(eps="e`ps", categories=["x", "y"], eps_grid=eps_grid)
    by: dict[str, Any] = dict(by="dept name", keys=["a", "b"])
    got = hs.histogram_release(sdf, hs.hdp_histogram("c.at", **kw), unsafe_seed=1, **by)
    want = hpd.histogram_release(pdf, hpd.hdp_histogram("c.at", **kw), unsafe_seed=1, **by)
    assert got.rows() == want.rows()
    assert [got.results[k].n for k in (("a",), ("b",))] == [2, 2]
    mean_kw: dict[str, Any] = dict(eps="e`ps", lower=0.0, upper=3.0, eps_grid=eps_grid)
    res = hs.release(sdf, hs.hdp_mean("e`ps", **mean_kw), unsafe_seed=1, **by)
    ref = hpd.release(pdf, hpd.hdp_mean("e`ps", **mean_kw), unsafe_seed=1, **by)
    assert res.rows() == ref.rows()
