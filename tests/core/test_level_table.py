"""`LevelTable` (the engines' columnar cells) is the `build_groups` mapping of the same
cells, with the same checks and errors; `select` gives the groups the finalize reads, and
the mean kernel's batch finalize gives the same results from it as from `GroupStats`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hdp_spark.core.kernels import MeanKernel
from hdp_spark.core.level_table import LevelGroups, LevelTable
from hdp_spark.core.levels import BELOW_GRID_LEVEL, INVALID_LEVEL
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.stats import MAX_CELL_ROWS, GroupStats, LevelRow, build_groups
from hdp_spark.errors import EpsilonColumnError, InternalError, SchemaError

KEYS = [("a",), ("b",), ("c",), ("d",)]
LEVELS = [0.0, 0.25, 0.5, 1.0, math.inf]


def _table(cells: list[tuple[int, float, int, tuple[int, ...]]], width: int) -> LevelTable:
    return LevelTable.from_cells(
        "eps", KEYS,
        np.array([c[0] for c in cells], dtype=np.int64),
        np.array([c[1] for c in cells], dtype=np.float64),
        np.array([c[2] for c in cells], dtype=np.int64),
        np.array([c[3] for c in cells], dtype=np.int64).reshape(len(cells), width))


def _reference(cells: list[tuple[int, float, int, tuple[int, ...]]]
               ) -> dict[tuple[object, ...], GroupStats]:
    """build_groups of the cells, several cells of one (group, level) merged first (what
    the engines did before LevelTable)."""
    merged: dict[tuple[int, float], tuple[int, list[int]]] = {}
    for g, level, count, totals in cells:
        c0, t0 = merged.get((g, level), (0, [0] * len(totals)))
        merged[(g, level)] = (c0 + count, [a + b for a, b in zip(t0, totals, strict=True)])
    return build_groups("eps", [(KEYS[g], lv, c, t) for (g, lv), (c, t) in merged.items()])


_CELL = st.tuples(st.integers(0, len(KEYS) - 1), st.sampled_from(LEVELS), st.integers(1, 50),
                  st.tuples(st.integers(-2**40, 2**40), st.integers(0, 2**40)))


@settings(max_examples=200, deadline=None)
@given(st.lists(_CELL, max_size=25))
def test_from_cells_is_the_build_groups_mapping(
        cells: list[tuple[int, float, int, tuple[int, ...]]]) -> None:
    table = _table(cells, 2)
    want = _reference(cells)
    assert table == want
    assert len(table) == len(want)
    assert set(table) == set(want)
    for key in KEYS:
        assert (key in table) == (key in want)
        assert table.get(key) == want.get(key)


@settings(max_examples=100, deadline=None)
@given(st.lists(_CELL, max_size=25), st.lists(st.sampled_from([*KEYS, ("z",)]), max_size=8))
def test_select_is_the_groups_of_the_order(
        cells: list[tuple[int, float, int, tuple[int, ...]]],
        order: list[tuple[object, ...]]) -> None:
    table = _table(cells, 2)
    groups = table.select(order)
    want = [table.get(k, GroupStats(())) for k in order]
    assert isinstance(groups, LevelGroups)
    assert len(groups) == len(order)
    assert list(groups) == want
    assert groups[:] == want
    if order:
        assert groups[-1] == want[-1]
    for slot in (0, 1):
        assert groups.totals(slot).tolist() == [r.totals[slot] for s in want for r in s.rows]


def test_a_counts_only_table_has_no_sums() -> None:
    table = _table([(1, 0.5, 3, ()), (1, 0.5, 2, ()), (0, 1.0, 1, ())], 0)
    assert dict(table) == {KEYS[1]: GroupStats((LevelRow(0.5, 5, ()),)),
                           KEYS[0]: GroupStats((LevelRow(1.0, 1, ()),))}
    assert list(table) == [KEYS[0], KEYS[1]]  # in the order of the group codes


def test_an_empty_table_selects_empty_groups() -> None:
    table = _table([], 1)
    assert len(table) == 0
    assert dict(table) == {}
    assert list(table.select([("a",), ("b",)])) == [GroupStats(()), GroupStats(())]
    with pytest.raises(KeyError):
        table[("a",)]
    with pytest.raises(IndexError):
        table.select([("a",)])[1]


@pytest.mark.parametrize("code", [INVALID_LEVEL, BELOW_GRID_LEVEL, math.nan])
def test_invalid_eps_raises_like_build_groups(code: float) -> None:
    with pytest.raises(EpsilonColumnError, match="`eps`"):
        _table([(0, code, 2, (0,)), (1, 1.0, 3, (0,))], 1)


def test_an_overfull_cell_raises_before_the_invalid_eps() -> None:
    with pytest.raises(SchemaError, match="at most"):
        _table([(0, INVALID_LEVEL, 2, (0,)), (1, 1.0, MAX_CELL_ROWS + 1, (0,))], 1)


def test_cells_that_merge_into_an_overfull_cell_raise() -> None:
    half = MAX_CELL_ROWS // 2 + 1
    with pytest.raises(SchemaError, match="at most"):
        _table([(0, 1.0, half, (2**62,)), (0, 1.0, half, (2**62,))], 1)


def test_a_table_refuses_inconsistent_columns() -> None:
    with pytest.raises(InternalError, match="offsets"):
        LevelTable((("a",),), np.array([0, 2], np.int64), np.zeros(1), np.ones(1, np.int64),
                   np.zeros((1, 1), np.int64))


@pytest.mark.parametrize("method", ["adpm", "hpm-a", "hpm-cp", "auto"])
def test_the_mean_batch_finalize_reads_the_columns_as_the_tables(method: str) -> None:
    rng = np.random.default_rng(7)
    cells = [(int(rng.integers(0, 4)), float(rng.choice(LEVELS[1:])), int(rng.integers(1, 40)),
              (int(rng.integers(0, 2**31)) * 3, int(rng.integers(0, 2**31)) * 5))
             for _ in range(40)]
    table = _table(cells, 2)
    order = [*KEYS, ("z",)]
    spec = MeanSpec("x", "eps", 0.0, 1.0, method=method)
    key = ReleaseKey.resolve(11)
    kernel = MeanKernel()
    columns = kernel.finalize_batch(spec, table.select(order), 1, key, tuple(order), "m")
    tables = kernel.finalize_batch(spec, [table.get(k, GroupStats(())) for k in order], 1, key,
                                   tuple(order), "m")
    assert repr(columns) == repr(tables)  # repr: tau is NaN for some methods (NaN != NaN)
