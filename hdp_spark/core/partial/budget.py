"""Budget of the partial-DP heavy hitters: the corrected Theorem 15 split, in exact noise.

Privacy-critical: the per-attribute (ε₀-∇₀DP) and per-person guarantees of
``hdp_heavy_hitters`` are set here: the tree scale t and bias μ, the count scale b and the
Binomial inclusion law of unseen candidates. Argument in short: the tree stage is
ε_tree-∇₀DP by Lemma 28 of Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More
Granular Differential Privacy Guarantees* (App. A.1.1), since t is solved from
ε_tree = (2/t)(1 + 1/(1 - e^{-μ/t})) and rounded up; the count stage has L1 sensitivity 2
per attribute change, so discrete Laplace of scale 2/ε_count is ε_count-DP; the two
compose to ε₀ = ε_tree + ε_count. The paper's own instantiation (proof of Theorem 15,
App. A.1.3) is not ε₀: see "Per-attribute privacy" below for the correction.

Everything here is a function of public parameters (ε₀, the split, δ, τ, η and the tree
shape); nothing reads data. It implements PrivHeavyHitter (Algorithm 2, §5.1 of the paper)
with the privacy condition of Lemma 28, the utility analysis of Lemma 30 and the release
and detection bounds derived from the inclusion law below (ours, exact for discrete noise).

The algorithm (HIST: Theorem 15 of the paper, with corrected constants):

* tree stage: PrivTree over the attributes (bottom-up, dyadic blocks). At level ℓ a
  candidate s of node I is kept iff ``max(f_s, τ_ℓ - μ) + Z > τ_ℓ`` with Z discrete
  Laplace of scale t and τ_ℓ = τ + (ℓ-1)μ (τ, μ integers);
* count stage: every released key y gets ``f_y + Z'``, Z' discrete Laplace of scale
  b >= 2/ε_count (fresh noise; the tree's noisy values are never released).

Per-attribute privacy (one attribute of one person changes; n public):

* tree: Lemma 28, ``ε_tree(t, μ) = (2/t)(1 + 1/(1 - e^{-μ/t}))`` for μ > 1. The paper's
  proof of Theorem 15 takes λ = 3/ε and μ = λ ln(16/ν) and calls each stage 0.5ε. That is
  wrong twice: Lemma 28 with λ = 3/ε gives (2ε/3)(1 + 16/(16 - ν)) ≈ 1.34ε, and an exact
  worst case (λ = 3, κ = ln 160, d = 4, one attribute of one all-zero record flipped) has
  log-ratio 0.916 at ε = 1, not 0.5; and Lap(2/ε) on the counts is ε-DP, not 0.5ε,
  because the sensitivity is 2 (count stage below). So we split ε₀ explicitly, solve
  ``t = (2/ε_tree)(1 + 1/(1 - e^{-κ}))``, and round t up onto a 2^-10 grid and μ = κt up to
  an integer: ε_tree(t, μ) decreases in both t and μ, so rounding up is safe,
  and the exact discrete chain sup is <= 0.75 ε_tree (our calculator in
  :mod:`.privacy` checks it). The naive bound 2D/t (two candidates change by one count in
  each of the D noisy nodes containing the attribute; ln-ratio <= 1/t each) is also
  valid; we report ``min``.
* count stage: one attribute change moves the person's whole-record key from y to y', so
  the released counts have L1 sensitivity 2: scale 2/ε_count gives ε_count.

Per-person privacy (the person's whole record changes; replacement, n public):
``min(d_real · ε_tree_attr, 2 N_int / t) + ε_count``, where N_int counts the noisy
internal nodes (blocks holding >= 1 real attribute, counted on the tree padded to a power
of two, so it can exceed d_real - 1: d_real = 5 gives 6). The first term is group privacy
over the d_real attributes; the second is basic composition over the candidates whose count changes
(two per noisy node, ln-ratio <= 1/t each). The count stage costs ε_count per person
(the whole-record key moves y -> y', L1 change 2). The per-person bound is ours (the paper
gives d·ε₀ through its Proposition 8).

Level-0 (leaf) thresholding (``leaf_thresholding=True``; the paper's §5.1 takes every leaf
list to be the whole domain, and a level-0 pass is our generalisation for large
categorical domains): each real attribute j is thresholded first, as a node of level 0 with
candidates the whole public domain 𝒳_j and threshold τ₀ = τ - μ (the rule τ_ℓ = τ + (ℓ-1)μ
at ℓ = 0), the same clipping ``max(f, τ₀ - μ)`` and the same discrete Laplace of scale t;
level 1 then pairs the surviving leaf values instead of the whole domains. Costs:

* per attribute, Lemma 28 is unchanged: its chain bound (in-chain along the levels where
  the larger-count string survives, one out term) does not depend on the number of levels,
  and the level-0 node is one more level of the same chain (counts are still
  non-increasing going up, thresholds still grow by μ). The exact calculator of
  :mod:`.privacy` (``depth`` free, ``tau`` = τ₀) checks it. The naive bound becomes
  2(D+1)/t: the attribute lies in one more noisy node.
* per person, the whole record changes one leaf count pair in each of the d_real leaves
  too: ``min(d_real·ε_tree, 2(N_int + d_real)/t)``. Not 2N_int/t: an exact brute force
  (tests) finds neighbours at d = 4 whose loss exceeds 2N_int/t once leaves are
  thresholded.

A person with several rows (``privacy_unit``, ``max_rows`` = R): the engines count only
persons with at most R rows, with all of them; whether a person counts depends on their
number of rows only, so a change of a counted person's values (their number of rows, hence
n, fixed: replacement) is a path of at most R row-level neighbours -- one attribute of one
row at a time for a per-attribute change, one whole row at a time for a whole-person
change -- and a person counted nowhere changes nothing. Both stages are pure DP (every
candidate is processed, absent ones included; δ is the release guarantee's probability,
not a privacy parameter), so group privacy over R rows is exact: ε-DP per row gives R·ε
per person, with no δ term (the (Rε, R e^{(R-1)ε} δ) form of approximate DP collapses to
(Rε, 0)). The budget is therefore solved at ε₀/R per row: the tree scale t from
ε_tree/R (Lemma 28, rounded up as above), the count scale b = 2R/ε_count exactly (rounded
up; directly: R rows move the released counts by L1 <= 2R), and every reported ε
(``eps_tree``, ``eps_count``, ``eps_attribute``, ``eps_person``, and the Lemma 28 and
naive tree bounds) is R times its row-level value, a person's guarantee. Counts,
thresholds, ``release_max_count`` and ``detection_count`` stay in rows (a record held by
one person alone has count up to R). R = 1 is the row model.

Under a privacy unit a person's number of rows is private too: their rows may be replaced
by any number of rows (r -> r', both <= R; a person with more counts nowhere), or a person
added or removed. Such a change is at most max(r, r') <= R steps, each a row replaced
(bounded above) or a row added or removed. Adding or removing a row moves, in every noisy
node, one candidate's count by one (nothing else: the candidate lists are the children's
DP outputs) and, in the count stage, one released count by one: by adaptive composition
over the N noisy nodes, each a thresholded discrete Laplace decision with ratio <= e^{1/t}
per unit of count, the tree loses <= N/t and the counts <= 1/b. Both are below a row
replacement's: N/t <= min(d·ε_tree, 2N/t) since ε_tree > 4/t (Lemma 28's t) and N <= 3d,
and 1/b < 2/b; ``eps_person`` takes the max anyway. Nothing in the release depends on n
(padded-only blocks pass their constant string through whatever n is), so R·(row-level
ε) stays the person's guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from hdp_spark.errors import InternalError

__all__ = [
    "SCALE_GRID",
    "TreeBudget",
    "TreeShape",
    "count_scale_for",
    "detection_count",
    "dlap_sf",
    "eps_tree",
    "exclusion_probability",
    "inclusion_probability",
    "lam_for",
    "release_max_count",
    "round_scale_up",
    "solve_budget",
]

SCALE_GRID = 1024
"""Noise scales are rounded up to multiples of 1/SCALE_GRID (exact rationals)."""

_INFLATE = 1.0 + 1e-9
"""Relative margin that dominates float error before rounding a scale up."""


def eps_tree(lam: float, mu: float) -> float:
    """Lemma 28: ``(2/λ)(1 + 1/(1 - e^{-μ/λ}))``, the tree's per-attribute ε (μ > 1)."""
    return (2.0 / lam) * (1.0 + 1.0 / -math.expm1(-mu / lam))


def lam_for(eps: float, kappa: float) -> float:
    """The scale λ with ``eps_tree(λ, κλ) == eps``: ``(2/ε)(1 + 1/(1 - e^{-κ}))``."""
    return (2.0 / eps) * (1.0 + 1.0 / -math.expm1(-kappa))


def round_scale_up(scale: float | Fraction) -> Fraction:
    """The smallest multiple of 1/SCALE_GRID that is >= scale.

    A Fraction is rounded exactly; a float (the result of inexact arithmetic such as
    :func:`lam_for`) is first inflated by a relative 1e-9 that dominates its error.
    """
    if isinstance(scale, Fraction):
        return Fraction(math.ceil(scale * SCALE_GRID), SCALE_GRID)
    return Fraction(math.ceil(scale * _INFLATE * SCALE_GRID), SCALE_GRID)


def count_scale_for(eps: float) -> Fraction:
    """The exact scale >= 2/ε of a count with L1 sensitivity 2, on the 1/SCALE_GRID grid."""
    return round_scale_up(Fraction(2) / Fraction(eps))


def dlap_sf(m: int, scale: float) -> float:
    """P[Z >= m] for Z discrete Laplace, P[Z = z] ∝ exp(-|z|/scale).

    With q = e^{-1/scale}: q^m/(1+q) for m >= 1 and 1 - q^{1-m}/(1+q) for m <= 0.
    """
    q = math.exp(-1.0 / scale)
    if m >= 1:
        return math.exp(-m / scale) / (1.0 + q)
    return 1.0 - math.exp(-(1 - m) / scale) / (1.0 + q)


def inclusion_probability(count: int, tau_level: int, mu: int, scale: float) -> float:
    """P[a candidate with true count ``count`` is kept at a node of threshold τ_ℓ].

    ``P[max(count, τ_ℓ - μ) + Z > τ_ℓ] = P[Z >= τ_ℓ - max(count, τ_ℓ - μ) + 1]``: the law
    the driver samples, both for explicit draws and for the Binomial over low candidates
    (it must be the law of the explicit draws, never the continuous-Laplace formula: with
    a mismatched law a key whose count goes 0 <-> 1 loses about 0.5/t at every level, so
    the loss grows with depth; and never p_low when τ_ℓ < μ: counts are clipped at
    ``max(τ_ℓ - μ, 0)`` since a count is never negative).
    """
    g = max(count, tau_level - mu, 0)
    return dlap_sf(tau_level - g + 1, scale)


def exclusion_probability(count: int, tau_level: int, mu: int, scale: float) -> float:
    """1 - :func:`inclusion_probability`, computed without cancellation.

    ``P[Z < m] = P[Z <= m - 1] = P[Z >= 1 - m]`` by the symmetry of Z.
    """
    g = max(count, tau_level - mu, 0)
    return dlap_sf(1 - (tau_level - g + 1), scale)


@dataclass(frozen=True, slots=True)
class TreeShape:
    """The attribute tree: real attributes first, padded to a power of two.

    Attributes:
        d_real: number of real attributes (tree leaves carrying data).
        d_pad: 2^ceil(log2 d_real); padded leaves hold one constant value.
        depth: D = log2 d_pad internal levels.
        noisy_per_level: per level ℓ = 1..D, the number of noisy nodes ⌈d_real/2^ℓ⌉
            (nodes whose block holds a real attribute). Blocks of padded leaves only
            are public constants under replacement neighbours and get no noise.
    """

    d_real: int
    d_pad: int
    depth: int
    noisy_per_level: tuple[int, ...]

    @classmethod
    def for_attributes(cls, d_real: int) -> TreeShape:
        """The tree over ``d_real`` attributes (d_real >= 2)."""
        d_pad = 1 << (d_real - 1).bit_length()
        depth = d_pad.bit_length() - 1
        noisy = tuple(-(-d_real // (1 << lv)) for lv in range(1, depth + 1))
        return cls(d_real, d_pad, depth, noisy)

    @property
    def n_internal(self) -> int:
        """N_int: noisy internal nodes (on the padded tree: can exceed d_real - 1)."""
        return sum(self.noisy_per_level)


def detection_count(
    shape: TreeShape, taus: tuple[int, ...], scale: float, failure_prob: float,
    leaf_tau: int | None = None,
) -> int:
    """F_η: the smallest count f such that a key with true count >= f is missed with
    probability <= η (per key, not simultaneously for all keys).

    A key is released only if its restriction survives every noisy node; each restriction
    has count >= f, so ``P[miss] <= Σ_ℓ N_ℓ · P[f + Z <= τ_ℓ] = Σ_ℓ N_ℓ q^{f-τ_ℓ}/(1+q)``
    (discrete law, f > τ_D). The sum, over every noisy node at every level, is the
    union bound of Lemma 30 (i) of the paper, over noisy nodes only (padded-only blocks are
    constants). With leaf thresholding (``leaf_tau`` = τ₀) the d_real leaves are noisy
    nodes too and add ``d_real · q^{f-τ₀}/(1+q)``.
    """
    top = taus[-1] + 1
    q = math.exp(-1.0 / scale)
    counts = list(shape.noisy_per_level)
    levels = list(taus)
    if leaf_tau is not None:
        counts.insert(0, shape.d_real)
        levels.insert(0, leaf_tau)
    terms = [math.log(n) + t / scale for n, t in zip(counts, levels, strict=True)]
    peak = max(terms)
    log_s = peak + math.log(sum(math.exp(x - peak) for x in terms)) - math.log1p(q)
    f = max(top, math.ceil(scale * (log_s - math.log(failure_prob))))

    def miss(f: int) -> float:
        return sum(n * dlap_sf(f - t, scale) for n, t in zip(counts, levels, strict=True))

    while f > top and miss(f - 1) <= failure_prob:
        f -= 1
    while miss(f) > failure_prob:
        f += 1
    return f


def release_max_count(tau_top: int, mu: int, scale: float, delta: float) -> int:
    """X: every key whose true count is <= X is released with probability <= δ.

    A released key passed the root, where ``P[in] = P[Z >= τ_D - max(f, τ_D - μ) + 1]``.
    This is <= δ iff ``τ_D - f + 1 >= t ln(1/(δ(1+q)))``, i.e. f <= τ_D + 1 - t ln(1/(δ(1+q))).
    (our bound, in the discrete law; the clipped floor keeps every key with
    f <= τ_D - μ at q^{μ+1}/(1+q) <= δ because μ >= t ln(1/(2δ)).)
    """
    q = math.exp(-1.0 / scale)
    bound = tau_top + 1 - scale * math.log(1.0 / (delta * (1.0 + q)))
    x = math.floor(bound - 1e-9)
    while x >= 0 and dlap_sf(tau_top - max(x, tau_top - mu) + 1, scale) > delta:
        x -= 1
    return x


def _smallest_scale(t: Fraction, mu: int, eps: float) -> Fraction:
    """The smallest grid scale <= t with Lemma 28 <= eps at the (rounded-up) μ.

    Rounding μ up lowers ε_tree; giving the slack back as a smaller t keeps the delivered
    ε close to the budget. ε_tree(·, μ) decreases in t, so a bisection on the grid works;
    the float test carries a relative margin of 1e-9 against rounding error. μ/t only
    grows, so μ >= κt still holds.
    """
    lo, hi = 1, t.numerator * (SCALE_GRID // t.denominator)  # grid units; hi is feasible
    while lo < hi:
        mid = (lo + hi) // 2
        if eps_tree(mid / SCALE_GRID, mu) * _INFLATE <= eps:
            hi = mid
        else:
            lo = mid + 1
    return Fraction(hi, SCALE_GRID)


@dataclass(frozen=True, slots=True)
class TreeBudget:
    """Every public number of one heavy-hitters configuration.

    Attributes:
        shape: the attribute tree.
        eps0: the per-attribute budget the caller asked for.
        tree_scale: t, the discrete Laplace scale of the tree stage (exact rational).
        mu: per-level bias μ (integer).
        kappa: κ = ln(1/(2δ)) before rounding (μ = ceil(κt), at least 2).
        tau: base threshold τ (integer, level 1).
        taus: τ_ℓ = τ + (ℓ-1)μ for ℓ = 1..D.
        count_scale: b, the discrete Laplace scale of the released counts (None: no counts).
        eps_tree_lemma: Lemma 28 at the rounded (t, μ).
        eps_tree_naive: 2D/t (2(D+1)/t with leaf thresholding).
        eps_tree: per-attribute ε of the tree stage, min of the two.
        eps_count: per-attribute (and per-person) ε of the count stage, 2/b (0 if no counts).
        eps_attribute: ε_tree + ε_count <= eps0, the per-attribute guarantee delivered.
        eps_person: min(d_real ε_tree, 2 N / t) + ε_count, the per-person guarantee, with
            N = N_int noisy internal nodes, plus d_real with leaf thresholding.
        delta: the release guarantee's probability.
        release_max_count: X (see :func:`release_max_count`).
        failure_prob: η of the detection count.
        detection_count: F_η (see :func:`detection_count`).
        low_inclusion: per level, the probability that a candidate with count <=
            max(τ_ℓ - μ, 0) (in particular an absent one) is kept (½e^{-κ} only when
            τ_ℓ >= μ: at level 1 with τ < μ it is ½e^{-τ/t}, much larger).
        leaf_tau: τ₀ = τ - μ, the leaves' threshold, or None without leaf thresholding.
        leaf_low_inclusion: the level-0 probability of keeping a value with count <=
            max(τ₀ - μ, 0) (above ½ when τ₀ < 0), or None.
        max_rows: R, the rows of a person (group privacy: every ε above is R times its
            row-level value; 1 is the row model).
    """

    shape: TreeShape
    eps0: float
    tree_scale: Fraction
    mu: int
    kappa: float
    tau: int
    taus: tuple[int, ...]
    count_scale: Fraction | None
    eps_tree_lemma: float
    eps_tree_naive: float
    eps_tree: float
    eps_count: float
    eps_attribute: float
    eps_person: float
    delta: float
    release_max_count: int
    failure_prob: float
    detection_count: int
    low_inclusion: tuple[float, ...]
    leaf_tau: int | None = None
    leaf_low_inclusion: float | None = None
    max_rows: int = 1

    @property
    def leaf_thresholding(self) -> bool:
        """Whether the leaves are thresholded (level 0)."""
        return self.leaf_tau is not None

    @property
    def noisy_nodes(self) -> int:
        """Noisy nodes a whole-record change touches: N_int, plus d_real leaves at level 0."""
        return self.shape.n_internal + (self.shape.d_real if self.leaf_thresholding else 0)

    def tau_at(self, level: int) -> int:
        """τ_ℓ (level 0: τ₀ = τ - μ, only with leaf thresholding)."""
        if level == 0:
            if self.leaf_tau is None:
                msg = "level 0 without leaf thresholding"
                raise InternalError(msg)
            return self.leaf_tau
        return self.taus[level - 1]

    def floor(self, level: int) -> int:
        """max(τ_ℓ - μ, 0): counts at or below it all have the inclusion law of count 0."""
        return max(self.tau_at(level) - self.mu, 0)


def solve_budget(
    d_real: int,
    eps0: float,
    count_fraction: float,
    delta: float,
    threshold: float | None,
    failure_prob: float,
    leaf_thresholding: bool = False,
    max_rows: int = 1,
) -> TreeBudget:
    """The budget of a configuration (arguments validated by the spec).

    ε_count = count_fraction·ε₀ and ε_tree = ε₀ - ε_count; κ = ln(1/(2δ)) so that a key
    below the root threshold by μ is kept with probability <= δ; t from Lemma 28 rounded
    up; μ = max(ceil(κt), 2) (Lemma 28 needs μ > 1; raising μ only lowers ε_tree,
    and the slack is returned by the smallest grid t that still meets the budget);
    τ defaults to μ (τ >= μ keeps level 1's false-positive rate at ~δ), or 2μ with leaf
    thresholding (τ₀ = τ - μ >= μ keeps the leaves' rate at ~δ too). With ``max_rows``
    = R the scales are solved at ε/R per row and every ε is reported times R (module
    docstring: group privacy over a person's R rows).
    """
    rows = max_rows
    shape = TreeShape.for_attributes(d_real)
    eps_count_req = count_fraction * eps0
    eps_tree_req = eps0 - eps_count_req
    eps_tree_row = eps_tree_req / rows  # float: the 1e-9 margin of the solve dominates it
    kappa = math.log(1.0 / (2.0 * delta))
    t = round_scale_up(lam_for(eps_tree_row, kappa))
    mu = max(math.ceil(kappa * float(t)), 2)
    t = _smallest_scale(t, mu, eps_tree_row)
    t_f = float(t)
    if threshold is None:
        tau = 2 * mu if leaf_thresholding else mu
    else:
        tau = math.ceil(threshold)
    taus = tuple(tau + (lv - 1) * mu for lv in range(1, shape.depth + 1))
    leaf_tau = tau - mu if leaf_thresholding else None
    # depth-free chain bound (level 0 included; module docstring), times R rows
    lemma = rows * eps_tree(t_f, mu)
    naive = rows * 2.0 * (shape.depth + (1 if leaf_thresholding else 0)) / t_f
    e_tree = min(lemma, naive)
    if lemma > eps_tree_req * (1 + 1e-12):  # pragma: no cover - rounding is upward
        msg = "the rounded tree scale exceeds the tree budget"
        raise InternalError(msg)
    b: Fraction | None = None
    e_count = 0.0
    if count_fraction > 0:
        b = (count_scale_for(eps_count_req) if rows == 1 else
             round_scale_up(Fraction(2 * rows) / Fraction(eps_count_req)))
        e_count = 2.0 * rows / float(b)
    noisy_nodes = shape.n_internal + (d_real if leaf_thresholding else 0)
    # A person added or removed (or their number of rows changed, under a privacy unit)
    # moves one count by <= 1 per row in every noisy node: <= R·N/t (module docstring).
    # It never exceeds the replacement bound (ε_tree > 4/t and N <= 3d), kept as a max so
    # that the guarantee holds even if the constants change.
    person_tree = max(min(d_real * e_tree, rows * 2.0 * noisy_nodes / t_f),
                      rows * 1.0 * noisy_nodes / t_f)
    return TreeBudget(
        shape=shape,
        eps0=eps0,
        tree_scale=t,
        mu=mu,
        kappa=kappa,
        tau=tau,
        taus=taus,
        count_scale=b,
        eps_tree_lemma=lemma,
        eps_tree_naive=naive,
        eps_tree=e_tree,
        eps_count=e_count,
        eps_attribute=e_tree + e_count,
        eps_person=person_tree + e_count,
        delta=delta,
        release_max_count=release_max_count(taus[-1], mu, t_f, delta),
        failure_prob=failure_prob,
        detection_count=detection_count(shape, taus, t_f, failure_prob, leaf_tau),
        low_inclusion=tuple(
            inclusion_probability(0, tl, mu, t_f) for tl in taus
        ),
        leaf_tau=leaf_tau,
        leaf_low_inclusion=(None if leaf_tau is None
                            else inclusion_probability(0, leaf_tau, mu, t_f)),
        max_rows=rows,
    )
