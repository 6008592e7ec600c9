"""Both engines: identical pre-noise statistics (Spark input repartitioned), identical
category matching on tricky values, out-of-domain and null values without errors, grouped
rules, output layout, materialization and backend parity (O27)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from histogram_testlib import backend, run_histogram

from hdp_spark.aggregators import hdp_histogram
from hdp_spark.core.histogram.release import (
    COUNT_COLUMNS,
    HISTOGRAM_COLUMNS,
    build_histogram_groups,
)
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.stats import GroupStats

INF = math.inf
STRINGS = ["a", "b", "A", "a ", " a", "ä", "", None, "zz", "other", "b"]
EPS = [0.0, INF, 0.05, 0.3, 1.0, 3.0, 1e200, 0.3, 0.05, 1.0, 0.07]


def string_frame(n: int = 220, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "c": [STRINGS[i] for i in rng.integers(0, len(STRINGS), n)],
            "eps": [EPS[i] for i in rng.integers(0, len(EPS), n)],
            "g": [["x", "y", "z", None][i] for i in rng.integers(0, 4, n)],
            "h": rng.integers(0, 3, n),
        }
    )


FLOATS = [0.0, -0.0, 1.0, 2.0, 2.5, np.nan, INF, -INF, 1e300, float(2**53), -5.0, 7.0]
INTS = [0, 1, 2, 2**53, 2**53 + 1, -5, 2**62, -1, 7]


def numeric_frame(n: int = 200, seed: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ints = pd.array([INTS[i] for i in rng.integers(0, len(INTS), n)], dtype="Int64")
    ints[rng.random(n) < 0.1] = pd.NA
    return pd.DataFrame(
        {
            "f": [FLOATS[i] for i in rng.integers(0, len(FLOATS), n)],
            "f32": np.array(
                [FLOATS[i] for i in rng.integers(0, len(FLOATS) - 4, n)], np.float32
            ),  # no 1e300 (overflows float32), 2**53, -5, 7
            "i": ints,
            "eps": [EPS[i] for i in rng.integers(0, len(EPS), n)],
        }
    )


def reference_code(spec: HistogramSpec, value: object) -> int:
    """The documented matching rule, row by row in plain Python."""
    unmatched = spec.unmatched_code
    if value is None or value is pd.NA:
        return unmatched
    code_of = spec.code_of()
    if spec.kind == "str":
        return code_of.get(value, unmatched) if type(value) is str else unmatched  # type: ignore[arg-type]
    x = float(value) if isinstance(value, float | np.floating) else int(value)  # type: ignore[arg-type]
    if isinstance(x, float):
        if not math.isfinite(x) or not x.is_integer() or abs(x) > 2**53:
            return unmatched
        x = int(x)
    return code_of.get(x, unmatched)


def reference_table(
    pdf: pd.DataFrame, spec: HistogramSpec, by: tuple[str, ...], keys: list[tuple[Any, ...]] | None
) -> dict[tuple[object, ...], GroupStats]:
    levels = levels_numpy(pdf[spec.eps].to_numpy(dtype=float), spec.eps_grid)
    cells = []
    for i, (_, row) in enumerate(pdf.iterrows()):
        key = tuple(row[c].item() if hasattr(row[c], "item") else row[c] for c in by)
        if keys is not None and key not in keys:
            continue
        cells.append((key, float(levels[i]), reference_code(spec, row[spec.column]), 1))
    return build_histogram_groups(spec, cells)


def tables(engine: Any, pdf: pd.DataFrame, spec: HistogramSpec, by: tuple[str, ...],
           keys: list[tuple[Any, ...]] | None) -> dict[tuple[object, ...], GroupStats]:
    key_t = tuple(keys) if keys is not None else None
    return backend(engine.name).histogram_tables(engine.frame(pdf), spec, by, key_t)


GRID = EpsGrid(ratio=1.5, lowest=0.01, highest=100.0)


@pytest.mark.parametrize("grid", [None, GRID])
def test_string_statistics_equal_reference(engine: Any, grid: EpsGrid | None) -> None:
    pdf = string_frame()
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "ä", "", "x"], eps_grid=grid)
    keys = [("x", 0), ("x", 1), ("y", 2), ("q", 0)]
    got = tables(engine, pdf, spec, ("g", "h"), keys)
    assert got == reference_table(pdf, spec, ("g", "h"), keys)
    assert ("q", 0) not in got  # empty public key: no cells (finalize fills it)
    glob = tables(engine, pdf, spec, (), None)
    assert glob == reference_table(pdf, spec, (), None)
    assert glob[()].n == len(pdf)  # every row counted, in or out of the domain


@pytest.mark.parametrize("column", ["f", "f32", "i"])
def test_numeric_statistics_equal_reference(engine: Any, column: str) -> None:
    pdf = numeric_frame()
    spec = hdp_histogram(column, eps="eps", categories=[0, 1, 2, 2**53, -5], other=-1)
    got = tables(engine, pdf, spec, (), None)
    want = reference_table(pdf, spec, (), None)
    assert got == want
    codes = np.array(want[()].rows[0].totals)
    assert codes.sum() > 0


def test_engines_agree_on_every_bin_and_output(spark: Any) -> None:
    """O27: same seed and same data give identical tables and outputs on both engines."""
    pdf = string_frame(300, seed=9)
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "ä"], method="hpf-wp",
                         eps_grid=GRID)
    kwargs: dict[str, Any] = {"by": "g", "keys": ["x", "y", "w"], "unsafe_seed": 21,
                              "counts": True}
    local = backend("pandas").histogram(pdf, spec, **kwargs)
    remote = backend("spark").histogram(spark.createDataFrame(pdf).repartition(3), spec,
                                        **kwargs).toPandas()
    pd.testing.assert_frame_equal(local, remote)


def test_output_layout_and_rules(engine: Any) -> None:
    pdf = string_frame(150, seed=3)
    spec = hdp_histogram("c", eps="eps", categories=["a", "b", "zz"])
    out = run_histogram(engine, pdf, spec, by=["g", "h"], keys=[("x", 0), ("y", 1), ("q", 2)],
                        unsafe_seed=1, counts=True)
    assert list(out.columns) == ["g", "h", *HISTOGRAM_COLUMNS, *COUNT_COLUMNS]
    assert list(out["category"]) == ["a", "b", "zz", "other"] * 3
    assert list(zip(out["g"], out["h"], strict=True))[::4] == [("x", 0), ("y", 1), ("q", 2)]
    n_x0 = int(((pdf["g"] == "x") & (pdf["h"] == 0)).sum())
    assert (out["n"][:4] == n_x0).all()
    empty = out[out["g"] == "q"]
    assert empty["fallback"].all()
    assert (empty["frequency"] == 0.5).all()
    assert (empty["n"] == 0).all()
    assert out["frequency"].between(0, 1).all()
    assert (out["ci_low"] <= out["frequency"]).all()
    assert (out["frequency"] <= out["ci_high"]).all()
    assert np.allclose(out["count"], out["frequency"] * out["n"])
    assert np.allclose(out["count_ci_high"], out["ci_high"] * out["n"])
    levels = out["eps_levels"][0]
    assert {tuple(sorted(d)) for d in levels} == {("eps", "eps_effective", "n", "weight")}
    assert sum(d["n"] for d in levels) == n_x0


def test_integer_labels_output_type(engine: Any) -> None:
    pdf = numeric_frame(80)
    spec = hdp_histogram("i", eps="eps", categories=[2, 0, 1], other=-1, method="uniform")
    out = run_histogram(engine, pdf, spec, unsafe_seed=2)
    assert list(out["category"]) == [2, 0, 1, -1]
    assert out["category"].dtype == np.int64


def test_other_rules(engine: Any) -> None:
    pdf = pd.DataFrame({"c": ["a", "b", "zz", None, "a", "b"], "eps": [INF] * 6})
    appended = run_histogram(engine, pdf, hdp_histogram("c", eps="eps", categories=["a", "b"]))
    assert appended["frequency"].tolist() == pytest.approx([2 / 6, 2 / 6, 2 / 6])
    inside = run_histogram(
        engine, pdf, hdp_histogram("c", eps="eps", categories=["a", "b"], other="b")
    )
    assert inside["category"].tolist() == ["a", "b"]
    assert inside["frequency"].tolist() == pytest.approx([2 / 6, 4 / 6])
    dropped = run_histogram(
        engine, pdf, hdp_histogram("c", eps="eps", categories=["a", "b"], other=None)
    )
    assert dropped["frequency"].tolist() == pytest.approx([2 / 6, 2 / 6])  # mass not released
    assert (dropped["n"] == 6).all()  # ...but the rows stay in n


def test_spark_output_is_materialized(spark: Any) -> None:
    spec = hdp_histogram("c", eps="eps", categories=["a", "b"])
    out = backend("spark").histogram(spark.createDataFrame(string_frame(60)).repartition(3), spec)
    first = repr(out.collect())  # repr: tau is NaN for hpf-a, and NaN != NaN
    out.count()
    assert repr(out.collect()) == first  # re-reading never redraws noise


def test_empty_table_gives_the_fallback(engine: Any) -> None:
    pdf = pd.DataFrame({"c": pd.Series([], dtype=object), "eps": pd.Series([], dtype=float)})
    if engine.name == "spark":
        pdf = engine.session.createDataFrame([], "c string, eps double")
        out = backend("spark").histogram(pdf, hdp_histogram("c", eps="eps", categories=["a"]))
        out = out.toPandas()
    else:
        out = run_histogram(engine, pdf, hdp_histogram("c", eps="eps", categories=["a"]))
    assert out["fallback"].all()
    assert out["frequency"].tolist() == [0.5, 0.5]
    assert (out["n"] == 0).all()
