"""End-to-end oracles on the pandas engine (spec seed-002 §5: 4, 5, 10, 15, 16, 18) and the
error rules (public inputs only, counts never values)."""

from __future__ import annotations

import importlib
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from um_data import LaplaceSpy, Recorder, example1

import hdp_spark.pandas as hpd
from hdp_spark.core import user_mean as core
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.noise import ReleaseKey, laplace_noise
from hdp_spark.core.noise.exact import GRID_SLACK, grid_for
from hdp_spark.core.user_mean import hdp_user_mean
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError

# `hdp_spark.pandas._user_mean` is also the exported function, so import the module by name.
pum = importlib.import_module("hdp_spark.pandas._user_mean")

SPEC = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1)


def _public_order(df: pd.DataFrame, salt: str = core.DEFAULT_SALT) -> list[int]:
    """Users sorted by (k desc, order key), computed independently of the library."""
    k = df.groupby("user").size()
    return sorted(k.index, key=lambda u: (-int(k[u]), core.order_key(str(u), salt)))


def test_output_columns_and_determinism() -> None:
    df = example1(300, seed=1)
    out = hpd.user_mean(df, SPEC, unsafe_seed=5)
    assert list(out.columns) == [SPEC.name + s for s, _ in core.USER_MEAN_FIELDS]
    row = out.iloc[0]
    assert row["x_user_mean_users"] == 300
    assert row["x_user_mean_rows"] == len(df)
    assert row["x_user_mean_ci_low"] <= row["x_user_mean"] <= row["x_user_mean_ci_high"]
    assert row["x_user_mean_users_var"] + row["x_user_mean_users_initial"] + row[
        "x_user_mean_users_final"] == 300
    assert not row["x_user_mean_fallback"]
    again = hpd.user_mean(df, SPEC, unsafe_seed=5)
    pd.testing.assert_frame_equal(out, again)
    other = hpd.user_mean(df, SPEC, unsafe_seed=6)
    assert other.iloc[0]["x_user_mean"] != row["x_user_mean"]


def test_equal_k_reduces_to_the_clipped_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    """Oracle 10: k_i ≡ 10: ŵ = 1/|G_fin|, Λ = W/|G_fin|, and the final statistic is the
    clipped mean of G_fin (exact rationals, membership recomputed independently)."""
    n, k, eps, beta = 300, 10, 0.8, SPEC.beta
    df = example1(n, seed=2, k=np.full(n, k), eps=eps)
    spy = LaplaceSpy().install(monkeypatch)
    row = hpd.user_mean(df, SPEC, unsafe_seed=3).iloc[0]
    order = _public_order(df)
    big_l, hi = math.ceil(math.log(n)), (9 * n) // 10
    g_mean, g_fin = order[hi:], order[big_l:hi]
    ones = df.groupby("user")["x"].sum().astype(int)
    m = len(g_mean)
    (init_stat, init_scale, init_dmin), (fin_stat, fin_scale, fin_dmin) = spy.calls
    assert init_stat == Fraction(sum(int(ones[u]) for u in g_mean), m * k)
    assert (init_scale, init_dmin) == (Fraction(1, m) / Fraction(eps), Fraction(1, m))
    p_init = float(row["x_user_mean_initial"])
    s2 = float(row["x_user_mean_user_var"])
    draw = laplace_noise(init_scale, init_dmin)
    assert init_scale * (1 + GRID_SLACK) <= draw.scale < (init_scale * (1 + GRID_SLACK)
                                                          + grid_for(init_dmin))
    alpha = math.sqrt(math.log(4 / beta) / (2 * m)) + draw.half_width(beta / 2)
    f = core.concentration(k, n, s2, beta, 1.0)
    a_int = math.ceil(Fraction(max(p_init - alpha - f, 0.0)) * k * FIXED_ONE)
    b_int = math.floor(Fraction(min(p_init + alpha + f, 1.0)) * k * FIXED_ONE)
    clipped = sum(min(max(int(ones[u]) * FIXED_ONE, a_int), b_int) for u in g_fin)
    assert fin_stat == Fraction(clipped, len(g_fin) * k * FIXED_ONE)
    width = Fraction(b_int - a_int, k * FIXED_ONE)
    assert fin_scale == width / len(g_fin) / Fraction(eps)
    finals = [c for c in row["x_user_mean_classes"] if c["step"] == "final"]
    assert len(finals) == 1
    assert finals[0]["weight"] == 1 / len(g_fin)
    assert row["x_user_mean_noise_scale"] == float(laplace_noise(fin_scale, fin_dmin).scale)


def test_sensitivity_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Oracle 15/16: changing one G_fin user's rows leaves the first-stage outputs, T̂ and Λ
    unchanged and moves the statistic by exactly u_j W_j / Z <= ε_j · b (clip bounds)."""
    n = 400
    base = example1(n, seed=4, eps=np.where(np.arange(n) % 3 == 0, 0.5, 2.0))
    order = _public_order(base)
    big_l, hi = math.ceil(math.log(n)), (9 * n) // 10
    tight = 0
    for target in (order[big_l], order[(big_l + hi) // 2], order[hi - 1]):
        lo_df, hi_df = base.copy(), base.copy()
        mask = base["user"] == target
        lo_df.loc[mask, "x"] = -5.0  # clamped to lower: the user's mean is 0
        hi_df.loc[mask, "x"] = 7.0  # clamped to upper: the user's mean is 1
        runs = []
        for frame in (lo_df, hi_df):
            spy = LaplaceSpy().install(monkeypatch)
            row = hpd.user_mean(frame, SPEC, unsafe_seed=11).iloc[0]
            runs.append((spy.calls, row))
            monkeypatch.undo()
        (calls_a, row_a), (calls_b, row_b) = runs
        assert calls_a[0] == calls_b[0]  # initial step untouched
        for col in ("x_user_mean_initial", "x_user_mean_user_var", "x_user_mean_t",
                    "x_user_mean_noise_scale"):
            assert row_a[col] == row_b[col]
        scale = calls_a[1][1]
        assert scale == calls_b[1][1]
        delta = calls_b[1][0] - calls_a[1][0]
        eps_i = float(base.loc[mask, "eps"].iloc[0])
        assert 0 < delta <= scale * Fraction(eps_i)
        k_i = int(mask.sum())
        cls = next(c for c in row_a["x_user_mean_classes"]
                   if c["step"] == "final" and c["k"] == k_i and c["eps"] == eps_i)
        assert float(delta / scale) == pytest.approx(cls["eps_effective"], rel=1e-12)
        tight += cls["eps_effective"] == pytest.approx(eps_i, rel=1e-9)
    assert tight >= 1


def test_membership_depends_on_public_data_only() -> None:
    """Oracle 5: new values with the same k never move a user between groups; row order
    does not matter."""
    df = example1(500, seed=6, eps=1.0)
    logs = []
    for seed, frame in ((0, df), (1, df.sample(frac=1.0, random_state=3))):
        frame = frame.copy()
        frame["x"] = np.random.default_rng(seed).random(len(frame))
        rec = Recorder(pum.PandasUsers(frame, SPEC, (), ((),)))
        core.run_user_mean(SPEC, rec, (), ((),), ReleaseKey.from_unsafe_seed(1))
        logs.append(rec.log)
    a, b = logs
    assert a["census"] == b["census"]
    assert a["cuts"] == b["cuts"]
    assert [[u.key for u in v] for _, v in a["var"]] == [[u.key for u in v] for _, v in b["var"]]
    assert [[(c.k, c.users) for c in v] for _, v in a["mean"]] == [
        [(c.k, c.users) for c in v] for _, v in b["mean"]]
    assert a["fin_counts"] == b["fin_counts"]


def test_zero_eps_users_are_never_read() -> None:
    df = example1(300, seed=7)
    df["eps"] = np.where(df["user"] % 10 == 0, 0.0, 1.0)
    out_a = hpd.user_mean(df, SPEC, unsafe_seed=2)
    df.loc[df["user"] % 10 == 0, "x"] = 1 - df.loc[df["user"] % 10 == 0, "x"]
    out_b = hpd.user_mean(df, SPEC, unsafe_seed=2)
    pd.testing.assert_frame_equal(out_a, out_b)
    assert out_a.iloc[0]["x_user_mean_users_excluded"] == 30


def test_nulls_and_out_of_range_values_are_clamped_not_rejected() -> None:
    df = example1(200, seed=8)
    df.loc[::7, "x"] = np.nan
    df.loc[1::7, "x"] = 40.0
    out = hpd.user_mean(df, SPEC, unsafe_seed=1).iloc[0]
    assert 0 <= out["x_user_mean_initial"] <= 1
    assert out["x_user_mean_rows"] == len(df)


def test_grouped_release_with_public_keys() -> None:
    a = example1(300, seed=9)
    b = example1(40, seed=10)
    b["user"] += 10_000
    a["g"], b["g"] = "a", "b"
    df = pd.concat([a, b, example1(30, seed=11).assign(user=lambda d: d.user + 20_000, g="z")])
    out = hpd.user_mean(df, SPEC, by="g", keys=["a", "b", "c"], unsafe_seed=4)
    assert list(out["g"]) == ["a", "b", "c"]
    assert list(out["x_user_mean_users"]) == [300, 40, 0]
    assert list(out["x_user_mean_fallback"]) == [False, False, True]
    c = out.iloc[2]
    assert (c["x_user_mean"], c["x_user_mean_noise_scale"]) == (0.5, 0.0)
    alone = hpd.user_mean(a, SPEC, unsafe_seed=4).iloc[0]
    assert alone["x_user_mean_users_final"] == out.iloc[0]["x_user_mean_users_final"]


def test_public_variance_skips_the_variance_step(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1, public_variance=0.01)
    row = hpd.user_mean(example1(300, seed=12), spec, unsafe_seed=1).iloc[0]
    assert row["x_user_mean_users_var"] == 0
    assert row["x_user_mean_eps_var"] == 0
    assert row["x_user_mean_user_var"] == pytest.approx(0.01)
    assert not any(c["step"] == "variance" for c in row["x_user_mean_classes"])


def test_fewer_than_twenty_users_fall_back() -> None:
    row = hpd.user_mean(example1(19, seed=1), SPEC, unsafe_seed=1).iloc[0]
    assert row["x_user_mean_fallback"]
    assert row["x_user_mean"] == 0.5
    assert (row["x_user_mean_ci_low"], row["x_user_mean_ci_high"]) == (0.0, 1.0)


def test_error_mixed_eps_counts_users_not_values() -> None:
    df = example1(100, seed=13, eps=0.123456)
    df.loc[df.index[:3], "eps"] = 0.987654  # user 0 has rows with two ε
    df.loc[df["user"] == 5, "eps"] = np.nan
    with pytest.raises(EpsilonColumnError) as info:
        hpd.user_mean(df, SPEC)
    text = str(info.value)
    assert "1 user(s) have a null, NaN or negative ε" in text
    assert "1 user(s) have rows with different ε" in text
    assert "0.98" not in text
    assert "0.12" not in text
    assert "`eps`" in text


def test_error_user_in_several_groups() -> None:
    df = example1(100, seed=14)
    df["g"] = np.where(df.index % 2 == 0, "a", "b")
    with pytest.raises(SchemaError, match=r"user\(s\) have rows in several groups"):
        hpd.user_mean(df, SPEC, by="g", keys=["a", "b"])


def test_error_schema_and_parameters() -> None:
    df = example1(50, seed=15)
    with pytest.raises(SchemaError, match="user column `uid` is not in the table"):
        hpd.user_mean(df, hdp_user_mean("x", user="uid", eps="eps", lower=0, upper=1))
    with pytest.raises(SchemaError, match="must hold integers or strings"):
        hpd.user_mean(df.assign(user=df.user * 0.5), SPEC)
    with pytest.raises(SchemaError, match=r"must not be null; 5 row\(s\)"):
        hpd.user_mean(df.assign(user=df.user.astype("Int64").mask(df.index < 5)), SPEC)
    with pytest.raises(ParameterError, match="needs `keys`"):
        hpd.user_mean(df.assign(g=1), SPEC, by="g")
    with pytest.raises(ParameterError, match="must come from hdp_user_mean"):
        hpd.user_mean(df, "x")  # type: ignore[arg-type]
