"""The Spark Column aggregators under a privacy unit (issue 50): ``hdp_mean(...,
privacy_unit="user_id", max_groups=, max_rows=)`` in ``df.agg`` and in
``df.groupBy(...).agg`` with ``keys="public"`` (a public key list:
``test_unit_column_keys.py``).

* the Column releases, field for field, what ``hs.agg(..., privacy_unit=...)`` releases for
  the query's key (its release key derived with the query's fingerprint): the same noisy
  weights W̃ (whose noise context holds the exact weight W, so equal W̃ means the same kept
  rows and per-person weights), estimates and intervals; the bounds bite on this table
  (people with more groups and rows than the bounds), ids are null for some rows, some ε
  are invalid, and some rows have a null key (they count for their person's ε only);
* the bounding is the JVM's streaming operator (``HdpUnitBound``): one shuffle by person and
  one sort below the aggregate, no window or join of its own; the query's bounding key is
  no literal of the plan (``explain`` shows the bounds); with the operator turned off the
  native windows release the same, their key literal the Python one;
* every error path names its parameter;
* on Spark Connect too, Columns and SQL (``unit_column_job.py``, on the run's server).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.spark as hs
from hdp_spark.core.privacy_unit.spec import bounding_key, query_bounding_key
from hdp_spark.errors import ParameterError

pytestmark = pytest.mark.spark

KEYS = ["DE", "FR", "IT"]
CATS = ["a", "b", "c"]
UNIT: dict[str, Any] = {"privacy_unit": "user_id", "max_groups": 2, "max_rows": 3}


def _events(seed: int = 0, n: int = 3000, persons: int = 200, text_ids: bool = False
            ) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, persons, n)
    eps = rng.choice([0.25, 0.5, 1.0, 2.0], n)
    eps[:6] = [np.nan, -1.0, np.nan, 0.0, 0.5, 3.0]  # invalid ε count as 0 for the person
    frame = pd.DataFrame({
        "user_id": [f"u{i}" for i in ids] if text_ids else ids.astype(np.int64),
        "country": rng.choice(KEYS, n),
        "amount": rng.uniform(-50, 550, n),  # some clamped
        "category": rng.choice([*CATS, "zz"], n),
        "eps": eps,
    })
    # rows of no public group (a null key) count for their person's ε only: the smallest
    # ε here, so a path that dropped them first would weigh these people more
    frame.loc[20:29, "country"] = None
    frame.loc[20:29, "eps"] = 0.1
    if text_ids:
        frame.loc[10:14, "user_id"] = None  # dropped: cannot be bounded
    return frame


@pytest.fixture(scope="module")
def events(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("unit_columns") / "e.parquet"
    _events().to_parquet(path)
    return spark.read.parquet(str(path))


@pytest.fixture(scope="module")
def text_events(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("unit_columns_text") / "e.parquet"
    _events(seed=1, text_ids=True).to_parquet(path)
    return spark.read.parquet(str(path))


def _column(kind: str, **kwargs: Any) -> Any:
    if kind == "mean":
        return hs.hdp_mean("amount", eps="eps", lower=0, upper=500, **UNIT, **kwargs)
    return hs.hdp_histogram("category", eps="eps", categories=CATS, **UNIT, **kwargs)


def _plan(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    return out.getvalue()


def query_key(q: Any, col: Any) -> Any:
    """The noise key of Column ``col`` in query ``q``: its key derived with the query's
    fingerprint, the one 64-hex literal of the physical plan (the query bounding key the
    JVM derives from it is held by the bounding operator, no literal of the plan; that it
    is Python's is what the equality tests check: the same kept rows, the same W̃)."""
    text = _plan(q)
    found = set(re.findall(r"\b[0-9a-f]{64}\b", text.split("== Physical Plan ==")[1]))
    assert len(found) == 1, found
    fingerprint = found.pop()
    assert query_bounding_key(bounding_key(col.key), fingerprint) not in text
    return col.key.for_query(fingerprint)


def _same(out: Any, ref: Any, name: str, kind: str) -> None:
    assert out["weight"] == ref[f"{name}_weight"]
    assert out["privacy"] == ref[f"{name}_privacy"] == "privacy_unit"
    assert out["delta"] == ref[f"{name}_delta"] == 0.0
    assert out["eps_cap"] == ref[f"{name}_eps_cap"]
    if kind == "mean":
        fields: tuple[str, ...] = ("ci_low", "ci_high", "noise_ci_low", "noise_ci_high",
                                   "bias_bound")
        assert (out["estimate"], *(out[f] for f in fields)) == (
            ref[name], *(ref[f"{name}_{f}"] for f in fields))
    else:
        fields = ("category", "frequency", "ci_low", "ci_high", "noise_ci_low",
                  "noise_ci_high")
        assert [tuple(b[f] for f in fields) for b in out["bins"]] == [
            tuple(b[f] for f in fields) for b in ref[name]]


@pytest.mark.parametrize("kind", ["mean", "histogram"])
@pytest.mark.parametrize("text_ids", [False, True])
def test_grouped_column_equals_the_release_api(events: Any, text_events: Any, kind: str,
                                               text_ids: bool) -> None:
    """keys='public': the groups found, in ascending order, are the release API's keys."""
    frame = text_events if text_ids else events
    col = _column(kind, keys="public").unsafe_seed(8)
    q = frame.groupBy("country").agg(col.alias("out"))
    got = q.orderBy("country").collect()
    ref = hs.agg(frame, col, by="country", keys=KEYS, **UNIT,
                 unsafe_seed=query_key(q, col)).orderBy("country").collect()
    assert [r["country"] for r in got] == [r["country"] for r in ref] == KEYS
    for g, r in zip(got, ref, strict=True):
        _same(g["out"], r, col.spec.name, kind)
    assert "n" not in got[0]["out"].asDict()  # no exact count under a privacy unit


@pytest.mark.parametrize("kind", ["mean", "histogram"])
def test_global_column_equals_the_release_api(events: Any, kind: str) -> None:
    col = _column(kind).unsafe_seed(3)
    q = events.agg(col.alias("out"))
    got = q.collect()
    ref = hs.agg(events, col, **UNIT, unsafe_seed=query_key(q, col)).collect()
    _same(got[0]["out"], ref[0], col.spec.name, kind)


def test_the_bounds_bite_on_the_test_tables() -> None:
    """The equality tests mean something: on their tables most people have more groups
    than ``max_groups`` and more rows in a group than ``max_rows`` (so the ranks decide)."""
    for frame in (_events(), _events(seed=1, text_ids=True)):
        rows = frame.dropna(subset=["user_id"]).groupby(["user_id", "country"]).size()
        groups = rows.groupby(level=0).size()
        assert (groups > UNIT["max_groups"]).mean() > 0.5
        assert (rows > UNIT["max_rows"]).mean() > 0.5


def test_the_query_bounding_key_is_no_literal_of_the_plan(events: Any) -> None:
    """The bounding operator holds the query's bounding key (derived in the JVM from the
    Column's and the fingerprint) where no printed plan shows it: ``explain`` prints the
    bounds; neither that key nor the Column's own is in the analyzed, optimized or
    physical plan."""
    col = _column("mean").unsafe_seed(5)
    q = events.agg(col.alias("out"))
    qkey = query_key(q, col)
    assert qkey.origin is not None
    assert qkey.origin[0] == col.key
    text = _plan(q)
    assert bounding_key(qkey) not in text
    assert bounding_key(col.key) not in text.split("== Analyzed Logical Plan ==")[1]
    assert "HdpUnitBound" in text
    assert "max_groups=2, max_rows=3" in text
    assert sorted(q.collect()) == sorted(q.collect())  # re-evaluation repeats the release


@pytest.fixture
def native(spark: Any) -> Any:
    """The session's Column bounding on its native windows (the setting that turns the
    operator off), for the test only."""
    spark.conf.set("hdp_spark.unitOperator", "false")
    try:
        yield spark
    finally:
        spark.conf.unset("hdp_spark.unitOperator")


def test_native_path_s_query_bounding_key_is_the_python_one(events: Any, native: Any
                                                            ) -> None:
    """With the operator off, the native windows hold the query's bounding key as a plan
    literal: it is the Python key of the query's release key."""
    col = _column("mean").unsafe_seed(5)
    text = _plan(events.agg(col.alias("out")))
    physical = text.split("== Physical Plan ==")[1]
    found = set(re.findall(r"\b[0-9a-f]{64}\b", physical))
    fps = [fp for fp in found if query_bounding_key(bounding_key(col.key), fp) in found]
    assert len(fps) == 1, found
    assert "HdpUnitBound" not in text
    assert physical.count("Window [") == 3


@pytest.mark.parametrize("kind", ["mean", "histogram"])
@pytest.mark.parametrize("text_ids", [False, True])
def test_operator_and_native_windows_release_the_same(spark: Any, events: Any,
                                                      text_events: Any, kind: str,
                                                      text_ids: bool) -> None:
    """The same query (so the same fingerprint and key) bounded by the operator and by the
    native windows releases the same, field for field: the same kept rows."""
    frame = text_events if text_ids else events
    col = _column(kind, keys="public").unsafe_seed(9)
    q = frame.groupBy("country").agg(col.alias("out"))
    assert "HdpUnitBound" in _plan(q)
    got = q.orderBy("country").collect()
    spark.conf.set("hdp_spark.unitOperator", "false")
    try:
        q = frame.groupBy("country").agg(col.alias("out"))
        assert "HdpUnitBound" not in _plan(q)
        ref = q.orderBy("country").collect()
    finally:
        spark.conf.unset("hdp_spark.unitOperator")
    assert got == ref


def test_the_planner_holds_the_operator_s_strategy_once(spark: Any, events: Any) -> None:
    """The extension injects the operator's strategy; the release API's path adds it to
    ``extraStrategies`` only where the planner does not hold it already: after a release
    and a Column under the unit, the planner holds it once."""
    hs.agg(events, hs.hdp_mean("amount", eps="eps", lower=0, upper=500), **UNIT).collect()
    events.agg(_column("mean").alias("out")).collect()
    strategies = spark._jsparkSession.sessionState().planner().strategies()
    names = [strategies.apply(i).getClass().getName() for i in range(strategies.size())]
    assert names.count("org.hdpspark.UnitBound$Planner") == 1, names


@pytest.mark.parametrize("grouped", [False, True])
def test_plan_one_person_shuffle_and_one_sort(events: Any, grouped: bool) -> None:
    """The bounding is the operator: one shuffle by the id, one sort by it, no window and
    no join of its own (grouped under 'public': the positions' broadcast join and the
    window numbering the groups found, as before)."""
    if grouped:
        q = events.groupBy("country").agg(_column("mean", keys="public").alias("out"))
    else:
        q = events.agg(_column("mean").alias("out"))
    physical = _plan(q).split("== Physical Plan ==")[1]
    assert physical.count("HdpUnitBound") == 1, physical
    assert physical.count("Exchange hashpartitioning(user_id") == 1  # by the id itself
    assert physical.count("Sort [user_id") == 1
    assert physical.count("Window [") == (1 if grouped else 0), physical
    assert physical.count("Join") == (1 if grouped else 0), physical
    if grouped:
        assert physical.count("BroadcastHashJoin") == 1


def test_aggregators_of_one_aggregate_share_the_bounding(events: Any) -> None:
    """A mean and a histogram in one aggregate: one bounding and one W̃ per group."""
    mean = _column("mean", keys="public").unsafe_seed(1)
    hist = _column("histogram", keys="public").unsafe_seed(2)
    rows = events.groupBy("country").agg(mean.alias("m"), hist.alias("h")).collect()
    assert sorted(r["country"] for r in rows) == KEYS
    assert all(r["m"]["weight"] == r["h"]["weight"] for r in rows)
    physical = _plan(events.groupBy("country").agg(mean.alias("m"), hist.alias("h")))
    assert physical.split("== Physical Plan ==")[1].count(
        "Exchange hashpartitioning(user_id") == 1


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"keys": "private"}, "`keys`"),
    ({"max_groups": 0}, "`max_groups`"),
    ({"max_rows": 2.5}, "`max_rows`"),
    ({"privacy_unit": ""}, "`privacy_unit`"),
    ({"eps_cap": -1.0}, "`eps_cap`"),
    ({"weight_share": 2.0}, "`weight_share`"),
])
def test_parameter_errors(kwargs: dict[str, Any], needle: str) -> None:
    args = {**UNIT, **kwargs}
    with pytest.raises(ParameterError, match=needle):
        hs.hdp_mean("amount", eps="eps", lower=0, upper=500, **args)


@pytest.mark.parametrize("name", ["max_groups", "max_rows", "eps_cap", "weight_share"])
def test_unit_options_need_a_unit(name: str) -> None:
    options: dict[str, Any] = {name: 1}
    with pytest.raises(ParameterError, match=f"`{name}`.*`privacy_unit`"):
        hs.hdp_mean("amount", eps="eps", lower=0, upper=500, **options)


@pytest.mark.parametrize(("build", "message"), [
    (lambda df: df.groupBy("country").agg(_column("mean")), "privacy decision"),
    (lambda df: df.groupBy("user_id").agg(_column("mean", keys="public")),
     "`privacy_unit` column 'user_id' identifies people"),
    (lambda df: df.agg(hs.hdp_mean("user_id", eps="eps", lower=0, upper=9, **UNIT)),
     "`privacy_unit` column 'user_id' identifies people"),
    (lambda df: df.withColumnRenamed("user_id", "uid").agg(_column("mean")),
     "`privacy_unit` names column 'user_id'"),
    (lambda df: df.withColumn("user_id", df.amount).agg(_column("mean")),
     "must hold integers or strings, got type double"),
])
def test_analysis_errors(events: Any, build: Any, message: str) -> None:
    with pytest.raises(Exception, match=message):
        build(events).collect()


def test_connect_columns_equal_the_release_api(connect_server: Any) -> None:
    """On Spark Connect (the run's server started with the extension: its injected planner
    strategy plans the bounding operator, no py4j call), a grouped mean, a global histogram
    and a grouped SQL mean release the release API's numbers for the query's key; their
    plans hold the operator, one shuffle by the id and one sort, and no query bounding key
    (``unit_column_job.py`` checks the plans)."""
    pytest.importorskip("pyspark.sql.connect")
    job = Path(__file__).with_name("unit_column_job.py")
    got = connect_server.run(job, conf={"spark.sql.shuffle.partitions": "3"})
    assert "connect" in got["session"]
    assert len(got["mean"]) == len(KEYS)
    for estimate, ref, weight, ref_weight in got["mean"]:
        assert (estimate, weight) == (ref, ref_weight)
    bins, ref_bins, weight, ref_weight = got["hist"]
    assert (bins, weight) == (ref_bins, ref_weight)
    sql, sql_ref = got["sql"]
    assert len(sql) == len(KEYS)
    assert sql == sql_ref
