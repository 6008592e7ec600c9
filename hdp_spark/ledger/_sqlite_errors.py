"""SQLite's errors as the ledger's errors: one line naming the true cause (SQLite's own
messages hold no data), and one read transaction helper."""

from __future__ import annotations

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

__all__ = ["busy", "is_busy", "reading", "translate", "translated"]


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


def translate(exc: sqlite3.Error, path: Path, doing: str, timeout: float) -> HdpError:
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
    if any(word in text for word in ("malformed", "not a database", "corrupt", "decode")):
        msg = f"the SQLite ledger `{path}` is corrupt ({doing}: {exc}); {restore}."
        return LedgerDamagedError(msg)
    if is_busy(exc):
        return busy(path, timeout)
    if "unable to open" in text or "disk i/o" in text or "permission" in text:
        msg = f"cannot use the SQLite ledger `{path}` ({doing}: {exc})."
        return StorageError(msg)
    return LedgerError(f"the SQLite ledger `{path}`: {exc} ({doing}).")


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
