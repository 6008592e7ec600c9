"""CI smoke of the benchmarks: ``benchmarks/run.py --smoke`` must pass.

Every benchmark runs at tiny sizes in its own subprocess and must exit 0 with finite figures;
speed targets are never asserted (see ``benchmarks/run.py``). Anchor entries are skipped by
the runner when their benchmark-only venvs are absent (as in CI); the Spark anchors
(PipelineDP, Tumult) are left out here even where the venvs exist, to keep this test well
under 3 minutes: run ``benchmarks/run.py --smoke`` by hand to smoke them too. The selection
and coverage entries are left out because their own tests (``test_selection_bench.py``,
``test_coverage_bench.py``) run the same ``--smoke`` command and check more. The entries run
two at a time (``--jobs 2``) in two host processes (``--in-process``, ``benchmarks/
smoke_host.py``), each running its scripts one after another with one Spark session, not a
JVM start per script: they only have to run, their timings are not figures. Every script
still runs as ``__main__`` with its own ``--smoke`` command line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_benchmarks_smoke(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("the benchmarks need Java 17 for Spark")
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "run.py"),
        "--smoke",
        "--skip",
        "anchors-pipelinedp,anchors-tumult,selection,coverage",
        "--jobs",
        "2",
        "--in-process",
        "--out",
        str(tmp_path),
    ]
    start = time.monotonic()
    # its own process group: on a timeout the entry running under run.py (and its Spark)
    # is stopped too, not left running after the test
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(f"benchmark smoke timed out after 900 s:\n{stdout[-6000:]}")
    elapsed = time.monotonic() - start
    report = stdout[-6000:] + stderr[-3000:]
    assert proc.returncode == 0, f"benchmark smoke failed after {elapsed:.0f} s:\n{report}"
    assert "[run.py] summary" in stdout, report
    names = ("mean", "mean-parts", "pandas-mean", "seed001", "seed000-mean", "scaling", "solvers",
             "user-mean")
    for name in names:
        assert f"  {name} " in stdout, f"{name} did not run:\n{report}"
    print(stdout[stdout.index("[run.py] summary") :])
