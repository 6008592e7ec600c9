"""`group_stats` (one level-sorted group, the Column finalize's fast path) equals
`build_groups` on the same cells, with the same errors."""

from __future__ import annotations

import math

import pytest

from hdp_spark.core.levels import BELOW_GRID_LEVEL, INVALID_LEVEL
from hdp_spark.core.stats import MAX_CELL_ROWS, GroupStats, build_groups, group_stats
from hdp_spark.errors import EpsilonColumnError, SchemaError


def _reference(levels: list[float], counts: list[int], sums: list[int]) -> GroupStats:
    k = len(sums) // max(len(counts), 1)
    cells = (((), lv, c, sums[i * k:(i + 1) * k])
             for i, (lv, c) in enumerate(zip(levels, counts, strict=True)))
    return build_groups("eps", cells).get((), GroupStats(()))


@pytest.mark.parametrize(
    ("levels", "counts", "sums"),
    [
        ([], [], []),
        ([0.0, 0.5, 1.0, math.inf], [3, 1, 2, 5], [0, 7, -3, 2**40]),
        ([0.25, 2.0], [4, 6], [1, 2, 3, 4]),  # two value columns per cell
        ([2.0, 0.25], [6, 4], [3, 4, 1, 2]),  # unsorted cells take the general path
    ],
)
def test_group_stats_equals_build_groups(levels: list[float], counts: list[int],
                                         sums: list[int]) -> None:
    assert group_stats("eps", levels, counts, sums) == _reference(levels, counts, sums)


@pytest.mark.parametrize("code", [INVALID_LEVEL, BELOW_GRID_LEVEL, math.nan])
def test_group_stats_rejects_invalid_eps_like_build_groups(code: float) -> None:
    with pytest.raises(EpsilonColumnError, match="`eps`"):
        group_stats("eps", [code, 1.0], [2, 3], [0, 0])


def test_group_stats_rejects_overfull_cells() -> None:
    with pytest.raises(SchemaError, match="at most"):
        group_stats("eps", [1.0], [MAX_CELL_ROWS + 1], [0])
