"""The SQL form of the user-level mean:
``hdp_user_mean(value, eps, user, lower, upper[, '<JSON options>'][, 'public'])``.

The JVM extension (``HdpSqlUserMean``) builds the Column's native ``hdp_users`` aggregate
over the release API's per-row expressions, whose SQL template
(:func:`~hdp_spark.spark._user_mean.row_sql`) :func:`register_user_mean` puts in the session
conf; it reads from the options only ``fill`` (the encoding imputes it). The finalize
registered here, ``hdp_user_mean_finalize``, builds the spec from the same JSON with the
release API's constructor (every other check, with its words), refuses the call unless the
bounds and fill the JVM used are the spec's, and runs the Column's finalize
(:func:`~hdp_spark.spark.users_finalize.arrow_finalize_users`) per group.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.user_mean import UserMeanSpec, hdp_user_mean
from hdp_spark.errors import ParameterError
from hdp_spark.spark._user_mean import row_sql
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.sql_text import ident
from hdp_spark.spark.users_finalize import arrow_finalize_users, user_fields

__all__ = ["ROWS_CONF", "SQL_OPTIONS", "register_user_mean", "user_mean_type"]

ROWS_CONF = "hdp_spark.sql.userMeanRows"
"""The session conf holding the per-row SQL template (read by the JVM's ``hdp_user_mean``)."""

_FIXED = ("column", "user", "eps", "lower", "upper", "eps_grid")
SQL_OPTIONS = tuple(p for p in inspect.signature(hdp_user_mean).parameters if p not in _FIXED)
"""The keywords the SQL options take: the release API's, but the call's arguments and
``eps_grid``."""


def user_mean_type() -> T.StructType:
    """The result type of ``hdp_user_mean`` in SQL: the Column's struct.

    Privacy:
        None: the output layout is public.
    """
    probe = hdp_user_mean("x", user="u", eps="e", lower=0, upper=1)
    return T.StructType([T.StructField(n, spark_type(f), f.nullable)
                         for n, f in user_fields(probe)])


def _number(v: Any) -> float | int:
    """A SQL literal bound as the Python spec holds it: an integer literal stays an integer,
    a decimal (``10.0``) or double literal is a float, as the Column's ``10`` and ``10.0``
    (the bounds enter the noise context as written)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else float(v)


def spec_of(options: str, column: str, user: str, eps: str, lower: Any, upper: Any
            ) -> tuple[UserMeanSpec, dict[str, Any]]:
    """The spec of one SQL call and its options as keywords.

    Raises:
        ParameterError: the options are not a JSON object, name a keyword the SQL form does
            not take, or break the release API's rules (its constructor's words).

    Privacy:
        None: public parameters.
    """
    try:
        kwargs = json.loads(options)
    except ValueError:
        kwargs = None
    if not isinstance(kwargs, dict):  # the JVM checked it already
        msg = f"`options` of hdp_user_mean must be a JSON object, got {options!r}."
        raise ParameterError(msg)
    unknown = sorted(set(kwargs) - set(SQL_OPTIONS))
    if unknown:
        msg = (f"`options` of hdp_user_mean has an unknown option `{unknown[0]}` (taken: "
               f"{', '.join(SQL_OPTIONS)}).")
        raise ParameterError(msg)
    spec = hdp_user_mean(column, user=user, eps=eps, lower=_number(lower),
                         upper=_number(upper), **kwargs)
    return spec, kwargs


def _finalizer(key: ReleaseKey, arrow_type: pa.StructType) -> Callable[..., pa.Array]:
    def finalize(cells: pa.Array, options: pa.Array, fill: pa.Array, column: pa.Array,
                 user: pa.Array, eps: pa.Array, lower: pa.Array, upper: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=arrow_type)
        spec, kwargs = spec_of(str(options[0].as_py()), str(column[0].as_py()),
                               str(user[0].as_py()), str(eps[0].as_py()), lower[0].as_py(),
                               upper[0].as_py())
        if spec.fill_value != float(fill[0].as_py()):
            msg = ("`fill` of hdp_user_mean cannot be read the same way by the SQL function and "
                   "the release API (write the bounds and fill as doubles within 2**53, or use "
                   "the Column: hs.hdp_user_mean).")
            raise ParameterError(msg)
        text = json.dumps(kwargs, sort_keys=True, allow_nan=False, default=str)
        return arrow_finalize_users(spec, key.for_query(f"sql-user-mean:{text}"), cells,
                                    arrow_type)

    finalize.__name__ = "hdp_user_mean_finalize"
    return finalize


def register_user_mean(session: Any, key: ReleaseKey) -> None:
    """Register ``hdp_user_mean_finalize`` and put the per-row template in the session conf.

    Privacy:
        As the user-level mean's Column: the registration's ``key`` derived per options,
        then per query fingerprint and group (two calls that differ only in their options
        never share noise).
    """
    template = row_sql(*(ident(f"__hdp_{n}") for n in
                         ("value", "eps", "lower", "upper", "span", "fill")))
    session.conf.set(ROWS_CONF, json.dumps(list(template)))
    rtype = user_mean_type()
    udf = F.arrow_udf(_finalizer(key, to_arrow_type(rtype)), rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
    session.udf.register("hdp_user_mean_finalize", udf)
