"""A release's output as columns (core/output_columns.py): the same values as its row
tuples, and the same frame on both engines whichever form the engine is given."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from golden_cases import table

from hdp_spark.core.kernels import release_specs
from hdp_spark.core.output_columns import (
    ColumnResults,
    GroupResults,
    ListColumn,
    OutputColumns,
)
from hdp_spark.errors import InternalError
from hdp_spark.front import spec_of


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, np.ndarray | list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b) and type(a) is type(b)


def _core_engine(engine: Any, df: Any) -> Any:
    if engine.name == "spark":
        from hdp_spark.spark.engine import SparkEngine

        return SparkEngine(df)
    from hdp_spark.pandas.engine import PandasEngine

    return PandasEngine(df)


@pytest.mark.parametrize("by", [None, "g"])
def test_output_columns_are_the_rows_and_make_the_same_frame(engine: Any, by: str | None
                                                             ) -> None:
    mod = engine.module
    df = engine.frame(table())
    core = _core_engine(engine, df)
    specs = (
        spec_of(mod.hdp_mean("x", eps="eps", lower=0, upper=100)),
        spec_of(mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"])),
        spec_of(mod.hdp_mean("y", eps="ceps", lower=0, upper=10, method="hpm-cp",
                             alias="y2")),
    )
    keys = [("a",), ("b",), ("z",)] if by else None  # "z": a key without rows
    rel = release_specs(core, specs, by=by, keys=keys, schema=None, unsafe_seed=3)
    columns = rel.output_columns()
    assert any(isinstance(c, ListColumn) for c in columns.columns)  # the mean's levels
    assert _same(columns.rows(), rel.rows())
    got = core.materialize(rel.by, rel.columns(), columns, False)
    want = core.materialize(rel.by, rel.columns(), rel.rows(), False)
    if isinstance(got, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want)
        assert _same(got.to_dict("records"), want.to_dict("records"))
    else:
        assert got.schema == want.schema
        assert _same([r.asDict(recursive=True) for r in got.collect()],
                     [r.asDict(recursive=True) for r in want.collect()])


def test_list_column_rows_and_checks() -> None:
    column = ListColumn([0, 2, 2, 3], {"a": [1, 2, 3], "b": ["x", "y", "z"]})
    assert len(column) == 3
    assert column.rows() == [[{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], [], [{"a": 3, "b": "z"}]]
    assert ListColumn([0, 0], {}).rows() == [[]]
    with pytest.raises(InternalError, match="offsets"):
        ListColumn([0, 2], {"a": [1]})
    with pytest.raises(InternalError, match="offsets"):
        ListColumn([], {"a": []})
    with pytest.raises(InternalError, match="offsets"):
        ListColumn([1, 2], {"a": [1, 2]})


def test_output_columns_rows_and_checks() -> None:
    out = OutputColumns([["k1", "k2"], [1.0, 2.0], ListColumn([0, 1, 1], {"a": [5]})])
    assert len(out) == 2
    assert out.rows() == [("k1", 1.0, [{"a": 5}]), ("k2", 2.0, [])]
    assert len(OutputColumns([])) == 0
    with pytest.raises(InternalError, match="one length"):
        OutputColumns([[1, 2], [3]])


def test_the_mean_output_is_laid_out_from_the_batch_columns(engine: Any) -> None:
    """The release API keeps the mean's batch columns: its frame is built without a record
    per group, and the records, built when read, are the same values."""
    mod = engine.module
    core = _core_engine(engine, engine.frame(table()))
    spec = spec_of(mod.hdp_mean("x", eps="eps", lower=0, upper=100))
    rel = release_specs(core, (spec,), by="g", keys=[("a",), ("b",), ("z",)], schema=None,
                        unsafe_seed=5)
    held = rel.results[spec.name]
    assert isinstance(held, GroupResults)
    assert isinstance(held.results, ColumnResults)
    columns = rel.output_columns()
    assert held.results._built is None  # the frame needed no record
    assert _same(columns.rows(), rel.rows())
    assert held.results._built is not None


def test_group_and_column_results() -> None:
    class Batch:
        size = 3

        def results(self) -> list[Any]:
            return ["r1", "r2", "r3"]

        def value_columns(self) -> list[Any]:
            return [["r1", "r2", "r3"]]

    lazy = ColumnResults(Batch())
    assert len(lazy) == 3
    assert lazy[1] == "r2"
    assert lazy[1:] == ["r2", "r3"]
    assert list(lazy) == ["r1", "r2", "r3"]
    assert lazy == ["r1", "r2", "r3"]
    assert lazy == ColumnResults(Batch())
    assert repr(lazy) == repr(["r1", "r2", "r3"])
    keys = (("a",), ("b",), ("c",))
    held = GroupResults(keys, lazy)
    assert held[("b",)] == "r2"
    assert list(held) == list(keys)
    assert len(held) == 3
    assert dict(held) == {("a",): "r1", ("b",): "r2", ("c",): "r3"}
    assert held.in_order(keys) is lazy
    assert held.in_order(list(keys)) is lazy
    assert held.in_order((("c",), ("a",))) == ["r3", "r1"]
    with pytest.raises(KeyError):
        held[("d",)]
    with pytest.raises(InternalError, match="one result per key"):
        GroupResults(keys, ["r1"])


def test_a_selection_kernel_without_select_keys_is_refused() -> None:
    """Every cell kernel finalizes through its batch; a selection kernel has none and runs
    only under `select_keys` (an internal guard: the public calls never get there)."""
    import pandas as pd

    from hdp_spark.core.kernels import release_specs
    from hdp_spark.core.mean.spec import MeanSpec
    from hdp_spark.core.selection.kernels import SelectedMeanKernel
    from hdp_spark.errors import InternalError
    from hdp_spark.pandas.engine import PandasEngine

    frame = pd.DataFrame({"x": [1.0, 2.0], "eps": [1.0, 1.0]})
    with pytest.raises(InternalError, match="SelectedMeanKernel finalizes only under"):
        release_specs(PandasEngine(frame), [MeanSpec("x", "eps", 0.0, 3.0)],
                      kernels={0: SelectedMeanKernel()}, unsafe_seed=1)
