"""`normalize` against a plain Fraction transcription of its definition.

The noise parameter η = max{w_l / ε_l : w_l > 0, ε_l finite} sets every level's privacy
loss, so it must be exact. `normalize` keeps the levels whose float quotient ties the float
maximum and compares only those exactly; these tests check it against the exhaustive exact
maximum, on ties, near-ties one ulp apart, and the whole range of levels.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from hdp_spark.core.mean.finalize import level_privacy
from hdp_spark.core.mean.weights import (
    agnostic_phi,
    normalize,
    solve_clip_level,
    solve_l1,
)
from hdp_spark.errors import InternalError


def _reference(
    v: list[float], m: list[int], phi: list[float]
) -> tuple[list[Fraction], Fraction] | None:
    total = sum(c * Fraction(p) for c, p in zip(m, phi, strict=True))
    if total == 0:
        return None
    w = [Fraction(p) / total for p in phi]
    ratios = [
        wl / Fraction(vl) for wl, vl in zip(w, v, strict=True) if wl > 0 and math.isfinite(vl)
    ]
    return w, max(ratios, default=Fraction(0))


def _check(v: list[float], m: list[int], phi: list[float]) -> None:
    got = normalize(v, m, phi, math.nan)
    ref = _reference(v, m, phi)
    if ref is None:
        assert got.trivial
        return
    w, eta = ref
    assert list(got.w) == w
    assert got.eta == eta
    for lv, wl, vl in zip(
        level_privacy(v, m, got.numerators, got.denominator, got.eta), w, v, strict=True
    ):
        exact = wl / eta if wl > 0 and eta > 0 else None
        if exact is not None:
            assert lv.eps_effective == float(exact)  # correctly rounded
            if math.isfinite(vl):
                assert lv.eps_effective <= vl


def _random_levels(rnd: random.Random, count: int) -> list[float]:
    out: set[float] = set()
    while len(out) < count:
        r = rnd.random()
        if r < 0.1:
            out.add(rnd.choice([0.0, math.inf, 1e-100, 1e100]))
        elif r < 0.4:
            out.add(10 ** rnd.uniform(-100, 100))
        else:
            out.add(rnd.uniform(0.01, 5))
    return sorted(out)


@pytest.mark.parametrize("seed", range(40))
def test_solver_weights_match_the_exact_definition(seed: int) -> None:
    rnd = random.Random(seed)
    v = _random_levels(rnd, rnd.choice([1, 2, 5, 17, 64]))
    m = [rnd.choice([0, 1, 3, rnd.randrange(1, 10**6)]) for _ in v]
    for phi in (
        solve_clip_level(v, m, 8.0)[0],
        solve_l1(v, m, 3.0)[0],
        agnostic_phi(v),
        [1.0 if x > 0 else 0.0 for x in v],
    ):
        _check(v, m, phi)


@pytest.mark.parametrize("seed", range(40))
def test_near_ties_one_ulp_apart(seed: int) -> None:
    # ratios phi/v equal in float but not exactly, or one ulp apart: the float pre-filter
    # must keep all of them and the exact comparison must pick the true maximum
    rnd = random.Random(1000 + seed)
    base = rnd.uniform(0.1, 10)
    v, phi = [], []
    for _ in range(rnd.randrange(2, 12)):
        x = base * rnd.uniform(0.5, 2)
        v.append(x)
        phi.append(x * rnd.choice([1.0, math.nextafter(1.0, 2.0), math.nextafter(1.0, 0.0)]))
        for _ in range(rnd.randrange(3)):
            phi[-1] = math.nextafter(phi[-1], rnd.choice([0.0, math.inf]))
    order = sorted(range(len(v)), key=v.__getitem__)
    v = [v[i] for i in order]
    phi = [phi[i] for i in order]
    m = [rnd.randrange(1, 100) for _ in v]
    _check(v, m, phi)


def test_many_exact_ties_and_one_larger_ratio() -> None:
    v = [0.1 * (i + 1) for i in range(50)]
    phi = list(v)  # ratio exactly 1 on every level ...
    phi[37] = math.nextafter(v[37], math.inf)  # ... and just above 1 on one
    _check(v, [3] * 50, phi)
    phi[37] = v[37]
    _check(v, [3] * 50, phi)


def test_extreme_ratios_that_overflow_or_underflow() -> None:
    # float quotients that round to inf, to subnormals or to 0 still order the levels
    # monotonically; the ties among them are compared exactly
    v = [1e-100, 1e-99, 1.0, 1e100]
    _check(v, [1, 2, 3, 4], [1e200, 3e200, 5e-300, 1e-250])
    _check(v, [1, 2, 3, 4], [5e-324, 1e-323, 0.0, 2.5e-323])


def test_public_levels_and_zero_weights() -> None:
    _check([0.0, 0.5, math.inf], [4, 5, 6], [0.0, 0.5, 0.5])
    _check([0.5, math.inf], [1, 1], [0.0, 1.0])  # only public weight: η = 0
    _check([0.5, 1.0], [0, 0], [0.5, 1.0])  # no rows: trivial


@pytest.mark.parametrize(
    "phi", [[math.nan, 1.0], [math.inf, 1.0], [-1.0, 1.0], [1.0, -math.inf]]
)
def test_bad_weights_are_internal_errors(phi: list[float]) -> None:
    with pytest.raises(InternalError, match="finite and >= 0"):
        normalize([0.5, 1.0], [1, 1], phi, math.nan)


def test_weight_on_an_eps_zero_level_is_an_internal_error() -> None:
    with pytest.raises(InternalError, match="ε = 0"):
        normalize([0.0, 1.0], [1, 1], [1.0, 1.0], math.nan)
