"""``user_mean`` and ``user_mean_release``, once for every engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.kernels import release_specs
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.user_mean import UserMeanRelease, UserMeanSpec
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of

__all__ = ["user_mean", "user_mean_release"]


def _checked(spec: object) -> UserMeanSpec:
    spec = spec_of(spec)  # a Spark Column aggregator hands out its spec
    if not isinstance(spec, UserMeanSpec):
        msg = f"`spec` must come from hdp_user_mean(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    return spec


def user_mean_release(
    engine: Engine,
    spec: UserMeanSpec,
    *,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> UserMeanRelease:
    """Run one user-level release and return the engine-neutral result.

    See :func:`user_mean` for the arguments.

    Privacy:
        Same release as :func:`user_mean` (one user = one unit; n, k_i, ε_i, ids and groups
        public); the result holds only released values, never pre-noise statistics.
    """
    spec = _checked(spec)
    r = release_specs(engine, [spec], by=by, keys=keys, schema=schema,
                      unsafe_seed=unsafe_seed)
    return UserMeanRelease(r.by, r.keys, spec, r.results[spec.name], r.unsafe_seed)


def user_mean(
    engine: Engine,
    spec: UserMeanSpec,
    *,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> Any:
    """Release a user-level heterogeneous-DP mean of a DataFrame (pandas or Spark).

    Args:
        df: the input table, several rows per user (user, value and ε columns).
        spec: from :func:`hdp_spark.hdp_user_mean`.
        by: optional group-by column(s); each user must fall into one group. Public
            grouping attributes only: the value, user id and ε columns are refused.
        keys: the public key set of a grouped release (list of values, list of tuples for
            several ``by`` columns, or a DataFrame with the ``by`` columns). Every key gets
            a row; rows with other keys are left out.
            Key sets must be public inputs from outside the data; the rules, what is
            refused and the output order are those of ``agg``.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production:
            anyone who knows the seed can remove the noise.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``: its release
            rules run first (one aggregate pass, counts only) and a violation raises
            before any noise is drawn, so a rejected release spends nothing.

    Returns:
        One row per group (one row for a global release) with the columns of
        ``docs/user_mean.md``.

    Engines:
        On Spark, a few small jobs over a persisted per-user table; the result is a
        DataFrame built from the released rows (``show()`` then ``collect()`` return the
        same numbers).

    Privacy:
        Protected unit: one user (all rows). Each call is one release with fresh noise;
        calling it twice spends each user's ε_i twice. Public: n, every k_i, the ε_i, the
        user ids and each user's group. See :func:`hdp_spark.hdp_user_mean`.
    """
    return release_specs(engine, [_checked(spec)], by=by, keys=keys, schema=schema,
                         unsafe_seed=unsafe_seed).materialize(engine)
