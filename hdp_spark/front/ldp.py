"""``ldp_agg`` and ``ldp_release``: aggregation of local-DP reports, once for every engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.kernels import release_specs
from hdp_spark.core.ldp.release import LdpReleaseResult, validate_ldp_specs
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.schema import TableSchema
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of

__all__ = ["ldp_agg", "ldp_release"]


def ldp_release(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    already_randomized: bool = False,
    schema: TableSchema | None = None,
    privacy_unit: str | None = None,
    max_groups: int = 1,
    max_rows: int = 1,
    unsafe_seed: int | str | bytes | None = None,
) -> LdpReleaseResult:
    """Aggregate LDP reports and return the engine-neutral result (see :func:`ldp_agg`).

    Privacy:
        As :func:`ldp_agg`: post-processing of ε_i-LDP reports, no noise; under
        ``privacy_unit`` one report per person, chosen under a fresh key.
    """
    checked = validate_ldp_specs([spec_of(s) for s in specs])
    r = release_specs(engine, checked, by=by, keys=keys, schema=schema,
                      already_randomized=already_randomized, unsafe_seed=unsafe_seed,
                      unit=_unit(privacy_unit, max_groups, max_rows, unsafe_seed))
    return LdpReleaseResult(r.by, r.keys, checked, r.results, r.tables)


def ldp_agg(
    engine: Engine,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    already_randomized: bool = False,
    schema: TableSchema | None = None,
    privacy_unit: str | None = None,
    max_groups: int = 1,
    max_rows: int = 1,
    unsafe_seed: int | str | bytes | None = None,
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
        privacy_unit: the column that identifies a person (integers or strings). Without
            it **one report is one person**. With it, every row with the same non-null id
            is one person, and the aggregation reads ONE report of each: among the
            person's reports at their smallest ε (null, NaN, negative count as 0), sorted
            by value, the one at a position drawn by the release's keyed PRF from the
            person alone (never from a value), so a person's loss is their smallest ε
            whatever their number of reports. Global only (``by``/``keys`` refused);
            ``_n`` and ``_eps_levels`` then count persons. See docs/privacy_unit.md.
        max_groups, max_rows: must stay 1 (one report per person).
        unsafe_seed: under ``privacy_unit``, a reproducible choice of the kept reports
            for tests. UNSAFE: anyone who knows it knows which report is kept, and the
            guarantee needs that position unknown (the output is marked).

    Returns:
        One row per group; columns documented in the spec constructors. On Spark, one
        job per aggregator (native expressions and aggregates only); the result is
        materialized on the driver, so re-reading it never re-runs anything.

    Privacy:
        Adds no noise and needs no key: the reports are already ε_i-LDP and the output
        is post-processing (deterministic; repeated calls give the same numbers).
        Without ``privacy_unit`` a row is a person: a person with k reports loses the
        sum of their k ε. Under ``privacy_unit``, person p loses at most ε_p (the
        smallest ε of their rows) for neighbours that replace all of p's rows (any
        number, any values) keeping ε_p: the kept report's law is the average of the
        ε_p-LDP laws of p's candidates, with weights that do not read the data (the
        argument: :mod:`hdp_spark.core.privacy_unit.ldp`). Adding or removing a person
        is NOT covered: ``_n`` (the number of persons with a usable report) and the
        interval widths depend on the count, public here as n is in the one-row model.
        Each call draws a fresh key, so two calls may keep different reports; each
        spends ε_p.
    """
    checked = validate_ldp_specs([spec_of(s) for s in specs])
    return release_specs(engine, checked, by=by, keys=keys, schema=schema,
                         already_randomized=already_randomized, unsafe_seed=unsafe_seed,
                         unit=_unit(privacy_unit, max_groups, max_rows, unsafe_seed)
                         ).materialize(engine)


def _unit(privacy_unit: str | None, max_groups: int, max_rows: int,
          unsafe_seed: object) -> UnitOptions | None:
    """``ldp_agg``'s privacy-unit keywords as :class:`UnitOptions` (None without a unit).

    Raises:
        ParameterError: a bound or ``unsafe_seed`` given without ``privacy_unit``, or a
            bound other than 1 (raised by the unit's checks, naming it).
    """
    if privacy_unit is None:
        for name, value, default in (("max_groups", max_groups, 1),
                                     ("max_rows", max_rows, 1),
                                     ("unsafe_seed", unsafe_seed, None)):
            if value is not default and value != default:
                msg = (f"`{name}` applies under a privacy unit only (ldp_agg adds no noise "
                       f"and keeps every report without one): it needs `privacy_unit`, got "
                       f"None (and `{name}`={value!r}).")
                raise ParameterError(msg)
        return None
    return UnitOptions(PrivacyUnit(privacy_unit, max_groups, max_rows))
