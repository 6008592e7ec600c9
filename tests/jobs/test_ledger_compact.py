"""Compact ledgers at scale (issue 18): SQLite format 3, the upgrade of formats 1 and 2, and
the compact parquet files.

Format 1 stored the 64-character idempotency key in every charge row and again in its index
(about 175 bytes per charge); format 2 interned the key as the commit's ``seq`` (still one
SQL row per charge, with the user id text: 25-40 bytes). Format 3 interns users as numbers
and keeps the audit log and the per-user totals as compressed columnar blobs (a few bytes
per charge). Older ledgers are upgraded on their first open, in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hdp_spark.ledger._sqlite_store as store_mod
from hdp_spark.errors import LedgerDamagedError, LedgerError
from hdp_spark.ledger import CommitRecord, ParquetLedger, SqliteLedger
from hdp_spark.ledger._columnar import PART_ROWS, encode_charges, encode_users
from hdp_spark.ledger.io import PandasIO

IO = PandasIO()
V4 = "hdp_spark.ledger.sqlite/4"

_COMMITS = """
CREATE TABLE commits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, commit_id TEXT NOT NULL,
    job TEXT NOT NULL, release_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
    committed_at TEXT NOT NULL, outcome TEXT NOT NULL, users_charged INTEGER NOT NULL,
    units_charged INTEGER NOT NULL);
"""
_V1 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spent (user_id TEXT PRIMARY KEY, units INTEGER NOT NULL CHECK (units >= 0));
""" + _COMMITS + """
CREATE TABLE charges (key TEXT NOT NULL, user_id TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units > 0), PRIMARY KEY (key, user_id));
"""
_V2 = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spent (user_id TEXT PRIMARY KEY, units INTEGER NOT NULL CHECK (units >= 0));
""" + _COMMITS + """
CREATE TABLE charges (seq INTEGER NOT NULL, user_id TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units > 0), PRIMARY KEY (seq, user_id)) WITHOUT ROWID;
"""
OLD_CHARGES = ({"a": 3, "b": 4}, {"b": 1, "c": 9}, {})


def record(i: int, users: int = 0, units: int = 0) -> CommitRecord:
    return CommitRecord(f"{i:016x}" * 4, "job", f"r{i}", "fp", "2026-01-01T00:00:00+00:00",
                        json.dumps({"rows": []}), users, units, commit_id=f"{i:016x}")


def spent(ledger: SqliteLedger | ParquetLedger) -> dict[str, int]:
    users, units = IO.to_pairs(ledger.spent(IO))
    return dict(zip(users, units, strict=True))


def commit(ledger: SqliteLedger | ParquetLedger, i: int, charges: dict[str, int]) -> None:
    with ledger.session(IO) as s:
        s.commit(record(i, len(charges), sum(charges.values())),
                 IO.from_pairs(list(charges), list(charges.values())))


def _old_ledger(path: Path, version: int) -> None:
    """A ledger as formats 1 and 2 wrote it (three commits, the last charging nobody)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(_V1 if version == 1 else _V2)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("format", f"hdp_spark.ledger.sqlite/{version}"), ("mac_secret", "ab" * 32),
        ("ledger_id", "0123456789abcdef")])
    for i, charges in enumerate(OLD_CHARGES, 1):
        r = record(i, len(charges), sum(charges.values()))
        cur = conn.execute(
            "INSERT INTO commits (key, job, release_id, fingerprint, committed_at, outcome, "
            "users_charged, units_charged, commit_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (r.key, r.job, r.release_id, r.fingerprint, r.committed_at, r.outcome,
             r.users_charged, r.units_charged, r.commit_id))
        ref = r.key if version == 1 else cur.lastrowid
        conn.executemany("INSERT INTO charges VALUES (?, ?, ?)",
                         [(ref, u, n) for u, n in charges.items()])
        conn.executemany("INSERT INTO spent VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE "
                         "SET units = units + excluded.units", list(charges.items()))
    conn.close()


def _sql(path: Path, query: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def _tables(path: Path) -> set[str]:
    return {str(r[0]) for r in _sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.mark.parametrize("version", [1, 2])
def test_old_ledger_is_upgraded_with_everything_kept(tmp_path: Path, version: int) -> None:
    path = tmp_path / "l.sqlite"
    _old_ledger(path, version)
    ledger = SqliteLedger(path)
    assert ledger.ledger_id == "0123456789abcdef"
    assert ledger.charges(record(1).key) == {"a": 3, "b": 4}
    assert ledger.charges(record(2).key) == {"b": 1, "c": 9}
    assert ledger.charges(record(3).key) == {}
    assert spent(ledger) == {"a": 3, "b": 5, "c": 9} == ledger.audit()
    assert [r.release_id for r in ledger.records()] == ["r1", "r2", "r3"]
    assert _sql(path, "SELECT value FROM meta WHERE name = 'format'") == [(V4,)]
    assert "spent" not in _tables(path)
    assert [c[1] for c in _sql(path, "PRAGMA table_info(charges)")] == [
        "seq", "part", "n", "data", "mac"]
    commit(ledger, 4, {"a": 2, "d": 1})  # and it keeps working
    again = SqliteLedger(path)
    assert again.charges(record(4).key) == {"a": 2, "d": 1}
    assert spent(again) == {"a": 5, "b": 5, "c": 9, "d": 1} == again.audit()


def test_an_upgrade_that_fails_midway_leaves_the_old_ledger_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "l.sqlite"
    _old_ledger(path, 2)

    def crash(*_args: Any) -> None:
        raise OSError("killed during the upgrade")

    monkeypatch.setattr(store_mod, "write_totals", crash)
    with pytest.raises(OSError, match="killed during the upgrade"):
        SqliteLedger(path)
    assert _sql(path, "SELECT value FROM meta WHERE name = 'format'") == [
        ("hdp_spark.ledger.sqlite/2",)]
    assert "spent" in _tables(path)
    assert "users" not in _tables(path)
    assert dict(_sql(path, "SELECT user_id, units FROM spent")) == {"a": 3, "b": 5, "c": 9}
    monkeypatch.undo()
    assert spent(SqliteLedger(path)) == {"a": 3, "b": 5, "c": 9}


def test_a_ledger_of_an_unknown_newer_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    SqliteLedger(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = 'hdp_spark.ledger.sqlite/9' WHERE name = 'format'")
    conn.close()
    with pytest.raises(LedgerDamagedError, match=r"format hdp_spark\.ledger\.sqlite/9"):
        SqliteLedger(path)


def test_totals_snapshot_plus_audit_log_is_the_spend(tmp_path: Path) -> None:
    """Small commits on a large ledger do not rewrite the totals (snapshot + deltas); every
    ``compact_every`` commits, or once the deltas hold as many charges as there are users,
    the snapshot is rewritten. The spend always equals the sum of the audit log."""
    path = tmp_path / "l.sqlite"
    ledger = SqliteLedger(path, compact_every=3)
    everyone = {f"u{i}": 10 for i in range(50)}
    commit(ledger, 1, everyone)  # 50 charges >= 50 users: folded at once
    assert _sql(path, "SELECT value FROM meta WHERE name = 'totals_seq'") == [("1",)]
    commit(ledger, 2, {"u1": 5})
    commit(ledger, 3, {"u2": 7, "new": 1})
    assert _sql(path, "SELECT value FROM meta WHERE name = 'totals_seq'") == [("1",)]
    expected = {**everyone, "u1": 15, "u2": 17, "new": 1}
    assert spent(ledger) == expected == ledger.audit()
    commit(ledger, 4, {"u3": 1})  # the third delta since the snapshot: folded
    assert _sql(path, "SELECT value FROM meta WHERE name = 'totals_seq'") == [("4",)]
    assert spent(ledger) == {**expected, "u3": 11} == ledger.audit()


def test_spend_is_exact_in_int64_units(tmp_path: Path) -> None:
    """Charges near the largest budget (2**50 units) add up exactly: no float anywhere."""
    ledger = SqliteLedger(tmp_path / "l.sqlite", compact_every=1)
    big = 2**50 + 1
    commit(ledger, 1, {"a": big, "b": 1})
    commit(ledger, 2, {"a": big - 2})
    assert spent(ledger) == {"a": 2 * big - 2, "b": 1} == ledger.audit()


@pytest.mark.parametrize(("users", "units", "match"), [
    (["a", "a"], [1, 2], "twice"),
    (["a", "b", "a"], [1, 1, 1], "twice"),
    (["a"], [-1], "negative"),
])
def test_a_malformed_charge_frame_is_refused_and_commits_nothing(
    tmp_path: Path, users: list[str], units: list[int], match: str,
) -> None:
    ledger = SqliteLedger(tmp_path / "l.sqlite")
    commit(ledger, 1, {"b": 1})  # "a"... are new users, "b" a known one
    with pytest.raises(LedgerError, match=match), ledger.session(IO) as s:
        s.commit(record(2), IO.from_pairs(users, units))
    assert spent(ledger) == {"b": 1}
    assert ledger.find(record(2).key) is None


def test_a_known_user_twice_is_refused(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "l.sqlite")
    commit(ledger, 1, {"a": 1, "b": 1})
    with pytest.raises(LedgerError, match="twice"), ledger.session(IO) as s:
        s.commit(record(2), IO.from_pairs(["a", "b", "a"], [1, 1, 1]))
    assert spent(ledger) == {"a": 1, "b": 1}


def test_zero_charges_and_non_string_ids(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "l.sqlite")
    frame = pd.DataFrame({"user_id": [1, 2, 3], "units": np.array([0, 4, 0], np.int64)})
    with ledger.session(IO) as s:
        s.commit(record(1, 1, 4), frame)
    assert spent(ledger) == {"2": 4}


def _corrupt(path: Path, sql: str, args: tuple[Any, ...] = ()) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


_ONE = np.array([1], np.int64)


@pytest.mark.parametrize(("sql", "args", "match"), [
    ("UPDATE charges SET data = ? WHERE seq = 2", (b"not parquet at all",), "fails its MAC"),
    ("UPDATE users SET data = ?", (b"PAR1 garbage PAR1",), "fails its MAC"),
    ("UPDATE totals SET data = ?", (b"",), "fails its MAC"),
    ("UPDATE charges SET n = n + 1 WHERE seq = 2", (), "differ from the sealed state"),
    ("UPDATE users SET first = 5", (), "fails its MAC"),
    ("UPDATE charges SET data = ? WHERE seq = 2",
     (encode_charges(np.array([9], np.int64), _ONE),), "fails its MAC"),
    ("UPDATE charges SET data = ? WHERE seq = 2",
     (encode_charges(_ONE, np.array([0], np.int64)),), "fails its MAC"),
    ("UPDATE totals SET part = 3", (), "fails its MAC"),
])
def test_damaged_blobs_are_refused(tmp_path: Path, sql: str, args: tuple[Any, ...],
                                   match: str) -> None:
    """A blob that SQLite's own check cannot see as damage (valid pages, wrong content) is
    refused, on the read-only path, inside a session and by the audit: nothing is charged.
    (Commit 1 is folded into the totals snapshot; commit 2 is a delta after it.)"""
    path = tmp_path / "l.sqlite"
    ledger = SqliteLedger(path)
    commit(ledger, 1, {"a": 1, "b": 2})
    commit(ledger, 2, {"b": 1})
    _corrupt(path, sql, args)
    with pytest.raises(LedgerDamagedError, match=match):
        ledger.spent(IO)
    with pytest.raises(LedgerDamagedError, match=match), ledger.session(IO) as s:
        s.spent()
    if "totals" not in sql:
        with pytest.raises(LedgerDamagedError, match=match):
            ledger.audit()
    try:  # a lookup checks what it reads (the sealed state first): damage, or not found
        assert ledger.find(record(3).key) is None
    except LedgerDamagedError:
        pass
    assert _sql(path, "SELECT COUNT(*) FROM commits") == [(2,)]  # nothing committed


def test_audit_log_damage_is_found_by_the_audit(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    ledger = SqliteLedger(path)
    commit(ledger, 1, {"a": 1})
    _corrupt(path, "UPDATE users SET data = ?", (encode_users(pa.array(["a", "b"])),))
    with pytest.raises(LedgerDamagedError, match="fails its MAC"):
        ledger.audit()


def _sqlite_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, page = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                       for p in ("page_count", "page_size"))
    finally:
        conn.close()
    return int(pages) * int(page)


def test_a_charge_costs_a_few_bytes(tmp_path: Path) -> None:
    """Three releases over 60,000 random-looking user ids: at most 16 bytes per charge in
    all (users, totals and audit log), and a repeat release adds only its audit log."""
    n = 60_000
    rng = np.random.default_rng(3)
    users = [f"{x:016x}" for x in rng.integers(0, 2**62, n)]
    levels = np.array([2**k for k in range(22, 30)], dtype=np.int64)
    path = tmp_path / "l.sqlite"
    ledger = SqliteLedger(path)
    sizes = []
    for r in range(1, 4):
        units = levels[rng.integers(0, len(levels), n)]
        with ledger.session(IO) as s:
            s.commit(record(r, n, int(units.sum())), IO.from_pairs(users, units.tolist()))
        sizes.append(_sqlite_size(path))
    assert sizes[-1] / (3 * n) <= 16, sizes
    assert (sizes[2] - sizes[1]) / n <= 4, sizes
    assert sum(spent(ledger).values()) == sum(r.units_charged for r in ledger.records())


def test_large_commits_are_split_in_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blobs hold at most PART_ROWS rows (here shrunk to 3): many parts read back whole."""
    import hdp_spark.ledger._columnar as columnar

    assert PART_ROWS >= 1 << 20
    monkeypatch.setattr(columnar, "PART_ROWS", 3)
    monkeypatch.setattr(store_mod, "PART_ROWS", 3)
    path = tmp_path / "l.sqlite"
    ledger = SqliteLedger(path, compact_every=2)
    first = {f"u{i:02d}": i + 1 for i in range(10)}
    commit(ledger, 1, first)
    second = {f"u{i:02d}": 1 for i in range(5, 14)}
    commit(ledger, 2, second)
    assert _sql(path, "SELECT COUNT(*) FROM users") == [(6,)]  # 10 users: 4 parts, 4 new: 2
    assert _sql(path, "SELECT COUNT(*) FROM totals") == [(4,)]  # commit 1's 10 totals
    assert ledger.charges(record(2).key) == second
    expected = {u: first.get(u, 0) + second.get(u, 0) for u in first | second}
    assert spent(ledger) == expected == ledger.audit()
    commit(ledger, 3, {"u13": 2})  # the second delta: folded into 14 totals
    assert _sql(path, "SELECT COUNT(*) FROM totals") == [(5,)]
    assert spent(ledger) == {**expected, "u13": 3} == ledger.audit()


def test_parquet_ledger_files_are_sorted_and_compact(tmp_path: Path) -> None:
    """The pandas writer sorts a delta by user id and encodes it compactly (prefix-encoded
    ids, dictionary-encoded charges, zstd)."""
    ledger = ParquetLedger(tmp_path / "l")
    commit(ledger, 1, {"c": 1, "a": 2, "b": 3})
    part = next((tmp_path / "l" / "spent").glob("delta-*/part-*.parquet"))
    table = pq.read_table(part)
    assert table.column("user_id").to_pylist() == ["a", "b", "c"]
    meta = pq.ParquetFile(part).metadata.row_group(0)
    assert {meta.column(i).compression for i in range(2)} == {"ZSTD"}
    assert spent(ledger) == {"a": 2, "b": 3, "c": 1}


@pytest.mark.parametrize("writer", ["pandas", "spark"])
def test_both_engines_share_compact_ledgers(tmp_path: Path, spark: Any, writer: str) -> None:
    """One ledger path serves both engines: a SQLite ledger (frames through Arrow) and a
    parquet ledger (prefix-encoded pyarrow files read by Spark, zstd Spark files read by
    pyarrow) written by one engine read back the same spend by the other."""
    from hdp_spark.spark.ledger_io import SparkIO

    sio = SparkIO(spark)
    write, read = (IO, sio) if writer == "pandas" else (sio, IO)
    charges = {f"user-{i:03d}": 2**30 + i for i in range(40)}
    for i, book in enumerate((SqliteLedger(tmp_path / "l.sqlite"),
                              ParquetLedger(tmp_path / "l", compact_every=2)), 1):
        for r in (1, 2):
            with book.session(write) as s:
                s.commit(record(10 * i + r, 40, sum(charges.values())),
                         write.from_pairs(list(charges), list(charges.values())))
        users, units = read.to_pairs(book.spent(read))
        assert dict(zip(users, units, strict=True)) == {u: 2 * n for u, n in charges.items()}
        with book.session(read) as s:
            users, units = read.to_pairs(s.spent())
        assert sum(units) == 2 * sum(charges.values())
