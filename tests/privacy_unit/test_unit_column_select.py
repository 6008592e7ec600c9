"""Spark Column aggregators under a privacy unit with ``keys=select_keys(...)`` (issue 50):
``df.groupBy(...).agg(hdp_mean(..., keys=select_keys(...), privacy_unit=...))``.

* the Column releases, group for group and field for field, what ``hs.agg(..., by=,
  keys=select_keys(...), privacy_unit=...)`` releases for the query's key: the same kept
  rows (a group enters the ranks as its canonical text, never its place among the groups
  found: a person's kept rows do not depend on other persons' rows, which
  ``test_unit_select.py`` checks of that bounding on both engines), the same threshold
  (margin for δ/max_groups), the same W̃ and estimates; string and integer groups;
* small groups are not released (the threshold bites on this table);
* in SQL, ``'select', δ, c, f, 'unit', column, G, R`` releases the same;
* every error path names its argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.spark as hs
from hdp_spark.errors import ParameterError
from tests.privacy_unit.test_unit_columns import query_key
from tests.privacy_unit.test_unit_sql import SEED, _query_key

pytestmark = pytest.mark.spark

SELECT = hs.select_keys(delta=1e-6, c=1.0, share=0.3)
UNIT: dict[str, Any] = {"privacy_unit": "user_id", "max_groups": 2, "max_rows": 3}
CATS = ["a", "b", "c"]


def _events(seed: int = 0, n: int = 20_000, persons: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "user_id": rng.integers(0, persons, n).astype(np.int64),
        "country": rng.choice(["DE", "FR", "IT", "ES", "PT"], n, p=[.4, .3, .2, .07, .03]),
        "region": rng.choice([7, 12, 150, 3000], n, p=[.5, .3, .15, .05]).astype(np.int64),
        "amount": rng.uniform(-50, 550, n),
        "category": rng.choice([*CATS, "zz"], n),
        "eps": rng.choice([0.5, 1.0, 2.0], n),
    })
    frame.loc[:40, "country"] = None  # count for their person's ε only
    for i in range(5):  # five persons alone in a group of their own: never released
        frame.loc[100 + i, ["user_id", "country", "region"]] = [10**6 + i, f"Z{i}", 99 + i]
    return frame


@pytest.fixture(scope="module")
def events(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("unit_column_select") / "e.parquet"
    _events().to_parquet(path)
    return spark.read.parquet(str(path))


def _column(kind: str, **kwargs: Any) -> Any:
    options = {**UNIT, **kwargs}
    if kind == "mean":
        return hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys=SELECT, **options)
    return hs.hdp_histogram("category", eps="eps", categories=CATS, keys=SELECT, **options)


def _same(out: Any, ref: Any, name: str, kind: str) -> None:
    assert out["weight"] == ref[f"{name}_weight"]
    assert out["privacy"] == ref[f"{name}_privacy"] == "privacy_unit"
    assert out["delta"] == ref[f"{name}_delta"] == SELECT.delta
    if kind == "mean":
        fields = ("ci_low", "ci_high", "noise_ci_low", "noise_ci_high")
        assert (out["estimate"], *(out[f] for f in fields)) == (
            ref[name], *(ref[f"{name}_{f}"] for f in fields))
    else:
        bins = ("category", "frequency", "noise_ci_low", "noise_ci_high")
        assert [tuple(b[f] for f in bins) for b in out["bins"]] == [
            tuple(b[f] for f in bins) for b in ref[name]]


@pytest.mark.parametrize("kind", ["mean", "histogram"])
@pytest.mark.parametrize("by", ["country", "region"])
def test_select_column_equals_the_release_api(events: Any, kind: str, by: str) -> None:
    col = _column(kind).unsafe_seed(11)
    q = events.groupBy(by).agg(col.alias("out"))
    got = {r[by]: r["out"] for r in q.collect()}
    ref = hs.agg(events, col, by=by, keys=SELECT, **UNIT,
                 unsafe_seed=query_key(q, col)).collect()
    assert sorted(got) == sorted(r[by] for r in ref)
    assert len(got) >= 3  # the large groups are released
    assert not {k for k in got if str(k).startswith("Z") or k in range(99, 104)}
    for r in ref:
        _same(got[r[by]], r, col.spec.name, kind)


def test_two_aggregators_share_one_selection(events: Any) -> None:
    mean = _column("mean").unsafe_seed(1)
    hist = _column("histogram").unsafe_seed(2)
    rows = events.groupBy("country").agg(mean.alias("m"), hist.alias("h")).collect()
    assert rows
    assert all(r["m"]["weight"] == r["h"]["weight"] for r in rows)


@pytest.mark.parametrize(("build", "message"), [
    (lambda df: df.agg(_column("mean")), "it needs a grouped aggregate"),
    (lambda df: df.groupBy(df.amount.cast("double")).agg(_column("mean")),
     "every grouping column must hold integers or strings"),
    (lambda df: df.groupBy("user_id").agg(_column("mean")),
     "`privacy_unit` column 'user_id' identifies people"),
])
def test_analysis_errors(events: Any, build: Any, message: str) -> None:
    with pytest.raises(Exception, match=message):
        build(events).collect()


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"eps_cap": 0.5}, "`eps_cap` and `weight_share` are select_keys"),
    ({"weight_share": 0.5}, "`eps_cap` and `weight_share` are select_keys"),
    ({"max_rows": 0}, "`max_rows`"),
])
def test_parameter_errors(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ParameterError, match=needle):
        _column("mean", **kwargs)


@pytest.fixture(scope="module")
def view(spark: Any, events: Any) -> Any:
    events.createOrReplaceTempView("hdp_unit_select_events")
    hs.register_sql(spark, unsafe_seed=SEED)
    return events


@pytest.mark.parametrize("kind", ["mean", "histogram"])
def test_sql_select_under_a_unit_equals_the_release_api(spark: Any, view: Any,
                                                        kind: str) -> None:
    call = ("hdp_mean(amount, eps, 0, 500" if kind == "mean"
            else "hdp_histogram(category, eps, array('a', 'b', 'c')")
    q = spark.sql(f"SELECT country, {call}, 'select', 1e-6, 1.0, 0.3, 'unit', 'user_id', "
                  "2, 3) AS out FROM hdp_unit_select_events GROUP BY country")
    got = {r["country"]: r["out"] for r in q.collect()}
    spec = (hs.hdp_mean("amount", eps="eps", lower=0, upper=500) if kind == "mean"
            else hs.hdp_histogram("category", eps="eps", categories=CATS))
    ref = hs.agg(view, spec, by="country", keys=SELECT, **UNIT,
                 unsafe_seed=_query_key(q)).collect()
    assert sorted(got) == sorted(r["country"] for r in ref)
    assert len(got) >= 3
    for r in ref:
        _same(got[r["country"]], r, spec.spec.name, kind)  # type: ignore[attr-defined]


def test_sql_select_under_a_unit_needs_groups(spark: Any, view: Any) -> None:
    with pytest.raises(Exception, match="it needs a grouped aggregate"):
        spark.sql("SELECT hdp_mean(amount, eps, 0, 500, 'select', 1e-6, 1.0, 0.3, 'unit', "
                  "'user_id', 2, 3) AS out FROM hdp_unit_select_events").collect()
