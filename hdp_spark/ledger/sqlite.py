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

Format 3 (compact at scale; see :mod:`hdp_spark.ledger._columnar`): ``meta(name, value)``
(the format, the ledger's MAC secret and id, ``totals_seq``), ``commits(seq, key, commit_id,
job, release_id, fingerprint, committed_at, outcome, users_charged, units_charged)`` (one row
per committed release; ``seq`` interns its 64-character key), and three tables of blobs:

* ``users(first, n, data)``: the user dictionary; a user is stored once, as a *number*;
* ``charges(seq, part, n, data)``: the audit log, every charge of every committed release as
  ``(user number, units)`` (a few bytes per charge);
* ``totals(part, n, data)``: each user's total spend as of commit ``meta.totals_seq`` (a
  snapshot). The spend is the snapshot plus the audit log of the commits after it; a commit
  folds them into a new snapshot once they hold as many charges as there are users (or
  ``compact_every`` commits), so that work stays proportional to the charges committed.

Ledgers of formats 1 and 2 (one SQL row per charge, text user ids) are upgraded in place on
their first open, in one transaction under the write lock (see :meth:`SqliteLedger._upgrade`).

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

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hdp_spark.errors import (
    HdpError,
    LedgerBusyError,
    LedgerConflictError,
    LedgerDamagedError,
    LedgerError,
    StorageError,
)
from hdp_spark.ledger._columnar import (
    PART_ROWS,
    charge_arrays,
    decode_charges,
    decode_totals,
    decode_users,
    encode_charges,
    encode_totals,
    encode_users,
    intern,
    ledger_table,
    parts,
)
from hdp_spark.ledger._fs import DISK_FULL_ENV, fsync_dir, is_orphan, tmp_name
from hdp_spark.ledger._secret import LedgerKey, new_ledger_id, new_secret_hex
from hdp_spark.ledger.base import CommitRecord, FrameIO

__all__ = ["SqliteLedger"]

log = logging.getLogger("hdp_spark.ledger")

_SCHEMA = """
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
    units_charged INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
    first INTEGER PRIMARY KEY,
    n INTEGER NOT NULL CHECK (n > 0),
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER NOT NULL,
    part INTEGER NOT NULL,
    n INTEGER NOT NULL CHECK (n > 0),
    data BLOB NOT NULL,
    PRIMARY KEY (seq, part)
);
CREATE TABLE IF NOT EXISTS totals (
    part INTEGER PRIMARY KEY,
    n INTEGER NOT NULL CHECK (n > 0),
    data BLOB NOT NULL
);
INSERT OR IGNORE INTO meta VALUES ('totals_seq', '0')
"""

_FORMAT = "hdp_spark.ledger.sqlite/3"
_FORMAT_V2 = "hdp_spark.ledger.sqlite/2"
_FORMAT_V1 = "hdp_spark.ledger.sqlite/1"
"""Format 1 stored the 64-character idempotency key in every charge row and again in its
index (about 175 bytes per charge); format 2 interned it as the commit's ``seq`` in a
``WITHOUT ROWID`` table of one row per charge (about 25-40 bytes per charge, and one SQL
upsert per user per commit: ~8 s per million charges). Format 3 interns users too and stores
the audit log and the totals as compressed columnar blobs (module docstring). Older ledgers
are upgraded on their first open (:meth:`SqliteLedger._upgrade`)."""

_TABLES_V3 = frozenset({"meta", "commits", "users", "charges", "totals"})
_TABLES_OLD = frozenset({"meta", "spent", "commits", "charges"})

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
        compact_every: fold the audit log into a new totals snapshot after at most this
            many commits (and whenever the commits since the snapshot hold as many charges
            as there are users).

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
        self, path: str | Path, lock_timeout: float = 600.0, *, create: bool = True,
        compact_every: int = 20,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = float(lock_timeout)
        self.compact_every = max(1, int(compact_every))
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

    def _format(self, c: sqlite3.Connection) -> tuple[str | None, dict[str, str]]:
        """The ledger's format (None: a database without ledger tables) and its meta."""
        tables = {
            str(r[0]) for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        meta = (
            {str(k): str(v) for k, v in c.execute("SELECT name, value FROM meta")}
            if "meta" in tables else {}
        )
        declared = meta.get("format")
        if declared is not None and declared not in (_FORMAT, _FORMAT_V2, _FORMAT_V1):
            msg = (
                f"`{self.path}` is an SQLite ledger of format {declared}, which this version "
                f"does not know (it reads {_FORMAT_V1} to {_FORMAT}); use the hdp_spark "
                "version that wrote it."
            )
            raise LedgerDamagedError(msg)
        if not tables & (_TABLES_V3 | _TABLES_OLD):
            return None, meta
        old = declared in (_FORMAT_V1, _FORMAT_V2) or (declared is None and "spent" in tables)
        need = _TABLES_OLD if old else _TABLES_V3
        if not need <= tables:
            msg = (
                f"the SQLite ledger `{self.path}` lacks table(s) "
                f"{', '.join(sorted(need - tables))} (damaged or not a ledger)."
            )
            raise LedgerDamagedError(msg)
        if not old:
            return _FORMAT, meta
        columns = {str(r[1]) for r in c.execute("PRAGMA table_info(charges)")}
        return (_FORMAT_V1 if "key" in columns else _FORMAT_V2), meta

    def _open(self, conn: _Conn) -> tuple[LedgerKey, str]:
        """Check the file (``quick_check``) and read its secret and id, without the write
        lock; only a ledger of an older version (no secret or id yet, or an older format)
        takes the lock once, to upgrade it."""
        c = conn.raw
        rows = [str(r[0]) for r in c.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            msg = (
                f"the SQLite ledger `{self.path}` fails SQLite's integrity check (PRAGMA "
                "quick_check: corrupt file); restore it from a backup (docs/jobs.md, "
                "\"Backup and restore\")."
            )
            raise LedgerDamagedError(msg)
        fmt, meta = self._format(c)
        if fmt != _FORMAT or meta.get("format") != _FORMAT or not {
            "mac_secret", "ledger_id", "totals_seq"
        } <= set(meta):
            self._upgrade(c)
            meta = dict(c.execute("SELECT name, value FROM meta").fetchall())
        return LedgerKey(str(meta["mac_secret"]), str(self.path)), str(meta["ledger_id"])

    def _upgrade(self, c: sqlite3.Connection) -> None:
        """Bring a ledger to the current format, under the write lock, in one transaction.

        Gives a ledger of an older version its secret and id, makes a foreign, table-less
        database a ledger, and migrates the tables of formats 1 and 2 (one SQL row per
        charge) to format 3: the users are numbered (in user-id order), the ``spent`` table
        becomes the totals snapshot and each commit's rows become its audit-log blobs.
        Everything is kept; a crash midway leaves the old format untouched (SQLite rolls the
        transaction back).
        """
        self._enable_wal(c)
        c.execute("PRAGMA synchronous=FULL")
        c.execute("PRAGMA cache_size = -65536")
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _translate(exc, self.path, "opening it", self.lock_timeout) from exc
        try:
            with _translated(self.path, "upgrading it", self.lock_timeout):
                fmt, meta = self._format(c)  # again, under the lock: another run may have
                if fmt == _FORMAT_V1:         # upgraded it meanwhile
                    for statement in _MIGRATE_V1.split(";"):
                        c.execute(statement)
                if fmt in (_FORMAT_V1, _FORMAT_V2):
                    _migrate_v2(c)
                self._write_schema(c, new=fmt is None and "format" not in meta)
                if fmt in (_FORMAT_V1, _FORMAT_V2):
                    log.info("ledger %s: upgraded from %s to %s", self.path, fmt, _FORMAT)
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
            session = _SqliteSession(c, io, self.path, self.compact_every)
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
        with self._connect() as conn, _translated(self.path, "reading it"), _reading(conn.raw):
            store = _Store.load(conn.raw)
        return io.from_arrow(store.spent_table())

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
        with self._connect() as conn, _translated(self.path, "reading it"), _reading(conn.raw):
            c = conn.raw
            row = c.execute("SELECT seq FROM commits WHERE key = ?", (key,)).fetchone()
            if row is None:
                return {}
            users = _load_users(c)
            numbers, units = _load_charges(c, "seq = ?", (int(row[0]),), len(users))
        names = users.take(pa.array(numbers, pa.int64())).to_pylist()
        return {str(u): int(n) for u, n in zip(names, units.tolist(), strict=True)}

    def audit(self) -> dict[str, int]:
        """Units per user summed over the whole audit log (every charge ever committed).

        Equal to the spend (:meth:`spent`) in a consistent ledger: a check for tests and
        operators, independent of the totals snapshot.
        """
        with self._connect() as conn, _translated(self.path, "reading it"), _reading(conn.raw):
            c = conn.raw
            users = _load_users(c)
            numbers, units = _load_charges(c, "1", (), len(users))
        totals = np.zeros(len(users), dtype=np.int64)
        np.add.at(totals, numbers, units)
        keep = np.flatnonzero(np.bincount(numbers, minlength=len(users)) > 0)
        names = users.take(pa.array(keep, pa.int64())).to_pylist()
        return {str(u): int(t) for u, t in zip(names, totals[keep].tolist(), strict=True)}


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


@contextmanager
def _reading(c: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every ``SELECT`` inside sees the same commit (WAL snapshot)."""
    c.execute("BEGIN")
    try:
        yield
    finally:
        if c.in_transaction:
            c.execute("COMMIT")


def _damaged(what: str) -> LedgerDamagedError:
    msg = (
        f"the SQLite ledger's {what} (corrupt ledger); restore it from a backup "
        "(docs/jobs.md, \"Backup and restore\")."
    )
    return LedgerDamagedError(msg)


def _load_users(c: sqlite3.Connection) -> pa.Array:
    """The user dictionary: user id strings in number order."""
    arrays, count = [], 0
    for first, n, data in c.execute("SELECT first, n, data FROM users ORDER BY first"):
        if int(first) != count:
            msg = "user dictionary has a gap"
            raise _damaged(msg)
        arrays.append(decode_users(bytes(data), int(n)))
        count += int(n)
    return pa.concat_arrays(arrays) if arrays else pa.array([], pa.string())


def _load_charges(
    c: sqlite3.Connection, where: str, args: tuple[Any, ...], users: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The audit-log rows of the commits selected by ``where``, concatenated."""
    numbers, units = [], []
    for n, data in c.execute(
        f"SELECT n, data FROM charges WHERE {where} ORDER BY seq, part", args
    ):
        nums, amounts = decode_charges(bytes(data), int(n))
        numbers.append(nums)
        units.append(amounts)
    if not numbers:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    all_numbers, all_units = np.concatenate(numbers), np.concatenate(units)
    if all_numbers.size and (int(all_numbers.min()) < 0 or int(all_numbers.max()) >= users):
        msg = "audit log names a user outside its dictionary"
        raise _damaged(msg)
    if all_units.size and int(all_units.min()) <= 0:
        msg = "audit log holds a charge that is not positive"
        raise _damaged(msg)
    return all_numbers, all_units


class _Store:
    """The spend of a format-3 ledger as arrays: user dictionary, totals, and the state of
    the snapshot (which commit it includes, how much audit log came after it)."""

    def __init__(
        self, users: pa.Array, totals: npt.NDArray[np.int64], totals_seq: int,
        deltas: int, delta_rows: int,
    ) -> None:
        self.users = users
        self.totals = totals
        self.totals_seq = totals_seq
        self.deltas = deltas
        self.delta_rows = delta_rows

    @classmethod
    def load(cls, c: sqlite3.Connection) -> _Store:
        """Read the dictionary, the snapshot and the audit log after it (one transaction)."""
        users = _load_users(c)
        row = c.execute("SELECT value FROM meta WHERE name = 'totals_seq'").fetchone()
        totals_seq = int(row[0]) if row else 0
        totals = np.zeros(len(users), dtype=np.int64)
        at = 0
        for part, n, data in c.execute("SELECT part, n, data FROM totals ORDER BY part"):
            if int(part) * PART_ROWS != at or at + int(n) > len(users):
                msg = "totals snapshot does not match its user dictionary"
                raise _damaged(msg)
            totals[at:at + int(n)] = decode_totals(bytes(data), int(n))
            at += int(n)
        deltas, rows = 0, 0
        for (seq,) in c.execute(
            "SELECT DISTINCT seq FROM charges WHERE seq > ? ORDER BY seq", (totals_seq,)
        ).fetchall():
            numbers, units = _load_charges(c, "seq = ?", (int(seq),), len(users))
            totals[numbers] += units  # a user appears once per commit
            deltas, rows = deltas + 1, rows + int(numbers.size)
        if totals.size and int(totals.min()) < 0:
            msg = "totals overflow"
            raise _damaged(msg)
        return cls(users, totals, totals_seq, deltas, rows)

    def spent_table(self) -> pa.Table:
        """Users with a positive spend, as a ledger frame (Arrow)."""
        keep = self.totals > 0
        if keep.all():
            return ledger_table(self.users, self.totals)
        return ledger_table(self.users.filter(pa.array(keep)), self.totals[keep])


def _write_totals(c: sqlite3.Connection, totals: npt.NDArray[np.int64], seq: int) -> None:
    """Replace the totals snapshot by ``totals`` (the spend after commit ``seq``)."""
    c.execute("DELETE FROM totals")
    c.executemany(
        "INSERT INTO totals (part, n, data) VALUES (?, ?, ?)",
        [(part, stop - start, encode_totals(totals[start:stop]))
         for part, start, stop in parts(len(totals))],
    )
    c.execute("INSERT OR REPLACE INTO meta VALUES ('totals_seq', ?)", (str(seq),))


def _write_users(c: sqlite3.Connection, first: int, new: pa.Array) -> None:
    c.executemany(
        "INSERT INTO users (first, n, data) VALUES (?, ?, ?)",
        [(first + start, stop - start, encode_users(new.slice(start, stop - start)))
         for _part, start, stop in parts(len(new))],
    )


def _write_charges(
    c: sqlite3.Connection, seq: int, numbers: npt.NDArray[np.int64],
    units: npt.NDArray[np.int64],
) -> None:
    """The audit log of commit ``seq`` (``numbers`` increasing)."""
    c.executemany(
        "INSERT INTO charges (seq, part, n, data) VALUES (?, ?, ?, ?)",
        [(seq, part, stop - start, encode_charges(numbers[start:stop], units[start:stop]))
         for part, start, stop in parts(len(numbers))],
    )


def _migrate_v2(c: sqlite3.Connection) -> None:
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
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            c.execute(statement)
    _write_users(c, 0, users)
    for seq, (names, amounts) in per_commit.items():
        numbers, _new = intern(users, pa.array(names, pa.string()))
        order = np.argsort(numbers, kind="stable")
        _write_charges(c, seq, numbers[order], np.array(amounts, dtype=np.int64)[order])
    _write_totals(c, totals, int(last))


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

    def __init__(
        self, conn: sqlite3.Connection, io: FrameIO, path: Path, compact_every: int
    ) -> None:
        self._c = conn
        self._io = io
        self._path = path
        self._compact_every = compact_every
        self._store: _Store | None = None
        self.done = False

    def find(self, key: str) -> CommitRecord | None:
        with _translated(self._path, "reading it"):
            row = self._c.execute(
                f"SELECT {_COLUMNS} FROM commits WHERE key = ?", (key,)
            ).fetchone()
        return _record(row) if row else None

    def _loaded(self) -> _Store:
        if self._store is None:  # under the write lock: nobody changes it meanwhile
            with _translated(self._path, "reading it"):
                self._store = _Store.load(self._c)
        return self._store

    def spent(self) -> Any:
        return self._io.from_arrow(self._loaded().spent_table())

    def commit(
        self,
        record: CommitRecord,
        charges: Any,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        """Record ``record`` and its charges in this transaction, then ``COMMIT``.

        Vectorized: the charges are interned against the user dictionary (Arrow hash
        lookup), sorted by user number and written as a few blobs; the totals are updated
        as one numpy array. Only ``COMMIT`` makes any of it visible.
        """
        if self.done:
            msg = "a ledger session commits at most once."
            raise LedgerError(msg)
        users, units = charge_arrays(self._io.to_arrow(charges))
        store = self._loaded()
        numbers, new = intern(store.users, users)
        order = np.argsort(numbers, kind="stable")
        numbers, units = numbers[order], units[order]
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
        seq = int(cursor.lastrowid or 0)  # the commit's interned id: its charges refer to it
        with _translated(self._path, "committing"):
            if len(new):
                _write_users(c, len(store.users), new)
            if numbers.size:
                _write_charges(c, seq, numbers, units)
                deltas, rows = store.deltas + 1, store.delta_rows + int(numbers.size)
                size = len(store.users) + len(new)
                if rows >= size or deltas >= self._compact_every:
                    totals = np.zeros(size, dtype=np.int64)
                    totals[: len(store.totals)] = store.totals
                    totals[numbers] += units
                    if int(totals[numbers].min()) < 0:
                        msg = "a ledger total overflowed 64 bits; nothing was committed."
                        raise LedgerError(msg)
                    _write_totals(c, totals, seq)
        if before_commit is not None:
            before_commit()
        with _translated(self._path, "committing"):
            c.execute("COMMIT")
        self.done = True
        log.debug("ledger commit %s: %d user(s) charged", record.commit_id, int(numbers.size))
