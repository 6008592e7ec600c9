"""The finalize of the user-level mean Column aggregator, run on the executors (an Arrow UDF).

Privacy-critical module. Per group of one Arrow batch, it turns the group's per-user
statistics (the native ``hdp_users`` aggregate: per user id, the row count k, the exact sum
of the encoded values and the user's ε) into the released row by running the release API's
mechanism, :func:`~hdp_spark.core.user_mean.run_user_mean`, over the pandas engine's
in-memory user table of the group
(:meth:`~hdp_spark.pandas._user_mean.PandasUsers.from_users`): the same census, order keys,
rank answers and stage sums any engine computes on the group's rows. Its key: the Column's
release key derived with the query's fingerprint
(:func:`~hdp_spark.spark.column_finalize.query_key`), then with the aggregator's name and the
group's identity (:func:`~hdp_spark.spark.records_finalize.group_key`). Within that key the
mechanism binds each step's noise to the step's exact statistics, as in the release API. So
one query re-evaluated gives the same numbers; another query, or another group, independent
noise.

Imports no pyspark session: it runs in Spark's Python workers on one batch of groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hdp_spark.core.kernels import UserMeanKernel
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import OutputField
from hdp_spark.core.user_mean import UserMeanSpec, run_user_mean
from hdp_spark.spark.column_finalize import query_key, struct_fields
from hdp_spark.spark.records_finalize import group_key

__all__ = ["MAIN", "arrow_finalize_users", "finalize_users", "user_fields"]

MAIN = "estimate"
"""The struct field of the released estimate (the descriptor's ``column_field``)."""

CELLS = ("group", "user", "k", "s", "bad", "emin", "emax", "null_rows", "query")
"""The native aggregate's fields, in its order."""


def user_fields(spec: UserMeanSpec) -> list[tuple[str, OutputField]]:
    """The Column's struct fields: the release API's output fields of a user-level mean
    (``estimate``, ``noise_scale``, ``ci_low``, ..., ``classes``).

    Privacy:
        None: the output layout is public.
    """
    return struct_fields(UserMeanKernel().fields(spec), MAIN)


def finalize_users(spec: UserMeanSpec, key: ReleaseKey, cells: Mapping[str, Sequence[Any]]
                   ) -> list[tuple[Any, ...]]:
    """The released row of each group of a batch (``cells``: the native aggregate's
    columns :data:`CELLS`, one value per group), in the order of :func:`user_fields`.

    Privacy:
        Per group, the release API's user-level mechanism under the group's key
        (:func:`~hdp_spark.spark.records_finalize.group_key`): user i's loss is at most
        ε_i per query and group. A missing fingerprint is refused before any statistic is
        read; the release API's rules of public inputs (null ids, ε per user) are checked
        again by the mechanism's census.
    """
    from hdp_spark.pandas._user_mean import PandasUsers  # the in-memory user table

    kernel = UserMeanKernel()
    keys: dict[str | None, ReleaseKey] = {}
    out: list[tuple[Any, ...]] = []
    for text, user, k, s, bad, emin, emax, null_rows, query in zip(
            *(cells[c] for c in CELLS), strict=True):
        qkey = keys.get(query)
        if qkey is None:
            qkey = keys[query] = query_key(key, query)
        table = PandasUsers.from_users(spec, user, k, s, emin, emax, bad, null_rows)
        release = run_user_mean(spec, table, (), ((),), group_key(qkey, spec.name, text))
        out.append(kernel.values(spec, release.results[()]))
    return out


def arrow_finalize_users(spec: UserMeanSpec, key: ReleaseKey, cells: pa.StructArray,
                         rtype: pa.StructType) -> pa.StructArray:
    """:func:`finalize_users` over one Arrow batch, as a struct array of type ``rtype``.

    Privacy:
        As :func:`finalize_users` (a change of representation only).
    """
    if len(cells) == 0:
        return pa.array([], type=rtype)
    columns = {f.name: cells.field(f.name).to_pylist() for f in cells.type}
    rows = finalize_users(spec, key, columns)
    values = list(zip(*rows, strict=True))
    return pa.StructArray.from_arrays(
        [pa.array(list(v), type=f.type) for v, f in zip(values, rtype, strict=True)],
        fields=list(rtype))
