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
``spent(user_id, units)`` (per-user totals), ``commits(seq, key, commit_id, job,
release_id, fingerprint, committed_at, outcome, users_charged, units_charged)``,
``charges(seq, user_id, units)`` (the audit log: every charge of every committed release;
``seq`` is the commit's interned id, ``WITHOUT ROWID``: format 2, see ``_FORMAT_V1``).

The MAC secret (:mod:`hdp_spark.ledger._secret`) is created from OS entropy in the same
transaction that creates the tables, and the file of a new ledger is created with mode
``0600`` (SQLite gives its ``-wal``/``-shm`` files the same mode). A ledger written by an
older version without a secret gets one on its first open, under the write lock.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from hdp_spark.errors import (
    HdpError,
    LedgerBusyError,
    LedgerConflictError,
    LedgerDamagedError,
    LedgerError,
    StorageError,
)
from hdp_spark.ledger._fs import DISK_FULL_ENV, fsync_dir, is_orphan, tmp_name
from hdp_spark.ledger._secret import LedgerKey, new_ledger_id, new_secret_hex
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
    seq INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    units INTEGER NOT NULL CHECK (units > 0),
    PRIMARY KEY (seq, user_id)
) WITHOUT ROWID;
"""

_FORMAT = "hdp_spark.ledger.sqlite/2"
_FORMAT_V1 = "hdp_spark.ledger.sqlite/1"
"""Format 1 stored the 64-character idempotency key in every charge row and again in its
index (about 175 bytes per charge); format 2 interns it as the commit's ``seq`` in a
``WITHOUT ROWID`` table (one b-tree, no second copy). A format-1 ledger is migrated in one
transaction, under the write lock, on its first open."""

_MIGRATE_V1 = """
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
    """A ledger in one SQLite file (created on first use, unless ``create=False``).

    Args:
        path: the database file.
        lock_timeout: seconds to wait for another run's write lock before
            :class:`~hdp_spark.errors.LedgerBusyError`.
        create: create the ledger if the file does not exist (otherwise a missing file is
            :class:`~hdp_spark.errors.LedgerDamagedError`).

    Raises:
        LedgerDamagedError: the file is missing (``create=False``), empty, truncated, fails
            SQLite's ``PRAGMA quick_check``, or is not a complete hdp_spark ledger.
        StorageError: the file cannot be created or written (disk full, read-only).

    Privacy:
        The check of remaining budgets and the charge happen under one exclusive write
        transaction, so concurrent runs cannot overspend any user. A damaged ledger is never
        taken as a new one (that would forget charges and recompute committed releases).
    """

    backend = "sqlite"

    def __init__(
        self, path: str | Path, lock_timeout: float = 600.0, *, create: bool = True
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = float(lock_timeout)
        if not self.path.exists():
            if not create:
                msg = (
                    f"the SQLite ledger `{self.path}` is missing, but outputs cite it; restore "
                    "it from a backup (docs/jobs.md, \"Backup and restore\")."
                )
                raise LedgerDamagedError(msg)
            self._create()
        elif self.path.is_file() and self.path.stat().st_size == 0:
            msg = (
                f"the SQLite ledger `{self.path}` is empty (0 bytes): a ledger is never empty "
                "once created, so it was truncated; restore it from a backup (docs/jobs.md, "
                "\"Backup and restore\")."
            )
            raise LedgerDamagedError(msg)
        writable = os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)
        if not writable:
            msg = (
                f"the SQLite ledger `{self.path}` is read-only (the file or its directory is "
                "not writable by this user, or on a read-only file system); SQLite needs both "
                "to commit and to read a WAL database. Nothing was computed or charged."
            )
            raise StorageError(msg)
        with self._connect() as conn, _translated(self.path, "opening it", self.lock_timeout):
            self._key, self.ledger_id = self._open(conn)

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
            raise _translate(exc, self.path, "opening it", self.lock_timeout) from exc
        if os.environ.get(DISK_FULL_ENV) == "ledger":  # test hook: SQLite's real "full" error
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {max(1, int(pages))}")
        return _Conn(conn, self.lock_timeout)

    def _create(self) -> None:
        """Create a complete ledger under a scratch name, then ``link`` it into place.

        So the ledger's path never holds a half-made ledger: a 0-byte or table-less file
        there is damage, not a new ledger. Two runs creating it at once: one ``link`` wins,
        the other discards its copy and opens the winner's.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for stale in self.path.parent.glob(f".{self.path.name}.*"):
            if is_orphan(stale.name.removesuffix("-wal").removesuffix("-shm")):
                with suppress(OSError):  # the scratch copy of a creation killed midway
                    stale.unlink()
        scratch = self.path.with_name(tmp_name(f".{self.path.name}."))
        try:
            # a new ledger file is private to its owner (it holds the MAC secret)
            os.close(os.open(scratch, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            raw = sqlite3.connect(scratch, isolation_level=None)
            try:
                if os.environ.get(DISK_FULL_ENV) == "ledger":
                    raw.execute("PRAGMA max_page_count = 1")
                raw.execute("PRAGMA synchronous=FULL")
                raw.execute("BEGIN IMMEDIATE")
                self._write_schema(raw, new=True)
                raw.execute("COMMIT")  # rollback journal: the data is in the main file now
                raw.execute("PRAGMA journal_mode=WAL")
                raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                raw.close()
            wal = scratch.with_name(scratch.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:  # the close could not checkpoint
                raise OSError(errno.ENOSPC, "the new ledger could not be written out whole")
            fd = os.open(scratch, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with suppress(FileExistsError):
                os.link(scratch, self.path)
            fsync_dir(self.path.parent)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path, "creating it", self.lock_timeout) from exc
        except OSError as exc:
            msg = f"cannot create the SQLite ledger `{self.path}`: {exc.strerror}."
            raise StorageError(msg) from exc
        finally:
            for leftover in (scratch, scratch.with_name(scratch.name + "-wal"),
                             scratch.with_name(scratch.name + "-shm")):
                with suppress(OSError):
                    leftover.unlink()

    def _write_schema(self, c: sqlite3.Connection, *, new: bool) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                c.execute(statement)
        if new:
            c.execute("INSERT INTO meta VALUES ('format', ?)", (_FORMAT,))
        for name, make in (("mac_secret", new_secret_hex), ("ledger_id", new_ledger_id)):
            # a new ledger, or one written by a version before it had a secret / an id
            c.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (name, make()))

    def _open(self, conn: _Conn) -> tuple[LedgerKey, str]:
        """Check the file (``quick_check``) and read its secret and id, without the write
        lock; only a ledger of an older version (no secret or id yet) takes the lock once."""
        c = conn.raw
        rows = [str(r[0]) for r in c.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            msg = (
                f"the SQLite ledger `{self.path}` fails SQLite's integrity check (PRAGMA "
                "quick_check: corrupt file); restore it from a backup (docs/jobs.md, "
                "\"Backup and restore\")."
            )
            raise LedgerDamagedError(msg)
        tables = {
            str(r[0]) for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        ours = {"meta", "spent", "commits", "charges"}
        if tables & ours and not ours <= tables:
            msg = (
                f"the SQLite ledger `{self.path}` lacks table(s) "
                f"{', '.join(sorted(ours - tables))} (damaged or not a ledger)."
            )
            raise LedgerDamagedError(msg)
        meta = dict(c.execute("SELECT name, value FROM meta").fetchall()) if tables & ours else {}
        if meta.get("format", _FORMAT) not in (_FORMAT, _FORMAT_V1):
            msg = f"`{self.path}` is not an hdp_spark SQLite ledger of format {_FORMAT}."
            raise LedgerDamagedError(msg)
        if meta.get("format") != _FORMAT or "mac_secret" not in meta or "ledger_id" not in meta:
            self._upgrade(c, new="format" not in meta)
            meta = dict(c.execute("SELECT name, value FROM meta").fetchall())
        return LedgerKey(str(meta["mac_secret"]), str(self.path)), str(meta["ledger_id"])

    def _upgrade(self, c: sqlite3.Connection, *, new: bool) -> None:
        """Give a ledger of an older version its secret and id (or make a foreign, table-less
        database a ledger), under the write lock."""
        self._enable_wal(c)
        c.execute("PRAGMA synchronous=FULL")
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _translate(exc, self.path, "opening it", self.lock_timeout) from exc
        try:
            has_format = c.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone()
            self._write_schema(c, new=new and not has_format)
            columns = {str(r[1]) for r in c.execute("PRAGMA table_info(charges)")}
            if "key" in columns:  # format 1: intern the release key (see _FORMAT_V1)
                for statement in _MIGRATE_V1.split(";"):
                    c.execute(statement)
                log.info("ledger %s: migrated to format %s", self.path, _FORMAT)
            c.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (_FORMAT,))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                with suppress(sqlite3.Error):
                    c.execute("ROLLBACK")
            raise

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
                    raise _translate(exc, self.path, "opening it", self.lock_timeout) from exc
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
            StorageError: the ledger cannot be written (read-only, disk full).
        """
        with self._connect() as conn:
            c = conn.raw
            try:
                c.execute("PRAGMA synchronous=FULL")
                c.execute("PRAGMA cache_size = -65536")  # 64 MiB of pages: large commits
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.path, "locking it", self.lock_timeout) from exc
            session = _SqliteSession(c, io, self.path)
            try:
                yield session
            finally:
                # a failed statement may have rolled the transaction back already: a second
                # ROLLBACK would replace its true error by "no transaction is active"
                if not session.done and c.in_transaction:
                    with suppress(sqlite3.Error):
                        c.execute("ROLLBACK")

    def find(self, key: str) -> CommitRecord | None:
        """Read-only lookup of a committed release (no lock: WAL readers never wait)."""
        with self._connect() as conn, _translated(self.path, "reading it"):
            row = conn.raw.execute(
                f"SELECT {_COLUMNS} FROM commits WHERE key = ?", (key,)
            ).fetchone()
        return _record(row) if row else None

    def spent(self, io: FrameIO) -> Any:
        """Read-only snapshot of the units spent per user (a native frame of ``io``)."""
        with self._connect() as conn, _translated(self.path, "reading it"):
            return _read_spent(conn.raw, io)

    def records(self, job: str | None = None) -> Iterator[CommitRecord]:
        """Committed records, oldest first (optionally of one job)."""
        with self._connect() as conn, _translated(self.path, "reading it"):
            if job is None:
                rows = conn.raw.execute(f"SELECT {_COLUMNS} FROM commits ORDER BY seq").fetchall()
            else:
                rows = conn.raw.execute(
                    f"SELECT {_COLUMNS} FROM commits WHERE job = ? ORDER BY seq", (job,)
                ).fetchall()
        return iter([_record(r) for r in rows])

    def commit_ids(self) -> set[str]:
        """The public ids of every committed release (to check outputs against the ledger)."""
        with self._connect() as conn, _translated(self.path, "reading it"):
            rows = conn.raw.execute("SELECT commit_id FROM commits").fetchall()
        return {str(r[0]) for r in rows}

    def charges(self, key: str) -> dict[str, int]:
        """The audit log of one committed release (by idempotency key): units per user."""
        with self._connect() as conn, _translated(self.path, "reading it"):
            rows = conn.raw.execute(
                "SELECT g.user_id, g.units FROM charges g JOIN commits c ON c.seq = g.seq "
                "WHERE c.key = ?", (key,)
            ).fetchall()
        return {str(u): int(n) for u, n in rows}


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _busy(path: Path, timeout: float) -> LedgerBusyError:
    msg = (
        f"the SQLite ledger `{path}` stayed locked by another run for more than "
        f"`lock_timeout` = {timeout:g} s."
    )
    return LedgerBusyError(msg)


def _translate(exc: sqlite3.Error, path: Path, doing: str, timeout: float) -> HdpError:
    """SQLite's error as its true cause in one line (SQLite's messages hold no data)."""
    text = str(exc).lower()
    restore = "restore it from a backup (docs/jobs.md, \"Backup and restore\")"
    if "full" in text:
        msg = (
            f"the SQLite ledger `{path}`: the disk is full ({doing}: {exc}); nothing was "
            "committed. Free space and run again."
        )
        return StorageError(msg)
    if "readonly" in text or "read-only" in text or "read only" in text:
        msg = (
            f"the SQLite ledger `{path}` is read-only ({doing}: {exc}); nothing was "
            "committed. Make the file and its directory writable by this user."
        )
        return StorageError(msg)
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        msg = f"the SQLite ledger `{path}` is corrupt ({doing}: {exc}); {restore}."
        return LedgerDamagedError(msg)
    if _is_busy(exc):
        return _busy(path, timeout)
    if "unable to open" in text or "disk i/o" in text or "permission" in text:
        msg = f"cannot use the SQLite ledger `{path}` ({doing}: {exc})."
        return StorageError(msg)
    return LedgerError(f"the SQLite ledger `{path}`: {exc} ({doing}).")


@contextmanager
def _translated(path: Path, doing: str, timeout: float = 0.0) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise _translate(exc, path, doing, timeout) from exc


def _read_spent(c: sqlite3.Connection, io: FrameIO) -> Any:
    rows = c.execute("SELECT user_id, units FROM spent WHERE units > 0").fetchall()
    return io.from_pairs([str(u) for u, _ in rows], [int(n) for _, n in rows])


class _Conn:
    """A connection closed on context exit (sqlite3's own context manager does not close)."""

    def __init__(self, raw: sqlite3.Connection, timeout: float) -> None:
        self.raw = raw
        self.timeout = timeout

    def __enter__(self) -> _Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.close()


class _SqliteSession:
    """One release inside ``BEGIN IMMEDIATE`` (see :meth:`SqliteLedger.session`)."""

    def __init__(self, conn: sqlite3.Connection, io: FrameIO, path: Path) -> None:
        self._c = conn
        self._io = io
        self._path = path
        self.done = False

    def find(self, key: str) -> CommitRecord | None:
        with _translated(self._path, "reading it"):
            row = self._c.execute(
                f"SELECT {_COLUMNS} FROM commits WHERE key = ?", (key,)
            ).fetchone()
        return _record(row) if row else None

    def spent(self) -> Any:
        with _translated(self._path, "reading it"):
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
            cursor = c.execute(
                f"INSERT INTO commits ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.key, record.job, record.release_id, record.fingerprint,
                 record.committed_at, record.outcome, record.users_charged,
                 record.units_charged, record.commit_id),
            )
        except sqlite3.IntegrityError as exc:
            msg = f"release `{record.release_id}` was committed by another run first."
            raise LedgerConflictError(msg) from exc
        except sqlite3.Error as exc:
            raise _translate(exc, self._path, "committing", 0.0) from exc
        seq = cursor.lastrowid  # the commit's interned id: charges refer to it
        # in key order: both b-trees are then written page after page, not at random
        pairs = sorted((u, int(n)) for u, n in zip(users, units, strict=True) if int(n) > 0)
        with _translated(self._path, "committing"):
            c.executemany(
                "INSERT INTO spent (user_id, units) VALUES (?, ?) "
                "ON CONFLICT (user_id) DO UPDATE SET units = units + excluded.units",
                pairs,
            )
            c.executemany(
                "INSERT INTO charges (seq, user_id, units) VALUES (?, ?, ?)",
                [(seq, u, n) for u, n in pairs],
            )
        if before_commit is not None:
            before_commit()
        with _translated(self._path, "committing"):
            c.execute("COMMIT")
        self.done = True
        log.debug("ledger commit %s: %d user(s) charged", record.commit_id, len(pairs))
