"""The local-DP aggregators as Spark Column aggregators: ``df.agg(ldp_mean(...))`` and
``df.groupBy(...).agg(ldp_mean(..., keys="public"))`` (``ldp_mean_vector``,
``ldp_distribution`` alike).

Two expressions, as the other Column aggregators (:mod:`hdp_spark.spark.columns`): the native
aggregate ``hdp_ldp_cells`` of the JVM extension (per group and (ε level, index), the row
count and the exact limb sums of the reports' fixed-point integers, over the release API's
own per-row expressions, :mod:`hdp_spark.spark.ldp_inputs`) and an Arrow UDF over the
aggregated rows that runs the release API's finalize once per group
(:mod:`hdp_spark.spark.ldp_finalize`). The struct's fields are the release API's output
columns without the alias prefix (``estimate``, ``raw``, ``ci_low``, ``ci_high``,
``radius``, ``bias_bound``, ..., ``n``, ``skipped``, ``weights``, ``fallback``,
``eps_levels``).

Group decisions: ``keys`` omitted (refused in a grouped aggregate), ``"public"`` (every
group found is published, with its n) or a public key list (only rows with those grouping
values are aggregated; a key without rows has no row, where the release API gives it an
empty group). ``keys=select_keys(...)`` is refused: DP partition selection protects group
membership with central noise, which a local-DP release has no budget for (the ε_i of the
reports is spent on the devices); declare the keys public or pass a key list.

Privacy unit: ``privacy_unit="user_id"`` keeps ONE report per person, as
``ldp_agg(..., privacy_unit=...)`` does, under a secret key that no printed plan shows
(:mod:`hdp_spark.spark.ldp_unit`); global only.

Markers: as ``ldp_agg``, the Column refuses, at analysis, a report column that carries no
``hdp_ldp_report`` marker (``ldp_simulate`` writes it) unless the Column is built with
``already_randomized=True``, and a marker of another mechanism always.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as ClassicColumn
from pyspark.sql.utils import is_remote

from hdp_spark.aggregators.registry import aggregator_of
from hdp_spark.core.ldp.common import LdpWeights
from hdp_spark.core.ldp.oracle import FrequencyOracle
from hdp_spark.core.ldp.release import report_roles
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import bounding_key
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import ParameterError
from hdp_spark.spark.columns import Inputs, _Aggregate, _groups, built_column
from hdp_spark.spark.expressions import level_sql
from hdp_spark.spark.extension import (
    MISSING_MESSAGE,
    ExtensionMissingError,
)
from hdp_spark.spark.ldp_finalize import arrow_finalize_ldp, ldp_fields
from hdp_spark.spark.ldp_inputs import row_inputs
from hdp_spark.spark.ldp_unit import ldp_unit_decision, secret_column
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.sql_text import ident

__all__ = ["LDP_CELLS", "column_for", "ldp_distribution", "ldp_mean", "ldp_mean_vector",
           "native_ldp_cells"]

LDP_CELLS = "hdp_ldp_cells"
"""The extension's native aggregate of local-DP cells (``HdpLdpCells``)."""

Keys = str | Sequence[object] | SelectKeys | None


def native_ldp_cells(spec: Any, groups: str, already_randomized: bool = False,
                     secret: Column | None = None) -> Column:
    """The ``hdp_ldp_cells`` aggregate of ``spec`` with the group decision ``groups``
    (``"cells"``: raw statistics for tests).

    Privacy:
        NOT a release: the exact cells of the reports, for the finalize (and tests) only.
        The reports are already ε_i-LDP; a malformed report is counted, never raised on.
    """
    text = level_sql(ident(spec.eps))
    level = F.expr(text)
    index, q = row_inputs(spec, text)
    roles = report_roles(spec)
    checked = [spec.eps, *(column for _, column, _ in roles)]
    args = [F.lit(groups), level, index, q, F.lit(roles[0][2]), F.lit(already_randomized),
            F.array(*[F.lit(r) for r in ["ε", *(role for role, _, _ in roles)]]),
            *[F.col(c) for c in checked]]
    if secret is not None:  # a privacy unit's bounding key: never a literal (ldp_unit)
        args.append(secret)
    out: Column = F.call_function(LDP_CELLS, *args)
    return out


def _main(spec: Any) -> str:
    field = aggregator_of(spec).column_field
    if field is None:  # a registration without a Column field: not this module's spec
        msg = f"`{type(spec).__name__}` is not a local-DP Column aggregator."
        raise ParameterError(msg)
    return field


def _finalize_udf(spec: Any) -> Any:  # design-ok: per group batch
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable)
                          for n, f in ldp_fields(spec, _main(spec))])
    arrow_type = to_arrow_type(rtype)

    def finalize(cells: pa.Array) -> pa.Array:  # Arrow in, Arrow out: a scalar Arrow UDF
        return arrow_finalize_ldp(spec, cells, arrow_type)

    finalize.__name__ = f"hdp_{aggregator_of(spec).name}_finalize"
    return F.arrow_udf(finalize, rtype)  # type: ignore[attr-defined]  # design-ok: over aggregated rows


def _build(spec: Any, groups: str, declared: bool, key: ReleaseKey | None) -> Column:
    secret = None if key is None else secret_column(bounding_key(key))
    cells = native_ldp_cells(spec, groups, declared, secret)
    out: Column = _finalize_udf(spec)(cells)  # design-ok: per group
    return out.alias(spec.name)


class _Ldp(_Aggregate):
    """What both local-DP Column classes add: the caller's ``already_randomized`` and, under
    a privacy unit, the key that places each person's kept report (None without one)."""

    declared: bool
    unit_key: ReleaseKey | None

    def unsafe_seed(self, seed: int | str | bytes) -> Column:
        """Under a privacy unit: the same Column with the kept reports placed by a caller's
        seed (tests only: anyone who knows the seed knows which report is kept). Refused
        without one: a local-DP Column draws no noise (the reports carry it)."""
        if self.unit_key is None:
            msg = (f"`{self.spec.name}` draws no noise (the reports are already ε_i-LDP), "
                   "so there is no seed to set: use the Column as it is.")
            raise ParameterError(msg)
        return _column(self.spec, self.groups, self.declared, ReleaseKey.resolve(seed))

    @property
    def key(self) -> ReleaseKey:  # type: ignore[override]
        """The Column's key under a privacy unit (each query's is derived from it and the
        query's fingerprint, :meth:`ReleaseKey.for_query`)."""
        if self.unit_key is None:
            msg = f"`{self.spec.name}` has no key: it takes one under `privacy_unit` only."
            raise ParameterError(msg)
        return self.unit_key


class _ClassicLdp(_Ldp, ClassicColumn):
    def __init__(self, spec: Any, groups: str, declared: bool,
                 unit_key: ReleaseKey | None) -> None:
        for name, value in (("spec", spec), ("groups", groups), ("inputs", Inputs()),
                            ("declared", declared), ("unit_key", unit_key),
                            ("_built", None)):
            object.__setattr__(self, name, value)

    @property
    def _jc(self) -> Any:  # type: ignore[override]
        return built_column(self, lambda: _build(self.spec, self.groups, self.declared,
                                                 self.unit_key))

    def __repr__(self) -> str:
        return f"Column<'{type(self.spec).__name__}({self.spec.name})'>"


def _column(spec: Any, groups: str, declared: bool, unit_key: ReleaseKey | None = None
            ) -> Column:
    if not is_remote():
        return _ClassicLdp(spec, groups, declared, unit_key)
    from pyspark.sql.connect.column import Column as ConnectColumn

    class _ConnectLdp(_Ldp, ConnectColumn):
        """Checks, when its plan is built, that the server has the extension."""

        def to_plan(self, session: Any) -> Any:
            active = SparkSession.getActiveSession()
            if active is not None and not active.catalog.functionExists(LDP_CELLS):
                raise ExtensionMissingError(MISSING_MESSAGE)
            return ConnectColumn.to_plan(self, session)

        def alias(self, *alias: str, **kwargs: Any) -> Any:
            return wrap(ConnectColumn.alias(self, *alias, **kwargs))

        name = alias

    def wrap(built: Any) -> Column:
        col = _ConnectLdp(built._expr)
        col.spec, col.groups, col.inputs, col.declared = spec, groups, Inputs(), declared
        col.unit_key = unit_key
        return col

    return wrap(_build(spec, groups, declared, unit_key))


def _unit_column(spec: Any, keys: Keys, already_randomized: object,
                 privacy_unit: str | None, max_groups: int | None,
                 max_rows: int | None) -> Column:
    """The Column of ``spec`` with its group decision (under ``privacy_unit``:
    :func:`~hdp_spark.spark.ldp_unit.ldp_unit_decision` and a fresh key)."""
    if privacy_unit is None:
        for name, value in (("max_groups", max_groups), ("max_rows", max_rows)):
            if value is not None:
                msg = (f"`{name}` applies under a privacy unit only: it needs "
                       f"`privacy_unit`, got None (and `{name}`={value!r}).")
                raise ParameterError(msg)
        return _column(spec, _decision(keys, already_randomized), bool(already_randomized))
    groups = ldp_unit_decision(spec, keys, privacy_unit, max_groups, max_rows)
    _decision(None, already_randomized)
    return _column(spec, groups, bool(already_randomized), ReleaseKey.fresh())


def _decision(keys: Keys, already_randomized: object) -> str:
    if isinstance(keys, SelectKeys):
        msg = ("`keys` of a local-DP Column aggregator must be 'public', a list of public "
               "keys or omitted: select_keys(...) (DP partition selection) needs central "
               "noise on each group's membership, which local-DP reports do not pay for.")
        raise ParameterError(msg)
    if not isinstance(already_randomized, bool):
        msg = f"`already_randomized` must be True or False, got {already_randomized!r}."
        raise ParameterError(msg)
    return _groups(keys)


def column_for(spec: Any, *, keys: Keys = None) -> Column:
    """The local-DP aggregators' Column builder of their descriptors (``hs.as_column``):
    the Column of ``spec`` (an ``ldp_mean``, ``ldp_mean_vector`` or ``ldp_distribution``
    spec) with ``already_randomized=False`` (report columns must carry the marker).

    Privacy:
        As :func:`ldp_mean`: post-processing of ε_i-LDP reports, no noise.
    """
    return _column(spec, _decision(keys, False), False)


def ldp_mean(
    report: str,
    *,
    eps: str,
    mechanism: Literal["laplace", "rr"],
    lower: float = -1.0,
    upper: float = 1.0,
    beta: float = 0.05,
    weights: LdpWeights = "paper",
    fallback: bool = True,
    alias: str | None = None,
    keys: Keys = None,
    already_randomized: bool = False,
    privacy_unit: str | None = None,
    max_groups: int | None = None,
    max_rows: int | None = None,
) -> Column:
    """Heterogeneous-LDP mean of scalar reports as a Spark Column aggregator (and a spec
    for ``ldp_agg``/``ldp_release``).

    Same arguments and output fields as :func:`hdp_spark.ldp.ldp_mean` (the struct's
    fields are its output columns without the prefix: ``estimate``, ``raw``, ``ci_low``,
    ``ci_high``, ``radius``, ``bias_bound``, ``mechanism``, ``n``, ``skipped``,
    ``weights``, ``fallback``, ``eps_levels``), plus ``keys`` (``"public"``, a public key
    list, or omitted for a global aggregate; ``select_keys`` is refused: see this module's
    docstring) and ``already_randomized`` (as ``ldp_agg``'s: without it the report column
    must carry the ``hdp_ldp_report`` marker, checked at analysis). A group's numbers equal
    ``hs.ldp_agg(df, <this>, by=..., keys=[group], already_randomized=...)``'s.
    ``privacy_unit`` (with ``max_groups``/``max_rows`` 1 or omitted): one report per person,
    global only, equal to ``hs.ldp_agg(df, <this>, privacy_unit=...)`` under the query's key
    (:mod:`hdp_spark.spark.ldp_unit`).

    Privacy:
        Adds no noise and needs no key: each report is already ε_i-LDP (randomized on the
        devices) and the estimate is post-processing, so re-evaluating a query, or running
        another one, reveals nothing the reports do not. Public: the ε column (hence n and
        the ε histogram of each group), the bounds, β, and under ``keys="public"`` the
        grouping values. Under ``privacy_unit`` a person loses at most their smallest ε:
        the kept report sits at a position drawn by a PRF of a secret key and the person
        (:mod:`hdp_spark.core.privacy_unit.ldp`); re-evaluation keeps the same reports.
    """
    from hdp_spark.aggregators import ldp_mean as spec_mean

    spec = spec_mean(report, eps=eps, mechanism=mechanism, lower=lower, upper=upper,
                     beta=beta, weights=weights, fallback=fallback, alias=alias)
    return _unit_column(spec, keys, already_randomized, privacy_unit, max_groups, max_rows)


def ldp_mean_vector(
    report: str,
    *,
    eps: str,
    d: int,
    radius: float = 1.0,
    beta: float = 0.05,
    weights: LdpWeights = "paper",
    fallback: bool = True,
    alias: str | None = None,
    keys: Keys = None,
    already_randomized: bool = False,
    privacy_unit: str | None = None,
    max_groups: int | None = None,
    max_rows: int | None = None,
) -> Column:
    """Heterogeneous-LDP mean of d-dimensional Duchi reports as a Spark Column aggregator
    (and a spec for ``ldp_agg``).

    Same arguments and output fields as :func:`hdp_spark.ldp.ldp_mean_vector`; ``keys``
    and ``already_randomized`` as in :func:`ldp_mean`. Per row one native
    ``transform`` encodes the d coordinates (the release API's expressions).

    Privacy:
        As :func:`ldp_mean`: no noise, post-processing of ε_i-LDP reports. Public: the ε
        column, n, d, r, β, and the grouping values under ``keys="public"``.
    """
    from hdp_spark.aggregators import ldp_mean_vector as spec_vector

    spec = spec_vector(report, eps=eps, d=d, radius=radius, beta=beta, weights=weights,
                       fallback=fallback, alias=alias)
    return _unit_column(spec, keys, already_randomized, privacy_unit, max_groups, max_rows)


def ldp_distribution(
    index: str,
    sign: str,
    *,
    eps: str,
    oracle: FrequencyOracle,
    beta: float = 0.05,
    weights: LdpWeights = "paper",
    fallback: bool = True,
    alias: str | None = None,
    keys: Keys = None,
    already_randomized: bool = False,
    privacy_unit: str | None = None,
    max_groups: int | None = None,
    max_rows: int | None = None,
) -> Column:
    """Heterogeneous-LDP distribution from frequency-oracle reports as a Spark Column
    aggregator (and a spec for ``ldp_agg``).

    Same arguments and output fields as :func:`hdp_spark.ldp.ldp_distribution`; ``keys``
    and ``already_randomized`` as in :func:`ldp_mean`. A group's native state holds
    #ε levels × m cells (m: the oracle's public row count).

    Privacy:
        As :func:`ldp_mean`: no noise, post-processing of ε_i-LDP reports. Public: the ε
        column, n, d, m, Φ (its seed), and the grouping values under ``keys="public"``.
    """
    from hdp_spark.aggregators import ldp_distribution as spec_distribution

    spec = spec_distribution(index, sign, eps=eps, oracle=oracle, beta=beta, weights=weights,
                             fallback=fallback, alias=alias)
    return _unit_column(spec, keys, already_randomized, privacy_unit, max_groups, max_rows)


