"""SQLite's errors as the ledger's errors: one line naming the true cause (SQLite's own
messages hold no data), and one read transaction helper."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hdp_spark.errors import (
    HdpError,
    LedgerBusyError,
    LedgerDamagedError,
    LedgerError,
    StorageError,
)

__all__ = ["busy", "is_busy", "no_room", "pragma_ok", "reading", "translate", "translated"]


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite's error means another connection holds a lock."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def busy(path: Path, timeout: float) -> LedgerBusyError:
    """The error of a lock held longer than ``timeout``."""
    msg = (
        f"the SQLite ledger `{path}` stayed locked by another run for more than "
        f"`lock_timeout` = {timeout:g} s."
    )
    return LedgerBusyError(msg)


_DAMAGE = ("malformed", "not a database", "corrupt", "decode", "no such table",
           "no such column", "datatype mismatch")


def _cause(exc: sqlite3.Error) -> str:
    """SQLite's message without any stored value it may quote (a text that does not decode
    is quoted by Python's sqlite3: never shown)."""
    text = str(exc).split(" with text", 1)[0].split(":", 1)[0]
    return "".join(ch for ch in text[:80] if ch.isprintable())


def translate(exc: sqlite3.Error, path: Path, doing: str, timeout: float) -> HdpError:
    """SQLite's error as its true cause in one line (never a stored value)."""
    text = str(exc).lower()
    cause = _cause(exc)
    restore = "restore it from a backup (docs/jobs.md, \"Backup and restore\")"
    if "full" in text:
        msg = (
            f"the SQLite ledger `{path}`: the disk is full ({doing}: {cause}); nothing was "
            "committed. Free space and run again."
        )
        return StorageError(msg)
    if "readonly" in text or "read-only" in text or "read only" in text:
        msg = (
            f"the SQLite ledger `{path}` is read-only ({doing}: {cause}); nothing was "
            "committed. Make the file and its directory writable by this user."
        )
        return StorageError(msg)
    damage = any(word in text for word in _DAMAGE) or (
        isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)
        and not isinstance(exc, sqlite3.IntegrityError)
    )
    if damage:
        msg = (
            f"the ledger `{path}` is damaged: SQLite reports \"{cause}\" ({doing}). Nothing "
            f"was computed or charged; {restore}."
        )
        return LedgerDamagedError(msg)
    if is_busy(exc):
        return busy(path, timeout)
    if ("disk i/o" in text or "unable to open" in text) and no_room(path):
        # SQLite says "disk I/O error" when it cannot grow its -shm / -wal files, even to
        # read: on a full disk that is all it says
        msg = (
            f"the SQLite ledger `{path}` (`[ledger] path`): the disk holding it is full "
            f"({doing}; SQLite reports \"{cause}\": it needs free space beside the file for "
            "its `-wal` and `-shm` files, even to read); nothing was committed. Free space on "
            "that file system and run again."
        )
        return StorageError(msg)
    if "disk i/o" in text:
        msg = (
            f"the SQLite ledger `{path}` (`[ledger] path`): SQLite reports a disk I/O error "
            f"({doing}) although the disk has room; nothing was committed. Check the file "
            "system holding it (kernel log; keep the ledger on a local disk) and that this "
            "user can write the ledger's `-wal` and `-shm` files beside it, then run again."
        )
        return StorageError(msg)
    if "unable to open" in text or "permission" in text:
        msg = f"cannot use the SQLite ledger `{path}` ({doing}: {cause})."
        return StorageError(msg)
    return LedgerError(f"the SQLite ledger `{path}`: {cause} ({doing}).")


_ROOM = 1 << 20
"""Free bytes below which a file system counts as full for SQLite (its ``-shm`` file alone
takes 32 KiB, a WAL grows by pages)."""


def no_room(path: Path) -> bool:
    """Whether the file system holding ``path`` has (almost) no space left for this user.

    Privacy:
        Reads the file system's free space only (shown nowhere but as "full" or not).
    """
    try:
        stat = os.statvfs(path.parent)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < _ROOM


@contextmanager
def translated(path: Path, doing: str, timeout: float = 0.0) -> Iterator[None]:
    """Translate SQLite's errors raised inside (see :func:`translate`)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, path, doing, timeout) from exc


@contextmanager
def reading(c: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every ``SELECT`` inside sees the same commit (WAL snapshot)."""
    c.execute("BEGIN")
    try:
        yield
    finally:
        if c.in_transaction:
            c.execute("COMMIT")


def pragma_ok(c: sqlite3.Connection, pragma: str) -> bool:
    """Whether SQLite's ``PRAGMA quick_check`` / ``integrity_check`` says ok (its report,
    which may quote damaged bytes, is never shown; a report that is not even text is not
    "ok")."""
    try:
        return [r[0] for r in c.execute(f"PRAGMA {pragma}").fetchall()] == ["ok"]
    except UnicodeDecodeError:
        return False
