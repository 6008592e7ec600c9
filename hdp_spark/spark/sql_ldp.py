"""The SQL form of the local-DP aggregators:
``hdp_ldp_mean(report, eps, '<JSON options>'[, 'public'])``,
``hdp_ldp_distribution(index, sign, eps, '<JSON options>'[, 'public'])`` and
``hdp_ldp_mean_vector(report, eps, '<JSON options>'[, 'public'])``; under a privacy unit,
global only, each with the central functions' tail ``'unit', '<id column>', 1, 1``
(``max_groups`` and ``max_rows`` must be 1: one report per person).

The JVM extension (``HdpSqlLdp``) builds the Column's native ``hdp_ldp_cells`` aggregate over
the release API's per-row SQL templates (:func:`~hdp_spark.spark.ldp_inputs.mean_sql`,
:func:`~hdp_spark.spark.ldp_inputs.distribution_sql`, the level of
:func:`~hdp_spark.spark.expressions.level_sql`), which :func:`register_ldp` puts in the
session conf; it reads from the options only the bounds (mean), the oracle's ``m``
(distribution), ``d`` and ``radius`` (vector) and ``already_randomized`` (the report marker
is checked at analysis, as for the Column). The finalizes registered here build the spec
from the same JSON with the release API's constructor (every other check, with its words),
refuse the call unless the constants the JVM used are the spec's, and run the Column's
finalize
(:func:`~hdp_spark.spark.ldp_finalize.arrow_finalize_ldp`).

The vector mean's per-row encoding is one ``transform`` over the report array with the
encoding's clamp built from the constant A_d of the dimension
(:func:`~hdp_spark.core.ldp.common.sphere_constant`). The JVM holds no copy of its
computation: :func:`register_ldp` puts A_1 … A_:data:`MAX_SQL_VECTOR_DIM` (Python's
``lgamma``, exact as JSON doubles) beside the templates, the JVM picks A_d, and the finalize
refuses the call unless it is the spec's. A larger ``d`` needs the Column
``hs.ldp_mean_vector`` (its refusal says so).

Privacy unit (``'unit', column, 1, 1``), privacy-critical: the call keeps ONE report per
person, the release API's rule (:mod:`hdp_spark.core.privacy_unit.ldp`), inserted below the
aggregate by the extension's ``LdpUnitPlan`` exactly as for the Column
(:mod:`hdp_spark.spark.ldp_unit`): each person's position is ``rank(report_rank_text(
query key, aggregator name, person))`` modulo the person's count of reports at their
smallest ε. The rule is safe only while the position is unknown to whoever reads the
output, so the key is a secret:

* :func:`sql_unit_key` derives the registration's local-DP key from its release key with
  HMAC and keeps no origin, so its bounding key is NOT a function of the registration's
  central bounding key (which the session conf holds, for the central functions' unit:
  not a secret there).
* :func:`register_ldp` gives that bounding key to the JVM outside the session conf (which
  ``SET``, the UI and the event log's SQL execution events show): classic PySpark through
  py4j, Spark Connect through the ``HdpConnectSecret`` plugin
  (:func:`~hdp_spark.spark.ldp_unit.send_sql_key`); the JVM keeps it in the function
  builders of this session only.
* The builder puts it in the call's ``HdpQuery`` placeholder (a field outside the plan's
  printed form), and at analysis ``LdpUnitPlan`` keeps one report per person with the
  one-report operator ``HdpLdpUnitBound`` (the window plan's ``hdp_ldp_position`` where
  the session turns the operator off) under the query's key, SHA-256 of it and the
  query's fingerprint (outside the printed form too): the numbers are
  ``ldp_agg(..., privacy_unit=...)``'s under
  ``sql_unit_key(registration key).for_query(fingerprint)``, the Column's rule for the same
  key. Re-running a query keeps the same reports; another query keeps independent ones.

The rank reads the aggregator's name (the ``alias`` option or the release API's default):
the JVM computes it, and the finalize refuses the call unless it is its spec's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from hdp_spark.aggregators import ldp_distribution, ldp_mean, ldp_mean_vector
from hdp_spark.aggregators.registry import aggregator_of
from hdp_spark.core.ldp.common import sphere_constant
from hdp_spark.core.ldp.oracle import FrequencyOracle
from hdp_spark.core.ldp.release import report_roles
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import bounding_key
from hdp_spark.errors import ParameterError
from hdp_spark.spark.expressions import level_sql
from hdp_spark.spark.ldp_finalize import arrow_finalize_ldp, ldp_fields
from hdp_spark.spark.ldp_inputs import distribution_sql, mean_sql, vector_row_sql
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.sql_text import ident

__all__ = ["MAX_SQL_VECTOR_DIM", "ROWS_CONF", "SQL_LDP", "ldp_type", "register_ldp", "spec_of",
           "sql_unit_key"]

ROWS_CONF = "hdp_spark.sql.ldpRows"
"""The session conf holding the per-row SQL templates (read by the JVM's ``HdpSqlLdp``)."""

SQL_LDP: dict[str, tuple[str, Callable[..., Any]]] = {
    "mean": ("hdp_ldp_mean", ldp_mean),
    "distribution": ("hdp_ldp_distribution", ldp_distribution),
    "vector": ("hdp_ldp_mean_vector", ldp_mean_vector),
}
"""kind -> (SQL function, the release API's spec constructor)."""

MAX_SQL_VECTOR_DIM = 1024
"""The largest ``d`` of ``hdp_ldp_mean_vector`` in SQL: the size of the A_d table in the
session conf (about 20 kB). The Column takes every ``d`` the spec does."""

_DECLARED = "already_randomized"
_UNIT_TAG = "sql-ldp-unit"


def sql_unit_key(key: ReleaseKey) -> ReleaseKey:
    """The key of a SQL registration's local-DP calls under ``'unit'``: HMAC of the
    registration's release key (:meth:`ReleaseKey.for_query` of a tag no fingerprint
    equals) without its origin, so that its bounding key derives from its own material,
    not publicly from the registration's bounding key (the central unit's, in the conf).
    A query's key is ``sql_unit_key(key).for_query(fingerprint)``.

    Privacy:
        As secret as ``key`` (HMAC is a PRF); keeps its ``unsafe`` mark.
    """
    return ReleaseKey(key.for_query(_UNIT_TAG).material, unsafe=key.unsafe)



def _probe(kind: str, mechanism: str = "laplace") -> Any:
    if kind == "mean":
        return ldp_mean("r", eps="e", mechanism=mechanism)  # type: ignore[arg-type]
    if kind == "vector":
        return ldp_mean_vector("r", eps="e", d=1)
    return ldp_distribution("i", "s", eps="e", oracle=FrequencyOracle(d=2, m=2, phi_seed=0))


def ldp_type(kind: str) -> T.StructType:
    """The result type of a kind's SQL function: the Column's struct.

    Privacy:
        None: the output layout is public.
    """
    spec = _probe(kind)
    main = aggregator_of(spec).column_field or "estimate"
    return T.StructType([T.StructField(n, spark_type(f), f.nullable)
                         for n, f in ldp_fields(spec, main)])


def _templates() -> dict[str, dict[str, Any]]:
    """Per template (``mean:laplace``, ``mean:rr``, ``distribution``, ``vector``): the
    per-row texts over the identifiers ``__hdp_<name>``, the report roles and the randomizer;
    ``sphere``: A_1 … A_:data:`MAX_SQL_VECTOR_DIM` for the vector mean's clamp."""
    level = level_sql(ident("__hdp_eps"))
    out: dict[str, Any] = {}
    for key, spec in (("mean:laplace", _probe("mean")), ("mean:rr", _probe("mean", "rr")),
                      ("distribution", _probe("distribution")), ("vector", _probe("vector"))):
        if key == "distribution":
            index, q = distribution_sql(ident("__hdp_index"), ident("__hdp_sign"), level,
                                        ident("__hdp_m"))
        elif key == "vector":
            index, q = vector_row_sql(ident("__hdp_report"), level, ident("__hdp_d"),
                                      ident("__hdp_radius"), ident("__hdp_sphere"))
        else:
            index, q = mean_sql(spec.mechanism, ident("__hdp_report"), level,
                                ident("__hdp_lower"), ident("__hdp_upper"))
        roles = report_roles(spec)
        out[key] = {"level": level, "index": index, "q": q, "mechanism": roles[0][2],
                    "roles": ["ε", *(role for role, _, _ in roles)]}
    out["sphere"] = [sphere_constant(d) for d in range(1, MAX_SQL_VECTOR_DIM + 1)]
    return out


def spec_of(kind: str, options: str, columns: list[str]) -> Any:
    """The spec of one SQL call (``columns``: its column arguments as written).

    Raises:
        ParameterError: the options are not a JSON object, name a keyword the SQL form does
            not take, or break the release API's rules (its constructor's words).

    Privacy:
        None: public parameters.
    """
    function, constructor = SQL_LDP[kind]
    try:
        kwargs = json.loads(options)
    except ValueError:
        kwargs = None
    if not isinstance(kwargs, dict):  # the JVM checked it already
        msg = f"`options` of {function} must be a JSON object, got {options!r}."
        raise ParameterError(msg)
    kwargs.pop(_DECLARED, None)
    if kind == "distribution":
        oracle = kwargs.get("oracle")
        if not isinstance(oracle, dict):  # the JVM checked it already
            msg = f"`oracle` (in the options of {function}) must be a JSON object."
            raise ParameterError(msg)
        try:
            kwargs["oracle"] = FrequencyOracle(**oracle)
        except TypeError:
            msg = (f"`oracle` (in the options of {function}) takes the FrequencyOracle's "
                   "fields d, m, phi_seed, projection and beta.")
            raise ParameterError(msg) from None
    try:
        return constructor(*columns[:-1], eps=columns[-1], **kwargs)
    except TypeError:
        msg = (f"`options` of {function} has an unknown option (taken: the keywords of "
               f"hdp_spark.{constructor.__name__} but its columns, and {_DECLARED}).")
        raise ParameterError(msg) from None


def _check_used(function: str, spec: Any, used: dict[str, Any]) -> None:
    """Refuse a call whose constants in the JVM's per-row expressions are not the spec's
    (under ``'unit'`` also the aggregator name its rank read)."""
    used = dict(used)
    name = used.pop("name", None)
    if name is not None and name != spec.name:
        msg = (f"the aggregator name of {function} under 'unit' cannot be read the same way "
               f"by the SQL function ({name!r}) and the release API ({spec.name!r}): pass "
               "`alias` as a string.")
        raise ParameterError(msg)
    if "m" in used:
        want = {"m": spec.oracle.m}
    elif "sphere" in used:
        want = {"d": spec.d, "radius": float(spec.radius), "sphere": sphere_constant(spec.d)}
    else:
        want = {"lower": float(spec.lower), "upper": float(spec.upper)}
    if {k: float(v) for k, v in used.items()} != {k: float(v) for k, v in want.items()}:
        msg = (f"the constants of {function} cannot be read the same way by the SQL function "
               "and the release API (write the bounds as numbers within 2**53, or use the "
               "Column).")
        raise ParameterError(msg)


def _finalizer(kind: str, arrow_type: pa.StructType) -> Callable[..., pa.Array]:
    function = SQL_LDP[kind][0]

    def finalize(cells: pa.Array, options: pa.Array, used: pa.Array, columns: pa.Array
                 ) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=arrow_type)
        spec = spec_of(kind, str(options[0].as_py()), list(columns[0].as_py()))
        _check_used(function, spec, json.loads(str(used[0].as_py())))
        return arrow_finalize_ldp(spec, cells, arrow_type)

    finalize.__name__ = f"hdp_ldp_{kind}_finalize"
    return finalize


def register_ldp(session: Any, key: ReleaseKey | None = None) -> None:
    """Register ``hdp_ldp_mean_finalize``, ``hdp_ldp_distribution_finalize`` and
    ``hdp_ldp_vector_finalize``, put the per-row templates (and the A_d table) in the
    session conf, and give the JVM the bounding key of :func:`sql_unit_key` of the
    registration's ``key`` (fresh when None) for ``'unit'``.

    Privacy:
        As the local-DP Columns: post-processing of ε_i-LDP reports, no noise. The key
        that places each person's kept report under ``'unit'`` is a secret: it reaches the
        JVM's function builders of this session only (module docstring), never the conf.
    """
    from hdp_spark.spark.ldp_unit import send_sql_key

    send_sql_key(session, bounding_key(sql_unit_key(key or ReleaseKey.fresh())))
    session.conf.set(ROWS_CONF, json.dumps(_templates()))
    for kind in SQL_LDP:
        rtype = ldp_type(kind)
        udf = F.arrow_udf(_finalizer(kind, to_arrow_type(rtype)), rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
        session.udf.register(f"hdp_ldp_{kind}_finalize", udf)
