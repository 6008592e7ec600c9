"""``agg`` and ``release`` of the Spark backend: thin calls into the one pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame

from hdp_spark.core.kernels import mean_release, release_specs
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.release import ReleaseResult
from hdp_spark.core.schema import TableSchema
from hdp_spark.explain import (
    LDP_CONSTANT_REPORT,
    explain_ldp_rows,
    explain_specs,
    explain_user_means,
    ldp_specs,
    user_mean_specs,
)
from hdp_spark.spark._common import KeysLike
from hdp_spark.spark.columns import spec_of
from hdp_spark.spark.engine import SparkEngine

__all__ = ["agg", "explain", "release"]


def release(
    df: DataFrame,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> ReleaseResult:
    """Run one release of means on a Spark DataFrame; the engine-neutral result.

    See :func:`agg` for the arguments (means only).

    Privacy:
        One release, exactly as :func:`agg` (fresh noise unless ``unsafe_seed``).
    """
    specs = tuple(spec_of(s) for s in specs)
    return mean_release(SparkEngine(df), specs, by=by, keys=keys, schema=schema,
                        unsafe_seed=unsafe_seed)


def agg(
    df: DataFrame,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> DataFrame:
    """Release heterogeneous-DP aggregates of a Spark DataFrame, any mix in one call.

    Same specs, keywords, rules and output columns as :func:`hdp_spark.pandas.agg` (read
    its documentation of ``by``, ``keys``, ``unsafe_seed`` and ``schema``). Runs the
    release's Spark jobs (one per cell pass, plus one counts-only pass with ``schema``),
    finalizes on the driver and returns a DataFrame built from the released rows as a local
    relation: ``show()`` then ``collect()`` return the same numbers and run no job.
    ``keys`` may also be a Spark (classic or Connect) DataFrame of public keys.

    Privacy:
        Each call is one release with one fresh key (see :func:`hdp_spark.pandas.agg`); the
        returned frame is materialized, so reading it again never redraws noise.
    """
    engine = SparkEngine(df)
    specs = tuple(spec_of(s) for s in specs)
    out: DataFrame = release_specs(engine, specs, by=by, keys=keys, schema=schema,
                                   unsafe_seed=unsafe_seed).materialize(engine)
    return out


def explain(
    df: DataFrame,
    *specs: Any,
    by: str | Sequence[str] | None = None,
    keys: KeysLike = None,
) -> DataFrame:
    """The accuracy and per-row privacy of a release of ``specs``, before spending anything.

    Same specs, keywords and output as :func:`hdp_spark.pandas.explain`. Runs one Spark
    job per ε column and grid (``groupBy(by..., ε level).count()``, no value column) and
    returns a DataFrame built from local rows, like :func:`agg`.

    Arguments, output columns and guarantees are documented once, in
    :func:`hdp_spark.pandas.explain`.

    Privacy:
        Spends no budget, draws no noise and writes nothing; reads only the ε and ``by``
        columns (public in this model), as :func:`hdp_spark.pandas.explain`.
    """
    engine = SparkEngine(df)
    specs = tuple(spec_of(s) for s in specs)
    ldp = ldp_specs(specs)
    if ldp is not None:
        from pyspark.sql import functions as F

        from hdp_spark.explain import EXPLAIN_FIELDS
        from hdp_spark.spark.ldp import ldp_release

        needed = dict.fromkeys([*(s.eps for s in ldp), *normalize_by(by)])
        public = df.select(*[c for c in needed if c in df.columns])
        for s in ldp:  # the reports are never read: one constant valid report per row
            public = public.withColumn(s.report, F.lit(LDP_CONSTANT_REPORT).cast("double"))
        result = ldp_release(public, *ldp, by=by, keys=keys, already_randomized=True)
        ldp_out: DataFrame = engine.materialize(
            result.by, [(f.suffix, f) for f in EXPLAIN_FIELDS], explain_ldp_rows(result), False)
        return ldp_out
    um = user_mean_specs(specs)
    if um is not None:
        from pyspark.sql import functions as F

        from hdp_spark.errors import ParameterError
        from hdp_spark.spark._common import is_dataframe

        if not is_dataframe(df):
            msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
            raise ParameterError(msg)
        public_cols = dict.fromkeys([*(c for u in um for c in (u.user, u.eps)),
                                     *normalize_by(by)])
        public = df.select(*[c for c in public_cols if c in df.columns])
        for u in um:  # the values are never read: one constant per row
            if u.column not in public_cols:
                public = public.withColumn(u.column, F.lit(float(u.lower)).cast("double"))
        by_u, columns_u, rows_u = explain_user_means(SparkEngine(public), um, by=by,
                                                     keys=keys)
        um_out: DataFrame = engine.materialize(by_u, columns_u, rows_u, False)
        return um_out
    by_t, columns, rows = explain_specs(engine, specs, by=by, keys=keys)
    out: DataFrame = engine.materialize(by_t, columns, rows, False)
    return out
