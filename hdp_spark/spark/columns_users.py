"""The user-level heterogeneous mean as a Spark Column aggregator:
``df.agg(hdp_user_mean(...))`` and ``df.groupBy(...).agg(hdp_user_mean(..., keys="public"))``.

Two expressions, as the other Column aggregators (see :mod:`hdp_spark.spark.columns`, whose
composition rule applies unchanged): the native aggregate ``hdp_users`` of the JVM extension
(per group, per user id: the row count k, the exact sum of the clamped, imputed, fixed-point
encoded values, the user's least and largest valid ε and its rows with an invalid ε, over the
release API's per-row expressions of pass 1, :func:`~hdp_spark.spark._user_mean.row_exprs`;
one pass with map-side partial aggregation) and an Arrow UDF over the aggregated rows that
runs the release API's mechanism once per group on the group's user table
(:mod:`hdp_spark.spark.users_finalize`).

Memory: a group's native state holds one entry per distinct user of the group: the id's
bytes and about 100 bytes of map entry and statistics (k, Σ, invalid rows, least and
largest ε); the finalize holds the same table in Python (a few hundred bytes per user). So
a group's memory is O(distinct users in the group), and there is NO public bound: as with
Spark's ``collect_set``, a group with too many users for an executor fails as Spark fails
on memory, never by an error of ours that depends on the data. Tables whose groups hold
tens of millions of users belong to the release API (``hs.user_mean``), whose passes keep
no per-group state.

What differs from the release API (``hs.user_mean(df, spec, by=..., keys=...)``), from
public facts only: the rules of public inputs (a null user id, an invalid or per-user
unequal ε, ε below the grid) are checked group by group (a failing group fails the query,
in the release API's words, with that group's count); and a user whose rows fall into
several groups is NOT detected (each group sees only its own rows), where the release API
refuses it: each user must fall into one group (a public attribute of the user), else
that user's loss adds up over its groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import is_remote

from hdp_spark.core.levels import EPS_CAP, EPS_FLOOR, EpsGrid
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.user_mean import DEFAULT_SALT, UserMeanCap, UserMeanSpec
from hdp_spark.errors import ParameterError
from hdp_spark.spark._common import UNSAFE_SEED_MARK
from hdp_spark.spark._user_mean import row_exprs
from hdp_spark.spark.columns import Inputs, _Aggregate, _ClassicAggregate, _groups, built_column
from hdp_spark.spark.extension import (
    MISSING_MESSAGE,
    ExtensionMissingError,
)
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.users_finalize import arrow_finalize_users, user_fields

__all__ = ["USERS", "column_for", "hdp_user_mean", "native_users"]

USERS = "hdp_users"
"""The extension's native aggregate of per-user statistics (``HdpUsers``)."""


def native_users(spec: UserMeanSpec, groups: str) -> Column:
    """The ``hdp_users`` aggregate of ``spec`` with the group decision ``groups``
    (``"cells"``: raw statistics for tests).

    Privacy:
        NOT a release: exact per-user statistics, for the finalize (and tests) only. The
        per-row rules are the release API's, public and data-independent; a bad value never
        raises.
    """
    q, e, bad = row_exprs(spec)
    lowest = float("nan") if spec.eps_grid is None else spec.eps_grid.points()[0]
    rules = F.array(*[F.lit(float(v)) for v in (EPS_FLOOR, EPS_CAP, lowest)])
    names = F.array(*[F.lit(n) for n in (spec.column, spec.user, spec.eps)])
    out: Column = F.call_function(USERS, F.lit(groups), F.col(spec.user), q, e, bad,
                                  F.col(spec.column), F.col(spec.eps), rules, names)
    return out


def _finalize_udf(spec: UserMeanSpec, key: ReleaseKey) -> Any:  # design-ok: per group batch
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable)
                          for n, f in user_fields(spec)])
    arrow_type = to_arrow_type(rtype)

    def finalize(cells: pa.Array) -> pa.Array:  # Arrow in, Arrow out: a scalar Arrow UDF
        return arrow_finalize_users(spec, key, cells, arrow_type)

    finalize.__name__ = "hdp_user_mean_finalize"
    return F.arrow_udf(finalize, rtype)  # type: ignore[attr-defined]  # design-ok: over aggregated rows


def _build(spec: UserMeanSpec, key: ReleaseKey, groups: str) -> Column:
    out: Column = _finalize_udf(spec, key)(native_users(spec, groups))  # design-ok
    if key.unsafe:  # a seeded Column's output is marked, as the release API's
        return out.alias(spec.name, metadata={UNSAFE_SEED_MARK: True})
    return out.alias(spec.name)


class _Users(_Aggregate):
    """What both user-mean Column classes add: their own native aggregate."""

    def unsafe_seed(self, seed: int | str | bytes) -> Column:
        """The same aggregator with noise from a caller's seed (tests only: not private)."""
        return _column(self.spec, ReleaseKey.resolve(seed), self.groups)


class _ClassicUsers(_Users, _ClassicAggregate):
    def __init__(self, spec: UserMeanSpec, key: ReleaseKey, groups: str) -> None:
        _ClassicAggregate.__init__(self, spec, key, groups, Inputs())

    @property
    def _jc(self) -> Any:  # type: ignore[override]
        return built_column(self, lambda: _build(self.spec, self.key, self.groups))


def _column(spec: UserMeanSpec, key: ReleaseKey, groups: str) -> Column:
    if not is_remote():
        return _ClassicUsers(spec, key, groups)
    from pyspark.sql.connect.column import Column as ConnectColumn

    class _ConnectUsers(_Users, ConnectColumn):
        """Checks, when its plan is built, the server's extension."""

        def to_plan(self, session: Any) -> Any:
            active = SparkSession.getActiveSession()
            if active is not None and not active.catalog.functionExists(USERS):
                raise ExtensionMissingError(MISSING_MESSAGE)
            return ConnectColumn.to_plan(self, session)

        def alias(self, *alias: str, **kwargs: Any) -> Any:
            return wrap(ConnectColumn.alias(self, *alias, **kwargs))

        name = alias

    def wrap(built: Any) -> Column:
        col = _ConnectUsers(built._expr)
        col.spec, col.key, col.groups, col.inputs = spec, key, groups, Inputs()
        return col

    return wrap(_build(spec, key, groups))


def _no_selection(keys: object) -> None:
    if isinstance(keys, SelectKeys):
        msg = ("`keys` of hdp_user_mean must be 'public', a list of public keys or omitted: "
               "select_keys(...) (DP partition selection) is not available for the "
               "user-level mean.")
        raise ParameterError(msg)


def column_for(spec: UserMeanSpec, *, keys: str | Sequence[object] | None = None) -> Column:
    """The user-level mean's Column builder of its descriptor (``hs.as_column(spec)``): the
    Column of :func:`hdp_user_mean` for a spec.

    Privacy:
        As :func:`hdp_user_mean`.
    """
    _no_selection(keys)
    return _column(spec, ReleaseKey.resolve(None), _groups(keys))


def hdp_user_mean(
    column: str,
    *,
    user: str,
    eps: str,
    lower: float,
    upper: float,
    cap: UserMeanCap = "width",
    beta: float = 0.05,
    var_users: int | None = None,
    public_variance: float | None = None,
    tau_d: float = 1.0,
    clip_output: bool = False,
    fill: float | None = None,
    eps_grid: EpsGrid | None = None,
    salt: str = DEFAULT_SALT,
    alias: str | None = None,
    keys: str | Sequence[object] | None = None,
) -> Column:
    """The user-level heterogeneous-DP mean as a Spark Column aggregator (and a spec for
    the release API).

    Same arguments and rules as :func:`hdp_spark.hdp_user_mean`, plus ``keys``. Use it as
    ``df.agg(hdp_user_mean(...))`` or, with a group decision,
    ``df.groupBy(...).agg(hdp_user_mean(..., keys="public"))`` (every group found is
    published) or ``keys=[...]`` (a public key list: only those groups' rows are
    aggregated); ``select_keys`` is not taken. One struct column per group with the
    release API's fields (``estimate``, ``noise_scale``, ``ci_low``, ``ci_high``,
    ``noise_ci_low``, ``noise_ci_high``, ``bias_bound``, ``users``, ``rows``, ...,
    ``classes``: see ``docs/user_mean.md``), equal to ``hs.user_mean`` on the group's rows
    under the group's key. ``hs.user_mean(df, <this>)`` and ``hs.agg(df, <this>)`` run the
    release API with its spec. Column names only.

    A group's memory is O(its distinct users), with no public bound (this module's
    docstring); a user with rows in several groups is not detected.

    Privacy:
        Per group, the release API's mechanism: one USER (all of its rows) is protected at
        its own ε_i (replace-one: n, every k_i, the ε_i and the user ids are public, as are
        the grouping values under ``keys="public"``). Each user must fall into one group
        (a public attribute), else its loss adds up over its groups: unlike the release
        API, the Column cannot check it. Each query that uses the Column is a release of
        its own (:mod:`hdp_spark.spark.columns`), its noise keyed by the Column's key, the
        query's fingerprint, the group and the exact statistics.
    """
    from hdp_spark.aggregators import hdp_user_mean as spec_user_mean

    _no_selection(keys)
    groups = _groups(keys)
    spec = spec_user_mean(
        column, user=user, eps=eps, lower=lower, upper=upper, cap=cap, beta=beta,
        var_users=var_users, public_variance=public_variance, tau_d=tau_d,
        clip_output=clip_output, fill=fill, eps_grid=eps_grid, salt=salt, alias=alias)
    return _column(spec, ReleaseKey.resolve(None), groups)
