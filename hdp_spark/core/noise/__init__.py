"""The mechanisms package: the only place in :mod:`hdp_spark.core` that draws randomness.

(Outside the core only the ledger draws: record ids, its MAC secret and retry jitter, none
of which is noise or depends on data; ``tests/layout/test_layering.py`` enforces the rule.)

Privacy-critical: every noisy output of the library is drawn here; the guarantees depend on
exact sampling (no floating-point holes), on noise bound to the exact pre-noise statistics
(no averaging by re-evaluation, no differencing with replayed noise) and on fresh secret
release keys. The arguments are in the submodules.

* :mod:`.prf` -- release keys and keyed bit streams (HMAC-SHA256 + BLAKE2b counter mode),
  and fresh seeds of public parameters (:func:`~.prf.public_seed`).
  Noise is a deterministic function of (release key, context), where the context holds the
  group key and the exact pre-noise statistics: re-evaluating a release replays the same
  noise, and changed data gets unrelated noise.
* :mod:`.exact` -- exact discrete Laplace and discrete Gaussian sampling
  (Canonne-Kamath-Steinke 2020) on rationals, and the floating-point-safe Laplace
  mechanism built on it (an integer noise scale on a power-of-two grid).
* :mod:`.batch_laplace` -- the same discrete Laplace draws for many keyed streams at once
  (numpy array steps, bit for bit the scalar sampler's): the batch finalize's noise.
* :mod:`.exponential` -- the exponential mechanism, sampled exactly (uniform proposal, exact
  Bernoulli(exp(-x)) acceptance).
* :mod:`.binomial`, :mod:`.vector`, :mod:`.rows` -- exact binomial samplers, vector noise and
  row-level draws built on the same keyed streams.
"""

from __future__ import annotations

from hdp_spark.core.noise.exact import (
    LaplaceDraw,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    laplace_mechanism,
    laplace_noise,
)
from hdp_spark.core.noise.exponential import exponential_mechanism
from hdp_spark.core.noise.prf import (
    KeyedStream,
    ReleaseKey,
    encode_context,
    encode_context_head,
    encode_context_tail,
    public_seed,
)

__all__ = [
    "KeyedStream",
    "LaplaceDraw",
    "ReleaseKey",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "encode_context",
    "encode_context_head",
    "encode_context_tail",
    "exponential_mechanism",
    "laplace_mechanism",
    "laplace_noise",
    "public_seed",
]
