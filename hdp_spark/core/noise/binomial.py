"""Exact Binomial sampling and uniform subsets, keyed like every other draw.

Privacy-critical: the partial-DP heavy hitters' tree stage draws the decisions of all
unseen candidates here; its guarantee (Lemma 28 of Ghazi, Kumar, Manurangsi & Steinke,
*Algorithms with More Granular Differential Privacy Guarantees*) needs these decisions to
have exactly the law of one discrete Laplace draw per candidate (argument below).

Used by the partial-DP heavy hitters (:mod:`hdp_spark.core.partial`) to process, in one
draw, all candidates of a tree node that share one inclusion probability: independent
Bernoulli(p) decisions for N exchangeable candidates have exactly the law "K ~ Bin(N, p),
then a uniform K-subset", so :func:`binomial_discrete_laplace_sf` and
:func:`uniform_subset` together are distributionally identical to N separate draws.

Exactness. No floating-point number touches a probability:

* :func:`binomial_rational` decides U_i < p for N uniform reals U_i at once, bit by bit
  (the usual popcount trick for dyadic Bernoulli trials, extended to any rational p by
  long division): at bit j every still-undecided trial reads one fresh uniform bit; if it
  differs from bit j of p the trial is decided (bit 0 under a 1 of p: U_i < p, success;
  bit 1 under a 0: failure), otherwise it stays undecided. One popcount of N_undecided
  random bits settles a whole round; the expected number of rounds is about
  log2(N) + 2 and the expected number of bits about 2N.
* :func:`binomial_exp` is Bin(N, exp(-γ)) for a rational γ >= 0: the bulk version of
  Canonne-Kamath-Steinke's Algorithm 1 (the trials still running at step k each pass a
  Bernoulli(γ/k), a rational Binomial; a trial stopping at an odd k is a success), with
  exp(-γ) = exp(-1)^floor(γ) · exp(-frac(γ)) by thinning.
* :func:`binomial_discrete_laplace_sf` is Bin(N, P[Z >= m]) for Z discrete Laplace of
  scale t (P[Z = z] ∝ exp(-|z|/t)), the same law as
  :func:`~hdp_spark.core.noise.exact.discrete_laplace`. With q = exp(-1/t) and m >= 1,
  P[Z >= m] = q^m / (1 + q) = exp(-m/t) · 1/(1 + q): thin by Bin(·, exp(-m/t)), then by
  Bernoulli(1/(1+q)), sampled as "loop: with probability 1/2 succeed, else with
  probability q fail, else retry" (success probability (1/2)/((1+q)/2)). For m <= 0,
  P[Z >= m] = 1 - P[Z >= 1 - m] by symmetry.

All randomness comes from the caller's bit source (a
:class:`~hdp_spark.core.noise.prf.KeyedStream` in releases), so draws are deterministic
in (release key, context) and created inside the call, never at import.
"""

from __future__ import annotations

from fractions import Fraction

from hdp_spark.core.noise.exact import RandomSource
from hdp_spark.errors import InternalError

__all__ = [
    "binomial_discrete_laplace_sf",
    "binomial_exp",
    "binomial_logistic",
    "binomial_rational",
    "uniform_subset",
]


def _ones(rng: RandomSource, n: int) -> int:
    """Number of ones among n fresh uniform bits (a Bin(n, 1/2) draw)."""
    return rng.getrandbits(n).bit_count() if n > 0 else 0


def binomial_rational(n: int, p: Fraction, rng: RandomSource) -> int:
    """Exact Bin(n, p) for a rational 0 <= p <= 1."""
    if n < 0 or not 0 <= p <= 1:
        msg = "binomial_rational needs n >= 0 and 0 <= p <= 1"
        raise InternalError(msg)
    if n == 0 or p == 0:
        return 0
    if p == 1:
        return n
    num, den = p.numerator, p.denominator
    successes, undecided = 0, n
    while undecided and num:
        num *= 2  # next binary digit of p by long division
        bit = num >= den
        if bit:
            num -= den
        ones = _ones(rng, undecided)
        if bit:
            successes += undecided - ones  # a 0 under a 1 of p: U < p
            undecided = ones
        else:
            undecided -= ones  # a 1 under a 0 of p: U > p
    # p's expansion ended (num == 0): the undecided trials have U >= p, failures.
    return successes


def _binomial_exp_le1(n: int, gamma: Fraction, rng: RandomSource) -> int:
    """Bin(n, exp(-gamma)) for 0 <= gamma <= 1 (bulk CKS20 Algorithm 1)."""
    successes, running, k = 0, n, 1
    while running:
        passing = binomial_rational(running, gamma / k, rng)
        if k % 2 == 1:
            successes += running - passing  # trials stopping at an odd k
        running, k = passing, k + 1
    return successes


def binomial_exp(n: int, gamma: Fraction, rng: RandomSource) -> int:
    """Exact Bin(n, exp(-gamma)) for a rational gamma >= 0."""
    if n < 0 or gamma < 0:
        msg = "binomial_exp needs n >= 0 and gamma >= 0"
        raise InternalError(msg)
    while gamma > 1 and n:
        n = _binomial_exp_le1(n, Fraction(1), rng)
        gamma -= 1
    return _binomial_exp_le1(n, gamma, rng) if n else 0


def _binomial_one_over_one_plus_q(n: int, scale: Fraction, rng: RandomSource) -> int:
    """Bin(n, 1/(1+q)) with q = exp(-1/scale)."""
    successes, running = 0, n
    inv = 1 / scale
    while running:
        heads = running - _ones(rng, running)  # Bin(running, 1/2): these succeed
        successes += heads
        rest = running - heads
        running = rest - binomial_exp(rest, inv, rng)  # Bernoulli(q) fails; others retry
    return successes


def binomial_logistic(n: int, gamma: Fraction, rng: RandomSource) -> int:
    """Exact Bin(n, 1/(1 + exp(-gamma))) for a rational gamma > 0.

    The keep probability of randomized response with ratio e^gamma (k-RAPPOR flips each
    bit with probability 1/(1 + e^gamma)). Same sampler as the second stage of
    :func:`binomial_discrete_laplace_sf`: with q = exp(-gamma), each trial succeeds with
    probability 1/2, else fails with probability q, else retries.
    """
    if n < 0 or gamma <= 0:
        msg = "binomial_logistic needs n >= 0 and gamma > 0"
        raise InternalError(msg)
    return _binomial_one_over_one_plus_q(n, 1 / gamma, rng) if n else 0


def binomial_discrete_laplace_sf(n: int, m: int, scale: Fraction, rng: RandomSource) -> int:
    """Exact Bin(n, P[Z >= m]), Z discrete Laplace with P[Z = z] ∝ exp(-|z|/scale)."""
    if n < 0 or scale <= 0:
        msg = "binomial_discrete_laplace_sf needs n >= 0 and scale > 0"
        raise InternalError(msg)
    if n == 0:
        return 0
    if m <= 0:
        return n - binomial_discrete_laplace_sf(n, 1 - m, scale, rng)
    thinned = binomial_exp(n, Fraction(m) / scale, rng)
    return _binomial_one_over_one_plus_q(thinned, scale, rng)


def uniform_subset(n: int, k: int, rng: RandomSource) -> list[int]:
    """A uniform k-subset of range(n), sorted (Floyd's algorithm: exactly k draws)."""
    if not 0 <= k <= n:
        msg = "uniform_subset needs 0 <= k <= n"
        raise InternalError(msg)
    chosen: set[int] = set()
    for j in range(n - k, n):
        r = rng.randrange(j + 1)
        chosen.add(j if r in chosen else r)
    return sorted(chosen)
