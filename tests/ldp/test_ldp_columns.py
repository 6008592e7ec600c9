"""The local-DP Column aggregators (``hs.ldp_mean``, ``hs.ldp_mean_vector``,
``hs.ldp_distribution``): the release API's numbers field for field (global, keys="public",
a key list, the descriptor's ``hs.as_column``) on classic Spark, Spark Connect and
local-cluster; native cells equal to the release path's; the refusals."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import functions as F

import hdp_spark.pandas as pdl
import hdp_spark.spark as hs
from hdp_spark.aggregators.registry import aggregator_of
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of
from hdp_spark.spark.columns_ldp import native_ldp_cells
from hdp_spark.spark.ldp_finalize import group_stats_of

sys.path.insert(0, str(Path(__file__).parent))
from ldp_column_job import KEYS, columns, differences, marked, run
from test_ldp_engines import _reports

sys.path.pop(0)

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]

JOB = Path(__file__).with_name("ldp_column_job.py")


def _check(got: dict[str, Any]) -> None:
    assert got["diff"] == []
    assert got["fields"] == 4 * 12 + 1  # every field compared (the pmf has _m and _projection)
    assert got["again"] is True  # no randomness: any Column, any evaluation, same numbers
    assert got["public"] == KEYS
    assert got["listed"] == ["a"]  # only listed keys; "zz" has no rows
    assert got["differs_by_group"] is True


@pytest.fixture(scope="module")
def frame(spark: Any) -> tuple[Any, Any]:
    warnings.simplefilter("ignore")
    pdf, oracle = _reports()
    return marked(spark.createDataFrame(pdf).repartition(3)).cache(), oracle


def test_classic_columns_equal_the_release_api(spark: Any) -> None:
    _check(run(spark))


SHUFFLE = {"spark.sql.shuffle.partitions": "3"}  # the job's own, run alone


def test_connect_columns_equal_the_release_api(connect_server: Any) -> None:
    pytest.importorskip("pyspark.sql.connect")
    got = connect_server.run(JOB, conf=SHUFFLE)
    assert "connect" in got["session"]
    _check(got)


@pytest.mark.slow
def test_local_cluster_columns_equal_the_release_api(cluster_server: Any) -> None:
    """Separate executor JVMs and Python workers: the native aggregate from spark.jars, the
    finalize from the installed package."""
    _check(cluster_server.run(JOB, conf=SHUFFLE))


def test_native_cells_equal_the_release_paths_tables(frame: tuple[Any, Any]) -> None:
    """Per group, the native aggregate's cells assemble into the release path's exact
    statistics (counts, both limb sums, skipped rows, per-level counts)."""
    df, oracle = frame
    specs = [spec_of(c) for c in columns(oracle)]
    tables = hs.ldp_release(df, *specs, by="g", keys=KEYS).tables
    for spec, table in zip(specs, tables, strict=True):
        rows = df.groupBy("g").agg(native_ldp_cells(spec, "cells").alias("c")).collect()
        assert sorted(r["g"] for r in rows) == KEYS
        for r in rows:
            c = r["c"]
            stats = group_stats_of(spec, c["level"], c["index"], c["count"], c["hi"], c["lo"])
            assert stats == table[(r["g"],)], (spec.name, r["g"])
            if spec.name == "lap_mean":  # Laplace reports reach the high limb
                assert any(h != 0 for h in c["hi"])


def test_registry_and_spec_roles(frame: tuple[Any, Any]) -> None:
    """The descriptors name the Column; the Columns are specs for the release API; pandas
    keeps its spec constructors."""
    df, oracle = frame
    for col, kind in zip(columns(oracle), (LdpMeanSpec, LdpMeanSpec, LdpVectorMeanSpec,
                                           LdpDistributionSpec), strict=True):
        spec = spec_of(col)
        assert type(spec) is kind
        described = aggregator_of(spec)
        assert described.column_field == "estimate"
        assert described.column_builder == "hdp_spark.spark.columns_ldp:column_for"
    assert type(pdl.ldp_mean("lap", eps="eps", mechanism="laplace")) is LdpMeanSpec
    got = hs.ldp_agg(df, columns(oracle)[0]).collect()[0]
    assert got["lap_mean_n"] == df.agg(columns(oracle)[0]).collect()[0]["lap_mean"]["n"]


def test_declared_reports_need_no_marker(spark: Any) -> None:
    pdf, _ = _reports()
    df = spark.createDataFrame(pdf[["g", "eps", "lap"]])  # no markers
    col = hs.ldp_mean("lap", eps="eps", mechanism="laplace", lower=5, upper=15,
                      already_randomized=True)
    got = df.agg(col).collect()[0]["lap_mean"]
    want = hs.ldp_agg(df, col, already_randomized=True).collect()[0]
    assert got["estimate"] == want["lap_mean"]
    assert got["n"] == want["lap_mean_n"]


def test_refusals_before_any_job(frame: tuple[Any, Any]) -> None:
    oracle = frame[1]
    spec = spec_of(columns(oracle)[0])
    selection = hs.select_keys(delta=1e-6, c=1.0, share=0.5)
    with pytest.raises(ParameterError, match="`keys` of a local-DP Column"):
        hs.ldp_mean("lap", eps="eps", mechanism="laplace", keys=selection)
    with pytest.raises(ParameterError, match="`keys` of a local-DP Column"):
        hs.as_column(spec, keys=selection)
    with pytest.raises(ParameterError, match="`keys` of a Column aggregator must be 'public'"):
        hs.ldp_mean_vector("du40", eps="eps", d=40, keys="all")
    with pytest.raises(ParameterError, match="`already_randomized` must be True or False"):
        hs.ldp_distribution("j", "b", eps="eps", oracle=oracle, already_randomized="yes")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="draws no noise"):
        columns(oracle)[0].unsafe_seed(3)  # type: ignore[attr-defined]


def _fails(df: Any, col: Any, match: str) -> None:
    with pytest.raises(Exception, match=match):
        df.agg(col).collect()


def test_refusals_at_analysis(spark: Any, frame: tuple[Any, Any]) -> None:
    """Public inputs only: the report markers, the column types, the group decision."""
    df, oracle = frame
    pdf, _ = _reports()
    raw = spark.createDataFrame(pdf)
    _fails(raw, hs.ldp_mean("lap", eps="eps", mechanism="laplace"),
           "`already_randomized`: column `lap` carries no local randomizer's marker")
    _fails(df, hs.ldp_mean("rr", eps="eps", mechanism="laplace", already_randomized=True),
           "column `rr` holds `rr` reports, but its aggregator expects `laplace` reports")
    typed = raw.select("g", "eps", F.col("g").alias("s"), F.col("eps").cast("string").alias("e"),
                       "lap")
    _fails(typed, hs.ldp_mean("s", eps="eps", mechanism="rr", already_randomized=True),
           "report column `s` must be numeric, got string")
    # a scalar where an array belongs fails Spark's own check of the row expressions first
    _fails(typed, hs.ldp_mean_vector("lap", eps="eps", d=3, already_randomized=True),
           'requires the .*ARRAY.* type, however "lap" has the type "DOUBLE"')
    _fails(typed, hs.ldp_mean("lap", eps="e", mechanism="laplace", already_randomized=True),
           "ε column `e` must be numeric, got string")
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        df.groupBy("g").agg(columns(oracle)[0]).collect()
    _fails(df, columns(oracle, ["a"])[0], "needs a grouped aggregate")


def test_invalid_eps_is_refused_with_counts(spark: Any) -> None:
    """The ε column is public: an invalid ε fails the query as in the release API (counts,
    never values)."""
    pdf = pd.DataFrame({"eps": [1.0, -1.0, 0.5], "lap": [0.2, 0.1, -0.3]})
    df = spark.createDataFrame(pdf)
    col = hs.ldp_mean("lap", eps="eps", mechanism="laplace", already_randomized=True)
    with pytest.raises(Exception, match=r"must hold finite ε >= 0 .* 1 row\(s\) break"):
        df.agg(col).collect()
    with pytest.raises(Exception, match=r"1 row\(s\) break this rule"):
        hs.ldp_agg(df, col, already_randomized=True)


def test_no_rows_gives_the_release_apis_empty_group(frame: tuple[Any, Any]) -> None:
    """A global aggregate over no rows: the release API's empty group (n = 0, fallback)."""
    df, oracle = frame
    empty = df.filter(F.col("eps") > 100.0)
    cols = columns(oracle)
    got = empty.agg(*cols).collect()[0]
    want = hs.ldp_release(empty, *cols).rows()[0]
    for col in cols:
        spec = spec_of(col)
        assert got[spec.name]["n"] == 0
        assert got[spec.name]["fallback"] is True
        assert differences(got[spec.name], want, spec) == []
