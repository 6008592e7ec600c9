"""Footguns of grouped releases, on both engines (issue 15).

* ``by`` naming a column the release reads as data (or as ε) is refused;
* key sets detectably derived from the input are refused (pandas: same object or shared
  memory; Spark: same object, or a plan that contains the input's plan);
* bounds whose range or midpoint overflow are refused at spec construction;
* a (group, ε level) cell larger than the 64-bit sums can hold is refused;
* key sets keep the caller's order, sets are sorted, and keys come out as plain Python values.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.core.stats as core_stats
from hdp_spark import ParameterError, SchemaError, hdp_mean
from hdp_spark.core.encoding import FIXED_ONE, encode_numpy
from hdp_spark.core.keys import check_by_public, normalize_key, normalize_keys
from hdp_spark.core.mean.spec import check_bounds

DERIVED = "`keys` must be a public input from outside the data"


def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "g": ["a", "b", "a", "c", "b", "a"],
            "k": [1, 2, 1, 3, 2, 1],
            "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "eps": [1.0, 1.0, 0.5, 2.0, 1.0, 1.0],
            "e2": [1.0] * 6,
        }
    )


SPEC = hdp_mean("x", eps="eps", lower=0, upper=10)


# ---------------------------------------------------------------- `by` must be public


@pytest.mark.parametrize(
    ("by", "specs", "column", "role"),
    [
        ("x", [SPEC], "x", "value column"),
        ("eps", [SPEC], "eps", "ε column"),
        (["g", "e2"], [SPEC, hdp_mean("x", eps="e2", lower=0, upper=1, alias="m2")], "e2",
         "ε column"),
    ],
)
def test_by_naming_a_private_column_is_refused(
    engine: Any, by: Any, specs: list[Any], column: str, role: str
) -> None:
    keys = ["a"] if isinstance(by, str) else [("a", 1.0)]
    with pytest.raises(ParameterError) as err:
        engine.agg(table(), *specs, by=by, keys=keys, unsafe_seed=1)
    text = str(err.value)
    assert "`by` must name public grouping attributes only" in text
    assert f"`by` names `{column}`, the {role}" in text
    assert "_n" in text


def test_by_on_a_public_column_still_works(engine: Any) -> None:
    out = engine.agg(table(), SPEC, by="g", keys=["a", "b"], unsafe_seed=1)
    assert list(out["g"]) == ["a", "b"]
    assert list(out["x_mean_n"]) == [3, 2]


def test_check_by_public_unit() -> None:
    check_by_public(("g",), [SPEC])
    check_by_public((), [SPEC])
    with pytest.raises(ParameterError, match=r"`x`, the value column of `x_mean`"):
        check_by_public(("g", "x"), [SPEC])


# ---------------------------------------------------------------- keys from the data


def test_keys_that_are_the_input_are_refused(engine: Any) -> None:
    df = engine.frame(table())
    with pytest.raises(ParameterError, match=DERIVED) as err:
        engine.module.agg(df, SPEC, by="g", keys=df)
    assert "`keys` is the input table" in str(err.value)


@pytest.mark.parametrize(
    "derive",
    [
        lambda df: df["g"],
        lambda df: df["g"].values,
        lambda df: df.iloc[:3]["g"],
        lambda df: pd.Index(df["g"]),
        lambda df: df["k"],
    ],
)
def test_pandas_keys_sharing_memory_with_the_input_are_refused(derive: Any) -> None:
    import hdp_spark.pandas as hpd

    df = table()
    with pytest.raises(ParameterError, match=DERIVED) as err:
        hpd.agg(df, SPEC, by="g", keys=derive(df))
    assert "shares memory with column" in str(err.value)


def test_pandas_copied_keys_are_accepted() -> None:
    import hdp_spark.pandas as hpd

    df = table()
    out = hpd.agg(df, SPEC, by="g", keys=df["g"].copy().iloc[[0, 1]], unsafe_seed=1)
    assert list(out["g"]) == ["a", "b"]


@pytest.mark.spark
@pytest.mark.parametrize(
    "derive",
    [
        lambda df: df.select("g").distinct(),
        lambda df: df.groupBy("g").count(),
        lambda df: df.filter("x > 2").select("g").dropDuplicates(),
        lambda df: df.select("g").union(df.select("g")).distinct(),
        lambda df: df.select("g").join(df.select("g").limit(1), "g"),
    ],
)
def test_spark_keys_derived_from_the_input_are_refused(spark: Any, derive: Any) -> None:
    import hdp_spark.spark as hs

    df = spark.createDataFrame(table()).repartition(3)
    with pytest.raises(ParameterError, match=DERIVED) as err:
        hs.agg(df, SPEC, by="g", keys=derive(df))
    assert "the plan of `keys` contains the plan of the input" in str(err.value)


@pytest.mark.spark
def test_spark_keys_from_a_view_of_the_input_are_refused(spark: Any) -> None:
    import hdp_spark.spark as hs

    df = spark.createDataFrame(table())
    df.createOrReplaceTempView("footgun_input")
    try:
        keys = spark.sql("SELECT DISTINCT g FROM footgun_input")
        with pytest.raises(ParameterError, match=DERIVED):
            hs.agg(df, SPEC, by="g", keys=keys)
    finally:
        spark.catalog.dropTempView("footgun_input")


@pytest.mark.spark
def test_spark_independent_key_frames_are_accepted(spark: Any) -> None:
    import hdp_spark.spark as hs

    df = spark.createDataFrame(table()).repartition(3)
    # a public table joined into the input: the keys come from the public table only
    public = spark.createDataFrame(pd.DataFrame({"g": ["a", "b", "c"], "region": [1, 1, 2]}))
    joined = df.join(public, "g")
    for keys in (spark.createDataFrame(pd.DataFrame({"g": ["b", "a"]})), public.select("g")):
        out = hs.agg(joined, SPEC, by="g", keys=keys, unsafe_seed=1).toPandas()
        assert sorted(out["g"]) == sorted(r[0] for r in keys.collect())


# ---------------------------------------------------------------- bounds that overflow


@pytest.mark.parametrize(
    ("lower", "upper", "match"),
    [
        (1e308, 1.7e308, r"`lower \+ upper` must be a finite float"),
        (-1.7e308, -1e308, r"`lower \+ upper` must be a finite float"),
        (-1e308, 1e308, r"`upper - lower` must be a finite float"),
        (math.nan, 1.0, r"`lower` must be finite, got nan"),
        (0.0, math.inf, r"`upper` must be finite, got inf"),
        (1.0, 1.0, r"`lower` must be < `upper`"),
        ("0", 1.0, r"`lower` must be a number"),
    ],
)
def test_bounds_that_overflow_are_refused(lower: Any, upper: Any, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        check_bounds(lower, upper)
    with pytest.raises(ParameterError, match=match):
        hdp_mean("x", eps="eps", lower=lower, upper=upper)


def test_largest_accepted_bounds_encode_within_the_fixed_point_range() -> None:
    big = float(np.finfo(np.float64).max)
    for lower, upper in [(-big / 2, big / 2), (0.0, big), (-big, 0.0), (big / 4, big / 1.5)]:
        lo, hi = check_bounds(lower, upper)
        spec = hdp_mean("x", eps="eps", lower=lo, upper=hi)
        assert math.isfinite(spec.fill_value)
        x = np.array([-big, lo, spec.fill_value, hi, big, np.nan, np.inf, -np.inf])
        with np.errstate(all="raise"):
            q = encode_numpy(x, lo, hi, spec.fill_value)
        assert q.min() == 0
        assert q.max() == FIXED_ONE


def test_mean_with_huge_bounds_runs_on_both_engines(engine: Any) -> None:
    spec = hdp_mean("x", eps="eps", lower=-1e307, upper=1.5e308, method="uniform")
    out = engine.agg(table(), spec, by="g", keys=["a"], unsafe_seed=1)
    assert -1e307 <= out["x_mean"][0] <= 1.5e308  # clipped: finite
    assert out["x_mean_n"][0] == 3


# ---------------------------------------------------------------- rows per cell


def test_cell_row_limit_matches_the_int64_sums() -> None:
    limit = core_stats.MAX_CELL_ROWS
    assert limit == 2**32 - 1
    assert limit * FIXED_ONE <= 2**63 - 1 < (limit + 1) * FIXED_ONE
    core_stats.check_cell_rows(limit)
    with pytest.raises(SchemaError, match=r"at most 4294967295 rows per \(group, ε level\)"):
        core_stats.check_cell_rows(limit + 1)
    with pytest.raises(SchemaError, match=r"at most 2 rows"):
        core_stats.check_cell_rows(3, limit=2)


def test_cells_over_the_limit_are_refused(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_stats, "MAX_CELL_ROWS", 2)
    # group "b": 2 rows at ε = 1 (at the limit); group "a": 2 rows at ε = 1 and 1 at 0.5
    out = engine.agg(table(), SPEC, by="g", keys=["b"], unsafe_seed=1)
    assert list(out["x_mean_n"]) == [2]
    with pytest.raises(SchemaError, match=r"at most 2 rows per \(group, ε level\) cell"):
        engine.agg(table().assign(eps=1.0), SPEC, by="g", keys=["a"], unsafe_seed=1)


# ---------------------------------------------------------------- key order and types


def test_keys_keep_the_callers_order_and_sets_are_sorted(engine: Any) -> None:
    for keys, want in [
        (["c", "a", "b"], ["c", "a", "b"]),
        (("b", "a"), ["b", "a"]),
        (pd.Series(["b", "c"]), ["b", "c"]),
        (np.array(["c", "b"]), ["c", "b"]),
        ({"c", "a", "b", "zz"}, ["a", "b", "c", "zz"]),
        (frozenset({"b", "a"}), ["a", "b"]),
    ]:
        out = engine.agg(table(), SPEC, by="g", keys=keys, unsafe_seed=1)
        assert list(out["g"]) == want
        assert all(type(v) is str for v in out["g"])


def test_numpy_keys_come_out_as_plain_python_values(engine: Any) -> None:
    keys = np.array([[3, "c"], [1, "a"]], dtype=object)
    keys[:, 0] = [np.int64(3), np.int64(1)]
    keys[:, 1] = [np.str_("c"), np.str_("a")]
    out = engine.agg(table(), SPEC, by=["k", "g"], keys=keys, unsafe_seed=1)
    assert list(zip(out["k"], out["g"], strict=True)) == [(3, "c"), (1, "a")]
    if engine.name == "pandas":
        assert all(type(v) is int for v in out["k"])
        assert all(type(v) is str for v in out["g"])
    out1 = engine.agg(table(), SPEC, by="k", keys=np.array([2, 1]), unsafe_seed=1)
    assert list(out1["k"]) == [2, 1]
    if engine.name == "pandas":
        assert all(type(v) is int for v in out1["k"])


def test_normalize_keys_unit() -> None:
    assert normalize_keys({3, 1.5, 2}, 1) == ((1.5,), (2,), (3,))
    assert normalize_keys({("b", 2), ("a", 9), ("b", 1)}, 2) == (("a", 9), ("b", 1), ("b", 2))
    mixed = normalize_keys({"b", 2, "a", 1}, 1)  # numbers first, then strings
    assert mixed == ((1,), (2,), ("a",), ("b",))
    assert normalize_keys(np.array([[1, 2], [0, 5]]), 2) == ((1, 2), (0, 5))
    assert all(type(v) is int for k in normalize_keys(np.array([[1, 2]]), 2) for v in k)
    d1, d2 = datetime.date(2024, 1, 2), datetime.date(2023, 5, 1)
    assert normalize_keys({d1, d2}, 1) == ((d2,), (d1,))
    aware = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    naive = datetime.datetime(2024, 1, 2)
    with pytest.raises(ParameterError, match=r"`keys` given as a set must be sortable"):
        normalize_keys({aware, naive}, 1)
    assert normalize_keys([aware, naive], 1) == ((aware,), (naive,))  # a list keeps its order


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (np.str_("a"), "a"),
        (np.int64(3), 3),
        (np.float64(1.5), 1.5),
        (np.bool_(True), True),
        (np.datetime64("2024-01-02T03:04:05", "ns"), datetime.datetime(2024, 1, 2, 3, 4, 5)),
        (np.datetime64("2024-01-02", "D"), datetime.date(2024, 1, 2)),
        (pd.Timestamp("2024-01-02"), datetime.datetime(2024, 1, 2)),
        ("a", "a"),
        (7, 7),
    ],
)
def test_normalize_key_gives_plain_values(value: object, want: object) -> None:
    got = normalize_key(value)
    assert got == want
    assert type(got) is type(want)
