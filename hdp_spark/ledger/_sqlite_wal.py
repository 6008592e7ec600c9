"""What SQLite itself would drop silently: damage in a ledger's ``-wal`` file.

Commits a crash left in the ``-wal`` file (not yet checkpointed into the main file) are read
by SQLite only up to the first frame that fails its frame checksum: that frame and every
later one are ignored, so a damaged ``-wal`` reads as the ledger's older, consistent self,
and no checksum of the ledger can see it. ``hdp-release verify`` reads the file itself,
*before* SQLite opens the ledger (the last connection to close checkpoints and deletes it),
with SQLite's own algorithm (https://www.sqlite.org/fileformat2.html, "The WAL File
Format"):

* a header whose checksum fails, in a file that holds frames: every commit in it is lost;
* a frame of the current WAL generation (its salts) that fails its checksum while a later
  frame of the same generation checks out (chained from the stored checksum of the frame
  before it) and ends a commit: a committed transaction is lost;
* frames failing at the very end of the file, with no valid commit after them, are a
  commit cut short by the crash (never committed, so nothing is lost) *or* damage to the
  newest commit: these two cannot be told apart here, and :func:`check_wal` says so.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hdp_spark.ledger.integrity import damaged

__all__ = ["WalReport", "check_wal"]

_MAGIC = {0x377F0682: "<", 0x377F0683: ">"}  # the checksums' byte order (little, big)
_HEADER, _FRAME = 32, 24
_MASK = 0xFFFFFFFF


def _checksum(data: bytes, order: str, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` (a multiple of 8 bytes) from ``(s0, s1)``."""
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & _MASK
        s1 = (s1 + words[i + 1] + s0) & _MASK
    return s0, s1


def _frame_sums(data: bytes, order: str, page: int, frames: int) -> tuple[Any, Any]:
    """Every frame's checksum as ``M^n s + c``: the step ``s' = M s + (x0, x0 + x1)`` with
    ``M = [[1, 1], [1, 2]]`` is linear mod 2^32, so ``c`` (what a frame adds, independent of
    the checksum it starts from) is computed for all frames at once with numpy (wrapping
    uint64 arithmetic, exact mod 2^32); returns ``(M^n as Python ints, c per frame)``."""
    n = 1 + page // 8  # word pairs: 8 bytes of the frame header, then the page
    size = _FRAME + page
    raw = np.frombuffer(data, dtype=np.uint8, count=frames * size, offset=_HEADER)
    raw = raw.reshape(frames, size)
    body = np.concatenate([raw[:, :8], raw[:, _FRAME:]], axis=1)
    words = body.view(np.dtype(f"{order}u4")).astype(np.uint64).reshape(frames, n, 2)
    b0, b1 = words[:, :, 0], words[:, :, 0] + words[:, :, 1]
    powers = np.empty((n + 1, 2, 2), dtype=np.uint64)  # powers[j] = M^j mod 2^64
    powers[0] = np.eye(2, dtype=np.uint64)
    step = np.array([[1, 1], [1, 2]], dtype=np.uint64)
    for j in range(1, n + 1):
        powers[j] = powers[j - 1] @ step
    weights = powers[n - np.arange(1, n + 1)]  # M^(n-k) for the k-th pair, k = 1..n
    c0 = b0 @ weights[:, 0, 0] + b1 @ weights[:, 0, 1]
    c1 = b0 @ weights[:, 1, 0] + b1 @ weights[:, 1, 1]
    top = [[int(v) & _MASK for v in row] for row in powers[n]]
    return top, np.stack([c0, c1], axis=1) & np.uint64(_MASK)


@dataclass(frozen=True, slots=True)
class WalReport:
    """What the check of a ``-wal`` file found (counts only).

    Attributes:
        frames: frames SQLite reads (up to the last valid commit).
        unverifiable: frames failing their checksum at the end of the file, after the last
            valid commit (a commit cut short by a crash, or damage to the newest commit).
    """

    frames: int
    unverifiable: int


def check_wal(ledger: Path) -> WalReport | None:
    """Check the ``-wal`` file beside a SQLite ledger; None if there is none (or it is empty).

    Raises:
        LedgerDamagedError: committed transactions in it fail SQLite's checksums (SQLite
            would drop them silently).
        OSError: the file cannot be read.
    """
    wal = ledger.with_name(ledger.name + "-wal")
    try:
        data = wal.read_bytes()
    except FileNotFoundError:
        return None
    where = str(ledger)
    if len(data) < _HEADER:
        if data:
            raise damaged(where, f"its `{wal.name}` file is cut short inside its header")
        return None
    magic, _version, page, _ckpt, salt1, salt2, c0, c1 = struct.unpack(">8I", data[:_HEADER])
    order = _MAGIC.get(magic)
    size = _FRAME + page
    frames = (len(data) - _HEADER) // size if page else 0
    if order is None or not page or _checksum(data[:24], order, 0, 0) != (c0, c1):
        if frames:
            raise damaged(where, f"the header of its `{wal.name}` file fails SQLite's "
                          "checksum: SQLite ignores every commit in that file")
        return WalReport(0, 0)
    s = (c0, c1)
    valid = committed = tail = 0
    first_bad: int | None = None
    top, adds = _frame_sums(data, order, page, frames) if frames else ([], [])
    for i in range(frames):
        at = _HEADER + i * size
        pgno, commit, fs1, fs2, f0, f1 = struct.unpack(">6I", data[at:at + _FRAME])
        if (fs1, fs2) != (salt1, salt2):
            break  # a frame of an older generation: SQLite's reading ends here by design
        got = ((top[0][0] * s[0] + top[0][1] * s[1] + int(adds[i][0])) & _MASK,
               (top[1][0] * s[0] + top[1][1] * s[1] + int(adds[i][1])) & _MASK)
        ok = got == (f0, f1) and pgno > 0
        if first_bad is None and ok:
            valid += 1
            committed = valid if commit else committed
        elif first_bad is None:
            first_bad = i
        elif ok and commit:
            raise damaged(where, f"frame {first_bad + 1} of its `{wal.name}` file fails "
                          "SQLite's checksum before a later commit: SQLite drops that "
                          "commit and every later one silently")
        if first_bad is not None:
            tail += 1
        s = (f0, f1)  # the next frame chains from this one's stored checksum
    return WalReport(committed, tail)
