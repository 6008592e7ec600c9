"""The great_expectations suite generated from a schema, run offline on pandas and Spark."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from schema_testing import MARKERS

import hdp_spark.pandas as hpd
from hdp_spark.errors import EngineNotSupportedError, ParameterError
from hdp_spark.quality import expectation_suite, run_expectations
from hdp_spark.schema import ColumnSchema, EpsilonColumn, TableSchema, UserIdColumn, load_schema

pytest.importorskip("great_expectations")
ROOT = Path(__file__).resolve().parents[2]
NaN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")


def _by_rule(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rule"] + "/" + r["expectation"]: r for r in summary["results"]}


def test_suite_mirrors_the_schema_rules() -> None:
    schema = load_schema(ROOT / "schemas" / "employees.yaml")
    suite = expectation_suite(schema)
    assert suite.name == "hdp_spark.employees"
    rules = {(e.meta or {})["hdp_rule"] for e in suite.expectations}
    expected = {r.key for r in schema.rules()} - {"eps:constant_per_user"}
    assert rules == expected | {f"{c}:type" for c in schema.column_names}
    assert expectation_suite(schema, name="custom").name == "custom"
    with pytest.raises(ParameterError, match="`schema` must be a TableSchema"):
        expectation_suite({"name": "x"})  # type: ignore[arg-type]


def test_sample_table_offline_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[object] = []

    def no_network(self: socket.socket, address: object) -> None:
        attempts.append(address)
        msg = "network access in an offline test"
        raise OSError(msg)

    monkeypatch.setattr(socket.socket, "connect", no_network)
    schema = load_schema(ROOT / "schemas" / "employees.yaml")
    pdf = pd.read_csv(ROOT / "data" / "employees.csv")
    summary = run_expectations(pdf, schema)
    assert attempts == []
    assert summary["suite"] == "hdp_spark.employees"
    assert summary["success"] is False
    failed = {r["rule"]: r["unexpected_count"] for r in summary["results"] if not r["success"]}
    assert failed == {"salary:not_null": 20, "salary:in_bounds": 6}
    assert not any(r["raised_exception"] for r in summary["results"])
    # the same counts as hdp_spark's own validation
    report = hpd.validate(pdf, schema)
    for r in summary["results"]:
        if r["unexpected_count"] is not None and r["rule"] in report.all_counts:
            assert r["unexpected_count"] == report.all_counts[r["rule"]], r


def test_counts_match_validate_on_a_bad_table() -> None:
    schema = TableSchema(
        "t",
        EpsilonColumn("eps", min=0.05, max=5.0),
        UserIdColumn("uid"),
        (ColumnSchema("x", "float", nullable=False, lower=0.0, upper=100.0),
         ColumnSchema("cat", "string", nullable=False, domain=("a", "b"))),
        min_rows=1,
    )
    pdf = pd.DataFrame({
        "uid": pd.array([1, 2, 3, 4, 5, 6, 7, 8, 8, None], dtype="Int64"),
        "eps": [1.0, NaN, -0.7373, 0.0, INF, -INF, 9.0, 0.01, 0.01, 1.0],
        "x": [4242.0, NaN, -1717.0, INF, -INF, 5.0, 5.0, 5.0, 5.0, 5.0],
        "cat": ["a", "zz_secret", None, "b", "a", "a", "a", "a", "a", "a"],
    })
    summary = run_expectations(pdf, schema)
    report = hpd.validate(pdf, schema)
    counts = {r["rule"]: r["unexpected_count"] for r in summary["results"]
              if r["unexpected_count"] is not None and not r["rule"].endswith(":type")}
    assert counts.pop("uid:unique") == 2  # GE counts every row of a repeated id
    assert report.all_counts["uid:unique"] == 1  # hdp_spark counts the rows beyond the first
    assert counts == {k: v for k, v in report.all_counts.items()
                      if k not in ("uid:unique", "eps:constant_per_user", "table:min_rows")}
    text = str(summary)
    for marker in MARKERS:
        assert marker not in text


def test_sample_table_spark(spark: Any) -> None:
    schema = load_schema(ROOT / "schemas" / "employees.yaml")
    # Spark's CSV reader (and createDataFrame from pandas) turn empty fields into nulls;
    # GE on Spark counts a NaN as non-null (it then fails the range checks instead).
    frame = spark.createDataFrame(pd.read_csv(ROOT / "data" / "employees.csv"))
    summary = run_expectations(frame, schema)
    failed = {r["rule"]: r["unexpected_count"] for r in summary["results"] if not r["success"]}
    assert failed == {"salary:not_null": 20, "salary:in_bounds": 6}
    assert not any(r["raised_exception"] for r in summary["results"])


def test_unsupported_frame() -> None:
    schema = TableSchema("t", EpsilonColumn("eps"))
    with pytest.raises(EngineNotSupportedError, match="`df` must be a pandas or Spark"):
        run_expectations([1, 2, 3], schema)
