"""Ledger storage: atomic commit, rollback, idempotent lookup, locks, conflicts, compaction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hdp_spark.errors import LedgerBusyError, LedgerConflictError, LedgerError
from hdp_spark.ledger import CommitRecord, ParquetLedger, SqliteLedger, open_ledger
from hdp_spark.ledger.io import PandasIO

IO = PandasIO()


def record(i: int, users: int = 2, units: int = 10) -> CommitRecord:
    key = f"{i:016x}" * 4
    return CommitRecord(key, "job", f"r{i}", "fp", "2026-01-01T00:00:00+00:00",
                        json.dumps({"rows": [{"x": i}]}), users, units, commit_id=f"{i:016x}")


def spent(ledger: SqliteLedger | ParquetLedger) -> dict[str, int]:
    users, units = IO.to_pairs(ledger.spent(IO))
    return dict(zip(users, units, strict=True))


@pytest.fixture(params=["sqlite", "parquet"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> SqliteLedger | ParquetLedger:
    name = "l.sqlite" if request.param == "sqlite" else "l"
    return open_ledger(request.param, tmp_path / name, lock_timeout=2, compact_every=3)


def test_commit_charges_and_records(ledger: SqliteLedger | ParquetLedger) -> None:
    assert spent(ledger) == {}
    with ledger.session(IO) as s:
        assert s.find(record(1).key) is None
        s.commit(record(1), IO.from_pairs(["a", "b"], [4, 6]))
    with ledger.session(IO) as s:
        assert s.find(record(1).key) == record(1)
        s.commit(record(2), IO.from_pairs(["b", "c"], [1, 2]))
    assert spent(ledger) == {"a": 4, "b": 7, "c": 2}
    assert [r.release_id for r in ledger.records()] == ["r1", "r2"]
    assert ledger.find(record(2).key) == record(2)
    assert record(2).outcome_data() == {"rows": [{"x": 2}]}


def test_exception_inside_a_session_commits_nothing(
    ledger: SqliteLedger | ParquetLedger,
) -> None:
    def boom() -> None:
        raise RuntimeError("crash before the commit point")

    with pytest.raises(RuntimeError), ledger.session(IO) as s:
        s.commit(record(1), IO.from_pairs(["a"], [5]), before_commit=boom)
    assert spent(ledger) == {}
    assert ledger.find(record(1).key) is None
    assert list(ledger.records()) == []
    with ledger.session(IO) as s:  # the lock was released
        s.commit(record(1), IO.from_pairs(["a"], [5]))
    assert spent(ledger) == {"a": 5}


def test_a_session_commits_once(ledger: SqliteLedger | ParquetLedger) -> None:
    with ledger.session(IO) as s:
        s.commit(record(1), IO.from_pairs(["a"], [1]))
        with pytest.raises(LedgerError, match="at most once"):
            s.commit(record(2), IO.from_pairs(["a"], [1]))


def test_second_session_waits_for_the_first(ledger: SqliteLedger | ParquetLedger) -> None:
    events: list[str] = []

    def second() -> None:
        with ledger.session(IO) as s:
            events.append("second-in")
            s.commit(record(2), IO.from_pairs(["a"], [1]))

    with ledger.session(IO) as s:
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        events.append("first-commit")
        s.commit(record(1), IO.from_pairs(["a"], [1]))
    t.join(10)
    assert events == ["first-commit", "second-in"]
    assert spent(ledger) == {"a": 2}


def test_lock_timeout(ledger: SqliteLedger | ParquetLedger) -> None:
    ledger.lock_timeout = 0.3
    errors: list[BaseException] = []

    def other() -> None:
        try:
            with ledger.session(IO):
                pass
        except BaseException as exc:
            errors.append(exc)

    with ledger.session(IO):
        t = threading.Thread(target=other)
        t.start()
        t.join(10)
    assert len(errors) == 1
    assert isinstance(errors[0], LedgerBusyError)
    assert "lock_timeout" in str(errors[0])


def test_parquet_version_check_is_the_fence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers based on the same version: the second commit fails and leaves no trace,
    even when it wrongly believes it still holds its lease (stalled after its lease check)."""
    ledger = ParquetLedger(tmp_path / "l")
    from hdp_spark.ledger.parquet import _ParquetSession

    stale = _ParquetSession(ledger, IO, ledger._latest(), "stale-token")
    with ledger.session(IO) as s:
        s.commit(record(1), IO.from_pairs(["a"], [3]))
    monkeypatch.setattr(ledger, "_holds", lambda token: True)
    with pytest.raises(LedgerConflictError, match="version 1"):
        stale.commit(record(2), IO.from_pairs(["a"], [100]))
    assert spent(ledger) == {"a": 3}
    assert ledger.find(record(2).key) is None
    # the losing attempt's files (its record holds an uncharged noisy outcome) are gone
    assert len(list((tmp_path / "l" / "commits").iterdir())) == 1
    assert len(list((tmp_path / "l" / "spent").iterdir())) == 1


def test_parquet_writer_without_a_valid_lease_does_not_commit(tmp_path: Path) -> None:
    ledger = ParquetLedger(tmp_path / "l")
    from hdp_spark.ledger.parquet import _ParquetSession

    stale = _ParquetSession(ledger, IO, ledger._latest(), "not-the-holder")
    with pytest.raises(LedgerConflictError, match="lease expired"):
        stale.commit(record(2), IO.from_pairs(["a"], [100]))
    assert ledger.version == 0
    assert list((tmp_path / "l" / "commits").iterdir()) == []
    assert list((tmp_path / "l" / "spent").iterdir()) == []


def test_parquet_breaks_the_lock_of_a_dead_process(tmp_path: Path) -> None:
    ledger = ParquetLedger(tmp_path / "l", lock_timeout=5)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(proc.stdout)
    from hdp_spark.ledger._fs import host_id, pid_namespace

    (tmp_path / "l" / "_lock").write_text(  # a valid lease, but its holder died right here
        json.dumps({"token": "t", "host": host_id(), "pid": dead, "namespace": pid_namespace(),
                    "lease_seconds": 30, "expires_at": time.time() + 30})
    )
    t0 = time.monotonic()
    with ledger.session(IO) as s:
        s.commit(record(1), IO.from_pairs(["a"], [1]))
    # broken at once, not after the 30 s lease: a timing bound with a wide margin for a loaded
    # machine (was 3 s; the lease expiry it rules out takes 30 s)
    assert time.monotonic() - t0 < 20
    assert not (tmp_path / "l" / "_lock").exists()


def test_parquet_waits_for_a_live_lock(tmp_path: Path) -> None:
    ledger = ParquetLedger(tmp_path / "l", lock_timeout=0.3)
    from hdp_spark.ledger._fs import host_id

    (tmp_path / "l" / "_lock").write_text(
        json.dumps({"token": "t", "host": host_id(), "pid": os.getpid(), "created_at": "x"})
    )
    with pytest.raises(LedgerBusyError), ledger.session(IO):
        pass


def test_parquet_compaction_keeps_totals(tmp_path: Path) -> None:
    ledger = ParquetLedger(tmp_path / "l", compact_every=2)
    for i in range(1, 6):
        with ledger.session(IO) as s:
            s.commit(record(i), IO.from_pairs(["a", f"u{i}"], [1, i]))
    manifest = ledger._latest()
    assert manifest["version"] == 5
    assert manifest["snapshot"] is not None
    assert len(manifest["deltas"]) < 2
    assert spent(ledger) == {"a": 5, **{f"u{i}": i for i in range(1, 6)}}
    assert len(list(ledger.records())) == 5


def test_parquet_release_without_charges_writes_no_delta(tmp_path: Path) -> None:
    ledger = ParquetLedger(tmp_path / "l")
    with ledger.session(IO) as s:
        s.commit(record(1, users=0, units=0), IO.from_pairs([], []))
    assert ledger._latest()["deltas"] == []
    assert ledger.find(record(1).key) is not None


def test_sqlite_keeps_an_audit_log(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "l.sqlite")
    with ledger.session(IO) as s:
        s.commit(record(1), IO.from_pairs(["a", "b"], [4, 6]))
    assert ledger.charges(record(1).key) == {"a": 4, "b": 6}


def test_not_a_ledger(tmp_path: Path) -> None:
    (tmp_path / "l" / "_manifests").mkdir(parents=True)
    (tmp_path / "l" / "_manifests" / f"{1:020d}.json").write_text("{not json")
    with pytest.raises(LedgerError, match="unreadable"):
        ParquetLedger(tmp_path / "l").find("0" * 64)
    with pytest.raises(LedgerError, match="64 lowercase hex"):
        CommitRecord("xyz", "j", "r", "f", "t", "{}", 0, 0)


@pytest.mark.parametrize("case", ["same users", "other users", "same users, other order"])
def test_pandas_spend_read_sums_directories_exactly(tmp_path: Path, case: str) -> None:
    """Directories charging the same users (summed elementwise, no hash aggregation) and
    directories charging others (hash aggregation) give the same exact per-user sums."""
    io = PandasIO()
    first = {"a": 3, "b": 2**40, "c": 1}
    second = {"a": 5, "b": 7, "c": 2**62} if case != "other users" else {"b": 1, "d": 9}
    dirs = []
    for i, charges in enumerate((first, second, first)):
        users = list(charges)
        if case == "same users, other order" and i == 1:
            users.reverse()
        path = tmp_path / f"d{i}"
        if case == "same users, other order" and i == 1:  # written unsorted, as Spark may
            import pyarrow as pa
            import pyarrow.parquet as pq

            path.mkdir()
            pq.write_table(pa.table({"user_id": users, "units": [charges[u] for u in users]}),
                           path / "part-00000.parquet")
        else:
            io.write_parquet(io.from_pairs(users, [charges[u] for u in users]), str(path))
        dirs.append(str(path))
    got = dict(zip(*io.to_pairs(io.read_parquet(dirs)), strict=True))
    want: dict[str, int] = {}
    for charges in (first, second, first):
        for user, units in charges.items():
            want[user] = want.get(user, 0) + units
    assert got == want
    assert io.read_parquet(dirs)["units"].dtype == "int64"
