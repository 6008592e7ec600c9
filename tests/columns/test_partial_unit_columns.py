"""Partial-DP Columns under a privacy unit (issue 50): heavy hitters, marginals, MWEM and
attribute histograms take ``privacy_unit`` and ``max_rows`` in a global aggregate.

* the Column equals the release API (``hs.agg`` with the query's key) field for field on a
  table whose persons have 1-4 rows: both keep the same persons' rows;
* the bounding is one window over the person below the aggregate (one shuffle);
* a person with more than ``max_rows`` rows changes nothing;
* refusals: ``keys`` with a unit (construction), a grouped aggregate, another hdp_spark
  aggregator in the same aggregate, a missing unit column (analysis, before any job).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.spark as hs
from hdp_spark.errors import ParameterError

sys.path.insert(0, str(Path(__file__).parent))
from hh_column_job import COLS as HH_COLS
from hh_column_job import DOMAINS as HH_DOMAINS
from hh_column_job import query_key, records, table
from partial_columns_job import COLS, DOMAINS, column

sys.path.pop(0)

pytestmark = pytest.mark.spark

KINDS = ("heavy_hitters", "marginals", "mwem", "attribute_histograms")
UNIT = {"privacy_unit": "pid", "max_rows": 2}


def _column(kind: str, **kwargs: Any) -> Any:
    if kind == "heavy_hitters":
        return hs.hdp_heavy_hitters(HH_COLS, domains=HH_DOMAINS, eps0=8.0, delta=1e-3,
                                    **kwargs)
    return column(kind, **kwargs)


def _events(seed: int = 11) -> pd.DataFrame:
    """table() with a person id: each person on 1-4 rows (about half above max_rows)."""
    base = table(6000, seed=seed)
    rng = np.random.default_rng(seed)
    base["pid"] = np.repeat(np.arange(len(base)), rng.integers(1, 5, len(base)))[:len(base)]
    return base


@pytest.fixture(scope="module")
def events(spark: Any) -> Any:
    return spark.createDataFrame(_events()).repartition(3)


def _report(kind: str, frame: Any, col: Any, key: Any) -> dict[str, Any]:
    """The release API's report for the same spec and key."""
    if kind == "heavy_hitters":
        return dict(hs.heavy_hitters(frame, col, unsafe_seed=key).report.as_dict())
    if kind == "marginals":
        return dict(hs.marginals(frame, col, unsafe_seed=key).report.as_dict())
    if kind == "mwem":
        return dict(hs.mwem(frame, col, unsafe_seed=key).report)
    return dict(hs.attribute_histograms(frame, COLS, domains=DOMAINS, eps0=0.5,
                                        other={"sex": "f"}, unsafe_seed=key, **UNIT)
                .report.as_dict())


@pytest.mark.parametrize("kind", KINDS)
def test_column_equals_the_release_api(events: Any, kind: str) -> None:
    from hdp_spark.spark.records_families import family_of
    from hdp_spark.spark.records_finalize import REPORT_FIELDS, group_key

    col = _column(kind, **UNIT).unsafe_seed(7)
    name = col.spec.name
    got = events.agg(col).collect()[0][name]
    qkey, text = query_key(events, col)
    key = group_key(qkey, name, text[()])
    want = records(hs.agg(events, col, unsafe_seed=key).collect()[0][name])
    fields = REPORT_FIELDS if kind == "heavy_hitters" else family_of(col.spec).report
    main = "records" if kind == "heavy_hitters" else family_of(col.spec).main
    assert records(got[main]) == want
    assert len(want) >= 3
    report = _report(kind, events, col, key)
    assert {f.suffix: got[f.suffix] for f in fields} == {f.suffix: report[f.suffix]
                                                         for f in fields}


def test_one_shuffle_by_person_below_the_aggregate(events: Any) -> None:
    q = events.agg(_column("attribute_histograms", **UNIT))
    plan = q._jdf.queryExecution().executedPlan().toString()
    assert "Window" in plan
    assert "__hdp_person_rows" in q._jdf.queryExecution().optimizedPlan().toString()


def test_persons_above_max_rows_change_nothing(spark: Any) -> None:
    """Adding a person with max_rows + 1 rows leaves the bounded record counts (the native
    aggregate under the unit's group decision) as they were; without the unit they move."""
    from hdp_spark.spark.columns_partial import native_records

    frame = _events(seed=12)
    bigger = pd.concat([frame, frame.head(3).assign(pid=10**9)])  # 3 rows > max_rows = 2
    col = _column("marginals", **UNIT)

    def counts(pdf: pd.DataFrame, groups: str) -> Any:
        row = spark.createDataFrame(pdf).agg(
            native_records(col.spec, groups).alias("c")).collect()[0]["c"]
        return dict(zip(row["key"], row["n"], strict=True))

    assert counts(frame, col.groups) == counts(bigger, col.groups)
    assert counts(frame, "cells") != counts(bigger, "cells")


@pytest.mark.parametrize("kind", KINDS)
def test_keys_with_a_unit_are_refused_at_construction(kind: str) -> None:
    with pytest.raises(ParameterError, match=r"must be omitted with `privacy_unit` \('pid'\)"):
        _column(kind, keys="public", **UNIT)


def test_analysis_refusals_run_no_job(spark: Any, events: Any) -> None:
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("partial-unit-refused", "refusals")
    col = _column("heavy_hitters", **UNIT)
    with pytest.raises(Exception, match="use the Column in a global aggregate"):
        events.groupBy("country").agg(col).collect()
    other = _column("marginals")  # an aggregator without the unit
    with pytest.raises(Exception, match="must all take the same `privacy_unit`"):
        events.agg(col, other).collect()
    missing = _column("attribute_histograms", privacy_unit="nobody", max_rows=2)
    with pytest.raises(Exception, match="`privacy_unit` names column 'nobody'"):
        events.agg(missing).collect()
    assert list(tracker.getJobIdsForGroup("partial-unit-refused")) == []
    spark.sparkContext.setJobGroup("", "")
