"""Per-(group, ε level, index) statistics of local-DP reports: what every engine produces.

Each engine encodes each report as an integer q (:func:`~hdp_spark.core.ldp.common.
encode_reports_numpy`, or a ±1 sign), splits it into two limbs q = hi 2**31 + lo and
returns, per (group, ε level, index), the row count and the two limb sums (exact 64-bit
integer sums on both engines). ``index`` is 0 for scalar means, the coordinate k for
vector means and the projection row j for the frequency oracle; -1 marks rows whose report
is missing or malformed (counted, not used).

The table is columnar (numpy arrays): a frequency oracle's table has #levels x m cells,
which can reach millions.

The reports are already ε_i-LDP, so everything here is post-processing: skipping a
malformed report costs no privacy. The ε column is public and is validated with counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from hdp_spark.core.ldp.common import LDP_EPS_MIN, LIMB_BITS
from hdp_spark.core.levels import INVALID_LEVEL
from hdp_spark.errors import EpsilonColumnError, InternalError

__all__ = ["CountKind", "LdpCells", "LdpGroupStats", "build_ldp_groups", "empty_stats"]

CountKind = Literal["rows", "coordinates"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False, slots=True)
class LdpCells:
    """Raw engine output: one entry per (group, ε level, index) cell.

    Attributes:
        keys: the distinct group keys; ``key_code[c]`` indexes into it.
        key_code: group of each cell.
        level: ε level code of each cell (see :mod:`hdp_spark.core.levels`).
        index: 0 / coordinate / projection row, or -1 for unusable reports.
        count: rows in the cell.
        hi: sum of the high limbs.
        lo: sum of the low limbs.
    """

    keys: Sequence[tuple[object, ...]]
    key_code: IntArray
    level: FloatArray
    index: IntArray
    count: IntArray
    hi: IntArray
    lo: IntArray

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[tuple[object, ...], float, int, int, int, int]]
    ) -> LdpCells:
        """Cells from ``(key, level, index, count, hi, lo)`` tuples."""
        codes: dict[tuple[object, ...], int] = {}
        cols: list[list[Any]] = [[], [], [], [], [], []]
        for key, level, index, count, hi, lo in rows:
            code = codes.setdefault(key, len(codes))
            for col, value in zip(cols, (code, level, index, count, hi, lo), strict=True):
                col.append(value)
        return cls(
            list(codes), np.asarray(cols[0], dtype=np.int64), np.asarray(cols[1], dtype=np.float64),
            np.asarray(cols[2], dtype=np.int64), np.asarray(cols[3], dtype=np.int64),
            np.asarray(cols[4], dtype=np.int64), np.asarray(cols[5], dtype=np.int64),
        )


@dataclass(frozen=True, eq=False, slots=True)
class LdpGroupStats:
    """All usable cells of one group (ε > 0, index >= 0), sorted by (level, index).

    Attributes:
        level: ε of each cell (the exact value; reports are never regrouped across ε).
        index: index of each cell.
        count: rows of each cell.
        hi: high-limb sum of each cell.
        lo: low-limb sum of each cell.
        level_counts: (ε, rows) per level.
        skipped: rows with ε > 0 whose report was missing or malformed.
    """

    level: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    index: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    count: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hi: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lo: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    level_counts: tuple[tuple[float, int], ...] = ()
    skipped: int = 0

    @property
    def n(self) -> int:
        """Rows whose reports enter the estimate."""
        return sum(c for _, c in self.level_counts)

    def totals(self) -> FloatArray:
        """Sum of encoded reports per cell, hi 2**31 + lo, as floats."""
        out: FloatArray = self.hi.astype(np.float64) * float(1 << LIMB_BITS) + self.lo.astype(
            np.float64
        )
        return out

    def exact_totals(self) -> list[int]:
        """Sum of encoded reports per cell, exactly."""
        return [(int(h) << LIMB_BITS) + int(lo) for h, lo in zip(self.hi, self.lo, strict=True)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LdpGroupStats):
            return NotImplemented
        return (
            self.level_counts == other.level_counts
            and self.skipped == other.skipped
            and all(
                np.array_equal(getattr(self, a), getattr(other, a))
                for a in ("level", "index", "count", "hi", "lo")
            )
        )

    __hash__ = None  # type: ignore[assignment]


def empty_stats() -> LdpGroupStats:
    """The statistics of a group without rows."""
    return LdpGroupStats()


def _check_eps(eps_column: str, level: FloatArray, count: IntArray) -> None:
    invalid = np.isnan(level) | (level == INVALID_LEVEL) | np.isinf(level)
    bad = int(count[invalid].sum())
    if bad:
        msg = (
            f"Column `{eps_column}` must hold finite ε >= 0 for local-DP reports (not null, "
            f"NaN, negative or infinite); {bad} row(s) break this rule."
        )
        raise EpsilonColumnError(msg)
    tiny = int(count[(level > 0) & (level < LDP_EPS_MIN)].sum())
    if tiny:
        msg = (
            f"Column `{eps_column}` must hold ε = 0 or ε >= 2**-20; {tiny} row(s) have a "
            "smaller positive ε."
        )
        raise EpsilonColumnError(msg)


def _level_counts(
    level: FloatArray, index: IntArray, count: IntArray, kind: CountKind
) -> tuple[tuple[float, int], ...]:
    if kind == "coordinates":
        sel = index == 0
        return tuple((float(lv), int(c)) for lv, c in zip(level[sel], count[sel], strict=True))
    uniq, inverse = np.unique(level, return_inverse=True)
    sums = np.bincount(inverse, weights=count.astype(np.float64), minlength=uniq.size)
    return tuple((float(lv), round(s)) for lv, s in zip(uniq, sums, strict=True))


def build_ldp_groups(
    eps_column: str, cells: LdpCells, kind: CountKind
) -> dict[tuple[object, ...], LdpGroupStats]:
    """Assemble the engine's cells into per-group statistics.

    Args:
        eps_column: name of the ε column (for error messages).
        cells: the engine's raw cells.
        kind: ``"rows"`` when each row lands in one index (scalar means, frequency
            oracle: n_l is the sum over indices), ``"coordinates"`` when each row lands in
            every index 0..d-1 (vector means: n_l is the count at index 0).

    Raises:
        EpsilonColumnError: if any row carried an invalid ε (counts only, never values).
    """
    n = cells.key_code.shape[0]
    arrays = (cells.level, cells.index, cells.count, cells.hi, cells.lo)
    if any(a.shape != (n,) for a in arrays):
        msg = "LdpCells arrays must have one entry per cell"
        raise InternalError(msg)
    level = np.where(np.isnan(cells.level), INVALID_LEVEL, cells.level).astype(np.float64)
    _check_eps(eps_column, level, cells.count)
    usable_level = (level > 0) & np.isfinite(level)
    skipped = np.bincount(
        cells.key_code[usable_level & (cells.index < 0)],
        weights=cells.count[usable_level & (cells.index < 0)].astype(np.float64),
        minlength=len(cells.keys),
    )
    use = usable_level & (cells.index >= 0)
    code, lv, ix = cells.key_code[use], level[use], cells.index[use]
    cnt, hi, lo = cells.count[use], cells.hi[use], cells.lo[use]
    order = np.lexsort((ix, lv, code))
    code, lv, ix, cnt, hi, lo = code[order], lv[order], ix[order], cnt[order], hi[order], lo[order]
    starts = np.searchsorted(code, np.arange(len(cells.keys)), side="left")
    ends = np.searchsorted(code, np.arange(len(cells.keys)), side="right")
    out: dict[tuple[object, ...], LdpGroupStats] = {}
    for g, key in enumerate(cells.keys):
        a, b = int(starts[g]), int(ends[g])
        out[key] = LdpGroupStats(
            level=lv[a:b].copy(),
            index=ix[a:b].astype(np.int64),
            count=cnt[a:b].astype(np.int64),
            hi=hi[a:b].astype(np.int64),
            lo=lo[a:b].astype(np.int64),
            level_counts=_level_counts(lv[a:b], ix[a:b], cnt[a:b], kind),
            skipped=round(skipped[g]),
        )
    return out


def level_arrays(stats: LdpGroupStats) -> tuple[list[float], list[int]]:
    """(ε levels, row counts) of one group."""
    return [lv for lv, _ in stats.level_counts], [c for _, c in stats.level_counts]


def totals_by_index(stats: LdpGroupStats, width: int) -> dict[float, FloatArray]:
    """Per level, the totals of indices 0..width-1 (missing cells are 0)."""
    totals = stats.totals()
    out: dict[float, FloatArray] = {}
    for lv, _ in stats.level_counts:
        sel = (stats.level == lv) & (stats.index < width)
        row = np.zeros(width, dtype=np.float64)
        np.add.at(row, stats.index[sel], totals[sel])
        out[lv] = row
    return out
