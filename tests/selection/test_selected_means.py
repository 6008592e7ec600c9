"""The selected groups' means at once (core/selection/mechanism.py, ``selected_means``):
each result equals ``selected_mean``'s for the same group, statistics, selection and key
(the same context, stream and exact draw), whatever the selection, the aggregators' share,
the group key's shape or the statistics; the pipeline's and the kernels' batch paths return
the same."""

from __future__ import annotations

import datetime
import math
import random

import pytest

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import GroupCells, NoiseContext
from hdp_spark.core.selection import select_keys
from hdp_spark.core.selection.kernels import SelectedHistogramKernel, SelectedMeanKernel
from hdp_spark.core.selection.mechanism import Selected, selected_mean, selected_means
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import InternalError

SELECTIONS = [
    select_keys(delta=1e-7, c=1.0, share=0.4),
    select_keys(delta=0.05, c=1.0, share=0.5, step=0.25, neighbours="add_remove"),
    select_keys(delta=1e-6, c=2.0, share=0.3, step=0.01),
]
_SHAPES = (
    lambda i: (i, f"g{i}"),
    lambda i: (i,),
    lambda i: (f"k{i}é",),
    lambda i: (datetime.date(2024, 1, 1 + i % 28),),
    lambda i: (i / 8,),
)


def _stats(r: random.Random) -> GroupStats:
    levels = sorted(r.sample([0.0, 0.01, 0.3, 1.0, 1.7, 5.0, math.inf], r.randint(1, 4)))
    rows = []
    for lv in levels:
        n = r.choice([1, 2, 50, 10_000])
        rows.append(LevelRow(lv, n, (r.randint(0, n * FIXED_ONE), r.randint(0, n))))
    return GroupStats(tuple(rows))


@pytest.mark.parametrize("at", range(len(SELECTIONS)))
@pytest.mark.parametrize("shape", range(len(_SHAPES)))
def test_selected_means_equal_selected_mean(at: int, shape: int) -> None:
    selection = SELECTIONS[at]
    r = random.Random(at * 10 + shape)
    key = ReleaseKey.from_unsafe_seed(f"means-{at}")
    spec = MeanSpec("x", "eps", -3.0, 12.5, beta=r.choice([0.05, 0.2]))
    size = 300
    stats = [_stats(r) for _ in range(size)]
    groups = [_SHAPES[shape](i) for i in range(size)]
    # several shares in one batch (a Column's rows may differ in their aggregator count)
    picked = [Selected(selection, selection.threshold + r.randrange(0, 10**6),
                       r.choice([1, 1, 2, 3])) for _ in range(size)]
    for slot in (0, 1):
        got = selected_means(spec, stats, slot, key, groups, "lab", picked)
        want = [selected_mean(spec, s, slot, key, g, "lab", p)
                for s, g, p in zip(stats, groups, picked, strict=True)]
        assert got == want
    assert len({m.numerator for m in got}) > size // 2  # noisy, distinct statistics


def test_equal_statistics_in_two_groups_get_unrelated_noise() -> None:
    selection = SELECTIONS[0]
    key = ReleaseKey.from_unsafe_seed("twins")
    spec = MeanSpec("x", "eps", 0.0, 1.0)
    one = GroupStats((LevelRow(1.0, 100, (40 * FIXED_ONE, 0)),))
    picked = Selected(selection, selection.threshold + 90, 1)
    a, b = selected_means(spec, [one, one], 0, key, [("a",), ("b",)], "lab", [picked] * 2)
    assert a.numerator != b.numerator


def test_the_kernels_batches_equal_their_per_group_finalize() -> None:
    selection = SELECTIONS[2]
    key = ReleaseKey.from_unsafe_seed("kernels")
    r = random.Random(3)
    stats = [_stats(r) for _ in range(40)]
    groups = [(i,) for i in range(40)]
    picked = [Selected(selection, selection.threshold + i, 2) for i in range(40)]
    mean = MeanSpec("x", "eps", 0.0, 1.0)
    hist_stats = [GroupStats(tuple(LevelRow(row.level, row.count, (row.count, 0, 0))
                                   for row in s.rows)) for s in stats]
    hist = HistogramSpec("c", "eps", ("a", "b"))
    for kernel, spec, tables in ((SelectedMeanKernel(), mean, stats),
                                 (SelectedHistogramKernel(), hist, hist_stats)):
        got = kernel.finalize_selected_batch(spec, tables, 0, key, groups, "lab", picked)
        want = [kernel.finalize_selected(spec, GroupCells(t, 0), NoiseContext(key, g, "lab"),
                                         p)
                for t, g, p in zip(tables, groups, picked, strict=True)]
        assert list(got) == want


def test_the_inputs_must_agree_in_size() -> None:
    key = ReleaseKey.from_unsafe_seed("size")
    spec = MeanSpec("x", "eps", 0.0, 1.0)
    assert selected_means(spec, [], 0, key, [], "lab", []) == []
    with pytest.raises(InternalError, match="one group key and one selection per group"):
        selected_means(spec, [GroupStats(())], 0, key, [], "lab", [])


_HISTOGRAMS = [
    HistogramSpec("c", "eps", ("a", "b", "c")),
    HistogramSpec("c", "eps", (4, 9), other=None),
    HistogramSpec("c", "eps", tuple(f"l{j}" for j in range(60)), other="l3"),
]


@pytest.mark.parametrize("at", range(len(SELECTIONS)))
@pytest.mark.parametrize("which", range(len(_HISTOGRAMS)))
def test_selected_histograms_equal_selected_histogram(at: int, which: int) -> None:
    """Each group's bins come from its one stream in order: the batch equals the
    per-group draws bin for bin (mixed shares, several key shapes, empty groups)."""
    from hdp_spark.core.selection.mechanism import selected_histogram, selected_histograms

    selection, spec = SELECTIONS[at], _HISTOGRAMS[which]
    r = random.Random(at * 7 + which)
    key = ReleaseKey.from_unsafe_seed(f"hists-{at}-{which}")
    width = len(spec.categories) + 1
    stats = []
    for g in range(120):
        levels = sorted(r.sample([0.0, 0.3, 1.0, 1.7, math.inf], r.randint(0, 3)))
        rows = []
        for lv in levels:
            totals = tuple(r.choice([0, 1, 5, 400]) for _ in range(width))
            if sum(totals):
                rows.append(LevelRow(lv, sum(totals), totals))
        stats.append(GroupStats(tuple(rows)) if g % 17 else GroupStats(()))
    groups = [_SHAPES[g % len(_SHAPES)](g) for g in range(len(stats))]
    picked = [Selected(selection, selection.threshold + r.randrange(0, 10**5),
                       r.choice([1, 2, 3])) for _ in stats]
    got = selected_histograms(spec, stats, key, groups, "lab", picked)
    want = [selected_histogram(spec, s, key, g, "lab", p)
            for s, g, p in zip(stats, groups, picked, strict=True)]
    assert got == want
    assert len({h.counts for h in got}) > len(got) // 2
    with pytest.raises(InternalError, match="one group key and one selection per group"):
        selected_histograms(spec, stats, key, groups[:-1], "lab", picked)
