"""Types shared by the ledger backends: commit records, the engine frame bridge, sessions.

A ledger holds, per user, the ε units spent by committed releases, and one commit record
per committed release (its idempotency key and its published outcome). A *session* holds the
ledger's write lock: reading the spend, checking budgets, computing the release and
committing the charges happen inside one session, so two runs can never both spend the
same remaining budget.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from hdp_spark.errors import LedgerDamagedError, LedgerError
from hdp_spark.ledger.integrity import VerifyReport

__all__ = [
    "UNITS_COLUMN",
    "USER_COLUMN",
    "CommitRecord",
    "FrameIO",
    "Ledger",
    "LedgerSession",
    "new_commit_id",
]

USER_COLUMN = "user_id"
"""User id column of every ledger frame (strings)."""

UNITS_COLUMN = "units"
"""ε units column of every ledger frame (int64, > 0)."""


def _is_hex(text: str, digits: int) -> bool:
    return len(text) == digits and all(c in "0123456789abcdef" for c in text)


def new_commit_id() -> str:
    """A fresh random commit id (16 hex digits from the OS CSPRNG; nothing derived from data)."""
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One committed release.

    Attributes:
        key: idempotency key (SHA-256 hex of job, release id, keyed input fingerprint,
            definition). Stored in the ledger only, never published.
        job: job name.
        release_id: release id within the job.
        fingerprint: the keyed input fingerprint (``HMAC-SHA256`` under the ledger's secret;
            records written before ledgers had a secret hold the old unkeyed digest). Stored
            in the ledger only, never published.
        committed_at: ISO-8601 UTC time of the commit.
        outcome: canonical JSON of what was released (rows, specs, budget summary). It never
            contains the release key, so the noise cannot be removed from it.
        users_charged: number of users with a positive charge.
        units_charged: total ε units charged.
        commit_id: public id of the commit (names its published directory): 16 random hex
            digits drawn when the record is created. Records of older ledgers, which had no
            stored id, read back with their historical id ``key[:16]``.

    Privacy:
        Of these fields only ``job``, ``release_id``, ``commit_id``, ``committed_at`` and the
        outcome (DP values and public facts) are ever published; ``key`` and ``fingerprint``
        depend on the input and stay in the ledger (and are keyed by its secret).
    """

    key: str
    job: str
    release_id: str
    fingerprint: str
    committed_at: str
    outcome: str
    users_charged: int
    units_charged: int
    commit_id: str = field(default_factory=new_commit_id)

    def __post_init__(self) -> None:
        if not _is_hex(self.key, 64):
            msg = "a commit record's `key` must be 64 lowercase hex digits."
            raise LedgerError(msg)
        if not _is_hex(self.commit_id, 16):
            msg = "a commit record's `commit_id` must be 16 lowercase hex digits."
            raise LedgerError(msg)

    def outcome_data(self) -> dict[str, Any]:
        """The decoded outcome."""
        data: dict[str, Any] = json.loads(self.outcome)
        return data

    @property
    def delta(self) -> float:
        """The release's δ: the same for every person it read, so recorded once per
        release in its outcome (``budget.delta``; partition selection); 0.0 for a pure-ε
        release and for records written before δ existed (no ledger format change)."""
        budget = self.outcome_data().get("budget") or {}
        return float(budget.get("delta", 0.0))

    def to_json(self) -> str:
        """The record as JSON (the parquet backend's commit file)."""
        return json.dumps(
            {
                "key": self.key,
                "commit_id": self.commit_id,
                "job": self.job,
                "release_id": self.release_id,
                "fingerprint": self.fingerprint,
                "committed_at": self.committed_at,
                "outcome": self.outcome,
                "users_charged": self.users_charged,
                "units_charged": self.units_charged,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> CommitRecord:
        """Inverse of :meth:`to_json` (records without ``commit_id`` get ``key[:16]``)."""
        try:
            d = json.loads(text)
            return cls(
                d["key"], d["job"], d["release_id"], d["fingerprint"], d["committed_at"],
                d["outcome"], int(d["users_charged"]), int(d["units_charged"]),
                str(d.get("commit_id") or str(d["key"])[:16]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            msg = "a ledger commit record is unreadable (corrupt ledger)."
            raise LedgerDamagedError(msg) from exc


class FrameIO(Protocol):
    """Bridge between a ledger backend and an engine's native frames.

    Frames exchanged have the columns :data:`USER_COLUMN` (string) and :data:`UNITS_COLUMN`
    (int64), at most one row per user.
    """

    name: str

    def from_pairs(self, users: list[str], units: list[int]) -> Any:
        """A native frame from Python lists."""

    def to_pairs(self, frame: Any) -> tuple[list[str], list[int]]:
        """Python lists from a native frame (collects it on Spark)."""

    def to_arrow(self, frame: Any) -> Any:
        """The frame as a ``pyarrow.Table`` (``user_id`` string, ``units`` int64; collected
        to the driver on Spark). The SQLite ledger's vectorized commit path."""

    def from_arrow(self, table: Any) -> Any:
        """A native frame from a ``pyarrow.Table`` of :meth:`to_arrow`'s columns."""

    def read_parquet(self, paths: list[str]) -> Any:
        """The sum of units per user over the parquet directories ``paths``."""

    def write_parquet(self, frame: Any, path: str) -> None:
        """Write ``frame`` as a new parquet directory at ``path`` (must not exist)."""

    def compact(self, paths: list[str], path: str) -> int:
        """Write the per-user sum over the parquet directories ``paths`` as a new parquet
        directory at ``path`` (a snapshot; must not exist); returns its row count."""

    def add(self, left: Any, right: Any) -> Any:
        """Per-user sum of two frames."""


class LedgerSession(Protocol):
    """The ledger under its write lock (see :meth:`Ledger.session`)."""

    def find(self, key: str) -> CommitRecord | None:
        """The commit record with idempotency key ``key``, if committed."""

    def spent(self) -> Any:
        """Units spent per user (native frame; users with no spend may be absent)."""

    def commit(
        self,
        record: CommitRecord,
        charges: Any,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        """Atomically record ``record`` and add ``charges`` to the spend.

        Either both happen or neither. ``before_commit`` runs after everything is written
        and before the atomic commit point (a fault-injection hook).

        Raises:
            LedgerConflictError: another run committed first (optimistic backends).
        """


class Ledger(Protocol):
    """A persistent per-user privacy ledger."""

    backend: str
    ledger_id: str
    """Public random id of the ledger (16 hex digits, drawn when it was created)."""

    def mac(self, message: bytes) -> str:
        """HMAC-SHA256 of ``message`` under the ledger's secret (keys input fingerprints)."""

    def session(self, io: FrameIO) -> AbstractContextManager[LedgerSession]:
        """Acquire the write lock; released (and uncommitted work rolled back) on exit.

        Raises:
            LedgerBusyError: the lock was not obtained within the lock timeout.
        """

    def find(self, key: str) -> CommitRecord | None:
        """Read-only lookup of a committed release (no lock)."""

    def spent(self, io: FrameIO) -> Any:
        """Read-only snapshot of the units spent per user (no lock)."""

    def records(self, job: str | None = None) -> Iterator[CommitRecord]:
        """Committed records, oldest first (optionally of one job)."""

    def commit_ids(self) -> set[str]:
        """The public ids of every committed release."""

    def history(self) -> list[tuple[str, str]]:
        """``(idempotency key, commit id)`` of every commit, oldest first (checked)."""

    def verify(self) -> VerifyReport:
        """Check every checksum of the ledger (``docs/jobs.md``, "Checksums").

        Raises:
            LedgerDamagedError: anything is damaged.
        """
