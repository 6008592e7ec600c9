"""Many processes creating the same SQLite ledger at once all succeed (CI flake, stop 10)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hdp_spark.errors import LedgerBusyError
from hdp_spark.ledger.sqlite import SqliteLedger

_OPEN = """
import sys, time
from pathlib import Path
from hdp_spark.ledger.sqlite import SqliteLedger
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # start together
for i in range(40):  # 40 fresh files: the processes collide on the first open of many
    SqliteLedger(Path(sys.argv[1]) / f"l{i}.sqlite", lock_timeout=60)
"""


def test_concurrent_first_open_never_reports_locked(tmp_path: Path) -> None:
    start_at = str(time.time() + 3.0)
    procs = [
        subprocess.Popen([sys.executable, "-c", _OPEN, str(tmp_path), start_at],
                         stderr=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    assert list(SqliteLedger(tmp_path / "l0.sqlite").records()) == []


def test_wal_switch_gives_up_after_lock_timeout(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "ledger.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # rollback-journal exclusive lock: WAL switch must wait
    try:
        with pytest.raises(LedgerBusyError, match="lock_timeout"):
            SqliteLedger(path, lock_timeout=0.3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    SqliteLedger(path, lock_timeout=5)  # and succeeds once the lock is gone
