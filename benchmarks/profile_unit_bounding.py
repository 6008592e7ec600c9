"""Experiment (issue 50): the privacy unit's bounding step alone (1M rows, 100k persons,
100 keys), window form against the per-person aggregate `hdp_unit_bound`, beside Spark's
per-person floor and the rank expressions alone. Usage: profile_unit_bounding.py
FALLBACK_THRESHOLD (run from the repository root with PYTHONPATH=.).
"""
import statistics, sys, time, os
from pyspark.sql import SparkSession, functions as F
import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import PrivacyUnit
import hdp_spark.spark.privacy_unit as P
spark = (hs.configure(SparkSession.builder.master("local[2]")).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "3g").config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", sys.argv[1]).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows, persons, nkeys = 1000000, 100000, 100
df = spark.range(rows).select(
    F.floor(F.lit(persons) * F.pow(F.rand(seed=1), 3)).cast("long").alias("person"),
    F.floor(F.lit(nkeys) * F.rand(seed=2)).cast("int").alias("grp"),
    (F.rand(seed=3) * 500).alias("amount"),
    F.floor(F.rand(seed=4) * 4).cast("int").alias("cat"),
    F.element_at(F.array(F.lit(0.5), F.lit(1.0), F.lit(2.0)), (F.floor(F.rand(seed=5) * 3) + 1).cast("int")).alias("eps"),
).localCheckpoint().cache()
df.count()
KEY = ReleaseKey(bytes(range(32)), unsafe=True)
P.aggregate_ready(spark)
u = PrivacyUnit("person", 3, 10)
f = df.withColumn("g", F.col("grp").cast("long")).withColumn("c", F.col("cat").cast("long"))
def noop(d): d.write.format("noop").mode("overwrite").save()
orig = P.aggregate_ready
cases = {
  "floor_person": lambda: noop(df.groupBy("person").agg(F.min("eps"), F.count("*"))),
  "bound_agg": lambda: noop(P.bound_rows(f, u, eps="eps", group="g", codes=["c"], key=KEY)),
}
def win():
    P.aggregate_ready = lambda s: False
    try: noop(P.bound_rows(f, u, eps="eps", group="g", codes=["c"], key=KEY))
    finally: P.aggregate_ready = orig
cases["bound_win"] = win
def ranked_only():
    P.aggregate_ready = lambda s: False
    P._by_windows = lambda r, u, eps: r
    try: noop(P.bound_rows(f, u, eps="eps", group="g", codes=["c"], key=KEY))
    finally: P.aggregate_ready = orig; P._by_windows = W
W = P._by_windows
cases["ranked_only"] = ranked_only
if False: P.bound_rows(f, u, eps="eps", group="g", codes=["c"], key=KEY).explain()
for fn in cases.values(): fn()
times = {k: [] for k in cases}
for _ in range(3):
    for name, fn in cases.items():
        t = time.perf_counter(); fn(); times[name].append(time.perf_counter() - t)
print("load", os.getloadavg())
for k, v in times.items():
    print(f"{k:24s} med {statistics.median(v):6.2f}  all {' '.join(f'{x:.2f}' for x in v)}")
