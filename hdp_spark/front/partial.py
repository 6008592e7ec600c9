"""The partial-DP (per-attribute) releases, once for every engine: heavy hitters,
marginals, MWEM and per-attribute histograms (Ghazi et al., *Differentially Private
Heavy Hitters and Marginals under Partial DP*; the mechanisms are in
:mod:`hdp_spark.core.partial`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hdp_spark.core.kernels import (
    ATTRIBUTE_HISTOGRAM_FIELDS,
    HeavyHittersKernel,
    MarginalsKernel,
    MwemKernel,
    release_specs,
)
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.api import attribute_histogram_spec
from hdp_spark.core.partial.heavy_hitters import HeavyHittersResult
from hdp_spark.core.partial.histograms import (
    HISTOGRAM_COLUMNS,
    HistogramResult,
    finalize_histograms,
)
from hdp_spark.core.partial.mwem import MwemResult, MwemSpec
from hdp_spark.core.partial.output import PartialRelease
from hdp_spark.core.partial.projection import MarginalsResult, MarginalsSpec
from hdp_spark.core.partial.spec import HeavyHittersSpec
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.schema import TableSchema
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of

__all__ = [
    "attribute_histograms",
    "heavy_hitters",
    "marginals",
    "mwem",
    "release_heavy_hitters",
    "release_histograms",
    "release_marginals",
]


def _checked(spec: object, cls: type, constructor: str) -> None:
    if not isinstance(spec, cls):
        msg = f"`spec` must come from {constructor}(...), got {type(spec).__name__}."
        raise ParameterError(msg)


def release_heavy_hitters(
    engine: Engine,
    spec: HeavyHittersSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> HeavyHittersResult:
    """Run one heavy-hitters release and return the engine-neutral result.

    Privacy:
        As :func:`heavy_hitters` (one release, fresh noise unless ``unsafe_seed``).
    """
    spec = spec_of(spec)  # a Spark Column aggregator hands out its spec
    _checked(spec, HeavyHittersSpec, "hdp_heavy_hitters")
    r = release_specs(engine, [spec], schema=schema, unsafe_seed=unsafe_seed)
    result: HeavyHittersResult = r.results[spec.name][()]
    return result


def heavy_hitters(
    engine: Engine,
    spec: HeavyHittersSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> PartialRelease:
    """Release the partial-DP heavy hitters of a DataFrame (pandas or Spark).

    Args:
        df: one row per person, with the attribute columns of ``spec``.
        spec: from :func:`hdp_spark.hdp_heavy_hitters`.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production:
            anyone who knows the seed can remove the noise.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``: the attribute
            columns (and ``privacy_unit``) must be declared, and its blocking rules run
            first (counts only), before any noise is drawn.

    Returns:
        ``.table``: one row per released key, sorted by key (domain order): the attribute
        columns (null for the extra "other" category), ``noisy_count``,
        ``count_ci_low``, ``count_ci_high`` (null when ``count_fraction`` is 0);
        ``.report``: the public :class:`~hdp_spark.core.partial.HeavyHittersReport`.

    Engines:
        On Spark, one job per tree level over the rows, one small job over the root's
        aggregate for the released counts (``privacy_unit`` adds a window over the id); the
        table is a DataFrame built from the released rows.

    Privacy:
        See :func:`hdp_spark.hdp_heavy_hitters`: ε₀ per attribute, the report's
        ``eps_person`` per person (replacement neighbours, n public). Each call is one
        release with fresh noise; calling twice spends twice. The table is materialized.
    """
    spec = spec_of(spec)  # a Spark Column aggregator hands out its spec
    result = release_heavy_hitters(engine, spec, unsafe_seed=unsafe_seed, schema=schema)
    kernel = HeavyHittersKernel()
    table = engine.materialize((), [(f.suffix, f) for f in kernel.items(spec)],
                               kernel.table_rows(spec, result), result.report.unsafe_seed)
    return PartialRelease(table, result.report)


def release_histograms(
    engine: Engine,
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    other: Mapping[str, object] | None = None,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    unsafe_seed: int | str | bytes | None = None,
    max_rows: int = 1,
) -> HistogramResult:
    """Engine-neutral result of :func:`attribute_histograms`.

    Privacy:
        As :func:`attribute_histograms` (one release, fresh noise unless ``unsafe_seed``).
    """
    spec = attribute_histogram_spec(
        cols, domains=domains, eps0=eps0, other=other, beta=beta, privacy_unit=privacy_unit,
        max_rows=max_rows,
    )
    counts = engine.attribute_counts(spec)
    return finalize_histograms(spec, counts, ReleaseKey.resolve(unsafe_seed))


def attribute_histograms(
    engine: Engine,
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    other: Mapping[str, object] | None = None,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    unsafe_seed: int | str | bytes | None = None,
    max_rows: int = 1,
) -> PartialRelease:
    """Release each attribute's histogram over its public domain under per-attribute ε₀.

    Args:
        df: one row per person (pandas or Spark DataFrame; on Spark, one job, plus one
            with ``privacy_unit``).
        cols: attribute columns.
        domains: public values of every attribute (``{col: [values...]}``).
        eps0: per-attribute budget ε₀ (pure DP).
        other: ``{col: value}``: the declared value absorbing null/out-of-domain values;
            other columns get an extra "other" category (``value`` null).
        beta: the count intervals hold the noise with probability >= 1 - beta.
        privacy_unit: optional id column (the privacy unit): only persons with at most
            ``max_rows`` rows are counted, with all their rows (rows of an id with more,
            and rows without an id, are left out; no error).
        unsafe_seed: reproducible noise for tests. UNSAFE in production.
        max_rows: with ``privacy_unit``, the most rows a counted person has (default 1);
            the noise scale is 2·max_rows/ε₀ (docs/partial_dp.md).

    On Spark, ``attribute_histograms(cols, domains=..., eps0=..., ...)`` with a list of column
    names first (no DataFrame) is the Column aggregator instead, for ``df.agg(...)`` and
    ``df.groupBy(...).agg(..., keys="public")``
    (:func:`hdp_spark.spark.columns_marginals.attribute_histograms_column`).

    Returns:
        ``.table``: long format, one row per (attribute, domain value), every value of
        every domain included: ``attribute``, ``value`` (the domain value as text, null
        for the extra category), ``code``, ``noisy_count``, ``count_ci_low``,
        ``count_ci_high``; ``.report``: :class:`~hdp_spark.core.partial.HistogramReport`.

    Privacy:
        Protected unit: one attribute of one person, ε₀ (each histogram has L1
        sensitivity 2 under a change of its attribute and reads no other attribute:
        parallel composition, Lemma 10). Per person (whole record): the report's
        ``eps_person`` = d·ε₀ pure, or ``rho_person`` = d·ε₀²/2 zCDP. ε₀ enters only
        through the noise scale 2/ε₀ (rounded up). Public: cols, domains, other, n.
        Null/out-of-domain values are recoded, never raised on. With ``privacy_unit``:
        one attribute of one person across all their rows (or all of a person's rows,
        per person), scale 2·max_rows/ε₀; n need not be public (module docstring of
        :mod:`hdp_spark.core.partial.histograms`).
    """
    result = release_histograms(
        engine, cols, domains=domains, eps0=eps0, other=other, beta=beta,
        privacy_unit=privacy_unit, unsafe_seed=unsafe_seed, max_rows=max_rows,
    )
    rows = [tuple(r[c] for c in HISTOGRAM_COLUMNS) for r in result.rows]
    table = engine.materialize((), [(f.suffix, f) for f in ATTRIBUTE_HISTOGRAM_FIELDS], rows,
                               result.report.unsafe_seed)
    return PartialRelease(table, result.report)


def release_marginals(
    engine: Engine,
    spec: MarginalsSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> MarginalsResult:
    """Run one marginals release and return the engine-neutral result.

    Privacy:
        As :func:`marginals` (one release, fresh noise unless ``unsafe_seed``).
    """
    spec = spec_of(spec)  # a Spark Column aggregator hands out its spec
    _checked(spec, MarginalsSpec, "hdp_marginals")
    r = release_specs(engine, [spec], schema=schema, unsafe_seed=unsafe_seed)
    result: MarginalsResult = r.results[spec.name][()]
    return result


def marginals(
    engine: Engine,
    spec: MarginalsSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> PartialRelease:
    """Release partial-DP marginals of a DataFrame (the projection mechanism).

    Args:
        df: one row per person, with the attribute columns of ``spec``.
        spec: from :func:`hdp_spark.hdp_marginals`.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df`` (blocking rules
            run first).

    Returns:
        ``.table``: long format, one row per (marginal, cell), every cell of every
        marginal: ``marginal`` (its columns joined by ``,``), one column per attribute
        (the cell's value; null outside the marginal or for the extra "other" category),
        ``noisy_count`` (exact count + discrete Gaussian), ``projected_count`` and
        ``projected_fraction`` (the consistent marginals after projection);
        ``.report``: the :class:`~hdp_spark.core.partial.projection.MarginalsReport`.

    Engines:
        One aggregation pass counts every marginal's cells (pandas in memory; Spark one
        native ``groupBy`` count job, no per-row Python); noise and the projection run on
        the driver over the aggregated cells.

    Privacy:
        See :func:`hdp_spark.hdp_marginals`: ρ_j = deg(j)/σ² <= ½ε₀² per attribute j,
        |W|/σ² per person (zCDP; replacement neighbours, n public). Each call is one
        release with fresh noise. The table is materialized.
    """
    spec = spec_of(spec)  # a Spark Column aggregator hands out its spec
    result = release_marginals(engine, spec, unsafe_seed=unsafe_seed, schema=schema)
    kernel = MarginalsKernel()
    table = engine.materialize((), [(f.suffix, f) for f in kernel.items(spec)],
                               kernel.table_rows(spec, result), result.report.unsafe_seed)
    return PartialRelease(table, result.report)


def mwem(
    engine: Engine,
    spec: MwemSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
) -> PartialRelease:
    """Release the answers of a partial-DP MWEM synthetic distribution (§4.2).

    One aggregation pass counts every cell of every marginal (native, as for
    ``marginals``); the rounds run on the driver over the public domain.

    Returns:
        ``.table``: one row per (marginal, cell): ``marginal``, one column per attribute
        (null outside the marginal or for the extra "other" category), ``mwem_fraction``;
        ``.report``: a dict (budget, T, ε_T, the selected query tuples).

    Privacy:
        See :func:`hdp_spark.hdp_mwem`: ρ = ½ε₀² per attribute, (ℓ² + ℓ)ε₀²/4 per person
        (zCDP; replacement neighbours, n public). Each call is one release.
    """
    spec = spec_of(spec)  # a Spark Column aggregator hands out its spec
    _checked(spec, MwemSpec, "hdp_mwem")
    kernel = MwemKernel()
    result: MwemResult = kernel.run(spec, engine, (), ((),),
                                    ReleaseKey.resolve(unsafe_seed))[()]
    table = engine.materialize((), [(f.suffix, f) for f in kernel.items(spec)],
                               kernel.table_rows(spec, result), result.report["unsafe_seed"])
    return PartialRelease(table, result.report)
