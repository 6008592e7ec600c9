"""A rollback witness: a small MAC'd file outside the ledger that remembers how far it went.

Checksums cannot tell a whole older copy of a sound ledger from the current one, and a
ledger restored *together with* its outputs (a backup restore, a volume snapshot, a careless
``cp -r``) cites nothing newer than itself: every later run would charge people against the
older spend. The witness is kept where the ledger's own backup does not restore it (another
disk, another account) and holds, for one ledger:

* ``commits``: how many releases the ledger had committed when it was last written;
* ``head``: a MAC chain over those commits, ``h_k = MAC(h_{k-1}, k, key_k, commit id_k)``
  under the ledger's secret (the same for both backends: it is computed from the commit
  history, :meth:`~hdp_spark.ledger.base.Ledger.history`);
* the ledger's id, and a MAC over all of it (the ledger's secret, its own domain), so the
  witness can neither be forged nor moved to another ledger unnoticed.

**Order of a commit** (the safe one): the ledger commits first, *then* the witness is
advanced, *then* the outputs are published. The witness therefore only ever records a
history the ledger had committed: a ledger is never behind its witness unless it was sent
back in time (or lost commits), and that is refused. A crash (``kill -9``) between the
ledger commit and the witness write leaves the witness one commit *behind* the ledger, which
is accepted (its chain must be a prefix of the ledger's) and caught up by the next run. The
opposite order would leave a witness ahead of its ledger after such a crash, which cannot be
told from a ledger rolled back by one commit. What this order cannot detect: a rollback
that drops only the last commit of a run that crashed before writing the witness. That
commit's outputs were never published (they come after the witness write), so no second
noisy copy of anything published can follow; its charge is forgotten together with its
never-published outcome.

What it cannot detect at all: the witness restored together with the ledger and the
outputs (keep it apart: another disk, another account), or a witness deleted (a run that
finds none creates it, with a WARNING when the ledger already has commits).
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hdp_spark.errors import LedgerDamagedError, StorageError
from hdp_spark.ledger._fs import atomic_write, is_orphan

__all__ = ["FORMAT", "Witness", "WitnessStatus"]

log = logging.getLogger("hdp_spark.ledger")

FORMAT = "hdp_spark.ledger.witness/1"
_DOMAIN = b"hdp_spark/ledger-witness/v1\x00"
_FIELDS = {"format", "ledger_id", "commits", "head", "written_at", "mac"}
_RESTORE = ('restore the newest ledger (and its outputs) from a backup (docs/jobs.md, '
            '"Rollback witness")')


def _mac(ledger: Any, *parts: str) -> str:
    return str(ledger.mac(_DOMAIN + b"\x00".join(p.encode() for p in parts)))


def chain(ledger: Any, history: list[tuple[str, str]]) -> list[str]:
    """The heads ``h_0 .. h_n`` of the MAC chain over ``history`` (``(key, commit id)`` in
    commit order) under ``ledger``'s secret; ``h_0`` binds the ledger id.

    Privacy:
        Keyed by the ledger's secret: the heads reveal nothing about the idempotency keys
        (themselves keyed digests of the input) to anyone without it.
    """
    heads = [_mac(ledger, "start", str(ledger.ledger_id))]
    for k, (key, commit_id) in enumerate(history, start=1):
        heads.append(_mac(ledger, "commit", heads[-1], str(k), key, commit_id))
    return heads


@dataclass(frozen=True, slots=True)
class WitnessStatus:
    """What a check found (counts only).

    Attributes:
        path: the witness file.
        witnessed: commits the witness saw (None: no witness file yet).
        commits: commits the ledger holds (at least ``witnessed``).
    """

    path: Path
    witnessed: int | None
    commits: int

    @property
    def lag(self) -> int:
        """Commits the ledger holds that the witness has not seen yet (a crash between a
        commit and its witness write, or a witness written by an older run)."""
        return self.commits - (self.witnessed or 0)


@dataclass(frozen=True, slots=True)
class Witness:
    """The rollback witness of one ledger, in the file ``path`` (outside the ledger).

    Args:
        path: the witness file (``[ledger] witness`` of a job). Its directory is created
            when the witness is first written.

    Privacy:
        Holds counts, the ledger's public id and MACs under the ledger's secret: nothing
        computed from data. A ledger behind its witness (restored from an older copy with
        its outputs) is refused before anything is computed or charged: re-running its
        lost releases would publish second noisy copies and forget what people spent.
    """

    path: Path

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            msg = f"a witness `path` must be a pathlib.Path, got {type(self.path).__name__}."
            raise TypeError(msg)

    # -- reading ---------------------------------------------------------------------
    def read(self, ledger: Any) -> tuple[int, str] | None:
        """``(commits, head)`` of the witness file, its MAC checked; None if absent.

        Raises:
            LedgerDamagedError: unreadable, fails its MAC, or belongs to another ledger.
            StorageError: the file cannot be read (permissions, I/O).
        """
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            msg = (f"the ledger witness `{self.path}` cannot be read: "
                   f"{StorageError.cause(exc)}.")
            raise StorageError(msg) from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise _damaged(self.path, "it is not a witness (unreadable JSON)") from exc
        if not isinstance(doc, dict) or set(doc) != _FIELDS or doc["format"] != FORMAT:
            raise _damaged(self.path, f"it is not a witness of format {FORMAT}")
        other = doc["ledger_id"]
        if not isinstance(other, str) or len(other) != 16 or any(
            c not in "0123456789abcdef" for c in other
        ):
            raise _damaged(self.path, "its ledger id is malformed")
        if other != ledger.ledger_id:
            msg = (
                f"the ledger witness `{self.path}` belongs to another ledger (id "
                f"{other}) than `{_where(ledger)}` (id {ledger.ledger_id}): "
                "the ledger was reset, replaced or re-created. Nothing was computed or "
                f"charged; {_RESTORE}, or give a new ledger a new witness."
            )
            raise LedgerDamagedError(msg)
        if not isinstance(doc["mac"], str) or not hmac.compare_digest(
            doc["mac"], _mac(ledger, "witness", _body(doc))
        ):
            raise _damaged(self.path, "it fails its MAC")
        commits, head = doc["commits"], doc["head"]
        if isinstance(commits, bool) or not isinstance(commits, int) or commits < 0 \
                or not isinstance(head, str):
            raise _damaged(self.path, "its fields are malformed")  # only with a forged MAC
        return commits, head

    def check(self, ledger: Any) -> WitnessStatus:
        """Compare the ledger with its witness; reads only.

        The witness is read *before* the ledger's history: a concurrent run advances the
        witness only after its commit, so a sound ledger read afterwards is never behind.

        Raises:
            LedgerDamagedError: the ledger is behind its witness (fewer commits: restored
                from an older copy, or its newest commits were lost), or its history is
                not the one the witness saw (another copy); the witness is damaged.

        Privacy:
            Refuses a ledger sent back in time before anything is computed or charged
            (its lost releases would be recomputed with fresh noise and charged against
            an older spend).
        """
        seen = self.read(ledger)
        history = ledger.history()
        if seen is None:
            return WitnessStatus(self.path, None, len(history))
        witnessed, head = seen
        where = _where(ledger)
        if len(history) < witnessed:
            msg = (
                f"the ledger `{where}` is behind its witness `{self.path}`: the witness saw "
                f"{witnessed} commit(s), the ledger holds {len(history)} (restored from an "
                "older copy together with its outputs, or its newest commits were lost, e.g. "
                f"a damaged or deleted -wal file). Nothing was computed or charged; {_RESTORE}."
            )
            raise LedgerDamagedError(msg)
        if chain(ledger, history[:witnessed])[-1] != head:
            msg = (
                f"the ledger `{where}` does not hold the history its witness `{self.path}` "
                f"saw (its first {witnessed} commit(s) differ): it was restored from another "
                f"copy or re-created. Nothing was computed or charged; {_RESTORE}."
            )
            raise LedgerDamagedError(msg)
        return WitnessStatus(self.path, witnessed, len(history))

    # -- writing ---------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive ``flock`` on ``<witness>.lock`` (never removed), so that two runs
        advancing the witness at once cannot move it backwards."""
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self._storage(exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _storage(self, exc: OSError) -> StorageError:
        msg = (
            f"the ledger witness `{self.path}` cannot be written: {StorageError.cause(exc)} "
            "(any release committed by this run is in the ledger; the next run publishes "
            "it and catches the witness up)."
        )
        return StorageError(msg)

    def advance(self, ledger: Any) -> WitnessStatus:
        """Record the ledger's current history (after a commit, or to catch up a lagging
        witness); never moves the witness backwards.

        Raises:
            LedgerDamagedError: as :meth:`check` (the ledger went back meanwhile).
            StorageError: the witness cannot be written (exit code 7).

        Privacy:
            Called after a commit and before its outputs are published, so every
            published release is covered by the witness. Writes counts, the ledger's public
            id and MACs under its secret; nothing computed from data.
        """
        with self._locked():
            status = self.check(ledger)
            history = ledger.history()  # after the check: at least as new
            if status.witnessed is not None and len(history) == status.witnessed:
                return status
            for stale in self.path.parent.glob(f".{self.path.name}.*"):
                if is_orphan(stale.name):  # the scratch file of a write killed midway
                    with contextlib.suppress(OSError):
                        stale.unlink()
            doc: dict[str, Any] = {
                "format": FORMAT, "ledger_id": ledger.ledger_id, "commits": len(history),
                "head": chain(ledger, history)[-1],
                "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            doc["mac"] = _mac(ledger, "witness", _body(doc))
            try:
                atomic_write(self.path, (json.dumps(doc, sort_keys=True) + "\n").encode())
            except OSError as exc:
                raise self._storage(exc) from exc
        if status.witnessed is None and history:
            log.warning("ledger witness %s did not exist: created at %d commit(s) of %s (a "
                        "rollback before now cannot be detected)", self.path, len(history),
                        _where(ledger))
        return WitnessStatus(self.path, len(history), len(history))


def _damaged(path: Path, what: str) -> LedgerDamagedError:
    msg = (
        f"the ledger witness `{path}` is damaged: {what}. Nothing was computed or charged; "
        "restore the witness from where it is kept, or move it away only if the ledger is "
        "known to be the newest (a new witness starts from that ledger)."
    )
    return LedgerDamagedError(msg)


def _body(doc: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in doc.items() if k != "mac"}, sort_keys=True,
                      separators=(",", ":"))


def _where(ledger: Any) -> str:
    return str(getattr(ledger, "path", None) or getattr(ledger, "root", ""))
