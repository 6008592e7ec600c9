"""Tables of the SQLite ledger and the upgrades of formats 1 and 2 (one SQL row per charge).

Format 1 stored the 64-character idempotency key in every charge row; format 2 interned it
as the commit's ``seq``; format 3 stores users, the audit log and the totals as columnar
blobs; format 4 seals every row (:mod:`hdp_spark.ledger._sqlite_store`). Formats 1 and 2
are migrated to the tables of format 4 here (rows not sealed yet: the caller seals them in
the same transaction); format 3 gets its MAC columns from :data:`ADD_MACS`.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pyarrow as pa

from hdp_spark.ledger import _sqlite_store as store
from hdp_spark.ledger._columnar import intern

__all__ = ["ADD_MACS", "MIGRATE_V1", "SCHEMA", "migrate_v2"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    commit_id TEXT NOT NULL,
    job TEXT NOT NULL,
    release_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    committed_at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    users_charged INTEGER NOT NULL,
    units_charged INTEGER NOT NULL,
    key_mac TEXT NOT NULL DEFAULT '',
    mac TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS users (
    first INTEGER PRIMARY KEY,
    n INTEGER NOT NULL CHECK (n > 0),
    data BLOB NOT NULL,
    mac TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER NOT NULL,
    part INTEGER NOT NULL,
    n INTEGER NOT NULL CHECK (n > 0),
    data BLOB NOT NULL,
    mac TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (seq, part)
);
CREATE TABLE IF NOT EXISTS totals (
    part INTEGER PRIMARY KEY,
    n INTEGER NOT NULL CHECK (n > 0),
    data BLOB NOT NULL,
    mac TEXT NOT NULL DEFAULT ''
);
INSERT OR IGNORE INTO meta VALUES ('totals_seq', '0')
"""

ADD_MACS = """
ALTER TABLE commits ADD COLUMN key_mac TEXT NOT NULL DEFAULT '';
ALTER TABLE commits ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE charges ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE totals ADD COLUMN mac TEXT NOT NULL DEFAULT ''
"""

MIGRATE_V1 = """
CREATE TABLE charges_v2 (
    seq INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units > 0),
    PRIMARY KEY (seq, user_id)
) WITHOUT ROWID;
INSERT INTO charges_v2 (seq, user_id, units)
    SELECT c.seq, g.user_id, g.units FROM charges g JOIN commits c ON c.key = g.key;
DROP TABLE charges;
ALTER TABLE charges_v2 RENAME TO charges
"""


def migrate_v2(c: sqlite3.Connection) -> None:
    """Format 2 -> 3 inside the caller's transaction (see :meth:`SqliteLedger._upgrade`).

    Users are numbered in user-id order; the ``spent`` table is the new totals snapshot
    (as of the newest commit); each commit's charge rows become its audit-log blobs.
    """
    users = pa.array(
        [str(r[0]) for r in c.execute(
            "SELECT user_id FROM spent UNION SELECT user_id FROM charges ORDER BY 1")],
        pa.string(),
    )
    rows = c.execute("SELECT user_id, units FROM spent").fetchall()
    totals = np.zeros(len(users), dtype=np.int64)
    if rows:
        numbers, _new = intern(users, pa.array([str(u) for u, _ in rows], pa.string()))
        totals[numbers] = np.array([int(n) for _, n in rows], dtype=np.int64)
    per_commit: dict[int, tuple[list[str], list[int]]] = {}
    for seq, user, units in c.execute(
        "SELECT seq, user_id, units FROM charges ORDER BY seq"
    ):
        names, amounts = per_commit.setdefault(int(seq), ([], []))
        names.append(str(user))
        amounts.append(int(units))
    last = c.execute("SELECT COALESCE(MAX(seq), 0) FROM commits").fetchone()[0]
    c.execute("DROP TABLE spent")
    c.execute("DROP TABLE charges")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            c.execute(statement)
    store.write_users(c, None, 0, users)
    for seq, (names, amounts) in per_commit.items():
        numbers, _new = intern(users, pa.array(names, pa.string()))
        order = np.argsort(numbers, kind="stable")
        store.write_charges(c, None, seq, numbers[order],
                            np.array(amounts, dtype=np.int64)[order])
    store.write_totals(c, None, totals, int(last))
