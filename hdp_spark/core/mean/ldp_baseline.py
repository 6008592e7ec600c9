"""The local-DP baseline of the mean (methods ``ldp-cp``, ``ldp-ce``, ``ldp-wp``, ``ldp-we``).

Chaudhuri & Courtade, *Private Estimation When Data and Privacy Demands Are Correlated*
(FORC 2025), Appendix B.1, compare HPM against local DP: every user reports
Y_i = X_i + Laplace(1/ε_i) (values in [0, 1], scale 1/ε_i: the range is 1) and the server
releases Σ_i w_i·Y_i with the HPM-CP / HPM-WP weights (we also offer the MSE weights
HPM-CE / HPM-WE, which the paper's MSE tables need). These methods run that baseline
centrally, with the same output law, so users can see on their own data what a local-DP
deployment would cost.

Privacy-critical: the argument that every row keeps ε_i lives here (the noise split below).

The split. In unit scale, Σ_i w_i·Y_i = Σ_l w_l·U_l + Σ_l w_l·Σ_{k<=n_l} Z_{l,k} with
Z_{l,k} ~ Laplace(1/ε_l) i.i.d., U_l the sum of the level's unit values. Let b_l = w_l/ε_l
(0 for public rows) and l* the level with the largest b_l, so b_l* = η = max_l w_l/ε_l, the
noise scale of the HPM release with the same weights. One Laplace term of level l* is
w_l*·Z = Laplace(η): it is drawn EXACTLY by the HPM release path
(:func:`~hdp_spark.core.noise.laplace_mechanism`, on its grid, scale inflated by
1 + 2**-20). The remaining terms, Σ_l b_l·(Γ_l − Γ'_l) with Γ_l, Γ'_l ~ Gamma(n'_l, 1),
n'_l = n_l − [l = l*] (a sum of n Laplace(b) is b times a difference of two Gamma(n, 1)),
are the remainder G.

Privacy (replace-one, ε public). The output is a function of A = Σ_l w_l·U_l + Laplace(η)
and G. A is exactly the HPM release, in which a row of level l has loss at most
w_l/η <= ε_l (FORC paper, Lemma 1; :mod:`hdp_spark.core.mean.finalize`). G's law depends on
the public ε histogram only, and G is drawn independently of A's noise (its own ChaCha20
generator, keyed by the release key and a context distinct from A's). Adding independent
noise is post-processing, so every row keeps ``eps_effective`` = w_l/η <= ε_l, the same as
``hpm-*``: the baseline is never less private than the method it mirrors, it is only
noisier. G uses floating-point Gamma draws: that is safe because no row's guarantee rests
on G (post-processing of a release that is private without it).

Accuracy figures (functions of the ε histogram only). Standard deviation of the noise:
sqrt(2 Σ_l n_l b_l²) (the l* term at the inflated scale). (1 − β) half-width: Laplace(b) is
sub-exponential, E exp(λ b L) = 1/(1 − b²λ²) <= exp(2 b²λ²) for |λ| <= 1/(2b), so the noise is
subE(ν² = 4 Σ n_l b_l², α = 2 max b_l) and P(|N| >= t) <= 2 exp(−½ min(t²/ν², t/α)); the
grid rounding of the exact draw adds one grid step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from hdp_spark.core.noise import ReleaseKey, encode_context
from hdp_spark.core.noise import vector as vx

__all__ = ["LDP_BASE_METHOD", "ldp_noise_figures", "ldp_remainder"]

LDP_BASE_METHOD: dict[str, str] = {
    "ldp-cp": "hpm-cp",
    "ldp-ce": "hpm-ce",
    "ldp-wp": "hpm-wp",
    "ldp-we": "hpm-we",
}
"""Each local-DP baseline method and the HPM method whose weights it uses."""

_TAG = "hdp_spark/mean/ldp-remainder/v1"


def _per_level_scales(
    v: Sequence[float], weights: Sequence[float]
) -> tuple[list[float], int]:
    """b_l = w_l/ε_l (0 for public or weightless levels) and the index of the largest."""
    b = [w / e if w > 0 and math.isfinite(e) and e > 0 else 0.0
         for w, e in zip(weights, v, strict=True)]
    top = max(range(len(b)), key=b.__getitem__) if b else 0
    return b, top


def ldp_remainder(
    v: Sequence[float],
    m: Sequence[int],
    weights: Sequence[float],
    key: ReleaseKey,
    context: bytes,
) -> float:
    """The remainder G of the local-DP noise (unit scale), see the module docstring.

    Args:
        v: the group's ε levels.
        m: rows per level.
        weights: per-row weight of each level (floats; only the noise law uses them).
        key: the release key.
        context: the context of the group's exact Laplace draw (G gets its own generator,
            keyed by (key, a context that wraps this one), so it is independent of that
            draw, replayed on re-evaluation and unrelated on changed data).

    Privacy:
        Not what protects anyone: a data-independent law (ε histogram only), added to a
        release that is private without it (post-processing).
    """
    b, top = _per_level_scales(v, weights)
    shapes = np.array([c - (i == top) for i, c in enumerate(m)], dtype=np.float64)
    scales = np.array(b, dtype=np.float64)
    use = (scales > 0) & (shapes > 0)
    if not use.any():
        return 0.0
    rng = vx.generator(key, encode_context((_TAG, context)))
    return vx.laplace_sum_float(rng, scales[use], shapes[use])


def ldp_noise_figures(
    v: Sequence[float],
    m: Sequence[int],
    weights: Sequence[float],
    used: Fraction,
    granularity: Fraction,
    beta: float,
) -> tuple[float, float]:
    """(standard deviation, (1 − β) half-width) of the whole local-DP noise, unit scale.

    ``used`` and ``granularity`` are the exact draw's inflated scale and grid (from
    :func:`~hdp_spark.core.noise.laplace_noise`); the level l* term is counted at ``used``.

    Privacy:
        A function of the public ε histogram and the spec; reads no value.
    """
    b, top = _per_level_scales(v, weights)
    if not any(b):
        return 0.0, 0.0
    b[top] = max(b[top], used.numerator / used.denominator)
    total = math.fsum(c * s * s for c, s in zip(m, b, strict=True))
    sd = math.sqrt(2.0 * total)
    log_term = math.log(2.0 / beta)
    nu2, alpha = 4.0 * total, 2.0 * max(b)
    half = max(math.sqrt(2.0 * nu2 * log_term), 2.0 * alpha * log_term)
    return sd, half + granularity.numerator / granularity.denominator
