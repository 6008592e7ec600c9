"""A job run's log lines are its own: third-party libraries stay below WARNING unless
``-v -v`` (issue 34)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobs.job_helpers import write_job

_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<level>[A-Z]+) (?P<name>[\w.]+): ")


def _run(job: Path, *flags: str) -> list[tuple[str, str]]:
    """(level, logger) of every log line the command wrote on stderr; other lines (a
    library printing on its own) count as ("?", "?")."""
    proc = subprocess.run(
        [sys.executable, "-m", "hdp_spark.jobs", "run", str(job), *flags],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = []
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((m["level"], m["name"]))
        elif line.strip() and not line.startswith((" ", "\t")):
            out.append(("?", "?"))
    return out


def _third_party(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(lv, n) for lv, n in lines if n != "hdp_spark" and not n.startswith("hdp_spark.")]


@pytest.mark.slow
def test_a_job_run_logs_only_its_own_lines(tmp_path: Path) -> None:
    # the schema makes the run import and run great_expectations (212 INFO lines before)
    job = write_job(tmp_path, schema=True)
    lines = _run(job)
    assert ("INFO", "hdp_spark.jobs") in lines
    assert _third_party(lines) == []
    quiet = _run(job, "-q")  # a re-run: re-publishes
    assert [x for x in quiet if x[0] in ("INFO", "DEBUG", "?")] == []
    # -v -v lets the libraries talk: the filter above is what keeps them out
    loud = _run(job, "-v", "-v")
    assert any(n.startswith("great_expectations") for _, n in _third_party(loud))


def test_a_spark_session_the_job_creates_shows_no_progress_bars(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark's console progress bars (`[Stage 3:==> (1 + 1) / 2]`) are off for the session a
    job creates; a job's `[spark]` table may turn them back on. (No JVM: the builder's
    options are read instead of starting a session.)"""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from hdp_spark.spark import job_adapter

    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", lambda self: dict(self._options))
    options = job_adapter._session(None, [("spark.sql.shuffle.partitions", "4")])
    assert options["spark.ui.showConsoleProgress"] == "false"
    assert options["spark.sql.shuffle.partitions"] == "4"
    options = job_adapter._session(None, [("spark.ui.showConsoleProgress", "true")])
    assert options["spark.ui.showConsoleProgress"] == "true"
