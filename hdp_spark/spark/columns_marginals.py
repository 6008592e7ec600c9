"""Marginals, MWEM and per-attribute histograms as Spark Column aggregators:
``df.agg(hdp_marginals(cols, domains=..., eps0=...))``,
``df.groupBy(...).agg(hdp_mwem(..., keys="public"))``,
``df.agg(attribute_histograms(cols, domains=..., eps0=...))``.

The three mechanisms' answers are functions of the multiset of whole records, so they run
as the heavy hitters' Column does (:mod:`hdp_spark.spark.columns_partial`): the native
aggregate ``hdp_records`` (per group, the count of each distinct whole record recoded
against the public domains) and an Arrow UDF over the aggregated rows that runs the release
API's kernel once per group (:mod:`hdp_spark.spark.records_finalize`,
:mod:`hdp_spark.spark.records_families`). The same public memory bound: the product of the
domain sizes at most ``max_records``, refused before any job.

Each Column returns one struct per group: ``cells`` (the release API's long table as a list
of structs) and the report's scalar fields. It is also a spec: ``hs.agg(df, <column>)``,
``hs.marginals(df, <column>)`` and ``hs.mwem(df, <column>)`` run the release API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.api import attribute_histogram_spec
from hdp_spark.core.partial.mwem import MAX_DOMAIN, MAX_TUPLES
from hdp_spark.core.partial.mwem import hdp_mwem as spec_mwem
from hdp_spark.core.partial.projection import hdp_marginals as spec_marginals
from hdp_spark.errors import ParameterError
from hdp_spark.spark.columns_partial import (
    DEFAULT_MAX_RECORDS,
    check_max_records,
    record_groups,
    records_column,
)
from hdp_spark.spark.records_families import RecordSpec

__all__ = ["attribute_histograms_column", "column_for", "hdp_marginals", "hdp_mwem"]

Keys = str | Sequence[object] | None


def _make(spec: RecordSpec, keys: object, max_records: object) -> Column:
    groups = record_groups(spec, keys)
    return records_column(spec, ReleaseKey.resolve(None), groups,
                          check_max_records(max_records))


def column_for(spec: RecordSpec, *, keys: Keys = None) -> Column:
    """The Column builder of the marginals, MWEM and attribute-histogram descriptors
    (``hs.as_column(spec, keys=...)``), with the default ``max_records``.

    Privacy:
        As :func:`hdp_marginals` (the spec's family's mechanism per query and group).
    """
    return _make(spec, keys, DEFAULT_MAX_RECORDS)


def hdp_marginals(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    k: int | None = None,
    marginals: Sequence[Sequence[str]] | None = None,
    other: Mapping[str, object] | None = None,
    delta: float = 1e-6,
    max_domain: int = 2**20,
    tol: float = 1e-8,
    max_iter: int = 10_000,
    privacy_unit: str | None = None,
    alias: str | None = None,
    keys: Keys = None,
    max_records: int = DEFAULT_MAX_RECORDS,
    max_rows: int = 1,
) -> Column:
    """Partial-DP marginals (the projection mechanism) as a Spark Column aggregator (and a
    spec for ``hs.agg``/``hs.marginals``).

    Same arguments and rules as :func:`hdp_spark.hdp_marginals`, plus ``keys`` (as
    :func:`hdp_spark.spark.hdp_heavy_hitters`: omitted for ``df.agg``, ``"public"`` or a
    public key list under ``groupBy``; ``select_keys`` is refused) and ``max_records``
    (the public bound on the product of the domain sizes, each counting its extra null
    category unless ``other`` names a value; refused when the Column is used, before any
    job). One struct per group: ``cells``, the release API's table (``marginal``, one
    field per attribute, ``noisy_count``, ``projected_count``, ``projected_fraction``),
    then the report's scalar fields (``eps_attribute``, ``eps_person``, ``sigma2``,
    ``n``, ``projection_gap``, ...: see
    :data:`~hdp_spark.spark.records_families.MARGINALS_REPORT_FIELDS`). With
    ``privacy_unit`` (and ``max_rows``) the Column is for a global aggregate, as
    :func:`hdp_spark.spark.hdp_heavy_hitters`.

    Privacy:
        Per group, the release API's mechanism: ρ_j = deg(j)/σ² <= ½ε₀² per attribute j,
        |W|/σ² per person (zCDP; replacement neighbours; the group's n is public, as are
        the grouping values under ``keys="public"``). Each query that uses the Column is a
        release of its own, its noise keyed by the Column's key, the query's fingerprint,
        the aggregator's name and the group (two groups with equal counts draw
        independent noise).
    """
    spec = spec_marginals(cols, domains=domains, eps0=eps0, k=k, marginals=marginals,
                          other=other, delta=delta, max_domain=max_domain, tol=tol,
                          max_iter=max_iter, privacy_unit=privacy_unit, alias=alias,
                          max_rows=max_rows)
    return _make(spec, keys, max_records)


def hdp_mwem(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    k: int | None = None,
    marginals: Sequence[Sequence[str]] | None = None,
    rounds: int | None = None,
    per_round: int = 1,
    other: Mapping[str, object] | None = None,
    max_domain: int = MAX_DOMAIN,
    max_tuples: int = MAX_TUPLES,
    privacy_unit: str | None = None,
    alias: str | None = None,
    delta: float = 1e-6,
    keys: Keys = None,
    max_records: int = DEFAULT_MAX_RECORDS,
    max_rows: int = 1,
) -> Column:
    """Partial-DP MWEM as a Spark Column aggregator (and a spec for ``hs.agg``/``hs.mwem``).

    Same arguments and rules as :func:`hdp_spark.hdp_mwem`, plus ``keys`` and
    ``max_records`` (as :func:`hdp_marginals`; so are ``privacy_unit`` and ``max_rows``).
    One struct per group: ``cells``, the
    release API's table (``marginal``, one field per attribute, ``mwem_fraction``), then
    the report's scalar fields (``rounds``, ``eps_round``, ``rho_attribute``,
    ``rho_person``, ``n``, ...: see
    :data:`~hdp_spark.spark.records_families.MWEM_REPORT_FIELDS`). With ``rounds=None``
    each group's T follows its own (public) n, as the release API's on that group's rows.

    Privacy:
        Per group, the release API's mechanism: ρ = ½ε₀² per attribute, (ℓ² + ℓ)ε₀²/4 per
        person (zCDP; replacement neighbours, the group's n public). Noise keyed per
        query and group as :func:`hdp_marginals`.
    """
    spec = spec_mwem(cols, domains=domains, eps0=eps0, k=k, marginals=marginals,
                     rounds=rounds, per_round=per_round, other=other, max_domain=max_domain,
                     max_tuples=max_tuples, privacy_unit=privacy_unit, alias=alias,
                     delta=delta, max_rows=max_rows)
    return _make(spec, keys, max_records)


def attribute_histograms_column(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    other: Mapping[str, object] | None = None,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    alias: str | None = None,
    keys: Keys = None,
    max_records: int = DEFAULT_MAX_RECORDS,
    max_rows: int = 1,
    **unexpected: Any,
) -> Column:
    """Per-attribute histograms as a Spark Column aggregator (``hs.attribute_histograms``
    called with a list of column names first).

    Same arguments as :func:`hdp_spark.spark.attribute_histograms` without the DataFrame
    and ``unsafe_seed`` (use the Column's ``.unsafe_seed(seed)``), plus ``alias`` (default
    ``attribute_histograms``), ``keys`` and ``max_records`` (as :func:`hdp_marginals`).
    One struct per group: ``cells``, the release API's long table (``attribute``,
    ``value``, ``code``, ``noisy_count``, ``count_ci_low``, ``count_ci_high``), then the
    report's scalar fields (see
    :data:`~hdp_spark.spark.records_families.HISTOGRAM_REPORT_FIELDS`).

    Privacy:
        Per group, the release API's mechanism: ε₀ per attribute (discrete Laplace of
        scale 2/ε₀ rounded up on every cell; L1 sensitivity 2 per attribute change),
        d·ε₀ per person (replacement neighbours, the group's n public). Noise keyed per
        query and group as :func:`hdp_marginals`.
    """
    if unexpected:
        name = sorted(unexpected)[0]
        hint = (" (a Column's noise is seeded by .unsafe_seed(seed))"
                if name == "unsafe_seed" else "")
        msg = (f"attribute_histograms(cols, ...) (the Column form) got an unexpected "
               f"keyword `{name}`{hint}.")
        raise ParameterError(msg)
    spec = attribute_histogram_spec(cols, domains=domains, eps0=eps0, other=other, beta=beta,
                                    privacy_unit=privacy_unit, alias=alias, max_rows=max_rows)
    return _make(spec, keys, max_records)
