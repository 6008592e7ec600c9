"""Heterogeneous private frequencies (HPF): finalize (spec and weights are in :mod:`.spec`).

HPF is Algorithm 1 (§3) of Chaudhuri & Courtade, *Private Estimation When Data and Privacy
Demands Are Correlated* (FORC 2025), with the weights of its Table 1.

Privacy-critical: row i's ε_i-DP guarantee for the released frequencies depends on this
module (the bin codes, the weights, the noise scale b = 2η and the grid of the exact
Laplace). Argument in short (Lemma 1 of the paper, proved in its Appendix D): replacing one
row of weight w_i moves w_i of mass between at most two bins, so with Laplace of scale
b = 2·max_l w_l/ε_l per bin the loss is 2w_i/b <= ε_i. The exact version, including the
discrete grid, is under "Privacy argument" below and is checked before each release.

Engine-agnostic: the backends count rows per (group, ε level, category code) natively; this
module turns one group's count table into released frequencies on the driver.

Encoding of categories
----------------------
The public domain is ``spec.categories`` (k₀ labels). Every row gets a *code*: ``j`` when
its value equals ``categories[j]``, and :data:`UNMATCHED` (= k₀) when it is null or equal
to no label. The backends produce identical codes (the tests compare their tables). What
happens to the unmatched rows is a public rule fixed by ``spec.other``:

* ``other`` is a label not in ``categories`` (default ``"other"``): an extra released bin,
  appended after the categories and noised like every bin;
* ``other`` is one of ``categories``: unmatched rows are counted in that bin;
* ``other=None``: unmatched rows stay in ``n`` and in the weights but in no released bin
  (the released frequencies then sum to the in-domain share, not to 1).

Rows are never dropped and a data value never raises.

Privacy argument (replace-one neighbours, ε and n public; written out exactly)
----------------------------------------------------------------------------
Let w_l be the per-row weight of ε level l (a function of the ε histogram only, summing to
1 over rows) and ``C[l][j]`` the number of rows of level l in released bin j. The pre-noise
statistic of bin j is a_j = Σ_l w_l·C[l][j] (an exact rational). Let
η = max{w_l/ε_l : w_l > 0, ε_l finite} (exact, :func:`~hdp_spark.core.mean.weights.normalize`)
and b = 2η, the HPF scale (Algorithm 1 of the paper).

Every released bin j goes through :func:`~hdp_spark.core.noise.laplace_mechanism` with scale
b and ``min_sensitivity`` = w_min := min{w_l : w_l > 0, ε_l finite}: it outputs
g·(round(a_j/g) + Y_j) with g = 2^e <= w_min·2^-20, Y_j iid discrete Laplace of scale
t = b'/g, b' = b·(1 + 2^-20).

Replacing the value of one row of level l (finite ε_l, w_l > 0) changes the code of that
row from some j to some j'. At most two released bins change, each by exactly w_l (one of
them may be the unreleased slot when ``other=None``, or none if both codes land in the
same bin). For such a bin |round(a/g) - round(a'/g)| <= w_l/g + 1, and the discrete
Laplace probability ratio of a shift s is at most exp(|s|/t). Hence the output probability
ratio is at most

    exp(2·(w_l/g + 1)/t) = exp(2·(w_l + g)/b') <= exp(2·w_l·(1 + 2^-20)/(2η·(1 + 2^-20)))
                         = exp(w_l/η) <= exp(ε_l),

using g <= w_l·2^-20 and η >= w_l/ε_l. Note the grid is set from the *per-bin* sensitivity
w_l, not from the ℓ1 sensitivity 2w_l: with g up to 2·w_min·2^-20 the inequality above would
fail for the rows of weight w_min. Rows with w_l = 0 change nothing; rows with ε_l = +inf
need no bound. The ε level of a row is <= its ε_i (levels are capped or rounded down), so
every row gets at most its ε_i. :func:`level_loss_bounds` computes 2·(w_l + g)/b' exactly
and :func:`finalize_histogram` checks it against ε_l before anything is released.

Noise is a deterministic function of (release key, group key, domain, ε histogram, exact
statistics a): re-reading a release replays it, and any change of a gives fresh noise.
Clipping to [0, 1], the simplex projection and the counts view are post-processing.
"""

from __future__ import annotations

import hashlib
import math
import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from hdp_spark.core.histogram.auto import resolve_histogram
from hdp_spark.core.histogram.spec import (
    RAPPOR_METHODS,
    TRIVIAL_FREQUENCY,
    HistogramSpec,
    histogram_weights,
)
from hdp_spark.core.keys import context_key
from hdp_spark.core.mean.finalize import LevelPrivacy, level_privacy
from hdp_spark.core.mean.weights import (
    Weights,
)
from hdp_spark.core.noise import (
    LaplaceDraw,
    ReleaseKey,
    encode_context,
    laplace_mechanism,
    laplace_noise,
)
from hdp_spark.core.noise.binomial import binomial_logistic
from hdp_spark.core.noise.exact import GRID_SLACK
from hdp_spark.core.reweighting import reweighting_bound, widened
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import InternalError


def released_counts(spec: HistogramSpec, stats: GroupStats) -> list[list[int]]:
    """Per level, the row count of every released bin (applies the ``other`` rule).

    ``stats`` rows carry, as ``totals``, the counts of codes 0..k₀ (k₀ = unmatched).
    """
    k0 = len(spec.categories)
    target = spec.other_bin
    out = []
    for row in stats.rows:
        if len(row.totals) != k0 + 1:
            msg = "histogram level row has the wrong number of category counts"
            raise InternalError(msg)
        counts = list(row.totals[:k0])
        if spec.appends_other:
            counts.append(row.totals[k0])
        elif target is not None:
            counts[target] += row.totals[k0]
        out.append(counts)
    return out


def integer_weights(weights: Weights) -> tuple[tuple[int, ...], int]:
    """Per-level weights as integer numerators over one common denominator (exact)."""
    nums = getattr(weights, "numerators", None)
    if nums is not None:
        return tuple(int(x) for x in nums), int(getattr(weights, "denominator"))  # noqa: B009
    w = weights.w
    den = 1
    for x in w:
        if x:
            den = math.lcm(den, x.denominator)
    return tuple(x.numerator * (den // x.denominator) for x in w), den


def bin_sums(nums: Sequence[int], counts: Sequence[Sequence[int]], k: int) -> list[int]:
    """Numerators Σ_l nums[l]·counts[l][j] of the exact bin statistics (over the weights'
    common denominator).

    Privacy:
        The pre-noise statistics: only the mechanism may read them.
    """
    if len(nums) != len(counts) or any(len(row) != k for row in counts):
        msg = "bin sums need one weight per level and k counts per level"
        raise InternalError(msg)
    if not counts:
        return [0] * k
    return [sum(map(operator.mul, nums, column)) for column in zip(*counts, strict=True)]


def bin_statistics(
    weights: Weights, counts: Sequence[Sequence[int]], k: int
) -> tuple[Fraction, ...]:
    """Exact pre-noise statistics a_j = Σ_l w_l · counts[l][j] (integer arithmetic).

    Args:
        weights: the group's weights (:func:`histogram_weights`).
        counts: per level, the row count of each released bin (:func:`released_counts`).
        k: number of released bins.
    """
    nums, den = integer_weights(weights)
    return tuple(Fraction(s, den) for s in bin_sums(nums, counts, k))


def level_loss_bounds(
    w: Sequence[Fraction], v: Sequence[float], granularity: Fraction, scale: Fraction
) -> list[Fraction | None]:
    """Exact per-level privacy loss bound 2·(w_l + g)/b' of the released histogram.

    ``None`` for public levels (ε = +inf, no bound needed); 0 for levels without weight.
    See the module docstring for the derivation; every bound must be <= ε_l.
    """
    out: list[Fraction | None] = []
    for wl, vl in zip(w, v, strict=True):
        if math.isinf(vl):
            out.append(None)
        elif wl == 0:
            out.append(Fraction(0))
        elif scale == 0:
            msg = "a private level carries weight but the noise scale is 0"
            raise InternalError(msg)
        else:
            out.append(2 * (wl + granularity) / scale)
    return out


def project_simplex(values: Sequence[Fraction]) -> list[Fraction]:
    """Exact Euclidean projection of a vector onto the probability simplex.

    Sort-based algorithm: with u sorted descending, ρ = max{j : u_j - (Σ_{i<=j} u_i - 1)/j > 0},
    θ = (Σ_{i<=ρ} u_i - 1)/ρ and x_j = max(y_j - θ, 0).
    """
    if not values:
        return []
    u = sorted(values, reverse=True)
    total = Fraction(0)
    theta = Fraction(0)
    for j, uj in enumerate(u, start=1):
        total += uj
        candidate = (total - 1) / j
        if uj - candidate > 0:
            theta = candidate
    return [max(y - theta, Fraction(0)) for y in values]


@dataclass(frozen=True, slots=True)
class HistogramResult:
    """Released histogram of one group. Field meanings are documented in ``hdp_histogram``.

    Attributes:
        labels: released bin labels.
        noisy: unclipped noisy value of each bin (exact; trivial output: 1/2 per bin).
        noise_scale: Laplace scale actually used, 2η(1 + 2^-20) (0 when noiseless).
        scale: the same scale, exact.
        granularity: the noise grid g (0 when noiseless).
        half_width: (1 - β) half-width of each bin's noise.
        bias_bound: ||w - 1/n||₁/2, a bound on every bin's reweighting error (ε only;
            :mod:`hdp_spark.core.reweighting`), included in :meth:`intervals`.
        n: rows in the group.
        tau: clip level of capped rules (+inf: nobody clipped; NaN: not a capped rule).
        method: the weighting rule.
        fallback: True when the output is the data-independent trivial one.
        levels: per ε level: eps, n, per-row weight, eps_effective = w/η <= eps.
    """

    labels: tuple[str | int, ...]
    noisy: tuple[Fraction, ...]
    noise_scale: float
    scale: Fraction
    granularity: Fraction
    half_width: float
    bias_bound: float
    n: int
    tau: float
    method: str
    fallback: bool
    levels: tuple[LevelPrivacy, ...]

    def frequencies(self, project: bool = False) -> list[float]:
        """Released frequencies: clipped to [0, 1], or projected onto the simplex."""
        if project:
            return [float(x) for x in project_simplex(self.noisy)]
        return [min(max(float(x), 0.0), 1.0) for x in self.noisy]

    def intervals(self) -> list[tuple[float, float]]:
        """Per-bin (1 - β) interval of the group's own frequency on every data set: the
        estimate ± (noise half-width + ``bias_bound``) within [0, 1], the released
        ``ci_low``/``ci_high`` (proof in :mod:`hdp_spark.core.reweighting`)."""
        return self._intervals(widened(self.half_width + self.bias_bound, 0.0, 1.0))

    def noise_intervals(self) -> list[tuple[float, float]]:
        """Per-bin (1 - β) interval of the noise alone, of the *weighted* frequency (not
        published; the coverage benchmark compares it with :meth:`intervals`)."""
        return self._intervals(widened(self.half_width, 0.0, 1.0))

    def _intervals(self, reach: float) -> list[tuple[float, float]]:
        if self.fallback:
            return [(0.0, 1.0) for _ in self.noisy]
        out = []
        for x in self.noisy:
            y = float(x)
            est = min(max(y, 0.0), 1.0)
            lo, hi = max(y - reach, 0.0), min(y + reach, 1.0)
            out.append((min(lo, est), max(hi, est)))
        return out


def check_level_losses(
    v: Sequence[float], nums: Sequence[int], den: int, grid: Fraction, scale: Fraction
) -> None:
    """Raise unless 2·(w_l + g)/b' <= ε_l for every private level (integer arithmetic).

    Privacy:
        The exact check of the module docstring's bound, before a release; reads only the
        public ε levels, the weights and the noise parameters.
    """
    gn, gd = grid.numerator, grid.denominator
    sn, sd = scale.numerator, scale.denominator
    for vl, p in zip(v, nums, strict=True):
        if p == 0 or math.isinf(vl):
            continue
        en, ed = float(vl).as_integer_ratio()
        # 2·(p/den + gn/gd)·sd/sn <= en/ed  <=>  2·(p·gd + gn·den)·sd·ed <= en·sn·den·gd
        if 2 * (p * gd + gn * den) * sd * ed > en * sn * den * gd:
            msg = "a level's privacy loss bound exceeds its ε"
            raise InternalError(msg)


def finalize_histogram(
    spec: HistogramSpec,
    stats: GroupStats,
    key: ReleaseKey,
    group: tuple[object, ...],
    weights: Weights | None = None,
) -> HistogramResult:
    """Weights, noisy bins and metadata of one group.

    Args:
        spec: the histogram.
        stats: the group's level table; each row's ``totals`` are the counts of codes
            0..k₀ (k₀ = unmatched).
        key: the release key.
        group: the group key (``()`` for a global release).
        weights: precomputed :func:`histogram_weights` for this group's ε histogram
            (optional; they are a function of ``stats.levels``/``stats.counts`` only).

    Privacy:
        Every row of level l loses at most 2·(w_l + g)/b' <= w_l/η <= ε_l (module
        docstring); the bound is checked exactly before the result is returned. The
        result holds only noisy values and functions of the public ε histogram, never the
        pre-noise statistics.
    """
    v, m, n = stats.levels, stats.counts, stats.n
    if spec.method == "auto":  # the chosen method's release from here on
        spec, weights = resolve_histogram(spec, v, m), None
    labels = spec.labels
    k = len(labels)
    plan = plan_histogram(spec, v, m, weights)
    weights = plan.weights
    if weights is None:
        return HistogramResult(
            labels, tuple(Fraction(1, 2) for _ in labels), 0.0, Fraction(0), Fraction(0),
            0.0, TRIVIAL_FREQUENCY, n, math.nan, spec.method, True, plan.levels,
        )
    if spec.method in RAPPOR_METHODS:
        return _finalize_rappor(spec, stats, key, group, plan, weights)
    nums, den = integer_weights(weights)
    counts = released_counts(spec, stats)
    statistics = tuple(Fraction(x, den) for x in bin_sums(nums, counts, k))
    constrained = plan.min_sensitivity is not None
    min_sensitivity = plan.min_sensitivity or Fraction(1)
    scale = 2 * weights.eta
    histogram = struct.pack(f">{len(v)}d{len(m)}q", *v, *m)
    digest = hashlib.sha256(
        encode_context(
            ("hdp_spark/histogram/v1", spec.name, spec.method, spec.column, spec.eps,
             spec.kind, labels, spec.other, spec.beta, context_key(group), n, histogram,
             statistics)
        )
    ).digest()
    draws = [
        laplace_mechanism(a, scale, min_sensitivity, key.stream(encode_context(("bin", digest, j))))
        for j, a in enumerate(statistics)
    ]
    used = draws[0].scale
    grid = draws[0].granularity
    if scale > 0:
        # the mechanism's scale T·g is at least scale·(1 + 2**-20) (exact.laplace_grid)
        if used < scale * (1 + GRID_SLACK) or grid > min_sensitivity * GRID_SLACK:
            msg = "histogram noise does not match its privacy analysis"
            raise InternalError(msg)
        check_level_losses(v, nums, den, grid, used)
    elif constrained:
        msg = "a private level carries weight but the noise scale is 0"
        raise InternalError(msg)
    return HistogramResult(
        labels=labels,
        noisy=tuple(d.value for d in draws),
        noise_scale=float(used),
        scale=used,
        granularity=grid,
        half_width=draws[0].half_width(spec.beta),
        bias_bound=plan.bias_bound,
        n=n,
        tau=weights.tau,
        method=spec.method,
        fallback=False,
        levels=plan.levels,
    )


def _finalize_rappor(
    spec: HistogramSpec,
    stats: GroupStats,
    key: ReleaseKey,
    group: tuple[object, ...],
    plan: HistogramPlan,
    weights: Weights,
) -> HistogramResult:
    """The k-RAPPOR baseline of one group, simulated exactly from its cell counts.

    Mechanism (the FORC paper's LDP baseline, App. B.1): row i reports its one-hot vector
    over the k released bins (all zeros for an unmatched row with ``other=None``) with
    every bit flipped independently with probability q_i = 1/(1 + e^(ε_i/2)); bin j
    releases Σ_i w_i·(B_ij - q_i)/(1 - 2q_i), clipped to [0, 1].

    Privacy: replacing row i's value changes at most two bits of its report, each with
    probability ratio at most (1 - q)/q = e^(ε/2), so the report is ε_i-LDP and the
    release, a function of the reports, is ε_i-DP (replace-one; ε_i is the row's level,
    <= its demand). Only the sums of the reports per (ε level, bin) enter the output, and
    for C rows of level l holding bin j among its m rows that sum is exactly
    Bin(C, 1 - q) + Bin(m - C, q): each cell is drawn so (:func:`binomial_logistic`, exact
    for the rational level ε, no floating point in any probability), from a keyed stream
    bound to (release key, group, domain, ε histogram, every cell count of a level with
    weight). ε = +inf rows report exactly (q = 0); ε = 0 rows have weight 0 and are never
    read. The combination (floats) is post-processing.
    """
    v, m = stats.levels, stats.counts
    labels = spec.labels
    k = len(labels)
    counts = released_counts(spec, stats)
    histogram = struct.pack(f">{len(v)}d{len(m)}q", *v, *m)
    digest = hashlib.sha256(
        encode_context(
            ("hdp_spark/histogram/rappor/v1", spec.name, spec.method, spec.column, spec.eps,
             spec.kind, labels, spec.other, spec.beta, context_key(group), stats.n,
             histogram,
             # the counts the output reads: rows of weight 0 (ε = 0) never enter, not even
             # through the randomness
             tuple(tuple(row) if wl else () for row, wl in zip(counts, weights.w, strict=True)))
        )
    ).digest()
    parts: list[list[float]] = [[] for _ in range(k)]
    for lev, (vl, ml, wl, row) in enumerate(zip(v, m, weights.w, counts, strict=True)):
        if not wl:
            continue
        x = float(wl)
        if math.isinf(vl):
            for j in range(k):
                parts[j].append(x * row[j])
            continue
        gamma = Fraction(vl) / 2
        q = 1.0 / (1.0 + math.exp(vl / 2)) if vl < 1400 else 0.0
        t = math.tanh(vl / 4)
        for j in range(k):
            rng = key.stream(encode_context(("cell", digest, lev, j)))
            c = row[j]
            kept = binomial_logistic(c, gamma, rng)
            false = (ml - c) - binomial_logistic(ml - c, gamma, rng)
            parts[j].append(x * ((kept + false) - q * ml) / t)
    noisy = tuple(Fraction(math.fsum(p)) for p in parts)
    return HistogramResult(
        labels=labels,
        noisy=noisy,
        noise_scale=plan.noise_scale,
        scale=Fraction(plan.noise_scale),
        granularity=Fraction(0),
        half_width=plan.half_width,
        bias_bound=plan.bias_bound,
        n=stats.n,
        tau=weights.tau,
        method=spec.method,
        fallback=False,
        levels=plan.levels,
    )


@dataclass(frozen=True, slots=True)
class HistogramPlan:
    """Everything of one group's histogram release that is fixed before any noise is drawn.

    Attributes:
        n: rows in the group.
        weights: the weights, or None when the output is the data-independent trivial one.
        levels: per ε level: eps, n, per-row weight, eps_effective (all 0 on a fallback).
        min_sensitivity: smallest positive weight of a private level (fixes the noise
            grid); None when no private level carries weight (noiseless).
        noise: the noise of every bin, drawn by nobody (:func:`laplace_noise`): its
            ``scale`` is the released ``noise_scale`` and ``half_width(beta)`` the released
            interval half-width.
        bias_bound: ||w - 1/n||₁/2 (the released ``bias_bound``).
        noise_scale: the released ``noise_scale``: the Laplace scale of ``noise``, or for
            ``k-rappor-*`` the standard deviation of each bin's noise (0 on a fallback).
        half_width: the released (1 - β) half-width of each bin's noise (0.5 on a
            fallback, where the interval is [0, 1]).
    """

    n: int
    weights: Weights | None
    levels: tuple[LevelPrivacy, ...]
    min_sensitivity: Fraction | None
    noise: LaplaceDraw
    bias_bound: float
    noise_scale: float
    half_width: float

    @property
    def fallback(self) -> bool:
        """True when the release outputs the trivial histogram."""
        return self.weights is None


def plan_histogram(
    spec: HistogramSpec, v: Sequence[float], m: Sequence[int], weights: Weights | None = None
) -> HistogramPlan:
    """Weights, noise scale, grid and per-level privacy of one group, from its ε histogram.

    Args:
        spec: the histogram.
        v: the group's ε levels (ascending).
        m: rows per level.
        weights: precomputed :func:`histogram_weights` of (v, m) (optional).

    Privacy:
        Reads no category and draws no noise: a function of the public ε histogram (v, m)
        and the spec. :func:`finalize_histogram` releases exactly this plan.
    """
    if spec.method == "auto":
        spec, weights = resolve_histogram(spec, v, m), None
    n = sum(m)
    if not n:
        weights = None
    elif weights is None:
        weights = histogram_weights(spec, v, m)
    if weights is None or weights.trivial:
        zero = tuple(LevelPrivacy(lv, ml, 0.0, 0.0) for lv, ml in zip(v, m, strict=True))
        return HistogramPlan(n, None, zero, None, laplace_noise(Fraction(0), Fraction(1)),
                             TRIVIAL_FREQUENCY, 0.0, 0.5)
    nums, den = integer_weights(weights)
    if len(nums) != len(v):
        msg = "weights do not match the group's ε levels"
        raise InternalError(msg)
    bias = reweighting_bound(m, nums, den)
    if spec.method in RAPPOR_METHODS:
        sd, half = rappor_noise(v, m, weights.w, spec.beta)
        levels = tuple(LevelPrivacy(lv, ml, p / den, lv if p else 0.0)
                       for lv, ml, p in zip(v, m, nums, strict=True))
        return HistogramPlan(n, weights, levels, None, laplace_noise(Fraction(0), Fraction(1)),
                             bias, sd, half)
    constrained = [p for p, vl in zip(nums, v, strict=True) if p > 0 and math.isfinite(vl)]
    min_sensitivity = Fraction(min(constrained), den) if constrained else None
    noise = laplace_noise(2 * weights.eta, min_sensitivity or Fraction(1))
    return HistogramPlan(n, weights, level_privacy(v, m, nums, den, weights.eta),
                         min_sensitivity, noise, bias, float(noise.scale),
                         noise.half_width(spec.beta))


def rappor_noise(
    v: Sequence[float], m: Sequence[int], w: Sequence[Fraction], beta: float
) -> tuple[float, float]:
    """(standard deviation, (1 - β) Hoeffding half-width) of each k-RAPPOR bin's noise.

    Row i of level l contributes w_l·(B_i - q_l)/(1 - 2q_l) with its reported bit B_i and
    q_l = 1/(1 + e^(ε_l/2)), 1 - 2q_l = tanh(ε_l/4): mean 0 around w_l·1{x_i = j},
    variance w_l²·q(1-q)/(1-2q)² = w_l²/(4 sinh²(ε_l/4)) and range w_l·coth(ε_l/4),
    whatever x_i is. So the variance is Σ_l m_l w_l²/(4 sinh²(ε_l/4)) and Hoeffding gives
    P(|noise| > t) <= 2 exp(-2t²/Σ_l m_l (w_l coth(ε_l/4))²) = β at
    t = (ln(2/β)/2 · Σ_l m_l (w_l coth(ε_l/4))²)^½. Functions of the ε histogram only.
    """
    var = 0.0
    ranges = 0.0
    for vl, ml, wl in zip(v, m, w, strict=True):
        if not wl or math.isinf(vl):
            continue
        x = float(wl)
        # 1/(4 sinh²(ε/4)) = s/(1 - s)² with s = e^(-ε/2): no overflow for large ε
        s = math.exp(-vl / 2)
        var += ml * x * x * s / math.expm1(-vl / 2) ** 2
        ranges += ml * (x / math.tanh(vl / 4)) ** 2
    return math.sqrt(var), math.sqrt(math.log(2 / beta) / 2 * ranges)
