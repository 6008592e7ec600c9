"""The histogram's batch finalize equals the per-group finalize bit for bit (issue 31).

:func:`finalize_histogram` is the reference: for random batches of groups (every method,
one level, all public, ε = 0 rows, fallbacks, empty groups, each ``other`` rule, string and
integer labels, several key shapes), :func:`finalize_histograms` must return the same
results, every exact value equal and every float equal by its bits.
"""

from __future__ import annotations

import datetime
import math
from fractions import Fraction
from typing import Any

import pytest
from bit_equality import same_bits
from hypothesis import given, settings
from hypothesis import strategies as st

from hdp_spark.core.histogram.auto import resolve_histograms
from hdp_spark.core.histogram.batch import finalize_histograms
from hdp_spark.core.histogram.finalize import HistogramResult, finalize_histogram
from hdp_spark.core.histogram.spec import HISTOGRAM_METHODS, HistogramSpec, histogram_weights
from hdp_spark.core.kernels import HistogramKernel
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import GroupCells, NoiseContext
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import InternalError

_LEVELS = (0.0, 1e-100, 1e-7, 0.01, 0.1, 0.5, 1.0, 2.0, 7.5, 100.0, 1e100, math.inf)
_COUNTS = (0, 1, 2, 7, 100, 5000, 2**32 - 1)
_KEY = ReleaseKey(bytes(range(32)), unsafe=True)
_KEY_SHAPES = (
    lambda g: (g, "k", 0.5),
    lambda g: (g,),
    lambda g: (f"k{g}é",),
    lambda g: (datetime.date(2024, 1, 1 + g % 28),),
    lambda g: (),
)
_SPECS = {
    "str, other appended": lambda m: HistogramSpec("c", "eps", ("a", "b", "c"), method=m),
    "str, other in the domain": lambda m: HistogramSpec("c", "eps", ("a", "b"), method=m,
                                                        other="b"),
    "int, no other bin": lambda m: HistogramSpec("c", "eps", (3, -1, 7, 9), method=m,
                                                 other=None),
    "one category": lambda m: HistogramSpec("c", "eps", ("only",), method=m),
}


@st.composite
def _group(draw: st.DrawFn, width: int) -> GroupStats:
    levels = sorted(draw(st.sets(st.sampled_from(_LEVELS), max_size=5)))
    rows = []
    for level in levels:
        counts = tuple(draw(st.sampled_from(_COUNTS)) for _ in range(width))
        if sum(counts):
            rows.append(LevelRow(level, sum(counts), counts))
    return GroupStats(tuple(rows))


def _reference(specs: list[HistogramSpec], stats: list[GroupStats],
               groups: list[tuple[object, ...]]) -> list[HistogramResult]:
    return [finalize_histogram(s, t, _KEY, k, None)
            for s, t, k in zip(specs, stats, groups, strict=True)]


def _check(spec: HistogramSpec, stats: list[GroupStats], shape: int) -> None:
    groups = [_KEY_SHAPES[shape](g) for g in range(len(stats))]
    specs = resolve_histograms(spec, stats)
    want = _reference(specs, stats, groups)
    weights = [histogram_weights(s, t.levels, t.counts) if t.n else None
               for s, t in zip(specs, stats, strict=True)]
    for got in (finalize_histograms(specs, stats, _KEY, groups),
                finalize_histograms(specs, stats, _KEY, groups, weights),
                HistogramKernel().finalize_batch(spec, stats, 0, _KEY, tuple(groups), "x")):
        assert len(got) == len(want)
        for w, g in zip(want, got, strict=True):
            assert same_bits(w, g), (w, g)


@given(data=st.data(), method=st.sampled_from(HISTOGRAM_METHODS),
       layout=st.sampled_from(sorted(_SPECS)), shape=st.integers(0, len(_KEY_SHAPES) - 1))
@settings(max_examples=120, deadline=None)
def test_batch_equals_the_per_group_finalize(data: st.DataObject, method: str, layout: str,
                                             shape: int) -> None:
    spec = _SPECS[layout](method)
    width = len(spec.categories) + 1
    stats = data.draw(st.lists(_group(width), max_size=10))
    _check(spec, stats, shape)


def _rows(width: int, *cells: tuple[float, int]) -> GroupStats:
    return GroupStats(tuple(LevelRow(lv, c * width, (c,) * width) for lv, c in cells))


_EDGES = {
    "empty": (),
    "one level": ((0.5, 10),),
    "all public": ((math.inf, 10),),
    "public and eps 0": ((0.0, 4), (math.inf, 3)),
    "eps 0 only": ((0.0, 5),),
    "eps 0 and private": ((0.0, 5), (1.0, 20)),
    "wide range": ((1e-100, 3), (1.0, 5), (1e100, 2), (math.inf, 1)),
    "one row": ((2.0, 1),),
}


@pytest.mark.parametrize("method", HISTOGRAM_METHODS)
def test_edge_cases_in_one_batch_and_alone(method: str) -> None:
    spec = HistogramSpec("c", "eps", ("a", "b", "c"), method=method)  # type: ignore[arg-type]
    stats = [_rows(4, *cells) for cells in _EDGES.values()]
    _check(spec, stats, 1)
    for one in stats:
        _check(spec, [one], 0)
        cells, noise = GroupCells(one, 0), NoiseContext(_KEY, (1,), "x")
        alone = HistogramKernel().finalize(spec, cells, noise)
        (want,) = _reference(resolve_histograms(spec, [one]), [one], [(1,)])
        assert same_bits(alone, want)


def test_every_bin_of_every_group_has_its_own_noise() -> None:
    """Equal statistics in two groups (or two bins) never give equal noise: each bin's
    stream is bound to its group key and its index."""
    spec = HistogramSpec("c", "eps", ("a", "b", "c", "d"), other=None)
    one = _rows(5, (0.5, 40), (1.0, 40))
    out = finalize_histograms([spec] * 2, [one, one], _KEY, [(1,), (2,)])
    first, second = out[0].noisy, out[1].noisy
    assert first != second
    assert len(set(first)) == len(first)


def test_a_plan_that_breaks_its_bound_releases_nothing(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The exact per-level check runs in the batch: a grid coarser than the bound allows
    raises before any result is returned."""
    import hdp_spark.core.histogram.batch as batch
    from hdp_spark.core.noise.exact import laplace_noise

    spec = HistogramSpec("c", "eps", ("a", "b"))
    stats = [_rows(3, (0.5, 10), (1.0, 3))]
    real = batch.plan_histogram

    def coarse(*args: Any) -> Any:
        plan = real(*args)
        noise = laplace_noise(plan.noise.scale, Fraction(2) ** 40)
        return type(plan)(plan.n, plan.weights, plan.levels, plan.min_sensitivity, noise,
                          plan.bias_bound, plan.noise_scale, plan.half_width)

    monkeypatch.setattr(batch, "plan_histogram", coarse)
    with pytest.raises(InternalError, match="does not match its privacy analysis"):
        finalize_histograms([spec], stats, _KEY, [()])


def test_the_inputs_must_agree_in_size() -> None:
    spec = HistogramSpec("c", "eps", ("a",))
    with pytest.raises(InternalError, match="one spec, group key and weights entry"):
        finalize_histograms([spec], [GroupStats(())], _KEY, [(), ()])


@pytest.mark.parametrize("method", ["hpf-a", "auto", "k-rappor-c"])
def test_the_release_of_public_keys_equals_the_per_group_finalize(method: str) -> None:
    from hdp_spark.core.histogram.release import finalize_histogram_release

    spec = HistogramSpec("c", "eps", ("a", "b"), method=method)  # type: ignore[arg-type]
    table = {("x",): _rows(3, (0.5, 10), (1.0, 3)), ("y",): _rows(3, (2.0, 4), (1.0, 3)),
             ("z",): _rows(3, (0.5, 10), (1.0, 3))}
    keys = (("y",), ("w",), ("x",), ("z",))  # "w": an empty public key
    release = finalize_histogram_release(spec, table, ("g",), keys, _KEY)
    stats = [table.get(k, GroupStats(())) for k in keys]
    want = _reference(resolve_histograms(spec, stats), stats, list(keys))
    assert release.keys == keys
    for k, w in zip(keys, want, strict=True):
        assert same_bits(release.results[k], w)


def test_the_drawn_scale_is_read_back_from_the_checked_plan() -> None:
    """(e, T) come from the plan's own noise (what is checked is what is drawn); a grid
    that is not a power of two, or a scale off the grid, is refused."""
    from hdp_spark.core.histogram.batch import _grid_of

    assert _grid_of(Fraction(3, 8), Fraction(1, 8)) == (-3, 3)
    assert _grid_of(Fraction(12), Fraction(4)) == (2, 3)
    assert _grid_of(Fraction(5), Fraction(1)) == (0, 5)
    with pytest.raises(InternalError, match="not a power of two"):
        _grid_of(Fraction(6), Fraction(3))
    with pytest.raises(InternalError, match="not a power of two"):
        _grid_of(Fraction(6), Fraction(3, 2))
    with pytest.raises(InternalError, match="whole number of grid steps"):
        _grid_of(Fraction(5, 16), Fraction(1, 8))
    with pytest.raises(InternalError, match="whole number of grid steps"):
        _grid_of(Fraction(0), Fraction(1, 8))


def test_a_noiseless_plan_with_a_private_weight_is_refused(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    import hdp_spark.core.histogram.batch as batch
    from hdp_spark.core.mean.weights import Weights

    spec = HistogramSpec("c", "eps", ("a", "b"))
    real = batch.plan_histogram

    def zero_eta(*args: Any) -> Any:
        plan = real(*args)
        w = plan.weights
        return type(plan)(plan.n, Weights(w.numerators, w.denominator, Fraction(0), w.tau),
                          plan.levels, plan.min_sensitivity, plan.noise, plan.bias_bound,
                          plan.noise_scale, plan.half_width)

    monkeypatch.setattr(batch, "plan_histogram", zero_eta)
    with pytest.raises(InternalError, match="noise scale is 0"):
        finalize_histograms([spec], [_rows(3, (0.5, 10))], _KEY, [()])


def test_bin_sums_refuse_counts_of_another_width() -> None:
    from hdp_spark.core.histogram.finalize import bin_sums

    assert bin_sums([2, 3], [[1, 0], [4, 5]], 2) == [14, 15]
    assert bin_sums([], [], 3) == [0, 0, 0]
    with pytest.raises(InternalError, match="k counts per level"):
        bin_sums([2, 3], [[1, 0], [4]], 2)
    with pytest.raises(InternalError, match="one weight per level"):
        bin_sums([2], [[1, 0], [4, 5]], 2)


def test_groups_sharing_an_eps_histogram_share_its_plan_not_their_noise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan and its checks run once per distinct ε histogram of a batch; groups that
    share one still get their own statistics, contexts and draws, and -0.0 and 0.0 levels
    stay apart (their released level records differ in the sign of zero)."""
    spec = HistogramSpec("c", "eps", ("a", "b"))
    one = GroupStats((LevelRow(0.5, 6, (1, 2, 3)), LevelRow(1.0, 3, (3, 0, 0))))
    other_counts = GroupStats((LevelRow(0.5, 6, (3, 3, 0)), LevelRow(1.0, 3, (0, 0, 3))))
    minus = GroupStats((LevelRow(-0.0, 2, (1, 1, 0)), LevelRow(1.0, 3, (3, 0, 0))))
    plus = GroupStats((LevelRow(0.0, 2, (1, 1, 0)), LevelRow(1.0, 3, (3, 0, 0))))
    stats = [one, other_counts, one, minus, plus, minus]
    groups = [(g,) for g in range(len(stats))]
    from hdp_spark.core.histogram import finalize as finalize_module

    solved: list[tuple[float, ...]] = []
    real = finalize_module.histogram_weights

    def spy(s: HistogramSpec, v: Any, m: Any) -> Any:
        solved.append(tuple(v))
        return real(s, v, m)

    monkeypatch.setattr(finalize_module, "histogram_weights", spy)
    got = finalize_histograms([spec] * len(stats), stats, _KEY, groups)
    # weights once per distinct ε histogram: one and other_counts share theirs (the same
    # levels and rows per level, other categories), then minus and plus
    assert len(solved) == 3
    want = _reference([spec] * len(stats), stats, groups)
    for w, g in zip(want, got, strict=True):
        assert same_bits(w, g), (w, g)
    assert got[0].noisy != got[2].noisy  # the same table in two groups: other noise
    assert math.copysign(1.0, got[3].levels[0].eps) == -1.0
    assert math.copysign(1.0, got[4].levels[0].eps) == 1.0
