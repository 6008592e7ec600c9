"""Property tests: random malformed tables fed to the mean, with and without a schema.

Whatever the table, ``agg`` either raises an HdpError whose message holds no data value,
or returns a valid release; with a schema, it raises exactly when a blocking rule is
violated, and otherwise releases the very same numbers as without it. On Spark, the
validation counts and the release also equal pandas' (same seed, same statistics).

The other exported aggregators (user-level mean, histogram, LDP mean) get the same random
tables: a clear HdpError without data values, or a release; never another exception.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_testing import assert_no_data, build_native, to_pandas

import hdp_spark.pandas as hpd
from hdp_spark import hdp_mean
from hdp_spark.errors import HdpError
from hdp_spark.schema import ColumnSchema, EpsilonColumn, TableSchema, UserIdColumn

NaN, INF = float("nan"), float("inf")
LOWER, UPPER = 0.0, 100.0

EPS_VALUES = [0.5, 1.0, 2.0, 0.7373, 3.0303, 0.0, -0.0, -0.7373, INF, -INF, NaN, None,
              0.001, 42.4242]
X_VALUES = [10.0, 55.5, 4242.4242, -1717.17, 98765.0, NaN, None, INF, -INF, 0.0, 100.0]
TEXT = ["1.0", "zz_secret", "4242", None]
DEPTS = ["a", "b", "zz_secret", None]


@st.composite
def tables(draw: st.DrawFn) -> pd.DataFrame:
    """A table with ε, value, user id and group columns, most of them malformed."""
    n = draw(st.integers(0, 10))
    eps_kind = draw(st.sampled_from(["float"] * 6 + ["int", "text"]))
    if eps_kind == "float":
        eps: Any = pd.array(draw(st.lists(st.sampled_from(EPS_VALUES), min_size=n, max_size=n)),
                            dtype="float64")
    elif eps_kind == "int":
        eps = draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n))
    else:
        eps = pd.Series(draw(st.lists(st.sampled_from(TEXT), min_size=n, max_size=n)),
                        dtype=object)
    x_kind = draw(st.sampled_from(["float"] * 6 + ["int", "text"]))
    if x_kind == "float":
        x: Any = pd.array(draw(st.lists(st.sampled_from(X_VALUES), min_size=n, max_size=n)),
                          dtype="float64")
    elif x_kind == "int":
        x = draw(st.lists(st.integers(-5, 4242), min_size=n, max_size=n))
    else:
        x = pd.Series(draw(st.lists(st.sampled_from(TEXT), min_size=n, max_size=n)),
                      dtype=object)
    uid = pd.array(draw(st.lists(st.one_of(st.integers(1, 6), st.none()), min_size=n,
                                 max_size=n)), dtype="Int64")
    dept = pd.Series(draw(st.lists(st.sampled_from(DEPTS), min_size=n, max_size=n)),
                     dtype=object)
    return pd.DataFrame({"uid": uid, "eps": eps, "x": x, "dept": dept})


@st.composite
def schemas(draw: st.DrawFn) -> TableSchema:
    """A schema of the random tables, with random ε policy and user-id rules."""
    lo = draw(st.sampled_from([None, 0.01, 0.6]))
    hi = draw(st.sampled_from([None, 5.0]))
    return TableSchema(
        "random",
        EpsilonColumn("eps", allow_zero=draw(st.booleans()), allow_public=draw(st.booleans()),
                      min=lo, max=hi),
        UserIdColumn("uid", unique=draw(st.booleans())),
        (
            ColumnSchema("x", "float", nullable=draw(st.booleans()), lower=LOWER, upper=UPPER),
            ColumnSchema("dept", "string", domain=("a", "b")),
        ),
        min_rows=draw(st.sampled_from([0, 1])),
    )


releases = st.fixed_dictionaries({
    "method": st.sampled_from(["adpm", "hpm-a", "uniform", "proportional", "hpm-cp"]),
    "grouped": st.booleans(),
})


def _run(module: Any, frame: Any, spec: Any, grouped: bool, **kwargs: Any) -> Any:
    if grouped:
        return module.agg(frame, spec, by="dept", keys=["a", "b"], unsafe_seed=11, **kwargs)
    return module.agg(frame, spec, unsafe_seed=11, **kwargs)


def _outcome(engine: Any, frame: Any, spec: Any, grouped: bool, **kw: Any) -> Any:
    """The released frame (as pandas) or the HdpError; any other exception fails the test."""
    try:
        return to_pandas(engine, _run(engine.module, frame, spec, grouped, **kw))
    except HdpError as err:
        assert_no_data(str(err))
        return err


def _check_release(out: pd.DataFrame, pdf: pd.DataFrame, grouped: bool) -> None:
    assert len(out) == (2 if grouped else 1)
    if not grouped:
        assert out["x_mean_n"][0] == len(pdf)
    for _, row in out.iterrows():
        assert np.isfinite(row["x_mean"])
        assert row["x_mean_ci_low"] <= row["x_mean"] <= row["x_mean_ci_high"]
        assert row["x_mean_noise_scale"] >= 0
        if row["x_mean_method"] != "adpm":  # adpm is unbiased, hence not clipped
            assert LOWER <= row["x_mean"] <= UPPER


def _check(engine: Any, pdf: pd.DataFrame, schema: TableSchema, rel: dict[str, Any]) -> None:
    spec = hdp_mean("x", eps="eps", lower=LOWER, upper=UPPER, method=rel["method"])
    grouped = rel["grouped"]
    frame = build_native(engine, pdf)
    plain = _outcome(engine, frame, spec, grouped)
    checked = _outcome(engine, frame, spec, grouped, schema=schema)
    if isinstance(plain, pd.DataFrame):
        _check_release(plain, pdf, grouped)
    # what the schema should decide, from the report (itself checked against pandas)
    try:
        report = engine.module.validate(frame, schema, scope="release")
    except HdpError as err:  # structure: a declared column has the wrong type
        structure: HdpError | None = err
    else:
        structure = None
    if structure is not None:
        assert_no_data(str(structure))
        assert type(checked) is type(structure)
        return
    if engine.name == "spark":
        expected = hpd.validate(pdf, schema, scope="release")
        assert dict(report.all_counts) == dict(expected.all_counts)
        assert report.rows == expected.rows
    if not report.release_ok:
        assert isinstance(checked, HdpError)
        first = next(r for r, c in zip(report.rules, report.counts, strict=True)
                     if c and r.blocking)
        assert type(checked) is first.error
        assert f"rule `{first.name}`" in str(checked)
    elif isinstance(plain, pd.DataFrame):
        assert isinstance(checked, pd.DataFrame)
        pd.testing.assert_frame_equal(checked, plain)
    else:  # the mean's own checks (e.g. a non-numeric value column) still apply
        assert isinstance(checked, HdpError)
    if engine.name == "spark" and isinstance(plain, pd.DataFrame):
        reference = _outcome(Pandas(), pdf, spec, grouped)
        pd.testing.assert_frame_equal(plain, reference, check_dtype=False)


class Pandas:
    """A minimal pandas engine (the reference of the Spark parity check)."""

    name = "pandas"
    module = hpd


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_random_malformed_tables(engine: Any) -> None:
    """Random tables x random schemas x random mean settings, on each engine."""
    examples = 150 if engine.name == "pandas" else 8

    @given(pdf=tables(), schema=schemas(), rel=releases)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    def check(pdf: pd.DataFrame, schema: TableSchema, rel: dict[str, Any]) -> None:
        _check(engine, pdf, schema, rel)

    check()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_random_malformed_tables_spark_semi_join(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same properties on Spark when public keys are matched by the broadcast semi-join
    (the path for large key sets or tables) instead of on the driver."""
    if engine.name != "spark":
        pytest.skip("the semi-join is Spark's key-matching path")
    from hdp_spark.spark import _common

    monkeypatch.setattr(_common, "DRIVER_FILTER_MAX_KEYS", 0)
    joins = []
    key_frame = _common.key_frame

    def counting_key_frame(*args: Any) -> Any:
        joins.append(1)
        return key_frame(*args)

    monkeypatch.setattr(_common, "key_frame", counting_key_frame)

    @given(pdf=tables(), schema=schemas(), rel=releases)
    @settings(max_examples=6, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    def check(pdf: pd.DataFrame, schema: TableSchema, rel: dict[str, Any]) -> None:
        _check(engine, pdf, schema, {**rel, "grouped": True})

    check()
    assert joins, "no release reached the semi-join"


# -- the other aggregators: a clear HdpError without data values, or a valid release ------

def _other_aggregators(module: Any) -> dict[str, Any]:
    """Exported aggregators other than the mean, as ``name -> run(frame)``."""
    runs: dict[str, Any] = {}
    if hasattr(module, "user_mean") and hasattr(module, "hdp_user_mean"):
        spec = module.hdp_user_mean("x", user="uid", eps="eps", lower=LOWER, upper=UPPER)
        runs["user_mean"] = lambda frame: module.user_mean(frame, spec, unsafe_seed=11)
    if hasattr(module, "histogram") and hasattr(module, "hdp_histogram"):
        hist = module.hdp_histogram("dept", eps="eps", categories=["a", "b"])
        runs["histogram"] = lambda frame: module.histogram(frame, hist, by="dept",
                                                           keys=["a", "b"], unsafe_seed=11)
        runs["histogram_global"] = lambda frame: module.histogram(frame, hist, unsafe_seed=11)
    if hasattr(module, "ldp_agg") and hasattr(module, "ldp_mean"):
        ldp = module.ldp_mean("x", eps="eps", mechanism="laplace", lower=LOWER, upper=UPPER)
        runs["ldp_mean"] = lambda frame: module.ldp_agg(frame, ldp, already_randomized=True)
    return runs


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore:.*seed 003")
def test_random_malformed_tables_other_aggregators(engine: Any) -> None:
    """Every other exported aggregator on random malformed tables, on each engine."""
    runs = _other_aggregators(engine.module)
    if not runs:
        pytest.skip("no other aggregator is exported yet")
    examples = 60 if engine.name == "pandas" else 4

    @given(pdf=tables(), name=st.sampled_from(sorted(runs)))
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    def check(pdf: pd.DataFrame, name: str) -> None:
        try:
            out = to_pandas(engine, runs[name](build_native(engine, pdf)))
        except HdpError as err:
            assert_no_data(str(err))
            return
        assert isinstance(out, pd.DataFrame)
        assert len(out) >= 1

    check()
