"""The privacy unit's bounding as the JVM extension's streaming operator (``UnitBound``, the
classic Spark path of :func:`hdp_spark.spark.privacy_unit.bound_rows`): the same rows as
the native-expression path and the pandas engine, as multisets of full rows with ε replaced
by the person's, on tables where every part of the rule decides; the release API's outputs
unchanged; the bounding key no longer a literal of the plan.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import PrivacyUnit, bounding_key
from hdp_spark.pandas.privacy_unit import bound_frame as pandas_frame
from hdp_spark.pandas.privacy_unit import bound_rows as pandas_bound

KEY = ReleaseKey(bytes(range(32)), unsafe=True)


def _text(v: Any) -> str:
    """One value as comparable text, whatever engine produced it (an integer in decimal,
    a float by repr, null as "null")."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return "null"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return f"s:{v}"


def _canonical(out: pd.DataFrame) -> pd.DataFrame:
    """The rows as a sorted multiset of texts (columns by name)."""
    cols = sorted(out.columns)
    texts = pd.DataFrame({c: [_text(v) for v in out[c].tolist()] for c in cols})
    return texts.sort_values(cols).reset_index(drop=True)


def _frame(spark: Any, df: pd.DataFrame, schema: str | None = None) -> Any:
    rows = [tuple(None if (isinstance(v, float) and np.isnan(v) and c != "eps") else v
                  for c, v in zip(df.columns, r, strict=True))
            for r in df.itertuples(index=False)]
    return spark.createDataFrame(rows, schema=schema or list(df.columns)).repartition(3)


def _three(spark: Any, df: pd.DataFrame, unit: PrivacyUnit, *, group: str | None = "g",
           codes: tuple[str, ...] = ("x", "y"), schema: str | None = None,
           key: ReleaseKey = KEY) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The kept rows on the JVM operator, the native path and pandas (canonical). The
    codes cover every column but the id and ε, so that rows tying on (rank, codes), whose
    order no path fixes, are identical rows."""
    from hdp_spark.spark.privacy_unit import _jvm_bound, bound_rows

    frame = _frame(spark, df, schema)
    kwargs: dict[str, Any] = {"eps": "eps", "group": group, "codes": list(codes), "key": key}
    jvm = _jvm_bound(frame, unit, **kwargs)
    assert jvm is not None  # the operator applies: this test reads it, not the fallback
    native = bound_rows(frame, unit, jvm=False, **kwargs)
    assert "HdpUnitBound" not in native._jdf.queryExecution().executedPlan().toString()
    local = pandas_bound(df, unit, **kwargs)
    return (_canonical(jvm.toPandas()), _canonical(native.toPandas()), _canonical(local))


def _assert_same(spark: Any, df: pd.DataFrame, unit: PrivacyUnit, **kwargs: Any) -> int:
    jvm, native, local = _three(spark, df, unit, **kwargs)
    pd.testing.assert_frame_equal(jvm, native)
    pd.testing.assert_frame_equal(jvm, local)
    return len(jvm)


def _skewed(seed: int, n: int = 2500, persons: int = 120, groups: int = 7) -> pd.DataFrame:
    """Persons with one row, with more than G groups, with more than R rows in a group,
    with identical-code rows; rows outside the keys (-1) with smaller ε than inside rows;
    NaN, negative and +∞ ε."""
    rng = np.random.default_rng(seed)
    uid = np.floor(persons * rng.random(n) ** 3).astype(np.int64)  # a few heavy persons
    g = rng.integers(0, groups, n).astype(np.int64)
    outside = rng.random(n) < 0.1
    g[outside] = -1
    eps = rng.choice([0.5, 1.0, 2.0, np.inf], n)
    eps[outside] = 0.25  # outside rows: the smallest ε of their person
    eps[rng.random(n) < 0.02] = np.nan
    eps[rng.random(n) < 0.02] = -1.0
    return pd.DataFrame({"uid": uid, "g": g, "x": rng.integers(0, 3, n).astype(np.int64),
                         "y": rng.integers(-2, 2, n).astype(np.int64), "eps": eps})


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (2, 3), (3, 10), (50, 5000)])
def test_skewed_tables_keep_the_same_rows(spark: Any, max_groups: int, max_rows: int
                                          ) -> None:
    df = _skewed(seed=max_groups * 7 + max_rows)
    unit = PrivacyUnit("uid", max_groups, max_rows)
    kept = _assert_same(spark, df, unit, codes=("x", "y"))
    assert 0 < kept <= len(df)
    if max_groups < 50:
        assert kept < (df["g"] >= 0).sum()  # the bounds drop rows: ranks decided
    else:
        assert kept == (df["g"] >= 0).sum()  # nothing to drop: every inside row kept


@pytest.mark.parametrize(("max_groups", "max_rows"), [(2, 2), (20, 3)])
def test_persons_with_many_groups(spark: Any, max_groups: int, max_rows: int) -> None:
    """Heavy persons in up to 40 groups: more groups than the operator scans in a list
    (it indexes them then), kept or dropped by their ranks."""
    df = _skewed(seed=max_groups, n=4000, persons=60, groups=40)
    assert df[df["g"] >= 0].groupby("uid")["g"].nunique().max() > max_groups + 8
    kept = _assert_same(spark, df, PrivacyUnit("uid", max_groups, max_rows))
    assert kept < (df["g"] >= 0).sum()


def test_the_person_s_eps_is_the_minimum_over_all_their_rows(spark: Any) -> None:
    df = pd.DataFrame({"uid": [1, 1, 1, 2, 2, 3, 4, 4],
                       "g": [0, 0, -1, 1, 1, 0, -1, 2],
                       "x": [0, 1, 2, 0, 1, 0, 0, 1],
                       "eps": [1.0, 2.0, 0.5, np.nan, 3.0, np.inf, -2.0, 1.0]})
    jvm, _, _ = _three(spark, df, PrivacyUnit("uid", 5, 5), codes=("x",))
    by = {u: set(e) for u, e in jvm.groupby("uid")["eps"]}
    assert by["1"] == {"0.5"}  # the smallest ε is outside the keys
    assert by["2"] == {"0.0"}  # NaN: nothing
    assert by["3"] == {"inf"}
    assert by["4"] == {"0.0"}  # a negative ε outside the keys
    _assert_same(spark, df, PrivacyUnit("uid", 5, 5), codes=("x",))


def test_null_eps_and_integer_eps_columns(spark: Any) -> None:
    df = pd.DataFrame({"uid": [1, 1, 2, 2, 2], "g": [0, 1, 0, 0, 0], "x": [0, 1, 2, 3, 4],
                       "eps": pd.Series([None, 1, 2, 3, 1], dtype=object)})
    jvm, native, _ = _three(spark, df, PrivacyUnit("uid", 1, 2), codes=("x",),
                            schema="uid long, g long, x long, eps int")
    pd.testing.assert_frame_equal(jvm, native)
    assert jvm.groupby("uid")["eps"].first().tolist() == ["0.0", "1.0"]


@pytest.mark.parametrize("ids", ["strings", "unicode"])
def test_string_ids_and_null_ids(spark: Any, ids: str) -> None:
    df = _skewed(seed=3, n=1500, persons=40)
    names = (["p", "q\x1fr", "", "é", "x" * 40] if ids == "strings"
             else ["😀", "a😀", "\uffff", "\U0001f600\U0001f601", "ü"])
    df["uid"] = [None if u % 11 == 5 else f"{names[u % 5]}{u}" for u in df["uid"]]
    assert df["uid"].isna().any()
    kept = _assert_same(spark, df, PrivacyUnit("uid", 2, 3), schema=(
        "uid string, g long, x long, y long, eps double"))
    assert kept > 0


def test_integer_id_types(spark: Any) -> None:
    df = _skewed(seed=4, n=800, persons=30)
    df["uid"] = df["uid"] - 15  # negative ids too
    _assert_same(spark, df, PrivacyUnit("uid", 2, 2),
                 schema="uid int, g int, x int, y long, eps double")


def test_a_global_release(spark: Any) -> None:
    df = _skewed(seed=5).drop(columns="g")
    kept = _assert_same(spark, df, PrivacyUnit("uid", 1, 4), group=None, codes=("x", "y"))
    assert kept == sum(min(4, n) for n in df.groupby("uid").size())


def test_no_codes(spark: Any) -> None:
    """No code column: every row of a group has the same (empty) codes text."""
    df = _skewed(seed=6, n=600, persons=20).drop(columns=["x", "y"])
    jvm, native, local = _three(spark, df, PrivacyUnit("uid", 2, 2), codes=())
    pd.testing.assert_frame_equal(jvm, native)
    pd.testing.assert_frame_equal(jvm, local)


def test_select_keys_group_texts(spark: Any) -> None:
    """String groups (select_keys' key texts), null outside; texts compared as Spark
    compares strings (code points) where ranks tie."""
    df = _skewed(seed=7, n=2000, persons=60)
    texts = ["2:DE", "2:FR", "1:é", "1:😀", "1:\uffff", "3:a:b", "0:"]
    df["g"] = [None if g < 0 else texts[g] for g in df["g"]]
    kept = _assert_same(spark, df, PrivacyUnit("uid", 2, 3), codes=("x", "y"),
                        schema="uid long, g string, x long, y long, eps double")
    assert kept < int(df["g"].notna().sum())


def test_empty_and_id_less_tables(spark: Any) -> None:
    from hdp_spark.spark.privacy_unit import _jvm_bound

    unit = PrivacyUnit("uid", 1, 1)
    kwargs: dict[str, Any] = {"eps": "eps", "group": "g", "codes": ["x"], "key": KEY}
    schema = "uid long, g long, x long, eps double"
    empty = spark.createDataFrame([], schema)
    nobody = spark.createDataFrame([(None, 0, 1, 1.0), (None, 1, 2, 0.5)], schema)
    for frame in (empty, nobody):
        out = _jvm_bound(frame, unit, **kwargs)
        assert out is not None
        assert out.collect() == []
        assert out.columns == frame.columns


def test_the_sorted_and_hashed_operators_agree(spark: Any) -> None:
    from hdp_spark.spark.privacy_unit import _jvm_bound

    df = _skewed(seed=8)
    frame = _frame(spark, df)
    unit = PrivacyUnit("uid", 2, 3)
    kwargs: dict[str, Any] = {"eps": "eps", "group": "g", "codes": ["x", "y"], "key": KEY}
    streamed = _jvm_bound(frame, unit, **kwargs)
    hashed = _jvm_bound(frame, unit, sorted_stream=False, **kwargs)
    assert streamed is not None
    assert hashed is not None
    assert "Sort [" in streamed._jdf.queryExecution().executedPlan().toString()
    assert "Sort [" not in hashed._jdf.queryExecution().executedPlan().toString()
    pd.testing.assert_frame_equal(_canonical(streamed.toPandas()),
                                  _canonical(hashed.toPandas()))


def test_the_plan_is_one_shuffle_and_holds_no_key(spark: Any) -> None:
    from hdp_spark.spark.privacy_unit import bound_rows

    frame = _frame(spark, _skewed(seed=9, n=300))
    unit = PrivacyUnit("uid", 2, 2)
    kwargs: dict[str, Any] = {"eps": "eps", "group": "g", "codes": ["x"], "key": KEY}
    out = bound_rows(frame, unit, **kwargs)
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "HdpUnitBound" in plan, plan
    assert plan.count("Exchange") == 2, plan  # the test frame's repartition(3), and ours
    assert plan.count("Exchange hashpartitioning(uid") == 1, plan
    assert plan.count("Sort [") == 1, plan
    assert "Window" not in plan, plan
    assert "Join" not in plan, plan
    text = out._jdf.queryExecution().toString()  # what explain(True) prints
    assert bounding_key(KEY) not in text
    native = bound_rows(frame, unit, jvm=False, **kwargs)
    assert bounding_key(KEY) in native._jdf.queryExecution().toString()  # the literal


def test_columns_it_does_not_read_fall_back_to_the_native_path(spark: Any) -> None:
    from hdp_spark.spark.privacy_unit import _jvm_bound, bound_rows

    df = _skewed(seed=10, n=400).assign(x=lambda d: d["x"].astype(float))
    frame = _frame(spark, df, schema="uid long, g long, x double, y long, eps double")
    unit = PrivacyUnit("uid", 2, 2)
    kwargs: dict[str, Any] = {"eps": "eps", "group": "g", "codes": ["x"], "key": KEY}
    assert _jvm_bound(frame, unit, **kwargs) is None  # a double code: not its input
    out = bound_rows(frame, unit, **kwargs)
    assert "HdpUnitBound" not in out._jdf.queryExecution().executedPlan().toString()
    pd.testing.assert_frame_equal(
        _canonical(out.toPandas()),
        _canonical(pandas_bound(df, unit, **kwargs)), check_dtype=False)


def test_bad_operator_arguments_are_refused(spark: Any) -> None:
    from pyspark.errors import IllegalArgumentException
    from pyspark.sql import functions as F

    frame = _frame(spark, _skewed(seed=11, n=50)).withColumn("xd", F.col("x").cast("double"))
    operator = spark._jvm.org.hdpspark.UnitBound
    names = spark.sparkContext._gateway.new_array(spark._jvm.java.lang.String, 1)
    names[0] = "x"
    key = bounding_key(KEY)
    with pytest.raises(IllegalArgumentException, match="bounding key must be 64 hex digits"):
        operator.bound(frame._jdf, "uid", "g", names, "eps", 1, 1, "not-a-key", True)
    with pytest.raises(IllegalArgumentException, match="bounds must be at least 1"):
        operator.bound(frame._jdf, "uid", "g", names, "eps", 0, 1, key, True)
    names[0] = "xd"
    with pytest.raises(IllegalArgumentException, match="reads no code column of type double"):
        operator.bound(frame._jdf, "uid", "g", names, "eps", 1, 1, key, True)
    names[0] = "y"
    with pytest.raises(IllegalArgumentException, match="reads no id column of type double"):
        operator.bound(frame._jdf, "eps", "g", names, "eps", 1, 1, key, True)


def _events(seed: int = 12, n: int = 4000, persons: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "user_id": np.floor(persons * rng.random(n) ** 2).astype(np.int64),
        "country": rng.choice(["DE", "FR", "IT", "ES", "XX"], n),
        "amount": rng.uniform(0, 500, n),
        "category": rng.choice(["a", "b", "c"], n),
        "eps": rng.choice([0.25, 0.5, 1.0, 2.0], n),
    })


def _specs(mod: Any) -> tuple[Any, ...]:
    return (mod.hdp_mean("amount", eps="eps", lower=0, upper=500),
            mod.hdp_histogram("category", eps="eps", categories=["a", "b", "c"]))


def _native(monkeypatch: pytest.MonkeyPatch) -> None:
    from hdp_spark.spark import privacy_unit as pu

    monkeypatch.setattr(pu, "bound_frame", functools.partial(pu.bound_frame, jvm=False))


@pytest.mark.parametrize("keys", ["public", "select"])
def test_release_outputs_are_unchanged(spark: Any, monkeypatch: pytest.MonkeyPatch,
                                       keys: str) -> None:
    import hdp_spark.spark as hs

    df = _events() if keys == "public" else _events(n=20000, persons=3000)
    kwargs: dict[str, Any] = {"by": "country", "privacy_unit": "user_id", "max_groups": 2,
                              "max_rows": 3, "unsafe_seed": 50}
    kwargs["keys"] = (["DE", "FR", "IT", "ES"] if keys == "public"
                      else hs.select_keys(delta=1e-6, c=1.0, share=0.3))
    frame = spark.createDataFrame(df).repartition(3)
    after = hs.agg(frame, *_specs(hs), **kwargs).toPandas()
    with monkeypatch.context() as m:
        _native(m)
        before = hs.agg(frame, *_specs(hs), **kwargs).toPandas()
    local = hpd.agg(df, *_specs(hpd), **kwargs)
    assert len(after) > 0
    for out in (before, local):
        assert list(out.columns) == list(after.columns)
        assert _plain(out) == _plain(after)


def _plain(out: pd.DataFrame) -> list[Any]:
    """The output's rows by group, histograms' bins as dicts (Spark Rows or pandas)."""
    def value(v: Any) -> Any:
        if hasattr(v, "asDict"):
            return v.asDict()
        if isinstance(v, (list, np.ndarray)):
            return [value(b) for b in v]
        return v.item() if isinstance(v, np.generic) else v

    rows = [[value(v) for v in r] for r in out.itertuples(index=False)]
    return sorted(rows, key=repr)


def test_release_frames_keep_the_same_rows(spark: Any) -> None:
    """bound_frame (positions by a broadcast join, codes from the specs) on both Spark
    paths and pandas, public keys and select_keys."""
    from hdp_spark.spark.privacy_unit import bound_frame

    df = _events(seed=13).assign(row=lambda d: np.arange(len(d)))
    frame = spark.createDataFrame(df).repartition(3)
    unit = PrivacyUnit("user_id", 2, 3)
    key = ReleaseKey.resolve("unit-jvm")
    for keys in ((("DE",), ("FR",), ("IT",), ("ES",)), None):
        kwargs: dict[str, Any] = {"eps": "eps", "by": ("country",), "keys": keys,
                                  "specs": _specs(hpd), "key": key}
        jvm = _canonical(bound_frame(frame, unit, **kwargs).toPandas())
        native = _canonical(bound_frame(frame, unit, jvm=False, **kwargs).toPandas())
        local = _canonical(pandas_frame(df, unit, **kwargs))
        pd.testing.assert_frame_equal(jvm, native)
        pd.testing.assert_frame_equal(jvm, local)
        assert 0 < len(jvm) < len(df)


def test_a_release_frame_shuffles_its_rows_once(spark: Any) -> None:
    """Without the map-side pre-bound (tests/privacy_unit/test_unit_prebound.py),
    bound_frame shuffles the input's rows by the id before the positions and codes are
    added; the operator reuses that partitioning (no second exchange), adding its sort."""
    from hdp_spark.spark.privacy_unit import bound_frame

    frame = spark.createDataFrame(_events(seed=14, n=300))
    spark.conf.set("hdp_spark.unitPreBound", "false")
    try:
        out = bound_frame(frame, PrivacyUnit("user_id", 1, 1), eps="eps", by=("country",),
                          keys=(("DE",), ("FR",)), specs=_specs(hpd), key=KEY)
        plan = out._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("hdp_spark.unitPreBound")
    assert "HdpUnitBound" in plan, plan
    assert plan.count("Exchange hashpartitioning(user_id") == 1, plan
    assert "REPARTITION_BY_COL" in plan, plan
    assert plan.count("Sort [user_id") == 1, plan
    assert bounding_key(KEY) not in out._jdf.queryExecution().toString()


def _first(plan: Any, suffix: str) -> Any:
    """The first node of a physical plan (depth first) whose class name ends in
    ``suffix``, or None."""
    if plan.getClass().getName().endswith(suffix):
        return plan
    children = plan.children()
    for i in range(children.size()):
        found = _first(children.apply(i), suffix)
        if found is not None:
            return found
    return None


def test_the_operator_refuses_an_input_that_is_not_sorted_by_the_id(spark: Any) -> None:
    """Fail closed: the operator reads one person at a time and relies on its input's sort
    by the id (which Spark's planner always inserts, so no query reaches this): given the
    same plan with the sort taken away, over ids in descending order in one partition, it
    fails the task rather than emit a person's rows as two persons (each within the bounds:
    together over them)."""
    from py4j.protocol import Py4JJavaError

    from hdp_spark.spark.privacy_unit import bound_rows

    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # the plain physical plan
    try:
        ids = spark.range(40, 0, -1, numPartitions=1)  # one partition, descending ids
        frame = ids.selectExpr("id % 7 AS uid", "id % 3 AS g", "id % 2 AS x",
                               "1.0 AS eps")
        out = bound_rows(frame, PrivacyUnit("uid", 2, 2), eps="eps", group="g",
                         codes=["x"], key=KEY)
        plan = out._jdf.queryExecution().executedPlan()
        node = _first(plan, "UnitBound$Exec")
        assert node is not None, plan.toString()
        sort = _first(node, "SortExec")  # one partition: no shuffle is needed
        assert sort is not None, node.toString()
        unsorted = sort.children().apply(0)  # the rows before the sort: ids 40..1 (mod 7)
        if unsorted.getClass().getName().endswith("PreExec"):  # the map-side pre-bound:
            unsorted = unsorted.children().apply(0)  # its input, in the same order
        jvm = spark.sparkContext._jvm
        kids = jvm.java.util.ArrayList()
        kids.add(unsorted)
        bare = node.withNewChildren(
            jvm.scala.jdk.javaapi.CollectionConverters.asScala(kids).toList())
        assert _first(bare, "SortExec") is None  # the node now reads the unsorted rows
        with pytest.raises(Py4JJavaError) as err:
            bare.execute().count()
        assert "is not sorted by the privacy unit's id" in str(err.value)
        assert out.count() > 0  # the planned query (sort inserted) runs
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
