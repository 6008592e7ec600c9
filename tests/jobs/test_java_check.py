"""Spark without Java: a one-line error with exit code 5 before anything is written."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from job_helpers import GROUPED_RELEASE, REPO, write_job

from hdp_spark.cli import main
from hdp_spark.errors import EngineUnavailableError
from hdp_spark.jobs import engines
from hdp_spark.jobs.engines import check_engine, java_executable


def _env_without_java(tmp: Path, java_home: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "SPARK_REMOTE", "SPARK_HOME")}
    empty = tmp / "empty-bin"
    empty.mkdir(exist_ok=True)
    env["PATH"] = str(empty)
    env["PYTHONPATH"] = str(REPO)
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    return env


def _run(tmp: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    job = write_job(tmp, releases=GROUPED_RELEASE)
    return subprocess.run(
        [sys.executable, "-m", "hdp_spark.jobs", "run", str(job), "--engine", "spark"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )


@pytest.mark.parametrize("java_home", [None, "missing-jdk"])
def test_spark_without_java_exits_5_and_writes_nothing(
    tmp_path: Path, java_home: str | None
) -> None:
    pytest.importorskip("pyspark")
    home = str(tmp_path / java_home) if java_home else None
    proc = _run(tmp_path, _env_without_java(tmp_path, home))
    assert proc.returncode == 5, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert "Traceback" not in proc.stderr
    assert "the Spark engine needs Java 17" in errors[0]
    if java_home:
        assert "JAVA_HOME" in errors[0]
        assert "bin/java" in errors[0]
    else:
        assert "JAVA_HOME is not set and no `java` is on PATH" in errors[0]
    assert proc.stdout == ""
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ledger.sqlite").exists()


def test_java_executable_follows_the_spark_launcher(tmp_path: Path) -> None:
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    java = jdk / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    assert java_executable({"JAVA_HOME": str(jdk), "PATH": ""}) is None  # not executable
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    assert java_executable({"JAVA_HOME": str(jdk), "PATH": ""}) == str(java)
    # without JAVA_HOME: `java` on PATH; JAVA_HOME wins when set (as in bin/spark-class)
    assert java_executable({"PATH": str(jdk / "bin")}) == str(java)
    assert java_executable({"PATH": str(tmp_path)}) is None
    assert java_executable({"JAVA_HOME": str(tmp_path), "PATH": str(jdk / "bin")}) is None


def test_check_engine_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    check_engine("pandas")  # pandas needs no Java
    check_engine("spark", spark=object())  # a given session is running already
    check_engine("spark", conf=(("spark.remote", "sc://host:15002"),))  # remote Connect
    with pytest.raises(EngineUnavailableError, match="needs Java 17"):
        check_engine("spark")
    # through the CLI: exit code 5, nothing written
    job = write_job(tmp_path, releases=GROUPED_RELEASE)
    assert main(["run", str(job), "--engine", "spark"]) == 5
    assert main(["check", str(job), "--engine", "spark"]) == 5
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ledger.sqlite").exists()


def test_check_engine_without_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(EngineUnavailableError, match="needs pyspark"):
        engines.check_engine("spark")
