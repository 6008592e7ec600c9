"""The integer-pair forms of the exact mechanism's steps (core/noise/exact.py,
core/noise/prf.py, core/noise/batch_laplace.py, core/mean/finalize.py): the batch finalize
calls them with unreduced pairs and as arrays; each must give what the Fraction form gives,
bit for bit, whatever the pair's common factor."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hdp_spark.core.mean.finalize import released_figures, released_figures_arrays
from hdp_spark.core.noise import encode_context, encode_context_head, encode_context_tail
from hdp_spark.core.noise.batch_laplace import floats_on_grid_batch
from hdp_spark.core.noise.exact import (
    _on_grid,
    floats_on_grid,
    grid_index,
    laplace_floats,
    laplace_grid,
    laplace_grid_of,
)
from hdp_spark.core.noise.prf import encode_bytes, encode_context_parts, encode_rational
from hdp_spark.errors import InternalError

positive = st.integers(1, 2**120)
factor = st.integers(1, 2**40)


@settings(max_examples=400, deadline=None)
@given(positive, positive, positive, positive, factor, factor)
def test_grid_and_scale_of_unreduced_pairs(sn: int, sd: int, dn: int, dd: int, f1: int,
                                           f2: int) -> None:
    want = laplace_grid(Fraction(sn, sd), Fraction(dn, dd))
    assert laplace_grid_of(sn * f1, sd * f1, dn * f2, dd * f2) == want
    assert laplace_grid_of(sn, sd, dn, dd) == want


@settings(max_examples=400, deadline=None)
@given(st.integers(-2**130, 2**130), positive, factor, st.integers(-90, 40),
       st.integers(1, 2**50), st.integers(-2**40, 2**40),
       st.sampled_from([1e-9, 0.05, 0.5]))
def test_grid_point_and_floats_of_unreduced_pairs(num: int, den: int, f: int, e: int, t: int,
                                                  y: int, beta: float) -> None:
    value = Fraction(num, den)
    assert grid_index(num * f, den * f, e) == _on_grid(value, e)
    want = laplace_floats(value, e, t, y, beta)
    assert floats_on_grid(grid_index(num * f, den * f, e) + y, e, t, beta) == want


def test_pairs_refuse_a_non_positive_sensitivity() -> None:
    with pytest.raises(InternalError, match="positive sensitivity"):
        laplace_grid_of(1, 1, 0, 1)
    with pytest.raises(InternalError, match="positive sensitivity"):
        laplace_grid_of(1, 1, 1, 0)


@given(st.integers(-2**200, 2**200), st.integers(1, 2**200))
def test_rational_bytes_are_the_fractions(num: int, den: int) -> None:
    assert encode_rational(num, den) == encode_context_parts([Fraction(num, den)])[0]


def test_context_parts_join_to_the_tail() -> None:
    head = encode_context_head(("mean", "m", "adpm", "x", 0.0, 1.0), 10)
    items = [("a", 3, 2.5), b"\x00\x01hist", Fraction(6, 4), 7]
    parts = encode_context_parts(items)
    assert head + b"".join(parts) + b")" == encode_context_tail(head, items)
    assert encode_context_tail(head, items) == encode_context(
        ("mean", "m", "adpm", "x", 0.0, 1.0, *items))
    assert parts[1] == encode_bytes(b"\x00\x01hist")
    assert encode_context_parts([]) == []


def _lanes(rng: np.random.Generator, size: int, big: bool) -> tuple[list[int], list[int],
                                                                     list[int]]:
    z = [int(x) for x in rng.integers(-2**61, 2**61, size)]
    e = [int(x) for x in rng.integers(-120, 10, size)]
    t = [int(x) for x in rng.integers(1, 2**46, size)]
    z[:4] = [0, 1, -1, 2**53 + 1]  # zero, and one that rounds to float64
    if big:
        z[4], e[5], t[6] = 2**70 + 5, -1060, 2**80  # outside the array steps' range
    return z, e, t


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("beta", [1e-12, 0.05, 0.999])
def test_floats_on_grid_batch_equal_the_scalar_floats(big: bool, beta: float) -> None:
    z, e, t = _lanes(np.random.default_rng(3), 5_000, big)
    got = floats_on_grid_batch(z, e, t, beta)
    want = np.array([floats_on_grid(*lane, beta) for lane in zip(z, e, t, strict=True)])
    for j in range(3):
        assert got[j].tolist() == want[:, j].tolist()
    assert [a.size for a in floats_on_grid_batch([], [], [], beta)] == [0, 0, 0]


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(finite, st.floats(0, 1e3), st.floats(0, 1e3), st.floats(0, 0.5)),
                min_size=1, max_size=30),
       st.sampled_from([(0.0, 1.0), (-0.0, 0.0), (-5.0, 5.0), (0.0, 0.0),
                        (-1e307, 1.5e308)]), st.booleans())
def test_released_figures_arrays_equal_the_scalar_figures(
        lanes: list[tuple[float, float, float, float]], bounds: tuple[float, float],
        clips: bool) -> None:
    lanes = [*lanes, (-0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.5),
             (bounds[0], 0.0, 0.0, 0.0)]
    unit, sd, half, bias = (np.array(c) for c in zip(*lanes, strict=True))
    got = released_figures_arrays(*bounds, unit, sd, half, bias, clips)
    for i, lane in enumerate(lanes):
        want = released_figures(*bounds, *lane, clips)
        for j in range(5):  # bit for bit, signed zeros included
            assert math.copysign(1, got[j][i]) == math.copysign(1, want[j])
            assert float(got[j][i]) == want[j] or (math.isnan(got[j][i])
                                                    and math.isnan(want[j]))
