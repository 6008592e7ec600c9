"""Engine equality (pandas vs Spark) and the simulation transforms (T-SYS-1, -3)."""

from __future__ import annotations

import math
import os
import sys
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.ldp as L
import hdp_spark.pandas as pdl
from hdp_spark.errors import EpsilonColumnError

# Spark's Python workers must run this interpreter (numpy, pandas, pyarrow, randomgen);
# set before the session fixture starts the JVM (modules are imported at collection).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

N = 1200


def _reports() -> tuple[pd.DataFrame, L.FrequencyOracle]:
    rng = np.random.default_rng(42)  # design-ok: synthetic test data
    eps = rng.choice([0.0, 0.3, 0.5, 1.0, 2.0], N).astype(float)
    active = eps > 0
    e_act = eps[active]
    n_act = int(active.sum())
    x = rng.uniform(-1, 1, n_act)
    lap = np.full(N, np.nan)
    lap[active] = L.laplace(x * 5 + 10, e_act, lower=5, upper=15, unsafe_seed="e1")
    rr = np.full(N, np.nan)
    rr[active] = L.randomized_response(x, e_act, unsafe_seed="e2")
    du40: list[Any] = [None] * N
    v40 = L.duchi(rng.normal(size=(n_act, 40)) * 0.2, e_act, radius=2.0, unsafe_seed="e4")
    for pos, a in zip(np.flatnonzero(active), v40, strict=True):
        du40[pos] = a.tolist()
    oracle = L.FrequencyOracle.plan(eps, 7, phi_seed=3)
    rep = L.jl_frequency_report(rng.integers(0, 7, n_act), e_act, oracle=oracle, unsafe_seed="e5")
    j = np.full(N, np.nan)
    b = np.full(N, np.nan)
    j[active], b[active] = rep.index, rep.sign
    # malformed reports (skipped, counted): NaN, bad lengths, NaN coordinates, bad indices
    lap[5:9] = np.nan
    rr[9] = np.nan
    du40[13], du40[18], du40[19] = [0.0] * 39, [np.nan] + [0.0] * 39, None
    j[14], j[15], j[16] = -1.0, 2.5, float(oracle.m + 3)
    b[17] = np.nan
    g = rng.choice(["a", "b", "c"], N)
    df = pd.DataFrame({"g": g, "eps": eps, "lap": lap, "rr": rr, "du40": du40,
                       "j": j, "b": b})
    return df, oracle


def _specs(oracle: L.FrequencyOracle) -> list[Any]:
    return [
        L.ldp_mean("lap", eps="eps", mechanism="laplace", lower=5, upper=15),
        L.ldp_mean("rr", eps="eps", mechanism="rr", weights="uniform"),
        L.ldp_mean_vector("du40", eps="eps", d=40, radius=2.0, weights="inverse_variance"),
        L.ldp_distribution("j", "b", eps="eps", oracle=oracle),
    ]


def _spark_frame(spark: Any, pdf: pd.DataFrame) -> Any:
    frame = spark.createDataFrame(pdf).repartition(3).cache()
    frame.count()
    return frame


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.spark
def test_pandas_and_spark_agree_exactly(spark: Any) -> None:
    warnings.simplefilter("ignore", L.LdpEpsilonWarning)
    import hdp_spark.spark as sl

    pdf, oracle = _reports()
    specs = _specs(oracle)
    keys = ["a", "b", "c", "zz"]
    res_pd = pdl.ldp_release(pdf, *specs, by="g", keys=keys, already_randomized=True)
    sdf = _spark_frame(spark, pdf)
    res_sp = sl.ldp_release(sdf, *specs, by="g", keys=keys, already_randomized=True)
    # identical pre-finalize aggregates
    for t_pd, t_sp in zip(res_pd.tables, res_sp.tables, strict=True):
        assert set(t_pd) == set(t_sp)
        for key in t_pd:
            assert t_pd[key] == t_sp[key]
    # identical outputs, value by value
    rows_pd, rows_sp = res_pd.rows(), res_sp.rows()
    assert len(rows_pd) == 4
    for a, b in zip(rows_pd, rows_sp, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert _same(a[k], b[k]), k
    # malformed reports were skipped and counted, never raised on
    row_all = {r["g"]: r for r in rows_pd}
    malformed = int(np.count_nonzero(pdf["eps"].to_numpy()[[13, 18, 19]] > 0))
    assert sum(row_all[k]["du40_mean_skipped"] for k in "abc") == malformed
    assert row_all["zz"]["lap_mean_n"] == 0
    assert row_all["zz"]["lap_mean_fallback"]
    sdf.unpersist()


@pytest.mark.spark
def test_invalid_eps_is_rejected_with_counts(engine: Any) -> None:
    pdf = pd.DataFrame({"y": [1.0, -1.0, 1.0], "eps": [0.5, -1.0, float("nan")]})
    spec = L.ldp_mean("y", eps="eps", mechanism="rr")
    with pytest.raises(EpsilonColumnError, match="2 row"):
        L.agg(engine.frame(pdf), spec, already_randomized=True)
    pdf = pd.DataFrame({"y": [1.0, -1.0], "eps": [0.5, 2.0**-30]})
    with pytest.raises(EpsilonColumnError, match="1 row"):
        L.agg(engine.frame(pdf), spec, already_randomized=True)


@pytest.mark.spark
def test_spark_simulation_replays_and_aggregates(spark: Any) -> None:
    import hdp_spark.spark as sl

    rng = np.random.default_rng(1)  # design-ok: synthetic test data
    n = 2000
    pdf = pd.DataFrame({
        "uid": np.arange(n),
        "x": rng.uniform(-1, 1, n),
        "c": rng.integers(0, 4, n).astype(float),
        "eps": np.where(np.arange(n) % 10 == 0, 0.0, 1.0),
    })
    sdf = spark.createDataFrame(pdf).repartition(2)
    sim = sl.ldp_simulate(sdf, "x", eps="eps", randomizer=L.LaplaceRandomizer(),
                          unsafe_seed="sim", id="uid")
    first = sim.orderBy("x").toPandas()
    second = sim.orderBy("x").toPandas()  # a second action replays the same draws
    pd.testing.assert_frame_equal(first, second)
    assert first.loc[first["eps"] == 0, "x_report"].isna().all()
    assert first.loc[first["eps"] > 0, "x_report"].notna().all()
    out = sl.ldp_agg(sim, L.ldp_mean("x_report", eps="eps", mechanism="laplace")).toPandas()
    assert out.columns[0] == "x_report_mean"  # the materialized output table
    assert len(out) == 1
    truth = float(pdf.loc[pdf["eps"] > 0, "x"].mean())
    assert abs(out["x_report_mean_raw"][0] - truth) <= out["x_report_mean_radius"][0]
    oracle = sl.ldp_oracle(sdf, eps="eps", d=4)  # JL: signs hashed on executors and driver
    fo = sl.ldp_simulate(sdf, "c", eps="eps", randomizer=L.JLRandomizer(oracle), output="r",
                         unsafe_seed="fo", id="uid")
    res = sl.ldp_agg(fo, L.ldp_distribution("r_j", "r_b", eps="eps", oracle=oracle)).toPandas()
    pmf = np.bincount(pdf.loc[pdf["eps"] > 0, "c"].astype(int), minlength=4) / (n - n // 10)
    assert np.max(np.abs(np.array(res["r_j_pmf_raw"][0]) - pmf)) <= res["r_j_pmf_radius"][0]


def test_pandas_simulation_transform() -> None:
    pdf = pd.DataFrame({
        "x": [0.5, -0.2, np.nan, 1.0],
        "v": [[0.1, 0.2], None, [3.0, 4.0], [0.0, 0.0]],
        "eps": [1.0, 0.0, 0.5, 2.0],
    })
    out = pdl.ldp_simulate(pdf, "x", eps="eps", randomizer=L.RRRandomizer(), unsafe_seed=1)
    assert out["x_report"].isna().tolist() == [False, True, False, False]
    assert set(out["x_report"].dropna().tolist()) <= {-1, 1}
    again = pdl.ldp_simulate(pdf, "x", eps="eps", randomizer=L.RRRandomizer(), unsafe_seed=1)
    pd.testing.assert_frame_equal(out, again)
    vec = pdl.ldp_simulate(pdf, "v", eps="eps", randomizer=L.DuchiRandomizer(2), output="y")
    assert vec["y"][1] is None
    assert len(vec["y"][0]) == 2
    assert "x" in vec.columns
    assert "y" in vec.columns
