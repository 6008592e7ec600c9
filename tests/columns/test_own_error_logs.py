"""A Column whose ε column breaks its rule fails with our one line, and Spark logs no copy of
it (no executor ERROR with a stack trace, no "Lost task", no "aborting job"), while Spark's
other task failures (here a user's ``raise_error``) are logged as before (issue 53). Run in
a subprocess: the filter is set on the JVM's log4j configuration, and its stderr is what a
user sees."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from reader_env import without_daemon_race

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_SCRIPT = textwrap.dedent("""
    import sys
    import pandas as pd
    from pyspark.sql import SparkSession, functions as F
    import hdp_spark.spark as hs

    builder = SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress",
                                                              "false")
    spark = hs.configure(builder).getOrCreate()
    df = spark.createDataFrame(pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0],
                                             "eps": [1.0, -1.0, 0.5, 2.0]}))
    queries = {
        "ours": lambda: df.agg(hs.hdp_mean("x", eps="eps", lower=0, upper=5)).collect(),
        "theirs": lambda: spark.range(4).repartition(2).select(
            F.raise_error(F.lit("not ours"))).collect(),
    }
    for name in ("ours", "theirs", "ours"):
        print("=== " + name, file=sys.stderr, flush=True)
        try:
            queries[name]()
        except Exception as exc:
            print(name, type(exc).__name__, "|", str(exc).splitlines()[0], flush=True)
    print("=== end", file=sys.stderr, flush=True)
    spark.stop()
""")


def _sections(stderr: str) -> list[tuple[str, str]]:
    parts = stderr.split("=== ")[1:]
    return [(p.split("\n", 1)[0], p.split("\n", 1)[1] if "\n" in p else "") for p in parts]


def test_our_error_is_one_line_and_spark_logs_no_copy_of_it() -> None:
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                          timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    assert [line.split(" | ")[0] for line in out] == [
        "ours SparkRuntimeException", "theirs SparkRuntimeException", "ours SparkRuntimeException"]
    assert "EpsilonColumnError: Column `eps` must hold ε >= 0" in out[0]
    sections = _sections(proc.stderr)
    assert [name for name, _ in sections] == ["ours", "theirs", "ours", "end"]
    for name, text in sections[:3]:
        if name == "ours":  # nothing at all: no ERROR, no stack trace, no Python traceback
            assert without_daemon_race(text).strip() == "", text[:3000]
        else:  # Spark's own logging of another failure is untouched
            assert "ERROR Executor: Exception in task" in text
            assert "WARN TaskSetManager: Lost task" in text
            assert "failed 1 times; aborting job" in text
            assert "[USER_RAISED_EXCEPTION] not ours" in text


def test_only_pysparks_daemon_broken_pipe_is_removed() -> None:
    noise = ("Traceback (most recent call last):\n"
             '  File "/x/pyspark.zip/pyspark/daemon.py", line 264, in manager\n'
             '  File "/x/pyspark.zip/pyspark/daemon.py", line 95, in worker\n'
             "BrokenPipeError: [Errno 32] Broken pipe\n")
    assert without_daemon_race(noise).strip() == ""
    ours = ("Traceback (most recent call last):\n"
            '  File "/x/hdp_spark/spark/columns.py", line 9, in f\n'
            "EpsilonColumnError: Column `eps` must hold ε >= 0\n")
    assert without_daemon_race(noise + ours).strip() == ours.strip()
    # cut short at the end of the output (the JVM stopped the daemon as it wrote)
    header = "Traceback (most recent call last):\n"
    frame = '  File "/x/pyspark.zip/pyspark/daemon.py", line 264, in manager\n'
    assert without_daemon_race(ours + noise + header).strip() == ours.strip()
    assert without_daemon_race(ours + header + frame).strip() == ours.strip()
    # not at the end, or with a frame of ours: kept
    assert without_daemon_race(header + "more\n") == header + "more\n"
    cut_ours = header + '  File "/x/hdp_spark/spark/columns.py", line 9, in f\n'
    assert without_daemon_race(cut_ours) == cut_ours
