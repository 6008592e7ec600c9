"""The finalize of the record-count Column aggregators (heavy hitters, marginals, MWEM,
attribute histograms), run on the executors (an Arrow UDF).

Privacy-critical module. Per group of one Arrow batch, it turns the group's exact record
counts (the native ``hdp_records`` aggregate: the count of each distinct whole-record key)
into the released row by running the release API's mechanism of the spec's family
(:mod:`~hdp_spark.spark.records_families`: e.g.
:func:`~hdp_spark.core.partial.heavy_hitters.run_heavy_hitters`) with a
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

from hdp_spark.core.noise import ReleaseKey, encode_context
from hdp_spark.core.partial.record_counter import RecordCounter
from hdp_spark.core.pipeline import OutputField
from hdp_spark.spark.column_finalize import query_key
from hdp_spark.spark.records_families import HH_REPORT_FIELDS, RecordSpec, family_of, run_group

__all__ = ["MAIN", "REPORT_FIELDS", "arrow_finalize_records", "finalize_records",
           "group_key", "record_fields"]

MAIN = "records"
"""The struct field of the heavy hitters' released records (the ``_MAIN`` field of the other
Columns; marginals, MWEM and attribute histograms use ``cells``)."""

REPORT_FIELDS: tuple[OutputField, ...] = HH_REPORT_FIELDS
"""The heavy hitters' report fields after the records in the Column's struct (see
:data:`~hdp_spark.spark.records_families.HH_REPORT_FIELDS`)."""

_GROUP_CONTEXT = "hh/column-group"


def record_fields(spec: RecordSpec) -> list[tuple[str, OutputField]]:
    """The Column's struct fields: the release API's table as a list (``records`` for
    heavy hitters, ``cells`` for the other families), then the report's scalar fields.

    Privacy:
        None: the output layout is public.
    """
    return family_of(spec).fields(spec)


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


def finalize_records(spec: RecordSpec, key: ReleaseKey, cells: Mapping[str, Sequence[Any]]
                     ) -> list[tuple[Any, ...]]:
    """The released row of each group of a batch (``cells``: the native aggregate's
    columns ``group``, ``key``, ``n``, ``query``, one value per group), in the order of
    :func:`record_fields`.

    Privacy:
        Per group, the release API's mechanism of the spec's family
        (:func:`~hdp_spark.spark.records_families.run_group`) under :func:`group_key` (ε₀
        per attribute, the report's per-person budget, per query and group; the groups are
        disjoint, so a person's loss is one group's). A missing fingerprint is refused
        before any statistic is read.
    """
    sizes = [d.size for d in spec.domains]
    keys: dict[str | None, ReleaseKey] = {}
    out: list[tuple[Any, ...]] = []
    for text, record_keys, counts, query in zip(cells["group"], cells["key"], cells["n"],
                                                cells["query"], strict=True):
        qkey = keys.get(query)
        if qkey is None:
            qkey = keys[query] = query_key(key, query)
        counter = RecordCounter(record_keys, counts, sizes)
        out.append(run_group(spec, counter, group_key(qkey, spec.name, text)))
    return out


def arrow_finalize_records(spec: RecordSpec, key: ReleaseKey, cells: pa.StructArray,
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
