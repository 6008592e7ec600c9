"""The batch finalize of the mean equals the scalar finalize bit for bit (issue 31).

The scalar :func:`finalize_mean` is the reference: for random batches of groups (one
level, all public, ε = 0 rows, fallbacks, empty groups, a single group, every method),
:func:`finalize_mean_columns` (as records) must return the same results, every float compared by its
bits (``==`` on floats, plus NaN where the reference has NaN).
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np
import pytest
from bit_equality import same_bits
from hypothesis import given, settings
from hypothesis import strategies as st

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.mean.batch import MeanCells, finalize_mean_columns
from hdp_spark.core.mean.batch_weights import (
    SOLVER_METHODS,
    VECTOR_METHODS,
    adpm_fallback,
    batch_phi,
)
from hdp_spark.core.mean.finalize import (
    finalize_mean,
    mean_weights,
    plan_mean,
)
from hdp_spark.core.mean.spec import MEAN_METHODS, MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import InternalError

_LEVELS = (0.0, 1e-100, 1e-7, 0.01, 0.05, 0.1, 0.3, 0.5, 1.0, 1.5, 2.0, 7.5, 100.0,
           1e100, math.inf)
_COUNTS = (1, 2, 3, 7, 100, 5000, 2**32 - 1)



def finalize_mean_batch(spec: Any, cells: MeanCells, value_index: int, key: Any,
                        groups: Any, label: str) -> list[Any]:
    """The batch finalize as records (what the release API's kernel returns)."""
    return finalize_mean_columns(spec, cells, value_index, key, groups, label).results()

@st.composite
def _group(draw: st.DrawFn) -> GroupStats:
    levels = sorted(draw(st.sets(st.sampled_from(_LEVELS), max_size=6)))
    rows = []
    for level in levels:
        count = draw(st.sampled_from(_COUNTS))
        total = draw(st.integers(0, count * FIXED_ONE))
        rows.append(LevelRow(level, count, (total, count * FIXED_ONE - total)))
    return GroupStats(tuple(rows))


_KEY_SHAPES = (  # the group keys' encodings: general tuples and the one-column fast paths
    lambda g: (g, "k", 0.5),
    lambda g: (g,),
    lambda g: (f"k{g}é",),
    lambda g: (g / 4,),
    lambda g: (datetime.date(2024, 1, 1 + g % 28),),
    lambda g: (bool(g % 2),),
)


def _check(spec: MeanSpec, stats: list[GroupStats], slot: int, shape: int = 0) -> None:
    key = ReleaseKey(bytes(range(32)), unsafe=True)
    groups = [_KEY_SHAPES[shape](g) for g in range(len(stats))]
    want = [finalize_mean(spec, s, slot, key, k, "lab") for s, k in zip(stats, groups,
                                                                           strict=True)]
    got = finalize_mean_batch(spec, MeanCells.from_stats(stats, slot), slot, key, groups,
                              "lab")
    assert len(got) == len(want)
    for w, g in zip(want, got, strict=True):
        assert same_bits(w, g), (w, g)


@given(stats=st.lists(_group(), max_size=12), method=st.sampled_from(MEAN_METHODS),
       slot=st.sampled_from((0, 1)), clip=st.sampled_from((None, True, False)))
@settings(max_examples=120, deadline=None)
def test_batch_equals_scalar(stats: list[GroupStats], method: str, slot: int,
                             clip: bool | None) -> None:
    spec = MeanSpec("x", "eps", -2.0, 3.5, method=method, clip_output=clip)  # type: ignore[arg-type]
    _check(spec, stats, slot)


@given(stats=st.lists(_group(), min_size=1, max_size=30),
       method=st.sampled_from(sorted(VECTOR_METHODS)),
       shape=st.integers(0, len(_KEY_SHAPES) - 1))
@settings(max_examples=150, deadline=None)
def test_vectorized_methods_equal_scalar(stats: list[GroupStats], method: str,
                                         shape: int) -> None:
    _check(MeanSpec("x", "eps", 0.0, 1.0, method=method), stats, 0,  # type: ignore[arg-type]
           shape)


def _rows(*cells: tuple[float, int]) -> GroupStats:
    return GroupStats(tuple(LevelRow(lv, c, (c * FIXED_ONE // 3, 0)) for lv, c in cells))


_EDGES = {
    "empty": _rows(),
    "one level": _rows((0.5, 10)),
    "all public": _rows((math.inf, 10)),
    "public and eps 0": _rows((0.0, 4), (math.inf, 3)),
    "eps 0 only": _rows((0.0, 5)),
    "eps 0 and private": _rows((0.0, 5), (1.0, 20)),
    "adpm fallback": _rows((0.01, 2), (0.02, 1)),
    "wide range": _rows((1e-100, 3), (1.0, 5), (1e100, 2), (math.inf, 1)),
    "one row": _rows((2.0, 1)),
}


@pytest.mark.parametrize("method", MEAN_METHODS)
def test_edge_cases_one_batch_and_alone(method: str) -> None:
    spec = MeanSpec("x", "eps", 1.0, 9.0, method=method)  # type: ignore[arg-type]
    _check(spec, list(_EDGES.values()), 0)
    for stats in _EDGES.values():
        _check(spec, [stats], 1)  # a single group


def test_empty_batch_and_adpm_fallback_is_hit() -> None:
    spec = MeanSpec("x", "eps", 0.0, 1.0)
    _check(spec, [], 0)
    key = ReleaseKey(bytes(32), unsafe=True)
    out = finalize_mean_batch(spec, MeanCells.from_stats([_EDGES["adpm fallback"]], 0), 0,
                              key, [()], "m")
    assert out[0].fallback  # the edge case exercises the ADPM fallback branch


def test_size_mismatch_is_an_internal_error() -> None:
    cells = MeanCells(np.array([0, 1], np.int64), np.array([1.0]), np.array([3], np.int64),
                      np.array([5], np.int64))
    with pytest.raises(InternalError):
        finalize_mean_batch(MeanSpec("x", "eps", 0.0, 1.0), cells, 0,
                            ReleaseKey(bytes(32), unsafe=True), [(), ()], "m")


def test_noise_is_per_group() -> None:
    """Two groups with identical statistics get independent noise (their own streams)."""
    stats = [_rows((0.5, 100), (1.0, 50))] * 2
    out = finalize_mean_batch(MeanSpec("x", "eps", 0.0, 1.0), MeanCells.from_stats(stats, 0),
                              0, ReleaseKey(bytes(32), unsafe=True), [("a",), ("b",)], "m")
    assert out[0].estimate != out[1].estimate


def test_inconsistent_cells_are_an_internal_error() -> None:
    with pytest.raises(InternalError):
        MeanCells(np.array([0, 2], np.int64), np.array([1.0]), np.array([3], np.int64),
                  np.array([5], np.int64))
    with pytest.raises(InternalError):
        MeanCells(np.array([1, 1], np.int64), np.array([1.0]), np.array([3], np.int64),
                  np.array([5], np.int64))


@pytest.mark.parametrize("method", sorted(VECTOR_METHODS))
def test_groups_left_to_the_scalar_path_keep_their_place(method: str) -> None:
    """Two cells of one level tie η's float ratio without φ = ε (uniform, hpm-a): such a
    group is finalized by the scalar path, between vectorized ones, in order."""
    twice = GroupStats((LevelRow(0.5, 3, (2**31, 0)), LevelRow(0.5, 4, (2**30, 0)),
                        LevelRow(2.0, 9, (5 * 2**31, 0))))
    stats = [_EDGES["one level"], twice, _EDGES["wide range"], twice]
    _check(MeanSpec("x", "eps", 0.0, 4.0, method=method), stats, 0)  # type: ignore[arg-type]


def test_auto_batch_with_mixed_choices_equals_scalar() -> None:
    """``method="auto"``: groups of one batch choose different methods (closed-form ones
    and a solver's); the batch runs each method's subset and reassembles them in order,
    bit for bit the scalar finalize."""
    rng = np.random.default_rng(35)
    stats = list(_EDGES.values())
    for _ in range(60):
        levels = sorted({float(x) for x in np.exp(rng.uniform(-6, 5, int(rng.integers(1, 7))))})
        rows = []
        for lv in levels:
            c = int(rng.choice([1, 3, 40, 700]))
            rows.append(LevelRow(lv, c, (int(rng.integers(0, c * FIXED_ONE + 1)), 0)))
        stats.append(GroupStats(tuple(rows)))
    spec = MeanSpec("x", "eps", -2.0, 3.5, method="auto")
    _check(spec, stats, 0)
    out = finalize_mean_batch(spec, MeanCells.from_stats(stats, 0), 0,
                              ReleaseKey(bytes(32), unsafe=True),
                              [(g,) for g in range(len(stats))], "m")
    chosen = {r.method for r in out}
    assert len(chosen) >= 3
    assert "auto" not in chosen
    assert chosen & SOLVER_METHODS  # a solver's φ per ε histogram, and closed forms
    assert chosen - SOLVER_METHODS


@given(stats=st.lists(_group(), min_size=1, max_size=40))
@settings(max_examples=150, deadline=None)
def test_adpm_fallback_settled_from_floats_is_the_exact_test(stats: list[GroupStats]) -> None:
    """Where the float estimate settles ADPM's fallback test, it is the exact test's answer
    (plan_mean's: ||w||²/4 + 2η² > 1/4 from the exact weights)."""
    cells = MeanCells.from_stats(stats, 0)
    table = batch_phi("adpm", cells.offsets, cells.levels, cells.counts)
    fallback, settled = adpm_fallback(table, cells.offsets, cells.levels, cells.counts)
    spec = MeanSpec("x", "eps", 0.0, 1.0, method="adpm")
    for g, s in enumerate(stats):
        v, m = [r.level for r in s.rows], [r.count for r in s.rows]
        if not sum(m) or mean_weights(spec, v, m).trivial:
            assert not settled[g]  # no weight: left to the exact path, which skips the test
            continue
        if settled[g]:
            w = mean_weights(spec, v, m)
            nums, den = w.numerators, w.denominator
            l2 = sum(c * p * p for c, p in zip(m, nums, strict=True)) / (den * den)
            eta = w.eta.numerator / w.eta.denominator
            assert bool(fallback[g]) == (l2 / 4 + 2 * eta**2 > 0.25)
            assert bool(fallback[g]) == (plan_mean(spec, v, m).fallback)


def test_adpm_fallback_leaves_groups_near_the_threshold_to_the_exact_test() -> None:
    """A group whose estimate is within the margin of 1/4, and a group with no weight, are
    not settled from floats."""
    offsets = np.array([0, 1, 2], dtype=np.int64)
    levels = np.array([0.0, 1.0])
    counts = np.array([5, 8], dtype=np.int64)
    table = batch_phi("adpm", offsets, levels, counts)
    _, settled = adpm_fallback(table, offsets, levels, counts)
    assert not settled[0]  # ε = 0 only: no weight
    # one level of n rows at ε: w = 1/n, η = 1/(n·ε), so ||w||²/4 + 2η² = 1/(4n) + 2/(n·ε)²,
    # which is 1/4 at n = 2, ε = 2
    n, eps = 2, 2.0
    offsets = np.array([0, 1], dtype=np.int64)
    table = batch_phi("adpm", offsets, np.array([eps]), np.array([n], dtype=np.int64))
    _, settled = adpm_fallback(table, offsets, np.array([eps]), np.array([n], dtype=np.int64))
    assert not settled[0]


@pytest.mark.parametrize("method", sorted(SOLVER_METHODS))
def test_a_solver_runs_once_per_eps_histogram_of_a_batch(method: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The solvers' methods in the batch: the scalar solver once per distinct ε histogram
    (bit for bit, -0.0 apart from 0.0), the same results as the scalar path."""
    from hdp_spark.core.mean import batch_weights

    calls: list[tuple[float, ...]] = []
    real = batch_weights._SOLVERS[method]

    def spy(v: list[float], m: list[int], lf: float) -> Any:
        calls.append(tuple(v))
        return real(v, m, lf)

    monkeypatch.setitem(batch_weights._SOLVERS, method, spy)
    one = _rows((0.5, 10), (1.0, 20))
    two = _rows((0.5, 11), (1.0, 20))
    stats = [one, two, one, one, two, _rows(), _rows((0.0, 3), (1.0, 2)),
             _rows((-0.0, 3), (1.0, 2))]
    _check(MeanSpec("x", "eps", 0.0, 1.0, method=method), stats, 0)  # type: ignore[arg-type]
    assert len(calls) == 5, calls  # one, two, the empty group, 0.0 and -0.0 apart
