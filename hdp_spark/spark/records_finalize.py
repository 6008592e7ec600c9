"""The finalize of the heavy-hitters Column aggregator, run on the executors (an Arrow UDF).

Privacy-critical module. Per group of one Arrow batch, it turns the group's exact record
counts (the native ``hdp_records`` aggregate: the count of each distinct whole-record key)
into the released row by running the release API's mechanism,
:func:`~hdp_spark.core.partial.heavy_hitters.run_heavy_hitters`, with a
:class:`~hdp_spark.core.partial.record_counter.RecordCounter` over those counts, whose
answers are the exact counts any engine's tree counter gives on the group's rows. Its key:
the Column's release key derived with the query's fingerprint (what the query aggregates:
:func:`~hdp_spark.spark.column_finalize.query_key`), then with the aggregator's name and
the group's identity (:func:`group_key`). Within that key the mechanism binds each node's
noise to the node's exact counts and the count stage's to the released keys' exact counts,
as in the release API. So one query re-evaluated gives the same numbers; another query, or
another group, independent noise.

Imports no pyspark session: it runs in Spark's Python workers on one batch of groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hdp_spark.core.kernels import HeavyHittersKernel
from hdp_spark.core.noise import ReleaseKey, encode_context
from hdp_spark.core.partial.heavy_hitters import run_heavy_hitters
from hdp_spark.core.partial.record_counter import RecordCounter
from hdp_spark.core.partial.spec import HeavyHittersSpec
from hdp_spark.core.pipeline import OutputField
from hdp_spark.spark.column_finalize import query_key

__all__ = ["MAIN", "REPORT_FIELDS", "arrow_finalize_records", "finalize_records",
           "group_key", "record_fields"]

MAIN = "records"
"""The struct field of the released records (the ``_MAIN`` field of the other Columns)."""

REPORT_FIELDS: tuple[OutputField, ...] = (
    *(OutputField(n, "int", nullable=False) for n in ("d", "d_pad", "depth", "noisy_nodes")),
    *(OutputField(n, "float", nullable=False) for n in (
        "eps0", "eps_attribute", "eps_tree", "eps_tree_lemma28", "eps_tree_naive",
        "eps_count", "eps_person", "eps_person_group_privacy", "rho_attribute",
        "rho_person", "tree_scale")),
    OutputField("mu", "int", nullable=False),
    OutputField("kappa", "float", nullable=False),
    OutputField("count_scale", "float?"),
    OutputField("count_ci_level", "float?"),
    OutputField("delta", "float", nullable=False),
    OutputField("release_max_count", "int", nullable=False),
    OutputField("failure_prob", "float", nullable=False),
    OutputField("detection_count", "int", nullable=False),
    OutputField("leaf_thresholding", "bool", nullable=False),
    OutputField("leaf_threshold", "int?"),
    OutputField("leaf_low_inclusion", "float?"),
    OutputField("unit_checked", "bool", nullable=False),
    OutputField("unsafe_seed", "bool", nullable=False),
)
"""The scalar numeric and boolean fields of
:class:`~hdp_spark.core.partial.heavy_hitters.HeavyHittersReport`, after the records in the
Column's struct (public: functions of the parameters only, the same in every group)."""

_GROUP_CONTEXT = "hh/column-group"


def record_fields(spec: HeavyHittersSpec) -> list[tuple[str, OutputField]]:
    """The Column's struct fields: ``records`` (the release API's list of released keys),
    then :data:`REPORT_FIELDS`.

    Privacy:
        None: the output layout is public.
    """
    records = HeavyHittersKernel().fields(spec)[0]
    return [(MAIN, records), *((f.suffix, f) for f in REPORT_FIELDS)]


def group_key(query: ReleaseKey, name: str, group: str | None) -> ReleaseKey:
    """The key of one group's mechanism: ``query`` (the Column's key for the query)
    derived with the aggregator's name and the group's text (the native aggregate's
    canonical text of the grouping values, ``"[]"`` for a global aggregate; None is taken
    as ``""``).

    Privacy:
        ``HMAC-SHA256(query key, domain || context)`` (the block key of the keyed stream of
        a context no draw uses): two groups, or two aggregators of different names, run
        the mechanism under independent-looking keys, so equal statistics never give equal
        outputs; the same group of the same query derives the same key. As secret as
        ``query`` and keeps its ``unsafe`` mark.
    """
    context = encode_context((_GROUP_CONTEXT, name, "" if group is None else group))
    return ReleaseKey(query.stream_keys([context])[0], unsafe=query.unsafe)


def finalize_records(spec: HeavyHittersSpec, key: ReleaseKey, cells: Mapping[str, Sequence[Any]]
                     ) -> list[tuple[Any, ...]]:
    """The released row of each group of a batch (``cells``: the native aggregate's
    columns ``group``, ``key``, ``n``, ``query``, one value per group), in the order of
    :func:`record_fields`.

    Privacy:
        Per group, the release API's heavy-hitters mechanism under :func:`group_key` (ε₀ per
        attribute, the report's ``eps_person`` per person, per query and group; the groups
        are disjoint, so a person's loss is one group's). A missing fingerprint is refused
        before any statistic is read.
    """
    kernel = HeavyHittersKernel()
    sizes = [d.size for d in spec.domains]
    keys: dict[str | None, ReleaseKey] = {}
    out: list[tuple[Any, ...]] = []
    for text, record_keys, counts, query in zip(cells["group"], cells["key"], cells["n"],
                                                cells["query"], strict=True):
        qkey = keys.get(query)
        if qkey is None:
            qkey = keys[query] = query_key(key, query)
        counter = RecordCounter(record_keys, counts, sizes)
        result = run_heavy_hitters(spec, counter, group_key(qkey, spec.name, text))
        report = result.report.as_dict()
        out.append((*kernel.values(spec, result), *(report[f.suffix] for f in REPORT_FIELDS)))
    return out


def arrow_finalize_records(spec: HeavyHittersSpec, key: ReleaseKey, cells: pa.StructArray,
                           rtype: pa.StructType) -> pa.StructArray:
    """:func:`finalize_records` over one Arrow batch, as a struct array of type ``rtype``.

    Privacy:
        As :func:`finalize_records` (a change of representation only).
    """
    if len(cells) == 0:
        return pa.array([], type=rtype)
    columns = {f.name: cells.field(f.name).to_pylist() for f in cells.type}
    rows = finalize_records(spec, key, columns)
    values = list(zip(*rows, strict=True))
    return pa.StructArray.from_arrays(
        [pa.array(list(v), type=f.type) for v, f in zip(values, rtype, strict=True)],
        fields=list(rtype))
