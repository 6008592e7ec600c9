"""``explain`` for the user-level mean (issue 20): what the release will publish, before it runs.

The data-independent figures (group sizes, the variance and initial steps' classes with
their weights and eps_effective, eps_var, eps_initial, the final classes' counts, fallback)
must equal what ``user_mean`` then releases, exactly; the final step's noise scale,
half-width, eps_final and eps_effective are upper bounds of the released ones. The plan
never depends on the value column.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from um_data import example1

from hdp_spark.core.user_mean import hdp_user_mean
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError


def _table(seed: int = 5) -> pd.DataFrame:
    """Group a: heterogeneous ε, users with ε = 0; group b: one ε; group c: too few users
    (fallback); group z: empty (fallback)."""
    rng = np.random.default_rng(seed)
    a = example1(300, seed=seed, eps=rng.choice([0.2, 0.7, 1.0, 3.0], 300))
    a.loc[a["user"] % 29 == 0, "eps"] = 0.0
    a["g"] = "a"
    b = example1(200, seed=seed + 1, eps=0.5)
    b["user"] += 10_000
    b["g"] = "b"
    c = example1(12, seed=seed + 2, eps=1.0)
    c["user"] += 20_000
    c["g"] = "c"
    df = pd.concat([a, b, c], ignore_index=True)
    df["x"] = df["x"] * 4.0 - 1.0  # values in [-1, 3]
    return df


KEYS = ["a", "b", "c", "z"]


def _pandas(frame: Any) -> pd.DataFrame:
    return frame if isinstance(frame, pd.DataFrame) else frame.toPandas()


def _classes(value: Any) -> list[dict[str, Any]]:
    out = []
    for c in list(value):
        d = c.asDict(recursive=True) if hasattr(c, "asDict") else dict(c)
        out.append({k: d[k] for k in ("step", "k", "eps", "users", "weight", "eps_effective")})
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _explain(engine: Any, df: pd.DataFrame, *specs: Any, **kw: Any) -> pd.DataFrame:
    return _pandas(engine.module.explain(engine.frame(df), *specs, **kw))


def _release(engine: Any, df: pd.DataFrame, spec: Any, **kw: Any) -> pd.DataFrame:
    return _pandas(engine.module.user_mean(engine.frame(df), spec, **kw))


def _check(plan: pd.Series, out: pd.Series, name: str, span: float) -> None:
    for col in ("users", "rows", "users_var", "users_initial", "users_final",
                "users_excluded", "eps_var", "eps_initial", "fallback"):
        assert plan[col] == out[f"{name}_{col}"], col
    pc, oc = _classes(plan["classes"]), _classes(out[f"{name}_classes"])
    assert [(c["step"], c["k"], c["eps"], c["users"]) for c in pc] == \
        [(c["step"], c["k"], c["eps"], c["users"]) for c in oc]
    for p, o in zip(pc, oc, strict=True):
        if p["step"] == "final":  # data-dependent: NaN weight, ε as the bound
            assert math.isnan(p["weight"])
            assert p["eps_effective"] == p["eps"] >= o["eps_effective"]
        else:
            assert _same(p["weight"], o["weight"])
            assert p["eps_effective"] == o["eps_effective"]
    if plan["fallback"]:
        assert not plan["half_width_is_bound"]
        assert plan["noise_scale"] == out[f"{name}_noise_scale"] == 0.0
        assert plan["half_width"] == span / 2
        return
    assert plan["half_width_is_bound"]
    assert plan["eps_final"] >= out[f"{name}_eps_final"]
    assert 0 < out[f"{name}_noise_scale"] <= plan["noise_scale"]
    # explain bounds the noise part; the released interval adds bias_bound (known only
    # once the first steps have released the clip intervals' centre and the weights)
    half = (out[f"{name}_noise_ci_high"] - out[f"{name}_noise_ci_low"]) / 2
    assert 0 < half <= plan["half_width"]
    assert out[f"{name}_ci_low"] <= out[f"{name}_noise_ci_low"]
    assert out[f"{name}_ci_high"] >= out[f"{name}_noise_ci_high"]
    assert out[f"{name}_bias_bound"] >= 0
    assert plan["noise_scale"] < 20 * out[f"{name}_noise_scale"]  # a bound, not a wild one


@pytest.mark.parametrize("cap", ["width", "paper"])
def test_explain_equals_what_user_mean_releases(engine: Any, cap: str) -> None:
    df = _table()
    spec = hdp_user_mean("x", user="user", eps="eps", lower=-1, upper=3, cap=cap, alias="m")
    plan = _explain(engine, df, spec, by="g", keys=KEYS)
    out = _release(engine, df, spec, by="g", keys=KEYS)
    assert list(plan["g"]) == list(out["g"]) == KEYS
    assert list(plan["kind"]) == ["user_mean"] * 4
    assert list(plan["method"]) == [cap] * 4
    for i in range(len(KEYS)):
        _check(plan.iloc[i], out.iloc[i], "m", 4.0)
    assert list(plan["fallback"]) == [False, False, True, True]


def test_explain_global_with_public_variance_and_grid(engine: Any) -> None:
    from hdp_spark import EpsGrid

    df = _table(8)
    df["eps"] = df["eps"] * 1.13
    spec = hdp_user_mean("x", user="user", eps="eps", lower=-1, upper=3, alias="m",
                         public_variance=0.05, eps_grid=EpsGrid(ratio=1.5, lowest=0.01))
    plan = _explain(engine, df, spec)
    out = _release(engine, df, spec)
    assert len(plan) == 1
    assert plan.iloc[0]["users_var"] == 0
    assert plan.iloc[0]["eps_var"] == 0.0
    _check(plan.iloc[0], out.iloc[0], "m", 4.0)


def test_bound_holds_on_many_tables() -> None:
    """Core-level: the released final noise never exceeds the bound (both caps, several
    ε mixes, sizes and seeds), and the initial figures equal the release's."""
    import hdp_spark.pandas as hpd

    for seed in range(6):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(40, 400))
        eps = rng.choice([0.05, 0.3, 1.0, 8.0], n) if seed % 2 else 0.4
        df = example1(n, seed=seed, eps=eps)
        for cap in ("width", "paper"):
            spec = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1, cap=cap,
                                 tau_d=0.3 if seed == 3 else 1.0)
            plan = hpd.explain(df, spec).iloc[0]
            out = hpd.user_mean(df, spec, unsafe_seed=seed).iloc[0]
            _check(plan, out, spec.name, 1.0)


def test_plan_never_depends_on_values(engine: Any) -> None:
    df = _table()
    other = df.copy()
    other["x"] = np.random.default_rng(1).uniform(-50, 50, len(df))
    other.loc[::7, "x"] = np.nan
    spec = hdp_user_mean("x", user="user", eps="eps", lower=-1, upper=3)
    a = _explain(engine, df, spec, by="g", keys=KEYS)
    b = _explain(engine, other, spec, by="g", keys=KEYS)
    pd.testing.assert_frame_equal(a, b)
    # the value column is not even read: a table without it gives the same plan
    c = _explain(engine, df.drop(columns=["x"]), spec, by="g", keys=KEYS)
    pd.testing.assert_frame_equal(a, c)


def test_two_user_means_in_one_call(engine: Any) -> None:
    df = _table()
    s1 = hdp_user_mean("x", user="user", eps="eps", lower=-1, upper=3, alias="m1")
    s2 = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1, cap="paper", alias="m2")
    plan = _explain(engine, df, s1, s2, by="g", keys=["a", "b"])
    assert list(plan["aggregator"]) == ["m1", "m2", "m1", "m2"]
    single = _explain(engine, df, s2, by="g", keys=["a", "b"])
    pd.testing.assert_series_equal(plan["half_width"].iloc[[1, 3]].reset_index(drop=True),
                                   single["half_width"].reset_index(drop=True))


def test_errors(engine: Any) -> None:
    import hdp_spark.pandas as hpd

    df = _table()
    spec = hdp_user_mean("x", user="user", eps="eps", lower=-1, upper=3)
    mean = hpd.hdp_mean("x", eps="eps", lower=-1, upper=3)
    with pytest.raises(ParameterError, match="not both"):
        _explain(engine, df, spec, mean)
    with pytest.raises(ParameterError, match="`by`"):
        _explain(engine, df, spec, by="eps", keys=[1.0])
    bad = df.copy()
    bad.loc[bad["user"] == 3, "eps"] = [0.5] + [0.9] * (int((bad["user"] == 3).sum()) - 1)
    with pytest.raises(EpsilonColumnError, match="1 user"):
        _explain(engine, bad, spec)
    with pytest.raises(ParameterError, match=r"must be a .* DataFrame"):
        engine.module.explain([1, 2], spec)
    with pytest.raises(SchemaError, match="user column `nope`"):
        _explain(engine, df, hdp_user_mean("x", user="nope", eps="eps", lower=0, upper=1))
