"""The selection's decisions for many candidates at once (core/selection/mechanism.py,
``select_many``): each equals ``select_one``'s for the same group, weight and key (the same
stream, the scalar sampler's draw), inadmissible keys are never selected, and the batch
path of ``select_groups`` releases what the per-group decisions release."""

from __future__ import annotations

import random

import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.selection import select_keys
from hdp_spark.core.selection.mechanism import (
    group_weight,
    select_groups,
    select_many,
    select_one,
)
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import InternalError

SELECTIONS = [
    select_keys(delta=1e-7, c=1.0, share=0.4),
    select_keys(delta=0.05, c=1.0, share=0.5, step=0.25, neighbours="add_remove"),
    select_keys(delta=1e-6, c=2.0, share=0.3, step=0.01),
]


@pytest.mark.parametrize("at", range(len(SELECTIONS)))
def test_select_many_equals_select_one(at: int) -> None:
    selection = SELECTIONS[at]
    r = random.Random(at)
    key = ReleaseKey.from_unsafe_seed(f"sel-{at}")
    groups: list[tuple[object, ...]] = [(i, f"g{i}") for i in range(3_000)]
    groups[5], groups[9], groups[11] = (None, "a"), (float("nan"),), ()
    threshold = selection.threshold
    weights = [r.choice([0, 1, threshold - 3, threshold, threshold + 2, 10 * threshold])
               + r.randrange(0, 5) for _ in groups]
    got = select_many(selection, weights, key, groups)
    assert got == [select_one(selection, w, key, g)
                   for w, g in zip(weights, groups, strict=True)]
    assert got[5] is None
    assert got[9] is None
    assert any(x is not None for x in got)
    assert any(x is None for x in got[12:])
    assert select_many(selection, [], key, []) == []
    with pytest.raises(InternalError, match="one weight per group"):
        select_many(selection, [1], key, [])


def test_select_groups_releases_the_per_group_decisions() -> None:
    selection = SELECTIONS[1]
    key = ReleaseKey.from_unsafe_seed("groups")
    r = random.Random(7)
    table = {(f"k{i}",): GroupStats(tuple(
        LevelRow(lv, r.randrange(1, 40), (0,)) for lv in sorted(r.sample([0.5, 1.0, 2.0], 2))))
        for i in range(500)}
    picked = select_groups(selection, table, key, 1)
    want = {}
    for group, stats in table.items():
        noisy = select_one(selection, group_weight(selection, [x.level for x in stats.rows],
                                                   [x.count for x in stats.rows]), key, group)
        if noisy is not None:
            want[group] = noisy
    assert list(picked) == sorted(want)
    assert {g: s.weight for g, s in picked.items()} == want
    assert 0 < len(picked) < len(table)
