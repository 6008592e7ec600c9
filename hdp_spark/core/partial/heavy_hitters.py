"""Driver side of the partial-DP heavy hitters: tree decisions, count stage, report.

Privacy-critical: the per-attribute ε₀ of ``hdp_heavy_hitters`` depends on every
candidate of every noisy node being processed with the inclusion law of Algorithm 2 (§5.1)
of Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More Granular Differential Privacy
Guarantees* (ε_tree by its Lemma 28, budget in :mod:`.budget`), on the count stage's
discrete Laplace of scale 2/ε_count, and on the released lists not revealing which keys
were seen. The arguments follow.

The engines answer two kinds of questions (the :class:`TreeCounter` protocol): per tree
level, in one data pass, the exact counts of the candidates of every noisy node whose count
exceeds the level's floor; and once at the end, the exact counts of the released
whole-record keys (from the root pass's aggregate). Everything else happens here, on
small tables, with all randomness from :mod:`hdp_spark.core.noise`.

Processing every candidate, cheaply (our construction)
------------------------------------------------------
At level ℓ a candidate with count f is kept with probability
``P[max(f, τ_ℓ - μ) + Z > τ_ℓ]``. Every candidate with ``f <= floor_ℓ = max(τ_ℓ - μ, 0)``
-- absent ones included -- has the same probability p_ℓ = P[Z >= τ_ℓ - floor_ℓ + 1]:

* candidates with f > floor_ℓ ("high", returned by the engine) get one explicit discrete
  Laplace draw each, in sorted key order, from one keyed stream per node;
* the N_low = |L_left|·|L_right| - #high others get K ~ Bin(N_low, p_ℓ) (exact, the same
  discrete law: :func:`~hdp_spark.core.noise.binomial.binomial_discrete_laplace_sf`) and a
  uniform K-subset of them.

Independent Bernoulli(p_ℓ) draws for exchangeable candidates have exactly this law, so
the output distribution is that of Algorithm 2 with every candidate processed. The list
L_I is built after all decisions and emitted sorted, so neither order nor representation
tells which kept keys were high and which were drawn by the Binomial (that bit, count >= 1
or count 0, is not covered by the DP argument).

Noise binding: each node's streams are bound to (level, node, parameters, the candidate
product size and the exact high counts); the count stage to the released keys and their
exact counts. Same data, same output; changed data, unrelated noise.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from hdp_spark.core.noise import ReleaseKey, discrete_laplace, encode_context
from hdp_spark.core.noise.binomial import binomial_discrete_laplace_sf, uniform_subset
from hdp_spark.core.partial.budget import TreeBudget
from hdp_spark.core.partial.spec import HeavyHittersSpec, unit_neighbours
from hdp_spark.core.partial.tree import (
    ChildFilter,
    NodeRequest,
    decode_key,
    key_space,
    key_weights,
    node_attrs,
)
from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "COUNT_COLUMNS",
    "HeavyHittersReport",
    "HeavyHittersResult",
    "TreeCounter",
    "count_half_width",
    "decide_node",
    "run_heavy_hitters",
]

COUNT_COLUMNS: tuple[str, ...] = ("noisy_count", "count_ci_low", "count_ci_high")
"""Output columns after the attribute columns."""


class TreeCounter(Protocol):
    """What an engine provides: exact counts, one data pass per call."""

    def count_level(
        self, requests: Sequence[NodeRequest], floor: int
    ) -> dict[int, dict[int, int]]:
        """Per requested node, ``{node key: count}`` of the keys with count > floor."""
        ...

    def count_keys(self, weights: Sequence[int], keys: Sequence[int]) -> dict[int, int]:
        """Exact counts of the given whole-record keys (key = Σ code_j · weights_j over
        all real attributes); absent keys may be left out. Called once, after the root
        level, with keys from the root's candidate product: an engine may read them from
        the root pass's aggregate (every row with such a key passed the root's filters)."""
        ...


def count_half_width(scale: Fraction, beta: float) -> int:
    """h with P(|Z| > h) <= β for Z discrete Laplace of ``scale``.

    P(|Z| >= m) = 2q^m/(1+q), q = e^{-1/scale}; h = m - 1 for the smallest such m.
    """
    s = float(scale)
    q = math.exp(-1.0 / s)
    m = max(1, math.ceil(s * math.log(2.0 / (beta * (1.0 + q)))))
    while m > 1 and 2.0 * math.exp(-(m - 1) / s) / (1.0 + q) <= beta:
        m -= 1
    while 2.0 * math.exp(-m / s) / (1.0 + q) > beta:
        m += 1
    return m - 1


def decide_node(
    level: int,
    node: int,
    left: Sequence[int],
    right: Sequence[int],
    right_space: int,
    high: Mapping[int, int],
    budget: TreeBudget,
    key: ReleaseKey,
) -> tuple[int, ...]:
    """The surviving list L_I of one noisy node (sorted node keys).

    A leaf at level 0 (leaf thresholding) is the node whose "children" are its whole
    domain (``left`` = range(size)) and the one-key list ``right`` = (0,), right_space 1.

    Args:
        level: ℓ (1..D; 0 for a thresholded leaf).
        node: index of the node in its level.
        left: sorted surviving keys of the left child.
        right: sorted surviving keys of the right child.
        right_space: M(I_right), the size of the right child's key space.
        high: exact counts of the candidates with count > floor_ℓ (from the engine).
        budget: the public budget (t, μ, τ_ℓ).
        key: the release key.
    """
    tau = budget.tau_at(level)
    floor = budget.floor(level)
    t = budget.tree_scale
    n_right = len(right)
    n_cand = len(left) * n_right
    items = sorted(high.items())
    index_of: list[int] = []
    for k, f in items:
        kl, kr = divmod(k, right_space)
        i, j = bisect.bisect_left(left, kl), bisect.bisect_left(right, kr)
        if f <= floor or i == len(left) or left[i] != kl or j == n_right or right[j] != kr:
            msg = "an engine returned a count outside the candidate product"
            raise InternalError(msg)
        index_of.append(i * n_right + j)
    context = ("hh/tree", level, node, t, tau, budget.mu, n_cand, tuple(items))
    explicit = key.stream(encode_context(("explicit", *context)))
    # Explicit draws, in sorted key order: kept iff max(f, floor) + Z > τ_ℓ, with f > floor.
    kept = [k for k, f in items if f + discrete_laplace(t, explicit) > tau]
    # All other candidates share P[Z >= τ_ℓ - floor + 1]: one Binomial, one uniform subset.
    low = key.stream(encode_context(("low", *context)))
    n_low = n_cand - len(items)
    k_low = binomial_discrete_laplace_sf(n_low, tau - floor + 1, t, low)
    ranks = uniform_subset(n_low, k_low, low)
    skipped = sorted(index_of)
    pos = 0
    for r in ranks:  # ascending: the r-th product index that is not high
        idx = r + pos
        while pos < len(skipped) and skipped[pos] <= idx:
            pos += 1
            idx = r + pos
        kept.append(left[idx // n_right] * right_space + right[idx % n_right])
    return tuple(sorted(kept))


@dataclass(frozen=True, slots=True)
class HeavyHittersReport:
    """Public metadata of a heavy-hitters release (identical for every dataset).

    Field meanings are documented in ``docs/partial_dp.md`` and in
    :class:`~hdp_spark.core.partial.budget.TreeBudget`.
    """

    attributes: tuple[str, ...]
    d: int
    d_pad: int
    depth: int
    noisy_nodes: int
    neighbours: str
    noise: str
    eps0: float
    eps_attribute: float
    eps_tree: float
    eps_tree_lemma28: float
    eps_tree_naive: float
    eps_count: float
    eps_person: float
    eps_person_conversion: str
    eps_person_group_privacy: float
    rho_attribute: float
    rho_person: float
    tree_scale: float
    mu: int
    kappa: float
    thresholds: tuple[int, ...]
    count_scale: float | None
    count_ci_level: float | None
    delta: float
    release_max_count: int
    failure_prob: float
    detection_count: int
    low_inclusion_per_level: tuple[float, ...]
    leaf_thresholding: bool
    leaf_threshold: int | None
    leaf_low_inclusion: float | None
    privacy_unit: str | None
    unit_checked: bool
    warnings: tuple[str, ...]
    unsafe_seed: bool
    max_rows: int = 1

    def as_dict(self) -> dict[str, Any]:
        """The report as a plain dict (tuples as lists)."""
        return {
            name: list(v) if isinstance(v, tuple) else v
            for name in self.__dataclass_fields__
            for v in (getattr(self, name),)
        }


def _warnings(budget: TreeBudget) -> tuple[str, ...]:
    out = []
    if budget.tau < budget.mu:
        out.append(
            f"threshold {budget.tau} < mu {budget.mu}: at level 1 an absent candidate is kept "
            f"with probability {budget.low_inclusion[0]:.3g} (> delta); raise `threshold` "
            "to at least mu to keep candidate lists small."
        )
    if budget.leaf_tau is not None and budget.leaf_tau < budget.mu:
        out.append(
            f"leaf threshold {budget.leaf_tau} < mu {budget.mu}: an absent attribute value is "
            f"kept with probability {budget.leaf_low_inclusion:.3g} (> delta); raise "
            "`threshold` to at least 2*mu to keep the leaf lists small."
        )
    if budget.release_max_count < 0:
        out.append("no count is covered by the release guarantee at this delta and threshold.")
    return tuple(out)


def build_report(spec: HeavyHittersSpec, unsafe: bool) -> HeavyHittersReport:
    """The report of ``spec`` (a function of public parameters only)."""
    b = spec.budget
    shape = b.shape
    t = float(b.tree_scale)
    return HeavyHittersReport(
        attributes=spec.cols,
        d=shape.d_real,
        d_pad=shape.d_pad,
        depth=shape.depth,
        noisy_nodes=b.noisy_nodes,
        neighbours=unit_neighbours(spec.privacy_unit, b.max_rows),
        noise="exact discrete Laplace (tree and counts)",
        eps0=b.eps0,
        eps_attribute=b.eps_attribute,
        eps_tree=b.eps_tree,
        eps_tree_lemma28=b.eps_tree_lemma,
        eps_tree_naive=b.eps_tree_naive,
        eps_count=b.eps_count,
        eps_person=b.eps_person,
        eps_person_conversion=(
            f"sequential composition: tree min(d*eps_tree, 2*N/t) = "
            f"min({shape.d_real}*{b.eps_tree:.6g}, 2*{b.noisy_nodes}/{t:.6g}) "
            + (f"with N = N_int + d = {shape.n_internal} + {shape.d_real} (leaves thresholded) "
               if b.leaf_thresholding else f"with N = N_int = {shape.n_internal} ")
            + f"+ count stage eps_count = {b.eps_count:.6g} (L1 sensitivity 2 per person)"
            + (f"; every eps is {b.max_rows} x its row-level value (group privacy over a "
               f"person's {b.max_rows} rows, pure DP)" if b.max_rows > 1 else "")
        ),
        eps_person_group_privacy=shape.d_real * b.eps_attribute,
        rho_attribute=0.5 * b.eps_attribute**2,
        rho_person=0.5 * b.eps_person**2,
        tree_scale=t,
        mu=b.mu,
        kappa=b.kappa,
        thresholds=b.taus,
        count_scale=None if b.count_scale is None else float(b.count_scale),
        count_ci_level=None if b.count_scale is None else 1.0 - spec.beta,
        delta=b.delta,
        release_max_count=b.release_max_count,
        failure_prob=b.failure_prob,
        detection_count=b.detection_count,
        low_inclusion_per_level=b.low_inclusion,
        leaf_thresholding=b.leaf_thresholding,
        leaf_threshold=b.leaf_tau,
        leaf_low_inclusion=b.leaf_low_inclusion,
        privacy_unit=spec.privacy_unit,
        unit_checked=spec.privacy_unit is not None,
        warnings=_warnings(b),
        unsafe_seed=unsafe,
        max_rows=b.max_rows,
    )


@dataclass(frozen=True, slots=True)
class HeavyHittersResult:
    """Everything one release computed (engine-neutral).

    Attributes:
        cols: attribute columns.
        rows: one dict per released key, sorted by key: the attribute values (null for
            the extra "other" category), ``noisy_count``, ``count_ci_low``,
            ``count_ci_high`` (None when ``count_fraction`` is 0).
        report: the public metadata.
    """

    cols: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    report: HeavyHittersReport


def _engine_filter(
    survivors: tuple[int, ...], counts: Mapping[int, int] | None, floor: int, prune: bool
) -> tuple[int, ...]:
    """The child keys an engine must keep rows for, to count a node's high candidates.

    A node key whose count exceeds ``floor`` is a candidate (both halves survived) and
    each half's count is at least its own, hence above ``floor`` too. The previous level
    returned the exact count of every child key above *its* floor, which is <= this
    level's floor (floors grow by μ per level), so the halves that can still be high are
    known exactly: restricting the rows to them gives the same counts for every high
    candidate, and fewer rows to aggregate. This only shapes the engine's work; the
    counts, hence the release, are identical. Not used at the root, whose aggregate also
    serves the released keys' exact counts (they may have halves at or below the floor).
    """
    if not prune or counts is None:
        return survivors
    return tuple(k for k in survivors if counts.get(k, 0) > floor)


def run_heavy_hitters(
    spec: HeavyHittersSpec, counter: TreeCounter, release_key: ReleaseKey
) -> HeavyHittersResult:
    """Run the tree (D level passes) and the count stage of one release."""
    b = spec.budget
    shape = b.shape
    sizes = [dom.size for dom in spec.domains]
    d = shape.d_real
    # lists[i]: surviving keys of node i of the previous level; leaves: whole domains.
    lists: list[tuple[int, ...]] = [tuple(range(sizes[j])) if j < d else (0,)
                                    for j in range(shape.d_pad)]
    # high[i]: exact counts of the previous level's node i above that level's floor.
    high: list[Mapping[int, int] | None] = [None] * shape.d_pad
    if b.leaf_thresholding:
        # Level 0: every real attribute is a noisy node whose candidates are its whole
        # domain (one pass: per attribute, the counts of its values above the floor).
        floor0 = b.floor(0)
        leaf_counts = counter.count_level(
            [NodeRequest(j, (j,), (1,), ()) for j in range(d)], floor0)
        for j in range(d):
            node_high = leaf_counts.get(j, {})
            lists[j] = decide_node(0, j, lists[j], (0,), 1, node_high, b, release_key)
            high[j] = node_high
    for level in range(1, shape.depth + 1):
        n_nodes = shape.d_pad >> level
        floor = b.floor(level)
        requests: list[NodeRequest] = []
        for i in range(n_nodes):
            attrs = node_attrs(level, i, d)
            if not attrs:
                continue
            filters = []
            for child in (2 * i, 2 * i + 1):
                c_attrs = node_attrs(level - 1, child, d)
                members = _engine_filter(lists[child], high[child], floor,
                                         prune=level < shape.depth)
                if len(members) < key_space(c_attrs, sizes):
                    filters.append(ChildFilter(c_attrs, key_weights(c_attrs, sizes), members))
            n_cand = len(lists[2 * i]) * len(lists[2 * i + 1])
            if n_cand > spec.max_candidates:
                msg = (
                    f"a level-{level} node has more candidates than `max_candidates` = "
                    f"{spec.max_candidates}; raise `threshold` or lower `delta` (the candidate "
                    "lists are differentially private, so this stop is post-processing)."
                )
                raise ParameterError(msg)
            if all(f.members for f in filters):  # an empty filter: no candidate is high
                requests.append(NodeRequest(i, attrs, key_weights(attrs, sizes),
                                            tuple(filters)))
        counts = counter.count_level(requests, floor) if requests else {}
        new_lists: list[tuple[int, ...]] = []
        new_high: list[Mapping[int, int] | None] = []
        for i in range(n_nodes):
            attrs = node_attrs(level, i, d)
            if not attrs:
                new_lists.append((0,))
                new_high.append(None)
                continue
            right_attrs = node_attrs(level - 1, 2 * i + 1, d)
            node_high = counts.get(i, {})
            new_lists.append(
                decide_node(level, i, lists[2 * i], lists[2 * i + 1],
                            key_space(right_attrs, sizes), node_high, b, release_key)
            )
            new_high.append(node_high)
        lists, high = new_lists, new_high
    released = lists[0]
    all_attrs = tuple(range(d))
    rows: list[dict[str, Any]] = []
    noisy: list[int | None]
    width: int | None = None
    if released and b.count_scale is not None:
        exact = counter.count_keys(key_weights(all_attrs, sizes), released)
        pairs = tuple((k, int(exact.get(k, 0))) for k in released)
        stream = release_key.stream(encode_context(("hh/count", b.count_scale, pairs)))
        noisy = [f + discrete_laplace(b.count_scale, stream) for _, f in pairs]
        width = count_half_width(b.count_scale, spec.beta)
    else:
        noisy = [None] * len(released)
    for k, value in zip(released, noisy, strict=True):
        codes = decode_key(k, all_attrs, sizes)
        row: dict[str, Any] = {
            dom.column: dom.value(c) for dom, c in zip(spec.domains, codes, strict=True)
        }
        row["noisy_count"] = value
        row["count_ci_low"] = None if value is None or width is None else value - width
        row["count_ci_high"] = None if value is None or width is None else value + width
        rows.append(row)
    return HeavyHittersResult(spec.cols, tuple(rows), build_report(spec, release_key.unsafe))
