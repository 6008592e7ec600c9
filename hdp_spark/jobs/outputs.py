"""Published outputs of committed releases: staging, atomic publish, manifest.

Layout under ``[output] path``::

    <release id>/<commit id>/values.parquet   one row per public key: values + accuracy
    <release id>/<commit id>/values.json      the same rows with the release's metadata
    manifest.json                             current commit of every release of the job
    report.md, plots/*.png                    the report for people
    report.html                               the same report, self-contained (plots embedded)
    .staging/                                 scratch space of running (or crashed) runs

The ledger's commit record is the source of truth; these files are a materialization of it,
written only *after* the ledger commit: to ``.staging`` first, then published by one
``rename``. So a published directory always belongs to a committed release; no noisy value
of an uncommitted (uncharged) release is ever written here; and a committed release whose
directory is missing (crash between commit and publish) is re-materialized from its record
by the next run: same rows, byte for byte the same JSON.

Publication rule: only DP values and public facts are written here. The commit id that
names a release's directory is random (drawn when the record is created); the input
fingerprint and the idempotency key (both keyed by the ledger's secret) stay in the ledger;
data-quality counts go to the report beside the ledger, never here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hdp_spark.errors import JobError, StorageError
from hdp_spark.ledger._fs import (
    atomic_write,
    fault_disk_full,
    fsync_dir,
    fsync_tree,
    remove_orphans,
    tmp_name,
)
from hdp_spark.ledger.base import CommitRecord

__all__ = [
    "check_output_location",
    "check_writable",
    "cited",
    "cleanup_staging",
    "ensure_published",
    "file_in_the_way",
    "json_safe",
    "output_error",
    "publish",
    "release_dir",
    "stage",
    "write_manifest",
]

log = logging.getLogger("hdp_spark.jobs")

STAGING = ".staging"
_COMMIT_ID = re.compile(r"^[0-9a-f]{16}$")


def json_safe(value: Any) -> Any:
    """Plain JSON values: non-finite floats become ``"inf"``, ``"-inf"`` or ``"nan"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def release_dir(out: Path, record: CommitRecord) -> Path:
    """The published directory of a committed release."""
    return out / record.release_id / record.commit_id


UNSAFE_SEED_KEY = b"hdp_unsafe_seed"
"""Schema key-value metadata of ``values.parquet`` for a release made with ``unsafe_seed``."""


def _values_table(rows: list[dict[str, Any]], unsafe_seed: bool = False) -> Any:
    """The rows as an Arrow table; a seeded release's schema carries ``hdp_unsafe_seed: true``."""
    import pyarrow as pa

    table = pa.Table.from_pylist(rows)
    if unsafe_seed:
        meta = dict(table.schema.metadata or {})
        meta[UNSAFE_SEED_KEY] = b"true"
        table = table.replace_schema_metadata(meta)
    return table


def stage(out: Path, record: CommitRecord, ledger_id: str | None = None) -> Path:
    """Write a release's outputs to a new staging directory (fsynced) and return it.

    ``values.json`` names the ledger (its public random id) and the commit the outputs came
    from, so a later run can tell that its ledger is not the one (or older than the one)
    these outputs cite.
    """
    import pyarrow.parquet as pq

    fault_disk_full("output")
    outcome = record.outcome_data()
    rows = outcome["rows"]
    staging = out / STAGING / tmp_name(f"{record.commit_id}-")
    staging.mkdir(parents=True)
    unsafe = outcome.get("unsafe_seed") is True
    pq.write_table(_values_table(rows, unsafe), staging / "values.parquet")
    meta = {k: v for k, v in outcome.items() if k != "rows"}
    doc = {
        "job": record.job,
        "release_id": record.release_id,
        "commit_id": record.commit_id,
        "committed_at": record.committed_at,
        **({"ledger_id": ledger_id} if ledger_id else {}),
        **meta,
        "rows": rows,
    }
    (staging / "values.json").write_text(
        json.dumps(json_safe(doc), indent=2, sort_keys=True, allow_nan=False) + "\n"
    )
    fsync_tree(staging)
    return staging


def publish(out: Path, staged: Path, record: CommitRecord) -> Path:
    """Move a staged directory into place (one atomic ``rename``).

    If the release is already published (a concurrent or earlier run), the staged copy is
    discarded: both were materialized from the same committed record.
    """
    final = release_dir(out, record)
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(staged, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(staged, ignore_errors=True)
    fsync_dir(final.parent)
    return final


def ensure_published(out: Path, record: CommitRecord, ledger_id: str | None = None) -> Path:
    """The published directory of ``record``, re-materializing it from the record if missing."""
    final = release_dir(out, record)
    if final.is_dir():
        return final
    log.info("re-materializing committed release %s (%s)", record.release_id, record.commit_id)
    return publish(out, stage(out, record, ledger_id), record)


def check_writable(out: Path) -> None:
    """Create, flush and delete a probe file in ``out/.staging``: a read-only or full output
    directory is found *before* anything is charged.

    Raises:
        StorageError: the directory cannot be created or written.
    """
    try:
        fault_disk_full("output")
        (out / STAGING).mkdir(parents=True, exist_ok=True)
        probe = out / STAGING / tmp_name("probe-")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"\0" * 4096)
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                probe.unlink()
    except OSError as exc:
        raise output_error(out, "before charging anything; nothing was charged", exc) from exc


def check_output_location(out: Path) -> None:
    """Refuse an output path that is a file, or under one, before the input is read.

    Raises:
        JobError: the setting, the rule and the fix (exit code 2); see :func:`output_error`.

    Privacy:
        Reads the file system's metadata of a configured path only.
    """
    if file_in_the_way(out) is not None:
        raise output_error(out, "before reading the input; nothing was read, nothing was charged",
                           FileExistsError(str(out)))


def file_in_the_way(path: Path) -> Path | None:
    """``path`` or its nearest existing ancestor if that is not a directory (else None).

    Privacy:
        Looks at the file system's entries only (a path from the job file), never at data.
    """
    for entry in (path, *path.parents):
        if entry.is_dir():
            return None
        if entry.exists() or entry.is_symlink():
            return entry
    return None


def output_error(
    out: Path, when: str, exc: OSError, what: str = "`[output] path`"
) -> StorageError | JobError:
    """An output directory's file-system error as its cause in one line.

    A file where the directory (or one of its parents) should be is the job's setting, not
    the storage: :class:`JobError` (exit code 2) naming the setting, the rule and the fix.

    Privacy:
        The message holds the path (a public job setting) and the cause, never data.
    """
    blocker = file_in_the_way(out) if isinstance(exc, FileExistsError | NotADirectoryError) \
        else None
    if blocker is not None:
        where = "it is a file" if blocker == out else f"`{blocker}` above it is a file"
        msg = (
            f"{what} `{out}` must be a directory (each release is published in a "
            f"subdirectory of its own), but {where} ({when}). "
            + (f"Point {what} at a directory, or move the file away." if what.startswith("`[")
               else "Move the file away.")
        )
        return JobError(msg)
    cause = StorageError.cause(exc)
    msg = f"{what} `{out}` cannot be written: {cause} ({when})."
    return StorageError(msg)


def cited(out: Path) -> tuple[set[str], set[str]]:
    """The ledger ids and commit ids the outputs under ``out`` cite.

    Commit ids come from the published directories' names (``<release>/<commit id>/``, each a
    materialized committed release), ledger ids from ``manifest.json`` and ``values.json``.
    """
    ledgers: set[str] = set()
    commits: set[str] = set()
    if not out.is_dir():
        return ledgers, commits
    docs = [out / "manifest.json"]
    for release in out.iterdir():
        if release.name.startswith(".") or not release.is_dir():
            continue
        for commit in release.iterdir():
            if _COMMIT_ID.match(commit.name) and (commit / "values.json").is_file():
                commits.add(commit.name)
                docs.append(commit / "values.json")
    for doc in docs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            lid = json.loads(doc.read_text()).get("ledger_id")
            if isinstance(lid, str):
                ledgers.add(lid)
    return ledgers, commits


def cleanup_staging(out: Path) -> int:
    """Remove staging directories of runs of this host that died; returns a count.

    Directories of live runs and of other hosts (whose processes cannot be checked from here)
    are left alone.
    """
    removed = remove_orphans(out / STAGING)
    if removed:
        log.info("removed %d staging directorie(s) of crashed runs", removed)
    return removed


def write_manifest(
    out: Path, job: str, releases: dict[str, dict[str, Any]], ledger_id: str | None = None
) -> Path:
    """Atomically (re)write ``manifest.json``: the current commit of each of the job's releases.

    Entries of releases not run this time are kept from the previous manifest.
    """
    path = out / "manifest.json"
    previous: dict[str, Any] = {}
    if path.is_file():
        with contextlib.suppress(OSError, ValueError):
            previous = json.loads(path.read_text()).get("releases", {})
    merged = {**previous, **releases}
    doc: dict[str, Any] = {
        "job": job, "updated_at": datetime.now(UTC).isoformat(), "releases": merged
    }
    if ledger_id:
        doc["ledger_id"] = ledger_id
    out.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(path, (json.dumps(json_safe(doc), indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        msg = f"cannot write `{path}`: {exc}."
        raise JobError(msg) from exc
    return path
