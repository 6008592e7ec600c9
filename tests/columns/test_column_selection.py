"""The Spark Column aggregators under partition selection, ``keys=select_keys(...)``: the
release API's selection and estimates for the same key, no row (and no trace in the plan)
for an unselected group, one selection per aggregate, a one-person group released with
probability at most δ, and the refusals."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from scipy import stats

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey

sys.path.insert(0, str(Path(__file__).parent))
from column_job import query_key

sys.path.pop(0)

pytestmark = pytest.mark.spark

SEL = hs.select_keys(delta=1e-6, c=1.0, share=0.4)


def _table(seed: int = 4, solos: int = 60) -> pd.DataFrame:
    """Three large merchants and ``solos`` one-person merchants (never to be released)."""
    rng = np.random.default_rng(seed)
    n = 3000
    merchant = rng.choice(["m-big", "m-mid", "m-small"], n, p=[0.6, 0.3, 0.1]).astype(object)
    merchant[:solos] = [f"solo-{i:04d}" for i in range(solos)]
    return pd.DataFrame({"spend": rng.uniform(0, 600, n),
                         "eps": rng.choice([0.25, 0.5, 1.0, 3.0], n),
                         "cat": rng.choice(["a", "b", "c", "d"], n),
                         "merchant": merchant})


@pytest.fixture(scope="module")
def frame(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("selection") / "t.parquet"
    _table().to_parquet(path)
    return spark.read.parquet(str(path))


def _plan(df: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    return out.getvalue()


@pytest.mark.parametrize("kind", ["mean", "histogram"])
def test_selected_column_equals_the_release_api(frame: Any, kind: str) -> None:
    """Same key (the Column's, derived with the query's fingerprint): the same groups are
    selected, with the same noisy weights and estimates, as agg(..., keys=select_keys)."""
    if kind == "mean":
        col = hs.hdp_mean("spend", eps="eps", lower=0, upper=500, keys=SEL).unsafe_seed(8)  # type: ignore[attr-defined]
    else:
        col = hs.hdp_histogram("cat", eps="eps", categories=["a", "b", "c"],  # type: ignore[attr-defined]
                               keys=SEL).unsafe_seed(8)
    got = frame.groupBy("merchant").agg(col.alias("out")).orderBy("merchant").collect()
    ref = hs.agg(frame, col, by="merchant", keys=SEL,
                 unsafe_seed=query_key(frame, col, ("merchant",))).orderBy("merchant").collect()
    name = col.spec.name
    assert [r["merchant"] for r in got] == [r["merchant"] for r in ref] == [
        "m-big", "m-mid", "m-small"]
    for g, r in zip(got, ref, strict=True):
        out = g["out"]
        assert out["weight"] == r[f"{name}_weight"]
        assert out["privacy"] == r[f"{name}_privacy"] == "partition_selection"
        assert out["delta"] == r[f"{name}_delta"] == 1e-6
        if kind == "mean":
            fields = ("ci_low", "ci_high", "noise_ci_low", "noise_ci_high", "bias_bound")
            assert (out["estimate"], *(out[f] for f in fields)) == (
                r[name], *(r[f"{name}_{f}"] for f in fields))
            assert (out["ci_low"], out["ci_high"], out["bias_bound"]) == (0.0, 500.0, 500.0)
        else:
            fields = ("category", "frequency", "ci_low", "ci_high", "noise_ci_low",
                      "noise_ci_high")
            assert [tuple(b[f] for f in fields) for b in out["bins"]] == [
                tuple(b[f] for f in fields) for b in r[name]]
            assert out["bias_bound"] == r[f"{name}_bias_bound"] == 1.0
    assert "n" not in got[0]["out"].asDict()  # no exact count under selection


def test_unselected_groups_leave_no_row_and_no_trace(frame: Any) -> None:
    """The filter sits above the aggregate: no solo merchant in the rows, and the plan
    (parsed to physical) names no candidate key; re-evaluation repeats the release."""
    col = hs.hdp_mean("spend", eps="eps", lower=0, upper=500, keys=SEL)
    q = frame.groupBy("merchant").agg(col.alias("s"))
    rows = q.collect()
    assert sorted(r["merchant"] for r in rows) == ["m-big", "m-mid", "m-small"]
    assert sorted(rows) == sorted(q.collect())
    plan = _plan(q)
    assert "solo-" not in plan
    assert "m-big" not in plan
    assert "Filter isnotnull(" in plan  # the selection's filter
    physical = plan.split("== Physical Plan ==")[1].split("== Initial Plan ==")[0]
    assert physical.count("hdp_mean_select(") == 1  # one selection pass, evaluated once
    assert physical.count("ObjectHashAggregate(") == 2  # partial + final: no extra pass


def test_aggregators_of_one_aggregate_share_one_selection(frame: Any) -> None:
    """One selection per aggregate: the first aggregator's (its key, its cells), so its
    groups and weights do not depend on the others; every aggregator reads that W̃ and takes
    (1 - f)/A of the budget (A = 2 here: wider intervals than alone)."""
    mean = hs.hdp_mean("spend", eps="eps", lower=0, upper=500, keys=SEL).unsafe_seed(2)  # type: ignore[attr-defined]
    hist = hs.hdp_histogram("cat", eps="eps", categories=["a", "b"], keys=SEL).unsafe_seed(5)  # type: ignore[attr-defined]
    both = frame.groupBy("merchant").agg(mean.alias("m"), hist.alias("h")).orderBy(
        "merchant").collect()
    alone = frame.groupBy("merchant").agg(mean.alias("m")).orderBy("merchant").collect()
    assert [r["merchant"] for r in both] == [r["merchant"] for r in alone]
    for b, a in zip(both, alone, strict=True):
        assert b["m"]["weight"] == b["h"]["weight"] == a["m"]["weight"]
        assert (b["m"]["noise_ci_high"] - b["m"]["noise_ci_low"]
                > a["m"]["noise_ci_high"] - a["m"]["noise_ci_low"])


@pytest.mark.statistical
def test_one_person_groups_are_released_with_probability_at_most_delta(spark: Any) -> None:
    """4,000 one-person groups at the largest weight (ε = c): the number released follows
    Binomial(4000, p), p = q^(T - K_c)/(1 + q) <= δ the exact release probability of a
    singleton (design note, step 2); a large group is always released. Two-sided binomial
    test at 1e-6 (false failures)."""
    sel = hs.select_keys(delta=0.01, c=1.0, share=0.5, step=0.25)
    n = 4000
    pdf = pd.DataFrame({"g": [f"s{i}" for i in range(n)] + ["big"] * 400,
                        "x": np.linspace(0, 1, n + 400), "eps": 1.0})
    df = spark.createDataFrame(pdf)
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=1, keys=sel)
    rows = df.groupBy("g").agg(col.alias("m")).collect()
    keys = {r["g"] for r in rows}
    assert "big" in keys
    released = len(keys - {"big"})
    qf = float(np.exp(-1.0 / float(sel.selection_scale)))
    p = qf ** (sel.threshold - sel.cap_units) / (1 + qf)
    assert p <= sel.delta
    test = stats.binomtest(released, n, p)
    assert test.pvalue > 1e-6, (released, n * p)


@pytest.mark.parametrize(("build", "message"), [
    (lambda df, c: df.groupBy("merchant").agg(c, F.count("*")),
     "exact Spark aggregate"),
    (lambda df, c: df.agg(c), "needs a grouped aggregate"),
    (lambda df, c: df.groupBy("merchant").agg(
        c, hs.hdp_mean("spend", eps="eps", lower=0, upper=9, keys="public")),
     "must take the same `keys=`"),
    (lambda df, c: df.groupBy("merchant").agg(
        c, hs.hdp_mean("spend", eps="eps", lower=0, upper=9,
                       keys=hs.select_keys(delta=1e-6, c=2.0, share=0.4))),
     "must take the same `keys=`"),
    (lambda df, c: df.withColumn("e2", F.col("eps") * 2).groupBy("merchant").agg(
        c, hs.hdp_mean("spend", eps="e2", lower=0, upper=9, keys=SEL)),
     "same `eps` column and `eps_grid`"),
])
def test_refusals(frame: Any, build: Any, message: str) -> None:
    col = hs.hdp_mean("spend", eps="eps", lower=0, upper=500, keys=SEL)
    with pytest.raises(Exception, match=message) as err:
        build(frame, col).collect()
    assert "solo-" not in str(err.value)


def test_expressions_over_a_selected_column(frame: Any) -> None:
    """Outputs may compute on the released struct and on the grouping values."""
    col = hs.hdp_mean("spend", eps="eps", lower=0, upper=500, keys=SEL).unsafe_seed(1)  # type: ignore[attr-defined]
    rows = frame.groupBy("merchant").agg(
        (col.estimate * 2).alias("twice"), F.upper("merchant").alias("up"),
        col.alias("s")).orderBy("merchant").collect()
    assert [r["up"] for r in rows] == ["M-BIG", "M-MID", "M-SMALL"]
    assert all(r["twice"] == 2 * r["s"]["estimate"] for r in rows)


def _fingerprint(df: Any) -> str:
    found = set(re.findall(r"\b[0-9a-f]{64}\b", _plan(df)))
    assert len(found) == 1, found
    return found.pop()


def test_sql_select_equals_the_release_api(spark: Any, frame: Any) -> None:
    """``hdp_mean(spend, eps, 0, 500, 'select', δ, c, f)``: the Column's selection in SQL,
    the release API's numbers for the registration's key derived with the query's
    fingerprint; a histogram beside it shares the selection."""
    frame.createOrReplaceTempView("hdp_selection_t")
    hs.register_sql(spark, unsafe_seed=8)
    q = spark.sql(
        "SELECT merchant, hdp_mean(spend, eps, 0, 500, 'select', 1e-6, 1.0, 0.4) AS s "
        "FROM hdp_selection_t GROUP BY merchant ORDER BY merchant")
    got = q.collect()
    key = ReleaseKey.resolve(8).for_query(_fingerprint(q))
    ref = hs.agg(frame, hs.hdp_mean("spend", eps="eps", lower=0, upper=500), by="merchant",
                 keys=SEL, unsafe_seed=key).orderBy("merchant").collect()
    assert [r["merchant"] for r in got] == [r["merchant"] for r in ref] == [
        "m-big", "m-mid", "m-small"]
    assert [(r["s"]["estimate"], r["s"]["weight"]) for r in got] == [
        (r["spend_mean"], r["spend_mean_weight"]) for r in ref]
    both = spark.sql(
        "SELECT merchant, hdp_mean(spend, eps, 0, 500, 'adpm', 0.1, 'select', 1e-6, 1.0, 0.4)"
        " AS s, hdp_histogram(cat, eps, array('a', 'b'), 'select', 1e-6, 1.0, 0.4) AS h "
        "FROM hdp_selection_t GROUP BY merchant").collect()
    assert sorted(r["merchant"] for r in both) == ["m-big", "m-mid", "m-small"]
    assert all(r["s"]["weight"] == r["h"]["weight"] for r in both)


@pytest.mark.parametrize(("call", "message"), [
    ("hdp_mean(spend, eps, 0, 500, 'select', 0, 1.0, 0.4)", "`delta` must be in \\(0, 1\\)"),
    ("hdp_mean(spend, eps, 0, 500, 'select', 1e-6, -1, 0.4)", "`c` must be finite and > 0"),
    ("hdp_mean(spend, eps, 0, 500, 'select', 1e-6, 1.0, 'x')", "`share` must be a number"),
    ("hdp_mean(spend, eps, 0, 500, 'select', 1e-6, 1.0, 0.4), count(*)",
     "exact Spark aggregate"),
])
def test_sql_select_refusals(spark: Any, frame: Any, call: str, message: str) -> None:
    frame.createOrReplaceTempView("hdp_selection_t")
    hs.register_sql(spark)
    with pytest.raises(Exception, match=message) as err:
        spark.sql(f"SELECT merchant, {call} FROM hdp_selection_t GROUP BY merchant").collect()
    assert "solo-" not in str(err.value)
