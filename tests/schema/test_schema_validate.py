"""``validate`` on both engines: exact counts per rule, structure errors, the sample table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from schema_testing import assert_no_data

from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError, UserIdError
from hdp_spark.schema import (
    ColumnSchema,
    EpsilonColumn,
    TableSchema,
    UserIdColumn,
    load_schema,
)

ROOT = Path(__file__).resolve().parents[2]
NaN, INF = float("nan"), float("inf")

SCHEMA = TableSchema(
    "t",
    EpsilonColumn("eps", min=0.05, max=5.0),
    UserIdColumn("uid"),
    (
        ColumnSchema("x", "float", nullable=False, lower=0.0, upper=100.0),
        ColumnSchema("cat", "string", nullable=False, domain=("a", "b")),
        ColumnSchema("k", "integer", domain=(1, 2, 3)),
    ),
    min_rows=1,
)


def _bad_table() -> pd.DataFrame:
    # One row per planted violation (values chosen so each row breaks the rules listed).
    return pd.DataFrame(
        {
            "uid": pd.array([1, 2, 3, 4, 5, 6, 7, 8, 8, None, 9, 9], dtype="Int64"),
            "eps": pd.array(
                [1.0, None, -0.7373, 0.0, INF, -INF, 9.0, 0.01, 0.01, 1.0, 1.0, 2.0],
                dtype="float64",
            ),
            "x": [4242.0, NaN, -1717.0, INF, -INF, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0],
            "cat": ["a", "zz_secret", None, "b", "a", "a", "a", "a", "a", "a", "a", "a"],
            "k": pd.array([1, 2, 3, 9876, None, 1, 1, 1, 1, 1, 1, 1], dtype="Int64"),
        }
    )


EXPECTED = {
    "eps:not_null": 1,  # None
    "eps:non_negative": 2,  # -0.7373, -inf
    "eps:positive": 1,  # 0.0
    "eps:finite": 1,  # +inf
    "eps:in_range": 3,  # 9.0 and two 0.01
    "uid:not_null": 1,
    "uid:unique": 2,  # 8 twice, 9 twice (with two ε): one extra row each
    "table:min_rows": 0,
    "x:not_null": 1,
    "x:finite": 2,
    "x:in_bounds": 2,  # 4242, -1717 (finite only)
    "cat:not_null": 1,
    "cat:in_domain": 1,
    "k:in_domain": 1,  # 9876; the null is not a domain violation (k is nullable)
}


def test_counts_every_rule(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    report = engine.module.validate(native(_bad_table()), SCHEMA)
    assert report.engine == engine.name
    assert report.rows == 12
    assert dict(report.all_counts) == EXPECTED
    assert not report.ok
    assert not report.release_ok
    assert set(report.blocking) == {k for k, v in EXPECTED.items() if v and k.split(":")[0]
                                    in ("eps", "uid", "table")}
    with pytest.raises(EpsilonColumnError) as info:
        report.raise_for_release()
    assert_no_data(str(info.value))
    assert_no_data(str(report.to_dict()))


def test_release_scope_counts_public_rules_only(
    engine: Any, native: Callable[[pd.DataFrame], Any]
) -> None:
    report = engine.module.validate(native(_bad_table()), SCHEMA, scope="release")
    assert report.scope == "release"
    assert dict(report.all_counts) == {k: v for k, v in EXPECTED.items()
                                       if k.split(":")[0] in ("eps", "uid", "table")}


def test_clean_table(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    # integer ε and value columns satisfy a float declaration
    pdf = pd.DataFrame({"uid": [1, 2, 3], "eps": [1, 2, 5], "x": [0, 50, 100],
                        "cat": ["a", "b", "a"], "k": [1, 2, 3]})
    report = engine.module.validate(native(pdf), SCHEMA)
    assert report.ok
    assert report.release_ok
    assert report.rows == 3
    assert not report.violations


def test_empty_table(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    pdf = _bad_table().iloc[:0]
    report = engine.module.validate(native(pdf), SCHEMA)
    assert report.rows == 0
    assert dict(report.violations) == {"table:min_rows": 1}
    with pytest.raises(SchemaError, match="`min_rows`") as info:
        report.raise_for_release()
    assert type(info.value) is SchemaError


def test_sample_table_and_schema(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    schema = load_schema(ROOT / "schemas" / "employees.yaml")
    pdf = pd.read_csv(ROOT / "data" / "employees.csv")
    report = engine.module.validate(native(pdf), schema)
    # 20 null salaries and 6 above the public upper bound: data quality, not release blockers
    assert dict(report.violations) == {"salary:not_null": 20, "salary:in_bounds": 6}
    assert report.release_ok
    assert report.rows == 5000
    report.raise_for_release()


def test_missing_column(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    pdf = _bad_table().drop(columns=["cat"])
    with pytest.raises(SchemaError, match="Column `cat` declared in schema `t` is not in"):
        engine.module.validate(native(pdf), SCHEMA)


def test_wrong_types(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    pdf = _bad_table()
    eps_text = pdf.assign(eps=["0.5"] * len(pdf))
    with pytest.raises(EpsilonColumnError, match="Column `eps` must have type float") as info:
        engine.module.validate(native(eps_text), SCHEMA)
    assert_no_data(str(info.value))
    uid_text = pdf.assign(uid=[f"u{i}" for i in range(len(pdf))])
    with pytest.raises(UserIdError, match="Column `uid` must have type integer"):
        engine.module.validate(native(uid_text), SCHEMA)
    k_float = pdf.assign(k=np.arange(len(pdf), dtype=float))
    with pytest.raises(SchemaError, match="Column `k` must have type integer"):
        engine.module.validate(native(k_float), SCHEMA)
    # the release scope checks the types of public columns only
    report = engine.module.validate(native(k_float), SCHEMA, scope="release")
    assert report.scope == "release"


def test_bad_arguments(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    with pytest.raises(ParameterError, match="`df` must be a"):
        engine.module.validate([1, 2], SCHEMA)
    with pytest.raises(ParameterError, match="`schema` must be a TableSchema"):
        engine.module.validate(native(_bad_table()), {"name": "t"})
    with pytest.raises(ParameterError, match="`scope`"):
        engine.module.validate(native(_bad_table()), SCHEMA, scope="everything")


def test_non_unique_user_schema(engine: Any, native: Callable[[pd.DataFrame], Any]) -> None:
    schema = TableSchema("t", EpsilonColumn("eps"), UserIdColumn("uid", unique=False))
    pdf = pd.DataFrame({"uid": [1, 1, 2, 2, 2], "eps": [1.0, 1.0, 0.5, 0.5, 0.7373]})
    report = engine.module.validate(native(pdf), schema)
    assert "uid:unique" not in report.all_counts
    assert dict(report.violations) == {"eps:constant_per_user": 1}


def test_string_user_ids_and_negative_zero(
    engine: Any, native: Callable[[pd.DataFrame], Any]
) -> None:
    schema = TableSchema("t", EpsilonColumn("eps", allow_zero=True),
                         UserIdColumn("uid", type="string"))
    pdf = pd.DataFrame({"uid": ["a", "a", "b", None], "eps": [0.0, -0.0, 1.0, 1.0]})
    report = engine.module.validate(native(pdf), schema)
    # -0.0 is not negative and equals 0.0, so user "a" has one ε
    assert dict(report.violations) == {"uid:not_null": 1, "uid:unique": 1}
