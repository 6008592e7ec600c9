"""The local-DP baseline methods of ``hdp_mean`` through the public API, on both engines.

Output semantics (docs/mean.md, "The mean: methods and output"): the weights and ``eps_effective``
of the HPM method, ``noise_scale`` the standard deviation of the whole local-DP noise
(sqrt(2 Σ_i (w_i (upper − lower)/ε_i)²)), no noise when only public rows carry weight.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from mean_backend_helpers import run_agg

from hdp_spark import hdp_mean
from hdp_spark.core.reweighting import widened

INF = math.inf
SLACK = 1 + 2.0**-20  # the exact draw's scale inflation (one of the n terms)
METHODS = ("ldp-cp", "ldp-ce", "ldp-wp", "ldp-we")
KEYS = ["equal", "public", "mixed"]


def _rows() -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = [("equal", float(i % 4), 0.0, 0.25, 0.0) for i in range(64)]
    rows += [("public", v, 0.0, INF, 0.0) for v in (1.0, 2.0, 2.5, 6.5)]
    rows += [("mixed", float(i % 9), 0.0, [0.5, 2.0, INF][i % 3], 0.0) for i in range(60)]
    return rows


def test_ldp_baseline_methods_on_both_engines(engine: Any) -> None:
    specs = [hdp_mean("x", eps="eps", lower=0, upper=8, method=m, alias=m.replace("-", "_"))
             for m in METHODS]
    out = run_agg(engine, _rows(), *specs, by="g", keys=KEYS, unsafe_seed=5).set_index("g")
    hpm = run_agg(engine, _rows(), *[
        hdp_mean("x", eps="eps", lower=0, upper=8, method=m.replace("ldp", "hpm"),
                 alias=m.replace("-", "_")) for m in METHODS],
        by="g", keys=KEYS, unsafe_seed=5).set_index("g")
    for m in METHODS:
        name = m.replace("-", "_")
        # every ε equal: w = 1/n, the sum of n Laplace(8/ε)/n: sd = 8 sqrt(2 n)/(n ε)
        eq = out.loc["equal"]
        sd = 8 * math.sqrt(2 * 64) / (64 * 0.25)
        assert eq[f"{name}_noise_scale"] == pytest.approx(sd * SLACK, rel=1e-9)
        assert eq[f"{name}_method"] == m
        assert 0.0 <= eq[name] <= 8.0
        # only public rows: the exact mean, no noise
        pub = out.loc["public"]
        assert (pub[name], pub[f"{name}_noise_scale"]) == (3.0, 0.0)
        # the exact mean widened by the rounding margin only (bias_bound 0)
        assert pub[f"{name}_bias_bound"] == 0.0
        assert pub[f"{name}_ci_low"] == 3.0 - widened(0.0, 0.0, 8.0)
        assert pub[f"{name}_ci_high"] == 3.0 + widened(0.0, 0.0, 8.0)
        # mixed: the HPM method's weights and privacy figures, more noise than HPM
        mixed, ref = out.loc["mixed"], hpm.loc["mixed"]
        levels = [dict(lv) for lv in mixed[f"{name}_eps_levels"]]
        assert levels == [dict(lv) for lv in ref[f"{name}_eps_levels"]]
        assert all(lv["eps_effective"] <= lv["eps"] for lv in levels)
        assert mixed[f"{name}_noise_scale"] > ref[f"{name}_noise_scale"]
        assert mixed[f"{name}_tau"] == ref[f"{name}_tau"] or (
            math.isnan(mixed[f"{name}_tau"]) and math.isnan(ref[f"{name}_tau"]))
