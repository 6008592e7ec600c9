"""The bad-input policy of docs/bad_input.md, for the mean (``agg`` + ``hdp_mean``), on both
engines, with and without ``schema=``.

Every case ends in a clear HdpError naming column, rule and count (never values), or in a
valid release whose handling is documented; nothing is dropped silently, and a rejected
release computes no statistic of the values, draws no noise and builds no result.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from schema_testing import assert_no_data, to_pandas

import hdp_spark
from hdp_spark import hdp_mean
from hdp_spark.core import kernels
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.errors import (
    DuplicateUserError,
    EpsilonColumnError,
    ParameterError,
    SchemaError,
)
from hdp_spark.schema import ColumnSchema, EpsilonColumn, TableSchema, UserIdColumn

NaN, INF = float("nan"), float("inf")
SPEC = hdp_mean("x", eps="eps", lower=0.0, upper=100.0)
Native = Callable[[pd.DataFrame], Any]


def schema(**eps: Any) -> TableSchema:
    """The test table's schema; keyword arguments go to EpsilonColumn."""
    unique = eps.pop("unique", True)
    return TableSchema(
        "t",
        EpsilonColumn("eps", **eps),
        UserIdColumn("uid", unique=unique),
        (
            ColumnSchema("x", "float", nullable=False, lower=0.0, upper=100.0),
            ColumnSchema("dept", "string", nullable=False, domain=("a", "b")),
        ),
        min_rows=1,
    )


def table(**columns: Any) -> pd.DataFrame:
    base: dict[str, Any] = {
        "uid": [1, 2, 3, 4, 5, 6],
        "eps": [0.5, 1.0, 1.0, 2.0, 0.5, 1.0],
        "x": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        "dept": ["a", "b", "a", "b", "a", "b"],
    }
    return pd.DataFrame(base | columns)


def agg(engine: Any, native: Native, pdf: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    out = engine.module.agg(native(pdf), SPEC, unsafe_seed=7, **kwargs)
    return to_pandas(engine, out)


def rejected(engine: Any, native: Native, pdf: pd.DataFrame, error: type[Exception],
             *fragments: str, **kwargs: Any) -> str:
    with pytest.raises(error) as info:
        agg(engine, native, pdf, **kwargs)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text
    assert_no_data(text)
    return text


# -- ε: public input, so bad ε is an error with a count -----------------------------------

INVALID_EPS = {
    "null": (pd.array([0.5, None, 1.0, 2.0, 0.5, 1.0], dtype="Float64"), "not_null"),
    "nan": ([0.5, NaN, 1.0, 2.0, 0.5, 1.0], "not_null"),
    "negative": ([0.5, -0.7373, 1.0, 2.0, 0.5, 1.0], "non_negative"),
    "-inf": ([0.5, -INF, 1.0, 2.0, 0.5, 1.0], "non_negative"),
}


@pytest.mark.parametrize("case", sorted(INVALID_EPS))
def test_invalid_eps_is_rejected_with_a_count(engine: Any, native: Native, case: str) -> None:
    eps, rule = INVALID_EPS[case]
    pdf = table(eps=eps)
    rejected(engine, native, pdf, EpsilonColumnError, "`eps`", "1 row(s)")
    rejected(engine, native, pdf, EpsilonColumnError, "column `eps`", f"rule `{rule}`",
             ": 1 violation", schema=schema())


def test_eps_zero(engine: Any, native: Native) -> None:
    pdf = table(eps=[0.0, 0.0, 1.0, 2.0, 0.5, 1.0])
    # the mean alone accepts ε = 0: the row counts in n with weight 0
    out = agg(engine, native, pdf)
    assert out["x_mean_n"][0] == 6
    zero = [lv for lv in out["x_mean_eps_levels"][0] if lv["eps"] == 0.0]
    assert zero
    assert zero[0]["n"] == 2
    assert zero[0]["weight"] == 0.0
    # the schema's default is positive-only ...
    rejected(engine, native, pdf, EpsilonColumnError, "rule `positive`", ": 2 violation",
             schema=schema())
    # ... and a platform that honours "do not use my value" opts in
    allowed = agg(engine, native, pdf, schema=schema(allow_zero=True))
    assert allowed["x_mean_n"][0] == 6


def test_eps_not_numeric(engine: Any, native: Native) -> None:
    pdf = table(eps=["0.5", "1", "1", "2", "zz_secret", "1"])
    rejected(engine, native, pdf, SchemaError, "`eps`", "numeric")
    rejected(engine, native, pdf, EpsilonColumnError, "Column `eps` must have type float",
             schema=schema())


def test_eps_public_rows(engine: Any, native: Native) -> None:
    pdf = table(eps=[INF, 1.0, 1.0, 2.0, 0.5, 1.0])
    out = agg(engine, native, pdf)
    assert any(lv["eps"] == INF for lv in out["x_mean_eps_levels"][0])
    rejected(engine, native, pdf, EpsilonColumnError, "rule `finite`", ": 1 violation",
             schema=schema())
    assert agg(engine, native, pdf, schema=schema(allow_public=True))["x_mean_n"][0] == 6


def test_eps_outside_platform_range(engine: Any, native: Native) -> None:
    pdf = table(eps=[0.001, 1.0, 1.0, 2.0, 0.5, 30.0])
    assert agg(engine, native, pdf)["x_mean_n"][0] == 6
    rejected(engine, native, pdf, EpsilonColumnError, "rule `in_range`", ": 2 violation",
             schema=schema(min=0.01, max=10.0))


# -- values: private, so never an error: impute, clamp --------------------------------------

def test_bad_values_are_imputed_and_clamped(engine: Any, native: Native) -> None:
    dirty = table(x=[NaN, None, INF, -INF, 4242.0, -1717.0])
    fill = SPEC.fill_value
    clean = table(x=[fill, fill, 100.0, 0.0, 100.0, 0.0])
    expected = agg(engine, native, clean)
    # same pre-noise statistics and the same seed -> the very same release
    pd.testing.assert_frame_equal(agg(engine, native, dirty), expected)
    pd.testing.assert_frame_equal(agg(engine, native, dirty, schema=schema()), expected)
    report = engine.module.validate(native(dirty), schema())
    assert dict(report.violations) == {"x:not_null": 2, "x:finite": 2, "x:in_bounds": 2}
    assert report.release_ok


def test_category_outside_domain(engine: Any, native: Native) -> None:
    pdf = table(dept=["a", "b", "a", "b", "zz_secret", None])
    out = agg(engine, native, pdf, by="dept", keys=["a", "b"], schema=schema())
    assert dict(zip(out["dept"], out["x_mean_n"], strict=True)) == {"a": 2, "b": 2}
    report = engine.module.validate(native(pdf), schema())
    assert dict(report.violations) == {"dept:not_null": 1, "dept:in_domain": 1}


# -- table shape: n is public ------------------------------------------------------------

def test_empty_table(engine: Any, native: Native) -> None:
    pdf = table().iloc[:0]
    out = agg(engine, native, pdf)
    assert out["x_mean_n"][0] == 0
    assert bool(out["x_mean_fallback"][0])
    assert out["x_mean"][0] == 50.0
    assert out["x_mean_noise_scale"][0] == 0.0
    text = rejected(engine, native, pdf, SchemaError, "rule `min_rows`", "has 0 row(s)",
                    schema=schema())
    assert "column `" not in text


def test_single_row(engine: Any, native: Native) -> None:
    pdf = table().iloc[:1]
    for out in (agg(engine, native, pdf), agg(engine, native, pdf, schema=schema())):
        assert out["x_mean_n"][0] == 1
        assert 0.0 <= out["x_mean_ci_low"][0] <= out["x_mean_ci_high"][0] <= 100.0


# -- user ids: public in this model -------------------------------------------------------

def test_duplicate_user_ids(engine: Any, native: Native) -> None:
    pdf = table(uid=[1, 1, 2, 3, 3, 3], eps=[0.5, 0.5, 1.0, 2.0, 2.0, 2.0])
    # without a schema the mean cannot know: it protects rows (documented)
    assert agg(engine, native, pdf)["x_mean_n"][0] == 6
    text = rejected(engine, native, pdf, DuplicateUserError, "column `uid`", "rule `unique`",
                    ": 3 violation", schema=schema())
    assert "`eps`" not in text


def test_eps_varies_within_one_user(engine: Any, native: Native) -> None:
    pdf = table(uid=[1, 1, 2, 2, 3, 4], eps=[0.5, 1.0, 1.0, 1.0, 0.5, 1.0])
    # user-level tables (several rows per user): ε must be constant within a user
    rejected(engine, native, pdf, EpsilonColumnError, "rule `constant_per_user`",
             ": 1 violation", schema=schema(unique=False))
    # row-level tables: one row per user already rules out two ε for one user
    rejected(engine, native, pdf, DuplicateUserError, "rule `unique`", ": 2 violation",
             schema=schema())


# -- the release path -----------------------------------------------------------------------

def test_rejection_happens_before_statistics_and_noise(
    engine: Any, native: Native, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = sys.modules[f"hdp_spark.{engine.name}._mean"]
    calls: list[str] = []

    def spy(name: str) -> Callable[..., Any]:
        def fail(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            msg = f"{name} must not run for a rejected release"
            raise AssertionError(msg)
        return fail

    monkeypatch.setattr(module, "level_tables", spy("level_tables"))
    monkeypatch.setattr(kernels, "finalize_mean", spy("finalize_mean"))
    monkeypatch.setattr(ReleaseKey, "resolve", spy("ReleaseKey.resolve"))
    pdf = table(eps=[0.0, 1.0, 1.0, 2.0, 0.5, 1.0])
    with pytest.raises(EpsilonColumnError):
        engine.module.agg(native(pdf), SPEC, schema=schema())
    with pytest.raises(DuplicateUserError):
        engine.module.release(native(table(uid=[1, 1, 2, 3, 4, 5])), SPEC, schema=schema())
    assert calls == []


def test_release_reads_declared_columns_only(engine: Any, native: Native) -> None:
    frame = native(table())
    with pytest.raises(ParameterError, match="must be the ε column of schema `t`"):
        engine.module.agg(frame, hdp_mean("x", eps="uid", lower=0, upper=1), schema=schema())
    with pytest.raises(SchemaError, match="Column `other` is not declared in schema `t`"):
        engine.module.agg(frame, hdp_mean("other", eps="eps", lower=0, upper=1),
                          schema=schema())
    with pytest.raises(SchemaError, match="Group column `uid2` is not declared"):
        engine.module.agg(frame, SPEC, by="uid2", keys=[1], schema=schema())
    with pytest.raises(ParameterError, match="`schema` must be a TableSchema or None"):
        engine.module.agg(frame, SPEC, schema="schemas/employees.yaml")


def test_schema_does_not_change_a_valid_release(engine: Any, native: Native) -> None:
    pdf = table()
    plain = agg(engine, native, pdf)
    # through the engine-neutral entry point too (it forwards `schema=`)
    top = hdp_spark.agg(native(pdf), SPEC, unsafe_seed=7, schema=schema())
    pd.testing.assert_frame_equal(to_pandas(engine, top), plain)
