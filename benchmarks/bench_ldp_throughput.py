"""Throughput of the local-DP randomizers (rows/s) and, optionally, of the aggregators.

Randomizers (``hdp_spark.ldp``, exact integer-only samplers on ChaCha20, one ε per row,
ε log-uniform on [0.05, 2]): Laplace, randomized response, Duchi (d = 10) and the
frequency oracle (d = 100; JL with m sized by erratum E2, and Hadamard). Each call includes
the whole client path: validation, pre-processing, the BLAKE2b digest that binds the
randomness to the input, generator creation and sampling. Scalar mechanisms run as one
call over all rows; Duchi runs in 1M-row batches (memory: three n x d float arrays).
The raw exact discrete-Laplace sampler is timed on its own as a reference.

``--aggregators`` also times ``ldp_agg`` on pandas and on Spark (local[2], native
expressions only; synthetic reports generated natively in Spark and cached), and the
Spark simulation transform (``mapInPandas``).

``--unit`` times, instead, ``ldp_agg`` of a Laplace mean under a privacy unit on Spark
(local[2], one session, the cases interleaved, reports cached): without the unit
(``none``), with it (``unit``: the extension's one-report operator ``HdpLdpUnitBound``),
with it forced to the native windows (``windows``: ``hdp_spark.unitOperator`` false), and
Spark's own per-person aggregate as a floor (``floor``: ``groupBy(id).agg(min(eps),
first(report))``, then the release without a unit), for each ``--persons`` count.

Run: .venv/bin/python benchmarks/bench_ldp_throughput.py [--rows 1000000] [--repeats 3]
     [--aggregators] [--unit [--persons 200000,1000000]] [--smoke] [--json out.json]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_report_args,
    driver_peak_rss_mib,
    fmt,
    interleaved_runs,
    load_average,
    md_table,
    median,
    spark_session,
    uniform,
    use_repo,
    write_report,
)

use_repo()

import numpy as np  # noqa: E402

import hdp_spark.ldp as L  # noqa: E402
from hdp_spark.core.noise import ReleaseKey  # noqa: E402
from hdp_spark.core.noise import vector as vx  # noqa: E402

BATCH = 1_000_000


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _inputs(n: int) -> dict[str, Any]:
    rng = np.random.default_rng(5)  # design-ok: synthetic benchmark inputs, not noise
    return {
        "x": rng.uniform(-1, 1, n),
        "bits": np.where(rng.random(n) < 0.6, 1, -1).astype(np.int8),
        "eps": np.exp(rng.uniform(math.log(0.05), math.log(2.0), n)),
        "cat": rng.integers(0, 100, n),
    }


def _duchi_batched(n: int, eps: np.ndarray, d: int = 10) -> None:
    rng = np.random.default_rng(6)  # design-ok: synthetic benchmark inputs, not noise
    for start in range(0, n, BATCH):
        m = min(BATCH, n - start)
        v = rng.normal(size=(m, d)) * 0.3
        L.duchi(v, eps[start : start + m])


def randomizers(n: int, repeats: int) -> dict[str, Any]:
    data = _inputs(n)
    eps = data["eps"]
    oracle_jl = L.FrequencyOracle.plan(eps, 100, beta=0.05)
    oracle_h = L.FrequencyOracle.plan(eps, 100, projection="hadamard")
    key = ReleaseKey.fresh()
    t = np.full(n, int(vx.laplace_grid_scale(np.array([1.0]))[0]), dtype=np.int64)
    cases: dict[str, Callable[[], object]] = {
        "laplace": lambda: L.laplace(data["x"], eps),
        "randomized_response": lambda: L.randomized_response(data["bits"], eps),
        "duchi_d10": lambda: _duchi_batched(n, eps),
        "jl_frequency_report_d100": lambda: L.jl_frequency_report(
            data["cat"], eps, oracle=oracle_jl),
        "hadamard_frequency_report_d100": lambda: L.jl_frequency_report(
            data["cat"], eps, oracle=oracle_h),
        "raw_discrete_laplace_eps1": lambda: vx.discrete_laplace(vx.generator(key, b"b"), t),
    }
    out: dict[str, Any] = {}
    for name, fn in cases.items():
        times = _timed(fn, repeats)
        out[name] = {"seconds": median(times), "rows_per_s": n / median(times),
                     "all_seconds": times}
    out["jl_m"] = oracle_jl.m
    return out


def aggregators(n: int, repeats: int) -> dict[str, Any]:
    import pandas as pd
    from pyspark.sql import functions as F

    import hdp_spark.pandas as pdl
    import hdp_spark.spark as sl

    warnings.simplefilter("ignore", L.LdpEpsilonWarning)
    eps_levels = [0.1, 0.25, 0.5, 1.0, 2.0]
    oracle = L.FrequencyOracle(d=100, m=4096, phi_seed=1)
    specs = {
        "laplace_mean": L.ldp_mean("lap", eps="eps", mechanism="laplace"),
        "rr_mean": L.ldp_mean("rr", eps="eps", mechanism="rr"),
        "duchi_mean_d10": L.ldp_mean_vector("du", eps="eps", d=10, radius=1.0),
        "distribution_m4096": L.ldp_distribution("j", "b", eps="eps", oracle=oracle),
    }
    out: dict[str, Any] = {"pandas": {}, "spark": {}}
    # pandas: synthetic reports (aggregation cost does not depend on their law)
    rng = np.random.default_rng(8)  # design-ok: synthetic benchmark inputs, not noise
    pn = min(n, 2_000_000)
    pdf = pd.DataFrame({
        "eps": rng.choice(eps_levels, pn),
        "lap": np.round(rng.laplace(0, 4, pn) * 2**30) / 2**30,
        "rr": np.where(rng.random(pn) < 0.5, 1.0, -1.0),
        "j": rng.integers(0, 4096, pn).astype(float),
        "b": np.where(rng.random(pn) < 0.5, 1.0, -1.0),
    })
    pdf["du"] = list(rng.normal(size=(pn, 10)))
    for name, spec in specs.items():
        times = _timed(lambda spec=spec: pdl.ldp_agg(pdf, spec, already_randomized=True), repeats)
        out["pandas"][name] = {"rows": pn, "seconds": median(times),
                               "rows_per_s": pn / median(times)}
    spark = spark_session()
    levels = F.array(*[F.lit(e) for e in eps_levels])
    sdf = (
        spark.range(n)
        .select(
            F.element_at(levels, (F.col("id") % len(eps_levels) + 1).cast("int")).alias("eps"),
            (F.rand(1) * 8 - 4).alias("lap"),
            F.when(F.rand(2) < 0.5, 1.0).otherwise(-1.0).alias("rr"),
            F.floor(F.rand(3) * 4096).cast("long").alias("j"),
            F.when(F.rand(4) < 0.5, 1).otherwise(-1).alias("b"),
            F.array(*[F.randn(10 + k) * 5 for k in range(10)]).alias("du"),
        )
        .cache()
    )
    sdf.count()
    for name, spec in specs.items():
        times = _timed(
            lambda spec=spec: sl.ldp_agg(sdf, spec, already_randomized=True).collect(), repeats
        )
        out["spark"][name] = {"rows": n, "seconds": median(times), "rows_per_s": n / median(times)}
    base = sdf.select(F.monotonically_increasing_id().alias("uid"), "eps", F.rand(5).alias("x"))
    sim = lambda: sl.ldp_simulate(  # noqa: E731
        base, "x", eps="eps", randomizer=L.LaplaceRandomizer(), id="uid"
    ).agg(F.sum("x_report")).collect()
    times = _timed(sim, repeats)
    out["spark"]["simulate_laplace_mapInPandas"] = {
        "rows": n, "seconds": median(times), "rows_per_s": n / median(times)}
    sdf.unpersist()
    return out


def unit_cases(n: int, persons: list[int], repeats: int) -> dict[str, Any]:
    """Median seconds of the ``--unit`` cases (module docstring) per persons count."""
    from pyspark.sql import functions as F

    import hdp_spark.spark as sl
    from hdp_spark.core.privacy_unit import PrivacyUnit
    from hdp_spark.spark.privacy_unit import keep_one_report

    warnings.simplefilter("ignore", L.LdpEpsilonWarning)
    spark = spark_session(extension=True)
    spec = L.ldp_mean("lap", eps="eps", mechanism="laplace")
    levels = F.array(*[F.lit(e) for e in (0.1, 0.25, 0.5, 1.0, 2.0)])
    out: dict[str, Any] = {}
    for count in persons:
        sdf = spark.range(n).select(
            F.floor(uniform(1) * count).cast("long").alias("uid"),
            F.element_at(levels, (F.floor(uniform(2) * 5) + 1).cast("int")).alias("eps"),
            (uniform(3) * 8 - 4).alias("lap"),
        ).cache()
        sdf.count()

        def release(df: Any = sdf, **kw: Any) -> object:
            return sl.ldp_agg(df, spec, already_randomized=True, **kw).collect()

        def windows() -> object:
            spark.conf.set("hdp_spark.unitOperator", "false")
            try:
                return release(privacy_unit="uid")
            finally:
                spark.conf.unset("hdp_spark.unitOperator")

        floor = sdf.groupBy("uid").agg(F.min("eps").alias("eps"), F.first("lap").alias("lap"))
        cases = {"none": release, "unit": lambda: release(privacy_unit="uid"),
                 "windows": windows, "floor": lambda per=floor: release(per)}
        kept = keep_one_report(sdf, PrivacyUnit("uid"), spec, ReleaseKey.fresh())
        if "HdpLdpUnitBound" not in kept._jdf.queryExecution().executedPlan().toString():
            msg = "the session has no one-report operator: build the extension's jar first"
            raise RuntimeError(msg)
        load = load_average()
        times, _ = interleaved_runs(cases, repeats=repeats, warmup=1, keep_values=False)
        out[str(count)] = {name: {"seconds": median(ts), "all_seconds": ts}
                           for name, ts in times.items()}
        out[str(count)]["load"] = [load, load_average()]
        sdf.unpersist()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--aggregators", action="store_true")
    parser.add_argument("--unit", action="store_true")
    parser.add_argument("--persons", default="200000,1000000")
    add_report_args(parser)
    args = parser.parse_args(argv)
    n = 20_000 if args.smoke else args.rows
    repeats = 1 if args.smoke else args.repeats
    load_start = load_average()
    if args.unit:
        persons = [2_000 if args.smoke else int(p) for p in args.persons.split(",")]
        res_unit = unit_cases(n, persons, repeats)
        urows = [[f"{int(p):,}", *(fmt(v[c]["seconds"]) for c in
                                   ("none", "unit", "windows", "floor")),
                  fmt(v["unit"]["seconds"] / v["windows"]["seconds"]),
                  fmt(v["unit"]["seconds"] / v["floor"]["seconds"]), v["load"]]
                 for p, v in res_unit.items()]
        md = [f"## ldp_agg under a privacy unit ({n:,} reports, median of {repeats})", "",
              md_table(["persons", "none s", "unit s", "windows s", "floor s",
                        "unit/windows", "unit/floor", "load (start, end)"], urows),
              "", f"* Load average at start {load_start}, at end {load_average()}."]
        write_report(args.json, name="bench_ldp_unit", markdown="\n".join(md),
                     figures={"rows": n, "repeats": repeats, "unit": res_unit},
                     meta={"rows": n})
        return
    res = randomizers(n, repeats)
    figures: dict[str, Any] = {"rows": n, "repeats": repeats, "randomizers": res}
    rows = [[name, n, v["seconds"], fmt(v["rows_per_s"])] for name, v in res.items()
            if isinstance(v, dict)]
    md = [
        f"## Local-DP randomizer throughput ({n:,} rows, median of {repeats})",
        "",
        md_table(["randomizer", "rows", "seconds", "rows/s"], rows),
        "",
        f"* JL oracle: d = 100, m = {res['jl_m']} (erratum E2 sizing for these ε); "
        "Hadamard: m = 128.",
    ]
    if args.aggregators:
        agg = aggregators(n, repeats)
        figures["aggregators"] = agg
        arows = [[eng, name, v["rows"], v["seconds"], fmt(v["rows_per_s"])]
                 for eng in ("pandas", "spark") for name, v in agg[eng].items()]
        md += ["", "### Aggregators (ldp_agg) and the Spark simulation transform", "",
               md_table(["engine", "aggregate", "rows", "seconds", "rows/s"], arows)]
    md += ["", f"* Load average at start {load_start}, at end {load_average()}; driver peak "
           f"RSS {driver_peak_rss_mib():.0f} MiB."]
    write_report(args.json, name="bench_ldp_throughput", figures=figures,
                 markdown="\n".join(md), meta={"rows": n})


if __name__ == "__main__":
    main()
