"""Compact columnar pieces of a ledger: interned users, audit-log parts and total snapshots.

The SQLite ledger of format 3 stores these pieces as blobs (one parquet file each, written
to memory). Why parquet inside SQLite: its encodings make the audit log a few bytes per
charge at most (sorted user numbers are stored as small deltas with
``DELTA_BINARY_PACKED``, the few distinct charges of a release as a dictionary, and zstd on
top), the decode is vectorized (pyarrow), and SQLite keeps what it is good at: one atomic,
durable transaction and the write lock.

* **users**: the user dictionary. A user's *number* is its position in the order users were
  first charged (0, 1, 2, ...); a part holds the user id strings of a contiguous range.
* **charges**: one committed release's charges, ``(user number, units)`` sorted by number.
* **totals**: each user's total spend (units, by number) as of one commit.

Charges and totals are exact integers in ledger units (:data:`hdp_spark.core.ledger.UNIT`):
nothing here rounds. Nothing here is ever published (the ledger holds user ids).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hdp_spark.errors import LedgerDamagedError, LedgerError
from hdp_spark.ledger.base import UNITS_COLUMN, USER_COLUMN

__all__ = [
    "PART_ROWS",
    "charge_arrays",
    "decode_charges",
    "decode_totals",
    "decode_users",
    "encode_charges",
    "encode_totals",
    "encode_users",
    "intern",
    "ledger_table",
    "parts",
]

PART_ROWS = 1 << 21
"""Rows per blob (2M): keeps every blob far below SQLite's 1 GB limit at any scale."""

Int64s = npt.NDArray[np.int64]


def _write(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", write_statistics=False, **options)
    return sink.getvalue()


def _read(blob: bytes, what: str) -> pa.Table:
    try:
        return pq.read_table(pa.BufferReader(blob))
    except (pa.ArrowException, OSError, ValueError) as exc:
        msg = (
            f"a {what} part of the SQLite ledger cannot be decoded (corrupt ledger); restore it "
            "from a backup (docs/jobs.md, \"Backup and restore\")."
        )
        raise LedgerDamagedError(msg) from exc


def _column(table: pa.Table, name: str, n: int, what: str) -> Any:
    if name not in table.column_names or table.num_rows != n:
        msg = (
            f"a {what} part of the SQLite ledger does not hold the {n} row(s) its index "
            "records (corrupt ledger); restore it from a backup (docs/jobs.md, \"Backup and "
            "restore\")."
        )
        raise LedgerDamagedError(msg)
    return table.column(name)


def parts(n: int) -> Iterable[tuple[int, int, int]]:
    """``(part, start, stop)`` ranges of at most :data:`PART_ROWS` rows covering ``range(n)``."""
    for part, start in enumerate(range(0, n, PART_ROWS)):
        yield part, start, min(n, start + PART_ROWS)


def encode_users(users: pa.Array) -> bytes:
    """A users part: user id strings in number order."""
    return _write(pa.table({"u": users.cast(pa.string())}), use_dictionary=False,
                  column_encoding={"u": "DELTA_BYTE_ARRAY"})


def decode_users(blob: bytes, n: int) -> pa.Array:
    """Inverse of :func:`encode_users` (``n``: the row count recorded beside the blob)."""
    column = _column(_read(blob, "users"), "u", n, "users")
    # one row group is one chunk: take it as it is (``combine_chunks`` would copy it)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def encode_charges(numbers: Int64s, units: Int64s) -> bytes:
    """An audit-log part: ``(user number, units)`` with numbers increasing."""
    table = pa.table({"n": pa.array(numbers, pa.int64()), "c": pa.array(units, pa.int64())})
    return _write(table, use_dictionary=["c"], column_encoding={"n": "DELTA_BINARY_PACKED"})


def decode_charges(blob: bytes, n: int) -> tuple[Int64s, Int64s]:
    """Inverse of :func:`encode_charges`."""
    table = _read(blob, "charges")
    numbers = _column(table, "n", n, "charges").to_numpy()
    units = _column(table, "c", n, "charges").to_numpy()
    return np.asarray(numbers, dtype=np.int64), np.asarray(units, dtype=np.int64)


def encode_totals(totals: Int64s) -> bytes:
    """A totals part: units spent per user, by number (dense)."""
    return _write(pa.table({"t": pa.array(totals, pa.int64())}), use_dictionary=True)


def decode_totals(blob: bytes, n: int) -> Int64s:
    """Inverse of :func:`encode_totals`."""
    values = _column(_read(blob, "totals"), "t", n, "totals").to_numpy()
    return np.asarray(values, dtype=np.int64)


def charge_arrays(table: pa.Table) -> tuple[pa.Array, Int64s]:
    """The user ids and positive units of a ledger frame (as Arrow); rows of 0 are dropped.

    Raises:
        LedgerError: a user appears twice, a user id is null, or a charge is negative
            (frames hold at most one row per user, charges >= 0: a bug, never data).
    """
    users = table.column(USER_COLUMN).combine_chunks().cast(pa.string())
    units = np.asarray(table.column(UNITS_COLUMN).to_numpy(), dtype=np.int64)
    if users.null_count:
        msg = "a ledger charge frame holds a null user id."
        raise LedgerError(msg)
    if units.size and int(units.min()) < 0:
        msg = "a ledger charge frame holds a negative charge."
        raise LedgerError(msg)
    keep = units > 0
    if not keep.all():
        users = users.filter(pa.array(keep))
        units = units[keep]
    return users, units


def intern(known: pa.Array | pa.ChunkedArray, users: pa.Array) -> tuple[Int64s, pa.Array]:
    """The numbers of ``users`` in the dictionary ``known``, numbering new ones after it.

    Args:
        known: the dictionary (user ids in number order).
        users: distinct user ids.

    Returns:
        ``(numbers, new)``: each user's number, and the new users in number order (they
        get ``len(known)``, ``len(known) + 1``, ... in the order they appear in ``users``).

    Raises:
        LedgerError: ``users`` holds a user twice.
    """
    if len(known):
        found = pc.index_in(users, value_set=known)
        numbers = np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    else:
        numbers = np.full(len(users), -1, dtype=np.int64)
    fresh = numbers < 0
    new = users.filter(pa.array(fresh)) if fresh.any() else users.slice(0, 0)
    numbers[fresh] = len(known) + np.arange(int(fresh.sum()), dtype=np.int64)
    if len(new) > 1 and pc.count_distinct(new).as_py() != len(new):
        msg = "a ledger charge frame holds a user twice (frames hold one row per user)."
        raise LedgerError(msg)
    if not fresh.all():
        old = np.sort(numbers[~fresh])
        if old.size > 1 and bool((old[1:] == old[:-1]).any()):
            msg = "a ledger charge frame holds a user twice (frames hold one row per user)."
            raise LedgerError(msg)
    return numbers, new


def ledger_table(users: pa.Array | pa.ChunkedArray, units: Int64s) -> pa.Table:
    """A ledger frame as an Arrow table (``user_id`` string, ``units`` int64)."""
    return pa.table({USER_COLUMN: users.cast(pa.string()),
                     UNITS_COLUMN: pa.array(units, pa.int64())})
