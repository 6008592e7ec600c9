"""Speed of the partial-DP heavy hitters against native Spark, as a ratio measured in one run.

Cases, on the same cached DataFrame of --rows rows, d = 16 attributes of domain size 8
(2 cores, local[2]):
  native: df.groupBy(all 16 attributes).count(), fully computed (noop sink)
  hdp:    hdp_spark.spark.heavy_hitters(df, hdp_heavy_hitters(...)) -- D = 4 level passes,
          one count pass, driver decisions, output DataFrame

Data: 30% of rows copy one of 64 planted records (Zipf-like weights), 70% have independent
attributes with a skewed marginal P(v) ∝ roughly (8 - v) (values 0..7); generated natively
with fixed seeds. Target (issue 4): hdp / native <= 6x.

``--unit skewed|even`` adds, in the same rounds, the release under a privacy unit (issue
50), ``privacy_unit="person", max_rows=10`` (only the persons with at most 10 rows count,
with all their rows: one native window over the id), against the same release without it,
over a ``person`` column: ``skewed``, rows / 10 persons, person = floor(persons * u^3) (the
heavy persons' rows drop out, so the unit's release reads fewer rows); ``even``, rows / 2
persons drawn uniformly (Poisson(2) rows each: almost nothing drops, the window's cost
alone, but the thresholds grow tenfold with max_rows 10); ``unique``, one row per person
(the id is the row's) and max_rows 1: the same thresholds and rows, so the difference is the
window's cost alone.

Run: .venv/bin/python benchmarks/bench_heavy_hitters.py --rows 1000000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_report_args,
    fmt,
    interleaved_runs,
    load_average,
    md_table,
    median,
    spark_session,
    write_report,
)

D, M, PLANTED = 16, 8, 64


def make_data(spark, rows: int, unit: str | None = None):
    from pyspark.sql import functions as F

    base = spark.range(rows)
    planted = F.rand(1) < F.lit(0.3)
    pid = F.floor(F.pow(F.rand(2), F.lit(2.0)) * PLANTED)  # skewed choice of the record
    cols = []
    for j in range(D):
        fixed = F.pmod(F.hash(pid, F.lit(j)), F.lit(M))
        free = F.floor(F.lit(M) * (F.lit(1.0) - F.sqrt(F.rand(100 + j))))  # P(v) ∝ ~(M - v)
        cols.append(F.when(planted, fixed).otherwise(free).cast("int").alias(f"a{j}"))
    if unit == "skewed":
        persons = max(rows // 10, 1)
        cols.append(F.floor(F.lit(persons) * F.pow(F.rand(7), 3)).cast("long").alias("person"))
    elif unit == "even":
        persons = max(rows // 2, 1)
        cols.append(F.floor(F.lit(persons) * F.rand(7)).cast("long").alias("person"))
    elif unit == "unique":
        cols.append(F.col("id").alias("person"))
    return base.select(*cols)


def _runs(xs: list[float]) -> str:
    return ", ".join(fmt(x) for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eps0", type=float, default=1.0)
    parser.add_argument("--unit", choices=["skewed", "even", "unique"], default=None,
                        help="add the release under a privacy unit (max_rows 10)")
    add_report_args(parser)
    args = parser.parse_args()
    rows = 20_000 if args.smoke else args.rows
    repeats = 1 if args.smoke else args.repeats

    from hdp_spark.core.partial import hdp_heavy_hitters
    from hdp_spark.spark import heavy_hitters

    spark = spark_session()
    df = make_data(spark, rows, args.unit).cache()
    df.count()
    cols = [f"a{j}" for j in range(D)]
    spec = hdp_heavy_hitters(cols, domains={c: list(range(M)) for c in cols}, eps0=args.eps0)

    def native() -> int:
        df.groupBy(*cols).count().write.format("noop").mode("overwrite").save()
        return 0

    def hdp() -> int:
        return len(heavy_hitters(df, spec).table.collect())

    cases = {"native": native, "hdp": hdp}
    if args.unit:
        unit_spec = hdp_heavy_hitters(cols, domains={c: list(range(M)) for c in cols},
                                      eps0=args.eps0, privacy_unit="person",
                                      max_rows=1 if args.unit == "unique" else 10)

        def hdp_unit() -> int:
            return len(heavy_hitters(df, unit_spec).table.collect())

        cases["hdp_unit"] = hdp_unit

    load_start = load_average()
    distinct = df.groupBy(*cols).count().count()
    times, values = interleaved_runs(cases, repeats=repeats)
    native_s, hdp_s = median(times["native"]), median(times["hdp"])
    b = spec.budget
    figures = {
        "rows": rows,
        "attributes": D,
        "domain_size": M,
        "distinct_records": distinct,
        "repeats": repeats,
        "native_s": native_s,
        "hdp_s": hdp_s,
        "ratio": hdp_s / native_s,
        "native_runs_s": times["native"],
        "hdp_runs_s": times["hdp"],
        "released_keys": values["hdp"],
        "eps0": args.eps0,
        "eps_attribute": b.eps_attribute,
        "eps_person": b.eps_person,
        "thresholds": list(b.taus),
        "detection_count": b.detection_count,
        "load_start": load_start,
    }
    unit_rows: list[list[object]] = []
    if args.unit:
        unit_s = median(times["hdp_unit"])
        figures.update({"hdp_unit_s": unit_s, "unit_ratio": unit_s / hdp_s,
                        "hdp_unit_runs_s": times["hdp_unit"],
                        "unit_released_keys": values["hdp_unit"]})
        unit_rows = [[f"hdp heavy_hitters, privacy_unit ({args.unit})", unit_s,
                      _runs(times["hdp_unit"])], ["unit / without", unit_s / hdp_s, ""]]
    markdown = "\n".join([
        f"### Partial-DP heavy hitters vs native groupBy ({rows:,} rows, d = {D}, |domain| = {M})",
        "",
        md_table(
            ["case", "median s", "runs s"],
            [["native groupBy(16 attrs).count()", native_s, _runs(times["native"])],
             ["hdp heavy_hitters", hdp_s, _runs(times["hdp"])],
             ["ratio", hdp_s / native_s, ""], *unit_rows],
        ),
        "",
        f"{distinct:,} distinct records; released keys per run: {values['hdp']}; "
        f"eps0 = {args.eps0} per attribute, eps_person = {fmt(b.eps_person)}, "
        f"thresholds {list(b.taus)}, detection count F_0.05 = {b.detection_count}.",
    ])
    write_report(args.json, name="heavy_hitters", figures=figures, markdown=markdown,
                 meta={"command": " ".join(sys.argv)})


if __name__ == "__main__":
    main()
