"""Vectorized exact samplers for per-row (local) randomizers, on a keyed ChaCha20 CSPRNG.

Privacy-critical: the per-row ε_i-LDP of every local randomizer rests on the realized
probabilities of these samplers (their likelihood ratios must be <= e^ε exactly) and on
the keyed CSPRNG; the rules and arguments follow.

This module draws every random bit of :mod:`hdp_spark.ldp`. The rules it follows:

* **Generator.** :func:`generator` builds ``numpy.random.Generator(randomgen.ChaCha(key=...,
  rounds=20))``. The 256-bit ChaCha key is ``KeyedStream(release key, context).derive_seed()``.
  A generator is made inside the function call (or inside the Spark task) that uses it, never
  at import time and never before a fork: a generator copied into forked workers would repeat
  its draws in every worker.
* **Integer-only where privacy depends on it.** Every probability that a privacy argument uses
  is realized by comparing uniform integers from the bit generator (``random_raw``) or
  ``Generator.integers`` (Lemire's rejection method, exact) with integer thresholds. No
  floating-point sampler (``Generator.laplace``, ``random() < p``) decides anything that is
  released. The single float sampler used, ``standard_normal`` for Duchi's directions, only
  picks a point inside an antipodal pair whose side is chosen by integer comparisons; see
  :func:`duchi_sphere` for why that costs nothing in privacy.
* **Rounding in the privacy-safe direction.** Realized probabilities are dyadic rationals
  ``K / 2**64``; each is rounded so that the realized likelihood ratio is at most e^ε (the
  tests check this on the integers, in exact arithmetic).

Realized probabilities (exact)
------------------------------
Randomized response keeps the input with probability ``K(ε) / 2**64`` where
``K(ε) = 2**63 + floor(T * 2**63)`` and ``T = fl(tanh(ε/2)) * (1 - 2**-40)``. Then
``2 K/2**64 - 1 = T' := floor(T * 2**63) / 2**63 <= T``. The keep/flip likelihood ratio is
``(1 + T') / (1 - T')``, which is at most ``(1 + tanh(ε/2)) / (1 - tanh(ε/2)) = e^ε`` as long as
``T' <= tanh(ε/2)``. ``fl(tanh)`` is within a few ulps (relative 2**-50) of the exact value,
and the factor ``1 - 2**-40`` absorbs up to 2**12 ulps of error, so ``T' <= tanh(ε/2)`` holds
with room to spare (it is also checked exactly in the tests). The realized ``T'`` is smaller
than ``tanh(ε/2)`` by a relative ``2**-40 + 2**-63 / T'`` at most (<= 2**-38 for
ε >= :data:`EPS_MIN`): that is the only price of exactness.

Discrete Laplace on a 2**-30 grid (privacy accounting of the rounding)
----------------------------------------------------------------------
See :func:`laplace_unit`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from hdp_spark.core.noise.prf import ReleaseKey
from hdp_spark.core.noise.rows import RowStreams
from hdp_spark.errors import InternalError

__all__ = [
    "EPS_MIN",
    "LAPLACE_GRID_BITS",
    "LAPLACE_SPAN_UNITS",
    "Rng",
    "bern_exp_le1",
    "bernoulli_u64",
    "discrete_laplace",
    "duchi_sphere",
    "fo_report",
    "generator",
    "hemisphere_side",
    "keep_numerator",
    "laplace_grid_scale",
    "laplace_sum_float",
    "laplace_unit",
    "realized_tanh",
    "rr_pm1",
    "uniform_u64",
]

IntArray = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
SignArray = npt.NDArray[np.int8]

EPS_MIN = 2.0**-20
"""Smallest ε the samplers accept (keeps every integer below 2**53; ε this small is useless)."""

LAPLACE_GRID_BITS = 30
"""The Laplace grid is 2**-30 in the unit scale [-1, 1]."""

LAPLACE_SPAN_UNITS = 2 ** (LAPLACE_GRID_BITS + 1)
"""Width of [-1, 1] in grid units, D = 2**31: the sensitivity of the snapped input."""

_RR_SHRINK = 1.0 - 2.0**-40
_TWO63 = 2.0**63
_TWO52 = 2.0**52
_TWO53 = 2.0**53


Rng = np.random.Generator | RowStreams
"""What the samplers draw from: one generator for a whole batch (the array API), or one
keyed stream per row (:class:`~hdp_spark.core.noise.rows.RowStreams`, the simulation
transforms: a row's report then never depends on the other rows of its batch)."""


class _Source(Protocol):
    def u64(self, rows: IntArray) -> U64Array: ...

    def integers(self, rows: IntArray, bound: IntArray | int) -> IntArray: ...

    def normal(self, rows: IntArray, d: int) -> FloatArray: ...


class _BatchSource:
    """A numpy Generator seen as a source: the listed rows only give the draw count."""

    __slots__ = ("_rng",)

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def u64(self, rows: IntArray) -> U64Array:
        out: U64Array = np.asarray(self._rng.bit_generator.random_raw(rows.shape[0]))
        return out

    def integers(self, rows: IntArray, bound: IntArray | int) -> IntArray:
        if isinstance(bound, int):
            return np.asarray(
                self._rng.integers(0, bound, size=rows.shape[0], dtype=np.int64), dtype=np.int64
            )
        return np.asarray(self._rng.integers(0, bound), dtype=np.int64)

    def normal(self, rows: IntArray, d: int) -> FloatArray:
        return self._rng.standard_normal((rows.shape[0], d))


def _source(rng: Rng, n: int) -> tuple[_Source, IntArray]:
    """The draw source of a batch of ``n`` rows and the batch's row indices."""
    if isinstance(rng, RowStreams):
        if rng.n != n:
            msg = "RowStreams must have one stream per row of the batch"
            raise InternalError(msg)
        return rng, np.arange(n, dtype=np.int64)
    return _BatchSource(rng), np.arange(n, dtype=np.int64)


def generator(key: ReleaseKey, context: bytes) -> np.random.Generator:
    """A ChaCha20 generator keyed by ``KeyedStream(key, context).derive_seed()``.

    Call it inside the function or Spark task that draws (never at import time, never
    before a fork). Same (key, context) gives the same draws; the context must bind the
    exact input (see :mod:`hdp_spark.ldp.randomizers`), so that changed data never replays
    old noise.
    """
    import randomgen  # imported here: the server-side aggregators never need it

    seed = key.stream(context).derive_seed(256)
    return np.random.Generator(randomgen.ChaCha(key=seed, rounds=20))


def uniform_u64(rng: Rng, n: int) -> U64Array:
    """``n`` uniform 64-bit integers straight from the bit generator (one per row)."""
    src, rows = _source(rng, n)
    return src.u64(rows)


def bernoulli_u64(rng: Rng, numerator: U64Array) -> BoolArray:
    """Exact Bernoulli(K / 2**64) per element, for uint64 numerators K."""
    src, rows = _source(rng, numerator.shape[0])
    return _bern_u64(src, rows, numerator)


def _bern_u64(src: _Source, rows: IntArray, numerator: U64Array) -> BoolArray:
    out: BoolArray = src.u64(rows) < numerator
    return out


def _bernoulli_53(src: _Source, rows: IntArray, threshold: U64Array) -> BoolArray:
    """Exact Bernoulli(threshold / 2**53) per element (threshold in [0, 2**53])."""
    out: BoolArray = (src.u64(rows) >> np.uint64(11)) < threshold
    return out


def keep_numerator(eps: FloatArray) -> U64Array:
    """K(ε) with P(keep) = K / 2**64 and K / (2**64 - K) <= e^ε (see module docstring)."""
    t = np.tanh(np.asarray(eps, dtype=np.float64) * 0.5) * _RR_SHRINK
    if np.any(~(t >= 0.0) | ~(t < 1.0)):
        msg = "keep_numerator needs finite ε >= 0"
        raise InternalError(msg)
    return np.uint64(2**63) + np.floor(t * _TWO63).astype(np.uint64)


def realized_tanh(eps: FloatArray) -> FloatArray:
    """T' = 2 P(keep) - 1 of :func:`keep_numerator`, as the nearest float."""
    k = keep_numerator(eps)
    return (k - np.uint64(2**63)).astype(np.float64) / _TWO63


def bern_exp_le1(rng: Rng, num: IntArray, den: IntArray) -> BoolArray:
    """Exact Bernoulli(exp(-num/den)) per element, 0 <= num <= den, den >= 1 (int64).

    Canonne-Kamath-Steinke 2020, Algorithm 1: K = 1; while Bernoulli(γ/K): K += 1; return
    K odd. Each Bernoulli(num / (den K)) is one exact ``integers`` draw.
    """
    src, rows = _source(rng, num.shape[0])
    return _bern_exp_le1(src, rows, num, den)


def _bern_exp_le1(src: _Source, rows: IntArray, num: IntArray, den: IntArray) -> BoolArray:
    n = num.shape[0]
    k = np.ones(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        hit = src.integers(rows[active], den[active] * k[active]) < num[active]
        active = active[hit]
        k[active] += 1
    out: BoolArray = (k % 2) == 1
    return out


def _geometric_exp1(src: _Source, rows: IntArray) -> IntArray:
    """V with P(V = v) = (1 - 1/e) e^-v: successes of Bernoulli(exp(-1)) before a failure."""
    n = rows.shape[0]
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    ones = np.ones(n, dtype=np.int64)
    while active.size:
        hit = _bern_exp_le1(src, rows[active], ones[: active.size], ones[: active.size])
        active = active[hit]
        v[active] += 1
    return v


def discrete_laplace(rng: Rng, t: IntArray) -> IntArray:
    """Exact Y with P(Y = y) ∝ exp(-|y| / t), per element, for int64 scales t >= 1.

    Canonne-Kamath-Steinke 2020, Algorithm 2 with an integer scale: U uniform on [0, t),
    accept with probability exp(-U/t), V geometric, X = U + t V, a fair sign, and reject
    (-, 0). Integer arithmetic only.
    """
    t = np.asarray(t, dtype=np.int64)
    src, rows = _source(rng, t.shape[0])
    return _discrete_laplace(src, rows, t)


def _discrete_laplace(src: _Source, rows: IntArray, t: IntArray) -> IntArray:
    if t.size and int(t.min()) < 1:
        msg = "discrete_laplace needs t >= 1"
        raise InternalError(msg)
    out = np.zeros(t.shape[0], dtype=np.int64)
    pending = np.arange(t.shape[0])
    while pending.size:
        tp = t[pending]
        u = src.integers(rows[pending], tp)
        ok = _bern_exp_le1(src, rows[pending], u, tp)
        idx, u, tp = pending[ok], u[ok], tp[ok]
        x = u + tp * _geometric_exp1(src, rows[idx])
        negative = (src.u64(rows[idx]) >> np.uint64(63)) == 1
        reject = negative & (x == 0)
        keep = ~reject
        out[idx[keep]] = np.where(negative[keep], -x[keep], x[keep])
        pending = np.concatenate([pending[~ok], idx[reject]])
    return out


def laplace_grid_scale(eps: FloatArray) -> IntArray:
    """Discrete Laplace scale t(ε) = ceil(fl(D / ε)) + 1 in grid units, D = 2**31.

    Exactness: D is a power of two, so fl(D/ε) >= (D/ε)(1 - 2**-53); for ε >= 2**-22 the
    rounding error (D/ε) 2**-53 is below 1, hence ceil(fl(D/ε)) + 1 >= D/ε, i.e.
    D / t <= ε. For ε >= 2**-20, t <= 2**51 + 2, so every integer stays far below 2**63.
    """
    e = np.asarray(eps, dtype=np.float64)
    if e.size and not float(e.min()) >= EPS_MIN:
        msg = "laplace_grid_scale needs ε >= EPS_MIN"
        raise InternalError(msg)
    return np.ceil(float(LAPLACE_SPAN_UNITS) / e).astype(np.int64) + 1


def laplace_unit(rng: Rng, u: FloatArray, eps: FloatArray) -> IntArray:
    """Laplace randomizer in the unit scale, on the grid 2**-30: returns grid integers.

    Input ``u`` must already be in [-1, 1] (the caller imputes and clips). Output: the
    integer ``k`` of the report ``k * 2**-30``.

    Privacy (exact, ε-LDP per row):
      1. s = u * 2**30 is exact (a power-of-two scaling) and lies in [-2**30, 2**30]. It is
         rounded *stochastically* to xi in {floor(s), ceil(s)}, up with probability
         floor(frac(s) 2**53) / 2**53 (so E[xi] = s up to 2**-53 grid units). Both
         candidates lie in [-2**30, 2**30] because ±2**30 are integers; so for any two
         inputs |xi - xi'| <= D = 2**31, the grid width of [-1, 1] (no "+1 for rounding" is
         needed: the endpoints of the domain are grid points).
      2. k = xi + Y with Y exact discrete Laplace of scale t = t(ε) >= D/ε
         (:func:`laplace_grid_scale`). For every output k:
         P(k | xi) / P(k | xi') = exp((|k - xi'| - |k - xi|)/t) <= exp(D/t) <= e^ε.
      3. Step 1 is a mixture over xi; a ratio bound that holds for every pair of mixture
         components holds for the mixtures. Converting k to a float and mapping it to data
         units are post-processing.
    The realized noise is discrete Laplace with scale t 2**-30 in (2/ε, 2/ε + 2**-29]:
    the grid costs a relative ε 2**-30 in noise and nothing in privacy. Its moment
    generating function is dominated by that of a continuous Laplace with the same scale,
    so every tail bound proven for Lap(2/ε) holds after inflating 2/ε by (1 + ε 2**-29).
    """
    if u.size and not (float(u.min()) >= -1.0 and float(u.max()) <= 1.0):
        msg = "laplace_unit needs u in [-1, 1]"
        raise InternalError(msg)
    src, rows = _source(rng, u.shape[0])
    s = u * float(2**LAPLACE_GRID_BITS)
    low = np.floor(s)
    threshold = np.floor((s - low) * _TWO53).astype(np.uint64)
    xi = low.astype(np.int64) + _bernoulli_53(src, rows, threshold).astype(np.int64)
    t = np.asarray(laplace_grid_scale(eps), dtype=np.int64)
    return xi + _discrete_laplace(src, rows, t)


def rr_pm1(rng: Rng, u: FloatArray, eps: FloatArray) -> SignArray:
    """Randomized response on ±1, after unbiased stochastic rounding of u in [-1, 1].

    x = +1 with probability floor((1 + u) 2**52) / 2**53 (exactly (1 + u)/2 for u = ±1 and
    up to 2**-53 otherwise), else -1. The output is x with probability K(ε)/2**64 and -x
    otherwise (:func:`keep_numerator`). Privacy depends only on the second step: for any
    rounded inputs, P(y | x) / P(y | x') <= K / (2**64 - K) <= e^ε, and mixing over the
    rounding keeps the bound.
    """
    if u.size and not (float(u.min()) >= -1.0 and float(u.max()) <= 1.0):
        msg = "rr_pm1 needs u in [-1, 1]"
        raise InternalError(msg)
    src, rows = _source(rng, u.shape[0])
    plus = _bernoulli_53(src, rows, np.floor((1.0 + u) * _TWO52).astype(np.uint64))
    keep = _bern_u64(src, rows, keep_numerator(eps))
    out: SignArray = np.where(plus == keep, 1, -1).astype(np.int8)
    return out


def hemisphere_side(
    g: FloatArray, v: FloatArray, zero_rows: BoolArray | None = None
) -> FloatArray:
    """side(g, v) = sign of fl(<g, v>) per row, ties broken by g's first non-zero coordinate.

    ``v`` is the (unnormalized) direction of each row; rows flagged in ``zero_rows`` use
    e_1 instead. Antisymmetric by construction: side(-g, v) = -side(g, v), because negating
    g negates every rounded product and partial sum exactly. Rows of g must not be all zero.
    """
    dot = np.einsum("ij,ij->i", g, v)
    if zero_rows is not None and zero_rows.any():
        dot[zero_rows] = g[zero_rows, 0]
    out: FloatArray = np.sign(dot)
    ties = np.flatnonzero(out == 0.0)
    if ties.size:
        sub = g[ties]
        first = np.argmax(sub != 0.0, axis=1)
        out[ties] = np.sign(sub[np.arange(ties.size), first])
    return out


def duchi_sphere(
    rng: Rng, x: FloatArray, eps: FloatArray, radius: float, scale: FloatArray
) -> FloatArray:
    """Duchi et al.'s randomizer: each row of ``x`` (‖x‖ <= radius) -> a point of norm ``scale``.

    Steps per row (u = x/‖x‖, or e_1 when x = 0; a = min(‖x‖/radius, 1)):
      1. σ = +1 with probability floor((1 + a) 2**52)/2**53, else -1 (integer comparison);
      2. T = keep with probability K(ε)/2**64 (:func:`keep_numerator`);
      3. the requested side is h = σ if T else -σ: the output must satisfy side(y, u) = h;
      4. draw g ~ N(0, I_d) (float), replace g = 0 by ±e_1 with a fair sign, and output
         y = scale * s g / ‖g‖ with s = ±1 chosen so that side(s g, u) = h.
    Here side(g, u) is the sign of the floating-point dot product fl(<g, x>) (e_1 for
    x = 0), with ties broken by the sign of g's first non-zero coordinate
    (:func:`hemisphere_side`); it is antisymmetric, side(-g) = -side(g).

    Privacy (exact): P(h = + | x) = q_x with q_x in [1 - p, p], p = K/2**64 <= e^ε/(1+e^ε)
    (any a in [0, 1] is a convex combination). The law μ of g is symmetric and does not
    depend on x. For an output direction e, let M(e) = μ{g : g/‖g‖ = ±e}. By antisymmetry,
    P(y = scale e | x) = 2 [q_x μ{g/‖g‖ = e, side = +} + (1 - q_x) μ{g/‖g‖ = e, side = -}],
    which lies in [(1-p) M(e), p M(e)] whatever x is. Hence every output ratio is at most
    p/(1-p) = K/(2**64 - K) <= e^ε. The float Gaussian only shapes μ (uniformity on the
    hemisphere, i.e. accuracy), never the ratio. The caller projects x onto the ball; even
    an unprojected x would stay private, because a is capped at 1 before step 1.
    """
    n, d = x.shape
    src, rows = _source(rng, n)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    a = np.minimum(norms / radius, 1.0)
    plus = _bernoulli_53(src, rows, np.floor((1.0 + a) * _TWO52).astype(np.uint64))
    keep = _bern_u64(src, rows, keep_numerator(eps))
    side = np.where(plus == keep, 1.0, -1.0)
    g = src.normal(rows, d)
    gnorm = np.sqrt(np.einsum("ij,ij->i", g, g))
    zero = gnorm == 0.0
    if np.any(zero):
        fair = np.where((src.u64(rows[zero]) >> np.uint64(63)) == 1, 1.0, -1.0)
        g[zero] = 0.0
        g[zero, 0] = fair
        gnorm[zero] = 1.0
    flip = np.where(hemisphere_side(g, x, norms == 0.0) == side, 1.0, -1.0)
    g *= (flip * scale / gnorm)[:, None]
    return g


def fo_report(
    rng: Rng,
    values: IntArray,
    eps: FloatArray,
    m: int,
    signs: Callable[[IntArray, IntArray], SignArray],
) -> tuple[IntArray, SignArray]:
    """Frequency-oracle report (j, b) per row: j uniform on [0, m), b = ±s(j, x) by RR.

    ``values`` holds categories in [0, d) or -1 for "no item" (⊥). For an item,
    b = s(j, x) with probability K(ε)/2**64, else -s(j, x); for ⊥, b is a fair sign.
    P(j, b | x) = (1/m) P(b | j, x): the ratio between items is at most K/(2**64 - K)
    <= e^ε; between an item and ⊥ it is at most 2K/2**64 <= 2e^ε/(1+e^ε) <= e^ε. j is
    drawn with ``integers`` (exact), independently of x.
    """
    n = values.shape[0]
    src, rows = _source(rng, n)
    j: IntArray = src.integers(rows, int(m))
    keep = _bern_u64(src, rows, keep_numerator(eps))
    fair = (src.u64(rows) >> np.uint64(63)) == 1
    bottom = values < 0
    s = signs(j, np.where(bottom, 0, values))
    b = np.where(keep, s, -s)
    b = np.where(bottom, np.where(fair, 1, -1), b)
    return j, b.astype(np.int8)


def laplace_sum_float(rng: np.random.Generator, scales: FloatArray, counts: FloatArray
                      ) -> float:
    """Σ_l b_l·(sum of n_l i.i.d. Laplace(1)) in floating point, as b_l·(Γ_l − Γ'_l) with
    Γ_l, Γ'_l ~ Gamma(n_l, 1) (a sum of n Laplace(b) is b times a difference of two
    Gamma(n, 1)); one pair of draws per level.

    Privacy:
        NOT a privacy mechanism: floating-point noise whose law depends on public
        parameters only, for post-processing a release that is private without it (the
        local-DP baseline of the mean adds it to an exact draw). Never use it as the noise
        that protects anyone.
    """
    if len(scales) == 0:
        return 0.0
    diff = rng.standard_gamma(counts) - rng.standard_gamma(counts)
    return float(np.dot(scales, diff))
