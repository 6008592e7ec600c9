"""The per-(group, ε level) cells of the mean on pandas, with numpy-only passes over rows.

One release reads every row a few times and never builds a new DataFrame:

* group codes: one integer per row (the row's position in the public key set, or an
  "excluded" code), from a lookup table for integer key columns, else from
  ``pd.factorize`` of the key columns with the public-key test applied to one
  representative row per distinct key (the same ``isin`` test the rows used to get);
* ε codes: one integer per row naming its distinct ε value, found through a small perfect
  hash of the ε values seen in a sample and verified on every row (``pd.factorize`` when
  the verification fails: NaN, continuous ε, more than 256 distinct values). The level
  rules (:func:`~hdp_spark.core.levels.levels_numpy`) are a function of ε, so they run on
  the distinct values only; cells of distinct ε values that share a level are merged
  after aggregation, as the Spark backend does;
* per spec, the fixed-point encoding of :func:`~hdp_spark.core.encoding.encode_numpy`,
  evaluated with the same IEEE operations in place (the same integers, kept in float64,
  where they are exact);
* ``np.bincount`` over the cell index (ε code × number of group codes + group code) for
  the counts and, weighted by the encoded values, for the sums. A float64 accumulation of
  integers is exact while every partial sum stays below 2**53: cells of at most 2**22
  rows (2**22 · 2**31 = 2**53) are summed in one pass, larger ones in chunks of 2**22
  rows whose exact sums are added as integers.

The result is the same table, bit for bit, as grouping the encoded rows with pandas (the
tests keep that implementation as the oracle).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.keys import normalize_key
from hdp_spark.core.level_table import LevelTable
from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.release import LevelPlan
from hdp_spark.core.stats import MAX_CELL_ROWS, check_cell_rows
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas._common import numeric_column

__all__ = ["mean_cells"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_HASH_MAX_DISTINCT = 256
"""Most distinct ε values the perfect hash handles (its table has at most 2·256² slots)."""

_SAMPLE = 1024
"""Rows sampled (evenly spaced, plus the first 64) to guess the distinct ε values."""

_EXACT_CELL_ROWS = 2**53 // FIXED_ONE
"""Largest cell whose float64 sum of encoded values (each <= 2**31) is exact in one pass."""

_MAX_DENSE_CELLS = 1 << 22
"""Above this many (group × distinct ε) cells, the cell index is compacted first."""

_MAX_SLOT_CELLS = 1 << 16
"""Hash slots serve as ε codes while (groups + 1) × slots stays within this many cells."""

_INT_KINDS = frozenset("iu")


def mean_cells(
    df: pd.DataFrame,
    plans: Sequence[LevelPlan],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[LevelTable]:
    """The per-(group, ε level) tables of each plan: row count and exact encoded sums.

    Args:
        df: the input table.
        plans: from :func:`~hdp_spark.core.release.plan_levels`; one table per plan.
        by: group-by columns (``()`` for a global release).
        keys: the public key set (normalized tuples); rows with other keys are left out.
            ``None`` groups by every key found (only for callers that need no privacy of
            the key set, such as tests).

    Returns:
        One table per plan (a ``{group key: GroupStats}`` mapping, as columns); groups
        without rows are absent.

    Raises:
        ParameterError: ``df`` is not a pandas DataFrame.
        SchemaError: a group, ε or value column is missing or not numeric, or a cell has
            more rows than its 64-bit sums can hold.
        EpsilonColumnError: a kept row has an invalid ε (null, NaN, negative, -inf, or
            below the grid).

    Privacy:
        The tables are pre-noise statistics, never published: the finalize step turns
        them into DP values. Every row enters one cell through its group and its ε level
        (public in this model); values enter only through their clamped encoding (each
        row moves a sum by at most one range, 2**31 units). Errors name columns and
        counts of invalid ε rows (ε is public), never values.
    """
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    for col in by:
        if col not in df.columns:
            msg = f"group column `{col}` is not in the table."
            raise SchemaError(msg)
    groups = _group_codes(df, by, keys)
    tables = []
    for plan in plans:
        eps = numeric_column(df, plan.eps, "ε")
        values = [numeric_column(df, spec.column, "value") for spec in plan.specs]
        cells_per_code = 1 if groups.codes is None else len(groups.keys) + 1
        eps_codes, levels = _level_codes(eps, plan.grid, _MAX_SLOT_CELLS // cells_per_code)
        tables.append(_plan_table(plan, groups, len(eps), eps_codes, levels, values))
    return tables


# -- groups --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Groups:
    """Per-row group codes: ``codes[i]`` in ``0..len(keys)``; ``len(keys)`` = left out."""

    codes: IntArray | None  # None: one group, every row in it
    keys: list[tuple[object, ...]]


def _group_codes(
    df: pd.DataFrame, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...] | None
) -> _Groups:
    if not by:
        return _Groups(None, [()])
    if keys is not None and len(by) == 1:
        fast = _integer_groups(df[by[0]], keys)
        if fast is not None:
            return fast
    return _factorized_groups(df, by, keys)


def _integer_groups(series: pd.Series, keys: tuple[tuple[object, ...], ...]) -> _Groups | None:
    """Group codes of an integer key column through a lookup table over its range.

    A row is kept when ``series.isin(key values)`` holds for its value: the test runs on
    the candidate values (the integral public keys inside the column's range), and no
    other value can equal a public key. ``None`` when the column is not a plain integer
    column or its range is too wide for a table.
    """
    dtype = series.dtype
    if not isinstance(dtype, np.dtype) or dtype.kind not in _INT_KINDS:
        return None
    if dtype.kind == "u" and dtype.itemsize > 4:  # uint64 does not fit int64 codes
        return None
    arr = series.to_numpy()
    n = len(arr)
    if n == 0:
        return None
    low, high = int(arr.min()), int(arr.max())
    span = high - low + 1
    if span > max(2 * n, 1 << 16):
        return None
    key_values = [k[0] for k in keys]
    candidates = sorted(
        {iv for iv in map(_integral, key_values) if iv is not None and low <= iv <= high}
    )
    cand = np.array(candidates, dtype=dtype)
    member = pd.Series(cand, dtype=dtype).isin(key_values).to_numpy()
    kept = cand[member]
    found: list[tuple[object, ...]] = [(normalize_key(v),) for v in kept]
    index = arr.astype(np.int64, copy=False)  # may be the column's memory: never written
    if low:
        index = index - low
    if len(kept) == span:  # every value in the range is a kept key: code = value - low
        return _Groups(index, found)
    table = np.full(span, len(kept), dtype=np.int64)
    table[kept.astype(np.int64) - low] = np.arange(len(kept), dtype=np.int64)
    return _Groups(table[index], found)


def _integral(value: object) -> int | None:
    """The integer a key equals, if any (``None`` for other keys: they equal no integer,
    so no row of an integer column)."""
    try:
        as_int = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    return as_int if as_int == value else None


def _factorized_groups(
    df: pd.DataFrame, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...] | None
) -> _Groups:
    """Group codes from ``pd.factorize`` of the key columns (nulls are a key of their own,
    as ``groupby(dropna=False)``); the public-key test runs once per distinct key."""
    columns = [df[c].to_numpy() for c in by]
    n = len(df)
    combined: IntArray = np.zeros(n, dtype=np.int64)
    size = 1
    for col in columns:
        codes, uniques = pd.factorize(col, use_na_sentinel=False)
        combined = combined * len(uniques) + codes.astype(np.int64)
        size *= max(len(uniques), 1)
        if size > 2**31:
            combined, compact = pd.factorize(combined)
            combined = combined.astype(np.int64)
            size = max(len(compact), 1)
    if len(by) > 1:
        combined, compact = pd.factorize(combined)
        combined = combined.astype(np.int64)
        size = len(compact)
    elif n:
        size = int(combined.max()) + 1
    else:
        size = 0
    representative = np.zeros(size, dtype=np.int64)
    representative[combined] = np.arange(n, dtype=np.int64)
    if keys is None:
        member = np.ones(size, dtype=bool)
    elif len(by) == 1:
        member = df[by[0]].take(representative).isin([k[0] for k in keys]).to_numpy()
    else:
        index = pd.MultiIndex.from_frame(df[list(by)].take(representative))
        member = np.asarray(index.isin(list(keys)))
    reps = pd.DataFrame({f"__by{i}": col[representative] for i, col in enumerate(columns)})
    found = [
        tuple(normalize_key(k) for k in row)
        for row, keep in zip(reps.itertuples(index=False, name=None), member, strict=True)
        if keep
    ]
    position = np.cumsum(member, dtype=np.int64) - 1
    table = np.where(member, position, len(found)).astype(np.int64)
    return _Groups(table[combined], found)


# -- ε levels ------------------------------------------------------------------------------


def _level_codes(
    eps: FloatArray, grid: EpsGrid | None, max_slots: int = 0
) -> tuple[IntArray | None, FloatArray]:
    """Per-row codes and the level of each code (``None``: every row has code 0).

    Several codes may share a level (they are merged after aggregation), and codes may
    have no rows (the empty slots of a hash table; see :func:`_hash_codes`). The level
    rules are elementwise, so the level of a distinct ε value is the level of every row
    holding it (-0.0 and 0.0, or two NaNs, share a level as well).
    """
    hashed = _hash_codes(eps, max_slots)
    if hashed is not None:
        codes, distinct = hashed
        return codes, levels_numpy(distinct, grid)
    if grid is not None:
        # continuous ε on a grid: the per-row rule yields few distinct levels
        per_row = levels_numpy(eps, grid)
        hashed = _hash_codes(per_row, max_slots)
        if hashed is not None:
            return hashed
        codes, distinct = _factorize(per_row)
        return codes, distinct
    codes, distinct = _factorize(eps)
    return codes, levels_numpy(distinct, None)


def _factorize(a: FloatArray) -> tuple[IntArray, FloatArray]:
    codes, uniques = pd.factorize(a, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=np.float64)


def _multipliers() -> list[np.uint64]:
    """Fixed odd 64-bit multipliers for the multiplicative hash (public constants)."""
    out = []
    state = 0x9E3779B97F4A7C15
    for _ in range(24):
        state = (state * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) % 2**64
        out.append(np.uint64(state | 1))
    return out


_MULTIPLIERS = _multipliers()


def _hash_codes(a: FloatArray, max_slots: int = 0) -> tuple[IntArray | None, FloatArray] | None:
    """Per-row codes of the distinct values of ``a`` and the value of each code, or
    ``None`` (use factorize). Codes are ``None`` when ``a`` holds one value (code 0).

    The distinct values are guessed from a sample, a collision-free multiplicative hash
    of their bit patterns is built, and every row is checked against the value in its
    slot; rows that miss add their values once. NaN never verifies (NaN ε is invalid and
    takes the general path). When the table has at most ``max_slots`` slots, the slot is
    the code (one pass less; empty slots hold NaN and no rows), else codes index the
    sorted distinct values.
    """
    n = len(a)
    if n == 0:
        return None
    step = max(1, n // _SAMPLE)
    sample = np.concatenate([a[:64], a[::step]])
    for _ in range(2):
        distinct = np.unique(sample)
        distinct = distinct[~np.isnan(distinct)]
        if not 0 < len(distinct) <= _HASH_MAX_DISTINCT:
            return None
        if len(distinct) == 1:
            same = a == distinct[0]
            if same.all():
                return None, distinct
            sample = np.concatenate([distinct, a[~same]])
            continue
        table = _perfect_hash(distinct)
        if table is None:
            return None
        multiplier, shift, slot_code, slot_value = table
        slots = np.multiply(a.view(np.uint64), multiplier)
        slots >>= shift
        index = slots.view(np.int64)
        hit = np.take(slot_value, index) == a
        if hit.all():
            if len(slot_value) <= max_slots:
                return index, slot_value
            return np.take(slot_code, index), distinct
        misses = a[~hit]
        if len(misses) > n // 8:
            return None
        sample = np.concatenate([distinct, misses])
    return None


def _perfect_hash(
    distinct: FloatArray,
) -> tuple[np.uint64, np.uint64, IntArray, FloatArray] | None:
    bits = distinct.view(np.uint64)
    width = 2 * max(1, math.ceil(math.log2(len(distinct)))) + 1
    shift = np.uint64(64 - width)
    for multiplier in _MULTIPLIERS:
        slots = (bits * multiplier) >> shift
        if len(np.unique(slots)) == len(distinct):
            index = slots.view(np.int64)
            slot_value = np.full(1 << width, np.nan)
            slot_value[index] = distinct
            slot_code = np.zeros(1 << width, dtype=np.int64)
            slot_code[index] = np.arange(len(distinct), dtype=np.int64)
            return multiplier, shift, slot_code, slot_value
    return None


# -- values and cells ----------------------------------------------------------------------


def _encode(values: FloatArray, spec: MeanSpec) -> FloatArray:
    """:func:`~hdp_spark.core.encoding.encode_numpy` with the same IEEE operations, in
    place on one new buffer, returned as float64 (integers <= 2**31, exact)."""
    lower, upper = spec.lower, spec.upper
    # clip = minimum(maximum(x, lower), upper), NaN stays NaN (set below)
    out: FloatArray = np.clip(values, lower, upper)
    missing = np.isnan(values)
    if missing.any():
        fill = np.minimum(np.maximum(np.float64(spec.fill_value), lower), upper)
        out[missing] = fill
    if float(lower) != 0.0:  # x - 0.0 is x, bit for bit (also for -0.0)
        out -= float(lower)
    out /= float(upper) - float(lower)
    out *= float(FIXED_ONE)
    out += 0.5
    np.floor(out, out=out)
    return out


def _exact_sums(
    cell: IntArray | None, weights: FloatArray, size: int, largest: int, present: IntArray
) -> list[int]:
    """Exact integer sums of ``weights`` (integers in [0, 2**31]) of the ``present`` cells
    (``cell`` None: one cell holding every row).

    A float64 sum of at most 2**22 such integers is exact (every partial sum is an integer
    <= 2**53); when a cell may hold more rows, the rows are summed in chunks of 2**22
    and the exact chunk sums are added as integers.
    """
    chunk = _EXACT_CELL_ROWS
    if cell is None:
        if largest <= chunk:
            return [int(weights.sum())]
        return [sum(int(weights[i : i + chunk].sum()) for i in range(0, len(weights), chunk))]
    if largest <= chunk:
        sums = np.bincount(cell, weights=weights, minlength=size)[present]
        return [int(x) for x in sums.tolist()]
    total = np.zeros(len(present), dtype=object)  # Python integers: no overflow
    for i in range(0, len(cell), chunk):
        part = np.bincount(cell[i : i + chunk], weights=weights[i : i + chunk], minlength=size)
        total += part[present].astype(np.int64).astype(object)
    return [int(x) for x in total.tolist()]


def _plan_table(
    plan: LevelPlan,
    groups: _Groups,
    rows: int,
    eps_codes: IntArray | None,
    levels: FloatArray,
    values: list[FloatArray],
) -> LevelTable:
    width = len(levels)
    if width == 0:  # no rows
        return LevelTable.from_cells(plan.eps, [], np.zeros(0, np.int64), levels,
                                     np.zeros(0, np.int64), np.zeros((0, len(values)), np.int64))
    cell: IntArray | None
    size = width if groups.codes is None else (len(groups.keys) + 1) * width
    if eps_codes is None:  # one ε value: the group code is the cell
        cell = groups.codes
    elif groups.codes is None:
        cell = eps_codes
    else:  # ε code major: eps_codes is this call's own array, so no new row buffer
        cell = eps_codes
        cell *= len(groups.keys) + 1
        cell += groups.codes
    ids: IntArray | None = None
    if cell is not None and size > _MAX_DENSE_CELLS:
        cell, ids = _factorize_cells(cell)
        size = len(ids)
    if cell is None:  # one cell
        counts: IntArray = np.array([rows], dtype=np.int64)
    else:
        counts = np.bincount(cell, minlength=size)
    present = np.flatnonzero(counts)
    largest = int(counts.max())
    sums = [
        _exact_sums(cell, _encode(v, s), size, largest, present)
        for v, s in zip(values, plan.specs, strict=True)
    ]
    cell_ids = present if ids is None else ids[present]
    if eps_codes is not None and groups.codes is not None:
        code_of, group_of = np.divmod(cell_ids, len(groups.keys) + 1)
    else:
        group_of = cell_ids // width
        code_of = cell_ids % width
    count_of = counts[present]
    # sums of cells with more rows than MAX_CELL_ROWS may not fit int64: Python integers
    # until the cells outside the key set are dropped (LevelTable refuses the others)
    totals = np.array(sums, dtype=np.int64 if largest <= MAX_CELL_ROWS else object).reshape(
        len(sums), len(count_of)).T
    if groups.codes is not None:  # drop the cells of rows outside the key set
        keep = group_of != len(groups.keys)
        group_of, code_of, count_of, totals = (
            group_of[keep], code_of[keep], count_of[keep], totals[keep])
    if len(count_of):
        check_cell_rows(int(count_of.max()))
    # distinct ε values of one level (cap, floor, grid, invalid) are merged there
    return LevelTable.from_cells(plan.eps, groups.keys, group_of, levels[code_of], count_of,
                                 totals)


def _factorize_cells(cell: IntArray) -> tuple[IntArray, IntArray]:
    codes, uniques = pd.factorize(cell)
    out: tuple[Any, Any] = (codes.astype(np.int64, copy=False), np.asarray(uniques, np.int64))
    return out
