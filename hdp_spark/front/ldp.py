"""``ldp_agg`` and ``ldp_release``: aggregation of local-DP reports, once for every engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.kernels import release_specs
from hdp_spark.core.ldp.release import LdpReleaseResult, validate_ldp_specs
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.schema import TableSchema
from hdp_spark.front import spec_of

__all__ = ["ldp_agg", "ldp_release"]


def ldp_release(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    already_randomized: bool = False,
    schema: TableSchema | None = None,
) -> LdpReleaseResult:
    """Aggregate LDP reports and return the engine-neutral result (see :func:`ldp_agg`).

    Privacy:
        As :func:`ldp_agg`: post-processing of ε_i-LDP reports, no noise, no key.
    """
    checked = validate_ldp_specs([spec_of(s) for s in specs])
    r = release_specs(engine, checked, by=by, keys=keys, schema=schema,
                      already_randomized=already_randomized)
    return LdpReleaseResult(r.by, r.keys, checked, r.results, r.tables)


def ldp_agg(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    already_randomized: bool = False,
    schema: TableSchema | None = None,
) -> Any:
    """Aggregate local-DP reports of a DataFrame (pandas or Spark).

    Args:
        df: one row per report, with its ε column.
        *specs: from :func:`hdp_spark.ldp.ldp_mean`, ``ldp_mean_vector``, ``ldp_distribution``
            (on Spark also their Column aggregators, ``hs.ldp_mean(...)``: their specs are used).
        by: optional group-by column(s), public grouping attributes only: a column a
            spec reads as data (report column) or as its ε column is refused, as grouping
            by it would publish exact per-value counts through ``_n``.
        keys: the public key set of a grouped aggregation; every key gets a row.
            Key sets must be public inputs from outside the data; the rules, what is
            refused and the output order are those of ``agg``.
        already_randomized: declare that the report columns already hold ε_i-LDP reports
            made outside this library (on the devices, the production case). Without it,
            every report column must carry the marker ``ldp_simulate`` writes (pandas:
            ``df.attrs["hdp_ldp_reports"]``, kept by copies, slices and
            ``to_parquet``/``read_parquet``; Spark: the field metadata
            ``{"hdp_ldp_report": mechanism}``, kept by ``select`` and parquet round
            trips): ``ldp_agg`` adds no noise, so raw values would be released exactly.
            ``ParameterError`` otherwise.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``: every spec's ε
            column must be the schema's, the report columns must be declared, and the
            blocking rules run first (counts only).

    Returns:
        One row per group; columns documented in the spec constructors. On Spark, one
        job per aggregator (native expressions and aggregates only); the result is
        materialized on the driver, so re-reading it never re-runs anything.

    Privacy:
        Adds no noise and needs no key: the reports are already ε_i-LDP and the output
        is post-processing (deterministic; repeated calls give the same numbers).
    """
    checked = validate_ldp_specs([spec_of(s) for s in specs])
    return release_specs(engine, checked, by=by, keys=keys, schema=schema,
                         already_randomized=already_randomized).materialize(engine)
