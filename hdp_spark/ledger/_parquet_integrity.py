"""Checksums of a parquet ledger (format 2): every file listed with its size and SHA-256 in a
manifest that is itself sealed with a keyed MAC.

A manifest of format 2 holds ``files``: ``{relative path: [size, sha256]}`` for every file
of every spend directory it references (snapshot, deltas, archived deltas: all files in
them, so an extra file is damage too) and for every commit record, and ``mac``:
:meth:`~hdp_spark.ledger.integrity.Sealer.seal` of the manifest's canonical JSON without
it. Readers check the manifest's MAC and, for each directory they read, that it holds
exactly the listed files with the listed sizes and contents. ``hdp-release verify`` checks
every file of every referenced directory and every manifest still on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hdp_spark.ledger.integrity import Sealer, damaged, file_digest

__all__ = ["FORMAT", "FORMAT_V1", "check_dir", "check_file", "check_manifest", "digests",
           "manifest_format", "seal_manifest"]

FORMAT = "hdp_spark.ledger.parquet/2"
FORMAT_V1 = "hdp_spark.ledger.parquet/1"


def _canonical(manifest: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in manifest.items() if k != "mac"}, sort_keys=True,
                      separators=(",", ":"))


def seal_manifest(sealer: Sealer, manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` with its ``mac``."""
    return {**manifest, "mac": sealer.seal("manifest", _canonical(manifest))}


def check_manifest(sealer: Sealer, manifest: dict[str, Any], where: str, name: str) -> None:
    """Raise damage unless the manifest's MAC is valid."""
    if not sealer.valid(manifest.get("mac"), "manifest", _canonical(manifest)):
        raise damaged(where, f"the manifest `{name}` fails its MAC")


_SEALED_FIELDS = ("mac", "files")
"""Fields only a sealed manifest (format 2) has: a manifest holding any of them is checked
as sealed, whatever its format label says."""


def manifest_format(sealer: Sealer, manifest: object, where: str, name: str) -> str:
    """The format of a manifest read from disk, its MAC checked when it is sealed.

    The label is not trusted on its own: the MAC covers it (it is part of the canonical
    JSON), and a manifest that holds any field only a sealed one has (``mac``, ``files``)
    is checked as sealed whatever its label says, so a rewritten or flipped
    label (``.../2`` to ``.../1`` or ``.../3``) fails the MAC instead of being skipped.
    Only a manifest with the exact format-1 label and none of those fields reads as
    format 1 (unsealed, written before checksums existed).

    Raises:
        LedgerDamagedError: not a JSON object, an unknown label without sealed fields, or a
            sealed manifest failing its MAC.
    """
    if not isinstance(manifest, dict):
        raise damaged(where, f"`{name}` is not a manifest")
    label = manifest.get("format")
    if label == FORMAT_V1 and not any(f in manifest for f in _SEALED_FIELDS):
        return FORMAT_V1
    if label == FORMAT or any(f in manifest for f in _SEALED_FIELDS):
        check_manifest(sealer, manifest, where, name)
        if label != FORMAT:  # unreachable unless the MAC was forged with the secret
            raise damaged(where, f"`{name}` is not a manifest of format {FORMAT_V1} or {FORMAT}")
        return FORMAT
    raise damaged(where, f"`{name}` is not a manifest of format {FORMAT_V1} or {FORMAT}")


def digests(root: Path, rels: list[str]) -> dict[str, list[Any]]:
    """``{relative path: [size, sha256]}`` of every file in the directories (or of the files)
    ``rels`` under ``root``."""
    out: dict[str, list[Any]] = {}
    for rel in rels:
        path = root / rel
        files = sorted(f for f in path.iterdir() if f.is_file()) if path.is_dir() else [path]
        for f in files:
            d = file_digest(f)
            out[str(f.relative_to(root))] = [d.size, d.sha256]
    return out


def check_dir(root: Path, manifest: dict[str, Any], rel: str, where: str) -> None:
    """Check that directory ``rel`` holds exactly the files the manifest lists for it, with
    their sizes and SHA-256 (a missing, extra, truncated or altered file is damage)."""
    files: dict[str, list[Any]] = manifest["files"]
    listed = {k for k in files if k.startswith(rel + "/")}
    path = root / rel
    if not path.is_dir():
        raise damaged(where, f"`{rel}` (listed by its manifest) is missing")
    present = {str(f.relative_to(root)) for f in path.iterdir()}
    if present != listed:
        extra, lost = len(present - listed), len(listed - present)
        raise damaged(where, f"`{rel}` holds {extra} file(s) its manifest does not list and "
                      f"lacks {lost} it lists")
    for name in sorted(listed):
        _check(root, name, files[name], where)


def check_file(root: Path, manifest: dict[str, Any], rel: str, where: str) -> None:
    """Check one listed file (a commit record) by size and SHA-256."""
    entry = manifest["files"].get(rel)
    if entry is None:
        raise damaged(where, f"`{rel}` is not listed by its manifest")
    _check(root, rel, entry, where)


def _check(root: Path, rel: str, entry: list[Any], where: str) -> None:
    path = root / rel
    try:
        if not path.is_file():
            raise damaged(where, f"`{rel}` (listed by its manifest) is missing")
        if path.stat().st_size != entry[0]:
            raise damaged(where, f"`{rel}` is truncated or grew (not the size its manifest "
                          "lists)")
        if file_digest(path).sha256 != entry[1]:
            raise damaged(where, f"`{rel}` is altered (its SHA-256 is not the one its "
                          "manifest lists)")
    except OSError as exc:
        raise damaged(where, f"`{rel}` cannot be read") from exc
