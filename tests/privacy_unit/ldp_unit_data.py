"""The table of the local-DP privacy-unit tests (many reports per person, every mechanism,
invalid ε and malformed reports), shared by the test module and the Spark Connect job."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import hdp_spark.ldp as L


def table(seed: int = 5, n: int = 1500, persons: int = 120
          ) -> tuple[pd.DataFrame, L.FrequencyOracle]:
    """Reports of ``persons`` users (about n/persons each) for the four aggregators."""
    rng = np.random.default_rng(seed)
    eps = rng.choice([0.25, 0.5, 1.0], n)
    uid = rng.integers(0, persons, n).astype(np.int64)
    x = rng.uniform(-1, 1, n)
    lap = L.laplace(x, eps, lower=-1, upper=1, unsafe_seed="u1")
    rr = L.randomized_response(x, eps, unsafe_seed="u2")
    vec = L.duchi(rng.normal(size=(n, 3)) * 0.3, eps, radius=1.0, unsafe_seed="u3")
    oracle = L.FrequencyOracle.plan(eps, 5, phi_seed=2)
    rep = L.jl_frequency_report(rng.integers(0, 5, n), eps, oracle=oracle, unsafe_seed="u4")
    eps[:6] = [np.nan, -1.0, 0.0, np.nan, -0.0, 0.0]  # invalid ε: the person spends 0
    lap[10:14] = np.nan
    vlist: list[Any] = [v.tolist() for v in vec]
    vlist[20], vlist[21] = None, [0.0, np.nan, 0.0]
    return pd.DataFrame({"uid": uid, "eps": eps, "lap": lap, "rr": rr, "vec": vlist,
                         "j": rep.index.astype(np.float64), "b": rep.sign.astype(np.float64),
                         "row": np.arange(n)}), oracle


def ldp_specs(oracle: L.FrequencyOracle) -> list[Any]:
    """The four local-DP aggregators over :func:`table`'s columns."""
    return [L.ldp_mean("lap", eps="eps", mechanism="laplace"),
            L.ldp_mean("rr", eps="eps", mechanism="rr"),
            L.ldp_mean_vector("vec", eps="eps", d=3),
            L.ldp_distribution("j", "b", eps="eps", oracle=oracle)]


def unit_table(seed: int, strings: bool, n: int = 1200, persons: int = 90
               ) -> tuple[pd.DataFrame, L.FrequencyOracle]:
    """:func:`table`'s reports under ids and ε that stress the one-report rule: person 0
    holds a fifth of the rows, person 1 forty rows all at ε 0.5 (many candidates at a
    positive ε), 4 % of the ids null; ε with ties, NaN (``null_eps``: shown to Spark as
    null on even rows), negative, 0 and +∞. ``strings``: the ids as strings, some beyond
    ASCII (a rank reads the id's length in code points)."""
    df, oracle = table(seed, n, persons)
    rng = np.random.default_rng(seed + 100)
    uid = rng.integers(2, persons, n)
    uid[rng.random(n) < 0.2] = 0
    uid[:40] = 1
    eps = rng.choice([0.25, 0.5, 1.0, np.inf, np.nan, -1.0, 0.0], n,
                     p=[0.3, 0.25, 0.2, 0.1, 0.05, 0.05, 0.05])
    eps[:40] = 0.5
    ids: list[Any] = [(f"ü{u}日" if u % 3 == 0 else f"p{u}") if strings else int(u)
                      for u in uid]
    for i in np.flatnonzero(rng.random(n) < 0.04):
        ids[i] = None
    column = pd.Series(ids, dtype=object if strings else "Int64")
    return df.assign(uid=column, eps=eps), oracle


def spark_frame(spark: Any, pdf: pd.DataFrame, strings: bool) -> Any:
    """:func:`unit_table`'s frame on Spark (3 partitions): null ids, NaN ε as null on even
    rows and NaN on odd ones."""
    schema = (f"uid {'string' if strings else 'long'}, eps double, lap double, rr double, "
              "vec array<double>, j double, b double, row long")
    rows = []
    for r in pdf.itertuples(index=False):
        eps = None if np.isnan(r.eps) and r.row % 2 == 0 else float(r.eps)
        uid = None if r.uid is None or r.uid is pd.NA else (
            str(r.uid) if strings else int(r.uid))
        rows.append((uid, eps, float(r.lap), float(r.rr), r.vec, float(r.j), float(r.b),
                     int(r.row)))
    return spark.createDataFrame(rows, schema=schema).repartition(3)
