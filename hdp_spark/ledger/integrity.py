"""Checksums over everything a ledger keeps: keyed MACs of value sets, content hashes of files.

A ledger that silently reads a damaged value lets people be charged past their budget, so
every value set and file a ledger relies on carries a checksum that is checked before use:

* **MACs of value sets** (:class:`Sealer`): ``HMAC-SHA256`` under a key derived from the
  ledger's secret, over a canonical, length-prefixed encoding of a *kind* (which value set)
  and every field of one stored row, positions included (a commit's ``seq``, a part's
  number), so a flipped value, a flipped key and a row moved to another place all fail.
  Keyed, so that someone with write access but without the secret cannot forge a row.
* **Content hashes of files** (:func:`file_digest`): SHA-256 and size of a whole file, listed
  in a (MAC'd) manifest, so a missing, extra, truncated or altered file is found.

Only the standard library's :mod:`hmac` and :mod:`hashlib` compute them. Nothing here shows
a stored value in a message: damage is named by the value set and its position only.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from hdp_spark.errors import LedgerDamagedError

__all__ = ["Field", "FileDigest", "Sealer", "VerifyReport", "damaged", "file_digest"]

Field = int | str | bytes | float | None
"""One stored value as SQLite returns it."""

_DOMAIN = b"hdp_spark/ledger-seal/v1\x00"
_CHUNK = 1 << 20


def _encoded(value: Field) -> tuple[bytes, bytes]:
    """A type tag and the bytes of one field (the type is covered: a text '5' is not 5)."""
    if value is None:
        return b"n", b""
    if isinstance(value, bool):  # a bool is an int to Python; never stored by a ledger
        return b"i", str(int(value)).encode()
    if isinstance(value, int):
        return b"i", str(value).encode()
    if isinstance(value, float):
        return b"f", repr(value).encode()
    if isinstance(value, str):
        return b"s", value.encode("utf-8", "surrogatepass")
    return b"b", bytes(value)


class Sealer:
    """Computes and checks the MACs of one ledger's value sets (opaque: no key in its repr).

    Args:
        key: the MAC key (derived from the ledger's secret by
            :meth:`hdp_spark.ledger._secret.LedgerKey.sealer`).
    """

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = bytes(key)

    def seal(self, kind: str, *fields: Field) -> str:
        """The MAC (64 hex digits) of one row of value set ``kind``."""
        mac = hmac.new(self._key, _DOMAIN, hashlib.sha256)
        for value in (kind, *fields):
            tag, data = _encoded(value)
            mac.update(tag + len(data).to_bytes(8, "big"))
            mac.update(data)
        return mac.hexdigest()

    def valid(self, mac: object, kind: str, *fields: Field) -> bool:
        """Whether ``mac`` is the MAC of the row (constant-time comparison)."""
        if not isinstance(mac, str) or len(mac) != 64:
            return False
        return hmac.compare_digest(mac, self.seal(kind, *fields))

    def __repr__(self) -> str:
        return "Sealer(<key>)"

    def __reduce__(self) -> str:
        msg = "a ledger's MAC key cannot be pickled (it must stay in the ledger)."
        raise TypeError(msg)


@dataclass(frozen=True, slots=True)
class FileDigest:
    """Size and SHA-256 (hex) of one file."""

    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What a full verification checked (counts only; nothing stored)."""

    path: str
    backend: str
    commits: int
    users: int
    charges: int
    items: int
    """Rows (SQLite) or files (parquet) whose checksum was checked."""


def file_digest(path: Path) -> FileDigest:
    """The size and SHA-256 of a file, read in 1 MiB chunks.

    Raises:
        OSError: the file cannot be read (the caller names it as damage or a storage error).
    """
    # design-ok: a digest of the ledger's own file, kept only in that ledger's MAC'd manifest
    # beside the file itself (never in an output); it tells a reader nothing the file does not
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return FileDigest(size, digest.hexdigest())


def damaged(where: str, what: str) -> LedgerDamagedError:
    """The one-line error of a damaged ledger: its path and what is damaged, never content.

    Args:
        where: the ledger's path.
        what: the damaged value set or file and how (e.g. ``"the totals snapshot, part 3,
            fails its MAC"``); names and positions only.
    """
    msg = (
        f"the ledger `{where}` is damaged: {what}. Nothing was computed or charged; restore "
        "it from a backup (docs/jobs.md, \"Backup and restore\")."
    )
    return LedgerDamagedError(msg)
