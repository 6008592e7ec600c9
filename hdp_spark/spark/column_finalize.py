"""The finalize of the Column aggregators, run on the executors (an Arrow UDF).

Privacy-relevant module: it turns the exact cells of each group into the released row with
the same kernel and the same noise context as the release API (release key, group key,
aggregator name), the key derived per query from the fingerprint of what the query
aggregates; a group's numbers are the release API's for the same (derived) key. The group key
comes from the native aggregate (the group's own grouping values, see ``GroupText`` in the
JVM extension), never from the statistics, so two groups with identical statistics draw
independent noise.

Imports no pyspark: it runs in Spark's Python workers on one batch of groups at a time.
"""

from __future__ import annotations

import datetime
import json
import math
import struct
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from hdp_spark.core.histogram.release import build_histogram_groups
from hdp_spark.core.kernels import MeanKernel, kernel_of
from hdp_spark.core.mean.batch import MeanCells, finalize_mean_columns
from hdp_spark.core.mean.columns import MeanColumns
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import BatchCellKernel, CategoryRequest, OutputField
from hdp_spark.core.stats import MAX_CELL_ROWS, GroupStats, group_stats
from hdp_spark.errors import InternalError, ParameterError
from hdp_spark.spark._common import arrow_column

__all__ = ["NO_FINGERPRINT", "arrow_finalize", "cell_stats", "decode_group", "decode_groups",
           "finalize_batch", "finalize_rows", "query_key", "struct_fields"]


def _float(bits: str) -> float:
    return float(struct.unpack("<d", struct.pack("<q", int(bits)))[0])


_DECODE: dict[str, Any] = {
    "str": str, "bool": bool, "int": int, "float": _float,
    "date": datetime.date.fromisoformat, "decimal": Decimal,
    "timestamp": lambda v: f"timestamp:{v}", "timestamp_ntz": lambda v: f"timestamp_ntz:{v}",
    "binary": bytes.fromhex,
}


def _value(tag: str, v: str | None) -> object:
    if v is None:
        return None
    out = _DECODE[tag](v)
    # Spark groups every NaN together (one group); a noise context has no NaN, so the
    # group is bound by a tagged text, as timestamps are
    return "float:nan" if isinstance(out, float) and math.isnan(out) else out


def decode_group(text: str | None) -> tuple[object, ...]:
    """The group key of the native aggregate's group text (``()`` for a global aggregate).

    Values are typed as the release API types a collected key (str, int, bool, float,
    ``datetime.date``, ``Decimal``); timestamps and a NaN grouping value become tagged text
    (still one key per group, but not the release API's value).

    Privacy:
        Grouping values are public attributes in this model; the key only binds noise.
    """
    if text is None:
        return ()
    return tuple(_value(tag, v) for tag, v in json.loads(text))


def decode_groups(texts: Sequence[str | None]) -> tuple[tuple[object, ...], ...]:
    """:func:`decode_group` of every text of a batch, the JSON parsed in one call (the texts
    are the native aggregate's, one JSON array each; if the joined parse does not give one
    value per text, each is parsed alone).

    Privacy:
        As :func:`decode_group`.
    """
    present = [t for t in texts if t is not None]
    parsed = json.loads("[" + ",".join(present) + "]") if present else []
    if len(parsed) != len(present):
        return tuple(decode_group(t) for t in texts)
    items = iter(parsed)
    return tuple(() if t is None else tuple(_value(tag, v) for tag, v in next(items))
                 for t in texts)


def query_key(key: ReleaseKey, fingerprint: str | None) -> ReleaseKey:
    """The noise key of one query: ``key`` derived with the query's fingerprint.

    Raises:
        ParameterError: no fingerprint (the session was built without hdp_spark's analyzer
            rule, so what is aggregated cannot be told apart: no noise is drawn).

    Privacy:
        See :meth:`ReleaseKey.for_query`: two different queries draw independent noise.
    """
    if fingerprint is None:
        raise ParameterError(NO_FINGERPRINT)
    return key.for_query(fingerprint)


NO_FINGERPRINT = (
    "the Column and SQL aggregators need hdp_spark's analyzer rule to tell queries apart: "
    "build the session with hdp_spark.spark.configure(SparkSession.builder...)."
)


def struct_fields(fields: Sequence[OutputField], main: str) -> list[tuple[str, OutputField]]:
    """The Column's struct fields: the kernel's output fields, ``main`` for the estimate.

    Privacy:
        None: the output layout is public.
    """
    return [(f.suffix.lstrip("_") or main, f) for f in fields]


def _list(a: Any) -> list[Any]:
    return a.tolist() if hasattr(a, "tolist") else list(a)


def cell_stats(spec: Any, levels: Any, codes: Any, counts: Any, sums: Any) -> GroupStats:
    """One group's statistics from its native cells (levels, category codes, counts, sums).

    Privacy:
        None: a change of layout of exact statistics (never published as such).
    """
    # plain Python numbers first: numpy scalars cost ~1 µs per conversion
    levels, codes, counts, sums = (_list(a) for a in (levels, codes, counts, sums))
    if isinstance(kernel_of(spec).request(spec), CategoryRequest):  # type: ignore[attr-defined]
        rows = (((), lv, cd, n)
                for lv, cd, n in zip(levels, codes, counts, strict=True))
        return build_histogram_groups(spec, rows).get((), GroupStats(()))
    return group_stats(spec.eps, levels, counts, sums)


def finalize_rows(spec: Any, key: ReleaseKey, cells: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Released rows of one batch of groups (``cells``: column name -> one value per group),
    each in the order of the kernel's output fields.

    Privacy:
        The kernel's finalize with the release API's noise context: each group's noise is
        keyed by the Column's release key derived with the query's fingerprint (what is
        aggregated: see ``QueryFingerprint`` in the JVM extension), the group key and the
        aggregator's name, and bound to the group's exact statistics. So re-evaluating one
        query gives the same numbers; another query, or changed data, unrelated noise, and
        two queries with equal statistics never equal outputs. The per-row privacy loss
        is the aggregator's (each row's ε_i, or less where the weights give privacy for
        free), per query.
    """
    kernel = kernel_of(spec)
    if not isinstance(kernel, BatchCellKernel):  # the Columns are the mean and histogram
        msg = f"{type(kernel).__name__} has no batch finalize for a Column"
        raise InternalError(msg)
    return _batch_values(kernel, spec, key, cells)


def finalize_batch(spec: Any, key: ReleaseKey, main: str, cells: pd.DataFrame) -> pd.DataFrame:
    """:func:`arrow_finalize`'s released rows for a pandas batch of cells, as a DataFrame
    named by the Column's struct fields (the same paths: the batch is converted to Arrow).

    Privacy:
        As :func:`finalize_rows` (a change of representation only).
    """
    names = [name for name, _ in struct_fields(kernel_of(spec).fields(spec), main)]
    table = pa.Table.from_pandas(cells, preserve_index=False)
    children = {name: table.column(name).combine_chunks() for name in table.column_names}
    done = _released(spec, key, children)
    if isinstance(done, MeanColumns):
        kernel = kernel_of(spec)
        done = [kernel.values(spec, r) for r in done.results()]
    return pd.DataFrame(done, columns=names)


def _released(spec: Any, key: ReleaseKey, children: Mapping[str, pa.Array]
              ) -> MeanColumns | list[tuple[Any, ...]]:
    """A batch's released values: a mean's as columns when its cells allow
    (:func:`_arrow_mean_columns`), otherwise one row per group (:func:`finalize_rows`)."""
    batch = _arrow_mean_columns(spec, key, children)
    if batch is not None:
        return batch
    columns = {name: child.to_numpy(zero_copy_only=False) for name, child in children.items()}
    return finalize_rows(spec, key, columns)


def _batch_values(kernel: BatchCellKernel, spec: Any, key: ReleaseKey,
                  cells: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The released rows of a batch through the kernel's batch finalize: one call per query
    fingerprint present in the batch (one, in practice), the same results as the kernel's
    finalize per group (same key, group key, name and statistics: the same noise)."""
    stats: list[GroupStats] = []
    groups_l: list[tuple[object, ...]] = []
    by_query: dict[str | None, list[int]] = {}
    for i, (text, levels, codes, counts, sums, query) in enumerate(zip(
        cells["group"], cells["level"], cells["code"], cells["n"], cells["sums"],
        cells["query"], strict=True
    )):
        if query not in by_query:
            query_key(key, query)  # refuses a missing fingerprint before any statistic
        by_query.setdefault(query, []).append(i)
        stats.append(cell_stats(spec, levels, codes, counts, sums))
        groups_l.append(decode_group(text))
    results: list[Any] = [None] * len(stats)
    for query, rows in by_query.items():
        done = kernel.finalize_batch(spec, [stats[i] for i in rows], 0, query_key(key, query),
                                     tuple(groups_l[i] for i in rows), spec.name)
        for i, result in zip(rows, done, strict=True):
            results[i] = result
    return [kernel.values(spec, r) for r in results]


def _arrow_mean_columns(spec: Any, key: ReleaseKey, children: Mapping[str, pa.Array]
                        ) -> MeanColumns | None:
    """:func:`_mean_columns` of an Arrow batch, its cells read from the list arrays' flat
    values and offsets (no per-group array), or None when the batch needs the general path
    (it then sorts or raises exactly as before)."""
    if not isinstance(kernel_of(spec), MeanKernel):  # the mean's own columnar finalize
        return None
    query = children["query"]
    if query.null_count or len(query.unique()) != 1:
        return None
    flat = [_flat_list(children[name]) for name in ("level", "n", "sums")]
    if any(f is None for f in flat):
        return None
    (offsets, levels), (c_off, counts), (s_off, sums) = flat  # type: ignore[misc]
    if not (np.array_equal(offsets, c_off) and np.array_equal(offsets, s_off)):
        return None
    columnar = _checked_cells(offsets, levels.astype(np.float64, copy=False),
                              counts.astype(np.int64, copy=False),
                              sums.astype(np.int64, copy=False))
    if columnar is None:
        return None
    groups = decode_groups(children["group"].to_pylist())
    return finalize_mean_columns(spec, columnar, 0, query_key(key, query[0].as_py()), groups,
                                 spec.name)


def _flat_list(array: pa.Array) -> tuple[Any, Any] | None:
    """(offsets from 0, flat values) of a list array without nulls, else None."""
    if not isinstance(array, pa.ListArray) or array.null_count:
        return None
    values = array.flatten()
    if values.null_count:
        return None
    offsets = array.offsets.to_numpy().astype(np.int64)
    return offsets - offsets[0], values.to_numpy()


def _mean_arrow(columns: MeanColumns, rtype: pa.StructType) -> pa.StructArray:
    """The Column's struct array straight from the batch's columns (``value_columns``: one
    Arrow array per field and the levels as a list of structs over flat arrays, no
    per-group or per-level Python object). The fields of ``rtype`` are the mean kernel's,
    in its order."""
    values = columns.value_columns()
    if len(rtype) != len(values):
        msg = "the mean Column's struct type does not have the mean kernel's fields"
        raise InternalError(msg)
    return pa.StructArray.from_arrays(
        [arrow_column(column, f.type) for column, f in zip(values, rtype, strict=True)],
        fields=list(rtype))


def _checked_cells(offsets: Any, flat: Any, count: Any, total: Any) -> MeanCells | None:
    """The cells as :class:`MeanCells`, or None when some group needs the per-group tables
    (an invalid-ε code, levels out of order within a group, a cell with more rows than its
    sums can hold): that path sorts or raises exactly as before (``group_stats``).

    Privacy:
        None: a change of layout; the values are the cells the native aggregate computed.
    """
    if not bool((flat >= 0).all()) or (count.size and int(count.max()) > MAX_CELL_ROWS):
        return None
    step = np.diff(flat)
    inside = np.ones(step.shape[0], dtype=bool)  # steps within a group, not across groups
    starts = offsets[1:-1]
    inside[starts[(starts > 0) & (starts <= step.shape[0])] - 1] = False
    if not bool((step[inside] >= 0).all()):
        return None
    return MeanCells(offsets, flat, count, total)


def arrow_finalize(spec: Any, key: ReleaseKey, main: str, cells: pa.StructArray,
                   rtype: pa.StructType) -> pa.StructArray:
    """:func:`finalize_rows` over one Arrow batch of cells, as an Arrow struct array of
    type ``rtype`` (Arrow in and out, no pandas frame between). Floats go to Arrow as they
    are: a NaN the kernel releases (``tau`` of a fallback group) stays NaN, as in the
    release API, where a pandas UDF would turn it into null.

    Privacy:
        As :func:`finalize_rows` (a change of representation only).
    """
    if len(cells) == 0:
        return pa.array([], type=rtype)
    children = dict(zip((f.name for f in cells.type), cells.flatten(), strict=True))
    rows = _released(spec, key, children)
    if isinstance(rows, MeanColumns):
        return _mean_arrow(rows, rtype)
    values = list(zip(*rows, strict=True))
    return pa.StructArray.from_arrays(
        [pa.array(list(v), type=f.type) for v, f in zip(values, rtype, strict=True)],
        fields=list(rtype))
