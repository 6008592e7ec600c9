"""``agg`` releases any mix of aggregators in one call (issue 16).

Equal by construction: one ``unsafe_seed`` gives one release key, and every kernel binds
its noise to its own kind, name and group (a mean also to its slot among the means on its
ε column and grid), never to the other aggregators of the call. So a mixed call gives
each aggregator exactly the numbers of its separate release with the same seed, as long
as its name and (for means) slot are the same.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from golden_cases import ldp_frame_of, table

from hdp_spark import EpsGrid
from hdp_spark.errors import ParameterError

KEYS = ["a", "b", "z"]


def _specs(mod: Any) -> tuple[Any, Any, Any]:
    return (
        mod.hdp_mean("x", eps="eps", lower=0, upper=100),
        mod.hdp_histogram("c", eps="eps", categories=["u", "v", "w"]),
        mod.hdp_user_mean("x", user="uid", eps="ueps", lower=0, upper=100),
    )


def _pandas(frame: Any) -> pd.DataFrame:
    return frame if isinstance(frame, pd.DataFrame) else frame.toPandas()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, np.ndarray | list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "asDict"):
        return _same(a.asDict(recursive=True), b.asDict(recursive=True) if hasattr(b, "asDict")
                     else b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def test_mixed_agg_equals_separate_releases(engine: Any) -> None:
    mod = engine.module
    mean, hist, umean = _specs(mod)
    df = engine.frame(table())
    wide = _pandas(mod.agg(df, mean, hist, umean, unsafe_seed=7))
    assert len(wide) == 1
    alone_mean = _pandas(mod.agg(df, mean, unsafe_seed=7))
    for col in alone_mean.columns:
        assert _same(wide[col].iloc[0], alone_mean[col].iloc[0]), col
    alone_user = _pandas(mod.user_mean(df, umean, unsafe_seed=7))
    for col in alone_user.columns:
        assert _same(wide[col].iloc[0], alone_user[col].iloc[0]), col
    long = _pandas(mod.histogram(df, hist, unsafe_seed=7, counts=True))
    bins = list(wide["c_histogram"].iloc[0])
    assert [b["category"] for b in bins] == list(long["category"])
    for name in ("frequency", "ci_low", "ci_high", "count", "count_ci_low", "count_ci_high"):
        assert [b[name] for b in bins] == list(long[name]), name
    for name in ("noise_scale", "bias_bound", "n", "method", "tau", "fallback"):
        assert _same(wide[f"c_histogram_{name}"].iloc[0], long[name].iloc[0]), name
    # another seed changes the numbers: the comparison above can fail
    other = _pandas(mod.agg(df, mean, hist, umean, unsafe_seed=8))
    assert other["x_mean"].iloc[0] != wide["x_mean"].iloc[0]


def test_grouped_mixed_agg_shares_one_key_set(engine: Any) -> None:
    mod = engine.module
    mean, hist, _ = _specs(mod)
    grid_mean = mod.hdp_mean("y", eps="ceps", lower=0, upper=10, alias="yg",
                             eps_grid=EpsGrid(ratio=1.5, lowest=0.01, highest=10))
    df = engine.frame(table())
    wide = _pandas(mod.agg(df, mean, grid_mean, hist, by="g", keys=KEYS, unsafe_seed=9))
    assert list(wide["g"]) == KEYS
    means = _pandas(mod.agg(df, mean, grid_mean, by="g", keys=KEYS, unsafe_seed=9))
    for col in means.columns:
        assert all(_same(a, b) for a, b in zip(wide[col], means[col], strict=True)), col
    long = _pandas(mod.histogram(df, hist, by="g", keys=KEYS, unsafe_seed=9))
    for i, key in enumerate(KEYS):
        want = list(long.loc[long["g"] == key, "frequency"])
        assert [b["frequency"] for b in wide["c_histogram"].iloc[i]] == want
    assert wide["c_histogram_n"].iloc[2] == 0  # a public key with no rows gets a row


def test_heavy_hitters_and_ldp_in_agg(engine: Any) -> None:
    mod = engine.module
    cols = ["h0", "h1", "h2"]
    domains = {c: [0, 1, 2, 3] for c in cols}
    hh = mod.hdp_heavy_hitters(cols, domains=domains, eps0=2.0, alias="top")
    ldp = mod.ldp_mean("xr", eps="eps_ldp", mechanism="laplace")
    df = ldp_frame_of(mod)(engine.frame(table()))
    wide = _pandas(mod.agg(df, hh, ldp, unsafe_seed=10))
    alone = mod.heavy_hitters(df, hh, unsafe_seed=10).table
    rows = [tuple(r) for r in _pandas(alone).astype(object).itertuples(index=False)]
    got = [tuple(d.asDict().values()) if hasattr(d, "asDict") else tuple(d.values())
           for d in wide["top"].iloc[0]]
    assert got == rows
    assert len(rows) >= 1
    plain = _pandas(mod.ldp_agg(df, ldp))
    assert wide["xr_mean"].iloc[0] == plain["xr_mean"].iloc[0]


def test_error_paths(engine: Any) -> None:
    mod = engine.module
    mean = _specs(mod)[0]
    df = engine.frame(table())
    with pytest.raises(ParameterError, match="aggregators must come from hdp_mean, "):
        mod.agg(df, mean, "x_mean")
    with pytest.raises(ParameterError, match="at least one aggregator"):
        mod.agg(df)
    clash = mod.hdp_histogram("c", eps="eps", categories=["u"], alias="x_mean")
    with pytest.raises(ParameterError, match="share the output name 'x_mean'"):
        mod.agg(df, mean, clash, unsafe_seed=1)
    cols = ["h0", "h1"]
    hh = mod.hdp_heavy_hitters(cols, domains={c: [0, 1] for c in cols}, eps0=1.0)
    with pytest.raises(ParameterError, match=r"marginals \(and MWEM\) are released for the"):
        mod.agg(df, mean, hh, by="g", keys=KEYS)
    hh2 = mod.hdp_heavy_hitters(cols, domains={c: [0, 1] for c in cols}, eps0=1.0, alias="b")
    with pytest.raises(ParameterError, match="at most one heavy-hitters or marginals aggregator"):
        mod.agg(df, hh, hh2)
    ldp = mod.ldp_mean("x", eps="eps", mechanism="laplace", alias="raw")
    with pytest.raises(ParameterError, match="carries no local randomizer's marker"):
        mod.agg(df, mean, ldp)  # raw values, no marker: refused before anything is read
