"""Parameter, schema and ε validation: errors name the rule and the caller's value, never data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hdp_spark.ldp as L
import hdp_spark.pandas as pdl
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError


def test_randomizer_eps_errors_count_rows_and_hide_values() -> None:
    with pytest.raises(EpsilonColumnError, match=r"2 row\(s\)") as info:
        L.laplace(np.array([0.123456, 0.5, 0.7]), np.array([0.5, -3.25, np.inf]))
    assert "0.123456" not in str(info.value)
    assert "-3.25" not in str(info.value)
    with pytest.raises(EpsilonColumnError):
        L.randomized_response(np.array([1, -1]), 0.0)
    with pytest.raises(ParameterError, match="one value per row"):
        L.duchi(np.zeros((3, 2)), np.ones(2))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: L.laplace([0.1], 1.0, lower=1.0, upper=0.0), "`lower` must be < `upper`"),
    (lambda: L.laplace([0.1], 1.0, lower=float("nan")), "`lower` must be finite"),
    (lambda: L.laplace([[0.1]], 1.0), "one-dimensional"),
    (lambda: L.duchi(np.zeros(3), 1.0), r"shape \(n, d\)"),
    (lambda: L.duchi(np.zeros((2, 2)), 1.0, radius=0.0), "`radius` must be > 0"),
    (lambda: L.jl_frequency_report([1], 1.0), "pass `d`"),
    (lambda: L.laplace([0.1], 1.0, key=L.ReleaseKey.fresh(), unsafe_seed=1), "at most one"),
    (lambda: L.laplace([0.1], 1.0, key="k"), "must be a ReleaseKey"),  # type: ignore[arg-type]
    (lambda: L.FrequencyOracle(d=0, m=1, phi_seed=1), "`d` must be in"),
    (lambda: L.FrequencyOracle(d=5, m=6, phi_seed=1, projection="hadamard"), "power of two"),
    (lambda: L.FrequencyOracle(d=5, m=8, phi_seed=-1), "phi_seed"),
    (lambda: L.ldp_mean("y", eps="e", mechanism="gauss"), "`mechanism` must be one of"),  # type: ignore[arg-type]
    (lambda: L.ldp_mean("y", eps="e", mechanism="rr", beta=1.0), "`beta` must be in"),
    (lambda: L.ldp_mean("y", eps="e", mechanism="rr", weights="w"), "`weights` must be"),  # type: ignore[arg-type]
    (lambda: L.ldp_mean("", eps="e", mechanism="rr"), "`report` must be a non-empty"),
    (lambda: L.ldp_mean_vector("y", eps="e", d=0), "`d` must be in"),
    (lambda: L.ldp_distribution("j", "b", eps="e", oracle=None), "FrequencyOracle"),  # type: ignore[arg-type]
    (lambda: L.ldp_mean("y", eps="e", mechanism="rr", fallback=1), "`fallback` must be"),  # type: ignore[arg-type]
])
def test_parameter_errors(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParameterError, match=match):
        call()


def test_aggregation_errors() -> None:
    df = pd.DataFrame({"y": [1.0], "eps": [1.0], "g": ["a"]})
    spec = L.ldp_mean("y", eps="eps", mechanism="rr")
    with pytest.raises(ParameterError, match="share the output name"):
        pdl.ldp_agg(df, spec, spec, already_randomized=True)
    with pytest.raises(ParameterError, match="public key set"):
        pdl.ldp_agg(df, spec, by="g", already_randomized=True)
    with pytest.raises(ParameterError, match="at least one"):
        pdl.ldp_agg(df, already_randomized=True)
    with pytest.raises(ParameterError, match="ldp_mean"):
        pdl.ldp_agg(df, "y")  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="`missing` is not in the table"):
        pdl.ldp_agg(df, L.ldp_mean("missing", eps="eps", mechanism="rr"), already_randomized=True)
    with pytest.raises(SchemaError, match="must be numeric"):
        pdl.ldp_agg(df, L.ldp_mean("g", eps="eps", mechanism="rr"), already_randomized=True)
    with pytest.raises(EpsilonColumnError, match="finite"):
        pdl.ldp_agg(pd.DataFrame({"y": [1.0], "eps": [np.inf]}), spec, already_randomized=True)


def test_eps_zero_rows_take_no_part_and_nulls_are_skipped() -> None:
    df = pd.DataFrame({"y": [1.0, -1.0, np.nan, 1.0], "eps": [1.0, 0.0, 1.0, 1.0]})
    out = pdl.ldp_agg(df, L.ldp_mean("y", eps="eps", mechanism="rr"), already_randomized=True)
    assert out["y_mean_n"][0] == 2
    assert out["y_mean_skipped"][0] == 1
    levels = out["y_mean_eps_levels"][0]
    assert [lv["eps"] for lv in levels] == [1.0]


def test_rr_accepts_booleans_and_rejects_nothing_data_dependent() -> None:
    y = L.randomized_response(np.array([True, False, True]), 50.0, unsafe_seed=3)
    assert y.tolist() == [1, -1, 1]  # ε = 50: keep probability 1 - 2^-40
    y = L.randomized_response(np.array([0.0, 1.0, np.nan, 7.0]), 1.0, lower=0, upper=1,
                              unsafe_seed=3)
    assert set(y.tolist()) <= {-1, 1}


def test_jl_bottom_mapping_never_raises() -> None:
    oracle = L.FrequencyOracle(d=3, m=4, phi_seed=1)
    rep = L.jl_frequency_report(np.array([0, 2, 3, -1, 1.5, np.nan]), 1.0, oracle=oracle)
    assert rep.index.shape == (6,)
    assert set(rep.sign.tolist()) <= {-1, 1}
    with pytest.raises(ParameterError, match=r"must equal `oracle\.d`"):
        L.jl_frequency_report([0], 1.0, 4, oracle=oracle)


def test_oracle_sizing_follows_erratum_e2() -> None:
    """Spec §2.4 example: n = 20 000 (half ε=0.2, half ε=1), d = 50, β = 0.1 -> m = 3811."""
    eps = np.array([0.2] * 10_000 + [1.0] * 10_000)
    oracle = L.FrequencyOracle.plan(eps, 50, beta=0.1, phi_seed=1)
    assert oracle.m == 3811
    assert L.FrequencyOracle.plan(eps, 50, projection="hadamard", phi_seed=1).m == 64
    assert L.FrequencyOracle.plan(np.zeros(3), 5, phi_seed=1).m == 1
