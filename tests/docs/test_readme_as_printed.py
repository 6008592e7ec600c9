"""The README's Spark quickstart on Spark Connect, as a newcomer runs it: its blocks with the
commented Connect line in place of the classic one, saved to a file and started with the
venv's interpreter in a fresh process, nothing activated, no ``PYSPARK_PYTHON`` (the
suite's conftest sets it for its own session; a user has none), the PATH a user has; no
warning on a correct set-up.

The blocks as printed (classic) run in the same newcomer's environment, each alone, with
the same checks (no warning, no traceback, every department shown) in
``test_doc_blocks.py``; running them once more here, together, checked nothing those runs
do not (one Spark process, ~23 CPU s, saved: issue 53)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reader_env import newcomer_env, without_daemon_race
from test_readme_quickstart import CLASSIC, CONNECT, ROOT, _quickstart_blocks

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PROBE = """
import json as _json
print(_json.dumps({"session": type(spark).__module__,
                   "depts": sorted(r["dept"] for r in out.collect()),
                   "column_depts": sorted(r["dept"] for r in per_dept.collect()),
                   "eps": dict(df.dtypes)["eps"]}))
"""
"""Appended after the blocks: the session's kind and what the release and the Columns
computed, as one JSON line (the blocks' own output is a reader's tables)."""

def test_spark_quickstart_runs_as_printed_in_a_fresh_process_on_connect(
    tmp_path: Path
) -> None:
    pytest.importorskip("pyspark.sql.connect")
    code = _quickstart_blocks()["spark"]
    assert CLASSIC in code  # the lines swapped below are the printed ones
    assert "# " + CONNECT in code
    code = code.replace(CLASSIC, "# " + CLASSIC).replace("# " + CONNECT, CONNECT)
    script = tmp_path / "quickstart.py"
    script.write_text(code + PROBE)  # the blocks as printed, then what the test reads
    python = ROOT / ".venv" / "bin" / "python"
    interpreter = str(python) if python.exists() else sys.executable
    proc = subprocess.run([interpreter, str(script)], cwd=ROOT, env=newcomer_env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    depts = ["engineering", "finance", "operations", "research", "sales"]
    for dept in depts:
        assert dept in proc.stdout  # the snippet shows its tables
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "connect" in got["session"]
    assert got["depts"] == got["column_depts"] == depts
    assert got["eps"] == "double"
    assert "UserWarning" not in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in without_daemon_race(proc.stderr)  # PySpark's own race aside
