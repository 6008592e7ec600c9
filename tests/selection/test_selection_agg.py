"""``agg(..., by=..., keys=select_keys(...))`` on both engines: what is released, what is
never released, the output description, the per-row rules (NaN, +inf, 0) and every error
path; plus the shared-stream attack on the ratio mean (pandas, many seeds)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.errors import EpsilonColumnError, ParameterError

SEL = hpd.select_keys(delta=1e-7, c=1.0, share=0.4)
MEAN = hpd.hdp_mean("spend", eps="eps", lower=0, upper=500)


def _table(seed: int = 0) -> pd.DataFrame:
    """Merchants of 3,000 down to 1 rows (the long tail is never released at δ = 1e-7)."""
    rng = np.random.default_rng(seed)
    sizes = {"big": 3000, "mid": 800, "small": 12, "solo": 1, "pair": 2}
    merchant = np.concatenate([[k] * v for k, v in sizes.items()])
    eps = np.exp(rng.uniform(math.log(0.05), math.log(5), len(merchant)))
    spend = np.where(merchant == "big", 100.0, 400.0) + rng.uniform(-50, 50, len(merchant))
    return pd.DataFrame({"merchant": merchant, "eps": eps, "spend": spend})


def test_releases_large_groups_only_sorted_with_its_mode(engine: Any) -> None:
    df = _table()
    out = engine.agg(df.sample(frac=1.0, random_state=3), MEAN, by="merchant", keys=SEL,
                     unsafe_seed=5)
    assert list(out["merchant"]) == ["big", "mid"]  # sorted, the tail suppressed
    assert list(out.columns) == [
        "merchant", "spend_mean", "spend_mean_ci_low", "spend_mean_ci_high",
        "spend_mean_noise_ci_low", "spend_mean_noise_ci_high", "spend_mean_bias_bound",
        "spend_mean_weight", "spend_mean_privacy", "spend_mean_eps_cap",
        "spend_mean_eps_step", "spend_mean_delta",
    ]
    assert set(out["spend_mean_privacy"]) == {"partition_selection"}
    assert set(out["spend_mean_eps_cap"]) == {1.0}
    assert set(out["spend_mean_delta"]) == {1e-7}
    assert set(out["spend_mean_eps_step"]) == {1 / 1024}
    truth = df.groupby("merchant")["spend"].mean()
    for row in out.itertuples():
        # the interval of the group's own mean on every data set: the whole range (nothing
        # public bounds the reweighting under selection); the noise interval is inside it
        assert (row.spend_mean_ci_low, row.spend_mean_ci_high) == (0.0, 500.0)
        assert row.spend_mean_bias_bound == 500.0
        assert 0.0 <= row.spend_mean_noise_ci_low <= row.spend_mean
        assert row.spend_mean <= row.spend_mean_noise_ci_high <= 500.0
        assert row.spend_mean_noise_ci_high - row.spend_mean_noise_ci_low < 50
        assert abs(row.spend_mean - truth[row.merchant]) < 25
    weight = df.assign(k=np.minimum(df["eps"], 1.0)).groupby("merchant")["k"].sum()
    assert abs(out["spend_mean_weight"].iloc[0] - weight["big"]) < 60  # noisy Σ κ_i
    assert "spend_mean_n" not in out.columns  # n_g is private under selection


def test_same_numbers_whatever_the_row_order(engine: Any) -> None:
    df = _table()
    a = engine.agg(df, MEAN, by="merchant", keys=SEL, unsafe_seed=9)
    b = engine.agg(df.iloc[::-1].reset_index(drop=True), MEAN, by="merchant", keys=SEL,
                   unsafe_seed=9)
    pd.testing.assert_frame_equal(a, b)
    c = engine.agg(df, MEAN, by="merchant", keys=SEL, unsafe_seed=10)
    assert not np.allclose(a["spend_mean"], c["spend_mean"])  # the seed matters


def test_eps_zero_rows_change_nothing_and_inf_counts_as_c(engine: Any) -> None:
    df = _table()
    base = engine.agg(df, MEAN, by="merchant", keys=SEL, unsafe_seed=1)
    zeros = pd.DataFrame({"merchant": ["big"] * 50 + ["ghost"] * 50,
                          "eps": [0.0] * 100, "spend": [499.0] * 100})
    more = engine.agg(pd.concat([df, zeros], ignore_index=True), MEAN, by="merchant",
                      keys=SEL, unsafe_seed=1)
    pd.testing.assert_frame_equal(base, more)  # weight 0: no influence, "ghost" never out
    capped = df.assign(eps=np.where(df["eps"] >= 1.0, 1.0, df["eps"]))
    uncapped = df.assign(eps=np.where(df["eps"] >= 1.0, math.inf, df["eps"]))
    pd.testing.assert_frame_equal(
        engine.agg(capped, MEAN, by="merchant", keys=SEL, unsafe_seed=2),
        engine.agg(uncapped, MEAN, by="merchant", keys=SEL, unsafe_seed=2),
    )


def test_nan_eps_is_rejected_without_data(engine: Any) -> None:
    df = _table()
    df.loc[3, "eps"] = math.nan
    with pytest.raises(EpsilonColumnError) as info:
        engine.agg(df, MEAN, by="merchant", keys=SEL)
    assert "1 row(s)" in str(info.value)
    assert "big" not in str(info.value)


def test_null_group_keys_are_never_released(engine: Any) -> None:
    df = _table()
    df["merchant"] = df["merchant"].where(df["merchant"] != "mid", None)
    out = engine.agg(df, MEAN, by="merchant", keys=SEL, unsafe_seed=4)
    assert list(out["merchant"]) == ["big"]


def test_histogram_and_mean_in_one_call(engine: Any) -> None:
    df = _table().assign(kind=lambda d: np.where(d["spend"] > 250, "high", "low"))
    hist = hpd.hdp_histogram("kind", eps="eps", categories=["high", "low"], other=None)
    out = engine.agg(df, MEAN, hist, by="merchant", keys=SEL, unsafe_seed=6)
    assert list(out["merchant"]) == ["big", "mid"]
    assert (out["kind_histogram_weight"] == out["spend_mean_weight"]).all()  # one selection
    bins = {r.merchant: {b["category"]: b["frequency"] for b in r.kind_histogram}
            for r in out.itertuples()}
    assert bins["big"]["low"] > 0.9
    assert bins["mid"]["high"] > 0.9
    assert set(out["kind_histogram_bias_bound"]) == {1.0}
    for r in out.itertuples():
        for b in r.kind_histogram:
            assert (b["ci_low"], b["ci_high"]) == (0.0, 1.0)
            assert b["noise_ci_low"] <= b["frequency"] <= b["noise_ci_high"]
            assert b["noise_ci_high"] - b["noise_ci_low"] < 0.2


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda df: hpd.agg(df, MEAN, keys=SEL), "it needs `by`"),
        (lambda df: hpd.agg(df, MEAN, hpd.hdp_mean("spend", eps="eps2", lower=0, upper=1,
                                                   alias="m2"), by="merchant", keys=SEL),
         "the same `eps` column"),
        (lambda df: hpd.agg(df, hpd.hdp_user_mean("spend", user="merchant2", eps="eps",
                                                  lower=0, upper=1), by="merchant",
                            keys=SEL), "supports hdp_mean and hdp_histogram"),
        (lambda df: hpd.agg(df, object(), by="merchant", keys=SEL), "aggregators must come"),
        (lambda df: hpd.release(df, MEAN, by="merchant", keys=SEL), "`agg` only"),
        (lambda df: hpd.histogram(df, hpd.hdp_histogram("merchant2", eps="eps",
                                                        categories=["a"]),
                                  by="merchant", keys=SEL), "`agg` only"),
        (lambda df: hpd.explain(df, MEAN, by="merchant", keys=SEL), "does not support"),
    ],
)
def test_error_paths(call: Any, needle: str) -> None:
    df = _table().assign(eps2=1.0, merchant2="x")
    with pytest.raises(ParameterError, match=None) as info:
        call(df)
    assert needle in str(info.value)


@pytest.mark.slow
def test_shared_stream_attack_finds_noise() -> None:
    """Ñ - (b_N/b_S)·W̃ must stay noisy: W̃ and Ñ come from separate streams. With one
    shared draw the combination would equal N - (b_N/b_S)·W on every seed."""
    df = pd.DataFrame({"merchant": ["big"] * 2000, "eps": [1.0] * 2000,
                       "spend": [250.0] * 2000})  # x̄ = ½: N = 0, no clipping
    sel = hpd.select_keys(delta=1e-7, c=1.0, share=0.4)
    b_n, b_s = 2 / (2 * 0.6), 2 / 0.4  # Laplace scales in κ units (u = 2)
    combos, ws = [], []
    for seed in range(300):
        out = hpd.agg(df, MEAN, by="merchant", keys=sel, unsafe_seed=seed)
        w = float(out["spend_mean_weight"].iloc[0])
        numerator = ((float(out["spend_mean"].iloc[0]) - 0) / 500 - 0.5) * w
        combos.append(numerator - (b_n / b_s) * w)
        ws.append(w)
    sd = float(np.std(combos))
    expected = math.sqrt(2 * b_n**2 + (b_n / b_s) ** 2 * 2 * b_s**2)  # independent noises
    assert 0.8 * expected < sd < 1.2 * expected
    assert abs(float(np.std(ws)) - math.sqrt(2) * b_s) < 0.2 * math.sqrt(2) * b_s


@pytest.mark.spark
def test_engines_release_the_same_keys_and_numbers(spark: Any) -> None:
    """Same table, same seed: pandas and Spark (classic) publish identical frames (the
    engines agree exactly on the pre-noise cells, so the keyed noise is the same)."""
    import hdp_spark.spark as hs

    def both(*specs: Any, **kwargs: Any) -> list[pd.DataFrame]:
        local = hpd.agg(df, *specs, **kwargs)
        remote = hs.agg(spark.createDataFrame(df).repartition(3), *specs, **kwargs)
        return [local, remote.toPandas()]

    df = _table(7).assign(kind=lambda d: np.where(d["spend"] > 250, "high", "low"))
    hist = hpd.hdp_histogram("kind", eps="eps", categories=["high", "low"])
    grid = hpd.hdp_mean("spend", eps="eps", lower=0, upper=500,
                        eps_grid=hpd.EpsGrid(ratio=1.25, lowest=0.01), alias="gridded")
    sel = hpd.select_keys(delta=1e-6, c=2.0, share=0.3, step=0.01)
    outs = both(MEAN, hist, by="merchant", keys=sel, unsafe_seed=11)
    pd.testing.assert_frame_equal(outs[0], outs[1], check_dtype=False)
    assert list(outs[0]["merchant"]) == ["big", "mid"]
    gridded = both(grid, by="merchant", keys=sel, unsafe_seed=12)
    pd.testing.assert_frame_equal(gridded[0], gridded[1], check_dtype=False)
