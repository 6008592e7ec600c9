"""The user-level mean Column aggregator: the release API's numbers for the same key (global,
keys="public", a key list), native per-user statistics equal to the engines', independent
noise for groups with equal statistics, the release API's refusals of public inputs, and
the refusals before any job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import hdp_spark.pandas as hpd
import hdp_spark.spark as hs
from hdp_spark import errors
from hdp_spark.core.user_mean import UserMeanSpec
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of
from hdp_spark.pandas._user_mean import PandasUsers
from hdp_spark.spark.columns_users import native_users

sys.path.insert(0, str(Path(__file__).parent))
from um_column_job import ARGS, plain, run, table

sys.path.pop(0)

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("um_column_job.py")


def _check(got: dict[str, Any]) -> None:
    mine, ref = got["global"]
    assert mine == ref
    assert mine["users"] == 900
    assert mine["fallback"] is False
    assert len(mine["classes"]) >= 6  # three steps, several (k, ε) classes
    public = got["grouped"]["public"]
    assert sorted(public) == ["de", "fr", "it"]
    for a, b in public.values():
        assert a == b
    assert sorted(got["grouped"]["list"]) == ["fr", "it"]  # "es" has no rows: no row
    for a, b in got["grouped"]["list"].values():
        assert a == b
    assert public["fr"][0]["estimate"] != got["grouped"]["list"]["fr"][0]["estimate"]
    assert got["again"] == mine  # one query re-evaluated: the same numbers
    # another query with the same statistics (the filter keeps every row): other noise
    assert got["other_filter"]["estimate"] != mine["estimate"]
    assert got["other_filter"]["users"] == mine["users"]


@pytest.fixture(scope="module")
def classic(spark: Any) -> dict[str, Any]:
    return run(spark)


def test_classic_column_equals_the_release_api(classic: dict[str, Any]) -> None:
    _check(classic)


SHUFFLE = {"spark.sql.shuffle.partitions": "3"}  # the job's own, run alone


def test_connect_column_equals_the_release_api(connect_server: Any) -> None:
    pytest.importorskip("pyspark.sql.connect")
    got = connect_server.run(JOB, conf=SHUFFLE)
    assert "connect" in got["session"]
    _check(got)


@pytest.mark.slow
def test_local_cluster_column_equals_the_release_api(cluster_server: Any) -> None:
    """Separate executor JVMs and Python workers: the native aggregate from spark.jars, the
    finalize from the installed package."""
    got = cluster_server.run(JOB, conf=SHUFFLE)
    _check(got)


def test_native_user_table_equals_the_engines(spark: Any) -> None:
    """Integer ids, values outside the bounds, null and NaN values, decimal values, ε = 0
    and +inf, an invalid ε (raw statistics: not a release, so nothing is refused): the
    native per-user statistics are the pandas engine's (the release API's pass 1)."""
    rng = np.random.default_rng(4)
    n = 2500
    ids = rng.integers(0, 400, n)
    eps_of = rng.choice([0.0, 0.3, 1.0, float("inf")], 400)
    eps = eps_of[ids].copy()
    eps[:3] = [np.nan, -1.0, 0.7]  # an invalid and a mixed ε
    x = rng.normal(5.0, 4.0, n)
    x[rng.random(n) < 0.05] = np.nan
    pdf = pd.DataFrame({"user": ids.astype(np.int64), "x": x, "eps": eps})
    schema = T.StructType([T.StructField("user", T.LongType()),
                           T.StructField("x", T.DoubleType()),
                           T.StructField("eps", T.DoubleType())])
    rows = [(int(u), None if i % 97 == 0 else float(v), float(e))
            for i, (u, v, e) in enumerate(zip(pdf.user, pdf.x, pdf.eps, strict=True))]
    df = spark.createDataFrame(rows, schema).repartition(3)
    pdf = pd.DataFrame(rows, columns=["user", "x", "eps"])
    spec = spec_of(hs.hdp_user_mean("x", **ARGS, eps_grid=hs.EpsGrid(ratio=1.5)))
    cells = df.agg(native_users(spec, "cells").alias("c")).collect()[0]["c"]
    native = PandasUsers.from_users(spec, cells["user"], cells["k"], cells["s"],
                                    cells["emin"], cells["emax"], cells["bad"],
                                    cells["null_rows"])
    engine = PandasUsers(pdf, spec, (), ((),))
    assert list(cells["user"]) == sorted(cells["user"])
    def stats(t: PandasUsers) -> dict[str, tuple[int, int, float]]:
        return {u: (k, s, lv) for u, k, s, lv in zip(t.text, t.k, t.s, t.level, strict=True)}

    mine, ref = stats(native), stats(engine)
    assert len(mine) == pdf.user.nunique() > 350
    assert mine == ref
    assert native.census() == engine.census()
    assert native.census().invalid_eps_users >= 1
    assert native.census().mixed_eps_users >= 1


def test_tied_groups_draw_independent_noise(spark: Any) -> None:
    """Two groups with the same rows (equal statistics) run the mechanism under their own
    keys: their estimates differ (equal only if the continuous final noise ties)."""
    rows = table(400)
    pdf = pd.concat([rows.assign(country="a"), rows.assign(country="b")])
    df = spark.createDataFrame(pdf)
    col = hs.hdp_user_mean("x", **ARGS, keys="public")
    got = {r["country"]: r["x_user_mean"] for r in df.groupBy("country").agg(col).collect()}
    assert got["a"]["users"] == got["b"]["users"] == 400
    assert got["a"]["fallback"] is False
    assert got["a"]["estimate"] != got["b"]["estimate"]
    assert got["a"]["initial"] != got["b"]["initial"]


def _frame(spark: Any, rows: list[tuple[Any, ...]], user: T.DataType | None = None,
           value: T.DataType | None = None) -> Any:
    schema = T.StructType([T.StructField("user", user or T.StringType()),
                           T.StructField("x", value or T.DoubleType()),
                           T.StructField("eps", T.DoubleType()),
                           T.StructField("g", T.StringType())])
    return spark.createDataFrame(rows, schema)


def _users(n: int = 30) -> list[tuple[Any, ...]]:
    return [(f"u{i}", float(i % 10), 1.0, "a") for i in range(n) for _ in range(2)]


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: [(None, 1.0, 1.0, "a"), (None, 2.0, 1.0, "a"), *r],
     r"SchemaError: user column `user` must not be null; 2 row\(s\) break this rule\."),
    (lambda r: [("u1", 1.0, 2.0, "a"), *r],
     r"EpsilonColumnError: Column `eps` must hold one ε >= 0 per user, .*; 0 user\(s\) have "
     r"a null, NaN or negative ε and 1 user\(s\) have rows with different ε\."),
    (lambda r: [("u2", 1.0, None, "a"), ("u3", 1.0, float("nan"), "a"), *r],
     r"EpsilonColumnError: .*; 2 user\(s\) have a null, NaN or negative ε and 0 user"),
])
def test_public_input_rules_fail_the_query_in_the_release_apis_words(
        spark: Any, change: Any, message: str) -> None:
    df = _frame(spark, change(_users()))
    with pytest.raises(Exception, match=message):
        df.agg(hs.hdp_user_mean("x", **ARGS)).collect()
    name, words = message.split(": ", 1)
    with pytest.raises(getattr(errors, name), match=words):  # the release API's own error
        hs.user_mean(df, hs.hdp_user_mean("x", **ARGS), unsafe_seed=1)  # type: ignore[arg-type]


def test_grouped_rules_count_one_group_and_below_grid_is_refused(spark: Any) -> None:
    rows = [*_users(), ("v", 1.0, 1.0, "b"), ("w", 1.0, 1e-9, "b")]
    df = _frame(spark, rows)
    grid = hs.EpsGrid(ratio=2.0, lowest=1e-3)
    col = hs.hdp_user_mean("x", **ARGS, eps_grid=grid, keys="public")
    with pytest.raises(Exception, match=r"has 1 user\(s\) of one group with 0 < ε below the "
                                        r"lowest point of `eps_grid`.*Groups are checked one"):
        df.groupBy("g").agg(col).collect()
    ok = hs.hdp_user_mean("x", **ARGS, eps_grid=grid, keys=["a"])  # group "b" left out
    assert [r["g"] for r in df.groupBy("g").agg(ok).collect()] == ["a"]


def test_schema_errors_use_the_release_apis_words(spark: Any) -> None:
    floats = _frame(spark, [(1.5, 1.0, 1.0, "a")], user=T.DoubleType())
    with pytest.raises(Exception, match="SchemaError: user column `user` must hold integers "
                                        "or strings, got double"):
        floats.agg(hs.hdp_user_mean("x", **ARGS)).collect()
    text = _frame(spark, [("u", "1.0", 1.0, "a")], value=T.StringType())
    with pytest.raises(Exception, match="SchemaError: value column `x` must be numeric, got "
                                        "string"):
        text.agg(hs.hdp_user_mean("x", **ARGS)).collect()


def test_small_group_gets_the_data_independent_fallback(spark: Any) -> None:
    df = _frame(spark, _users(5))
    got = df.agg(hs.hdp_user_mean("x", **ARGS).alias("m")).collect()[0]["m"]
    assert got["fallback"] is True
    assert got["estimate"] == 5.0
    assert got["users"] == 5


def test_group_decisions_and_the_registry(spark: Any) -> None:
    df = _frame(spark, _users())
    col = hs.hdp_user_mean("x", **ARGS)
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        df.groupBy("g").agg(col).collect()
    listed = hs.hdp_user_mean("x", **ARGS, keys=["a"])
    with pytest.raises(Exception, match="needs a grouped aggregate"):
        df.agg(listed).collect()
    spec = hpd.hdp_user_mean("x", **ARGS)  # pandas keeps its spec
    assert isinstance(spec, UserMeanSpec)
    via = hs.as_column(spec, keys="public")
    got = df.groupBy("g").agg(via).collect()
    assert got[0]["x_user_mean"]["users"] == 30
    with pytest.raises(ParameterError, match="select_keys"):
        hs.as_column(spec, keys=hs.select_keys(delta=1e-6, c=1.0, share=0.5))
    # the Column is still a spec of the release API
    assert hs.agg(df, col, unsafe_seed=3).collect()[0]["x_user_mean_users"] == 30
    assert spec_of(col) == spec


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keys": "private"}, "`keys` of a Column aggregator must be 'public'"),
    ({"keys": hs.select_keys(delta=1e-6, c=1.0, share=0.5)},
     "`keys` of hdp_user_mean must be 'public', a list of public keys or omitted"),
    ({"var_users": 1}, "`var_users` must be an integer >= 2"),
])
def test_bad_parameters_are_refused_at_construction(kwargs: dict[str, Any], message: str
                                                     ) -> None:
    with pytest.raises(ParameterError, match=message):
        hs.hdp_user_mean("x", **ARGS, **kwargs)


def test_column_is_refused_over_a_window() -> None:
    with pytest.raises(ParameterError, match=r"cannot be used with `\.over"):
        hs.hdp_user_mean("x", **ARGS).over()  # type: ignore[call-arg]


def test_nondeterministic_input_is_refused(spark: Any) -> None:
    df = _frame(spark, _users()).withColumn("x", F.rand())
    with pytest.raises(Exception, match="below a DP aggregate is refused"):
        df.agg(hs.hdp_user_mean("x", **ARGS)).collect()


def test_seeded_output_is_marked(spark: Any) -> None:
    df = _frame(spark, _users())
    out = df.agg(hs.hdp_user_mean("x", **ARGS).unsafe_seed(1))  # type: ignore[operator]
    assert out.schema["x_user_mean"].metadata.get("hdp_unsafe_seed") is True
    assert plain(out.collect()[0]["x_user_mean"])["users"] == 30
