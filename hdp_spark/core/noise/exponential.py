"""The exponential mechanism, sampled exactly.

Privacy-critical: the variance step of the user-level mean (:mod:`hdp_spark.core.user_mean`)
is ε-DP only because the accepted index has probability exactly ∝ exp(eps·score) (no
floating-point weights): proposals are uniform and acceptance is the exact
Bernoulli(exp(-x)) of Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
Privacy" (NeurIPS 2020), Algorithm 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from hdp_spark.core.noise.exact import RandomSource, bernoulli_exp
from hdp_spark.errors import InternalError

__all__ = ["exponential_mechanism"]


def exponential_mechanism(scores: Sequence[int], eps: Fraction, rng: RandomSource) -> int:
    """Index t with probability exactly ∝ exp(eps · scores[t]) (scores are integers).

    Rejection sampling: propose t uniformly, accept with probability
    exp(-eps·(max score - scores[t])) <= 1, drawn by the exact CKS20 Bernoulli. The accepted
    index has probability ∝ exp(eps·scores[t]) exactly; the expected number of proposals is
    at most len(scores). (The caller passes eps/2 per unit of a sensitivity-1 score.)
    """
    if not scores:
        msg = "exponential_mechanism needs candidates"
        raise InternalError(msg)
    if eps < 0:
        msg = "exponential_mechanism needs eps >= 0"
        raise InternalError(msg)
    best = max(scores)
    while True:
        t = rng.randrange(len(scores))
        if bernoulli_exp(eps * (best - scores[t]), rng):
            return t
