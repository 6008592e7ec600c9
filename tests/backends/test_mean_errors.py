"""Every error path of hdp_mean, EpsGrid, keys/by and agg (pandas and Spark).

Errors are raised on public inputs only (parameters, the schema, the ε column); messages
name the rule and a COUNT of offending rows, never a row value or an ε value.
"""

from __future__ import annotations

import math
import re
from itertools import pairwise
from typing import Any

import pandas as pd
import pytest
from mean_backend_helpers import native, run_agg

import hdp_spark
import hdp_spark.pandas as hpd
from hdp_spark import (
    EngineNotSupportedError,
    EpsGrid,
    EpsilonColumnError,
    MeanSpec,
    ParameterError,
    SchemaError,
    hdp_mean,
)
from hdp_spark.core.keys import normalize_by, normalize_keys
from hdp_spark.core.release import plan_levels

INF = math.inf
OK = {"eps": "eps", "lower": 0.0, "upper": 1.0}
ROWS = [("a", 0.25 * i, 1.0, 1.0 + i, 1.0) for i in range(4)]


# ---------------------------------------------------------------- hdp_mean parameters


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"column": ""}, "`column` must be a non-empty column name"),
        ({"column": 3}, "`column` must be a non-empty column name"),
        ({"eps": ""}, "`eps` must be a non-empty column name"),
        ({"eps": None}, "`eps` must be a non-empty column name"),
        ({"lower": "0"}, "`lower` must be a number"),
        ({"lower": True}, "`lower` must be a number"),
        ({"upper": None}, "`upper` must be a number"),
        ({"lower": -INF}, "`lower` and `upper` must be finite"),
        ({"upper": math.nan}, "`lower` and `upper` must be finite"),
        ({"lower": 1.0, "upper": 1.0}, "`lower` must be < `upper`"),
        ({"lower": 2.0, "upper": 1.0}, "`lower` must be < `upper`"),
        ({"lower": -1e308, "upper": 1e308}, "`upper - lower` must be a finite float"),
        ({"method": "laplace"}, "`method` must be one of adpm, hpm-a"),
        ({"method": "ADPM"}, "`method` must be one of"),
        ({"beta": 0}, r"`beta` must be in \(0, 1\)"),
        ({"beta": 1.0}, r"`beta` must be in \(0, 1\)"),
        ({"beta": math.nan}, r"`beta` must be in \(0, 1\)"),
        ({"beta": "0.05"}, "`beta` must be a number"),
        ({"clip_output": 1}, "`clip_output` must be True, False or None"),
        ({"fill": "mid"}, "`fill` must be a number"),
        ({"fill": 2.0}, r"`fill` must lie in \[lower, upper\]"),
        ({"eps_grid": 1.1}, "`eps_grid` must be an EpsGrid or None"),
        ({"alias": ""}, "`alias` must be a non-empty column name"),
    ],
)
def test_hdp_mean_rejects_bad_parameters(kwargs: dict[str, Any], match: str) -> None:
    args = {"column": "x", **OK, **kwargs}
    column = args.pop("column")
    with pytest.raises(ParameterError, match=match):
        hdp_mean(column, **args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ratio": "1.1"}, "`ratio` must be a number"),
        ({"lowest": True}, "`lowest` must be a number"),
        ({"highest": INF}, "`highest` must be finite"),
        ({"ratio": math.nan}, "`ratio` must be finite"),
        ({"ratio": 1.0}, "`ratio` must be > 1"),
        ({"ratio": 0.5}, "`ratio` must be > 1"),
        ({"ratio": 1 + 1e-12}, r"`ratio` must be >= 1 \+ 1e-9"),
        ({"lowest": 0.0}, "`lowest` must be >= 1e-100"),
        ({"lowest": -1.0}, "`lowest` must be >= 1e-100"),
        ({"lowest": 1e-310}, "`lowest` must be >= 1e-100"),
        ({"lowest": 2.0, "highest": 1.0}, "`highest` must be >= `lowest`"),
        ({"ratio": 1.0000001}, "the grid would exceed 100,000 points"),
        ({"ratio": 1 + 2e-9, "lowest": 1e-100, "highest": 1e300}, "exceed 100,000 points"),
    ],
)
def test_eps_grid_rejects_bad_parameters(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        EpsGrid(**kwargs)


def test_eps_grid_extreme_but_valid_ranges() -> None:
    """No OverflowError for wide ranges; the point count is checked before building them."""
    for kwargs in ({"ratio": 1.1, "lowest": 1e-100, "highest": 1e300},
                   {"ratio": 1e205, "lowest": 1e-100, "highest": 1.7e308},
                   {"ratio": 2.0, "lowest": 5.0, "highest": 5.0}):
        pts = EpsGrid(**kwargs).points()
        assert all(a < b for a, b in pairwise(pts))
        assert pts[0] == kwargs["lowest"]
        assert pts[-1] <= kwargs["highest"]


# ---------------------------------------------------------------- by / keys / specs


@pytest.mark.parametrize(
    ("by", "match"),
    [("", "`by` must be a column name"), ([], "`by` must be a column name"),
     ([1], "`by` must be a column name"), (["g", "g"], "`by` must not repeat a column")],
)
def test_bad_by(by: Any, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        normalize_by(by)


@pytest.mark.parametrize(
    ("keys", "match"),
    [([("a", 1)], r"must have 1 value\(s\)"), (["a", "a"], "must not contain duplicates"),
     ([None], "must not contain null or NaN"), ([math.nan], "must not contain null or NaN"),
     ([], "must contain at least one key")],
)
def test_bad_keys(keys: Any, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        normalize_keys(keys, 1)


def test_bad_aggregator_lists() -> None:
    with pytest.raises(ParameterError, match="needs at least one aggregator"):
        plan_levels([])
    with pytest.raises(ParameterError, match="must come from hdp_mean"):
        plan_levels(["x"])  # type: ignore[list-item]
    spec = hdp_mean("x", **OK)
    with pytest.raises(ParameterError, match="share the output name 'x_mean'; set `alias`"):
        plan_levels([spec, MeanSpec("x", "eps", 0.0, 2.0)])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"keys": ["a"]}, "`keys` needs `by`"),
        ({"by": "g"}, "a grouped release needs `keys`"),
        ({"by": "g", "keys": "a"}, "got a string"),
        ({"by": "g", "keys": pd.DataFrame({"h": ["a"]})}, "`keys` must have the `by` columns"),
        ({"by": "g", "keys": [("a", "b")]}, r"must have 1 value\(s\)"),
        ({"by": ["g", "g"], "keys": ["a"]}, "must not repeat"),
    ],
)
def test_agg_rejects_bad_keys_and_by(engine: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        engine.module.agg(native(engine, ROWS), hdp_mean("x", **OK), **kwargs)


# ---------------------------------------------------------------- schema


@pytest.mark.parametrize(
    ("spec", "kwargs", "match"),
    [
        (hdp_mean("nope", **OK), {}, "value column `nope` is not in the table"),
        (hdp_mean("x", eps="nope", lower=0, upper=1), {}, "ε column `nope` is not in the table"),
        (hdp_mean("g", **OK), {}, "value column `g` must be numeric"),
        (hdp_mean("x", eps="g", lower=0, upper=1), {}, "ε column `g` must be numeric"),
        (hdp_mean("x", **OK), {"by": "nope", "keys": ["a"]}, "group column `nope` is not in"),
    ],
)
def test_agg_schema_errors(engine: Any, spec: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(SchemaError, match=match):
        engine.module.agg(native(engine, ROWS), spec, **kwargs)


def test_agg_rejects_boolean_columns(engine: Any) -> None:
    pdf = pd.DataFrame({"x": [True, False], "eps": [1.0, 1.0]})
    with pytest.raises(SchemaError, match="value column `x` must be numeric"):
        engine.module.agg(engine.frame(pdf), hdp_mean("x", **OK))


def test_wrong_table_types() -> None:
    with pytest.raises(ParameterError, match="must be a pandas DataFrame, got list"):
        hpd.agg([1, 2], hdp_mean("x", **OK))  # type: ignore[arg-type]
    with pytest.raises(EngineNotSupportedError, match="pandas or Spark DataFrame, got dict"):
        hdp_spark.agg({"x": [1]}, hdp_mean("x", **OK))


def test_spark_agg_rejects_pandas_frames() -> None:
    pytest.importorskip("pyspark")
    import hdp_spark.spark as hsp

    with pytest.raises(ParameterError, match="must be a Spark DataFrame, got DataFrame"):
        hsp.agg(pd.DataFrame({"x": [1.0], "eps": [1.0]}), hdp_mean("x", **OK))


# ---------------------------------------------------------------- the ε column


SECRET_X = 123.456789
SECRET_EPS = -0.987654321


@pytest.mark.parametrize(
    ("bad", "count"),
    [([math.nan], 1), ([None, math.nan, SECRET_EPS, -INF, -1e-300], 5)],
)
def test_invalid_eps_is_rejected_with_a_count_and_no_values(engine: Any, bad: list[Any],
                                                            count: int) -> None:
    rows = [("a", SECRET_X + i, 1.0, 0.5 + i, 1.0) for i in range(5)]
    rows += [("a", SECRET_X, 1.0, e, 1.0) for e in bad]
    with pytest.raises(EpsilonColumnError, match=rf"`eps` must hold .*; {count} row\(s\)") as err:
        run_agg(engine, rows, hdp_mean("x", eps="eps", lower=0, upper=1000))
    message = str(err.value)
    for secret in ("123.45", "0.98765", "1e-300", "0.5", "1.5"):
        assert secret not in message
    # the only numbers in the message: the rule's 0 and the row count
    assert set(re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", message)) <= {"0", str(count)}


def test_rows_outside_the_key_set_are_not_inspected(engine: Any) -> None:
    rows = [("a", 1.0, 1.0, 1.0, 1.0), ("z", 1.0, 1.0, math.nan, 1.0)]
    out = run_agg(engine, rows, hdp_mean("x", **OK), by="g", keys=["a"], unsafe_seed=1)
    assert out["x_mean_n"].tolist() == [1]


def test_eps_below_the_grid_floor_is_rejected(engine: Any) -> None:
    grid = EpsGrid(ratio=2.0, lowest=0.01, highest=10.0)
    good = (0.0, 0.01, 0.5, 20.0, INF, 1e-300)  # 1e-300 < EPS_FLOOR: lowered to 0, not rejected
    rows = [("a", 1.0, 1.0, e, 1.0) for e in (*good, 0.009, 0.001)]
    spec = hdp_mean("x", eps="eps", lower=0, upper=1, eps_grid=grid)
    with pytest.raises(EpsilonColumnError,
                       match=r"2 row\(s\) with 0 < ε below the lowest point of `eps_grid`"):
        run_agg(engine, rows, spec)
    out = run_agg(engine, rows[: len(good)], spec, unsafe_seed=2)
    levels = [(lv["eps"], lv["n"]) for lv in out["x_mean_eps_levels"].iloc[0]]
    assert levels == [(0.0, 2), (0.01, 1), (0.32, 1), (5.12, 1), (INF, 1)]
