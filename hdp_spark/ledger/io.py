"""The pandas bridge of the ledger (:class:`~hdp_spark.ledger.base.FrameIO`); the Spark one is
:class:`hdp_spark.spark.ledger_io.SparkIO`.

Ledger frames have two columns, ``user_id`` (string) and ``units`` (int64 ε units).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hdp_spark.ledger.base import UNITS_COLUMN, USER_COLUMN

__all__ = ["PandasIO"]


def _sum_by_user(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return _empty()
    sums = frame.groupby(USER_COLUMN, sort=False)[UNITS_COLUMN].sum()
    return pd.DataFrame(
        {USER_COLUMN: sums.index.to_numpy(dtype=object), UNITS_COLUMN: sums.to_numpy(np.int64)}
    )


def _same_users(tables: list[pa.Table]) -> bool:
    """Whether every table holds the same user ids in the same strictly increasing order
    (so each user once: then the per-user sum is the elementwise sum of the units)."""
    if any(t.num_rows != tables[0].num_rows for t in tables):
        return False
    first = tables[0].column(USER_COLUMN)
    if not all(t.column(USER_COLUMN).equals(first) for t in tables[1:]):
        return False
    if len(first) < 2:
        return True
    increasing = pc.all(pc.less(first.slice(0, len(first) - 1), first.slice(1)))
    return bool(increasing.as_py())


def _summed(paths: list[str]) -> tuple[pa.Table | None, bool]:
    """The per-user sum over parquet directories as an Arrow table (``None``: no file), and
    whether its rows are known to be in strictly increasing user order."""
    import pyarrow.parquet as pq

    tables = []
    for p in paths:
        files = sorted(
            f for f in Path(p).iterdir()
            if f.suffix == ".parquet" and not f.name.startswith(("_", "."))
        )
        for f in files:
            t = pq.read_table(f, columns=[USER_COLUMN, UNITS_COLUMN])
            tables.append(t.cast(pa.schema([(USER_COLUMN, pa.string()),
                                            (UNITS_COLUMN, pa.int64())])))
    if not tables:
        return None, False
    if len(paths) > 1 and _same_users(tables):
        # every directory charges the same users in the same (sorted) order, as when a
        # job charges the same table each period: sum elementwise, no hash aggregation
        units = np.zeros(tables[0].num_rows, dtype=np.int64)
        for t in tables:
            units += np.asarray(t.column(UNITS_COLUMN).to_numpy(), dtype=np.int64)
        return pa.table({USER_COLUMN: tables[0].column(USER_COLUMN),
                         UNITS_COLUMN: pa.array(units, pa.int64())}), True
    table = pa.concat_tables(tables)
    if len(paths) > 1:
        summed = table.group_by(USER_COLUMN, use_threads=False).aggregate(
            [(UNITS_COLUMN, "sum")])
        table = pa.table({USER_COLUMN: summed.column(USER_COLUMN),
                          UNITS_COLUMN: summed.column(f"{UNITS_COLUMN}_sum")})
    return table, False


def _write_table(table: pa.Table, path: str) -> None:
    """Write a ledger table (sorted by user id) as the one file of a new directory."""
    import pyarrow.parquet as pq

    Path(path).mkdir(parents=True)
    pq.write_table(
        table, Path(path) / "part-00000.parquet", compression="zstd",
        use_dictionary=[UNITS_COLUMN], column_encoding={USER_COLUMN: "DELTA_BYTE_ARRAY"},
    )


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {USER_COLUMN: pd.Series([], dtype=object), UNITS_COLUMN: pd.Series([], dtype=np.int64)}
    )


class PandasIO:
    """Ledger frames as pandas DataFrames; parquet through pyarrow."""

    name = "pandas"

    def from_pairs(self, users: list[str], units: list[int]) -> pd.DataFrame:
        """A ledger frame from Python lists."""
        return pd.DataFrame(
            {
                USER_COLUMN: pd.Series(users, dtype=object),
                UNITS_COLUMN: pd.Series(units, dtype=np.int64),
            }
        )

    def to_pairs(self, frame: pd.DataFrame) -> tuple[list[str], list[int]]:
        """Python lists from a ledger frame."""
        return (
            [str(u) for u in frame[USER_COLUMN].tolist()],
            [int(n) for n in frame[UNITS_COLUMN].tolist()],
        )

    def to_arrow(self, frame: pd.DataFrame) -> pa.Table:
        """The frame as an Arrow table (user ids converted to strings if they are not)."""
        users = frame[USER_COLUMN]
        try:
            arr = pa.array(users.to_numpy(dtype=object), type=pa.string(), from_pandas=True)
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            arr = pa.array(users.astype(str).to_numpy(dtype=object), type=pa.string())
        return pa.table({
            USER_COLUMN: arr,
            UNITS_COLUMN: pa.array(frame[UNITS_COLUMN].to_numpy(np.int64), pa.int64()),
        })

    def from_arrow(self, table: pa.Table) -> pd.DataFrame:
        """A ledger frame from an Arrow table (user ids as Python strings)."""
        # one pass per column, no second copy: the object array of Python strings (most of
        # the cost at 10M users) and a writable int64 copy of the units go into the frame
        # as they are (``copy=False``: no consolidation into pandas blocks)
        users = np.asarray(table.column(USER_COLUMN).to_numpy(zero_copy_only=False),
                           dtype=object)
        units = np.array(table.column(UNITS_COLUMN).to_numpy(), dtype=np.int64)
        return pd.DataFrame({USER_COLUMN: users, UNITS_COLUMN: units}, copy=False)

    def read_parquet(self, paths: list[str]) -> pd.DataFrame:
        """Per-user sum over parquet directories (files starting with ``_`` or ``.`` ignored).

        Read and summed in Arrow (a C++ hash aggregation, exact int64 sums); one directory
        (a snapshot, or a single delta) holds one row per user and is not aggregated.
        """
        table, _ordered = _summed(paths)
        return _empty() if table is None else self.from_arrow(table)

    def compact(self, paths: list[str], path: str) -> int:
        """Write the per-user sum over ``paths`` as a new parquet directory ``path`` (a
        snapshot), in Arrow from file to file (no pandas frame); returns its row count."""
        table, ordered = _summed(paths)
        if table is None:
            table = self.to_arrow(_empty())
        _write_table(table if ordered else table.sort_by(USER_COLUMN), path)
        return int(table.num_rows)

    def write_parquet(self, frame: pd.DataFrame, path: str) -> None:
        """Write a ledger frame as a new parquet directory, compactly.

        Rows sorted by user id, ids prefix-encoded (``DELTA_BYTE_ARRAY``), units
        dictionary-encoded (a release charges few distinct amounts), zstd: a few bytes per
        charge. Spark reads these encodings natively.
        """
        _write_table(self.to_arrow(frame).sort_by(USER_COLUMN), path)

    def add(self, left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:
        """Per-user sum of two ledger frames."""
        return _sum_by_user(pd.concat([left, right], ignore_index=True))
