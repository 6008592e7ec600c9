"""Fingerprints of the input table: part of every release's idempotency key.

Files (CSV, parquet file or directory) are fingerprinted by their bytes (``"content"``) or by
their names, sizes and modification times (``"stat"``, cheap for very large inputs); the same
files give the same fingerprint on both engines (with the same ledger). Spark tables are
fingerprinted by an order-independent hash of their rows.

Every fingerprint is keyed: ``HMAC-SHA256`` under the ledger's secret
(:mod:`hdp_spark.ledger._secret`) of an unkeyed digest that never leaves process memory. An
unkeyed hash of the input would be a deterministic function of private data: a reader who
knows every other row could enumerate one user's value over its public bounds and match the
hash. Fingerprints are stored in the ledger only and never published.

Both failure directions are privacy-safe: a changed input that keeps its fingerprint
re-publishes the committed outcome (no new release), and an unchanged input with a new
fingerprint is a new release, charged to the ledger.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from hdp_spark.errors import JobError

__all__ = ["file_fingerprint", "file_stats"]

_CHUNK = 1 << 20


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        msg = f"`[input] path` must be an existing file or directory; got {str(path)!r}."
        raise JobError(msg)
    return sorted(
        p for p in path.rglob("*")
        if p.is_file()
        and not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
    )


def file_stats(path: Path) -> list[tuple[str, int, int]]:
    """``(relative name, size, mtime_ns)`` of every data file (to detect changes mid-run)."""
    out = []
    for f in _files(path):
        st = f.stat()
        rel = f.name if f == path else f.relative_to(path).as_posix()
        out.append((rel, st.st_size, st.st_mtime_ns))
    return out


def file_fingerprint(
    path: Path, mode: str, extra: object, mac: Callable[[bytes], str]
) -> str:
    """Keyed fingerprint of the input files.

    Args:
        path: a file or a directory (files whose path has a part starting with ``_`` or ``.``
            are ignored, like Spark's ``_SUCCESS`` and ``.crc`` files).
        mode: ``"content"`` (SHA-256 of the bytes) or ``"stat"`` (names, sizes, mtimes).
        extra: anything else that changes how the files are read (e.g. column casts).
        mac: the ledger's MAC (:meth:`~hdp_spark.ledger.SqliteLedger.mac`).

    Privacy:
        The per-file digests are HMAC input only; the result is keyed by the ledger's secret
        and reveals nothing about the files to anyone without it.
    """
    entries: list[list[object]] = []
    for f in _files(path):
        rel = f.name if f == path else f.relative_to(path).as_posix()
        if mode == "content":
            h = hashlib.sha256()  # design-ok: HMAC input only, never leaves memory
            with f.open("rb") as fh:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
            entries.append([rel, h.hexdigest()])
        else:
            st = f.stat()
            entries.append([rel, st.st_size, st.st_mtime_ns])
    payload = json.dumps({"mode": mode, "files": entries, "extra": extra}, sort_keys=True,
                         default=str)
    return f"files-{mode}:" + mac(payload.encode())
