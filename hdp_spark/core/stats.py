"""The per-(group, ε level) statistics table that every engine produces.

Engines return, for each group key and ε level, the row count and the exact integer sums
of the encoded value columns (:mod:`hdp_spark.core.encoding`). The driver-side finalize
step sees only this table, never rows. The two engines must produce equal tables; the
tests compare them.
"""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.levels import BELOW_GRID_LEVEL, INVALID_LEVEL
from hdp_spark.errors import EpsilonColumnError, SchemaError

__all__ = [
    "MAX_CELL_ROWS",
    "GroupStats",
    "LevelRow",
    "build_groups",
    "check_cell_rows",
    "check_levels",
    "group_stats",
]

MAX_CELL_ROWS = (2**63 - 1) // FIXED_ONE
"""Most rows one (group, ε level) cell may hold: 2**32 - 1.

Every row adds at most ``FIXED_ONE`` = 2**31 to an encoded sum, and the engines sum in
signed 64-bit integers (numpy ``int64``, Spark ``bigint``): (2**32 - 1) · 2**31 =
2**63 - 2**31 still fits, 2**32 rows of the full range would wrap around on pandas (and
on Spark with ANSI mode off) and give a wrong, not private-looking, statistic. The count
of a cell is public (n and the ε histogram are public in this model), so refusing a
larger cell reveals nothing."""


@dataclass(frozen=True, slots=True)
class LevelRow:
    """Aggregates of one (group, ε level) cell.

    Attributes:
        level: the ε level (0, a positive float, or +inf).
        count: number of rows.
        totals: exact integer sum of each encoded value column, in the order of the specs.
    """

    level: float
    count: int
    totals: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GroupStats:
    """All level rows of one group, sorted by level."""

    rows: tuple[LevelRow, ...]

    @property
    def n(self) -> int:
        """Number of rows in the group."""
        return sum(r.count for r in self.rows)

    @property
    def levels(self) -> list[float]:
        """Distinct ε levels, ascending."""
        return [r.level for r in self.rows]

    @property
    def counts(self) -> list[int]:
        """Row count per level."""
        return [r.count for r in self.rows]

    def totals(self, index: int) -> list[int]:
        """Encoded sums of value column ``index`` per level."""
        return [r.totals[index] for r in self.rows]

    def fingerprint(self) -> tuple[tuple[float, int, tuple[int, ...]], ...]:
        """Exact, canonical content (the noise context binds to it)."""
        return tuple((r.level, r.count, r.totals) for r in self.rows)

    def fingerprint_bytes(self) -> bytes:
        """:meth:`fingerprint` packed as big-endian float64/int64 (fast, injective).

        Layout: number of levels and totals per row, then per row the level (float64),
        the count and each total (int64; sums of at most 2**32 rows of 2**31 fit).
        """
        width = len(self.rows[0].totals) if self.rows else 0
        parts = [struct.pack(">QQ", len(self.rows), width)]
        fmt = struct.Struct(f">dq{width}q")
        for r in self.rows:
            parts.append(fmt.pack(r.level, r.count, *r.totals))
        return b"".join(parts)


def check_levels(eps_column: str, level_counts: Mapping[float, int]) -> None:
    """Raise if any row carried an invalid ε (counts only, never values)."""
    bad = int(level_counts.get(INVALID_LEVEL, 0))
    if bad:
        msg = (
            f"Column `{eps_column}` must hold ε >= 0 or +inf (not null, NaN, negative or "
            f"-inf); {bad} row(s) break this rule."
        )
        raise EpsilonColumnError(msg)
    below = int(level_counts.get(BELOW_GRID_LEVEL, 0))
    if below:
        msg = (
            f"Column `{eps_column}` has {below} row(s) with 0 < ε below the lowest point of "
            "`eps_grid`; lower `eps_grid.lowest` (rounding them up would weaken privacy)."
        )
        raise EpsilonColumnError(msg)


def check_cell_rows(count: int, limit: int | None = None) -> None:
    """Raise if one (group, ε level) cell holds more rows than its 64-bit sums can hold.

    Raises:
        SchemaError: the cell has more than :data:`MAX_CELL_ROWS` rows (``limit`` overrides
            it, for tests).
    """
    cap = MAX_CELL_ROWS if limit is None else limit
    if count > cap:
        msg = (
            f"a release can sum at most {cap} rows per (group, ε level) cell: the exact "
            "64-bit fixed-point sums would overflow beyond that. Split the release with a "
            "public `by` column (or release a public subset of the rows)."
        )
        raise SchemaError(msg)


def build_groups(
    eps_column: str,
    cells: Iterable[tuple[tuple[object, ...], float, int, Sequence[int]]],
) -> dict[tuple[object, ...], GroupStats]:
    """Assemble engine output rows ``(key, level, count, totals)`` into sorted groups.

    Raises:
        EpsilonColumnError: if any cell has an invalid-ε level code.
        SchemaError: if a cell has more rows than its sums can hold (:func:`check_cell_rows`).
    """
    per_level: dict[float, int] = {}
    grouped: dict[tuple[object, ...], list[LevelRow]] = {}
    for key, level, count, totals in cells:
        lvl = float(level)
        if lvl != lvl:  # NaN
            lvl = INVALID_LEVEL
        c = int(count)
        check_cell_rows(c)
        per_level[lvl] = per_level.get(lvl, 0) + c
        row = LevelRow(lvl, c, tuple(map(int, totals)))
        rows = grouped.get(key)
        if rows is None:
            grouped[key] = [row]
        else:
            rows.append(row)
    check_levels(eps_column, per_level)
    by_level = operator.attrgetter("level")
    return {key: GroupStats(tuple(sorted(rows, key=by_level))) for key, rows in grouped.items()}


def group_stats(
    eps_column: str, levels: Sequence[float], counts: Sequence[int], sums: Sequence[int]
) -> GroupStats:
    """One group's :class:`GroupStats` from its cells, given level-sorted (ascending).

    ``sums`` holds each cell's encoded sums one after another (``len(sums) // len(counts)``
    per cell). The same rules and errors as :func:`build_groups`, without its grouping
    (the Column finalize gets one group per row, already sorted by the native aggregate).

    Raises:
        EpsilonColumnError: if any cell has an invalid-ε level code.
        SchemaError: if a cell has more rows than its sums can hold.
    """
    k = len(sums) // max(len(counts), 1)
    lv = [INVALID_LEVEL if x != x else float(x) for x in levels]
    if lv and (lv[0] < 0 or any(a > b for a, b in itertools.pairwise(lv))):
        # an invalid-ε code, or cells not sorted: the general path (its errors, its order)
        cells = zip(lv, counts, strict=True)
        return build_groups(eps_column, (
            ((), x, c, sums[i * k:(i + 1) * k]) for i, (x, c) in enumerate(cells)
        )).get((), GroupStats(()))
    if counts:
        check_cell_rows(max(counts))
    if k == 1:
        totals: list[tuple[int, ...]] = [(int(t),) for t in sums]
    else:
        totals = [tuple(map(int, sums[i * k:(i + 1) * k])) for i in range(len(counts))]
    return GroupStats(tuple(map(LevelRow, lv, map(int, counts), totals)))
