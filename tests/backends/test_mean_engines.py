"""pandas and Spark produce the SAME pre-noise statistics (level tables), bit for bit, and
the same released output with the same ``unsafe_seed`` (seed-001 oracle 15, seed-000 O27).

The Spark input is built with true nulls and repartitioned, so row order and partitioning
differ from pandas. The data exercise null/NaN values, ±inf values, out-of-range values,
ε = +inf and ε = 0, ε exactly on grid points and one ulp either side, ε above the cap,
huge and tiny ε, rows outside the key set and a null group key.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from mean_backend_helpers import assert_same_frames, pandas_frame, spark_frame

import hdp_spark.pandas as hpd
from hdp_spark import EpsGrid, hdp_mean
from hdp_spark.core.levels import EPS_CAP, EPS_FLOOR, levels_numpy
from hdp_spark.core.release import plan_levels

INF = math.inf
NAN = math.nan
GRID = EpsGrid(ratio=1.25, lowest=1e-3, highest=100.0)
WIDE = EpsGrid(ratio=1e10, lowest=1e-100, highest=1e300)  # points above the ε cap
HIGH = EpsGrid(ratio=2.0, lowest=1e150, highest=1e160)  # lowest above the cap: none reached


def _rows() -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(2024)
    pts = GRID.points()
    special_eps = [
        INF, 0.0, pts[0], pts[5], pts[-1], math.nextafter(pts[7], 0.0),
        math.nextafter(pts[7], INF), 1e300, 1.7976931348623157e308, 2 * EPS_CAP, 150.0,
        10.0, 1e-3, 0.5, 0.5, 0.5, 1e-300, 5e-324,
    ]
    special_x = [None, NAN, INF, -INF, -5.0, 12.0, 0.0, 10.0, 3.3, 7.25, 1e308, -1e308]
    rows: list[tuple[Any, ...]] = []
    for i in range(400):
        g = ["a", "b", "c", "z", None][i % 5]
        eps = special_eps[i % len(special_eps)] if i % 3 else float(
            np.exp(rng.uniform(np.log(1e-3), np.log(1e4))))
        eps2 = [1.0, 2.0, INF, 0.0, 2.0 ** int(rng.integers(-20, 20))][i % 5]
        x = special_x[i % len(special_x)] if i % 4 == 0 else float(rng.uniform(-2, 12))
        y = special_x[(i + 3) % len(special_x)] if i % 7 == 0 else float(rng.normal(100, 50))
        rows.append((g, x, y, eps, eps2))
    return rows


def _specs() -> list[Any]:
    return [
        hdp_mean("x", eps="eps", lower=0, upper=10, alias="x_exact"),
        hdp_mean("y", eps="eps", lower=-50.5, upper=300, fill=0.0, method="hpm-a",
                 alias="y_exact"),
        hdp_mean("x", eps="eps", lower=0, upper=10, eps_grid=GRID, method="hpm-wp",
                 alias="x_grid"),
        hdp_mean("y", eps="eps", lower=0, upper=1000, eps_grid=WIDE, alias="y_wide"),
        hdp_mean("x", eps="eps2", lower=-1, upper=1, method="drop", alias="x_eps2"),
        hdp_mean("x", eps="eps", lower=0, upper=10, eps_grid=GRID, method="ldp-wp",
                 alias="x_ldp"),
    ]


@pytest.mark.slow
def test_level_tables_are_identical(spark: Any) -> None:
    rows = _rows()
    plans = plan_levels(_specs())
    assert len(plans) == 4  # (eps, none), (eps, GRID), (eps, WIDE), (eps2, none)
    pdf = pandas_frame(rows)
    sdf = spark_frame(spark, rows)
    # global release (no keys): one plan suffices; grouped release: every plan
    for by, keys, used in (((), None, plans[:1]),
                           (("g",), (("a",), ("b",), ("c",), ("q",)), plans)):
        expected = hpd.level_tables(pdf, used, by, keys)
        got = spark_level_tables(sdf, used, by, keys)
        assert got == expected
        if by:
            assert set(expected[0]) == {("a",), ("b",), ("c",)}  # "q" is empty, "z" excluded
    # the grids really were exercised: several grid levels, none above the raw ε
    grid_levels = {r.level for g in expected[1].values() for r in g.rows}
    assert len(grid_levels) > 10
    assert grid_levels <= set(GRID.points()) | {0.0, INF}


def spark_level_tables(df: Any, plans: Any, by: Any, keys: Any) -> Any:
    import hdp_spark.spark as hsp

    return hsp.level_tables(df, plans, by, keys)


def test_spark_grid_levels_equal_the_reference_on_extreme_eps(spark: Any) -> None:
    """Each ε snapped by the Spark expression equals numpy's round-down, for both grids,
    including ε far above 1/lowest (the log must not overflow) and every grid point ±1 ulp."""
    from pyspark.sql import types as T

    from hdp_spark.spark.expressions import level_expr, with_level

    for grid in (GRID, WIDE, HIGH):
        pts = grid.points()
        eps = [p for k in range(0, len(pts), max(1, len(pts) // 60))
               for p in (pts[k], math.nextafter(pts[k], 0.0), math.nextafter(pts[k], INF))]
        eps += [pts[-1], 1.0, 10.0, 3e7, 1e300, 1.7e308, INF, 0.0, -0.0, -1.0, NAN, None, -INF,
                EPS_CAP, math.nextafter(EPS_CAP, INF), EPS_FLOOR, math.nextafter(EPS_FLOOR, 0.0),
                1e-300, 5e-324]
        # drop ε in [EPS_FLOOR, lowest): those are rejected (tested elsewhere)
        eps = [e for e in eps if e is None or not EPS_FLOOR <= e < pts[0]]
        df = spark.createDataFrame([(e,) for e in eps],
                                   T.StructType([T.StructField("e", T.DoubleType())]))
        got = [r[0] for r in df.select(level_expr("e", grid).alias("l")).collect()]
        ref = levels_numpy(np.array([NAN if e is None else e for e in eps]), grid)
        assert got == [float(x) for x in ref]
        # the two-projection form used by the releases, on every grid point ±1 ulp
        every = [p for q in pts for p in (q, math.nextafter(q, 0.0), math.nextafter(q, INF))]
        every += [*eps, math.nextafter(pts[0], 0.0) / 2, (EPS_FLOOR + pts[0]) / 2]
        df = spark.createDataFrame([(e,) for e in every],
                                   T.StructType([T.StructField("e", T.DoubleType())]))
        staged = [r[0] for r in with_level(df, "e", grid, "l").select("l").collect()]
        ref = levels_numpy(np.array([NAN if e is None else e for e in every]), grid)
        assert staged == [float(x) for x in ref]


@pytest.mark.parametrize("join_above", [0, 10**9])
def test_spark_grid_levels_joined_or_constant_equal_the_reference(
    spark: Any, monkeypatch: pytest.MonkeyPatch, join_above: int
) -> None:
    """Both ways of reading the grid points (a broadcast table joined on the estimate, and
    one folded array constant) give numpy's levels on every grid point ±1 ulp and on the
    special values."""
    from pyspark.sql import types as T

    import hdp_spark.spark.expressions as ex

    monkeypatch.setattr(ex, "GRID_JOIN_MIN_POINTS", join_above)
    for grid in (GRID, WIDE, HIGH):
        pts = grid.points()
        every = [p for q in pts for p in (q, math.nextafter(q, 0.0), math.nextafter(q, INF))]
        every += [1.0, 10.0, 3e7, 1e300, 1.7e308, INF, 0.0, -0.0, -1.0, NAN, None, -INF,
                  EPS_CAP, math.nextafter(EPS_CAP, INF), EPS_FLOOR,
                  math.nextafter(EPS_FLOOR, 0.0), 1e-300, 5e-324, pts[0] / 2]
        df = spark.createDataFrame([(e, i) for i, e in enumerate(every)],
                                   T.StructType([T.StructField("e", T.DoubleType()),
                                                 T.StructField("i", T.LongType())]))
        staged = ex.with_level(df, "e", grid, "l")
        assert staged.columns == ["e", "i", "l"]
        got = [r.l for r in staged.orderBy("i").collect()]
        ref = levels_numpy(np.array([NAN if e is None else e for e in every]), grid)
        assert got == [float(x) for x in ref]
        plan = staged._jdf.queryExecution().executedPlan().toString()
        assert ("BroadcastHashJoin" in plan) == (join_above == 0)


def test_spark_fine_grid_is_joined_and_exact(spark: Any) -> None:
    """A grid above GRID_JOIN_MIN_POINTS (27,632 points) goes through the join."""
    from pyspark.sql import types as T

    from hdp_spark.spark.expressions import GRID_JOIN_MIN_POINTS, with_level

    fine = EpsGrid(ratio=1.0005, lowest=1e-3, highest=1e3)
    pts = fine.points()
    assert len(pts) > GRID_JOIN_MIN_POINTS
    rnd = np.random.default_rng(3)
    picks = rnd.choice(len(pts), 300, replace=False)
    every = [p for j in picks for p in (pts[j], math.nextafter(pts[j], 0.0),
                                        math.nextafter(pts[j], INF))]
    every += [pts[0], pts[-1], 2e3, INF, NAN, -1.0, 0.0]
    every += list(np.exp(rnd.uniform(-6.9, 6.9, 500)))
    df = spark.createDataFrame([(float(e),) for e in every],
                               T.StructType([T.StructField("e", T.DoubleType())]))
    staged = with_level(df, "e", fine, "l")
    assert "BroadcastHashJoin" in staged._jdf.queryExecution().executedPlan().toString()
    got = [r.l for r in staged.collect()]
    assert got == [float(x) for x in levels_numpy(np.array(every), fine)]


@pytest.mark.slow
def test_final_outputs_are_identical_with_the_same_seed(spark: Any) -> None:
    import hdp_spark.spark as hsp

    rows = _rows()
    kwargs: dict[str, Any] = {"unsafe_seed": 11, "by": "g", "keys": ["a", "b", "c", "q"]}
    expected = hpd.agg(pandas_frame(rows), *_specs(), **kwargs)
    got = hsp.agg(spark_frame(spark, rows), *_specs(), **kwargs).toPandas()
    assert_same_frames(got, expected)
    assert not expected.filter(like="_fallback").to_numpy().all()


def test_numeric_keys_match_across_engines(spark: Any) -> None:
    """keys=[1, 2] on a double group column (and 1.0 on an integer one) select the same
    groups on both engines; a key of an impossible type is a ParameterError on Spark."""
    import pandas as pd

    import hdp_spark.spark as hsp
    from hdp_spark import ParameterError

    pdf = pd.DataFrame({"gd": [1.0, 2.0, 2.0], "gi": [1, 2, 2], "x": [0.5, 0.25, 0.75],
                        "eps": [INF, INF, INF]})
    sdf = spark.createDataFrame(pdf).repartition(2)
    spec = hdp_mean("x", eps="eps", lower=0, upper=1)
    for by, keys in (("gd", [1, 2, 3]), ("gi", [1.0, 2.0, 3.0])):
        expected = hpd.agg(pdf, spec, by=by, keys=keys, unsafe_seed=1)
        got = hsp.agg(sdf, spec, by=by, keys=keys, unsafe_seed=1).toPandas()
        assert got["x_mean_n"].tolist() == expected["x_mean_n"].tolist() == [1, 2, 0]
        assert got["x_mean"].tolist() == expected["x_mean"].tolist() == [0.5, 0.5, 0.5]
    with pytest.raises(ParameterError, match="must have the type of its `by` column"):
        hsp.agg(sdf, spec, by="gd", keys=["a"])


def test_negative_zero_eps_releases_the_same_numbers(spark: Any) -> None:
    """ε = -0.0 is ε = 0 on both engines, with the same level bits (+0.0): the level enters
    the noise context, so a -0.0 level on pandas gave other noise than Spark's normalized
    0.0 (found by the malformed-table property test)."""
    import pandas as pd

    import hdp_spark.spark as hsp

    pdf = pd.DataFrame({"eps": [0.5, -0.0, 42.4242], "x": [10.0, 10.0, 10.0],
                        "g": ["a", "a", "b"]})
    sdf = spark.createDataFrame(pdf).repartition(2)
    spec = hdp_mean("x", eps="eps", lower=0, upper=100)
    for kw in ({}, {"by": "g", "keys": ["a", "b"]}):
        expected = hpd.agg(pdf, spec, unsafe_seed=3, **kw)
        got = hsp.agg(sdf, spec, unsafe_seed=3, **kw).toPandas()
        assert got["x_mean"].tolist() == expected["x_mean"].tolist()
        levels = [lv["eps"] for lv in expected["x_mean_eps_levels"][0]]
        assert 0.0 in levels
        assert all(math.copysign(1.0, e) > 0 for e in levels)
