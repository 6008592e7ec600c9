"""SQLite ledger: the embedded default of the pandas engine (no server, one file).

Why SQLite: it ships with Python, gives real ACID transactions on a single file, and its
write lock is exactly the "check then charge" critical section the ledger needs:

* ``journal_mode=WAL`` + ``synchronous=FULL``: a commit is durable once ``COMMIT`` returns,
  and readers (reports, ``find``) never block the writer;
* a session is one ``BEGIN IMMEDIATE`` transaction: it takes the database's write lock before
  reading the spend, so a second run waits (``busy_timeout``) until the first has committed
  and then sees its charges: no two runs can spend the same remaining budget;
* the commit record, the per-user spend and the per-release charge log are written in that
  same transaction: a crash (even ``kill -9``) before ``COMMIT`` leaves no trace (SQLite rolls
  the WAL back on the next open), a crash after it loses nothing.

Keep the file on a local disk: SQLite's locks are unreliable on network file systems (use the
parquet ledger there).

Tables: ``meta(name, value)`` (the format and the ledger's MAC secret),
``spent(user_id, units)``, ``commits(key, commit_id, job, release_id, fingerprint,
committed_at, outcome, users_charged, units_charged)``, ``charges(key, user_id, units)``
(the audit log: every charge of every committed release).

The MAC secret (:mod:`hdp_spark.ledger._secret`) is created from OS entropy in the same
transaction that creates the tables, and the file of a new ledger is created with mode
``0600`` (SQLite gives its ``-wal``/``-shm`` files the same mode). A ledger written by an
older version without a secret gets one on its first open, under the write lock.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hdp_spark.errors import LedgerBusyError, LedgerConflictError, LedgerError
from hdp_spark.ledger._secret import LedgerKey, new_secret_hex
from hdp_spark.ledger.base import CommitRecord, FrameIO

__all__ = ["SqliteLedger"]

log = logging.getLogger("hdp_spark.ledger")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spent (
    user_id TEXT PRIMARY KEY,
    units INTEGER NOT NULL CHECK (units >= 0)
);
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
    units_charged INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    key TEXT NOT NULL,
    user_id TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units > 0),
    PRIMARY KEY (key, user_id)
);
"""

_FORMAT = "hdp_spark.ledger.sqlite/1"
_COLUMNS = (
    "key, job, release_id, fingerprint, committed_at, outcome, users_charged, units_charged, "
    "commit_id"
)


def _record(row: tuple[Any, ...]) -> CommitRecord:
    return CommitRecord(
        str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]),
        int(row[6]), int(row[7]), str(row[8]),
    )


class SqliteLedger:
    """A ledger in one SQLite file (created on first use).

    Args:
        path: the database file.
        lock_timeout: seconds to wait for another run's write lock before
            :class:`~hdp_spark.errors.LedgerBusyError`.

    Privacy:
        The check of remaining budgets and the charge happen under one exclusive write
        transaction, so concurrent runs cannot overspend any user.
    """

    backend = "sqlite"

    def __init__(self, path: str | Path, lock_timeout: float = 600.0) -> None:
        self.path = Path(path)
        self.lock_timeout = float(lock_timeout)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # a new ledger file is private to its owner (it holds the MAC secret)
            os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            msg = f"cannot create the SQLite ledger `{self.path}`: {exc.strerror}."
            raise LedgerError(msg) from exc
        with self._connect() as conn:
            self._key = self._init(conn)

    def mac(self, message: bytes) -> str:
        """``HMAC-SHA256`` of ``message`` under this ledger's secret (64 hex digits).

        Privacy:
            Keys the input fingerprint: without the secret (which never leaves the ledger
            file) the result cannot be matched against guesses of the input.
        """
        return self._key.mac(message)

    def _connect(self) -> _Conn:
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.lock_timeout, isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            msg = f"cannot open the SQLite ledger `{self.path}`: {exc}."
            raise LedgerError(msg) from exc
        return _Conn(conn)

    def _init(self, conn: _Conn) -> LedgerKey:
        c = conn.raw
        self._enable_wal(c)
        c.execute("PRAGMA synchronous=FULL")
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _busy(self.path, self.lock_timeout) from exc
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    c.execute(statement)
            row = c.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta VALUES ('format', ?)", (_FORMAT,))
            elif row[0] != _FORMAT:
                msg = f"`{self.path}` is not an hdp_spark SQLite ledger of format {_FORMAT}."
                raise LedgerError(msg)
            row = c.execute("SELECT value FROM meta WHERE name = 'mac_secret'").fetchone()
            if row is None:  # a new ledger, or one written before ledgers had a secret
                secret = new_secret_hex()
                c.execute("INSERT INTO meta VALUES ('mac_secret', ?)", (secret,))
            else:
                secret = str(row[0])
            key = LedgerKey(secret, str(self.path))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return key

    def _enable_wal(self, c: sqlite3.Connection) -> None:
        """Switch the file to WAL, retrying while another process holds it.

        Changing the journal mode needs an exclusive lock, and SQLite returns ``SQLITE_BUSY``
        for it without calling the busy handler in some lock states (two processes creating
        the same ledger at once), so ``timeout=`` alone does not cover it.
        """
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                row = c.execute("PRAGMA journal_mode=WAL").fetchone()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise _busy(self.path, self.lock_timeout) from exc
                # jitter so two processes do not retry in lock-step (not privacy noise)
                time.sleep(delay * (0.5 + random.random()))  # design-ok
                delay = min(delay * 2, 0.25)
                continue
            if row is None or str(row[0]).lower() != "wal":
                msg = f"the SQLite ledger `{self.path}` cannot use WAL journaling (got {row})."
                raise LedgerError(msg)
            return

    @contextmanager
    def session(self, io: FrameIO) -> Iterator[_SqliteSession]:
        """Open a ``BEGIN IMMEDIATE`` transaction (the write lock) for one release.

        Raises:
            LedgerBusyError: the lock was not obtained within ``lock_timeout`` seconds.
        """
        with self._connect() as conn:
            c = conn.raw
            c.execute("PRAGMA synchronous=FULL")
            try:
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise _busy(self.path, self.lock_timeout) from exc
            session = _SqliteSession(c, io)
            try:
                yield session
            finally:
                if not session.done:
                    c.execute("ROLLBACK")

    def find(self, key: str) -> CommitRecord | None:
        """Read-only lookup of a committed release."""
        with self._connect() as conn:
            row = conn.raw.execute(
                f"SELECT {_COLUMNS} FROM commits WHERE key = ?", (key,)
            ).fetchone()
        return _record(row) if row else None

    def spent(self, io: FrameIO) -> Any:
        """Read-only snapshot of the units spent per user (a native frame of ``io``)."""
        with self._connect() as conn:
            return _read_spent(conn.raw, io)

    def records(self, job: str | None = None) -> Iterator[CommitRecord]:
        """Committed records, oldest first (optionally of one job)."""
        with self._connect() as conn:
            if job is None:
                rows = conn.raw.execute(f"SELECT {_COLUMNS} FROM commits ORDER BY seq").fetchall()
            else:
                rows = conn.raw.execute(
                    f"SELECT {_COLUMNS} FROM commits WHERE job = ? ORDER BY seq", (job,)
                ).fetchall()
        return iter([_record(r) for r in rows])

    def charges(self, key: str) -> dict[str, int]:
        """The audit log of one committed release (by idempotency key): units per user."""
        with self._connect() as conn:
            rows = conn.raw.execute(
                "SELECT user_id, units FROM charges WHERE key = ?", (key,)
            ).fetchall()
        return {str(u): int(n) for u, n in rows}


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _busy(path: Path, timeout: float) -> LedgerBusyError:
    msg = (
        f"the SQLite ledger `{path}` stayed locked by another run for more than "
        f"`lock_timeout` = {timeout:g} s."
    )
    return LedgerBusyError(msg)


def _read_spent(c: sqlite3.Connection, io: FrameIO) -> Any:
    rows = c.execute("SELECT user_id, units FROM spent WHERE units > 0").fetchall()
    return io.from_pairs([str(u) for u, _ in rows], [int(n) for _, n in rows])


class _Conn:
    """A connection closed on context exit (sqlite3's own context manager does not close)."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw

    def __enter__(self) -> _Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.close()


class _SqliteSession:
    """One release inside ``BEGIN IMMEDIATE`` (see :meth:`SqliteLedger.session`)."""

    def __init__(self, conn: sqlite3.Connection, io: FrameIO) -> None:
        self._c = conn
        self._io = io
        self.done = False

    def find(self, key: str) -> CommitRecord | None:
        row = self._c.execute(f"SELECT {_COLUMNS} FROM commits WHERE key = ?", (key,)).fetchone()
        return _record(row) if row else None

    def spent(self) -> Any:
        return _read_spent(self._c, self._io)

    def commit(
        self,
        record: CommitRecord,
        charges: Any,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        if self.done:
            msg = "a ledger session commits at most once."
            raise LedgerError(msg)
        users, units = self._io.to_pairs(charges)
        c = self._c
        try:
            c.execute(
                f"INSERT INTO commits ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.key, record.job, record.release_id, record.fingerprint,
                 record.committed_at, record.outcome, record.users_charged,
                 record.units_charged, record.commit_id),
            )
        except sqlite3.IntegrityError as exc:
            msg = f"release `{record.release_id}` was committed by another run first."
            raise LedgerConflictError(msg) from exc
        pairs = [(u, int(n)) for u, n in zip(users, units, strict=True) if int(n) > 0]
        c.executemany(
            "INSERT INTO spent (user_id, units) VALUES (?, ?) "
            "ON CONFLICT (user_id) DO UPDATE SET units = units + excluded.units",
            pairs,
        )
        c.executemany(
            "INSERT INTO charges (key, user_id, units) VALUES (?, ?, ?)",
            [(record.key, u, n) for u, n in pairs],
        )
        if before_commit is not None:
            before_commit()
        c.execute("COMMIT")
        self.done = True
        log.debug("ledger commit %s: %d user(s) charged", record.commit_id, len(pairs))
