"""SQLite ledger format 2: the release key is interned in the audit log (issue 18, part).

Format 1 stored the 64-character idempotency key in every charge row and again in its index
(about 175 bytes per charge); format 2 stores the commit's integer ``seq`` in a
``WITHOUT ROWID`` table. A format-1 ledger is migrated on its first open, keeping every
record, spend and charge.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hdp_spark.ledger import CommitRecord, SqliteLedger
from hdp_spark.ledger.io import PandasIO

IO = PandasIO()

_V1 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spent (user_id TEXT PRIMARY KEY, units INTEGER NOT NULL CHECK (units >= 0));
CREATE TABLE commits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, commit_id TEXT NOT NULL,
    job TEXT NOT NULL, release_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
    committed_at TEXT NOT NULL, outcome TEXT NOT NULL, users_charged INTEGER NOT NULL,
    units_charged INTEGER NOT NULL);
CREATE TABLE charges (key TEXT NOT NULL, user_id TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units > 0), PRIMARY KEY (key, user_id));
"""


def record(i: int, users: int, units: int) -> CommitRecord:
    return CommitRecord(f"{i:016x}" * 4, "job", f"r{i}", "fp", "2026-01-01T00:00:00+00:00",
                        json.dumps({"rows": []}), users, units, commit_id=f"{i:016x}")


def _v1_ledger(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(_V1)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("format", "hdp_spark.ledger.sqlite/1"), ("mac_secret", "ab" * 32),
        ("ledger_id", "0123456789abcdef")])
    for i, charges in ((1, {"a": 3, "b": 4}), (2, {"b": 1, "c": 9})):
        r = record(i, len(charges), sum(charges.values()))
        conn.execute(
            "INSERT INTO commits (key, job, release_id, fingerprint, committed_at, outcome, "
            "users_charged, units_charged, commit_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (r.key, r.job, r.release_id, r.fingerprint, r.committed_at, r.outcome,
             r.users_charged, r.units_charged, r.commit_id))
        conn.executemany("INSERT INTO charges VALUES (?, ?, ?)",
                         [(r.key, u, n) for u, n in charges.items()])
        conn.executemany("INSERT INTO spent VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE "
                         "SET units = units + excluded.units", list(charges.items()))
    conn.close()


def test_format_1_ledger_is_migrated_with_everything_kept(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _v1_ledger(path)
    ledger = SqliteLedger(path)
    assert ledger.ledger_id == "0123456789abcdef"
    assert ledger.charges(record(1, 0, 0).key) == {"a": 3, "b": 4}
    assert ledger.charges(record(2, 0, 0).key) == {"b": 1, "c": 9}
    users, units = IO.to_pairs(ledger.spent(IO))
    assert dict(zip(users, units, strict=True)) == {"a": 3, "b": 5, "c": 9}
    assert [r.release_id for r in ledger.records()] == ["r1", "r2"]
    conn = sqlite3.connect(path)
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(charges)")]
        fmt = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0]
    finally:
        conn.close()
    assert columns == ["seq", "user_id", "units"]
    assert fmt == "hdp_spark.ledger.sqlite/2"
    with ledger.session(IO) as s:  # and it keeps working
        s.commit(record(3, 1, 2), IO.from_pairs(["a"], [2]))
    assert SqliteLedger(path).charges(record(3, 0, 0).key) == {"a": 2}


def test_a_charge_costs_tens_of_bytes_not_a_key(tmp_path: Path) -> None:
    """The second release over the same users adds only audit-log rows (spend is updated in
    place): its size per charge must be far below format 1's ~175 bytes."""
    n = 20_000
    users = [f"user-{i:07d}" for i in range(n)]
    path = tmp_path / "l.sqlite"
    ledger = SqliteLedger(path)

    def size() -> int:
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages, page = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                           for p in ("page_count", "page_size"))
        finally:
            conn.close()
        return int(pages) * int(page)

    with ledger.session(IO) as s:
        s.commit(record(1, n, n * 2**28), IO.from_pairs(users, [2**28] * n))
    first = size()
    with ledger.session(IO) as s:
        s.commit(record(2, n, n * 2**27), IO.from_pairs(users, [2**27] * n))
    per_charge = (size() - first) / n
    assert per_charge < 40, per_charge
