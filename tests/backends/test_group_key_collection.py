"""Group keys survive the round trip through the engine: every type, both key filters.

The Spark backend matches small public key sets on the driver and falls back to a broadcast
semi-join for large key sets or tables with many cells; both must give the same tables.
Timestamp keys came back from Arrow as UTC-aware datetimes and silently released their
group as empty before the driver normalized them.
"""

from __future__ import annotations

import datetime
import importlib
from typing import Any

import pandas as pd
import pytest

from hdp_spark import hdp_histogram, hdp_mean
from hdp_spark.core.release import plan_levels

DAY1 = datetime.date(2024, 1, 1)
DAY2 = datetime.date(2024, 1, 2)
NOON1 = datetime.datetime(2024, 1, 1, 12, 30)
NOON2 = datetime.datetime(2024, 1, 2, 12, 30)


def _frame() -> pd.DataFrame:
    n = 60
    return pd.DataFrame({
        "d": [DAY1] * 40 + [DAY2] * 20,
        "t": [NOON1] * 40 + [NOON2] * 20,
        "s": ["a"] * 25 + ["b"] * 25 + ["zz"] * 10,
        "i": [1] * 30 + [2] * 30,
        "x": [1.0] * n,
        "c": ["u", "v"] * (n // 2),
        "eps": [1.0, 2.0, 1e-300, 1e-200, 1e150, 1e200] * (n // 6),
    })


@pytest.mark.parametrize(
    ("by", "keys", "expected"),
    [
        ("d", [DAY1, datetime.date(2024, 1, 9)], [40, 0]),
        ("t", [NOON1, NOON2], [40, 20]),
        (["s", "i"], [("a", 1), ("b", 2), ("zz", 1)], [25, 20, 0]),
    ],
)
def test_mean_group_sizes_for_every_key_type(
    engine: Any, by: Any, keys: list[Any], expected: list[int]
) -> None:
    spec = hdp_mean("x", eps="eps", lower=0, upper=2)
    out = engine.agg(_frame(), spec, by=by, keys=keys, unsafe_seed=3)
    assert out["x_mean_n"].tolist() == expected


def test_histogram_timestamp_keys(engine: Any) -> None:
    spec = hdp_histogram("c", eps="eps", categories=["u", "v"])
    tables = engine.module.histogram_tables(
        engine.frame(_frame()), spec, ("t",), ((NOON1,), (NOON2,))
    )
    sizes = [sum(r.count for r in tables[k].rows) for k in ((NOON1,), (NOON2,))]
    assert sizes == [40, 20]
    out = engine.module.histogram(
        engine.frame(_frame()), spec, by="t", keys=[NOON1, NOON2], counts=True, unsafe_seed=3
    )
    out = out if engine.name == "pandas" else out.toPandas()
    assert set(out["n"]) == {40, 20}


@pytest.mark.parametrize("fallback", ["many_cells", "many_keys"])
def test_spark_semi_join_fallback_gives_the_same_tables(
    spark: Any, monkeypatch: pytest.MonkeyPatch, fallback: str
) -> None:
    common = importlib.import_module("hdp_spark.spark._common")
    hs = importlib.import_module("hdp_spark.spark")
    pdf = _frame()
    sdf = spark.createDataFrame(pdf).repartition(3)
    plans = plan_levels([hdp_mean("x", eps="eps", lower=0, upper=2)])
    keys = (("a", 1), ("b", 2), ("zz", 1))  # ("a", 2) and ("zz", 2) are in the data only
    hist = hdp_histogram("c", eps="eps", categories=["u"])
    driver = hs.level_tables(sdf, plans, ("s", "i"), keys)
    driver_hist = hs.histogram_tables(sdf, hist, ("s", "i"), keys)
    if fallback == "many_cells":
        monkeypatch.setattr(common, "DRIVER_FILTER_MAX_CELLS", 2)
    else:
        monkeypatch.setattr(common, "DRIVER_FILTER_MAX_KEYS", 0)
    joined = hs.level_tables(sdf, plans, ("s", "i"), keys)
    assert joined == driver
    assert set(joined[0]) == {("a", 1), ("b", 2)}
    assert hs.histogram_tables(sdf, hist, ("s", "i"), keys) == driver_hist


def test_raw_eps_cells_merge_into_their_level(engine: Any) -> None:
    """1e-300 and 1e-200 are both floored to 0, 1e150 and 1e200 both capped: one level each."""
    plans = plan_levels([hdp_mean("x", eps="eps", lower=0, upper=2)])
    tables = engine.module.level_tables(engine.frame(_frame()), plans, (), None)
    rows = tables[0][()].rows
    assert [(r.level, r.count) for r in rows] == [(0.0, 20), (1.0, 10), (2.0, 10), (1e100, 20)]


@pytest.mark.parametrize(
    ("by", "keys"),
    [
        ("i", ["a"]),  # a string key on an integer column
        ("i", [1.5]),  # a fractional key on an integer column
        ("s", [1]),  # a number on a string column
        ("d", ["2024-01-01"]),  # a string on a date column
    ],
)
def test_impossible_key_types_are_rejected_on_both_engines(
    engine: Any, by: str, keys: list[Any]
) -> None:
    """A key that can never match its column is an error, not an empty released group."""
    from hdp_spark import ParameterError

    with pytest.raises(ParameterError, match="must have the type of its `by` column"):
        engine.agg(_frame(), hdp_mean("x", eps="eps", lower=0, upper=2), by=by, keys=keys)
    with pytest.raises(ParameterError, match="must have the type of its `by` column"):
        engine.module.histogram(
            engine.frame(_frame()), hdp_histogram("c", eps="eps", categories=["u"]),
            by=by, keys=keys,
        )
