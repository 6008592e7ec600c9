"""One release of a parquet ledger under its lease (see :class:`ParquetLedger.session`), and
the clean-up of files no manifest references."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdp_spark.errors import LedgerConflictError, LedgerError, StorageError
from hdp_spark.ledger._fs import (
    atomic_write,
    fault_disk_full,
    fsync_dir,
    fsync_tree,
    publish_exclusive,
    tmp_name,
)
from hdp_spark.ledger._parquet_integrity import FORMAT, digests, seal_manifest
from hdp_spark.ledger.base import CommitRecord, FrameIO

if TYPE_CHECKING:
    from hdp_spark.ledger.parquet import ParquetLedger

__all__ = ["ParquetSession", "compaction_due", "remove_older", "remove_unreferenced",
           "storage_error"]

log = logging.getLogger("hdp_spark.ledger")


def storage_error(root: Path, doing: str, exc: OSError) -> StorageError:
    """A file-system error of the ledger as its cause in one line."""
    cause = StorageError.cause(exc)
    msg = f"the parquet ledger `{root}`: {cause} ({doing}); nothing was committed."
    return StorageError(msg)


def _remove_entry(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with suppress(FileNotFoundError):
            entry.unlink()


def remove_unreferenced(directory: Path, keep: set[str]) -> int:
    """Delete the entries of ``directory`` not named in ``keep``; returns how many."""
    removed = 0
    for entry in directory.iterdir():
        if entry.name not in keep:
            _remove_entry(entry)
            removed += 1
    return removed


def remove_older(directory: Path, cutoff: float) -> int:
    """Delete the entries of ``directory`` last changed before ``cutoff``; returns how many."""
    removed = 0
    for entry in directory.iterdir():
        with suppress(FileNotFoundError):
            if entry.lstat().st_mtime < cutoff:
                _remove_entry(entry)
                removed += 1
    return removed


class ParquetSession:
    """One release under the parquet ledger's lease (see :meth:`ParquetLedger.session`)."""

    def __init__(
        self, ledger: ParquetLedger, io: FrameIO, manifest: dict[str, Any], token: str
    ) -> None:
        self._ledger = ledger
        self._io = io
        self._manifest = manifest
        self._token = token
        self._spent: Any = None
        self.done = False

    def find(self, key: str) -> CommitRecord | None:
        return self._ledger._find_in(self._manifest, key)

    def spent(self) -> Any:
        if self._spent is None:
            self._spent = self._ledger._read_spent(self._io, self._manifest)
        return self._spent

    def commit(
        self,
        record: CommitRecord,
        charges: Any,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        if self.done:
            msg = "a ledger session commits at most once."
            raise LedgerError(msg)
        root = self._ledger.root
        written: list[Path] = []
        try:
            self._commit(record, charges, before_commit, written)
        except OSError as exc:
            _discard(written)
            raise storage_error(root, "committing", exc) from exc
        except BaseException:
            # nothing of this attempt is visible; its files (the record holds a noisy
            # outcome that was never charged) must not stay on disk
            _discard(written)
            raise
        self.done = True
        try:
            atomic_write(root / "_head", f"{self._manifest_version}\n".encode())
        except OSError as exc:
            # committed already; but a `_head` behind the manifests would let a lost newest
            # manifest go unnoticed: say so (exit 7); the next commit writes it again
            msg = (
                f"the parquet ledger `{root}`: release `{record.release_id}` is committed, but "
                f"its head version could not be recorded ({StorageError.cause(exc)}); free "
                "space and run the job again (it re-publishes the release)."
            )
            raise StorageError(msg) from exc
        log.debug("ledger version %d committed (%s)", self._manifest_version, record.commit_id)

    def _write(self, produce: Callable[[str], Any], scratch: Path, final: Path,
               written: list[Path]) -> None:
        """Write a parquet directory (``produce(path)``), flush it (files and directory) and
        move it in place."""
        written.append(scratch)
        produce(str(scratch))
        fsync_tree(scratch)
        written.append(final)
        os.rename(scratch, final)

    def _commit(
        self,
        record: CommitRecord,
        charges: Any,
        before_commit: Callable[[], None] | None,
        written: list[Path],
    ) -> None:
        root = self._ledger.root
        old = self._manifest
        version = int(old["version"]) + 1
        self._manifest_version = version
        tag = f"{version:020d}-{record.commit_id}-{tmp_name()}"
        snapshot, deltas = old["snapshot"], list(old["deltas"])
        archived = list(old.get("archived", []))
        # rows of the snapshot (its users) and of the deltas since (their charges); absent
        # from manifests of older versions: 0, so the next delta compacts and records them
        snapshot_rows, delta_rows = int(old.get("snapshot_rows", 0)), int(old.get("delta_rows", 0))
        fault_disk_full("ledger")
        if record.users_charged > 0:
            delta = f"spent/delta-{tag}"
            self._write(lambda p: self._io.write_parquet(charges, p),
                        root / "_tmp" / f"delta-{tag}", root / delta, written)
            deltas.append(delta)
            delta_rows += int(record.users_charged)
            if compaction_due(snapshot, len(deltas), delta_rows, snapshot_rows,
                              self._ledger.compact_every):
                snap = f"spent/snap-{tag}"
                # the snapshot and deltas it sums are checked again right before they are
                # read (the new delta is this run's own, listed with its digest below)
                self._ledger._check_parquet(self._ledger._spent_paths(old), old)
                sources = [str(root / d) for d in ([snapshot] if snapshot else []) + deltas]
                rows: list[int] = []
                self._write(lambda p: rows.append(self._io.compact(sources, p)),
                            root / "_tmp" / f"snap-{tag}", root / snap, written)
                archived += [*([snapshot] if snapshot else []), *deltas]
                snapshot, deltas = snap, []
                snapshot_rows, delta_rows = rows[0], 0
            fsync_dir(root / "spent")
        commit_file = f"commits/{tag}.json"
        written.append(root / commit_file)
        atomic_write(root / commit_file, record.to_json().encode())
        kept = [*([snapshot] if snapshot else []), *deltas, *archived]
        old_files: dict[str, list[Any]] = dict(old.get("files", {}))
        new = [d for d in kept if not any(k.startswith(d + "/") for k in old_files)]
        files = {k: v for k, v in old_files.items()
                 if k.split("/")[0] == "commits" or "/".join(k.split("/")[:2]) in kept}
        files |= digests(root, [*new, commit_file])
        manifest = {
            "format": FORMAT,
            "ledger_id": self._ledger.ledger_id,
            "version": version,
            "snapshot": snapshot,
            "deltas": deltas,
            "archived": archived,
            "snapshot_rows": snapshot_rows,
            "delta_rows": delta_rows,
            "commits": [
                *old["commits"],
                {"key": record.key, "file": commit_file, "job": record.job,
                 "release_id": record.release_id, "commit_id": record.commit_id},
            ],
            "created_at": datetime.now(UTC).isoformat(),
            "files": files,
        }
        manifest = seal_manifest(self._ledger._sealer, manifest)
        if before_commit is not None:
            before_commit()
        if not self._ledger._holds(self._token):
            msg = (
                f"release `{record.release_id}`: this run's ledger lease expired before its "
                "commit (another run may have taken over); nothing of this run was committed."
            )
            raise LedgerConflictError(msg)
        target = root / "_manifests" / f"{version:020d}.json"
        if not publish_exclusive(target, json.dumps(manifest).encode(), root / "_tmp"):
            msg = (
                f"release `{record.release_id}`: another run committed ledger version "
                f"{version} first; nothing of this run was committed."
            )
            raise LedgerConflictError(msg)


def compaction_due(snapshot: str | None, deltas: int, delta_rows: int, snapshot_rows: int,
                   compact_every: int) -> bool:
    """Whether a commit that leaves ``deltas`` deltas (holding ``delta_rows`` charges) after
    the snapshot (``snapshot_rows`` users) writes a new snapshot.

    After ``compact_every`` deltas, or once the deltas hold as many charges as the snapshot
    holds users (as the SQLite ledger does): a run then never reads more than about twice
    its users' rows (a 10M-user spend: one 10M snapshot plus under 10M charges), and a
    snapshot is written at most once per as many charges as it has rows. A lone delta
    without a snapshot is read as a snapshot already (one row per user): not rewritten.
    """
    if deltas >= compact_every:
        return True
    if snapshot is None and deltas < 2:
        return False
    return delta_rows >= snapshot_rows


def _discard(paths: list[Path]) -> None:
    for path in paths:
        _remove_entry(path)
