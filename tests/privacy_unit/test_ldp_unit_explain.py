"""``explain`` of local-DP means under a privacy unit (issue 50): the figures of the one
report per person the release reads, i.e. ``explain`` of the persons' table (one row per
person at their smallest ε, null/NaN/negative as 0), from the id and ε columns only; its
noise half-width and bias bound are the release's, its n the number of persons.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.ldp as L
from hdp_spark import hdp_mean
from hdp_spark.errors import ParameterError
from hdp_spark.pandas.privacy_unit import unit_eps
from tests.conftest import Engine
from tests.privacy_unit.ldp_unit_data import table as _table

LAP = L.ldp_mean("lap", eps="eps", mechanism="laplace", lower=-1, upper=1)
RR = L.ldp_mean("rr", eps="eps", mechanism="rr")
FIELDS = ("n", "half_width", "noise_half_width", "bias_bound", "baseline_half_width",
          "fallback")


def _explain(engine: Engine, df: pd.DataFrame, *specs: Any, **kw: Any) -> pd.DataFrame:
    out = engine.module.explain(engine.frame(df), *specs, **kw)
    return out if engine.name == "pandas" else out.toPandas()


def _persons(df: pd.DataFrame) -> pd.DataFrame:
    """One row per person at their smallest safe ε, read literally off the rule."""
    safe = df.assign(eps=unit_eps(df["eps"]))
    return safe.groupby("uid", as_index=False)["eps"].min().assign(lap=0.0, rr=1.0)


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got["aggregator"]) == list(want["aggregator"])
    for name in FIELDS:
        assert list(got[name]) == pytest.approx(list(want[name]), rel=1e-12), name
    for a, b in zip(got["eps_levels"], want["eps_levels"], strict=True):
        assert [(lv["eps"], lv["n"]) for lv in a] == [(lv["eps"], lv["n"]) for lv in b]


def test_explain_is_the_persons_table_s(engine: Engine) -> None:
    df, _ = _table()
    got = _explain(engine, df, LAP, RR, privacy_unit="uid")
    want = _explain(Engine("pandas"), _persons(df), LAP, RR)
    _same(got, want)
    spending = int((_persons(df)["eps"] > 0).sum())  # persons at ε 0 read nothing
    assert 0 < spending < df["uid"].nunique()
    assert list(got["n"]) == [spending] * 2
    clean = df.assign(eps=unit_eps(df["eps"]))
    rows = int(_explain(engine, clean, LAP)["n"].iloc[0])  # without the unit: every row
    assert rows == int((clean["eps"] > 0).sum()) > spending


def test_explain_predicts_the_release_s_radius(engine: Engine) -> None:
    rng = np.random.default_rng(4)
    uid = rng.integers(0, 300, 3000)
    eps = rng.choice([0.25, 0.5, 1.0], 300)[uid]
    df = pd.DataFrame({"uid": uid, "eps": eps,
                       "lap": L.laplace(rng.uniform(-1, 1, 3000), eps, lower=-1, upper=1,
                                        unsafe_seed="e")})
    plan = _explain(engine, df, LAP, privacy_unit="uid").iloc[0]
    out = engine.module.ldp_agg(engine.frame(df), LAP, already_randomized=True,
                                privacy_unit="uid", unsafe_seed=2)
    row = (out if engine.name == "pandas" else out.toPandas()).iloc[0]
    assert int(plan["n"]) == int(row["lap_mean_n"]) == 300
    assert float(plan["noise_half_width"]) == pytest.approx(float(row["lap_mean_radius"]),
                                                            rel=1e-12)
    assert float(plan["bias_bound"]) == pytest.approx(float(row["lap_mean_bias_bound"]),
                                                      rel=1e-12)


def test_explain_reads_no_report() -> None:
    df, _ = _table()
    other = df.assign(lap=-df["lap"].fillna(0.0) * 7, rr=np.nan)
    first = _explain(Engine("pandas"), df, LAP, RR, privacy_unit="uid")
    pd.testing.assert_frame_equal(first, _explain(Engine("pandas"), other, LAP, RR,
                                                  privacy_unit="uid"))
    pd.testing.assert_frame_equal(first, _explain(Engine("pandas"), df, LAP, RR,
                                                  privacy_unit="uid"))  # no key in it


@pytest.mark.parametrize(("kw", "specs", "needle"), [
    ({"by": "g", "keys": ["a"]}, (LAP,), r"`by`: .*not supported yet, got \('g',\)"),
    ({"keys": ["a"]}, (LAP,), r"`keys`: .*not supported yet, got \['a'\]"),
    ({"max_rows": 2}, (LAP,), r"`max_rows` must be 1 .*got 2"),
    ({}, (LAP, hdp_mean("lap", eps="eps", lower=-1, upper=1)),
     r"cannot share a call with other aggregators .*got MeanSpec"),
    ({}, (L.ldp_mean_vector("vec", eps="eps", d=3),),
     r"explain supports .*ldp_mean so far, got LdpVectorMeanSpec"),
    ({}, (L.ldp_mean("uid", eps="eps", mechanism="rr"),),
     r"`privacy_unit` column 'uid' identifies people"),
])
def test_errors_name_the_parameter(kw: dict[str, Any], specs: tuple[Any, ...],
                                   needle: str) -> None:
    df, _ = _table()
    df = df.assign(g="a")
    with pytest.raises(ParameterError, match=needle):
        _explain(Engine("pandas"), df, *specs, privacy_unit="uid", **kw)
