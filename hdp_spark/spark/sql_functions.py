"""The SQL form of the Column aggregators: ``hdp_mean(value, eps, lower, upper)``."""

from __future__ import annotations

from typing import Any

import pandas as pd
from pyspark.sql import functions as F

from hdp_spark.core.kernels import kernel_of
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.spark.column_finalize import finalize_batch, struct_fields
from hdp_spark.spark.engine import spark_type
from hdp_spark.spark.extension import install

__all__ = ["register_sql"]


def _number(v: Any) -> float:
    """A SQL literal bound as the Python spec holds it (integers stay integers: the bounds
    enter the noise context as written)."""
    return int(v) if float(v).is_integer() and not isinstance(v, float) else float(v)


def register_sql(session: Any, *, unsafe_seed: int | str | bytes | None = None) -> None:
    """Make ``hdp_mean(value, eps, lower, upper)`` usable in ``session.sql(...)``.

    ``SELECT dept, hdp_mean(salary, eps, 0, 250000) FROM employees GROUP BY dept`` then
    returns one struct column per call, with the fields of :func:`hdp_mean`'s Column (the
    default method, β and fill). The SQL function is the native aggregate of the JVM
    extension wrapped in a finalize registered here as ``hdp_mean_finalize``.

    Privacy:
        As :func:`hdp_mean`. The registration holds one release key (fresh, or from
        ``unsafe_seed`` for tests): every query is a release whose noise is bound to the
        key, each group's own grouping values and its exact statistics, so re-running a
        query on the same data repeats its numbers and changed data draws unrelated noise.
    """
    from pyspark.sql import types as T

    from hdp_spark.specs import hdp_mean as spec_mean

    install(session)
    key = ReleaseKey.resolve(unsafe_seed)
    probe = spec_mean("x", eps="eps", lower=0, upper=1)
    kernel = kernel_of(probe)
    fields = struct_fields(kernel.fields(probe), "estimate")
    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable) for n, f in fields])

    def finalize(cells: pd.DataFrame, column: pd.Series, eps: pd.Series,
                 lower: pd.Series, upper: pd.Series) -> pd.DataFrame:
        if len(cells) == 0:
            return pd.DataFrame(columns=[n for n, _ in fields])
        spec = spec_mean(str(column.iloc[0]), eps=str(eps.iloc[0]),
                         lower=_number(lower.iloc[0]), upper=_number(upper.iloc[0]))
        return finalize_batch(spec, key, "estimate", cells)

    udf = F.pandas_udf(finalize, rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
    session.udf.register("hdp_mean_finalize", udf)
