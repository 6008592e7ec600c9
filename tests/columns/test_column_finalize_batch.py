"""The Column finalize on the executors goes through the mean's batch finalize and releases
what the kernel's per-group finalize releases (issue 31). No Spark: the function is called
on a pandas batch of aggregated rows, as the Arrow UDF calls it."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pandas as pd
import pytest

from hdp_spark.core.kernels import kernel_of
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import GroupCells, NoiseContext
from hdp_spark.errors import EpsilonColumnError, ParameterError
from hdp_spark.spark.column_finalize import (
    decode_group,
    decode_groups,
    finalize_batch,
    query_key,
    struct_fields,
)


def _cells(queries: list[str | None]) -> pd.DataFrame:
    rows = []
    for g, query in enumerate(queries):
        levels = [0.0, 0.5, 1.0 + g, math.inf][: 1 + g % 4]
        counts = [3 + g, 10, 7 * g + 1, 2][: len(levels)]
        sums = [(c * 2**31) // (2 + g % 3) for c in counts]
        rows.append({"group": json.dumps([["int", str(g)], ["str", "k"]]) if g else None,
                     "level": levels, "code": [], "n": counts, "sums": sums,
                     "query": query})
    rows.append({"group": json.dumps([["int", "99"]]), "level": [], "code": [], "n": [],
                 "sums": [], "query": queries[0]})
    return pd.DataFrame(rows)


def _reference(spec: MeanSpec, key: ReleaseKey, cells: pd.DataFrame) -> list[tuple[Any, ...]]:
    from hdp_spark.core.stats import group_stats

    kernel = kernel_of(spec)
    out = []
    for text, levels, counts, sums, query in zip(cells["group"], cells["level"], cells["n"],
                                                cells["sums"], cells["query"], strict=True):
        stats = group_stats(spec.eps, list(levels), list(counts), list(sums))
        result = kernel.finalize(  # type: ignore[attr-defined]
            spec, GroupCells(stats, 0),
            NoiseContext(query_key(key, query), decode_group(text), spec.name))
        out.append(kernel.values(spec, result))
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


_ONE_QUERY = ["q1"] * 7  # one fingerprint: the columnar cells
_TWO_QUERIES = ["q1", "q1", "q2", "q1", "q2", "q1", "q1"]  # one batch call per query


@pytest.mark.parametrize("queries", [_ONE_QUERY, _TWO_QUERIES])
@pytest.mark.parametrize("method", ["adpm", "hpm-a", "hpm-cp", "uniform", "auto"])
def test_column_finalize_batch_equals_the_per_group_finalize(
        method: str, queries: list[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="hdp_spark")  # restored after the test
    spec = MeanSpec("x", "eps", 0.0, 10.0, method=method)  # type: ignore[arg-type]
    key = ReleaseKey.from_unsafe_seed(7)
    cells = _cells(queries)
    got = finalize_batch(spec, key, "mean", cells)
    names = [n for n, _ in struct_fields(kernel_of(spec).fields(spec), "mean")]
    assert list(got.columns) == names
    want = _reference(spec, key, cells)
    rows = list(got.itertuples(index=False, name=None))
    assert len(rows) == len(want)
    for w, g in zip(want, rows, strict=True):
        assert _same(list(w), list(g)), (w, g)


def test_column_finalize_batch_keeps_the_errors() -> None:
    spec = MeanSpec("x", "eps", 0.0, 10.0)
    key = ReleaseKey.from_unsafe_seed(7)
    with pytest.raises(ParameterError):
        finalize_batch(spec, key, "mean", _cells([None, None]))
    bad = _cells(["q", "q"])
    bad.at[0, "level"] = [-1.0]
    bad.at[0, "n"] = [1]
    bad.at[0, "sums"] = [0]
    with pytest.raises(EpsilonColumnError):
        finalize_batch(spec, key, "mean", bad)


def test_unsorted_cells_take_the_per_group_tables() -> None:
    """Levels out of order in one group: the general path sorts them, as before."""
    spec = MeanSpec("x", "eps", 0.0, 10.0)
    key = ReleaseKey.from_unsafe_seed(7)
    cells = _cells(_ONE_QUERY)
    cells.at[3, "level"] = [2.0, 0.5]
    cells.at[3, "n"] = [4, 9]
    cells.at[3, "sums"] = [3 * 2**31, 2**31]
    got = list(finalize_batch(spec, key, "mean", cells).itertuples(index=False, name=None))
    want = _reference(spec, key, cells)
    assert all(_same(list(w), list(g)) for w, g in zip(want, got, strict=True))


def _arrow_type(spec: MeanSpec) -> Any:
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    from hdp_spark.spark.output import spark_type

    fields = struct_fields(kernel_of(spec).fields(spec), "estimate")
    return to_arrow_type(T.StructType([T.StructField(n, spark_type(f), f.nullable)
                                       for n, f in fields]))


@pytest.mark.parametrize("queries", [_ONE_QUERY, _TWO_QUERIES])
@pytest.mark.parametrize("method", ["adpm", "hpm-a", "hpm-cp", "auto"])
def test_arrow_finalize_builds_the_columns_the_per_group_finalize_releases(
        method: str, queries: list[str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The executors' Arrow path: with one fingerprint the struct array is built straight
    from the batch's columns (no per-group records); with two, through the rows. Both
    equal the per-group finalize, field by field and level by level, NaN kept as NaN."""
    import pyarrow as pa

    from hdp_spark.spark import column_finalize
    from hdp_spark.spark.column_finalize import arrow_finalize

    caplog.set_level(logging.ERROR, logger="hdp_spark")  # restored after the test
    spec = MeanSpec("x", "eps", 0.0, 10.0, method=method)  # type: ignore[arg-type]
    key = ReleaseKey.from_unsafe_seed(11)
    if queries is _ONE_QUERY:  # the columns path must be the one taken

        def no_rows(*args: object) -> None:
            raise AssertionError("the rows path ran")

        monkeypatch.setattr(column_finalize, "finalize_rows", no_rows)
    frame = _cells(queries)
    frame["group"] = frame["group"].fillna(json.dumps([["int", "-1"]]))
    cells = pa.array(frame.to_dict("records"), type=pa.struct([
        ("group", pa.string()), ("level", pa.list_(pa.float64())),
        ("code", pa.list_(pa.int32())), ("n", pa.list_(pa.int64())),
        ("sums", pa.list_(pa.int64())), ("query", pa.string())]))
    rtype = _arrow_type(spec)
    got = arrow_finalize(spec, key, "estimate", cells, rtype)
    assert got.type == rtype
    want = _reference(spec, key, frame)
    names = [f.name for f in rtype]
    for w, g in zip(want, got.to_pylist(), strict=True):
        assert _same(list(w), [g[n] for n in names]), (w, g)
    assert any(math.isnan(g["tau"]) for g in got.to_pylist())  # NaN, not null
    part = arrow_finalize(spec, key, "estimate", cells.slice(2, 3), rtype)  # a slice of a batch
    for w, g in zip(want[2:5], part.to_pylist(), strict=True):
        assert _same(list(w), [g[n] for n in names]), (w, g)


def test_mean_columns_name_the_record_fields_in_order() -> None:
    """MeanColumns' column lists are the fields of MeanResult and LevelPrivacy, in order
    (its ``results`` builds the records positionally)."""
    import dataclasses

    from hdp_spark.core.mean.columns import GROUP_COLUMNS, LEVEL_COLUMNS, MeanColumns
    from hdp_spark.core.mean.finalize import LevelPrivacy, MeanResult
    from hdp_spark.errors import InternalError

    assert tuple(f.name for f in dataclasses.fields(MeanResult)) == (*GROUP_COLUMNS, "levels")
    assert [f.name for f in dataclasses.fields(LevelPrivacy)] == [
        "n" if c == "level_n" else c for c in LEVEL_COLUMNS]
    broken = MeanColumns()
    broken.estimate.append(1.0)
    with pytest.raises(InternalError, match="one entry per group"):
        broken.check()


def test_groups_decoded_in_one_parse_equal_one_by_one() -> None:
    texts = [
        None,
        json.dumps([["int", "7"]]),
        json.dumps([["str", "a\\\"b,]"], ["float", str(0x7FF8000000000000)],
                    ["float", str(-2**63)]]),  # float bits: NaN, -0.0
        json.dumps([["date", "2024-02-29"], ["decimal", "1.50"], ["int", None]]),
        json.dumps([["timestamp", "2024-01-01 00:00:00"], ["binary", "00ff"]]),
        json.dumps([]),
    ]
    want = tuple(decode_group(t) for t in texts)
    got = decode_groups(texts)
    assert repr(got) == repr(want)
    assert decode_groups([]) == ()
    assert decode_groups([None, None]) == ((), ())
    # texts that do not parse as one value each are decoded one by one (same result)
    split = ['[["int", "1"]', '["int", "2"]]']
    with pytest.raises(json.JSONDecodeError):
        decode_groups(split)


def test_the_mean_struct_needs_the_kernels_fields() -> None:
    """The Column's mean struct is laid out from the batch's columns by position: a struct
    type with another number of fields is refused, not filled in part."""
    import pyarrow as pa

    from hdp_spark.core.mean.columns import MeanColumns
    from hdp_spark.errors import InternalError
    from hdp_spark.spark.column_finalize import _mean_arrow

    with pytest.raises(InternalError, match="does not have the mean kernel's fields"):
        _mean_arrow(MeanColumns(), pa.struct([pa.field("estimate", pa.float64())]))


def test_a_column_finalizes_only_through_a_batch_kernel(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The Column's finalize has one path, the kernels' batch; a kernel without one (a
    selection kernel: it finalizes only selected groups) is refused before any statistic
    is read."""
    from hdp_spark.core.selection.kernels import SelectedMeanKernel
    from hdp_spark.errors import InternalError
    from hdp_spark.spark import column_finalize

    monkeypatch.setattr(column_finalize, "kernel_of", lambda spec: SelectedMeanKernel())
    spec = MeanSpec("x", "eps", 0.0, 1.0)
    with pytest.raises(InternalError,
                       match="SelectedMeanKernel has no batch finalize for a Column"):
        column_finalize.finalize_rows(spec, ReleaseKey.from_unsafe_seed(1), _cells(["q"]))
