"""Every error path of the histogram: spec validation, release options, schema and ε."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from histogram_testlib import backend, run_histogram

from hdp_spark import hdp_histogram, histogram
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.levels import EpsGrid
from hdp_spark.errors import (
    EngineNotSupportedError,
    EpsilonColumnError,
    ParameterError,
    SchemaError,
)

BASE: dict[str, Any] = {"eps": "eps", "categories": ["a", "b"]}


def make(**kwargs: Any) -> HistogramSpec:
    args = {"column": "c", **BASE, **kwargs}
    column = args.pop("column")
    return hdp_histogram(column, **args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"column": ""}, r"`column` must be a non-empty column name, got ''"),
        ({"column": 3}, r"`column` must be a non-empty column name, got 3"),
        ({"eps": None}, r"`eps` must be a non-empty column name, got None"),
        ({"categories": "ab"}, r"`categories` must be a list or tuple of labels, got str"),
        ({"categories": 5}, r"`categories` must be a list or tuple of labels, got int"),
        ({"categories": []}, r"`categories` must contain at least one label"),
        ({"categories": ["a", 1]}, r"all strings or all integers .* got 1 at position 1"),
        ({"categories": [1, "a"], "other": None}, r"got 'a' at position 1"),
        ({"categories": [True, False]}, r"all strings or all integers .* got True at position 0"),
        ({"categories": [1.5, 2.0]}, r"got 1.5 at position 0"),
        ({"categories": ["a", None]}, r"got None at position 1"),
        (
            {"categories": [0, 2**53 + 1], "other": -1},
            r"\|label\| <= 2\*\*53, got 9007199254740993",
        ),
        ({"categories": ["a", "b", "a"]}, r"must not repeat a label; 'a' appears twice"),
        ({"categories": list(range(100_001)), "other": -1}, r"at most 100000 labels, got 100001"),
        ({"other": 1}, r"`other` must be a label of the same type as `categories` \(str; or None"),
        ({"categories": [1, 2]}, r"\(int; e\.g\. other=-1, or None .*\), got 'other'"),
        ({"categories": [1, 2], "other": True}, r"same type as `categories` \(int.*got True"),
        ({"categories": [1, 2], "other": -(2**60)}, r"integer `other` must satisfy"),
        ({"method": "hpf"}, r"`method` must be one of hpf-a, .*; got 'hpf'"),
        ({"beta": 0}, r"`beta` must be in \(0, 1\), got 0"),
        ({"beta": 1.0}, r"`beta` must be in \(0, 1\), got 1.0"),
        ({"beta": "0.1"}, r"`beta` must be a number, got '0.1'"),
        ({"beta": True}, r"`beta` must be a number, got True"),
        (
            {"categories": ["a"], "other": None, "method": "hpf-ce"},
            r"`method` 'hpf-ce' needs at least 2 released bins .* got 1",
        ),
        (
            {"categories": ["a"], "other": "a", "method": "hpf-we"},
            r"`method` 'hpf-we' needs at least 2 released bins",
        ),
        ({"eps_grid": 1.1}, r"`eps_grid` must be an EpsGrid or None, got float"),
        ({"alias": ""}, r"`alias` must be a non-empty column name"),
    ],
)
def test_spec_rejects_bad_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        make(**kwargs)


def test_spec_is_frozen_and_canonical() -> None:
    spec = make(categories=(np.int64(3), 1), other=np.int32(-1))
    assert spec.categories == (3, 1)
    assert type(spec.categories[0]) is int
    assert spec.other == -1
    with pytest.raises(AttributeError):
        spec.method = "uniform"  # type: ignore[misc]


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "c": ["a", "b", "zz", None],
            "eps": [1.0, 0.5, 2.0, np.inf],
            "g": ["x", "y", "x", "y"],
            "num": [1, 2, 3, 4],
            "flag": [True, False, True, False],
            "eps_str": ["1", "1", "1", "1"],
        }
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"project": "yes"}, r"`project` must be True or False, got 'yes'"),
        ({"counts": 1}, r"`counts` must be True or False, got 1"),
        ({"by": "category", "keys": ["a"]}, r"`by` columns must not be named like an output"),
        ({"by": "g"}, r"a grouped release needs `keys`"),
        ({"keys": ["x"]}, r"`keys` needs `by`"),
        ({"by": "g", "keys": "x"}, r"`keys` must be a list of keys or a DataFrame"),
        ({"by": "g", "keys": []}, r"`keys` must contain at least one key"),
        ({"by": "g", "keys": ["x", "x"]}, r"`keys` must not contain duplicates"),
        ({"by": "g", "keys": [None]}, r"`keys` must not contain null"),
        ({"by": ["g", "g"], "keys": [("x", "x")]}, r"`by` must not repeat a column"),
    ],
)
def test_release_rejects_bad_options(engine: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        run_histogram(engine, frame(), make(), **kwargs)


def test_project_needs_other_bin(engine: Any) -> None:
    with pytest.raises(ParameterError, match=r"`project=True` needs an `other` bin"):
        run_histogram(engine, frame(), make(other=None), project=True)


def test_counts_column_names_are_reserved_only_with_counts(engine: Any) -> None:
    pdf = frame().rename(columns={"g": "count"})
    with pytest.raises(ParameterError, match=r"must not be named like an output column"):
        run_histogram(engine, pdf, make(), by="count", keys=["x"], counts=True)
    out = run_histogram(engine, pdf, make(), by="count", keys=["x"], unsafe_seed=1)
    assert list(out["count"]) == ["x"] * 3


def test_spec_must_come_from_hdp_histogram(engine: Any) -> None:
    with pytest.raises(ParameterError, match=r"`spec` must come from hdp_histogram\(\.\.\.\), got"):
        backend(engine.name).histogram(engine.frame(frame()), "c")


def test_backend_rejects_foreign_tables(engine: Any, spark: Any) -> None:
    other = spark.createDataFrame(frame()) if engine.name == "pandas" else frame()
    want = "pandas" if engine.name == "pandas" else "Spark"
    with pytest.raises(ParameterError, match=rf"`df` must be a {want} DataFrame"):
        backend(engine.name).histogram(other, make())


def test_dispatcher_rejects_other_objects() -> None:
    with pytest.raises(EngineNotSupportedError, match=r"a pandas or Spark DataFrame, got list"):
        histogram([1, 2], make())


@pytest.mark.parametrize(
    ("spec_kwargs", "release_kwargs", "match"),
    [
        ({"column": "nope"}, {}, r"category column `nope` is not in the table"),
        ({"eps": "nope"}, {}, r"ε column `nope` is not in the table"),
        ({}, {"by": "nope", "keys": ["x"]}, r"group column `nope` is not in the table"),
        ({"column": "num"}, {}, r"category column `num` must hold strings"),
        ({"column": "c", "categories": [1, 2], "other": -1}, {}, r"column `c` must be numeric"),
        ({"column": "flag", "categories": [0, 1], "other": -1}, {}, r"`flag` must be numeric"),
        ({"eps": "eps_str"}, {}, r"ε column `eps_str` must be numeric"),
    ],
)
def test_schema_errors(
    engine: Any, spec_kwargs: dict[str, Any], release_kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(SchemaError, match=match):
        run_histogram(engine, frame(), make(**spec_kwargs), **release_kwargs)


def test_invalid_eps_is_rejected_with_a_count(engine: Any) -> None:
    pdf = pd.concat([frame()] * 2, ignore_index=True)
    pdf.loc[[1, 2, 5], "eps"] = [np.nan, -1.0, -np.inf]
    with pytest.raises(EpsilonColumnError, match=r"Column `eps` must hold ε >= 0 .* 3 row\(s\)"):
        run_histogram(engine, pdf, make())


def test_eps_below_grid_is_rejected(engine: Any) -> None:
    spec = make(eps_grid=EpsGrid(ratio=2.0, lowest=0.75, highest=8.0))
    with pytest.raises(EpsilonColumnError, match=r"1 row\(s\) with 0 < ε below the lowest point"):
        run_histogram(engine, frame(), spec)


def test_internal_invariants_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defensive checks of the finalize step (bugs, not user errors)."""
    from fractions import Fraction

    import hdp_spark.core.histogram.finalize as core
    from hdp_spark.core.histogram.release import build_histogram_groups
    from hdp_spark.core.noise import LaplaceDraw, ReleaseKey
    from hdp_spark.core.noise.exact import grid_for
    from hdp_spark.core.stats import GroupStats, LevelRow
    from hdp_spark.errors import InternalError

    spec = make()
    with pytest.raises(InternalError, match=r"category code out of range"):
        build_histogram_groups(spec, [((), 1.0, 5, 1)])
    with pytest.raises(InternalError, match=r"wrong number of category counts"):
        core.released_counts(spec, GroupStats((LevelRow(1.0, 1, (1, 0)),)))
    good = GroupStats((LevelRow(1.0, 2, (1, 1, 0)),))
    two_levels = core.histogram_weights(spec, [1.0, 2.0], [1, 1])
    with pytest.raises(InternalError, match=r"weights do not match"):
        core.finalize_histogram(spec, good, ReleaseKey.from_unsafe_seed(0), (), two_levels)
    odd = make()
    object.__setattr__(odd, "method", "nope")
    with pytest.raises(InternalError, match=r"unknown histogram method 'nope'"):
        core.histogram_weights(odd, [1.0], [1])
    with pytest.raises(InternalError, match=r"noise scale is 0"):
        core.level_loss_bounds([Fraction(1)], [1.0], Fraction(0), Fraction(0))

    def uninflated(value: Fraction, scale: Fraction, d: Fraction, rng: object) -> LaplaceDraw:
        return LaplaceDraw(value, scale, grid_for(d))

    monkeypatch.setattr(core, "laplace_mechanism", uninflated)
    with pytest.raises(InternalError, match=r"noise does not match its privacy analysis"):
        core.finalize_histogram(spec, good, ReleaseKey.from_unsafe_seed(0), ())
