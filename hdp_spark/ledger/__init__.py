"""Persistent per-user privacy ledgers: SQLite (embedded default) and parquet (Spark scale).

The pure accounting rules (units, capping, charges) live in :mod:`hdp_spark.core.ledger`;
this package stores them with an atomic commit protocol. See ``docs/jobs.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from hdp_spark.errors import ParameterError
from hdp_spark.ledger.base import CommitRecord, FrameIO, Ledger, LedgerSession
from hdp_spark.ledger.parquet import ParquetLedger
from hdp_spark.ledger.sqlite import SqliteLedger

__all__ = [
    "CommitRecord",
    "FrameIO",
    "Ledger",
    "LedgerSession",
    "ParquetLedger",
    "SqliteLedger",
    "open_ledger",
]


def open_ledger(
    backend: Literal["sqlite", "parquet"],
    path: str | Path,
    *,
    lock_timeout: float = 600.0,
    compact_every: int = 20,
    create: bool = True,
) -> SqliteLedger | ParquetLedger:
    """Open (creating if needed) a ledger.

    Args:
        backend: ``"sqlite"`` (one file) or ``"parquet"`` (a directory).
        path: the file or directory.
        lock_timeout: seconds to wait for a concurrent run's lock.
        compact_every: at most this many commits' charges between two full snapshots of
            the per-user totals (both backends; SQLite also folds them once they hold as
            many charges as there are users).
        create: create the ledger if it does not exist; with False a missing ledger is
            :class:`~hdp_spark.errors.LedgerDamagedError` (the runner passes False when
            outputs cite a ledger, so a lost ledger is never silently replaced by a new one).

    Raises:
        LedgerDamagedError: the ledger is missing (``create=False``), empty, truncated or
            corrupt (see ``docs/jobs.md``, "Backup and restore").
        StorageError: the ledger cannot be created or written (read-only, disk full).

    Privacy:
        Both backends make "check remaining budget, then charge" atomic with respect to
        other runs, so no user is ever overspent. A new ledger gets a 32-byte MAC secret from
        OS entropy (a ledger of an older version gets one on its first open); ``.mac(...)``
        keys the input fingerprints with it, and it is never written anywhere else.
    """
    if backend == "sqlite":
        return SqliteLedger(
            path, lock_timeout=lock_timeout, create=create, compact_every=compact_every
        )
    if backend == "parquet":
        return ParquetLedger(
            path, lock_timeout=lock_timeout, compact_every=compact_every, create=create
        )
    msg = f"`backend` must be 'sqlite' or 'parquet', got {backend!r}."
    raise ParameterError(msg)
