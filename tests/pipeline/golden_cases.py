"""The golden cases: every public release function with fixed seeds on a fixed table.

``golden.json`` holds their outputs as recorded from the code before the one-pipeline
refactor (issue 16), re-recorded once for the exact noise's version 2 (issue 31: the integer
noise scale; only the central noise changed, the columns, types and local-DP cases are as
before); :mod:`test_golden` checks that both engines still produce exactly them. Re-recorded for
issue 48: the user-level mean's ``ci_low``/``ci_high`` widened by its new ``bias_bound``
(``noise_ci_low``/``noise_ci_high`` added), the LDP mean's ``bias_bound`` added; nothing
else changed.
Regenerate only on purpose: ``PYTHONPATH=$PWD python tests/pipeline/golden_cases.py``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

GOLDEN = Path(__file__).with_name("golden.json")


def table() -> pd.DataFrame:
    """A fixed synthetic table with columns for every aggregator."""
    rng = np.random.default_rng(16)
    n = 300
    uid = rng.integers(0, 50, n)
    planted = rng.random(n) < 0.7
    return pd.DataFrame(
        {
            "x": rng.uniform(-20, 120, n),
            "y": rng.uniform(0, 10, n),
            "eps": rng.choice([0.1, 0.5, 1.0, 3.0, math.inf], n),
            "ceps": rng.uniform(0.05, 4.0, n),
            "g": rng.choice(["a", "b", "c"], n),
            "c": rng.choice(["u", "v", "w", "q"], n),
            "uid": uid,
            "rid": np.arange(n),
            "ueps": np.array([0.5, 1.0, 2.0])[uid % 3],
            "eps_ldp": rng.choice([0.25, 0.5, 1.0], n),
            "h0": np.where(planted, 1, rng.integers(0, 4, n)),
            "h1": np.where(planted, 1, rng.integers(0, 4, n)),
            "h2": np.where(planted, 1, rng.integers(0, 4, n)),
        }
    )


def cases(mod: Any, ldp_frame: Callable[[Any], Any]) -> dict[str, Callable[[Any], Any]]:
    """Name -> function(native table) -> output frame, for ``hdp_spark.pandas``/``.spark``."""
    from hdp_spark import EpsGrid

    cols = ["h0", "h1", "h2"]
    domains = {c: [0, 1, 2, 3] for c in cols}
    return {
        "agg_two_means": lambda df: mod.agg(
            df,
            mod.hdp_mean("x", eps="eps", lower=0, upper=100),
            mod.hdp_mean("y", eps="ceps", lower=0, upper=10, method="hpm-a", alias="yg",
                         eps_grid=EpsGrid(ratio=1.5, lowest=0.01, highest=10)),
            by="g", keys=["a", "b", "z"], unsafe_seed=101,
        ),
        "agg_global": lambda df: mod.agg(
            df, mod.hdp_mean("x", eps="eps", lower=0, upper=100, method="adpm"),
            mod.hdp_mean("y", eps="eps", lower=0, upper=10, alias="y2"), unsafe_seed=102,
        ),
        "histogram_counts_project": lambda df: mod.histogram(
            df, mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
            by="g", keys=["a", "b", "z"], unsafe_seed=103, counts=True, project=True,
        ),
        "histogram_grid": lambda df: mod.histogram(
            df, mod.hdp_histogram("c", eps="ceps", categories=["u", "v"],
                                  eps_grid=EpsGrid(ratio=2.0, lowest=0.01, highest=10)),
            unsafe_seed=104,
        ),
        "user_mean": lambda df: mod.user_mean(
            df, mod.hdp_user_mean("x", user="uid", eps="ueps", lower=0, upper=100),
            unsafe_seed=105,
        ),
        "user_mean_by": lambda df: mod.user_mean(
            with_parity(df),
            mod.hdp_user_mean("x", user="uid", eps="ueps", lower=0, upper=100),
            by="g2", keys=[0, 1], unsafe_seed=106,
        ),
        "heavy_hitters": lambda df: mod.heavy_hitters(
            df, mod.hdp_heavy_hitters(cols, domains=domains, eps0=2.0), unsafe_seed=107
        ).table,
        "attribute_histograms": lambda df: mod.attribute_histograms(
            df, cols, domains=domains, eps0=1.0, unsafe_seed=108
        ).table,
        "ldp_agg": lambda df: mod.ldp_agg(
            ldp_frame(df),
            mod.ldp_mean("xr", eps="eps_ldp", mechanism="laplace"),
            by="g", keys=["a", "b", "z"],
        ),
    }


def with_parity(df: Any) -> Any:
    """Adds the public grouping column ``g2`` = uid mod 2 (each user in one group)."""
    if isinstance(df, pd.DataFrame):
        return df.assign(g2=df["uid"] % 2)
    return df.withColumn("g2", df["uid"] % 2)


def ldp_frame_of(mod: Any) -> Callable[[Any], Any]:
    """Adds simulated Laplace reports ``xr`` of ``x`` clipped to [-10, 10] (seeded)."""
    import hdp_spark.ldp as L

    def make(df: Any) -> Any:
        if isinstance(df, pd.DataFrame):
            df = df.assign(xc=df["x"].clip(-10, 10) / 10)
        else:
            from pyspark.sql import functions as F

            df = df.withColumn("xc", F.greatest(F.least(F.col("x"), F.lit(10.0)),
                                                F.lit(-10.0)) / 10)
        return mod.ldp_simulate(df, "xc", eps="eps_ldp", randomizer=L.LaplaceRandomizer(),
                                output="xr", unsafe_seed=109, id="rid")

    return make


def _plain(value: Any) -> Any:
    """A JSON-able canonical form: exact floats as repr strings, containers as lists/dicts."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.ndarray | list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return _plain(value.asDict())
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return "nan" if math.isnan(f) else repr(f)
    return str(value)


def canonical(frame: Any) -> dict[str, Any]:
    """Columns and rows of an output frame (pandas or Spark) in canonical form."""
    if isinstance(frame, pd.DataFrame):
        pdf, types = frame, [str(t) for t in frame.dtypes]
    else:
        pdf, types = frame.toPandas(), [f.dataType.simpleString() for f in frame.schema.fields]
    return {
        "columns": [str(c) for c in pdf.columns],
        "types": types,
        "rows": [[_plain(v) for v in row] for row in pdf.itertuples(index=False, name=None)],
    }


def record() -> None:
    """Write ``golden.json`` from the pandas and Spark outputs of the current code."""
    from pyspark.sql import SparkSession

    import hdp_spark.pandas as hpd
    import hdp_spark.spark as hs

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC").getOrCreate()
    )
    pdf = table()
    sdf = spark.createDataFrame(pdf).repartition(3)
    out: dict[str, Any] = {}
    for engine, mod, df in (("pandas", hpd, pdf), ("spark", hs, sdf)):
        for name, run in cases(mod, ldp_frame_of(mod)).items():
            out[f"{engine}/{name}"] = canonical(run(df))
    GOLDEN.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    spark.stop()
    print(f"wrote {GOLDEN} ({len(out)} cases)", file=sys.stderr)


if __name__ == "__main__":
    record()
