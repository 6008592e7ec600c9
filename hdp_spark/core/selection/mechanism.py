"""DP partition selection with per-row ε: select the groups, then release their statistics.

Privacy-critical. The mechanism is the reviewed design of the note "DP partition selection
with per-row ε — design note" (its review box supersedes its body): a public weight
κ_i = min(ε_i, c) (rounded down to the step γ, :mod:`hdp_spark.core.selection.spec`)
drives both a weighted noisy-count selection and the released statistics, which divide by
the noisy selection weight so that no weight ever reads a group's exact ε histogram. With
every ε equal to c it is the Laplace thresholding of Desfontaines et al., *Differentially
private partition selection* (PoPETs 2022), §3; dividing by c gives the weighted form of
Gopi et al., *Differentially Private Set Union* (ICML 2020).

Mechanism (all in integer steps of γ; k_i = ⌊min(ε_i, c)/γ⌋, u groups touched):

* selection: W_g = Σ_{i∈g} k_i; W̃_g = W_g + Z_g with Z_g two-sided geometric,
  P[Z = z] ∝ q^|z|, q = exp(-1/t_S), t_S = u/(f·γ); release g iff W̃_g >= T, where
  T = K_c + m*, K_c = ⌊c/γ⌋ and m* the least m >= 1 with q^m/(1+q) <= δ;
* mean (values clamped and scaled to x̄ ∈ [0, 1]): N_g = Σ k_i·(x̄_i - ½) plus exact
  discrete Laplace of scale u/(2·s·γ); μ̂ = clip(½ + Ñ_g/W̃_g, 0, 1);
* frequencies: C_gj = Σ_{x_i=j} k_i plus two-sided geometric of scale u/(s·γ) per bin;
  p̂_j = clip(C̃_gj/W̃_g, 0, 1);

where s = (1 - f)/A is each of the call's A aggregators' share.

Privacy argument (per person i with weight γk_i <= κ_i <= ε_i):

1. Groups other than i's get noise from their own streams (the PRF context holds the
   group), so only the groups holding i matter.
2. A group that exists only on one side (i alone in it) holds W = k_i <= K_c, so it is
   released with probability P[Z >= T - k_i] <= q^{m*}/(1+q) <= δ; only then are its
   statistics emitted: (0, δ). This is why an ε = 0 row is still charged δ.
3. A group present on both sides: W moves by at most k_i in each of the u touched groups
   (the person's ε is the same before and after), a likelihood ratio of q^{-k_i} =
   exp(f·γk_i/u) per group, f·γk_i in total. N moves by at most k_i/2 per touched group
   (k_i for a replacement inside one group, u = 2), a loss of s·γk_i in total with the
   scale u/(2·s·γ) (the exact sampler's grid costs nothing, see
   :func:`~hdp_spark.core.noise.laplace_mechanism`); each bin count moves by at most k_i
   and at most u bins change (two bins in one group, or one in each of two groups): loss
   s·γk_i. W̃ is published: it is the selection's own output.
4. The streams of W̃, Ñ and the counts are separate PRF contexts: one shared draw would
   make Ñ - (b_N/b_S)·W̃ noise-free (infinite loss; the review box's attack).

Total: (f + A·s)·γk_i = γk_i <= κ_i, and δ, per person — (κ_i, δ) under both
add/remove and replacement (the review box corrects the note's 2δ for replacement).

Privacy unit (``agg(..., privacy_unit=...)``): the same mechanism over the rows the bounding
rule keeps, each row's k = ⌊⌊min(ε_p/G, c)/γ⌋/R⌋ from its person's ε_p (G = max_groups,
R = max_rows); the per-person argument is in :mod:`hdp_spark.core.privacy_unit.weights`.

Intervals (what each published interval covers). The noise interval
(``noise_ci_low``/``noise_ci_high``, :func:`ratio_interval`) holds, with probability
>= 1 - β, the κ-weighted statistic ½ + N_g/W_g = Σ_i (k_i/W_g)·x̄_i (a bin: Σ_{x_i=j} k_i/W_g),
not the group's plain mean ȳ = Σ_i x̄_i/n_g. The reweighting error between them is bounded
by ||w - 1/n||₁/2 (:mod:`hdp_spark.core.reweighting`), but here n_g and the group's ε
histogram are private, so that bound cannot be published. The released
``ci_low``/``ci_high`` therefore add the worst case over every group in the public range:

Claim. No function of the public parameters and of the released (W̃, Ñ or C̃) bounds the
reweighting error below the whole range: bias_bound = Δ (``upper - lower``; 1 for a
frequency), so ci_low/ci_high = [lower, upper] ([0, 1]) hold ȳ on every data set, and no
valid interval is narrower on every data set.

Proof. Validity: ȳ lies in [lower, upper] always. Optimality: take a group of m rows with
ε_i >= c and x̄_i = 0, and add z rows of ε = 0 (k = 0) holding x̄ = 0 (set A) or x̄ = 1
(set B). W, N and the bin counts are equal on A and B, so the released outputs have
exactly the same distribution, while ȳ is 0 on A and z/(m + z) on B. An interval that holds
ȳ with probability >= 1 - β on both holds both values with probability >= 1 - 2β, so its
width is >= z/(m + z) -> 1 (z -> ∞) with that probability. (Rows with ε small but > 0 make
the same argument hold up to their tiny weight.) ∎ With public keys the same group gets the
bound ||w - 1/n||₁/2 because n and the ε histogram are public there.
Groups whose key holds a null or NaN are never released (a public rule), and released
keys are returned sorted: neither the candidates nor their order ever reach the output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.finalize import bin_sums, released_counts
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.keys import context_key, sort_keys
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import (
    LaplaceDraw,
    ReleaseKey,
    discrete_laplace,
    encode_context,
    laplace_mechanism,
    laplace_noise,
)
from hdp_spark.core.noise.batch_laplace import discrete_laplace_batch, discrete_laplace_runs
from hdp_spark.core.noise.exact import grid_index, laplace_grid
from hdp_spark.core.noise.prf import encode_context_head, encode_context_parts, encode_rational
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import InternalError

__all__ = [
    "Selected",
    "SelectedHistogram",
    "SelectedMean",
    "group_units",
    "group_weight",
    "noisy_weight",
    "noisy_weights",
    "ratio_interval",
    "select_groups",
    "select_many",
    "select_one",
    "selected_histogram",
    "selected_histograms",
    "selected_mean",
    "selected_means",
]

Key = tuple[object, ...]
_TAG = "partition-selection"
_HALF = Fraction(1, 2)


@dataclass(frozen=True, slots=True)
class Selected:
    """One released group's selection: its noisy weight W̃ in steps (>= T)."""

    selection: SelectKeys
    weight: int
    parts: int

    @property
    def weight_eps(self) -> float:
        """W̃ in κ units (a DP value: the published ``_weight``)."""
        return float(self.weight * self.selection.gamma)


def group_units(selection: SelectKeys, stats: GroupStats) -> list[int]:
    """The integer weight k of each ε level of a group (same order as ``stats.rows``)."""
    return [selection.units(r.level) for r in stats.rows]


def noisy_weight(selection: SelectKeys, weight: int, key: ReleaseKey, group: Key) -> int:
    """W̃ = W + Z, Z two-sided geometric of scale t_S, from the group's own stream."""
    context = _weight_context(selection.context(), group, weight)
    return weight + discrete_laplace(selection.selection_scale, key.stream(context))


def _weight_context(head: object, group: Key, weight: int) -> bytes:
    """The context of a group's selection noise (its stream: one per group and weight)."""
    return encode_context((_TAG, "weight", head, context_key(group), weight))


def select_many(selection: SelectKeys, weights: Sequence[int], key: ReleaseKey,
                groups: Sequence[Key]) -> list[int | None]:
    """:func:`select_one` of every ``(weights[i], groups[i])``, the noise of all admissible
    groups drawn at once (:func:`~hdp_spark.core.noise.batch_laplace.discrete_laplace_batch`:
    the scalar sampler's draws on the same streams, tested equal).

    Privacy:
        As :func:`select_one` for each group: the same context, stream and exact sampler,
        so the same decision; nothing is shared between groups.
    """
    if len(weights) != len(groups):
        msg = "select_many needs one weight per group"
        raise InternalError(msg)
    threshold = selection.threshold
    at = [i for i, group in enumerate(groups) if _admissible(group)]
    out: list[int | None] = [None] * len(groups)
    noisy = noisy_weights(selection, [weights[i] for i in at], key, [groups[i] for i in at])
    for i, w in zip(at, noisy, strict=True):
        out[i] = w if w >= threshold else None
    return out


def noisy_weights(selection: SelectKeys, weights: Sequence[int], key: ReleaseKey,
                  groups: Sequence[Key]) -> list[int]:
    """W̃ = W + Z of every ``(weights[i], groups[i])``, drawn at once (the draws of
    :func:`noisy_weight`, tested equal).

    Privacy:
        Each group's noise from its own context (the group and its weight): nothing is
        shared between groups.
    """
    if len(weights) != len(groups):
        msg = "noisy_weights needs one weight per group"
        raise InternalError(msg)
    scale, head = selection.selection_scale, selection.context()
    draws = discrete_laplace_batch(
        key, [_weight_context(head, g, w) for g, w in zip(groups, weights, strict=True)],
        [scale.numerator] * len(groups), divisors=[scale.denominator] * len(groups))
    return [w + z for w, z in zip(weights, draws, strict=True)]


def _missing(value: object) -> bool:
    """Null-like key parts: None, NaN, NaT, and values whose self-comparison is not a bool
    (pandas' NA), all without naming an engine type."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:
        return True


def _admissible(group: Key) -> bool:
    return not any(map(_missing, group))


def select_groups(
    selection: SelectKeys, table: Mapping[Key, GroupStats], key: ReleaseKey, parts: int
) -> dict[Key, Selected]:
    """The released groups of a candidate table, in sorted key order.

    Args:
        selection: the parameters.
        table: every group found in the data (pre-noise; never published) with its ε
            level counts.
        key: the release key.
        parts: how many aggregators share the call's (1 - f) budget.

    Privacy:
        See the module docstring: each candidate's decision is a function of its own
        noisy weight; the candidates' order and the unreleased keys never leave here.
    """
    groups = list(table)
    weights = [group_weight(selection, [r.level for r in stats.rows],
                            [r.count for r in stats.rows]) for stats in table.values()]
    picked = {group: Selected(selection, noisy, parts)
              for group, noisy in zip(groups, select_many(selection, weights, key, groups),
                                      strict=True) if noisy is not None}
    return {g: picked[g] for g in sort_keys(picked)}


def group_weight(selection: SelectKeys, levels: Sequence[float], counts: Sequence[int]) -> int:
    """W = Σ k(level)·count over a group's cells (valid ε levels, >= 0), in steps of γ.

    Cells may split a level (a histogram's cells are per level and category): the sum is
    the same as over the level table.
    """
    units = selection.units
    return sum(units(lv) * int(n) for lv, n in zip(levels, counts, strict=True))


def select_one(selection: SelectKeys, weight: int, key: ReleaseKey, group: Key) -> int | None:
    """One candidate's decision: W̃ (in steps) if it is released, else None (never for a
    key holding a null or NaN). See :func:`select_groups`.

    Privacy:
        See the module docstring (steps 1-2): the decision reads the candidate's own noisy
        weight only.
    """
    if not _admissible(group):
        return None
    noisy = noisy_weight(selection, weight, key, group)
    return noisy if noisy >= selection.threshold else None


def ratio_interval(
    noisy: Fraction, half: float, weight: int, weight_half: float, offset: float
) -> tuple[float, float]:
    """A (1 - β) interval of offset + N/W from Ñ ± ``half`` and W̃ ± ``weight_half``,
    cut to [0, 1] (a function of the noisy values and the public scales only)."""
    w_lo, w_hi = weight - weight_half, weight + weight_half
    if w_lo <= 0:
        return 0.0, 1.0
    n_lo = noisy.numerator / noisy.denominator - half
    n_hi = noisy.numerator / noisy.denominator + half
    lo = offset + min(n_lo / w_lo, n_lo / w_hi)
    hi = offset + max(n_hi / w_lo, n_hi / w_hi)
    return min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)


def _weight_half(selected: Selected, beta: float) -> float:
    scale = selected.selection.selection_scale
    return LaplaceDraw(Fraction(selected.weight), scale, Fraction(1)).half_width(beta)


@dataclass(frozen=True, slots=True)
class SelectedMean:
    """The released mean of one selected group (value units).

    Attributes:
        estimate: μ̂.
        ci_low, ci_high: a (1 - β) interval of the group's mean on every data set: the
            noise interval widened by ``bias_bound``, cut to [lower, upper] (so exactly
            [lower, upper]: the module docstring, "Intervals").
        noise_ci_low, noise_ci_high: the (1 - β) interval of the κ-weighted mean (the
            noise only; it misses the plain mean when values depend on ε).
        bias_bound: the worst-case reweighting error, ``upper - lower``.
        numerator: Ñ in steps (kept for tests; not published).
        selected: the group's selection.
    """

    estimate: float
    ci_low: float
    ci_high: float
    numerator: Fraction
    selected: Selected
    noise_ci_low: float
    noise_ci_high: float
    bias_bound: float


def selected_mean(
    spec: MeanSpec, stats: GroupStats, slot: int, key: ReleaseKey, group: Key, label: str,
    selected: Selected,
) -> SelectedMean:
    """The ratio estimator μ̂ = clip(½ + Ñ/W̃, 0, 1) of one selected group (the reference
    of :func:`selected_means`)."""
    num = _mean_numerator(group_units(selected.selection, stats), stats, slot)
    statistic = Fraction(num, 2 * FIXED_ONE)
    context = encode_context((*_mean_head(spec, label, selected), context_key(group),
                              statistic))
    draw = laplace_mechanism(statistic, selected.selection.mean_scale(selected.parts), _HALF,
                             key.stream(context))
    return _ratio_mean(spec, selected, draw.value, draw.half_width(spec.beta / 2),
                       _weight_half(selected, spec.beta / 2))


def _known_units(known: dict[int, dict[float, int]], selection: SelectKeys,
                 stats: GroupStats) -> list[int]:
    """:func:`group_units` of a batch's group, each ε level's integer weight computed once
    per selection of the batch (``known``: by the selection's identity, then by level)."""
    table = known.setdefault(id(selection), {})
    out = []
    for row in stats.rows:
        unit = table.get(row.level)
        if unit is None:
            unit = table[row.level] = selection.units(row.level)
        out.append(unit)
    return out


def _mean_numerator(units: Sequence[int], stats: GroupStats, slot: int) -> int:
    """N·2·FIXED_ONE = Σ k_l·(2·U_l - m_l·FIXED_ONE): x̄ - ½ summed exactly per level
    (``units``: each level's integer weight k_l)."""
    return sum(k * (2 * r.totals[slot] - r.count * FIXED_ONE)
               for k, r in zip(units, stats.rows, strict=True))


def _mean_head(spec: MeanSpec, label: str, selected: Selected) -> tuple[object, ...]:
    """The first eight items of a selected mean's noise context (all but the group key and
    the statistic)."""
    return (_TAG, "mean", label, spec.column, float(spec.lower), float(spec.upper),
            selected.selection.context(), selected.parts)


def _ratio_mean(spec: MeanSpec, selected: Selected, noisy: Fraction, half: float,
                weight_half: float) -> SelectedMean:
    """μ̂ and its interval from Ñ (exact), its noise's (1 - β/2) half-width and W̃'s."""
    # W̃ <= 0 only over public keys (a threshold T >= 1 rules it out): the midpoint, a
    # function of the released W̃ alone
    ratio = noisy / selected.weight if selected.weight > 0 else Fraction(0)
    unit = min(max(0.5 + ratio.numerator / ratio.denominator, 0.0), 1.0)
    lo, hi = ratio_interval(noisy, half, selected.weight, weight_half, 0.5)
    lower, span = float(spec.lower), float(spec.upper) - float(spec.lower)
    estimate = lower + span * unit
    upper = float(spec.upper)
    return SelectedMean(estimate, lower, upper, noisy, selected,
                        min(lower + span * lo, estimate), max(lower + span * hi, estimate),
                        upper - lower)


def selected_means(
    spec: MeanSpec, stats: Sequence[GroupStats], slot: int, key: ReleaseKey,
    groups: Sequence[Key], label: str, selected: Sequence[Selected],
) -> list[SelectedMean]:
    """:func:`selected_mean` of every selected group, equal result for result, the noise of
    all groups drawn in one call.

    Privacy:
        As :func:`selected_mean` for each group (step 3 of the module docstring): the same
        context and stream, the same grid (e, T) of the scale u/(2·s·γ) and the same exact
        sampler (:func:`~hdp_spark.core.noise.batch_laplace.discrete_laplace_batch`, tested
        draw for draw), so the same Ñ; nothing is shared between groups.
    """
    size = len(stats)
    if len(groups) != size or len(selected) != size:
        msg = "selected_means needs one group key and one selection per group"
        raise InternalError(msg)
    # per (selection, share): the context's head, (e, T) and the two half-widths; per
    # selection: each ε level's integer weight (objects of this call, keyed by identity)
    heads: dict[tuple[int, int], tuple[bytes, int, int, float, float]] = {}
    units: dict[int, dict[float, int]] = {}
    contexts: list[bytes] = []
    scales: list[int] = []
    nums: list[int] = []
    grids: list[tuple[int, float, float]] = []
    den = 2 * FIXED_ONE
    for stats_g, group, sel in zip(stats, groups, selected, strict=True):
        plan = heads.get((id(sel.selection), sel.parts))
        if plan is None:
            scale = sel.selection.mean_scale(sel.parts)
            e, t = laplace_grid(scale, _HALF)  # laplace_mechanism's grid and integer scale
            plan = heads[id(sel.selection), sel.parts] = (
                encode_context_head(_mean_head(spec, label, sel), 10), e, t,
                laplace_noise(scale, _HALF).half_width(spec.beta / 2),
                _weight_half(sel, spec.beta / 2))
        num = _mean_numerator(_known_units(units, sel.selection, stats_g), stats_g, slot)
        contexts.append(b"".join((plan[0], *encode_context_parts((context_key(group),)),
                                  encode_rational(num, den), b")")))
        scales.append(plan[2])
        nums.append(num)
        grids.append((plan[1], plan[3], plan[4]))
    draws = discrete_laplace_batch(key, contexts, scales)
    out = []
    for num, y, (e, half, weight_half), sel in zip(nums, draws, grids, selected,
                                                   strict=True):
        z = grid_index(num, den, e) + y
        noisy = Fraction(z << e) if e >= 0 else Fraction(z, 1 << -e)
        out.append(_ratio_mean(spec, sel, noisy, half, weight_half))
    return out


@dataclass(frozen=True, slots=True)
class SelectedHistogram:
    """The released frequencies of one selected group.

    Attributes:
        labels: the released bins.
        frequencies: p̂_j per bin.
        noise_intervals: the (1 - β) interval of each bin's κ-weighted frequency (the
            noise only).
        counts: the noisy weighted counts C̃_j in steps (kept for tests; not published).
        selected: the group's selection.
    """

    labels: tuple[str | int, ...]
    frequencies: tuple[float, ...]
    noise_intervals: tuple[tuple[float, float], ...]
    counts: tuple[int, ...]
    selected: Selected

    bias_bound = 1.0
    """The worst-case reweighting error of a frequency (the module docstring, "Intervals")."""

    def intervals(self) -> list[tuple[float, float]]:
        """Each bin's (1 - β) interval of its frequency on every data set: the noise
        interval widened by :attr:`bias_bound` and cut to [0, 1], i.e. [0, 1]."""
        return [(0.0, 1.0)] * len(self.labels)


def selected_histogram(
    spec: HistogramSpec, stats: GroupStats, key: ReleaseKey, group: Key, label: str,
    selected: Selected,
) -> SelectedHistogram:
    """p̂_j = clip(C̃_j/W̃, 0, 1) per released bin of one selected group (the reference of
    :func:`selected_histograms`)."""
    selection = selected.selection
    counts = _bin_counts(spec, group_units(selection, stats), stats)
    scale = selection.count_scale(selected.parts)
    context = encode_context((*_histogram_head(spec, label, selected), context_key(group),
                              tuple(counts)))
    stream = key.stream(context)
    noise = [discrete_laplace(scale, stream) for _ in counts]
    beta = spec.beta / 2
    return _ratio_histogram(spec, selected, counts, noise,
                            LaplaceDraw(Fraction(0), scale, Fraction(1)).half_width(beta),
                            _weight_half(selected, beta))


def _bin_counts(spec: HistogramSpec, units: Sequence[int], stats: GroupStats) -> list[int]:
    """C_j = Σ_{x_i = j} k_i: each released bin's integer weight (exact)."""
    if not stats.rows:
        return [0] * spec.k
    return bin_sums(units, released_counts(spec, stats), spec.k)


def _histogram_head(spec: HistogramSpec, label: str, selected: Selected
                    ) -> tuple[object, ...]:
    """The first seven items of a selected histogram's noise context (all but the group key
    and the bin counts)."""
    return (_TAG, "histogram", label, spec.column, spec.labels,
            selected.selection.context(), selected.parts)


def _ratio_histogram(spec: HistogramSpec, selected: Selected, counts: Sequence[int],
                     noise: Sequence[int], half: float, weight_half: float
                     ) -> SelectedHistogram:
    """p̂_j and its interval from C̃_j = C_j + noise_j, the bins' (1 - β/2) half-width and
    W̃'s."""
    noisy = tuple(c + z for c, z in zip(counts, noise, strict=True))
    weight = selected.weight if selected.weight > 0 else math.inf  # W̃ <= 0: public keys only
    freqs = tuple(min(max(c / weight, 0.0), 1.0) for c in noisy)
    intervals = tuple(ratio_interval(Fraction(c), half, selected.weight, weight_half, 0.0)
                      for c in noisy)
    intervals = tuple((min(lo, p), max(hi, p)) for (lo, hi), p in zip(intervals, freqs,
                                                                        strict=True))
    return SelectedHistogram(spec.labels, freqs, intervals, noisy, selected)


def selected_histograms(
    spec: HistogramSpec, stats: Sequence[GroupStats], key: ReleaseKey,
    groups: Sequence[Key], label: str, selected: Sequence[Selected],
) -> list[SelectedHistogram]:
    """:func:`selected_histogram` of every selected group, equal result for result: each
    group's bins drawn one after another from its one stream, all groups at once.

    Privacy:
        As :func:`selected_histogram` for each group (step 3 of the module docstring): the
        same context and stream, read in the same order by the same exact sampler
        (:func:`~hdp_spark.core.noise.batch_laplace.discrete_laplace_runs`, tested draw for
        draw), so the same C̃; nothing is shared between groups.
    """
    size = len(stats)
    if len(groups) != size or len(selected) != size:
        msg = "selected_histograms needs one group key and one selection per group"
        raise InternalError(msg)
    heads: dict[tuple[int, int], tuple[bytes, Fraction, float, float]] = {}
    units: dict[int, dict[float, int]] = {}
    by_scale: dict[Fraction, list[int]] = {}
    contexts: list[bytes] = []
    counts_l: list[list[int]] = []
    k = spec.k
    for g, (stats_g, group, sel) in enumerate(zip(stats, groups, selected, strict=True)):
        plan = heads.get((id(sel.selection), sel.parts))
        if plan is None:
            scale = sel.selection.count_scale(sel.parts)
            beta = spec.beta / 2
            plan = heads[id(sel.selection), sel.parts] = (
                encode_context_head(_histogram_head(spec, label, sel), 9), scale,
                LaplaceDraw(Fraction(0), scale, Fraction(1)).half_width(beta),
                _weight_half(sel, beta))
        counts = _bin_counts(spec, _known_units(units, sel.selection, stats_g), stats_g)
        counts_l.append(counts)
        contexts.append(plan[0] + b"".join(encode_context_parts(
            (context_key(group), tuple(counts)))) + b")")
        by_scale.setdefault(plan[1], []).append(g)
    noise: list[list[int]] = [[] for _ in range(size)]
    for scale, rows in by_scale.items():  # one scale per (selection, share): one call each
        runs = discrete_laplace_runs(key, [contexts[g] for g in rows],
                                     [scale.numerator] * len(rows), count=k,
                                     divisors=[scale.denominator] * len(rows))
        for g, run in zip(rows, runs, strict=True):
            noise[g] = run
    out = []
    for g, sel in enumerate(selected):
        _, _, half, weight_half = heads[id(sel.selection), sel.parts]
        out.append(_ratio_histogram(spec, sel, counts_l[g], noise[g], half, weight_half))
    return out
