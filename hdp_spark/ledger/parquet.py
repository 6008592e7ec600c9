"""Parquet ledger: a directory of immutable parquet files published by versioned manifests.

Why this format: the Spark engine must join the ledger with tables of any size on the
executors, so the spend lives in parquet (read and written by Spark natively, or by pyarrow
for pandas). Delta Lake would give the same guarantees but cannot be installed offline; this
is the minimal version of its protocol on plain files::

    <ledger>/
      _manifests/00000000000000000007.json   versioned manifests; the highest is current
      _lock                                  the write lock (owner host, pid, token)
      _secret                                the MAC secret (mode 0600; never published)
      spent/snap-<tag>/part-*.parquet        full per-user spend (after a compaction)
      spent/delta-<tag>/part-*.parquet       the charges of one committed release (kept after
                                             a compaction, listed as "archived": the audit log)
      commits/<tag>.json                     commit records (outcome, idempotency key)
      _tmp/                                  scratch space

Protocol of one release (a *session*):

1. take the lock: create ``_lock`` with ``link`` (atomic, fails if it exists). A lock whose
   owner process is dead (same host) is broken; otherwise wait up to ``lock_timeout``;
2. read the current manifest N; the spend is snapshot + deltas of N;
3. the runner checks budgets and computes the release;
4. write the charges (``spent/delta-…``) and the commit record as new files (unreferenced, so
   invisible), then publish manifest N+1 with ``link``: that single atomic step commits the
   charges and the record together. If N+1 already exists, another run committed on the
   basis of N too: the commit fails with :class:`~hdp_spark.errors.LedgerConflictError` and
   nothing of this run is visible (optimistic version check: it is the *fence* that keeps the
   ledger safe even if a lock was wrongly broken);
5. release the lock.

A crash before step 4's ``link`` leaves only unreferenced files (never read, and deleted by
the next session once their process is dead); after it, the release is committed. Every
``compact_every`` deltas a new snapshot replaces them for reading.

The MAC secret (:mod:`hdp_spark.ledger._secret`) is created from OS entropy when the
ledger is first opened, by the same exclusive ``link`` publish as the manifests: two runs
creating the ledger at once agree on one secret. A ledger written by an older version gets
its secret the same way on its first open.

Needs a file system with atomic ``rename`` and ``link`` (local disks, HDFS mounted via
POSIX, NFSv3+); not object stores such as S3 without a commit service.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hdp_spark.errors import LedgerBusyError, LedgerConflictError, LedgerError
from hdp_spark.ledger._fs import (
    atomic_write,
    fsync_dir,
    host_id,
    pid_alive,
    publish_exclusive,
    remove_orphans,
    tmp_name,
)
from hdp_spark.ledger._secret import LedgerKey, new_secret_hex
from hdp_spark.ledger.base import CommitRecord, FrameIO

__all__ = ["ParquetLedger"]

log = logging.getLogger("hdp_spark.ledger")

_FORMAT = "hdp_spark.ledger.parquet/1"
_MANIFEST = re.compile(r"^(\d{20})\.json$")


def _empty_manifest() -> dict[str, Any]:
    return {"format": _FORMAT, "version": 0, "snapshot": None, "deltas": [], "commits": []}


class ParquetLedger:
    """A ledger in a directory of parquet files (created on first use).

    Args:
        path: the ledger directory.
        lock_timeout: seconds to wait for another run's lock before
            :class:`~hdp_spark.errors.LedgerBusyError`.
        compact_every: write a new full snapshot once this many deltas accumulate.

    Privacy:
        Budget checks and charges of one release happen under the lock and commit only if
        no other run committed in between (manifest version check), so concurrent runs
        cannot overspend any user.
    """

    backend = "parquet"

    def __init__(
        self, path: str | Path, lock_timeout: float = 600.0, compact_every: int = 20
    ) -> None:
        self.root = Path(path)
        self.lock_timeout = float(lock_timeout)
        self.compact_every = int(compact_every)
        for sub in ("_manifests", "spent", "commits", "_tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._key = self._load_key()

    def _load_key(self) -> LedgerKey:
        """Read the MAC secret, creating it (once, atomically, mode 0600) if absent."""
        path = self.root / "_secret"
        if not path.exists():
            publish_exclusive(path, (new_secret_hex() + "\n").encode(), self.root / "_tmp",
                              mode=0o600)
        try:
            text = path.read_text()
        except OSError as exc:
            msg = f"the MAC secret of the parquet ledger `{self.root}` is unreadable."
            raise LedgerError(msg) from exc
        return LedgerKey(text, str(self.root))

    def mac(self, message: bytes) -> str:
        """``HMAC-SHA256`` of ``message`` under this ledger's secret (64 hex digits).

        Privacy:
            Keys the input fingerprint: without the secret (which never leaves the ledger
            directory) the result cannot be matched against guesses of the input.
        """
        return self._key.mac(message)

    # -- manifests -------------------------------------------------------------------
    def _latest(self) -> dict[str, Any]:
        versions = [
            int(m.group(1))
            for m in (_MANIFEST.match(p.name) for p in (self.root / "_manifests").iterdir())
            if m
        ]
        if not versions:
            return _empty_manifest()
        path = self.root / "_manifests" / f"{max(versions):020d}.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            msg = f"the ledger manifest `{path}` is unreadable (corrupt ledger)."
            raise LedgerError(msg) from exc
        if data.get("format") != _FORMAT or data.get("version") != max(versions):
            msg = f"`{path}` is not a manifest of format {_FORMAT}."
            raise LedgerError(msg)
        return data

    def _spent_paths(self, manifest: dict[str, Any]) -> list[str]:
        rel = ([manifest["snapshot"]] if manifest["snapshot"] else []) + list(manifest["deltas"])
        return [str(self.root / r) for r in rel]

    def _find_in(self, manifest: dict[str, Any], key: str) -> CommitRecord | None:
        for entry in manifest["commits"]:
            if entry["key"] == key:
                return self._read_record(entry["file"])
        return None

    def _read_record(self, rel: str) -> CommitRecord:
        try:
            text = (self.root / rel).read_text()
        except OSError as exc:
            msg = f"the ledger commit record `{rel}` is missing (corrupt ledger)."
            raise LedgerError(msg) from exc
        return CommitRecord.from_json(text)

    # -- read-only API ---------------------------------------------------------------
    def find(self, key: str) -> CommitRecord | None:
        """Read-only lookup of a committed release."""
        return self._find_in(self._latest(), key)

    def spent(self, io: FrameIO) -> Any:
        """Read-only snapshot of the units spent per user (a native frame of ``io``)."""
        return io.read_parquet(self._spent_paths(self._latest()))

    def records(self, job: str | None = None) -> Iterator[CommitRecord]:
        """Committed records, oldest first (optionally of one job)."""
        manifest = self._latest()
        for entry in manifest["commits"]:
            if job is None or entry["job"] == job:
                yield self._read_record(entry["file"])

    @property
    def version(self) -> int:
        """The current manifest version (0 for an empty ledger)."""
        return int(self._latest()["version"])

    # -- lock ------------------------------------------------------------------------
    def _try_break(self, lock: Path) -> bool:
        """Break the lock if its owner is a dead process of this host."""
        try:
            owner = json.loads(lock.read_text())
        except FileNotFoundError:
            return True
        except (OSError, ValueError):
            return False
        if owner.get("host") != host_id() or pid_alive(int(owner.get("pid", 0))):
            return False
        broken = self.root / "_tmp" / f"broken-lock-{owner.get('token', 'x')}-{uuid.uuid4().hex}"
        try:
            os.rename(lock, broken)
        except FileNotFoundError:
            return True
        try:
            moved = json.loads(broken.read_text())
        except (OSError, ValueError):
            moved = {}
        if moved.get("token") != owner.get("token"):
            # Raced with another breaker and moved a live lock: put it back if possible. The
            # manifest version check keeps the ledger safe even if two runs now hold a lock.
            with suppress(OSError):
                os.link(broken, lock)
        else:
            log.warning("broke the ledger lock of dead process %s", owner.get("pid"))
        with suppress(OSError):
            broken.unlink()
        return True

    @contextmanager
    def _locked(self) -> Iterator[str]:
        lock = self.root / "_lock"
        token = uuid.uuid4().hex
        body = json.dumps(
            {"token": token, "host": host_id(), "pid": os.getpid(),
             "created_at": datetime.now(UTC).isoformat()}
        ).encode()
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.02
        while not publish_exclusive(lock, body, self.root / "_tmp"):
            if self._try_break(lock):
                continue
            if time.monotonic() > deadline:
                msg = (
                    f"the parquet ledger `{self.root}` stayed locked by another run for more "
                    f"than `lock_timeout` = {self.lock_timeout:g} s."
                )
                raise LedgerBusyError(msg)
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        try:
            yield token
        finally:
            try:
                current = json.loads(lock.read_text()).get("token")
            except (OSError, ValueError):
                current = None
            if current == token:
                lock.unlink()
                fsync_dir(self.root)

    @contextmanager
    def session(self, io: FrameIO) -> Iterator[_ParquetSession]:
        """Take the lock and read the current manifest for one release.

        Raises:
            LedgerBusyError: the lock was not obtained within ``lock_timeout`` seconds.
        """
        with self._locked():
            manifest = self._latest()
            self._remove_orphans(manifest)
            yield _ParquetSession(self, io, manifest)

    def _remove_orphans(self, manifest: dict[str, Any]) -> None:
        """Delete files of runs of this host that died before their commit point.

        They are never read (no manifest references them), but an uncommitted commit record
        holds the noisy outcome of a release that was never charged: it must not linger.
        Runs under the lock; files of live processes and of other hosts are kept.
        """
        keep_spent = {Path(p).name for p in self._spent_paths(manifest)}
        keep_spent |= {Path(p).name for p in manifest.get("archived", [])}
        keep_commits = {Path(e["file"]).name for e in manifest["commits"]}
        removed = remove_orphans(self.root / "spent", keep_spent)
        removed += remove_orphans(self.root / "commits", keep_commits)
        removed += remove_orphans(self.root / "_tmp")
        if removed:
            log.info("ledger: removed %d file(s) of crashed runs", removed)


class _ParquetSession:
    """One release under the parquet ledger's lock (see :meth:`ParquetLedger.session`)."""

    def __init__(self, ledger: ParquetLedger, io: FrameIO, manifest: dict[str, Any]) -> None:
        self._ledger = ledger
        self._io = io
        self._manifest = manifest
        self._spent: Any = None
        self.done = False

    def find(self, key: str) -> CommitRecord | None:
        return self._ledger._find_in(self._manifest, key)

    def spent(self) -> Any:
        if self._spent is None:
            self._spent = self._io.read_parquet(self._ledger._spent_paths(self._manifest))
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
        old = self._manifest
        version = int(old["version"]) + 1
        tag = f"{version:020d}-{record.commit_id}-{tmp_name()}"
        snapshot, deltas = old["snapshot"], list(old["deltas"])
        archived = list(old.get("archived", []))
        if record.users_charged > 0:
            delta = f"spent/delta-{tag}"
            scratch = root / "_tmp" / f"delta-{tag}"
            self._io.write_parquet(charges, str(scratch))
            os.rename(scratch, root / delta)
            deltas.append(delta)
            if len(deltas) >= self._ledger.compact_every:
                snap = f"spent/snap-{tag}"
                scratch = root / "_tmp" / f"snap-{tag}"
                self._io.write_parquet(self._io.add(self.spent(), charges), str(scratch))
                os.rename(scratch, root / snap)
                archived += [*([snapshot] if snapshot else []), *deltas]
                snapshot, deltas = snap, []
            fsync_dir(root / "spent")
        commit_file = f"commits/{tag}.json"
        atomic_write(root / commit_file, record.to_json().encode())
        manifest = {
            "format": _FORMAT,
            "version": version,
            "snapshot": snapshot,
            "deltas": deltas,
            "archived": archived,
            "commits": [
                *old["commits"],
                {"key": record.key, "file": commit_file, "job": record.job,
                 "release_id": record.release_id},
            ],
            "created_at": datetime.now(UTC).isoformat(),
        }
        if before_commit is not None:
            before_commit()
        target = root / "_manifests" / f"{version:020d}.json"
        if not publish_exclusive(target, json.dumps(manifest).encode(), root / "_tmp"):
            msg = (
                f"release `{record.release_id}`: another run committed ledger version "
                f"{version} first; nothing of this run was committed."
            )
            raise LedgerConflictError(msg)
        self.done = True
        log.debug("ledger version %d committed (%s)", version, record.commit_id)
