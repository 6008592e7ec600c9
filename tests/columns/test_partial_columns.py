"""Marginals, MWEM and per-attribute histograms as Spark Column aggregators: the release
API's fields for the same key (global, keys="public", a key list), on classic Spark,
Spark Connect and local-cluster; the refusals before any job; independent noise for tied
groups; the unsafe-seed mark; ``hs.as_column`` and the dispatch of
``hs.attribute_histograms``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hdp_spark.spark as hs
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of
from hdp_spark.spark._common import UNSAFE_SEED_MARK

sys.path.insert(0, str(Path(__file__).parent))
from partial_columns_job import COLS, DOMAINS, KINDS, column, run, table

sys.path.pop(0)

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("partial_columns_job.py")


def _check(got: dict[str, Any]) -> None:
    for kind in KINDS:
        mine = got[kind]
        assert mine["main"] == "cells"
        assert mine["cells"] == mine["ref_cells"], kind
        assert len(mine["cells"]) >= 10
        assert mine["report"] == mine["ref_report"], kind
        assert mine["report"]["unsafe_seed"] is True
        assert sorted(mine["groups"]) == ["de", "fr", "it"]
        for country, (col, ref) in mine["groups"].items():
            assert col == ref, (kind, country)
        assert mine["listed"] == ["fr"]  # only listed keys; "es" has no rows
        assert mine["again"] == mine["cells"]  # one query re-evaluated: the same numbers
        # another query with the same statistics (the filter keeps every row): other noise
        assert mine["other_filter"] != mine["cells"], kind


@pytest.fixture(scope="module")
def classic(spark: Any) -> dict[str, Any]:
    return run(spark)


def test_classic_columns_equal_the_release_api(classic: dict[str, Any]) -> None:
    _check(classic)


SHUFFLE = {"spark.sql.shuffle.partitions": "3"}  # the job's own, run alone


def test_connect_columns_equal_the_release_api(connect_server: Any) -> None:
    pytest.importorskip("pyspark.sql.connect")
    got = connect_server.run(JOB, conf=SHUFFLE)
    assert "connect" in got["session"]
    _check(got)


@pytest.mark.slow
def test_local_cluster_columns_equal_the_release_api(cluster_server: Any) -> None:
    """Separate executor JVMs and Python workers."""
    _check(cluster_server.run(JOB, conf=SHUFFLE))


@pytest.mark.parametrize("kind", KINDS)
def test_tied_groups_draw_independent_noise(spark: Any, kind: str) -> None:
    """Two groups with the same rows (equal statistics) run the mechanism under their own
    keys: their released tables differ (tens of independently noised cells)."""
    rows = table(1500)
    df = spark.createDataFrame(pd.concat([rows.assign(country="a"), rows.assign(country="b")]))
    col = column(kind, keys="public")
    name = spec_of(col).name
    got = {r["country"]: r[name]["cells"] for r in df.groupBy("country").agg(col).collect()}
    assert len(got["a"]) >= 10
    assert got["a"] != got["b"]


@pytest.mark.parametrize("kind", KINDS)
def test_seeded_output_is_marked(spark: Any, kind: str) -> None:
    df = spark.createDataFrame(table(200))
    col = column(kind)
    name = spec_of(col).name
    assert UNSAFE_SEED_MARK not in df.agg(col).schema[name].metadata
    seeded = df.agg(col.unsafe_seed(3))  # type: ignore[attr-defined]
    assert seeded.schema[name].metadata.get(UNSAFE_SEED_MARK) is True


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keys": "private"}, "`keys` of a Column aggregator must be 'public'"),
    ({"keys": hs.select_keys(delta=1e-6, c=1.0, share=0.5)},
     r"select_keys\(\.\.\.\) \(DP partition selection\) is not available for "),
    ({"max_records": 0}, r"`max_records` must be an int in \[1, "),
    ({"max_records": True}, "`max_records` must be an int"),
])
def test_bad_parameters_are_refused_at_construction(kind: str, kwargs: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        column(kind, **kwargs)


@pytest.mark.parametrize("kind", KINDS)
def test_public_bound_and_privacy_unit_are_refused_before_any_job(spark: Any, kind: str
                                                                    ) -> None:
    df = spark.createDataFrame(table(300))
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("partial-refused", "refusals")
    small = column(kind, max_records=50)  # 6·3·5 = 90 records (6·2·5 with other={sex: f})
    with pytest.raises(ParameterError, match=r"product of the domain sizes .*: (90|60) > "
                                             r"`max_records` = 50"):
        df.agg(small)
    with pytest.raises(ParameterError, match=r"`keys` of \w+ must be omitted with "
                                             r"`privacy_unit` \('country'\)"):
        column(kind, privacy_unit="country", keys="public")  # global only: refused at once
    assert list(tracker.getJobIdsForGroup("partial-refused")) == []
    spark.sparkContext.setJobGroup("", "")


def test_release_functions_take_the_columns(spark: Any) -> None:
    """``hs.marginals``/``hs.mwem``/``hs.agg`` run the release API with a Column's spec;
    ``hs.attribute_histograms`` with a DataFrame first is still the release."""
    df = spark.createDataFrame(table(400))
    marg = column("marginals", max_records=50)  # the Column's bound binds no release
    assert hs.marginals(df, marg, unsafe_seed=1).report.eps0 == 1.0
    assert hs.mwem(df, column("mwem"), unsafe_seed=1).report["rounds"] == 5
    out = hs.attribute_histograms(df, COLS, domains=DOMAINS, eps0=0.5, unsafe_seed=1)
    assert out.report.eps0 == 0.5
    assert out.table.count() == 6 + 3 + 5  # every value of every domain, plus "other"
    hist = hs.attribute_histograms(COLS, domains=DOMAINS, eps0=0.5, alias="h")
    assert spec_of(hist).name == "h"
    assert hs.agg(df, hist, unsafe_seed=1).columns == ["h"]


def test_as_column_builds_each_familys_column(spark: Any) -> None:
    df = spark.createDataFrame(table(300))
    for kind in KINDS:
        spec = spec_of(column(kind))
        col = hs.as_column(spec, keys="public")
        assert spec_of(col) is spec
        assert df.groupBy("country").agg(col).count() == 3
        with pytest.raises(ParameterError, match="select_keys"):
            hs.as_column(spec, keys=hs.select_keys(delta=1e-6, c=1.0, share=0.5))


def test_column_form_of_attribute_histograms_refuses_a_seed_keyword() -> None:
    with pytest.raises(ParameterError, match=r"unexpected keyword `unsafe_seed` \(a Column's "
                                             r"noise is seeded by \.unsafe_seed"):
        hs.attribute_histograms(COLS, domains=DOMAINS, eps0=0.5, unsafe_seed=1)
