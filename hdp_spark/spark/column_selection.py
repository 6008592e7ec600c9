"""The finalize of the Column aggregators under partition selection (``keys=select_keys``),
run on the executors (Arrow UDFs).

Privacy-critical module. Two steps, each over one Arrow batch of groups:

* :func:`selection_weights`, the selection: per candidate group, the release API's
  decision (:func:`~hdp_spark.core.selection.mechanism.select_one`, for the whole batch
  through :func:`~hdp_spark.core.selection.mechanism.select_many`: W = Σ k_i over the
  group's ε levels, W̃ = W + two-sided geometric noise from the group's own keyed stream,
  released iff W̃ >= T): the noisy weight W̃ of a selected group, null otherwise. The JVM extension
  (``SelectionPlan``) computes it once per group from the first aggregator's cells and drops
  the groups without one before anything else reads them, so an unselected key leaves no row.
* :func:`selected_finalize`, each aggregator's statistics for the selected groups, divided
  by that same W̃ (the release API's ``finalize_selected``), with the share (1 - f)/A of the
  budget, A the number of aggregators of the aggregate (the extension passes it).

Both draw from the Column's release key derived with the query's fingerprint (as every
Column finalize, :func:`~hdp_spark.spark.column_finalize.query_key`), from separate keyed
streams (the selection's and each statistic's contexts differ), so a query's selection and
estimates equal the release API's ``agg(..., keys=select_keys(...))`` for that derived key.

Imports no pyspark: it runs in Spark's Python workers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.selection.kernels import selected_kernel_of
from hdp_spark.core.selection.mechanism import (
    Selected,
    group_weight,
    noisy_weights,
    select_many,
)
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.stats import GroupStats
from hdp_spark.spark.column_finalize import cell_stats, decode_group, decode_groups, query_key

__all__ = ["SELECT_PREFIX", "selected_finalize", "selected_rows", "selection_of",
           "selection_weights", "unkeyed"]

SELECT_PREFIX = "select:"
"""How ``select_keys`` travels to the extension: the group decision ``select:<JSON
parameters>`` (``SelectionPlan`` in the JVM extension; the SQL form writes the same)."""


def selection_of(groups: str) -> SelectKeys | None:
    """The ``select_keys`` parameters of a group decision (None: not a selection).

    Privacy:
        None: public parameters.
    """
    if not groups.startswith(SELECT_PREFIX):
        return None
    params = json.loads(unkeyed(groups)[len(SELECT_PREFIX):])
    params.pop("unit", None)  # a privacy unit's (``column_unit``): the JVM's bounding reads it
    params.pop("public", None)
    params.pop("keys", None)  # a privacy unit's public key list: the JVM's positions
    return SelectKeys(**params)


def unkeyed(groups: str) -> str:
    """A group decision without the bounding key a privacy unit's carries (``#<64 hex>``)."""
    return groups[:-65] if len(groups) > 65 and groups[-65] == "#" else groups


def _columns(cells: pa.StructArray) -> dict[str, Any]:
    return {f.name: cells.field(f.name).to_numpy(zero_copy_only=False) for f in cells.type}


def _rows(key: ReleaseKey, cells: Mapping[str, Any]) -> Iterator[tuple[Any, ...]]:
    """(group text, levels, codes, counts, sums, query key) of each group of a batch."""
    keys: dict[str | None, ReleaseKey] = {}
    for text, levels, codes, counts, sums, query in zip(
        cells["group"], cells["level"], cells["code"], cells["n"], cells["sums"],
        cells["query"], strict=True
    ):
        qkey = keys.get(query)
        if qkey is None:  # refuses a missing fingerprint before any statistic is read
            qkey = keys[query] = query_key(key, query)
        yield text, levels, codes, counts, sums, qkey


def _groups(spec: Any, key: ReleaseKey, cells: Mapping[str, Any]) -> list[
        tuple[tuple[object, ...], GroupStats, ReleaseKey]]:
    """(group key, statistics, query key) of each group of a batch, in order."""
    return [(decode_group(text), cell_stats(spec, levels, codes, counts, sums), qkey)
            for text, levels, codes, counts, sums, qkey in _rows(key, cells)]


def selection_weights(spec: Any, key: ReleaseKey, selection: SelectKeys,
                      cells: pa.StructArray) -> pa.Array:
    """W̃ (in steps of γ) of each group of the batch that the selection releases, null for
    the others (int64).

    Privacy:
        The release API's selection (see :mod:`hdp_spark.core.selection.mechanism`): a
        group holding one person is released with probability at most δ; each row's
        selection loss is f·κ_i. W̃ is published (``weight``) only for selected groups.
        The nulls never leave the executors: the extension filters those rows out. Under a
        privacy unit (public keys, no threshold) every group has its W̃, as the release
        API's ``weigh_public``.
    """
    if len(cells) == 0:
        return pa.array([], type=pa.int64())
    weights: list[int] = []
    texts: list[str | None] = []
    by_key: dict[int, tuple[ReleaseKey, list[int]]] = {}  # rows per query key (one, usually)
    for i, (text, levels, codes, counts, sums, qkey) in enumerate(_rows(key, _columns(cells))):
        lv, n = levels.tolist(), counts.tolist()
        if any(x < 0 or x != x for x in lv):  # an invalid ε: the level table's error
            stats = cell_stats(spec, levels, codes, counts, sums)
            lv, n = [r.level for r in stats.rows], [r.count for r in stats.rows]
        weights.append(group_weight(selection, lv, n))
        texts.append(text)
        by_key.setdefault(id(qkey), (qkey, []))[1].append(i)
    groups = decode_groups(texts)
    out: list[int | None] = [None] * len(weights)
    for qkey, rows in by_key.values():  # each group's decision, the noise drawn at once
        decided: list[int | None]
        if selection.keys_public:  # a privacy unit over public keys: every group, its W̃
            decided = list(noisy_weights(selection, [weights[i] for i in rows], qkey,
                                         [groups[i] for i in rows]))
        else:
            decided = select_many(selection, [weights[i] for i in rows], qkey,
                                  [groups[i] for i in rows])
        for i, noisy in zip(rows, decided, strict=True):
            out[i] = noisy
    return pa.array(out, type=pa.int64())


def selected_rows(spec: Any, key: ReleaseKey, selection: SelectKeys,
                  cells: Mapping[str, Any], weights: Any, parts: Any) -> list[tuple[Any, ...]]:
    """The released rows of a batch of selected groups, in the order of the selection
    kernel's output fields.

    Privacy:
        The release API's ``finalize_selected``: the statistic's noise (scale from the
        share (1 - f)/A) from its own keyed stream, divided by the selection's W̃; each
        row's loss is (1 - f)·κ_i/A per aggregator (f·κ_i + (1 - f)·κ_i = κ_i and δ in
        all, per query).
    """
    kernel = selected_kernel_of(spec)
    found = _groups(spec, key, cells)
    by_key: dict[int, tuple[ReleaseKey, list[int]]] = {}  # rows per query key (one, usually)
    for i, (_, _, qkey) in enumerate(found):
        by_key.setdefault(id(qkey), (qkey, []))[1].append(i)
    results: list[Any] = [None] * len(found)
    for qkey, at in by_key.values():  # every group of a query key at once
        done = kernel.finalize_selected_batch(
            spec, [found[i][1] for i in at], 0, qkey, [found[i][0] for i in at], spec.name,
            [Selected(selection, int(weights[i]), int(parts[i])) for i in at])
        for i, result in zip(at, done, strict=True):
            results[i] = result
    return [kernel.values(spec, r) for r in results]


def selected_finalize(spec: Any, key: ReleaseKey, selection: SelectKeys,
                      cells: pa.StructArray, weights: pa.Array, parts: pa.Array,
                      rtype: pa.StructType) -> pa.StructArray:
    """:func:`selected_rows` over one Arrow batch, as a struct array of type ``rtype``.

    Privacy:
        As :func:`selected_rows` (a change of representation only).
    """
    if len(cells) == 0:
        return pa.array([], type=rtype)
    rows = selected_rows(spec, key, selection, _columns(cells), weights.to_pylist(),
                         parts.to_pylist())
    values = list(zip(*rows, strict=True))
    return pa.StructArray.from_arrays(
        [pa.array(list(v), type=f.type) for v, f in zip(values, rtype, strict=True)],
        fields=list(rtype))
