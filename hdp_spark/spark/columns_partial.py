"""The partial-DP heavy hitters as a Spark Column aggregator:
``df.agg(hdp_heavy_hitters(cols, domains=..., eps0=...))`` and
``df.groupBy(...).agg(hdp_heavy_hitters(..., keys="public"))``.

Two expressions, as the other Column aggregators (see :mod:`hdp_spark.spark.columns`, whose
composition rule applies unchanged): the native aggregate ``hdp_records`` of the JVM
extension (per group, the count of each distinct whole record, recoded against the public
domains with the release API's rules, in one pass with map-side partial aggregation) and an
Arrow UDF over the aggregated rows that runs the release API's mechanism once per group
(:mod:`hdp_spark.spark.records_finalize`).

Memory, from public facts: a group's native state holds at most min(rows of the group,
product of the domain sizes) entries (16 bytes each, 32 with the hash map's free slots);
the Column refuses, when it is used and before any job, a product of the domain sizes above
``max_records`` (default 2**20: at most 32 MiB per group).

The per-aggregator facts the lead's descriptor registry will want are in :data:`DESCRIPTOR`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import is_remote

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.spec import AttributeDomain, HeavyHittersSpec
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import ParameterError
from hdp_spark.spark._common import UNSAFE_SEED_MARK
from hdp_spark.spark._heavy_hitters import LOOKUP_JOIN_MIN
from hdp_spark.spark.columns import (
    Inputs,
    _Aggregate,
    _ClassicAggregate,
    _groups,
    built_column,
)
from hdp_spark.spark.extension import (
    MISSING_MESSAGE,
    ExtensionMissingError,
)
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.records_families import RecordSpec, family_of
from hdp_spark.spark.records_finalize import arrow_finalize_records, record_fields

__all__ = ["DEFAULT_MAX_RECORDS", "MAX_RECORDS_LIMIT", "PERSONS_PREFIX", "RECORDS",
           "check_max_records", "column_for", "domain_values", "hdp_heavy_hitters",
           "native_records", "no_selection", "record_groups", "records_column"]

RECORDS = "hdp_records"
"""The extension's native aggregate of record counts (``HdpRecords``)."""

DEFAULT_MAX_RECORDS = 2**20
"""Default bound on the product of the domain sizes of a heavy-hitters Column."""

MAX_RECORDS_LIMIT = 2**24
"""The largest ``max_records`` taken (a group's state up to 512 MiB)."""

def domain_values(dom: AttributeDomain) -> list[str]:
    """The domain as the native aggregate reads it: strings as they are, booleans as
    ``true``/``false``, numbers as ``i:<int>`` (compared exactly with an integral or decimal
    column) or ``d:<float>`` (compared as doubles) -- the release API's Spark recoding
    (``encode_codes``): an integer domain's values are integer literals or a bigint lookup,
    a float domain's are literals of their own type up to ``LOOKUP_JOIN_MIN`` values, else
    a double lookup.

    Privacy:
        None: a function of the public domain.
    """
    if dom.kind == "str":
        return [str(v) for v in dom.values]
    if dom.kind == "bool":
        return ["true" if v else "false" for v in dom.values]
    exact = dom.output_type == "int" or len(dom.values) <= LOOKUP_JOIN_MIN
    return [f"i:{v}" if exact and isinstance(v, int) else f"d:{float(v)!r}"  # type: ignore[arg-type]
            for v in dom.values]


def native_records(spec: RecordSpec, groups: str) -> Column:
    """The ``hdp_records`` aggregate of ``spec``'s attributes with the group decision
    ``groups`` (``"cells"``: raw statistics for tests).

    Privacy:
        NOT a release: exact counts of distinct records, for the finalize (and tests) only.
        Recoding is public and data-independent; a bad value never raises.
    """
    args: list[Column] = [F.lit(groups)]
    for dom in spec.domains:
        args += [F.col(dom.column), F.lit(dom.kind),
                 F.array(*[F.lit(v) for v in domain_values(dom)]).cast("array<string>"),
                 F.lit(dom.size), F.lit(dom.other_code)]
    out: Column = F.call_function(RECORDS, *args)
    return out


def _problem(spec: RecordSpec, max_records: int) -> str | None:
    """Why ``spec`` cannot run as a Column (None: it can): public facts only."""
    label = family_of(spec).label
    space = math.prod(d.size for d in spec.domains)
    if space > max_records:
        return (f"the {label} Column keeps per group the count of each distinct record, "
                f"so its public bound is the product of the domain sizes (each counting its "
                f"extra null category unless `other` names a value): {space} > `max_records` "
                f"= {max_records}. Raise `max_records` (up to {MAX_RECORDS_LIMIT}; each record "
                "costs up to 32 bytes of executor memory per group), merge values, or use the "
                "release API (hs.agg(df, spec)), whose passes need no such bound.")
    return None


def _finalize_udf(spec: RecordSpec, key: ReleaseKey) -> Any:  # design-ok: per group batch
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable)
                          for n, f in record_fields(spec)])
    arrow_type = to_arrow_type(rtype)

    def finalize(cells: pa.Array) -> pa.Array:  # Arrow in, Arrow out: a scalar Arrow UDF
        return arrow_finalize_records(spec, key, cells, arrow_type)

    finalize.__name__ = f"{family_of(spec).label}_finalize"
    return F.arrow_udf(finalize, rtype)  # type: ignore[attr-defined]  # design-ok: over aggregated rows


def _build(spec: RecordSpec, key: ReleaseKey, groups: str) -> Column:
    out: Column = _finalize_udf(spec, key)(native_records(spec, groups))  # design-ok
    if key.unsafe:  # a seeded Column's output is marked, as the release API's
        return out.alias(spec.name, metadata={UNSAFE_SEED_MARK: True})
    return out.alias(spec.name)


class _Heavy(_Aggregate):
    """What both heavy-hitters Column classes add: the public memory bound."""

    max_records: int

    def unsafe_seed(self, seed: int | str | bytes) -> Column:
        """The same aggregator with noise from a caller's seed (tests only: not private)."""
        return records_column(self.spec, ReleaseKey.resolve(seed), self.groups,
                              self.max_records)


class _ClassicHeavy(_Heavy, _ClassicAggregate):
    def __init__(self, spec: RecordSpec, key: ReleaseKey, groups: str,
                 max_records: int) -> None:
        _ClassicAggregate.__init__(self, spec, key, groups, Inputs())
        object.__setattr__(self, "max_records", max_records)

    @property
    def _jc(self) -> Any:  # type: ignore[override]
        if self.__dict__.get("_built") is None:
            problem = _problem(self.spec, self.max_records)
            if problem is not None:
                raise ParameterError(problem)
        return built_column(self, lambda: _build(self.spec, self.key, self.groups))


def records_column(spec: RecordSpec, key: ReleaseKey, groups: str, max_records: int
                   ) -> Column:
    """The record-count Column of a partial-DP ``spec`` (heavy hitters, marginals, MWEM or
    attribute histograms) under ``key``, group decision ``groups`` and bound
    ``max_records`` (checked when the Column is used, before any job).

    Privacy:
        Per query and group, the spec's release API mechanism under
        :func:`~hdp_spark.spark.records_finalize.group_key`.
    """
    if not is_remote():
        return _ClassicHeavy(spec, key, groups, max_records)
    from pyspark.sql.connect.column import Column as ConnectColumn

    class _ConnectHeavy(_Heavy, ConnectColumn):
        """Checks, when its plan is built, the public bound and the server's extension."""

        def to_plan(self, session: Any) -> Any:
            problem = _problem(self.spec, self.max_records)
            if problem is not None:
                raise ParameterError(problem)
            active = SparkSession.getActiveSession()
            if active is not None and not active.catalog.functionExists(RECORDS):
                raise ExtensionMissingError(MISSING_MESSAGE)
            return ConnectColumn.to_plan(self, session)

        def alias(self, *alias: str, **kwargs: Any) -> Any:
            return wrap(ConnectColumn.alias(self, *alias, **kwargs))

        name = alias

    def wrap(built: Any) -> Column:
        col = _ConnectHeavy(built._expr)
        col.spec, col.key, col.groups, col.inputs = spec, key, groups, Inputs()
        col.max_records = max_records
        return col

    return wrap(_build(spec, key, groups))


PERSONS_PREFIX = "persons:"
"""The group decision of a partial-DP Column under ``privacy_unit`` (the extension's
``PersonRows``: only the rows of persons with at most ``max_rows`` rows, global only)."""


def record_groups(spec: RecordSpec, keys: object) -> str:
    """The group decision of a partial-DP Column: ``keys``'s (:func:`no_selection`, then
    the Column rule's), or, under ``privacy_unit``, the bounding of persons' rows, which
    the extension inserts below a global aggregate (the release API's
    :func:`~hdp_spark.spark._heavy_hitters.bounded_persons`, in native expressions).

    Raises:
        ParameterError: ``select_keys``, or ``keys`` with ``privacy_unit`` (a person would
            count once per group; the release API's partial-DP family is global too).

    Privacy:
        Public arguments only.
    """
    label = family_of(spec).label
    no_selection(keys, label)
    if spec.privacy_unit is None:
        return _groups(keys)
    if keys is not None:
        msg = (f"`keys` of {label} must be omitted with `privacy_unit` "
               f"({spec.privacy_unit!r}): the unit bounds a person's rows over the whole "
               f"table, so the Column is for a global aggregate, df.agg(...); got "
               f"keys={keys!r}.")
        raise ParameterError(msg)
    return PERSONS_PREFIX + json.dumps({"max_rows": spec.max_rows, "unit": spec.privacy_unit},
                                       sort_keys=True)


def no_selection(keys: object, label: str = "hdp_heavy_hitters") -> None:
    """Refuse ``keys=select_keys(...)`` (public: the caller's group decision).

    Privacy:
        None: checks a public argument.
    """
    if isinstance(keys, SelectKeys):
        msg = (f"`keys` of {label} must be 'public', a list of public keys or omitted: "
               f"select_keys(...) (DP partition selection) is not available for {label}.")
        raise ParameterError(msg)


def check_max_records(max_records: object) -> int:
    """``max_records`` if it is an int in [1, MAX_RECORDS_LIMIT].

    Privacy:
        None: checks a public argument.
    """
    if (isinstance(max_records, bool) or not isinstance(max_records, int)
            or not 1 <= max_records <= MAX_RECORDS_LIMIT):
        msg = (f"`max_records` must be an int in [1, {MAX_RECORDS_LIMIT}], got "
               f"{max_records!r}.")
        raise ParameterError(msg)
    return max_records


def column_for(spec: HeavyHittersSpec, *, keys: str | Sequence[object] | None = None
               ) -> Column:
    """The heavy hitters' Column builder of their descriptor (``hs.as_column(spec)``): the
    Column of :func:`hdp_heavy_hitters` for a spec, with the default ``max_records``.

    Privacy:
        As :func:`hdp_heavy_hitters`.
    """
    return records_column(spec, ReleaseKey.resolve(None), record_groups(spec, keys),
                          DEFAULT_MAX_RECORDS)


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
    keys: str | Sequence[object] | None = None,
    max_records: int = DEFAULT_MAX_RECORDS,
    max_rows: int = 1,
) -> Column:
    """Partial-DP heavy hitters as a Spark Column aggregator (and a spec for ``agg``).

    Same arguments and rules as :func:`hdp_spark.hdp_heavy_hitters`, plus ``keys`` and
    ``max_records``. Use it as ``df.agg(hdp_heavy_hitters(...))`` or, with a group
    decision, ``df.groupBy(...).agg(hdp_heavy_hitters(..., keys="public"))`` (every group
    found is published) or ``keys=[...]`` (a public key list: only those groups' rows are
    aggregated); ``select_keys`` is not taken. One struct column per group: ``records``,
    the release API's list of released records (the attribute values, ``noisy_count``,
    ``count_ci_low``, ``count_ci_high``), then the report's scalar fields (``eps_person``,
    ``release_max_count``, ``mu``, ``kappa``, ...: see
    :data:`~hdp_spark.spark.records_finalize.REPORT_FIELDS`). ``hs.agg(df, <this>)`` and
    ``hs.heavy_hitters(df, <this>)`` run the release API with its spec.

    With ``privacy_unit`` (and ``max_rows``) the Column is for a global aggregate
    (``keys`` omitted): the extension keeps, below the aggregate, the rows of the persons
    with at most ``max_rows`` rows, as the release API does (one shuffle by person). As a
    Column it needs, before any job, the product of the domain sizes at most
    ``max_records`` (the public bound of a group's native state: see this module's
    docstring); otherwise :class:`~hdp_spark.errors.ParameterError` when the Column is
    used.

    Privacy:
        Per group, the release API's mechanism: ε₀ per attribute (per-attribute DP) and the
        report's ``eps_person`` per person (replacement neighbours; the group's n is public,
        as are the grouping values under ``keys="public"``). Each query that uses the
        Column is a release of its own (:mod:`hdp_spark.spark.columns`), its noise keyed by
        the Column's key, the query's fingerprint, the group and the exact counts.
    """
    from hdp_spark.aggregators import hdp_heavy_hitters as spec_heavy_hitters

    check_max_records(max_records)
    spec = spec_heavy_hitters(
        cols, domains=domains, eps0=eps0, delta=delta, threshold=threshold,
        count_fraction=count_fraction, other=other, failure_prob=failure_prob, beta=beta,
        privacy_unit=privacy_unit, max_candidates=max_candidates, alias=alias,
        leaf_thresholding=leaf_thresholding, max_rows=max_rows)
    return records_column(spec, ReleaseKey.resolve(None), record_groups(spec, keys),
                          max_records)
