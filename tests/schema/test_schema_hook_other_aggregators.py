"""``schema=`` on the histogram and the user-level mean, as on the mean: the schema's release
rules run first, a violation raises (counts, never values) before any noise, and a valid
table gives exactly the release without the schema."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from schema_testing import assert_no_data, to_pandas

from hdp_spark import hdp_histogram, hdp_user_mean
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError
from hdp_spark.schema import ColumnSchema, EpsilonColumn, TableSchema, UserIdColumn


def schema(unique: bool) -> TableSchema:
    return TableSchema(
        "t",
        EpsilonColumn("eps"),
        UserIdColumn("uid", unique=unique),
        (
            ColumnSchema("x", "float", nullable=False, lower=0.0, upper=100.0),
            ColumnSchema("dept", "string", nullable=False, domain=("a", "b")),
        ),
        min_rows=1,
    )


def table(eps: list[Any] | None = None) -> pd.DataFrame:
    return pd.DataFrame({
        "uid": [1, 1, 2, 2, 3, 4],
        "eps": eps or [0.5, 0.5, 1.0, 1.0, 2.0, 1.0],
        "x": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        "dept": ["a", "b", "a", "b", "a", "b"],
    })


def histogram(engine: Any, pdf: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    spec = hdp_histogram("dept", eps="eps", categories=["a", "b"])
    return to_pandas(engine, engine.module.histogram(engine.frame(pdf), spec, unsafe_seed=3,
                                                     **kwargs))


def user_mean(engine: Any, pdf: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    spec = hdp_user_mean("x", user="uid", eps="eps", lower=0.0, upper=100.0)
    return to_pandas(engine, engine.module.user_mean(engine.frame(pdf), spec, unsafe_seed=3,
                                                     **kwargs))


def _nested_free(frame: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in frame.columns
            if not frame[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any()]
    return frame[keep]


@pytest.mark.parametrize("run", [histogram, user_mean])
def test_valid_table_gives_the_same_release(engine: Any, run: Any) -> None:
    pdf = table()
    with_schema = run(engine, pdf, schema=schema(unique=False))
    pd.testing.assert_frame_equal(_nested_free(with_schema), _nested_free(run(engine, pdf)))


@pytest.mark.parametrize("run", [histogram, user_mean])
def test_violation_raises_before_the_release(engine: Any, run: Any) -> None:
    pdf = table(eps=[0.5, 0.5, 1.0, 1.0, -0.6124, 1.0])
    with pytest.raises(EpsilonColumnError) as info:
        run(engine, pdf, schema=schema(unique=False))
    text = str(info.value)
    assert "rule `non_negative`" in text
    assert ": 1 violation" in text
    assert_no_data(text)


def test_histogram_unique_users_rule(engine: Any) -> None:
    """One row per user, declared in the schema, is enforced for the row-level histogram."""
    with pytest.raises(SchemaError) as info:
        histogram(engine, table(), schema=schema(unique=True))
    assert_no_data(str(info.value))


@pytest.mark.parametrize("run", [histogram, user_mean])
def test_schema_must_declare_what_the_release_reads(engine: Any, run: Any) -> None:
    other = TableSchema("t", EpsilonColumn("eps"), UserIdColumn("uid", unique=False), (),
                        min_rows=1)
    with pytest.raises(SchemaError, match="not declared in schema `t`"):
        run(engine, table(), schema=other)
    with pytest.raises(ParameterError, match="`schema` must be a TableSchema"):
        run(engine, table(), schema="t")
