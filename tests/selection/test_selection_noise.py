"""The released statistics under selection, engine-free: their noise has the analysed
scales (so the (1 - f)·κ_i share is what is spent), each statistic draws from its own
stream, and histogram-only releases work on both engines.

The statistical tests draw seeded keys (one per draw): their outcome is the same on every run.
With fresh keys their z-type checks (normal approximation) would fail a correct sampler with
the probabilities stated beside them."""

from __future__ import annotations

import logging
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.selection import select_keys
from hdp_spark.core.selection.mechanism import (
    Selected,
    selected_histogram,
    selected_mean,
)
from hdp_spark.core.stats import GroupStats, LevelRow

SEL = select_keys(delta=1e-6, c=1.0, share=0.4, step=0.25)
MEAN = hpd.hdp_mean("spend", eps="eps", lower=0, upper=10)
HIST = hpd.hdp_histogram("kind", eps="eps", categories=["a", "b"])


def _key(tag: str, i: int = 0) -> ReleaseKey:
    return ReleaseKey.from_unsafe_seed(f"sel-noise-{tag}-{i}")


def _discrete_sd(scale: Fraction) -> float:
    """sd of the two-sided geometric with P[z] ∝ exp(-|z|/scale)."""
    q = math.exp(-scale.denominator / scale.numerator)
    return math.sqrt(2 * q) / (1 - q)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("parts", [1, 2])
def test_mean_numerator_noise_has_the_analysed_scale(parts: int) -> None:
    # 400 rows at ε = 1 (4 steps each), all at x̄ = ½: N = 0 exactly
    stats = GroupStats((LevelRow(1.0, 400, (400 * FIXED_ONE // 2,)),))
    selected = Selected(SEL, 1600, parts)
    draws = [float(selected_mean(MEAN, stats, 0, _key(f"mean-{parts}", i), ("g",), "m",
                                 selected).numerator) for i in range(4000)]
    scale = SEL.mean_scale(parts)  # u/(2·s·γ) steps, s = (1 - f)/parts
    assert scale == Fraction(2) / (2 * Fraction(3, 5) / parts * Fraction(1, 4))
    expected = math.sqrt(2) * float(scale)
    # sd within 8%: 4.5σ of the sample sd (kurtosis <= 6: relative sd sqrt(5/(4n))), ~7e-6;
    # mean: 4σ, ~6e-5 (fresh keys; seeded here)
    assert abs(float(np.std(draws)) / expected - 1) < 0.08
    assert abs(float(np.mean(draws))) < 4 * expected / math.sqrt(len(draws))


@pytest.mark.slow
@pytest.mark.statistical
def test_histogram_count_noise_has_the_analysed_scale() -> None:
    stats = GroupStats((LevelRow(1.0, 100, (60, 40, 0)),))  # codes a, b, unmatched
    selected = Selected(SEL, 400, 1)
    counts = np.array([selected_histogram(HIST, stats, _key("hist", i), ("g",), "h",
                                          selected).counts for i in range(3000)])
    # with fresh keys, per bin: sd within 8% is a 3.9σ event (~1e-4), the mean 5σ (~6e-7),
    # |corr| < 0.08 is 4.4σ (~1e-5): ~3e-4 in all; seeded here
    truth = np.array([240, 160, 0])  # 4 steps per row; the empty "other" bin is noised too
    expected = _discrete_sd(SEL.count_scale(1))
    for j in range(3):
        assert abs(float(np.std(counts[:, j])) / expected - 1) < 0.08
        assert abs(float(np.mean(counts[:, j])) - truth[j]) < 5 * expected / math.sqrt(3000)
    corr = np.corrcoef(counts[:, 0], counts[:, 1])[0, 1]
    assert abs(corr) < 0.08  # bins draw independent noise


@pytest.mark.statistical
def test_streams_differ_per_statistic_and_group() -> None:
    """Same key: the mean numerator of two groups with equal statistics, and the mean and
    histogram of one group, get unrelated noise (contexts hold group and statistic)."""
    key = _key("streams")  # seeded: 20 discrete draws can collide by chance
    stats = GroupStats((LevelRow(1.0, 400, (400 * FIXED_ONE // 2,)),))
    selected = Selected(SEL, 1600, 1)
    a = [selected_mean(MEAN, stats, 0, key, (g,), "m", selected).numerator for g in range(20)]
    assert len(set(a)) > 15
    again = selected_mean(MEAN, stats, 0, key, (0,), "m", selected).numerator
    assert again == a[0]  # re-evaluation replays the same noise


def _frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    shop = np.repeat(["s1", "s2", "s3", "s4"], [3000, 1500, 5, 1])
    return pd.DataFrame({
        "shop": shop, "eps": rng.choice([0.1, 0.5, 1.0, 3.0, math.inf], len(shop)),
        "kind": rng.choice(["a", "b", None, "zz"], len(shop), p=[0.6, 0.3, 0.05, 0.05]),
        "spend": rng.uniform(0, 10, len(shop)),
    })


def test_histogram_alone_under_selection(engine: Any) -> None:
    df = _frame()
    out = engine.agg(df, HIST, by="shop", keys=hpd.select_keys(delta=1e-7, c=1.0, share=0.5),
                     unsafe_seed=3)
    assert list(out["shop"]) == ["s1", "s2"]
    for row in out.itertuples():
        bins = {b["category"]: b["frequency"] for b in row.kind_histogram}
        assert list(bins) == ["a", "b", "other"]
        assert abs(bins["a"] - 0.6) < 0.05
        assert abs(bins["other"] - 0.1) < 0.05  # null and out-of-domain values, no error


def test_no_candidate_key_in_logs(caplog: pytest.LogCaptureFixture) -> None:
    df = _frame().replace({"shop": {"s4": "secret-shop-name"}})
    with caplog.at_level(logging.DEBUG):
        out = hpd.agg(df, MEAN, by="shop", keys=hpd.select_keys(delta=1e-7, c=1.0, share=0.5))
    assert "secret-shop-name" not in caplog.text
    assert "secret-shop-name" not in set(out["shop"])
    assert "secret-shop-name" not in repr(out.attrs)


def test_pandas_na_keys_are_never_released() -> None:
    df = _frame()
    df["shop"] = pd.array(np.where(df["shop"] == "s2", None, df["shop"]), dtype="string")
    out = hpd.agg(df, MEAN, by="shop", keys=hpd.select_keys(delta=1e-7, c=1.0, share=0.5),
                  unsafe_seed=2)
    assert list(out["shop"]) == ["s1"]


def test_empty_table_releases_no_group() -> None:
    df = _frame().iloc[:0]
    out = hpd.agg(df, MEAN, by="shop", keys=hpd.select_keys(delta=1e-7, c=1.0, share=0.5))
    assert len(out) == 0
    assert "spend_mean_weight" in out.columns
