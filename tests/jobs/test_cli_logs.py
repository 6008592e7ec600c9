"""A job run's output: by default one stdout line per release and a short summary, log
lines only for warnings; ``-v`` what the job does, ``-v -v`` each stage's wall time, and only
``-v -v -v`` lets third-party libraries' lines through (issues 34, 53). A progress bar only
on a terminal."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hdp_spark.cli import main
from hdp_spark.jobs.progress import Progress, TerminalProgress, terminal_progress
from tests.jobs.job_helpers import write_job

_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<level>[A-Z]+) (?P<name>[\w.]+): "
                   r"(?P<message>.*)$")


def _run(job: Path, *flags: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(level, logger, message) of every log line the command wrote on stderr (other lines,
    a library printing on its own, count as ("?", "?", line)), and its stdout lines."""
    proc = subprocess.run(
        [sys.executable, "-m", "hdp_spark.jobs", "run", str(job), *flags],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = []
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((m["level"], m["name"], m["message"]))
        elif line.strip() and not line.startswith((" ", "\t")):
            out.append(("?", "?", line))
    return out, proc.stdout.splitlines()


def _third_party(lines: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [x for x in lines if x[1] != "hdp_spark" and not x[1].startswith("hdp_spark.")]


def _timings(lines: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [x for x in lines if re.match(r"stage \S+ done in \d", x[2])]


@pytest.mark.slow
def test_a_job_run_is_quiet_by_default_and_talks_with_v(tmp_path: Path) -> None:
    # the suite makes the run import and run great_expectations (212 INFO lines before)
    job = write_job(tmp_path, schema=True, expectations=True)
    lines, out = _run(job)
    assert lines == []  # no log line at all: nothing went wrong (and stderr is no terminal)
    # one line per release, then at most 5 summary lines
    assert [x.split(":")[0] for x in out[:2]] == ["salary_by_dept", "tenure_overall"]
    assert 1 <= len(out) - 2 <= 5, out
    assert out[2] == "job t_job: 2 committed, 0 re-published; ledger " + str(
        tmp_path / "ledger.sqlite")
    assert not any("done in" in x or " s;" in x for x in out)  # no timings on stdout
    verbose, out = _run(job, "-v")  # a re-run: re-publishes
    mine = [x for x in verbose if x[1] == "hdp_spark.jobs"]
    assert {x[0] for x in mine} == {"INFO"}
    assert any("re-published, nothing charged" in x[2] for x in mine)
    assert _timings(verbose) == []  # stage timings are DEBUG
    assert _third_party(verbose) == []
    assert out[2] == "job t_job: 0 committed, 2 re-published; ledger " + str(
        tmp_path / "ledger.sqlite")
    quiet, _ = _run(job, "-q")
    assert quiet == []
    debug, _ = _run(job, "-v", "-v")
    timings = _timings(debug)
    assert {x[0] for x in timings} == {"DEBUG"}
    assert {x[2].split()[1] for x in timings} >= {"load", "validate", "report",
                                                   "release:salary_by_dept"}
    assert _third_party(debug) == []
    # -v -v -v lets the libraries talk: the filter above is what keeps them out
    loud, _ = _run(job, "-v", "-v", "-v")
    assert any(x[1].startswith("great_expectations") for x in _third_party(loud))


class _Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_progress_bar_is_drawn_only_on_a_terminal() -> None:
    assert type(terminal_progress(io.StringIO())) is Progress  # a pipe or a log file
    tty = _Terminal()
    bar = terminal_progress(tty)
    assert isinstance(bar, TerminalProgress)
    bar.begin(3)
    bar.stage("loading the input")
    bar.stage("release salary_by_dept")
    bar.stage("writing the report")
    bar.end()
    drawn = tty.getvalue()
    assert "loading the input" in drawn
    assert re.search(r"release salary_by_dept \|.*\| 1/3", drawn), drawn
    assert re.search(r"writing the report \|.*\| 2/3", drawn), drawn
    assert not re.search(r"\d+(\.\d+)?s|it/s|\d\d:\d\d", drawn), drawn  # no timings


def test_a_run_on_a_terminal_shows_the_bar_and_logs_above_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI draws the bar on a terminal stderr (cleared at the end), writes warnings
    above it, and prints one line per release and the summary on stdout; ``-q`` draws
    no bar."""
    tty = _Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    job = write_job(tmp_path, seed="t53")  # unsafe_seed: a warning while the bar is drawn
    assert main(["run", str(job)]) == 0
    drawn = tty.getvalue()
    assert re.search(r"release tenure_overall \|.*\| \d/7", drawn), drawn
    warning = next(line for line in drawn.splitlines() if "WARNING" in line)
    assert warning.rstrip().endswith("its noise is reproducible and NOT private")
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 + 2  # releases, counts and ledger, manifest (no report here)
    assert out[2].startswith("job t_job: 2 committed, 0 re-published; ledger ")
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main(["run", str(job), "-q"]) == 0
    # warnings only, no bar
    assert [_LINE.match(x)["level"] for x in quiet.getvalue().splitlines()] == ["WARNING"]  # type: ignore[index]


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
