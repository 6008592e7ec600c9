"""The per-(group, ε level) statistics table as columns: what the engines hand the pipeline.

:class:`LevelTable` holds the cells of every group of one plan as flat numpy arrays (the
group keys, the group offsets, and per cell the level, the row count and the exact encoded
sums), sorted by (group, level), one cell per (group, level). It *is* the
``{group key: GroupStats}`` mapping that :func:`~hdp_spark.core.stats.build_groups`
returns for the same cells (equal as a mapping; a group's :class:`GroupStats` is built
when it is looked up), so every reader of level tables works unchanged, while the mean's
batch finalize reads the columns of the groups it needs directly
(:meth:`LevelTable.select`), without one Python object per cell.

Privacy: none of this is published. The tables are pre-noise statistics; the checks and
errors are those of :func:`~hdp_spark.core.stats.build_groups` (cell sizes, then invalid
ε), in the same order, naming columns and counts of rows with invalid ε (public in this
model), never values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
import numpy.typing as npt

from hdp_spark.core.levels import INVALID_LEVEL
from hdp_spark.core.stats import GroupStats, LevelRow, check_cell_rows, check_levels
from hdp_spark.errors import InternalError

__all__ = ["LevelGroups", "LevelTable", "gather_groups"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Key = tuple[object, ...]


@dataclass(frozen=True, slots=True, eq=False)
class LevelTable(Mapping[Key, GroupStats]):
    """One plan's cells, grouped and sorted, as columns; a ``Mapping`` to ``GroupStats``.

    Attributes:
        group_keys: the group keys, one per group (groups with rows only).
        offsets: int64, ``len(group_keys) + 1`` entries; group g's cells are
            ``[offsets[g], offsets[g + 1])``.
        levels: float64 ε level per cell, strictly ascending within a group.
        counts: int64 rows per cell (each at most ``MAX_CELL_ROWS``).
        sums: int64, one row per cell, one column per encoded value (the specs' order).
    """

    group_keys: tuple[Key, ...]
    offsets: IntArray
    levels: FloatArray
    counts: IntArray
    sums: IntArray
    _index: dict[Key, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        cells = self.levels.shape[0]
        if (self.offsets.shape != (len(self.group_keys) + 1,) or int(self.offsets[0]) != 0
                or int(self.offsets[-1]) != cells or self.counts.shape != (cells,)
                or self.sums.ndim != 2 or self.sums.shape[0] != cells):
            msg = "LevelTable needs offsets from 0 to the number of cells, one entry per cell"
            raise InternalError(msg)

    @classmethod
    def from_cells(
        cls,
        eps_column: str,
        keys: Sequence[Key],
        group_of: IntArray,
        level_of: FloatArray,
        count_of: IntArray,
        sums: IntArray,
    ) -> LevelTable:
        """The table of engine cells ``(keys[group_of[i]], level_of[i], count_of[i],
        sums[i])``, in any order, several cells of one (group, level) merged: the cells of
        :func:`~hdp_spark.core.stats.build_groups`, with its checks in its order.

        Groups come in the order of their code (``group_of``); codes without a cell are
        left out.

        Raises:
            SchemaError: a (merged) cell has more rows than its 64-bit sums can hold.
            EpsilonColumnError: a cell has an invalid-ε level code (NaN counts as one).

        Privacy:
            None: a change of layout of the pre-noise cells (never published).
        """
        level_of = np.where(np.isnan(level_of), INVALID_LEVEL, level_of).astype(np.float64)
        count_of = np.asarray(count_of, dtype=np.int64)
        width = sums.shape[1] if sums.ndim == 2 else 0
        sums = np.asarray(sums, dtype=np.int64).reshape(len(count_of), width)
        if len(count_of):
            check_cell_rows(int(count_of.max()))  # before any merge adds sums
        order = np.lexsort((level_of, group_of))
        group_of, level_of = group_of[order], level_of[order]
        count_of, sums = count_of[order], sums[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (group_of[1:] != group_of[:-1]) | (level_of[1:] != level_of[:-1])
        if not bool(new.all()):  # distinct ε values of one level (cap, floor, grid, invalid)
            starts = np.flatnonzero(new)
            count_of = np.add.reduceat(count_of, starts)
            check_cell_rows(int(count_of.max()))  # merged: the sums below cannot overflow
            sums = (np.add.reduceat(sums, starts, axis=0) if width
                    else np.zeros((len(starts), 0), dtype=np.int64))
            group_of, level_of = group_of[starts], level_of[starts]
        distinct, where = np.unique(level_of, return_inverse=True)
        per_level = np.bincount(where, weights=count_of, minlength=len(distinct))
        check_levels(eps_column, dict(zip(distinct.tolist(),
                                          map(int, per_level.tolist()), strict=True)))
        first = np.ones(len(group_of), dtype=bool)
        first[1:] = group_of[1:] != group_of[:-1]
        starts = np.flatnonzero(first)
        offsets = np.append(starts, len(group_of)).astype(np.int64)
        return cls(tuple(keys[g] for g in group_of[starts].tolist()), offsets, level_of,
                   count_of, sums)

    # -- the mapping view ------------------------------------------------------------------

    def _position(self) -> dict[Key, int]:
        if len(self._index) != len(self.group_keys):
            self._index.update(zip(self.group_keys, range(len(self.group_keys)), strict=True))
        return self._index

    def __getitem__(self, key: Key) -> GroupStats:
        return self._stats(self._position()[key])

    def __iter__(self) -> Iterator[Key]:
        return iter(self.group_keys)

    def __len__(self) -> int:
        return len(self.group_keys)

    def __contains__(self, key: object) -> bool:
        return key in self._position()

    def _stats(self, g: int) -> GroupStats:
        return _group_stats(self.offsets, self.levels, self.counts, self.sums, g)

    def select(self, order: Sequence[Key]) -> LevelGroups:
        """The groups ``order`` (a key without rows: an empty group), as columns.

        Privacy:
            None: a change of layout of the pre-noise cells (never published).
        """
        position = self._position()
        idx = np.fromiter((position.get(k, -1) for k in order), dtype=np.int64,
                          count=len(order))
        offsets, cell = gather_groups(self.offsets, idx)
        return LevelGroups(offsets, self.levels[cell], self.counts[cell], self.sums[cell])


def gather_groups(offsets: IntArray, idx: IntArray) -> tuple[IntArray, IntArray]:
    """The offsets and the cell positions of groups ``idx`` of a flat cell layout
    (``offsets``: group g's cells are ``[offsets[g], offsets[g + 1])``), in the order of
    ``idx``; index -1 is an empty group.

    Privacy:
        None: a change of layout of the pre-noise cells (never published).
    """
    # index -1 reads the appended empty group
    starts = np.append(offsets[:-1], 0)[idx]
    sizes = np.append(np.diff(offsets), 0)[idx]
    out = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    cell = np.arange(int(out[-1]), dtype=np.int64) - np.repeat(out[:-1] - starts, sizes)
    return out, cell


@dataclass(frozen=True, slots=True)
class LevelGroups(Sequence[GroupStats]):
    """The cells of a list of groups, as columns; a ``Sequence`` of their ``GroupStats``.

    Attributes:
        offsets: int64, G + 1 entries; group g's cells are ``[offsets[g], offsets[g+1])``.
        levels, counts, sums: as in :class:`LevelTable`.
    """

    offsets: IntArray
    levels: FloatArray
    counts: IntArray
    sums: IntArray

    def totals(self, slot: int) -> IntArray:
        """The encoded sums of value ``slot`` per cell (contiguous).

        Privacy:
            None: a change of layout of the pre-noise cells (never published).
        """
        return np.ascontiguousarray(self.sums[:, slot])

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @overload
    def __getitem__(self, g: int) -> GroupStats: ...

    @overload
    def __getitem__(self, g: slice) -> Sequence[GroupStats]: ...

    def __getitem__(self, g: int | slice) -> GroupStats | Sequence[GroupStats]:
        if isinstance(g, slice):
            return [self[i] for i in range(*g.indices(len(self)))]
        if not -len(self) <= g < len(self):
            raise IndexError(g)
        return _group_stats(self.offsets, self.levels, self.counts, self.sums, g % len(self))


def _group_stats(offsets: IntArray, levels: FloatArray, counts: IntArray, sums: IntArray,
                 g: int) -> GroupStats:
    """Group g's cells as the scalar path's table."""
    lo, hi = int(offsets[g]), int(offsets[g + 1])
    return GroupStats(tuple(map(LevelRow, levels[lo:hi].tolist(), counts[lo:hi].tolist(),
                                map(tuple, sums[lo:hi].tolist()))))
