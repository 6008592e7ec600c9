"""The heavy-hitters Column aggregator: the release API's numbers for the same key (global,
per group), native recoding equal to the release API's, the query-fingerprint rules, and
the refusals before any job."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import hdp_spark.spark as hs
from hdp_spark.core.partial.tree import key_weights
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of
from hdp_spark.spark._heavy_hitters import encode_codes
from hdp_spark.spark.columns_partial import MAX_RECORDS_LIMIT, native_records

sys.path.insert(0, str(Path(__file__).parent))
from hh_column_job import COLS, DOMAINS, run, table

sys.path.pop(0)

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("hh_column_job.py")


def _check(got: dict[str, Any]) -> None:
    assert got["records"] == got["ref_records"]
    assert len(got["records"]) >= 3  # frequent records are released
    assert got["report"] == got["ref_report"]
    assert got["report"]["unsafe_seed"] is True
    assert sorted(got["groups"]) == ["de", "fr", "it"]
    for mine, ref in got["groups"].values():
        assert mine == ref
    assert got["groups"]["fr"][0] != got["groups"]["de"][0]
    assert got["again"] == got["records"]  # one query re-evaluated: the same numbers
    # another query with the same statistics (the filter keeps every row): other noise
    assert [r[4] for r in got["other_filter"]] != [r[4] for r in got["records"]]


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


def _codes_keys(df: Any, spec: Any) -> dict[int, int]:
    """The release API's recoding (encode_codes) as whole-record key counts."""
    sizes = [d.size for d in spec.domains]
    weights = key_weights(range(len(sizes)), sizes)
    key = sum(F.col(f"__c{j}").cast("long") * F.lit(w) for j, w in enumerate(weights))
    rows = encode_codes(df, spec.domains).select(key.alias("k")).groupBy("k").count().collect()
    return {int(r["k"]): int(r["count"]) for r in rows}


def test_native_recoding_equals_the_release_apis(spark: Any) -> None:
    """Strings (nulls, unknown values, a 70-value lookup), an integer range on an integer
    column, integers on double and decimal columns, floats, booleans and -0.0: the native
    aggregate's record counts equal the release API's encode_codes."""
    rng = np.random.default_rng(9)
    n = 3000
    schema = T.StructType([
        T.StructField("s", T.StringType()), T.StructField("big", T.StringType()),
        T.StructField("i", T.IntegerType()), T.StructField("x", T.DoubleType()),
        T.StructField("dec", T.DecimalType(10, 2)), T.StructField("f", T.DoubleType()),
        T.StructField("b", T.BooleanType()), T.StructField("wide", T.LongType()),
    ])
    big = [f"v{i}" for i in range(80)]
    rows = [(
        rng.choice(["a", "b", "c", None]), rng.choice([*big[:5], "zz", None]),
        int(rng.integers(-1, 6)), float(rng.choice([1.0, 2.0, 2.5, np.nan, 7.0])),
        Decimal(str(rng.choice(["1.00", "2.00", "2.50", "3.10"]))),
        float(rng.choice([0.5, -0.0, 0.0, 1.25, np.nan])), bool(rng.random() < 0.3)
        if rng.random() < 0.9 else None, int(rng.choice([10, 200, 3000, 7, 2**40])),
    ) for _ in range(n)]
    df = spark.createDataFrame(rows, schema).repartition(3)
    cases = [
        (["s", "big"], {"s": ["a", "b"], "big": big}),
        (["i", "x"], {"i": [0, 1, 2, 3], "x": [1, 2, 3]}),
        (["dec", "f"], {"dec": [1, 2, 3], "f": [0.0, 0.5, 1.25]}),
        (["x", "dec"], {"x": [1, 2.5], "dec": [1.0, 2.5, 3.1]}),
        (["b", "wide"], {"b": [True, False], "wide": [10, 200, 2**40, *range(1000, 1070)]}),
        (["x", "f"], {"x": [float(v) for v in range(70)] + [2.5], "f": [0.5, 1.25]}),
    ]
    for cols, domains in cases:
        spec = spec_of(hs.hdp_heavy_hitters(cols, domains=domains, eps0=1.0))
        cells = df.agg(native_records(spec, "cells").alias("c")).collect()[0]["c"]
        got = dict(zip(cells["key"], cells["n"], strict=True))
        assert got == _codes_keys(df, spec), cols
        assert list(cells["key"]) == sorted(cells["key"])


def test_grouped_column_needs_a_group_decision(spark: Any) -> None:
    df = spark.createDataFrame(table(300))
    col = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=1.0)
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        df.groupBy("country").agg(col).collect()
    listed = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=1.0, keys=["fr", "es"])
    got = df.groupBy("country").agg(listed).collect()
    assert [r["country"] for r in got] == ["fr"]  # only listed keys; "es" has no rows
    with pytest.raises(Exception, match="needs a grouped aggregate"):
        df.agg(listed).collect()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keys": "private"}, "`keys` of a Column aggregator must be 'public'"),
    ({"keys": hs.select_keys(delta=1e-6, c=1.0, share=0.5)}, "select_keys"),
    ({"max_records": 0}, r"`max_records` must be an int in \[1, "),
    ({"max_records": MAX_RECORDS_LIMIT + 1}, "`max_records` must be an int"),
    ({"max_records": True}, "`max_records` must be an int"),
])
def test_bad_parameters_are_refused_at_construction(kwargs: dict[str, Any], message: str
                                                     ) -> None:
    with pytest.raises(ParameterError, match=message):
        hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=1.0, **kwargs)


def test_public_bound_and_privacy_unit_are_refused_before_any_job(spark: Any) -> None:
    df = spark.createDataFrame(table(300))
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("hh-refused", "refusals")
    small = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=1.0, max_records=1000)
    with pytest.raises(ParameterError, match=r"product of the domain sizes .*: 6390 > "
                                             r"`max_records` = 1000"):
        df.agg(small)
    two = {c: DOMAINS[c] for c in ("sex", "region")}
    unit = hs.hdp_heavy_hitters(["sex", "region"], domains=two, eps0=1.0,
                                privacy_unit="country")
    with pytest.raises(Exception, match="use the Column in a global aggregate"):
        df.groupBy("country").agg(unit)  # a person would count once per group
    assert list(tracker.getJobIdsForGroup("hh-refused")) == []
    spark.sparkContext.setJobGroup("", "")
    # the release API still takes the same aggregator
    assert hs.heavy_hitters(df, small, unsafe_seed=1).report.eps0 == 1.0


def test_column_is_refused_over_a_window() -> None:
    col = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=1.0)
    with pytest.raises(ParameterError, match=r"cannot be used with `\.over"):
        col.over()  # type: ignore[attr-defined]


def test_nondeterministic_input_is_refused(spark: Any) -> None:
    df = spark.createDataFrame(table(300)).withColumn("sex", F.when(F.rand() < 0.5, "f"))
    col = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=1.0)
    with pytest.raises(Exception, match="below a DP aggregate is refused"):
        df.agg(col).collect()


def test_attribute_type_errors_use_the_release_apis_words(spark: Any) -> None:
    df = spark.createDataFrame(pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}))
    col = hs.hdp_heavy_hitters(["a", "b"], domains={"a": ["u"], "b": ["x"]}, eps0=1.0)
    with pytest.raises(Exception, match="attribute column `a` has type bigint, which cannot "
                                        "hold the str values of its domain"):
        df.agg(col).collect()


def test_tied_groups_draw_independent_noise(spark: Any) -> None:
    """Two groups with the same rows (equal statistics) run the mechanism under their own
    keys: their noisy counts differ (each of ~10 released counts ties with probability
    below 1/2 under independent noise, all of them with probability below 1e-3)."""
    rows = table(4000)
    pdf = pd.concat([rows.assign(country="a"), rows.assign(country="b")])
    df = spark.createDataFrame(pdf)
    col = hs.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=4.0, delta=1e-3, keys="public")
    got = {r["country"]: [x["noisy_count"] for x in r["heavy_hitters"]["records"]]
           for r in df.groupBy("country").agg(col).collect()}
    assert len(got["a"]) >= 10
    assert got["a"] != got["b"]
