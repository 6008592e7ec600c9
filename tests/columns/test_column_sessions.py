"""The Column snippet (and its SQL form) on Spark Connect and on a cluster with separate
executor JVMs and Python workers: the same numbers as the release API, and as classic local mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("column_job.py")


def _run(mode: str) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.run([sys.executable, str(JOB), mode], capture_output=True, text=True,
                          timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def classic(spark: Any) -> dict[str, Any]:
    sys.path.insert(0, str(JOB.parent))
    try:
        from column_job import run
    finally:
        sys.path.pop(0)
    return run(spark)


def _check(got: dict[str, Any]) -> None:
    assert got["total"] == got["ref_total"]
    assert got["mean"] == got["ref_mean"] == got["sql"]
    assert got["bins"] == got["ref_bins"]


def test_classic_column_equals_release_api(classic: dict[str, Any]) -> None:
    _check(classic)


def test_connect_column_equals_release_api_and_classic(classic: dict[str, Any]) -> None:
    pytest.importorskip("pyspark.sql.connect")
    got = _run("connect")
    assert "connect" in got["session"]
    _check(got)
    assert {k: v for k, v in got.items() if k != "session"} == {
        k: v for k, v in classic.items() if k != "session"}


@pytest.mark.slow
def test_local_cluster_column_equals_classic(classic: dict[str, Any]) -> None:
    """local-cluster[2,1,1024]: two executor JVMs, each with its own Python workers; they
    load the extension from spark.jars and the finalize from the installed package only."""
    got = _run("local-cluster[2,1,1024]")
    _check(got)
    assert {k: v for k, v in got.items() if k != "session"} == {
        k: v for k, v in classic.items() if k != "session"}


def test_connect_without_the_extension_names_configure() -> None:
    """A Column on a Connect server without the extension fails with an error naming
    ``configure``; the release API keeps working on the same session."""
    pytest.importorskip("pyspark.sql.connect")
    got = _run("connect-bare")
    assert got["error"].startswith("ExtensionMissingError")
    assert "hdp_spark.spark.configure" in got["error"]
    assert got["release_n"] == 4000
