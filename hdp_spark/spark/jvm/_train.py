"""``python -m hdp_spark.spark.jvm._train ARCHIVE``: the class-data-sharing training session.

Run by :func:`hdp_spark.spark.jvm.cds.build_archive` in its own process: a local[2] session
configured with the extension, whose driver JVM writes the classes it loaded to ``ARCHIVE``
when it exits. It does what a first session does: reads a CSV, runs a release, a Column
aggregator (grouped and global, with its Python finalize), SQL, writes and reads parquet, on
a synthetic table of its own (no user data). It waits for the JVM to exit, so the archive
is complete when this process ends, and fails unless the JVM exited cleanly.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def main(archive: str) -> None:
    import numpy as np
    import pandas as pd
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    builder = hs.configure(SparkSession.builder.master("local[2]")).appName(
        "hdp_spark-cds-training").config(
        "spark.driver.extraJavaOptions",
        f"-XX:ArchiveClassesAtExit={archive} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
        "-Xlog:cds*=off").config(
        "spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rng = np.random.default_rng(0)  # design-ok: a made-up training table, not noise
    n = 400
    pdf = pd.DataFrame({
        "user_id": np.arange(n),
        "dept": rng.choice(["a", "b", "c"], n),
        "salary": rng.uniform(0, 100, n),
        "eps": rng.choice([0.5, 1.0, 2.0], n),
    })
    with tempfile.TemporaryDirectory(prefix="hdp_spark-cds-") as tmp:
        csv = Path(tmp) / "t.csv"
        pdf.to_csv(csv, index=False)
        df = spark.read.csv(str(csv), header=True, inferSchema=True, positiveInf="inf")
        hs.agg(df, hs.hdp_mean("salary", eps="eps", lower=0, upper=100),
               by="dept", keys=["a", "b", "c"]).toPandas()
        df.groupBy("dept").agg(
            hs.hdp_mean("salary", eps="eps", lower=0, upper=100, keys="public").alias("m"),
            hs.hdp_histogram("dept", eps="eps", categories=["a", "b"], keys="public"),
        ).collect()
        df.agg(hs.hdp_mean("salary", eps="eps", lower=0, upper=100).alias("m")).collect()
        frame = spark.createDataFrame(pdf)
        frame.createOrReplaceTempView("t")
        spark.sql("SELECT dept, count(*), sum(salary) FROM t GROUP BY dept").toPandas()
        frame.write.parquet(str(Path(tmp) / "p"))
        spark.read.parquet(str(Path(tmp) / "p")).groupBy("eps").count().collect()
    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if proc is None or proc.stdin is None:  # cannot see the JVM finish its archive
        sys.exit("the training session's JVM is not a child of this process")
    proc.stdin.close()  # the gateway JVM exits on EOF and writes the archive
    code = proc.wait(timeout=300)
    if code != 0:  # the archive may be incomplete: never named (it could crash a JVM)
        sys.exit(f"the training session's JVM exited with {code}")


if __name__ == "__main__":
    main(sys.argv[1])
