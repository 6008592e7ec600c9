"""Exact discrete Laplace sampling and the floating-point-safe Laplace mechanism.

Privacy-critical: the Laplace mechanism of every central release (mean, histogram, user
mean, partial DP) is here. Argument in short: the exact discrete Laplace on a grid g at
most 2**-20 of the smallest sensitivity, with scale inflated by (1 + 2**-20), has loss at
most d_i/b for a statistic of sensitivity d_i, the loss of the continuous Laplace
mechanism of scale b (details below).

Samplers follow Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020), Algorithms 1-2: integer and rational arithmetic only, so the output
distribution is exactly the discrete Laplace law -- no floating-point holes of the kind
Mironov (CCS 2012) exploits in textbook ``log(U)`` samplers.

The randomness source is any object with ``randrange(n)`` and ``getrandbits(k)``; releases
use a :class:`~hdp_spark.core.noise.prf.KeyedStream`.

Mechanism (:func:`laplace_mechanism`) and its privacy argument
-----------------------------------------------------------------
Input: an exact rational statistic ``a``, a Laplace scale ``b`` and the smallest positive
per-user sensitivity ``d_min`` of the statistic. Let ``g = 2**floor(log2(d_min * 2**-20))``
(a power of two, ``g <= d_min * 2**-20``) and ``T = ceil(b * (1 + 2**-20) / g)``, an
integer >= 1. Output ``g * (round(a / g) + Y)`` with ``Y`` discrete Laplace of scale ``T``
(``P[Y = y] ∝ exp(-|y|/T)``). The scale actually used, and reported, is ``b' = T * g``,
at least ``b * (1 + 2**-20)``.

For neighbours whose statistics differ by at most ``d_i`` (user i's sensitivity,
``d_i >= d_min``): ``|round(a/g) - round(a'/g)| <= d_i/g + 1``, so the privacy loss of user i
is at most ``(d_i/g + 1)/T = (d_i + g)/b' <= d_i (1 + 2**-20) / (b (1 + 2**-20)) = d_i / b``
(``g <= d_i * 2**-20`` and ``b' >= b (1 + 2**-20)``). That is exactly the loss of the
continuous Laplace mechanism with scale ``b``; the grid costs a relative 2**-20 of extra
noise, and rounding the scale up to a whole number of grid steps at most one step more
(``b' < b (1 + 2**-20) + g``), nothing in privacy. The output is a rational on the grid;
turning it into a float afterwards is post-processing.

Why an integer scale (mechanism version 2, issue 31): the sampler then runs on machine
integers (``T`` is below 2**46 in the releases that matter), which lets
:mod:`.batch_laplace` draw the noise of many groups at once as array steps, bit for bit the
draws of :func:`_discrete_laplace_int`. Version 1 used the rational scale
``b (1 + 2**-20) / g`` itself (~90-bit numerators): the same guarantee, other bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "GRID_SLACK",
    "LaplaceDraw",
    "RandomSource",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "floats_on_grid",
    "grid_for",
    "grid_index",
    "laplace_floats",
    "laplace_grid",
    "laplace_grid_of",
    "laplace_mechanism",
    "laplace_noise",
    "laplace_on_grid",
]

_SLACK_BITS = 20
GRID_SLACK = Fraction(1, 2**_SLACK_BITS)
"""Relative noise inflation that pays for rounding the statistic onto the grid."""
_INFLATE = 1 + GRID_SLACK


class RandomSource(Protocol):
    """What the exact samplers need from a bit source."""

    def randrange(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        ...

    def getrandbits(self, k: int) -> int:
        """Uniform integer in [0, 2**k)."""
        ...


def _bernoulli(p: Fraction, rng: RandomSource) -> bool:
    return rng.randrange(p.denominator) < p.numerator


def _bernoulli_exp_le1_int(num: int, den: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS20 Algorithm 1), on integers.

    Step k draws Bernoulli(gamma/k) as ``randrange(b) < a`` with a/b = num/(den·k) in lowest
    terms: the same draws, bit for bit, as with Fractions, without their overhead.
    """
    k = 1
    while True:
        d = den * k
        g = math.gcd(num, d)
        if rng.randrange(d // g) >= num // g:
            return k % 2 == 1
        k += 1


def _bernoulli_exp_le1(gamma: Fraction, rng: RandomSource) -> bool:
    """Bernoulli(exp(-gamma)) for 0 <= gamma <= 1 (CKS20 Algorithm 1)."""
    return _bernoulli_exp_le1_int(gamma.numerator, gamma.denominator, rng)


def _bernoulli_exp_int(num: int, den: int, rng: RandomSource) -> bool:
    """Bernoulli(exp(-num/den)) for num/den >= 0 in lowest terms."""
    while num > den:  # gamma > 1: one Bernoulli(exp(-1)) per unit
        if not _bernoulli_exp_le1_int(1, 1, rng):
            return False
        num -= den
    return _bernoulli_exp_le1_int(num, den, rng)


def bernoulli_exp(gamma: Fraction, rng: RandomSource) -> bool:
    """Exact Bernoulli(exp(-gamma)) for a rational gamma >= 0."""
    if gamma < 0:
        msg = "bernoulli_exp needs gamma >= 0"
        raise InternalError(msg)
    return _bernoulli_exp_int(gamma.numerator, gamma.denominator, rng)


def discrete_laplace(scale: Fraction, rng: RandomSource) -> int:
    """Exact sample of Y with P[Y = y] ∝ exp(-|y|/scale), scale > 0 (CKS20 Algorithm 2)."""
    if scale <= 0:
        msg = "discrete_laplace needs scale > 0"
        raise InternalError(msg)
    return _discrete_laplace_int(scale.numerator, scale.denominator, rng)


def discrete_gaussian(sigma2: Fraction, rng: RandomSource) -> int:
    """Exact sample of Y with P[Y = y] ∝ exp(-y²/(2σ²)), σ² > 0 rational (CKS20 Algorithm 3).

    With t = floor(σ) + 1: draw Y from the discrete Laplace of scale t and accept it with
    probability exp(-(|Y| - σ²/t)²/(2σ²)) (exact Bernoulli, Algorithm 1). The accepted Y has
    exactly the discrete Gaussian law: P[accept Y = y] ∝ exp(-|y|/t - (|y| - σ²/t)²/(2σ²))
    = exp(-y²/(2σ²)) · exp(-σ²/(2t²)), a constant factor times the target.

    Privacy (Canonne, Kamath & Steinke 2020, Theorem 14): adding independent discrete
    Gaussians of variance parameter σ² to the coordinates of an integer vector whose L2
    sensitivity is Δ is ½(Δ/σ)²-zCDP, as for the continuous Gaussian.
    """
    if sigma2 <= 0:
        msg = "discrete_gaussian needs sigma2 > 0"
        raise InternalError(msg)
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1  # floor(sqrt(σ²)) + 1
    tau = sigma2 / t
    two_s2 = 2 * sigma2
    while True:
        y = _discrete_laplace_int(t, 1, rng)
        if bernoulli_exp((abs(y) - tau) ** 2 / two_s2, rng):
            return y


def _discrete_laplace_int(t: int, s: int, rng: RandomSource) -> int:
    """:func:`discrete_laplace` of the scale t/s, given in lowest terms with t, s > 0."""
    while True:
        u = rng.randrange(t)
        g = math.gcd(u, t)  # u/t in lowest terms, as Fraction(u, t) would be
        if not _bernoulli_exp_int(u // g, t // g, rng):
            continue
        v = 0
        while _bernoulli_exp_le1_int(1, 1, rng):
            v += 1
        y = (u + t * v) // s
        negative = rng.getrandbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def grid_for(min_sensitivity: Fraction) -> Fraction:
    """The power-of-two grid ``g <= min_sensitivity * GRID_SLACK`` of the mechanism."""
    return _pow2(_grid_exponent(min_sensitivity))


def _grid_exponent(min_sensitivity: Fraction) -> int:
    """The e of :func:`grid_for`'s ``2**e``."""
    if min_sensitivity <= 0:
        msg = "grid_for needs a positive sensitivity"
        raise InternalError(msg)
    return _grid_exponent_of(min_sensitivity.numerator, min_sensitivity.denominator)


def _grid_exponent_of(num: int, den: int) -> int:
    """The e of :func:`grid_for` for the sensitivity ``num/den`` (positive integers, not
    necessarily in lowest terms: the comparisons below do not depend on it)."""
    den <<= _SLACK_BITS  # x = num/den = d_min·2**-20
    e = num.bit_length() - den.bit_length()
    # 2**e is within a factor 2 of x = num/den; step down until 2**e <= x and up while
    # 2**(e+1) <= x, comparing integers (2**e <= num/den  <=>  den·2**e <= num).
    while not _pow2_le(e, num, den):
        e -= 1
    while _pow2_le(e + 1, num, den):
        e += 1
    return e


def _pow2_le(e: int, num: int, den: int) -> bool:
    """2**e <= num/den for positive integers num, den."""
    return (den << e) <= num if e >= 0 else den <= (num << -e)


def _pow2(e: int) -> Fraction:
    return Fraction(2**e) if e >= 0 else Fraction(1, 2 ** (-e))


@dataclass(frozen=True, slots=True)
class LaplaceDraw:
    """One output of :func:`laplace_mechanism`.

    Attributes:
        value: the noisy statistic (exact rational on the grid).
        scale: the Laplace scale actually used, ``b * (1 + 2**-20)`` (0 when noiseless).
        granularity: the grid ``g`` (0 when noiseless).
    """

    value: Fraction
    scale: Fraction
    granularity: Fraction

    def half_width(self, beta: float) -> float:
        """A bound h with P(|value - statistic| > h) <= beta.

        For discrete Laplace with scale t, P(|Y| >= m) = 2 q**m / (1 + q), q = exp(-1/t),
        which is <= beta once m >= t ln(1/beta) + 1; rounding onto the grid adds g/2.
        """
        scale, grid = self.scale, self.granularity
        if not scale:
            return 0.0
        # float(scale / grid) and float(grid·(m + 1)) as single correctly rounded integer
        # divisions (Fraction -> float is one, whatever the form of the pair)
        gn, gd = grid.numerator, grid.denominator
        return _half_width((scale.numerator * gd) / (scale.denominator * gn), gn, gd, beta)


def _half_width(t: float, gn: int, gd: int, beta: float) -> float:
    """:meth:`LaplaceDraw.half_width` for the scale ``t`` in grid steps (as a float) and the
    grid ``gn/gd``: ``g·(m + 1)`` with ``m = ceil(t ln(1/beta)) + 2``, one correctly rounded
    integer division."""
    m = math.ceil(t * math.log(1.0 / beta)) + 2
    return (gn * (m + 1)) / gd


def laplace_grid(scale: Fraction, min_sensitivity: Fraction) -> tuple[int, int]:
    """``(e, T)`` of the mechanism for ``scale > 0``: the grid ``g = 2**e`` of
    ``min_sensitivity`` and the integer noise scale ``T = ceil(scale·(1 + 2**-20) / g)``
    (module docstring: ``T·g >= scale·(1 + 2**-20)`` is what the privacy argument needs).

    Privacy:
        Fixes the noise of :func:`laplace_mechanism`: rounding T up, never down, is what
        keeps every user's loss at most d_i / scale (the exact test in the tests). A
        function of the public noise parameters only.
    """
    return laplace_grid_of(scale.numerator, scale.denominator, min_sensitivity.numerator,
                           min_sensitivity.denominator)


def laplace_grid_of(scale_num: int, scale_den: int, sens_num: int, sens_den: int
                    ) -> tuple[int, int]:
    """:func:`laplace_grid` of ``scale = scale_num/scale_den`` and ``min_sensitivity =
    sens_num/sens_den`` (positive integers, in lowest terms or not: the same ``(e, T)``, as
    both are comparisons and a ceiling of the same rationals; the batch finalize calls it
    with unreduced pairs).

    Privacy:
        As :func:`laplace_grid` (it is its computation).
    """
    if sens_num <= 0 or sens_den <= 0:
        msg = "grid_for needs a positive sensitivity"
        raise InternalError(msg)
    e = _grid_exponent_of(sens_num, sens_den)
    # scale·(1 + 2**-20) / 2**e = t / s; the ceiling does not depend on reducing t / s
    t = scale_num * ((1 << _SLACK_BITS) + 1)
    s = scale_den << _SLACK_BITS
    if e >= 0:
        s <<= e
    else:
        t <<= -e
    return e, -(-t // s)


def _on_grid(value: Fraction, e: int) -> int:
    """round(value / 2**e), half to even (as ``round(Fraction)``)."""
    return grid_index(value.numerator, value.denominator, e)


def grid_index(a: int, b: int, e: int) -> int:
    """round(a / (b·2**e)), half to even, for b > 0 (the same for any pair of one rational:
    the quotient and the comparison of twice the remainder scale together): the grid point
    of the value ``a/b`` before the noise is added.

    Privacy:
        None by itself (a pre-noise rounding; the mechanism adds the draw to it).
    """
    if e >= 0:
        b <<= e
    else:
        a <<= -e
    q, r = divmod(a, b)
    if 2 * r > b or (2 * r == b and q % 2 == 1):
        q += 1
    return q


def laplace_on_grid(value: Fraction, e: int, t: int, y: int) -> LaplaceDraw:
    """The mechanism's output for the draw ``y`` (discrete Laplace of scale ``t``) on the
    grid ``2**e``: ``g·(round(value/g) + y)``, with the scale used, ``t·g``, and the grid.

    Privacy:
        The mechanism's output only when ``(e, t)`` come from :func:`laplace_grid` and
        ``y`` is one discrete Laplace draw of scale ``t`` from the value's own stream
        (:func:`laplace_mechanism` and the batch finalize call it so).
    """
    z = _on_grid(value, e) + y
    # g·z and t·g as one Fraction each (the product of two Fractions normalizes twice)
    if e >= 0:
        return LaplaceDraw(Fraction(z << e), Fraction(t << e), Fraction(1 << e))
    return LaplaceDraw(Fraction(z, 1 << -e), Fraction(t, 1 << -e), Fraction(1, 1 << -e))


def laplace_floats(value: Fraction, e: int, t: int, y: int, beta: float
                   ) -> tuple[float, float, float]:
    """``float(d.value)``, ``float(d.scale)`` and ``d.half_width(beta)`` of
    ``d = laplace_on_grid(value, e, t, y)``, from the integers: each float is the correctly
    rounded quotient of the same rational as there, so they are equal (tested).

    Privacy:
        Post-processing of :func:`laplace_on_grid`'s output (the same floats).
    """
    return floats_on_grid(grid_index(value.numerator, value.denominator, e) + y, e, t, beta)


def floats_on_grid(z: int, e: int, t: int, beta: float) -> tuple[float, float, float]:
    """The floats of :func:`laplace_floats` from the noisy grid index ``z`` (the grid point
    plus the draw): ``z·g``, ``t·g`` and the half-width, each one correctly rounded
    division.

    Privacy:
        Post-processing of the mechanism's output.
    """
    gn, gd = (1 << e, 1) if e >= 0 else (1, 1 << -e)
    return (z * gn) / gd, (t * gn) / gd, _half_width(t / 1, gn, gd, beta)


def laplace_noise(scale: Fraction, min_sensitivity: Fraction) -> LaplaceDraw:
    """The noise :func:`laplace_mechanism` would add, without drawing it.

    Returns a :class:`LaplaceDraw` of value 0 with the scale actually used and the grid of
    ``laplace_mechanism(value, scale, min_sensitivity, rng)`` for every value and rng, so its
    :meth:`LaplaceDraw.half_width` is the interval half-width the release reports.

    Privacy:
        Draws nothing and reads no data: a function of the noise parameters only (which the
        aggregators compute from the public ε histogram).
    """
    if scale < 0:
        msg = "`scale` must be >= 0."
        raise ParameterError(msg)
    if scale == 0:
        return LaplaceDraw(Fraction(0), Fraction(0), Fraction(0))
    e, t = laplace_grid(scale, min_sensitivity)
    return laplace_on_grid(Fraction(0), e, t, 0)


def laplace_mechanism(
    value: Fraction, scale: Fraction, min_sensitivity: Fraction, rng: RandomSource
) -> LaplaceDraw:
    """Release ``value`` with Laplace noise of scale ``scale``, exactly and float-safely.

    Args:
        value: the exact pre-noise statistic.
        scale: the Laplace scale b the privacy analysis calls for (>= 0). ``0`` means every
            user with influence is public: the value is returned unchanged.
        min_sensitivity: the smallest positive per-user sensitivity of ``value``; it fixes
            the grid (see the module docstring for why the privacy loss of every user i is
            at most d_i / b).
        rng: the bit source (a KeyedStream in releases).

    Returns:
        The draw, with the scale actually used (``T·g >= b·(1 + 2**-20)``) and the grid.
    """
    if scale < 0:
        msg = "`scale` must be >= 0."
        raise ParameterError(msg)
    if scale == 0:
        return LaplaceDraw(value, Fraction(0), Fraction(0))
    e, t = laplace_grid(scale, min_sensitivity)
    return laplace_on_grid(value, e, t, _discrete_laplace_int(t, 1, rng))
