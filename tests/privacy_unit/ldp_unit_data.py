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
