"""Heterogeneous private frequencies (HPF): the finalize of many groups in one call.

:func:`finalize_histograms` returns, for every group, exactly the
:class:`~hdp_spark.core.histogram.finalize.HistogramResult` of
:func:`~hdp_spark.core.histogram.finalize.finalize_histogram` (Algorithm 1, §3 of Chaudhuri
& Courtade, *Private Estimation When Data and Privacy Demands Are Correlated*, FORC 2025):
the same plan (weights, scale, grid, per-level bounds, all functions of the group's public
ε histogram), the same exact bin statistics, the same noise contexts byte for byte, and the
same draws, because every bin's discrete Laplace noise comes from
:func:`~hdp_spark.core.noise.batch_laplace.discrete_laplace_batch`, which reads the same
stream of the same context through the same exact sampler (bit-equal to the scalar
sampler; the tests compare every released value).

Privacy-critical (the argument is :mod:`.finalize`'s, unchanged): row i of level l moves
w_l of mass between at most two bins; each bin gets discrete Laplace noise of scale
T·g >= 2η·(1 + 2^-20) on the grid g = 2^e <= w_min·2^-20, so the loss is at most
2·(w_l + g)/(T·g) <= w_l/η <= ε_l, and that bound is checked exactly against ε_l for
every level of every group before anything of the batch is returned. Noise stays bound to
(release key, spec, group key, ε histogram, exact statistics): nothing is drawn twice or
shared between bins or groups.

What differs from the per-group path is only how the work is laid out: the context's
shared items are encoded once per spec, each group's once, and all the bins of all groups
are drawn in one vectorized call. The k-RAPPOR baseline (exact binomial cells) and the
trivial output keep the per-group code.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from fractions import Fraction

from hdp_spark.core.histogram.finalize import (
    HistogramPlan,
    HistogramResult,
    bin_sums,
    check_level_losses,
    finalize_histogram,
    integer_weights,
    plan_histogram,
    released_counts,
)
from hdp_spark.core.histogram.spec import RAPPOR_METHODS, HistogramSpec
from hdp_spark.core.keys import context_keys
from hdp_spark.core.mean.weights import Weights
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.batch_laplace import discrete_laplace_batch
from hdp_spark.core.noise.exact import GRID_SLACK, grid_index
from hdp_spark.core.noise.prf import (
    encode_bytes,
    encode_context_head,
    encode_context_parts,
    encode_rational,
)
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import InternalError

__all__ = ["finalize_histograms"]

_LENGTH = struct.Struct(">I").pack
_BIN_HEAD = encode_context_head(("bin",), 3)
"""``encode_context(("bin", digest, j))`` is this, the digest's bytes, ``j``'s, and ``)``."""


def _digest_head(spec: HistogramSpec) -> bytes:
    """The items of a group's context that are the spec's (``finalize_histogram``'s first
    nine items of thirteen)."""
    return encode_context_head(
        ("hdp_spark/histogram/v1", spec.name, spec.method, spec.column, spec.eps, spec.kind,
         spec.labels, spec.other, spec.beta), 13)


class _Noisy:
    """One group waiting for its draws: where its lanes start, and what turns them into
    the released values (exact statistics s_j/den, grid 2**e, plan)."""

    __slots__ = ("den", "e", "first", "plan", "spec", "sums")

    def __init__(self, spec: HistogramSpec, plan: HistogramPlan, sums: list[int], den: int,
                 e: int, first: int) -> None:
        self.spec, self.plan, self.sums, self.den, self.e, self.first = (
            spec, plan, sums, den, e, first)


def finalize_histograms(
    specs: Sequence[HistogramSpec],
    stats: Sequence[GroupStats],
    key: ReleaseKey,
    groups: Sequence[tuple[object, ...]],
    weights: Sequence[Weights | None] | None = None,
) -> list[HistogramResult]:
    """``[finalize_histogram(specs[g], stats[g], key, groups[g], weights[g]) for g ...]``,
    equal result for result, with every bin's noise of every group drawn in one call.

    Args:
        specs: each group's histogram (``method="auto"`` already resolved, or resolved
            here per group as ``finalize_histogram`` does).
        stats: each group's level table (``totals``: the counts of codes 0..k₀).
        key: the release key.
        groups: each group's key (``()`` for a global release).
        weights: each group's precomputed :func:`histogram_weights` (optional, None
            entries allowed; functions of the public ε histogram only).

    Raises:
        InternalError: the inputs disagree in size, or a group's noise would not match
            its privacy analysis (nothing of the batch is returned then).

    Privacy:
        The mechanism of :func:`~hdp_spark.core.histogram.finalize.finalize_histogram`
        for every group (module docstring): each row of level l loses at most
        2·(w_l + g)/b' <= w_l/η <= ε_l (its ε_i or less), checked exactly per group before
        the batch is returned. Only noisy values and functions of the public ε histograms
        are returned.
    """
    size = len(stats)
    given = [None] * size if weights is None else list(weights)
    if len(specs) != size or len(groups) != size or len(given) != size:
        msg = "finalize_histograms needs one spec, group key and weights entry per group"
        raise InternalError(msg)
    results: list[HistogramResult | None] = [None] * size
    waiting: list[tuple[int, _Noisy]] = []
    contexts: list[bytes] = []
    scales: list[int] = []
    heads: dict[int, bytes] = {}  # by identity: a spec's hash reads its whole domain
    prepared: dict[tuple[int, bytes], _Ready | None] = {}
    bin_tails: dict[int, list[bytes]] = {}
    key_parts = encode_context_parts(context_keys(groups))
    for g, (spec, st, w) in enumerate(zip(specs, stats, given, strict=True)):
        if spec.method == "auto" or spec.method in RAPPOR_METHODS:
            results[g] = finalize_histogram(spec, st, key, groups[g], w)
            continue
        v, m, n = st.levels, st.counts, st.n
        histogram = struct.pack(f">{len(v)}d{len(m)}q", *v, *m)  # bit-exact: -0.0 apart
        signature = (id(spec), histogram)
        if signature in prepared:
            ready = prepared[signature]
        else:  # weights, plan and checks once per distinct spec and ε histogram of the
            # batch (public facts only)
            ready = prepared[signature] = _prepare(spec, v, m, w)
        if ready is None:  # the trivial output (finalize_histogram's, exactly)
            results[g] = finalize_histogram(spec, st, key, groups[g], w)
            continue
        plan, nums, den, e, t = ready
        k = len(spec.labels)
        sums = bin_sums(nums, released_counts(spec, st), k)
        if t == 0:  # every weighted row public: the exact statistics, no noise
            results[g] = _noiseless(spec, plan, sums, den)
            continue
        head = heads.get(id(spec))
        if head is None:
            head = heads[id(spec)] = _digest_head(spec)
        statistic = b"".join([b"(", _LENGTH(k), *(encode_rational(s, den) for s in sums),
                              b")"])
        raw_n = b"%d" % n
        digest = hashlib.sha256(b"".join((
            head, key_parts[g], b"i", _LENGTH(len(raw_n)), raw_n,
            encode_bytes(histogram), statistic, b")",
        ))).digest()
        tails = bin_tails.get(k)
        if tails is None:
            tails = bin_tails[k] = [part + b")" for part in encode_context_parts(range(k))]
        middle = _BIN_HEAD + encode_bytes(digest)
        waiting.append((g, _Noisy(spec, plan, sums, den, e, len(contexts))))
        contexts.extend([middle + tail for tail in tails])
        scales.extend([t] * k)
    draws = discrete_laplace_batch(key, contexts, scales) if contexts else []
    for g, item in waiting:
        results[g] = _released(item, draws, stats[g].n)
    out = [r for r in results if r is not None]
    if len(out) != size:
        msg = "finalize_histograms left a group without a result"
        raise InternalError(msg)
    return out


_Ready = tuple[HistogramPlan, tuple[int, ...], int, int, int]
"""A group's plan, integer weights (numerators, denominator) and noise grid (e, T); T = 0
when no private level carries weight (no noise)."""


def _prepare(spec: HistogramSpec, v: Sequence[float], m: Sequence[int], w: Weights | None
             ) -> _Ready | None:
    """The plan of one ε histogram, its noise grid, and the exact privacy checks of
    ``finalize_histogram`` (None: the trivial output).

    Privacy:
        Raises unless every level's loss bound 2·(w_l + g)/b' is at most ε_l and the noise
        matches the analysis (T·g >= 2η·(1 + 2**-20), g <= w_min·2**-20); reads only the
        public ε histogram and the spec.
    """
    plan = plan_histogram(spec, v, m, w)
    weights = plan.weights
    if weights is None:
        return None
    nums, den = integer_weights(weights)
    scale = 2 * weights.eta
    if scale == 0:
        if plan.min_sensitivity is not None:
            msg = "a private level carries weight but the noise scale is 0"
            raise InternalError(msg)
        return plan, nums, den, 0, 0
    min_sensitivity = plan.min_sensitivity or Fraction(1)
    used, grid = plan.noise.scale, plan.noise.granularity
    e, t = _grid_of(used, grid)  # the plan's (e, T): what is checked is what is drawn
    # the mechanism's scale T·g is at least scale·(1 + 2**-20) (exact.laplace_grid)
    if used < scale * (1 + GRID_SLACK) or grid > min_sensitivity * GRID_SLACK:
        msg = "histogram noise does not match its privacy analysis"
        raise InternalError(msg)
    check_level_losses(v, nums, den, grid, used)
    return plan, nums, den, e, t


def _grid_of(scale: Fraction, grid: Fraction) -> tuple[int, int]:
    """``(e, T)`` of a plan's noise: ``grid = 2**e`` and ``scale = T·grid``
    (``laplace_grid``'s pair, read back from the ``LaplaceDraw`` it made)."""
    gn, gd = grid.numerator, grid.denominator
    if gn & (gn - 1) or gd & (gd - 1) or (gn != 1 and gd != 1):
        msg = "histogram noise grid is not a power of two"
        raise InternalError(msg)
    t, rest = divmod(scale.numerator * gd, scale.denominator * gn)
    if rest or t < 1:
        msg = "histogram noise scale is not a whole number of grid steps"
        raise InternalError(msg)
    return (gn.bit_length() - 1 if gd == 1 else 1 - gd.bit_length()), t


def _released(item: _Noisy, draws: list[int], n: int) -> HistogramResult:
    """The group's result from its draws: ``g·(round(a_j/g) + Y_j)`` per bin, exactly
    (``laplace_on_grid``'s value)."""
    e, den, plan = item.e, item.den, item.plan
    ys = draws[item.first:item.first + len(item.sums)]
    if e >= 0:
        noisy = tuple(Fraction((grid_index(s, den, e) + y) << e)
                      for s, y in zip(item.sums, ys, strict=True))
    else:
        step = 1 << -e
        noisy = tuple(Fraction(grid_index(s, den, e) + y, step)
                      for s, y in zip(item.sums, ys, strict=True))
    return _result(item.spec, plan, noisy, n)


def _noiseless(spec: HistogramSpec, plan: HistogramPlan, sums: list[int], den: int
               ) -> HistogramResult:
    """Every row with weight is public (ε = +inf): the exact statistics, no noise."""
    return _result(spec, plan, tuple(Fraction(s, den) for s in sums), plan.n)


def _result(spec: HistogramSpec, plan: HistogramPlan, noisy: tuple[Fraction, ...], n: int
            ) -> HistogramResult:
    weights = plan.weights
    if weights is None:
        msg = "a noisy histogram result needs its weights"
        raise InternalError(msg)
    return HistogramResult(
        labels=spec.labels, noisy=noisy, noise_scale=float(plan.noise.scale),
        scale=plan.noise.scale, granularity=plan.noise.granularity,
        half_width=plan.half_width, bias_bound=plan.bias_bound, n=n, tau=weights.tau,
        method=spec.method, fallback=False, levels=plan.levels,
    )

