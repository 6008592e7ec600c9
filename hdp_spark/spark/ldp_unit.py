"""The local-DP Column aggregators under a privacy unit: ``df.agg(ldp_mean(...,
privacy_unit="user_id"))`` keeps ONE report per person, as ``hs.ldp_agg(df, ...,
privacy_unit=...)`` does (the rule and its proof: :mod:`hdp_spark.core.privacy_unit.ldp`).

Privacy-critical. The rule is safe only while the position of the kept report is unknown to
whoever reads the output, so the key that places it is a SECRET here, unlike the central
Columns' bounding key (which orders rows and keys no noise, and is a plan literal):

* The Column holds a fresh release key (OS entropy). Its bounding key
  (:func:`~hdp_spark.core.privacy_unit.spec.bounding_key`) reaches the JVM extension as a
  secret argument (``HdpSecret``): classic PySpark builds that expression through py4j;
  Spark Connect sends it as an expression extension (a ``BytesValue`` that the server's
  ``HdpConnectSecret`` plugin turns into the same expression), so it is never a literal of
  the Catalyst plan.
* At analysis the extension's rule (``LdpUnitPlan``) inserts the release API's rule below
  the aggregate: the one-report operator ``HdpLdpUnitBound`` (``LdpUnitBound``: one
  shuffle by the person, one sort, each person read in turn and ranked once), or where the
  session sets ``hdp_spark.unitOperator`` to false one window specification partitioned by
  the person with each row ranked by ``hdp_ldp_position``; either holds the query's key
  (:func:`~hdp_spark.core.privacy_unit.spec.query_bounding_key` of the Column's bounding key
  and the query's fingerprint) in a field that no printed form of a plan shows (explain in
  every mode, the Spark UI and event log, plan logs, JSON) and the fingerprint does not read.
* Re-evaluating a query (same fingerprint) keeps the same reports; another query or another
  Column keeps independent ones; the numbers equal ``ldp_agg``'s under the query's key
  (``col.key.for_query(fingerprint)``, the fingerprint being the plan's one 64-hex literal).

Global only, one aggregator per aggregate, ``max_groups``/``max_rows`` 1: the release API's
rules, named on refusal.

The same channel serves three more callers. The release API on Spark Connect
(:func:`hdp_spark.spark.privacy_unit.keep_one_report`) requests the one-report operator
with ``hdp_ldp_keep(id, ε, index, q, name, <secret>)`` (on the window plan, with the
operator turned off, it ranks persons with ``hdp_ldp_rank(tagged, name, <secret>)``, which
the extension turns into ``hdp_ldp_position``; :func:`connect_secret_ready` checks that
the server has the function and the plugin; without them the key is a plan literal, as
documented); its central
releases under a unit request the bounding operator with ``hdp_unit_bound(..., <secret>,
...)`` (:func:`hdp_spark.spark.privacy_unit.bound_rows`). The SQL functions under
``'unit'`` (:mod:`hdp_spark.spark.sql_ldp`) get the registration's key through
:func:`send_sql_key`: the JVM keeps it per session, outside the conf.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql.utils import is_remote

from hdp_spark.core.privacy_unit.ldp import check_id_unread
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.errors import ParameterError

__all__ = ["CONNECT_PLUGIN", "CONNECT_PLUGIN_CONF", "LDP_UNIT_PREFIX", "RANK_FUNCTION",
           "SECRET_MAGIC", "SQL_KEY_MAGIC", "connect_secret_ready", "ldp_unit_decision",
           "secret_column", "send_sql_key"]

LDP_UNIT_PREFIX = "ldpunit:"
"""The group decision of a local-DP Column under a privacy unit (``LdpUnitPlan``)."""

SECRET_MAGIC = b"hdp_spark/secret/v1\x00"
"""The public head of a secret's bytes on Spark Connect (``HdpConnectSecret.MAGIC``)."""

SQL_KEY_MAGIC = b"hdp_spark/sqlkey/v1\x00"
"""The public head of a SQL registration's key on Spark Connect
(``HdpConnectSecret.SQL_KEY``)."""

RANK_FUNCTION = "hdp_ldp_rank"
"""The extension's one-report rank over a secret key (``HdpSecretRank``): the release API's
rule on Spark Connect."""

CONNECT_PLUGIN = "org.hdpspark.HdpConnectSecret"
CONNECT_PLUGIN_CONF = "spark.connect.extensions.expression.classes"


def ldp_unit_decision(spec: Any, keys: object, privacy_unit: str,
                      max_groups: int | None, max_rows: int | None) -> str:
    """The group decision of a local-DP Column of ``spec`` under ``privacy_unit``.

    Raises:
        ParameterError: ``keys`` given (global only), a bound other than 1, or a bad unit
            column name (naming the parameter).

    Privacy:
        Public parameters only (the unit's column and the aggregator's name).
    """
    if keys is not None:
        msg = (f"`keys`: local-DP aggregators under `privacy_unit` release the whole table "
               "only (a report cannot be split over groups, and a person's group membership "
               f"is private): use df.agg(...) without keys, got {keys!r}.")
        raise ParameterError(msg)
    for name, value in (("max_groups", max_groups), ("max_rows", max_rows)):
        if value is not None and (isinstance(value, bool) or value != 1):
            msg = (f"`{name}` must be 1 for local-DP aggregators under `privacy_unit` (they "
                   f"keep one report per person), got {value!r}.")
            raise ParameterError(msg)
    unit = PrivacyUnit(privacy_unit, 1, 1)
    check_id_unread(spec, unit)
    return LDP_UNIT_PREFIX + json.dumps({"name": spec.name, "unit": unit.column},
                                        sort_keys=True)


def secret_column(bkey: str) -> Column:
    """The secret argument that carries ``bkey`` (64 hex digits) to the JVM extension:
    never a plan literal (module docstring).

    Privacy:
        The key is in no printed plan; on Connect it travels in the request's bytes as the
        finalize's key travels in its pickled function.
    """
    if not is_remote():
        session = SparkSession.getActiveSession()
        if session is None:  # built_column checked it first
            msg = "a Column aggregator needs an active SparkSession."
            raise ParameterError(msg)
        jvm = session._jvm  # type: ignore[attr-defined]
        return Column(jvm.org.hdpspark.HdpSecret.column(bkey))  # type: ignore[operator,union-attr]
    from pyspark.sql.connect.column import Column as ConnectColumn

    return ConnectColumn(_ConnectSecret(bkey))


_READY: dict[str, bool] = {}


def connect_secret_ready(session: Any) -> bool:
    """Whether a Spark Connect ``session``'s server can take a secret: it has the
    extension's rank function and its ``HdpConnectSecret`` plugin turns a probe (a public
    all-zero key over a constant) into an expression (the server does not show the plugin
    setting: Spark redacts it). Cached per Connect session.

    Privacy:
        The probe reads no data and carries a public key.
    """
    sid = str(getattr(session, "session_id", ""))
    if sid in _READY:
        return _READY[sid]
    try:
        ready = bool(session.catalog.functionExists(RANK_FUNCTION))
        if ready:
            from pyspark.sql import functions as F

            probe = session.range(1).select(F.call_function(
                RANK_FUNCTION, F.lit("1:0"), F.lit("probe"), secret_column("0" * 64)))
            ready = len(probe.schema.fields) == 1  # analysed by the server
    except Exception:  # no function, or the server has no plugin: no secret channel
        ready = False
    if sid:
        _READY[sid] = ready
    return ready


def send_sql_key(session: Any, bkey: str) -> None:
    """Give ``session``'s local-DP SQL functions the registration's secret key ``bkey`` (64
    hex digits) for ``'unit', column, 1, 1``: classic PySpark through py4j
    (``HdpExtensions.registerLdpUnitKey``), Spark Connect through the plugin
    (``SQL_KEY_MAGIC``: the server registers it and evaluates the expression as ``true``;
    a server without the plugin gets no key, and its SQL calls under ``'unit'`` say so).

    Privacy:
        The key goes into the JVM's function builders, never into the session conf or a plan
        literal (on Connect the statement's text shows the bytes' public head only).
    """
    if not is_remote():
        jvm = session._jvm  # type: ignore[attr-defined]
        jvm.org.hdpspark.HdpExtensions.registerLdpUnitKey(  # type: ignore[union-attr]
            session._jsparkSession, bkey)
        return
    from pyspark.sql.connect.column import Column as ConnectColumn

    try:
        session.range(1).select(ConnectColumn(_ConnectSecret(bkey, SQL_KEY_MAGIC))).collect()
    except Exception:  # a server without the plugin: 'unit' in SQL refuses, saying so
        return


def _connect_secret_class() -> type:
    from google.protobuf import wrappers_pb2
    from pyspark.sql.connect import proto
    from pyspark.sql.connect.expressions import Expression

    class ConnectSecret(Expression):
        """A Connect expression extension carrying a secret (``HdpConnectSecret``)."""

        def __init__(self, bkey: str, magic: bytes) -> None:
            super().__init__()
            self._bkey = bkey
            self._magic = magic

        def to_plan(self, session: Any) -> Any:
            expr = proto.Expression()
            expr.extension.Pack(wrappers_pb2.BytesValue(
                value=self._magic + self._bkey.encode("ascii")))
            return expr

        def __repr__(self) -> str:
            return "hdp_secret()"

    return ConnectSecret


def _ConnectSecret(bkey: str, magic: bytes = SECRET_MAGIC) -> Any:
    return _connect_secret_class()(bkey, magic)
