"""The finalize of the local-DP Column aggregators, run on the executors (an Arrow UDF).

Per group of one Arrow batch it turns the group's exact cells (the native ``hdp_ldp_cells``
aggregate: per (ε level, index) the row count and the two limb sums of the reports'
fixed-point integers) into the released row with the release API's own code:
:func:`~hdp_spark.core.ldp.stats.build_ldp_groups` (the ε checks, the skipped count and the
per-level counts) and :func:`~hdp_spark.core.ldp.release.finalize_one` (estimate, interval,
fallback), laid out by the kernel's output fields.

No randomness: the reports are already ε_i-LDP (randomized on the devices) and the release
is post-processing, so there is no key, no group key and nothing for a query fingerprint to
bind; the output is a deterministic function of the group's cells, equal to the release API's
for the same rows. The fingerprint is still required (the analyzer rule that checks the
group decision sets it).

Imports no pyspark session: it runs in Spark's Python workers on one batch of groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from hdp_spark.core.kernels import kernel_of
from hdp_spark.core.ldp.release import count_kind, finalize_one
from hdp_spark.core.ldp.stats import LdpCells, LdpGroupStats, build_ldp_groups, empty_stats
from hdp_spark.core.pipeline import OutputField
from hdp_spark.errors import ParameterError
from hdp_spark.spark.column_finalize import NO_FINGERPRINT, struct_fields

__all__ = ["arrow_finalize_ldp", "finalize_ldp", "group_stats_of", "ldp_fields"]


def ldp_fields(spec: Any, main: str) -> list[tuple[str, OutputField]]:
    """The Column's struct fields: the kernel's output fields, ``main`` for the estimate.

    Privacy:
        None: the output layout is public.
    """
    return struct_fields(kernel_of(spec).fields(spec), main)


def group_stats_of(spec: Any, level: Sequence[float], index: Sequence[int],
                   count: Sequence[int], hi: Sequence[int], lo: Sequence[int]
                   ) -> LdpGroupStats:
    """One group's statistics from its native cells, through the release API's
    :func:`~hdp_spark.core.ldp.stats.build_ldp_groups`.

    Raises:
        EpsilonColumnError: a row of the group carried an invalid ε (counts only).

    Privacy:
        None: a change of layout of the cells (the ε column is public).
    """
    n = len(level)
    cells = LdpCells([()], np.zeros(n, dtype=np.int64), np.asarray(level, dtype=np.float64),
                     np.asarray(index, dtype=np.int64), np.asarray(count, dtype=np.int64),
                     np.asarray(hi, dtype=np.int64), np.asarray(lo, dtype=np.int64))
    return build_ldp_groups(spec.eps, cells, count_kind(spec)).get((), empty_stats())


def finalize_ldp(spec: Any, cells: Mapping[str, Sequence[Any]]) -> list[tuple[Any, ...]]:
    """The released row of each group of a batch (``cells``: the native aggregate's columns
    ``level``, ``index``, ``count``, ``hi``, ``lo``, ``query``, one value per group), in the
    order of the kernel's output fields.

    Raises:
        ParameterError: a group has no query fingerprint (the session lacks the analyzer
            rule), before any statistic is read.

    Privacy:
        Post-processing of ε_i-LDP reports, the release API's code: adds no noise and reads
        no key. Per group the output is a function of the group's cells only.
    """
    kernel = kernel_of(spec)
    out: list[tuple[Any, ...]] = []
    for query in cells["query"]:
        if query is None:
            raise ParameterError(NO_FINGERPRINT)
    for level, index, count, hi, lo in zip(cells["level"], cells["index"], cells["count"],
                                           cells["hi"], cells["lo"], strict=True):
        stats = group_stats_of(spec, level, index, count, hi, lo)
        out.append(tuple(kernel.values(spec, finalize_one(spec, stats))))
    return out


def arrow_finalize_ldp(spec: Any, cells: pa.StructArray, rtype: pa.StructType
                       ) -> pa.StructArray:
    """:func:`finalize_ldp` over one Arrow batch, as a struct array of type ``rtype``.

    Privacy:
        As :func:`finalize_ldp` (a change of representation only).
    """
    if len(cells) == 0:
        return pa.array([], type=rtype)
    columns = {f.name: cells.field(f.name).to_pylist() for f in cells.type}
    rows = finalize_ldp(spec, columns)
    values = list(zip(*rows, strict=True))
    return pa.StructArray.from_arrays(
        [pa.array(list(v), type=f.type) for v, f in zip(values, rtype, strict=True)],
        fields=list(rtype))
