"""The query fingerprint (a constant in every plan, shown by ``explain()``) carries no
unkeyed hash of data: a table made from local rows, and a file source's listing (each
file's path, size and modification time: a size is a function of the data), enter it
through a MAC keyed with a secret of the JVM, so the same rows or files in two Spark
processes give unrelated fingerprints (nobody can test a guess of the rows or of a file's
size against a printed plan), while one process repeats its fingerprint (re-evaluation
gives the same numbers). Two processes, since one JVM has one secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = r"""
import json, sys
import pandas as pd
from pyspark.sql import SparkSession
import hdp_spark.spark as hs
from hdp_spark.spark.columns import cells_of

spark = hs.configure(SparkSession.builder.master("local[1]")
                     .config("spark.ui.enabled", "false")).getOrCreate()
pdf = pd.DataFrame({"x": [1.0, 2.0, 3.0], "eps": [1.0, 1.0, 2.0]})
col = hs.hdp_mean("x", eps="eps", lower=0, upper=10)

def fingerprint(df):
    rows = df.agg(cells_of(col.spec, col.groups, col.inputs).alias("c")).collect()
    return rows[0]["c"]["query"]

local = spark.createDataFrame(pdf)
print(json.dumps({"local": [fingerprint(local), fingerprint(local)],
                  "file": [fingerprint(spark.read.parquet(sys.argv[1])),
                           fingerprint(spark.read.parquet(sys.argv[1]))]}))
spark.stop()
"""


def _run(path: str) -> dict[str, object]:
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, path], capture_output=True,
                          text=True, timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_local_rows_and_file_listings_enter_the_fingerprint_through_a_per_jvm_mac() -> None:
    import pandas as pd

    path = Path(tempfile.gettempdir()) / "hdp_spark_fingerprint_keyed.parquet"
    if not path.exists():
        pd.DataFrame({"x": [1.0, 2.0, 3.0], "eps": [1.0, 1.0, 2.0]}).to_parquet(path)
    first, second = _run(str(path)), _run(str(path))
    local_1, local_2 = first["local"], second["local"]
    assert isinstance(local_1, list)
    assert isinstance(local_2, list)
    assert local_1[0] == local_1[1]  # one JVM, one query: one fingerprint (re-evaluation)
    assert local_1[0] != local_2[0]  # the same rows in another JVM: unrelated
    file_1, file_2 = first["file"], second["file"]
    assert isinstance(file_1, list)
    assert isinstance(file_2, list)
    assert file_1[0] == file_1[1]  # the same files read twice in one JVM: one query
    assert file_1[0] != file_2[0]  # the same files in another JVM: unrelated
