"""Run releases of every aggregator through Spark Connect and print them as JSON.

Used by test_connect.py. A separate process: a local Spark Connect server cannot share a
JVM with the classic session of the test run. ``connect_cases`` is shared with the test,
which runs the same cases on pandas.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote


def connect_cases(mod: Any) -> dict[str, Callable[[Any], Any]]:
    """Name -> function(table) -> output frame, for a backend module (pandas or Spark)."""
    from hdp_spark import EpsGrid

    cols = ["h0", "h1", "h2"]
    domains = {c: [0, 1, 2, 3] for c in cols}

    def key_frame(df: Any, keys: list[str]) -> Any:
        """A public key table built independently of ``df``, in ``df``'s engine."""
        frame = pd.DataFrame({"g": keys})
        return frame if isinstance(df, pd.DataFrame) else df.sparkSession.createDataFrame(frame)

    return {
        "mean": lambda df: mod.agg(
            df,
            mod.hdp_mean("x", eps="eps", lower=0, upper=100),
            mod.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", alias="a",
                         eps_grid=EpsGrid(ratio=1.5, lowest=0.01, highest=10)),
            by="g", keys=["a", "b", "z"], unsafe_seed=11,
        ),
        # above GRID_JOIN_MIN_POINTS (18,426 points): the grid is read through a join
        "mean_fine_grid": lambda df: mod.agg(
            df,
            mod.hdp_mean("x", eps="eps", lower=0, upper=100,
                         eps_grid=EpsGrid(ratio=1.0005, lowest=0.01, highest=100)),
            by="g", keys=["a", "b", "z"], unsafe_seed=16,
        ),
        # keys given as a DataFrame of the engine (a Connect DataFrame on Connect)
        "mean_keys_frame": lambda df: mod.agg(
            df, mod.hdp_mean("x", eps="eps", lower=0, upper=100),
            by="g", keys=key_frame(df, ["b", "z", "a"]), unsafe_seed=17,
        ),
        "histogram_keys_frame": lambda df: mod.histogram(
            df, mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
            by="g", keys=key_frame(df, ["c", "a"]), unsafe_seed=18,
        ),
        "histogram": lambda df: mod.histogram(
            df, mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
            by="g", keys=["a", "b", "z"], unsafe_seed=12, counts=True,
        ),
        "user_mean": lambda df: mod.user_mean(
            df, mod.hdp_user_mean("x", user="uid", eps="ueps", lower=0, upper=100),
            unsafe_seed=13,
        ),
        "ldp_mean": lambda df: mod.ldp_agg(
            df, mod.ldp_mean("r", eps="eps_ldp", mechanism="laplace"), by="g",
            keys=["a", "b", "z"], already_randomized=True,
        ),
        # one agg call mixing kinds: a mean, a histogram and a user-level mean (issue 16)
        "agg_mixed": lambda df: mod.agg(
            df,
            mod.hdp_mean("x", eps="eps", lower=0, upper=100),
            mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
            mod.hdp_user_mean("x", user="uid", eps="ueps", lower=0, upper=100),
            unsafe_seed=19,
        ),
        # many rows per person (issue 50): the bounding's windows and ranks on Connect
        "privacy_unit": lambda df: mod.agg(
            df,
            mod.hdp_mean("x", eps="eps", lower=0, upper=100),
            mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
            by="g", keys=["a", "b", "z"], privacy_unit="uid", max_groups=2, max_rows=3,
            unsafe_seed=23,
        ),
        # private group keys: DP partition selection with per-row ε (issue 22)
        "selection": lambda df: mod.agg(
            df,
            mod.hdp_mean("x", eps="eps", lower=0, upper=100),
            mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
            by="g", keys=mod.select_keys(delta=1e-3, c=3.0, share=0.5), unsafe_seed=20,
        ),
        "heavy_hitters": lambda df: mod.heavy_hitters(
            df, mod.hdp_heavy_hitters(cols, domains=domains, eps0=2.0), unsafe_seed=14
        ).table,
        "attribute_histograms": lambda df: mod.attribute_histograms(
            df, cols, domains=domains, eps0=1.0, unsafe_seed=15
        ).table,
    }


def connect_errors(mod: Any) -> dict[str, Callable[[Any], Any]]:
    """Name -> function(Spark DataFrame) that must raise a ParameterError on Connect."""
    mean = mod.hdp_mean("x", eps="eps", lower=0, upper=100)
    return {
        "keys_is_input": lambda df: mod.agg(df, mean, by="g", keys=df),
        "keys_distinct": lambda df: mod.agg(df, mean, by="g", keys=df.select("g").distinct()),
        "keys_group_count": lambda df: mod.agg(df, mean, by="g", keys=df.groupBy("g").count()),
        "keys_joined": lambda df: mod.agg(
            df, mean, by="g", keys=df.select("g").join(df.select("g").limit(1), "g")
        ),
        "by_value_column": lambda df: mod.agg(df, mean, by="x", keys=[1.0]),
        "by_eps_column": lambda df: mod.agg(df, mean, by="eps", keys=[1.0]),
    }


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Drop nested (array/struct) columns, compared in the engine tests, for JSON transport."""
    nested = [
        c for c in frame.columns
        if frame[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any()
    ]
    return frame.drop(columns=nested)


def run(spark: Any, path: str) -> dict[str, Any]:
    """Every case and error of the table at ``path`` on the Connect session ``spark``."""
    import hdp_spark.spark as hs

    df = spark.createDataFrame(pd.read_parquet(path)).repartition(3)
    out: dict[str, Any] = {"session": type(spark).__module__}
    for name, case in connect_cases(hs).items():
        frame = case(df)
        first = plain(frame.toPandas())
        second = plain(frame.toPandas())  # re-evaluation must give identical numbers
        assert first.equals(second), name
        out[name] = first.to_dict(orient="records")
    errors: dict[str, str] = {}
    for name, fail in connect_errors(hs).items():
        try:
            fail(df)
            errors[name] = "no error"
        except Exception as exc:  # reported to the test, which checks the class and text
            errors[name] = f"{type(exc).__name__}: {exc}"
    out["errors"] = errors
    return out


def main() -> None:

    spark = local_remote().getOrCreate()
    try:
        print(json.dumps(run(spark, sys.argv[1]), default=str))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
