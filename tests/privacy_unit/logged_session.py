"""A job script of the local-DP unit tests run in a session of its own, with the event log
on and every logger at INFO, so that a test can grep everything the run wrote for the
release's secrets (``python <job>.py <classic|connect> <event log dir>``: the job's result
as JSON on the last line of stdout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote


def logged_main(run: Callable[[Any], dict[str, Any]]) -> None:
    """The ``__main__`` of a job script: ``run`` in a local[2] session (classic, or a
    local Spark Connect server) whose event log goes to ``argv[2]``, INFO logs to stderr."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    mode, logs = sys.argv[1], sys.argv[2]
    builder = (local_remote() if mode == "connect"
               else SparkSession.builder.master("local[2]"))
    builder = (builder.config("spark.sql.shuffle.partitions", "3")
               .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", logs)
               .config("spark.eventLog.compress", "false"))
    spark = hs.configure(builder).getOrCreate()
    jvm = SparkContext._jvm  # the driver's (a local Connect server's too)
    if jvm is not None:  # every logger at INFO: the logs the test greps
        log4j = jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setAllLevels("", log4j.Level.INFO)
    try:
        got = run(spark)
    finally:
        spark.stop()
    print(json.dumps(got))


def assert_secrets_unwritten(job: Path, mode: str, tmp_path: Path) -> dict[str, Any]:
    """Run ``job`` in a logged session of its own; assert that the run's plans and (on
    Connect) statements reached the event log, that INFO logs were written, and that none
    of the secrets the job lists (``got["secrets"]``) appears in the event log, stderr or
    stdout (apart from the list itself). Returns the job's result."""
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = sys.executable
    logs = tmp_path / "events"
    logs.mkdir()
    proc = subprocess.run([sys.executable, str(job), mode, str(logs)], capture_output=True,
                          text=True, timeout=900, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    events = "".join(p.read_text(errors="replace") for p in logs.rglob("*") if p.is_file())
    assert "SparkListenerSQLExecutionStart" in events  # the plans are in it
    assert "HdpLdpUnitBound" in events  # the one-report operator ran (its plans logged)
    assert " INFO " in proc.stderr  # INFO logs were written
    if mode == "connect":
        assert "SparkListenerConnectOperationStarted" in events  # the statements too
    listed = json.dumps(got["secrets"])[1:-1]
    for secret in got["secrets"]:
        assert secret not in events
        assert secret not in proc.stderr
        assert secret not in proc.stdout.replace(listed, "")
    return got
