"""Public constructors of the partial-DP releases (engine-agnostic; both backends take them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hdp_spark.core.partial.spec import AttributeHistogramSpec, HeavyHittersSpec, build_domains

__all__ = ["attribute_histogram_spec", "hdp_heavy_hitters"]


def hdp_heavy_hitters(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    delta: float = 1e-6,
    threshold: float | None = None,
    count_fraction: float = 0.5,
    other: Mapping[str, object] | None = None,
    failure_prob: float = 0.05,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    max_candidates: int = 10**8,
    alias: str | None = None,
    leaf_thresholding: bool = False,
    max_rows: int = 1,
) -> HeavyHittersSpec:
    """Partial-DP heavy hitters: frequent whole records over ``cols``, per-attribute ε₀.

    Pass the result to ``hdp_spark.pandas._heavy_hitters`` or ``hdp_spark.spark._heavy_hitters``.
    The input has one row per person; a record is the tuple of its ``cols`` values. The
    release is the list of records (keys) found frequent by a PrivTree-style tree over the
    attributes (Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More Granular
    Differential Privacy Guarantees*, Algorithm 2), each with a fresh noisy count. The
    budget is split between the tree and the counts as ε_tree + ε_count (the paper's
    Theorem 15 charges 0.5ε per stage, which is too little for both: see
    :mod:`hdp_spark.core.partial.budget`).

    Args:
        cols: attribute columns, in tree order (public; it affects utility only: adjacent
            attributes are paired first). At least 2.
        domains: public values of every attribute, ``{col: [values...]}``; the order
            fixes the output order. Values are all str, all numbers or all bool.
        eps0: per-attribute budget ε₀ = ε_tree + ε_count (pure DP).
        delta: release guarantee: a key whose true count is at most the reported
            ``release_max_count`` is released with probability <= delta; sets the tree's
            bias κ = ln(1/(2δ)). Must be in (0, 0.5).
        threshold: base (level-1) threshold τ as an absolute count, rounded up; the
            threshold grows by μ per level. Default: τ = μ (recommended minimum), 2μ with
            ``leaf_thresholding``.
        count_fraction: ε_count = count_fraction · ε₀ goes to the released counts; 0
            releases keys only (counts null).
        other: ``{col: value}``: the declared value that absorbs null and out-of-domain
            values of ``col``. Columns not listed get an extra category for them,
            reported as null.
        failure_prob: η of the reported detection count F_η.
        beta: released count intervals hold the count noise with probability >= 1 - beta.
        privacy_unit: id column; if given, only persons with at most ``max_rows`` rows
            are counted, with all their rows: the rows of an id with more and rows
            without an id are left out (whether a person counts depends on their number
            of rows only, never on a value; no error). Without it the caller asserts one
            row per person.
        max_candidates: stop with an error if a node's candidate product exceeds this.
        alias: the output column name inside ``agg`` (default ``"heavy_hitters"``).
        leaf_thresholding: first keep, per attribute, only the values whose noisy count
            passes τ₀ = τ - μ (level-0 thresholding, same noise and clipping), so level 1
            pairs survivors instead of whole domains: use it for large domains, which
            otherwise only ``max_candidates`` stops. Same per-attribute ε₀; per person
            the tree costs min(d·ε_tree, 2(N_int + d)/t) instead of min(d·ε_tree,
            2N_int/t) (report ``eps_person``).
        max_rows: with ``privacy_unit``, the most rows a counted person has (R, default
            1); the mechanism runs at ε₀/R per row, so a person's R rows cost at most ε₀
            per attribute (group privacy; scales grow about R-fold).

    Returns:
        A :class:`~hdp_spark.core.partial.spec.HeavyHittersSpec`; ``spec.budget`` holds
        every public number of the configuration.

    Raises:
        ParameterError: a parameter breaks its rule (domains, budgets, key-space size).

    Privacy:
        Protected unit: one attribute of one person (per-attribute DP, ε₀-∇₀DP), and,
        with the weaker ``eps_person`` of the report, one person's whole record
        (replacement neighbours; n is public). ε₀ enters as ε_tree = (1 -
        count_fraction)·ε₀ through the tree noise scale t = (2/ε_tree)(1 + 1/(1 -
        e^{-κ})) (Lemma 28, rounded up) and as ε_count = count_fraction·ε₀ through the
        count noise scale 2/ε_count (sensitivity 2: a flip moves the person between two
        keys). Per person: ``eps_person`` = min(d·ε_tree, 2N/t) + ε_count, N the noisy
        nodes of the tree (N_int, plus d with ``leaf_thresholding``). With
        ``max_rows`` = R the scales are solved at ε₀/R and the report's ε figures are a
        person's over their R rows (pure DP: group privacy, no δ term; n public as the
        persons' numbers of rows are). Public: ``cols``
        and their order, ``domains``, ``other``, every parameter above and the released
        list. Only released keys and fresh noisy counts leave
        the driver; the tree's noisy values and exact counts never do. Null or
        out-of-domain values are recoded to the public "other" value, never raised on.
        Per-attribute DP does not hide membership, nor information repeated across
        several attributes: see ``docs/partial_dp.md``.
    """
    return HeavyHittersSpec(
        domains=build_domains(cols, domains, other),
        eps0=eps0,
        delta=delta,
        threshold=threshold,
        count_fraction=count_fraction,
        failure_prob=failure_prob,
        beta=beta,
        privacy_unit=privacy_unit,
        max_candidates=max_candidates,
        alias=alias,
        leaf_thresholding=leaf_thresholding,
        max_rows=max_rows,
    )


def attribute_histogram_spec(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    other: Mapping[str, object] | None = None,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    alias: str | None = None,
    max_rows: int = 1,
) -> AttributeHistogramSpec:
    """The validated spec of ``attribute_histograms`` (same keywords, plus ``alias``: the
    output name inside ``agg`` and of the Spark Column; see there).

    Privacy:
        None: validates public parameters (the mechanism is ``attribute_histograms``'s).
    """
    return AttributeHistogramSpec(
        domains=build_domains(cols, domains, other),
        eps0=eps0,
        beta=beta,
        privacy_unit=privacy_unit,
        alias=alias,
        max_rows=max_rows,
    )
