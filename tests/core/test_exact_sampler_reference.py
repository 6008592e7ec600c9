"""The integer CKS20 sampler makes exactly the draws of a plain Fraction transcription.

The reference below follows Canonne, Kamath and Steinke (2020), Algorithms 1 and 2, line by
line with ``fractions.Fraction``; the library's version works on reduced integer pairs for
speed. Both consume the same random bits, so they must return the same samples.
"""

from __future__ import annotations

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
