"""The parquet ledger's lock is a lease, not a PID that may belong to another namespace.

Two runs in different PID namespaces with the same host name (containers with host networking
on a shared volume, ``unshare --pid``) cannot judge each other's liveness by PID: the other's
PID is meaningless here (dead, or another process). The lock holds a random owner token and
an expiry that its holder renews; a lock is taken over only when its lease expired, or when
its holder ran in this very namespace and died. Nobody deletes another writer's files while
its lease is valid, and a writer whose lease ran out cannot commit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from job_helpers import REPO

from hdp_spark.errors import LedgerBusyError, LedgerConflictError
from hdp_spark.ledger import CommitRecord, ParquetLedger
from hdp_spark.ledger import _fs as fs
from hdp_spark.ledger.io import PandasIO

IO = PandasIO()


def record(i: int, users: int = 1, units: int = 5) -> CommitRecord:
    return CommitRecord(f"{i:016x}" * 4, "job", f"r{i}", "fp", "2026-01-01T00:00:00+00:00",
                        '{"rows": []}', users, units, commit_id=f"{i:016x}")


def spent(ledger: ParquetLedger) -> dict[str, int]:
    users, units = IO.to_pairs(ledger.spent(IO))
    return dict(zip(users, units, strict=True))


def _foreign_lock(root: Path, *, pid: int, expires_in: float) -> None:
    """The lock of a writer in another PID namespace with this host name, and its written
    but unpublished files (a delta and a commit record)."""
    (root / "_lock").write_text(json.dumps({
        "token": "f" * 32, "host": fs.host_id(), "pid": pid,
        "namespace": fs.host_id() + "/other-boot/4026532999", "lease_seconds": 30,
        "expires_at": time.time() + expires_in,
    }))
    delta = root / "spent" / "delta-00000000000000000001-foreign"
    delta.mkdir()
    (delta / "part-00000.parquet").write_bytes(b"PAR1....PAR1")
    (root / "commits" / "00000000000000000001-foreign.json").write_text("{}")


@pytest.mark.parametrize("pid", ["same_as_mine", "dead_here"])
def test_a_valid_lease_of_another_namespace_is_respected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pid: str
) -> None:
    root = tmp_path / "l"
    ledger = ParquetLedger(root, lock_timeout=0.5)
    # the foreign writer has our PID, or a PID with no process here; both say nothing
    # about a process of another namespace, so the liveness check must not be consulted
    monkeypatch.setattr(fs, "pid_alive", lambda _pid: False)
    _foreign_lock(root, pid=os.getpid() if pid == "same_as_mine" else 999_999, expires_in=30)
    with pytest.raises(LedgerBusyError, match="lock_timeout"), ledger.session(IO):
        pass
    # its unpublished files are intact, its lock too
    assert (root / "spent" / "delta-00000000000000000001-foreign").is_dir()
    assert (root / "commits" / "00000000000000000001-foreign.json").is_file()
    assert json.loads((root / "_lock").read_text())["token"] == "f" * 32


def test_an_expired_foreign_lease_is_taken_over_and_its_files_removed(tmp_path: Path) -> None:
    root = tmp_path / "l"
    ledger = ParquetLedger(root, lock_timeout=5)
    _foreign_lock(root, pid=os.getpid(), expires_in=-60)
    with ledger.session(IO) as s:
        s.commit(record(1), IO.from_pairs(["a"], [3]))
    assert spent(ledger) == {"a": 3}
    # the uncommitted attempt's record (an uncharged noisy outcome) is gone
    assert [p.name for p in (root / "commits").iterdir()] == [
        Path(e["file"]).name for e in ledger._latest()["commits"]
    ]
    assert not (root / "spent" / "delta-00000000000000000001-foreign").exists()
    assert not (root / "_lock").exists()


def test_the_lease_is_renewed_while_the_run_holds_it(tmp_path: Path) -> None:
    root = tmp_path / "l"
    holder = ParquetLedger(root, lock_timeout=5, lease_seconds=0.6)
    waiter = ParquetLedger(root, lock_timeout=1.2, lease_seconds=0.6)
    errors: list[BaseException] = []
    inside = threading.Event()

    def hold() -> None:
        try:
            with holder.session(IO) as s:
                inside.set()
                time.sleep(2.0)  # three lease lengths: only renewal keeps the lock
                s.commit(record(1), IO.from_pairs(["a"], [1]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=hold)
    t.start()
    assert inside.wait(5)
    with pytest.raises(LedgerBusyError), waiter.session(IO):
        pass
    t.join()
    assert errors == []
    assert spent(holder) == {"a": 1}


def test_a_writer_whose_lease_ran_out_cannot_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stalled writer (no renewal) loses its lock; the taker commits, the stalled writer's
    commit fails and leaves none of its files."""
    root = tmp_path / "l"
    stalled = ParquetLedger(root, lock_timeout=5, lease_seconds=0.5)
    monkeypatch.setattr(ParquetLedger, "_renew", lambda self, lock, token, stop: None)
    taker = ParquetLedger(root, lock_timeout=10, lease_seconds=0.5)
    with stalled.session(IO) as s:
        took = threading.Thread(target=lambda: _commit(taker, 2))
        took.start()
        took.join(20)
        assert not took.is_alive()
        with pytest.raises(LedgerConflictError, match="lease expired"):
            s.commit(record(1), IO.from_pairs(["a"], [7]))
    assert spent(taker) == {"b": 2}
    assert [r.release_id for r in taker.records()] == ["r2"]
    assert len(list((root / "commits").iterdir())) == 1


def _commit(ledger: ParquetLedger, i: int) -> None:
    with ledger.session(IO) as s:
        s.commit(record(i), IO.from_pairs(["b"], [2]))


_HOLDER = """
import sys, time
from pathlib import Path
from hdp_spark.ledger import CommitRecord, ParquetLedger
from hdp_spark.ledger.io import PandasIO
io = PandasIO()
ledger = ParquetLedger(sys.argv[1], lock_timeout=30, lease_seconds=1.0)
rec = CommitRecord("a" * 64, "job", "ra", "fp", "t", '{"rows": []}', 1, 5, commit_id="a" * 16)
with ledger.session(io) as s:
    Path(sys.argv[2]).write_text("locked")
    time.sleep(6.0)
    s.commit(rec, io.from_pairs(["u"], [5]))
"""


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--map-root-user", "true"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="unshare --pid needs user namespaces")
def test_two_pid_namespaces_share_one_ledger(tmp_path: Path) -> None:
    """A writer in a new PID namespace (its PID means nothing here) holds the lock; a writer
    of this namespace waits for it instead of breaking it, and both commits survive."""
    root = tmp_path / "l"
    ParquetLedger(root)
    marker = tmp_path / "locked"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # burn some PIDs in the new namespace so the holder's PID is not 1
    script = ('i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done; '
              f'exec {sys.executable} -c "$0" "$1" "$2"')
    holder = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--map-root-user", "sh", "-c", script, _HOLDER,
         str(root), str(marker)],
        env=env, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert holder.poll() is None, holder.stderr.read() if holder.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    owner = json.loads((root / "_lock").read_text())
    assert owner["namespace"] != fs.pid_namespace()
    ledger = ParquetLedger(root, lock_timeout=30)
    t0 = time.monotonic()
    with ledger.session(IO) as s:
        waited = time.monotonic() - t0
        s.commit(record(2), IO.from_pairs(["u", "v"], [1, 1]))
    _out, err = holder.communicate(timeout=60)
    assert holder.returncode == 0, err[-2000:]
    # it waited for the holder instead of breaking its lock (the holder sleeps 6 s after the
    # marker: a timing bound, with 5 s of margin for the poll and set-up on a loaded machine)
    assert waited > 1.0
    assert spent(ledger) == {"u": 6, "v": 1}
    assert sorted(r.release_id for r in ledger.records()) == ["r2", "ra"]
    assert len(list((root / "commits").iterdir())) == 2
