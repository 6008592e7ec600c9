"""Speed of a grouped mean under a privacy unit: hdp_spark (Spark, local[2]) against
PipelineDP (issue 50's anchor).

The table: --persons persons with 2 rows each (1M rows at the default), every person's
rows in one of 10 public groups, an amount in [0, 500] and ε 1 on every row.

* PipelineDP 0.3.1 (LocalBackend, Laplace, public partitions): the grouped mean with
  ``max_partitions_contributed=1, max_contributions_per_partition=2``, from a Python list.
* hdp_spark: ``agg(df, hdp_mean, by="grp", keys=0..9, privacy_unit="person",
  max_groups=1, max_rows=2)`` on a cached Spark DataFrame of the same rows (``spark``), and
  on the pandas DataFrame itself (``pandas``: in one process, as PipelineDP's LocalBackend).

Prints each library's wall time per release (PipelineDP once, hdp_spark the median of
--repeats after a warm-up) and their ratio, per engine of --engines.

Run: benchmarks/.venv-anchors/bin/python benchmarks/anchors/unit_speed.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import use_repo

use_repo()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

KEYS = list(range(10))


def table(persons: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    person = np.repeat(np.arange(persons, dtype=np.int64), 2)
    return pd.DataFrame({"person": person, "grp": person % len(KEYS),
                         "amount": rng.uniform(0.0, 500.0, len(person)), "eps": 1.0})


def pipeline(df: pd.DataFrame) -> float:
    import pipeline_dp

    start = time.perf_counter()
    rows = list(zip(df["person"].tolist(), df["grp"].tolist(), df["amount"].tolist(),
                    strict=True))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=0.0)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.MEAN],
        max_partitions_contributed=1, max_contributions_per_partition=2,
        min_value=0.0, max_value=500.0)
    ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda t: t[0],
                                     partition_extractor=lambda t: t[1],
                                     value_extractor=lambda t: t[2])
    out = engine.aggregate(rows, params, ext, public_partitions=KEYS)
    accountant.compute_budgets()
    assert len(dict(out)) == len(KEYS)
    return time.perf_counter() - start


def ours(df: pd.DataFrame, repeats: int) -> list[float]:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    spark = (hs.configure(SparkSession.builder.master("local[2]"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.createDataFrame(df).cache()
    sdf.count()

    def run() -> float:
        start = time.perf_counter()
        hs.agg(sdf, hs.hdp_mean("amount", eps="eps", lower=0, upper=500), by="grp",
               keys=KEYS, privacy_unit="person", max_groups=1, max_rows=2).collect()
        return time.perf_counter() - start

    run()
    times = [run() for _ in range(repeats)]
    spark.stop()
    return times


def ours_pandas(df: pd.DataFrame, repeats: int) -> list[float]:
    import hdp_spark.pandas as hpd

    def run() -> float:
        start = time.perf_counter()
        hpd.agg(df, hpd.hdp_mean("amount", eps="eps", lower=0, upper=500), by="grp",
                keys=KEYS, privacy_unit="person", max_groups=1, max_rows=2)
        return time.perf_counter() - start

    run()
    return [run() for _ in range(repeats)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--persons", type=int, default=500_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engines", default="spark,pandas")
    a = p.parse_args()
    df = table(a.persons)
    runs = {"spark": ours, "pandas": ours_pandas}
    hdp = {e: runs[e](df, a.repeats) for e in a.engines.split(",")}
    pdp = pipeline(df)
    print(f"rows {len(df)}, persons {a.persons}, load {os.getloadavg()[0]:.1f}")
    print(f"PipelineDP {pdp:7.2f} s")
    for engine, times in hdp.items():
        med = statistics.median(times)
        print(f"hdp_spark ({engine}) {med:7.2f} s (all {' '.join(f'{t:.2f}' for t in times)})")
        print(f"PipelineDP / hdp_spark ({engine}) {pdp / med:.1f}x")


if __name__ == "__main__":
    main()
