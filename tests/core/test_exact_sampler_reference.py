"""The integer CKS20 sampler makes exactly the draws of a plain Fraction transcription.

The reference below follows Canonne, Kamath and Steinke (2020), Algorithms 1 and 2, line by
line with ``fractions.Fraction``; the library's version works on reduced integer pairs for
speed. Both consume the same random bits, so they must return the same samples.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from hdp_spark.core.noise import exact
from hdp_spark.core.noise.prf import KeyedStream, ReleaseKey


def _bern(p: Fraction, rng: KeyedStream) -> bool:
    return rng.randrange(p.denominator) < p.numerator


def _bern_exp_le1(gamma: Fraction, rng: KeyedStream) -> bool:
    k = 1
    while _bern(gamma / k, rng):
        k += 1
    return k % 2 == 1


def _bern_exp(gamma: Fraction, rng: KeyedStream) -> bool:
    while gamma > 1:
        if not _bern_exp_le1(Fraction(1), rng):
            return False
        gamma -= 1
    return _bern_exp_le1(gamma, rng)


def _dlap(scale: Fraction, rng: KeyedStream) -> int:
    s, t = scale.denominator, scale.numerator
    while True:
        u = rng.randrange(t)
        if not _bern_exp(Fraction(u, t), rng):
            continue
        v = 0
        while _bern_exp_le1(Fraction(1), rng):
            v += 1
        y = (u + t * v) // s
        negative = rng.getrandbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


@pytest.mark.parametrize("seed", range(4))
def test_discrete_laplace_matches_the_fraction_transcription(seed: int) -> None:
    r = random.Random(seed)
    for i in range(400):
        key = ReleaseKey.from_unsafe_seed(f"{seed}/{i}")
        num = r.randrange(1, 10 ** r.randrange(1, 9))
        scale = Fraction(num, r.randrange(1, 10 ** r.randrange(1, 6)))
        assert exact.discrete_laplace(scale, key.stream(b"d")) == _dlap(scale, key.stream(b"d"))
        gamma = Fraction(r.randrange(0, 60), r.randrange(1, 25))
        assert exact.bernoulli_exp(gamma, key.stream(b"b")) == _bern_exp(gamma, key.stream(b"b"))


def _mechanism_reference(
    value: Fraction, scale: Fraction, d_min: Fraction, rng: KeyedStream
) -> tuple[Fraction, Fraction, Fraction]:
    """laplace_mechanism as the module docstring states it, with Fractions throughout."""
    x = d_min * exact.GRID_SLACK
    g = Fraction(1)
    while g > x:
        g /= 2
    while g * 2 <= x:
        g *= 2
    steps = math.ceil(scale * (1 + exact.GRID_SLACK) / g)  # the integer scale T (version 2)
    used = steps * g
    y = _dlap(Fraction(steps), rng)
    return g * (round(value / g) + y), used, g


@pytest.mark.parametrize("seed", range(3))
def test_laplace_mechanism_matches_the_fraction_transcription(seed: int) -> None:
    r = random.Random(100 + seed)
    for i in range(300):
        key = ReleaseKey.from_unsafe_seed(f"mech/{seed}/{i}")
        value = Fraction(r.randrange(-(10**12), 10**12), r.randrange(1, 10 ** r.randrange(1, 14)))
        if i % 7 == 0:  # exact ties of round(value / g) on the grid
            value = Fraction(2 * r.randrange(-50, 50) + 1, 2**21)
        d_min = Fraction(r.randrange(1, 10**6), r.randrange(1, 10 ** r.randrange(1, 12)))
        scale = d_min * Fraction(r.randrange(1, 10**4), r.randrange(1, 10**3))
        got = exact.laplace_mechanism(value, scale, d_min, key.stream(b"m"))
        want = _mechanism_reference(value, scale, d_min, key.stream(b"m"))
        assert (got.value, got.scale, got.granularity) == want


@pytest.mark.parametrize("seed", range(3))
def test_laplace_floats_are_the_floats_of_the_draw(seed: int) -> None:
    """The batch finalize's floats from integers equal the scalar path's from Fractions."""
    r = random.Random(200 + seed)
    for _ in range(2_000):
        value = Fraction(r.randrange(-(10**15), 10**15), r.randrange(1, 10 ** r.randrange(1, 16)))
        e, t = r.randrange(-90, 12), r.randrange(1, 2 ** r.randrange(1, 70))
        y = r.randrange(-(2**40), 2**40)
        beta = r.choice([0.05, 0.01, 1e-9, 0.5])
        draw = exact.laplace_on_grid(value, e, t, y)
        assert exact.laplace_floats(value, e, t, y, beta) == (
            float(draw.value), float(draw.scale), draw.half_width(beta))
