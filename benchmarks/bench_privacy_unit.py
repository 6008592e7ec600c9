"""Speed of a release under a privacy unit against the same release without it and Spark's
own floor (issue 50).

On one cached DataFrame of --rows rows, --persons persons (skewed: a few persons hold many
rows) over --keys public groups, every case runs once after a warm-up, then --repeats
rounds run every case once in turn (the median of each case's wall time):

  floor    Spark's own per-person-then-per-group mean: groupBy(person, group).agg(sum,
           count), then groupBy(group).agg(avg) (the one shuffle by person a bounded
           release cannot avoid, and the aggregate after it)
  rows     hs.agg(df, hdp_mean, hdp_histogram, by=group, keys=KEYS)   (one row = one person)
  unit     the same with privacy_unit="person", max_groups=3, max_rows=10

Prints one line per case and the ratios unit/rows and unit/floor. ``--smoke`` runs a tiny
table once (the test suite's check that the script runs). ``--paired`` adds, in the same
rounds, the unit release on its other Spark paths (the before/after of the JVM operator):

  native   the native-expression bounding (aggregate, join, windows), what runs without
           the extension's jar or on Spark Connect
  hashed   the JVM operator holding each partition's persons in a hash map (no sort)

``--prebound`` adds, in the same rounds, the unit release with the JVM operator's map-side
pre-bound turned on (``hdp_spark.unitPreBound`` true for the call: each input partition
bounded by the same rule in a hash map of persons before the shuffle by the id); with
``--columns`` also the Column form so:

  pre        the unit release, pre-bound on
  col_pre    the Column form under the unit, pre-bound on

``--columns`` adds the Column form, ``df.groupBy(group).agg(hs.hdp_mean(...,
keys="public"), hs.hdp_histogram(...))`` (the same specs), in the same rounds:

  col        without a unit
  col_unit   under the unit, bounded by the JVM operator (the extension's planner strategy)
  col_native under the unit, bounded by the native windows (``hdp_spark.unitOperator``
             set to false for the call: the plan before the operator)

``--connect`` runs every case through a local Spark Connect server started with the
extension (a free port; ``hashed`` and the Column cases are classic only): ``unit`` is the
release API's request for the operator (``UnitRequest``), ``native`` the native windows,
what a Connect release ran before it.

Beside each wall time, the Spark JVM's CPU time over the same calls (``cpu``, where
``/proc`` has it; on Connect the server's JVM, this process's child): steadier than the
wall time on a machine other work shares.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import hdp_spark.spark as hs

    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--persons", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--paired", action="store_true")
    p.add_argument("--columns", action="store_true")
    p.add_argument("--prebound", action="store_true")
    p.add_argument("--conf", action="append", default=[],
                   help="a Spark session setting key=value (repeatable)")
    p.add_argument("--connect", action="store_true")
    p.add_argument("--master", default="local[2]",
                   help="the classic session's master, e.g. local-cluster[2,1,3072]: the "
                        "shuffle then crosses executor processes")
    p.add_argument("--hot", type=float, default=0.0,
                   help="a share of the rows given to one person (a bot, a test account)")
    p.add_argument("--only", default="", help="comma-separated cases to run (default all)")
    a = p.parse_args()
    if a.smoke:
        a.rows, a.persons, a.keys, a.repeats = 2_000, 200, 5, 1
    builder = _connect_builder() if a.connect else SparkSession.builder.master(a.master)
    configured = (hs.configure(builder)
                  .config("spark.ui.enabled", "false")
                  .config("spark.sql.shuffle.partitions", "4")
                  .config("spark.driver.memory", "3g"))
    for setting in a.conf:
        name, _, value = setting.partition("=")
        configured = configured.config(name, value)
    spark = configured.getOrCreate()
    if not a.connect:
        spark.sparkContext.setLogLevel("ERROR")
    # person = floor(persons * u^3): skewed, a few persons with many rows
    df = spark.range(a.rows).select(
        F.when(F.rand(seed=6) < F.lit(a.hot), F.lit(0)).otherwise(
            F.floor(F.lit(a.persons) * F.pow(F.rand(seed=1), 3))).cast("long").alias("person"),
        F.floor(F.lit(a.keys) * F.rand(seed=2)).cast("int").alias("grp"),
        (F.rand(seed=3) * 500).alias("amount"),
        F.floor(F.rand(seed=4) * 4).cast("int").alias("cat"),
        F.element_at(F.array(F.lit(0.5), F.lit(1.0), F.lit(2.0)),
                     (F.floor(F.rand(seed=5) * 3) + 1).cast("int")).alias("eps"),
    ).localCheckpoint().cache()
    df.count()
    keys = list(range(a.keys))
    specs = (hs.hdp_mean("amount", eps="eps", lower=0, upper=500),
             hs.hdp_histogram("cat", eps="eps", categories=[0, 1, 2, 3], other=None))
    cases: dict[str, Any] = {
        "floor": lambda: df.groupBy("person", "grp").agg(F.sum("amount").alias("s"),
                                                        F.count("*").alias("c"))
        .groupBy("grp").agg(F.avg("s")).collect(),
        "rows": lambda: hs.agg(df, *specs, by="grp", keys=keys).collect(),
        "unit": lambda: hs.agg(df, *specs, by="grp", keys=keys, privacy_unit="person",
                               max_groups=3, max_rows=10).collect(),
    }
    if a.paired:
        unit = cases["unit"]
        cases["native"] = lambda: _path(unit, native=True)
        if not a.connect:
            cases["hashed"] = lambda: _path(unit, hashed=True)
    if a.columns and not a.connect:
        unit_args: dict[str, Any] = {"privacy_unit": "person", "max_groups": 3,
                                     "max_rows": 10}

        def column(**unit: Any) -> Any:
            cols = (hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys="public",
                                **unit),
                    hs.hdp_histogram("cat", eps="eps", categories=[0, 1, 2, 3], other=None,
                                     keys="public", **unit))
            return df.groupBy("grp").agg(*(c.alias(f"c{i}") for i, c in enumerate(cols)))

        cases["col"] = lambda: column().collect()
        cases["col_unit"] = lambda: column(**unit_args).collect()
        cases["col_native"] = lambda: _native_columns(spark, lambda: column(**unit_args))
        if a.prebound:
            cases["col_pre"] = lambda: _setting(spark, "hdp_spark.unitPreBound",
                                                lambda: column(**unit_args).collect())
    if a.prebound:
        unit_case = cases["unit"]
        cases["pre"] = lambda: _setting(spark, "hdp_spark.unitPreBound", unit_case)
    if a.only:
        cases = {k: v for k, v in cases.items() if k in a.only.split(",")}
    times: dict[str, list[float]] = {k: [] for k in cases}
    cpus: dict[str, list[float]] = {k: [] for k in cases}
    cpu = _children_cpu() if a.connect else _jvm_cpu(spark)
    if not a.smoke:
        for fn in cases.values():
            fn()
    for _ in range(a.repeats):
        for name, fn in cases.items():
            t, c = time.perf_counter(), cpu()
            fn()
            times[name].append(time.perf_counter() - t)
            cpus[name].append(cpu() - c)
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, value in med.items():
        print(f"{name:10s} {value:8.2f} s   cpu {statistics.median(cpus[name]):6.2f} s")
    for top, bottom in (("unit", "rows"), ("unit", "floor"), ("native", "rows"),
                        ("hashed", "rows"), ("col_unit", "col"), ("col_native", "col"),
                        ("col_native", "col_unit"), ("pre", "rows"), ("pre", "unit"),
                        ("col_pre", "col"), ("col_pre", "col_unit")):
        if top in med and bottom in med:
            print(f"{top}/{bottom}  {med[top] / med[bottom]:.2f}x")
    spark.stop()


def _jvm_cpu(spark: Any) -> Any:
    """A function returning the Spark JVM's CPU seconds so far (0.0 without ``/proc``)."""
    import os

    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        tick = os.sysconf("SC_CLK_TCK")
        stat = f"/proc/{pid}/stat"
        open(stat).close()
    except (OSError, ValueError, AttributeError):
        return lambda: 0.0

    def read() -> float:
        with open(stat) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return read


def _connect_builder() -> Any:
    """A builder of a local Spark Connect server on a free port (Connect's default port may
    be another process's), whose client dials that port."""
    import socket

    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.core import DefaultChannelBuilder

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    DefaultChannelBuilder.default_port = staticmethod(lambda: port)  # type: ignore[method-assign]
    return SparkSession.builder.remote("local[2]").config("spark.connect.grpc.binding.port",
                                                          str(port))


def _children_cpu() -> Any:
    """A function returning the CPU seconds so far of this process's live children (the
    local Connect server's JVM)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    me = str(os.getpid())

    def read() -> float:
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    return read


def _setting(spark: Any, name: str, run: Any) -> Any:
    """``run()`` with the session setting ``name`` true for the call."""
    spark.conf.set(name, "true")
    try:
        return run()
    finally:
        spark.conf.unset(name)


def _native_columns(spark: Any, build: Any) -> Any:
    """``build().collect()`` with the Column bounding on its native windows: the session
    setting read when the query is analyzed (``build`` makes the DataFrame)."""
    spark.conf.set("hdp_spark.unitOperator", "false")
    try:
        q = build()
    finally:
        spark.conf.unset("hdp_spark.unitOperator")
    return q.collect()


def _path(run: Any, *, native: bool = False, hashed: bool = False) -> Any:
    """``run()`` with the bounding on its native path, or the JVM operator unsorted (the
    module's functions swapped for the call only: the benchmark's switch, no option of the
    library)."""
    import functools

    from hdp_spark.spark import privacy_unit as pu

    saved = pu.bound_frame, pu._jvm_bound
    if native:
        pu.bound_frame = functools.partial(saved[0], jvm=False)  # type: ignore[assignment]
    if hashed:
        pu._jvm_bound = functools.partial(  # type: ignore[assignment]
            saved[1], sorted_stream=False)
    try:
        return run()
    finally:
        pu.bound_frame, pu._jvm_bound = saved


if __name__ == "__main__":
    main()
