"""User-level mean: the engine interface and the three noisy steps (initial mean, variance by
the exponential mechanism, final weighted clipped sum).

Privacy-critical: part of the user-level mean (Algorithm 2 of Cummings, Feldman, McMillan &
Talwar, NeurIPS 2022, §4.2); the privacy argument of the whole pipeline is in the package
docstring of :mod:`hdp_spark.core.user_mean`.
Here: the three noise scales.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.mean.weights import normalize, solve_clip_level
from hdp_spark.core.noise import (
    ReleaseKey,
    encode_context,
    exponential_mechanism,
    laplace_mechanism,
    laplace_noise,
)
from hdp_spark.core.user_mean.census import Census, Cut, RankQuery
from hdp_spark.core.user_mean.solver import FinalDesign
from hdp_spark.core.user_mean.spec import CHI2_MEDIAN, KAPPA_V, OrderKey
from hdp_spark.errors import InternalError

# ---------------------------------------------------------------------------------------------
# Engine interface
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeanCell:
    """G_mean users of one (k, ε) class: count and exact Σ s_i (fixed point)."""

    k: int
    eps: float
    users: int
    total: int


@dataclass(frozen=True, slots=True)
class VarUser:
    """One G_var user: k, ε level, Σ of its encoded values, and its order key."""

    k: int
    eps: float
    total: int
    key: OrderKey


@dataclass(frozen=True, slots=True)
class FinalCell:
    """G_fin users of one (k, ε) class: count and exact Σ clamp(s_i, A_k, B_k)."""

    k: int
    eps: float
    users: int
    total: int


@dataclass(frozen=True, slots=True)
class FirstStage:
    """What the engine returns once the groups are cut (per group id).

    Attributes:
        mean: G_mean cells.
        var: G_var users (at most ``var_users`` per group).
        fin_counts: G_fin user counts per (k, ε) class.
    """

    mean: Mapping[int, tuple[MeanCell, ...]]
    var: Mapping[int, tuple[VarUser, ...]]
    fin_counts: Mapping[int, Mapping[tuple[int, float], int]]


class UserBackend(Protocol):
    """The four native operations an engine provides (pandas and Spark).

    Membership uses the rule of :class:`Cut` and :func:`order_key`; the final clamp is
    ``min(max(s_i, A_k), B_k)`` on the integer Σ of the user's encoded values.
    """

    def census(self) -> Census:
        """Users per (group id, k, ε level), and violation counts."""
        ...

    def rank_keys(self, queries: Sequence[RankQuery]) -> dict[RankQuery, OrderKey]:
        """Answer every rank query exactly."""
        ...

    def first_stage(self, cuts: Mapping[int, Cut]) -> FirstStage:
        """G_mean cells, G_var users and G_fin class counts of every cut group."""
        ...

    def final_stage(
        self, cuts: Mapping[int, Cut], bounds: Mapping[int, Mapping[int, tuple[int, int]]]
    ) -> dict[int, tuple[FinalCell, ...]]:
        """Per (group id, k, ε): G_fin users and Σ clamp(s_i, A_k, B_k)."""
        ...


# ---------------------------------------------------------------------------------------------
# Step "initial": DP mean of the users with the least data (Algorithm 2, Step 1; per-user ε ours)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassPrivacy:
    """What one (step, k, ε) class of users got.

    Attributes:
        step: ``"variance"``, ``"initial"`` or ``"final"``.
        k: rows per user.
        eps: the users' ε level.
        users: number of users.
        weight: per-user weight in the step's statistic (``nan`` for the variance step).
        eps_effective: the privacy loss bound actually delivered (<= eps).
    """

    step: str
    k: int
    eps: float
    users: int
    weight: float
    eps_effective: float


@dataclass(frozen=True, slots=True)
class InitialMean:
    """Output of the initial step (unit scale).

    Attributes:
        p_init: the released initial mean, clipped to [1/m, 1 - 1/m].
        alpha: (1 - β/2) bound on |p_init_raw - p| (Hoeffding on the weighted mean plus the
            exact noise tail).
        classes: per-class privacy.
    """

    p_init: float
    alpha: float
    classes: tuple[ClassPrivacy, ...]


@dataclass(frozen=True, slots=True)
class InitialDesign:
    """Everything the initial step fixes before reading a value (public: G_mean's classes).

    Attributes:
        cells: the G_mean cells, sorted by (ε, k).
        m: users in G_mean.
        weights: exact per-user weight of each ε level (``w_of[eps]``).
        eta: exact noise scale η = max_l w_l/ε_l.
        min_weight: the smallest positive weight (the noise grid's sensitivity).
        l2: Σ_l n_l w_l² (Hoeffding term of α).
        classes: per-class privacy (weight, eps_effective = w_l/η).
    """

    cells: tuple[MeanCell, ...]
    m: int
    weights: Mapping[float, Fraction]
    eta: Fraction
    min_weight: Fraction
    l2: float
    classes: tuple[ClassPrivacy, ...]

    def alpha(self, beta: float) -> float:
        """(1 - β/2) bound on |p_init_raw - p|: Hoeffding on the weighted mean plus the
        exact (1 - β/2) tail of the noise the release adds (data-independent)."""
        noise = laplace_noise(self.eta, self.min_weight)
        return math.sqrt(self.l2 * math.log(4.0 / beta) / 2.0) + noise.half_width(beta / 2.0)


def initial_design(cells: Sequence[MeanCell]) -> InitialDesign:
    """The weights and noise scale of the initial step, from G_mean's (k, ε) classes only.

    Privacy:
        Reads the public class counts (k, ε, users) only; the cells' sums are not used.
    """
    cells = sorted(cells, key=lambda c: (c.eps, c.k))
    m = sum(c.users for c in cells)
    if m < 2:
        msg = "the initial step needs at least 2 users"
        raise InternalError(msg)
    levels = sorted({c.eps for c in cells})
    counts = [sum(c.users for c in cells if c.eps == v) for v in levels]
    phi, tau = solve_clip_level(levels, counts, 8.0)
    weights = normalize(levels, counts, phi, tau)
    w_of = dict(zip(levels, weights.w, strict=True))
    l2 = float(sum((w * w * c for w, c in zip(weights.w, counts, strict=True)), Fraction(0)))
    classes = tuple(
        ClassPrivacy("initial", c.k, c.eps, c.users, float(w_of[c.eps]),
                     float(w_of[c.eps] / weights.eta))
        for c in cells
    )
    return InitialDesign(tuple(cells), m, w_of, weights.eta,
                         min(w for w in weights.w if w > 0), l2, classes)


def initial_step(
    cells: Sequence[MeanCell],
    beta: float,
    key: ReleaseKey,
    context: tuple[object, ...],
) -> InitialMean:
    """Release the initial mean of G_mean.

    Each user enters with its mean p̂_i, where the paper's Algorithm 2 (Step 1) uses one row,
    the first sample x_i¹: the sensitivity is the same (any per-user input in [0, 1]), p̂_i
    is never the noisier input, and it needs no row order (see docs/user_mean.md).

    Privacy:
        User i of ε level l contributes w_l·p̂_i with p̂_i = s_i/(k_i 2^31) ∈ [0, 1];
        replacing the user's rows moves the statistic by at most w_l. The noise scale
        η = max_l w_l/ε_l (exact, :func:`~hdp_spark.core.mean.weights.normalize`) gives that
        user a loss w_l/η <= ε_l. The weights are ADPM's min(ε, τ) (Chaudhuri & Courtade,
        ISIT 2023, Algorithm 1), a function of the G_mean ε histogram only
        (:func:`initial_design`); with a single ε they are 1/m, η = 1/(mε).
    """
    design = initial_design(cells)
    cells, m, w_of = design.cells, design.m, design.weights
    statistic = sum(
        (w_of[c.eps] * Fraction(c.total, c.k * FIXED_ONE) for c in cells), Fraction(0)
    )
    ctx = encode_context(
        (*context, "initial", tuple((c.k, c.eps, c.users, c.total) for c in cells))
    )
    draw = laplace_mechanism(statistic, design.eta, design.min_weight, key.stream(ctx))
    p_init = min(max(float(draw.value), 1.0 / m), 1.0 - 1.0 / m)
    alpha = math.sqrt(design.l2 * math.log(4.0 / beta) / 2.0) + draw.half_width(beta / 2.0)
    return InitialMean(p_init, alpha, design.classes)


# ---------------------------------------------------------------------------------------------
# Step "variance": exponential mechanism on the users with the most data (Algorithm 2, Step 2)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class VarianceEstimate:
    """Output of the variance step (unit scale).

    Attributes:
        s2: the released variance estimate (over-estimate by design, κ_v = 2.5).
        eps_used: the ε of the exponential mechanism (min ε over G_var), 0 if public.
        classes: per-class privacy.
    """

    s2: float
    eps_used: float
    classes: tuple[ClassPrivacy, ...]


def variance_step(
    users: Sequence[VarUser],
    k_max: int,
    key: ReleaseKey,
    context: tuple[object, ...],
) -> VarianceEstimate:
    """Release the private variance estimate (log-scale median of pair differences) from G_var.

    The users are paired in the public order (k descending, order key); d_j is the
    squared difference of the pair's means (exact rationals).

    Privacy:
        For the grid c_t = 2^-t, t = 0..J with J = ⌈log2 k_max⌉ + 8 (k_max public),
        cnt_t = #{j : d_j <= c_t} and score_t = -|cnt_t - M/2|, kept integral as
        -|2 cnt_t - M| (= 2·score). One user is in one pair, so each cnt_t moves by at most
        1: sensitivity 1. The exponential mechanism at ε_v = min ε over G_var draws t with
        P ∝ exp(ε_v·score_t/2) = exp(ε_v·(2 score_t)/4): ε_v-DP, hence <= ε_i for every
        G_var user. s2 = κ_v·c_t / (2·median(χ²₁)).
    """
    ordered = sorted(users, key=lambda u: (-u.k, u.key))
    if len(ordered) < 2:
        msg = "the variance step needs at least 2 users"
        raise InternalError(msg)
    means = [Fraction(u.total, u.k * FIXED_ONE) for u in ordered]
    pairs = len(means) // 2
    diffs = [(means[2 * j] - means[2 * j + 1]) ** 2 for j in range(pairs)]
    top = max(math.ceil(math.log2(k_max)), 0) + 8
    grid = [Fraction(1, 2**t) for t in range(top + 1)]
    scores = [-abs(2 * sum(1 for d in diffs if d <= c) - pairs) for c in grid]
    eps_v, classes = variance_classes(ordered)
    ctx = encode_context(
        (*context, "variance", k_max, eps_v,
         tuple((u.k, u.eps, u.total, u.key[0], u.key[1]) for u in ordered))
    )
    t = exponential_mechanism(scores, Fraction(eps_v) / 4, key.stream(ctx))
    s2 = KAPPA_V * float(grid[t]) / (2.0 * CHI2_MEDIAN)
    return VarianceEstimate(s2, eps_v, classes)


def variance_classes(users: Sequence[VarUser]) -> tuple[float, tuple[ClassPrivacy, ...]]:
    """The ε of the variance step (min ε over G_var) and its per-class privacy.

    Privacy:
        Reads the users' public (k, ε) only.
    """
    eps_v = min(u.eps for u in users)
    per_class: dict[tuple[int, float], int] = {}
    for u in users:
        per_class[(u.k, u.eps)] = per_class.get((u.k, u.eps), 0) + 1
    classes = tuple(
        ClassPrivacy("variance", k, e, c, math.nan, eps_v)
        for (k, e), c in sorted(per_class.items())
    )
    return eps_v, classes


def variance_grid_floor(k_max: int) -> float:
    """The smallest variance estimate the variance step can release (unit scale)."""
    top = max(math.ceil(math.log2(k_max)), 0) + 8
    return KAPPA_V * float(Fraction(1, 2**top)) / (2.0 * CHI2_MEDIAN)


# ---------------------------------------------------------------------------------------------
# Step "final": weighted, clipped sum of G_fin (Algorithm 2, Steps 3-10; per-user ε ours)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FinalRelease:
    """Output of the final step (unit scale)."""

    value: float
    scale: float
    half_width: float
    classes: tuple[ClassPrivacy, ...]


def final_step(
    design: FinalDesign,
    cells: Sequence[FinalCell],
    beta: float,
    key: ReleaseKey,
    context: tuple[object, ...],
) -> FinalRelease:
    """Release S/Z + Lap(b) for G_fin.

    Privacy:
        With Z = Σ_j c_j u_j (a function of the public class counts and of the design),
        the statistic is Σ_j u_j Σ_{i∈j} clamp(s_i, A_k, B_k) / (k 2^31 Z). Replacing one
        user of class j moves it by at most d_j = u_j W_j / Z (its clamped mean stays in
        [A_k, B_k]/(k 2^31), of exact width W_j). Noise scale b = max_j d_j/ε_j (exact):
        the loss of class j is d_j/b <= ε_j (on the original widths; with one
        ε, b = Λ/ε with Λ = max_j w_j W_j, the paper's noise).
    """
    by_class = {(c.k, c.eps): c for c in cells}
    if set(by_class) != set(design.classes):
        msg = "final cells do not match the design's classes"
        raise InternalError(msg)
    for cls, count in zip(design.classes, design.users, strict=True):
        if by_class[cls].users != count:
            msg = "the G_fin class counts changed between passes; cache the input table"
            raise InternalError(msg)
    z, sens, scale = design.z, design.sensitivity, design.scale
    statistic = Fraction(0)
    for (k, eps), u in zip(design.classes, design.weights, strict=True):
        statistic += u * Fraction(by_class[(k, eps)].total, k * FIXED_ONE)
    statistic /= z
    positive = [d for d in sens if d > 0]
    ctx = encode_context(
        (*context, "final", design.digest,
         tuple((k, e, by_class[(k, e)].users, by_class[(k, e)].total) for k, e in design.classes))
    )
    draw = laplace_mechanism(
        statistic, scale, min(positive) if positive else Fraction(1), key.stream(ctx)
    )
    classes = tuple(
        ClassPrivacy("final", k, e, c, float(u / z), float(d / scale) if scale > 0 else 0.0)
        for (k, e), c, u, d in zip(design.classes, design.users, design.weights, sens,
                                   strict=True)
    )
    return FinalRelease(float(draw.value), float(draw.scale), draw.half_width(beta), classes)


