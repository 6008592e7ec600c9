"""Edge cases of the heterogeneous mean through the public API, on pandas and on Spark.

ε_i = +inf public rows, tiny ε, all ε equal, one row, all rows public, all ε = 0, ε spread
over many orders of magnitude, an empty group in a public key set, an empty table.

The group cases run as groups of ONE grouped release with one aggregator per method (one
engine pass): groups are finalized independently, so each group is its own edge case.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from mean_backend_helpers import run_agg

from hdp_spark import hdp_mean
from hdp_spark.core.reweighting import widened

INF = math.inf
SLACK = 1 + 2.0**-20  # the mechanism's scale inflation (grid rounding)
STEP = 1 + 2.0**-18  # and at most one grid step more (the integer scale T·g)
METHODS = ("adpm", "hpm-a", "hpm-cp", "hpm-ce", "hpm-wp", "hpm-we", "uniform", "proportional",
           "drop")
NAMES = tuple(m.replace("-", "_") for m in METHODS)
KEYS = ["empty", "public", "mixed", "spread", "equal", "one", "zero"]


def _rows() -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    rows += [("public", v, 0.0, INF, 0.0) for v in (1.0, 2.0, 2.5, 6.5)]  # dyadic: exact
    rows += [("mixed", v, 0.0, INF, 0.0) for v in (1.0, 2.0, 2.5, 6.5)]
    rows += [("mixed", 8.0, 0.0, 0.5, 0.0)]
    rows += [("spread", float(i % 11) * 0.9, 0.0, 10.0 ** (i % 31 - 15), 0.0) for i in range(200)]
    rows += [("spread", 5.0, 0.0, 1e-300, 0.0), ("spread", 5.0, 0.0, 1e300, 0.0)]
    rows += [("equal", float(i % 4), 0.0, 0.25, 0.0) for i in range(64)]
    rows += [("one", 7.0, 0.0, 2.0, 0.0)]
    rows += [("zero", float(i), 0.0, 0.0, 0.0) for i in range(5)]
    rows += [("not-a-key", 9.0, 0.0, 1.0, 0.0)]
    return rows


def _release(engine: Any) -> Any:
    specs = [hdp_mean("x", eps="eps", lower=0, upper=8, method=m, alias=a)
             for m, a in zip(METHODS, NAMES, strict=True)]
    out = run_agg(engine, _rows(), *specs, by="g", keys=KEYS, unsafe_seed=3)
    assert out["g"].tolist() == KEYS  # the caller's key order; "not-a-key" left out
    return out.set_index("g")


def _levels(row: Any, name: str) -> list[dict[str, Any]]:
    return [dict(lv) for lv in row[f"{name}_eps_levels"]]


def test_edge_cases_of_one_grouped_release(engine: Any) -> None:
    out = _release(engine)
    for name in NAMES:
        # an empty group of the public key set: the data-independent midpoint, full range
        empty = out.loc["empty"]
        assert (empty[name], empty[f"{name}_n"], empty[f"{name}_fallback"]) == (4.0, 0, True)
        assert (empty[f"{name}_ci_low"], empty[f"{name}_ci_high"]) == (0.0, 8.0)
        assert empty[f"{name}_noise_scale"] == 0.0
        assert _levels(empty, name) == []

        # every row public: the exact sample mean, no noise
        public = out.loc["public"]
        assert public[name] == 3.0
        assert public[f"{name}_noise_scale"] == 0.0
        # the interval is the exact mean widened by the rounding margin only (no noise, no
        # reweighting: bias_bound 0)
        assert public[f"{name}_bias_bound"] == 0.0
        assert public[f"{name}_ci_low"] == 3.0 - widened(0.0, 0.0, 8.0)
        assert public[f"{name}_ci_high"] == 3.0 + widened(0.0, 0.0, 8.0)
        assert not public[f"{name}_fallback"]
        assert _levels(public, name)[0]["eps_effective"] == INF

        # public rows and one private row: its privacy is honoured
        private, pub = _levels(out.loc["mixed"], name)
        assert private["eps"] == 0.5
        assert private["eps_effective"] <= 0.5
        assert pub["eps_effective"] <= INF

        # ε from 1e-15 to 1e15, plus 1e-300 (below the public floor: 0) and 1e300 (capped)
        spread = out.loc["spread"]
        levels = _levels(spread, name)
        assert len(levels) == 33
        assert all(lv["eps_effective"] <= lv["eps"] for lv in levels)
        total = sum(lv["weight"] * lv["n"] for lv in levels)
        if name == "uniform":  # the ε = 0 row leaves no uniform mechanism: the midpoint
            assert (total, spread[name], spread[f"{name}_fallback"]) == (0.0, 4.0, True)
        else:
            assert total == pytest.approx(1.0, abs=1e-12)
        assert (levels[0]["eps"], levels[0]["n"], levels[0]["weight"]) == (0.0, 1, 0.0)
        assert levels[1]["eps"] == 1e-15
        assert levels[-1]["eps"] == 1e100
        assert 0.0 <= spread[name] <= 8.0 or name == "adpm"  # adpm is not clipped
        assert math.isfinite(spread[name])

        # every ε equal: the standard Laplace mean, w = 1/n, scale Δ/(nε)
        equal = out.loc["equal"]
        want = 8 / (64 * 0.25) * SLACK
        assert want * (1 - 1e-15) <= equal[f"{name}_noise_scale"] <= want * STEP
        (level,) = _levels(equal, name)
        assert (level["weight"], level["eps_effective"]) == (1 / 64, 0.25)

        # every ε = 0: the midpoint
        zero = out.loc["zero"]
        assert (zero[name], zero[f"{name}_fallback"], zero[f"{name}_noise_scale"]) == (
            4.0, True, 0.0)
        assert _levels(zero, name) == [{"eps": 0.0, "n": 5, "weight": 0.0, "eps_effective": 0.0}]

    # the mixed group: ADPM caps the public rows at τ for free; Prop uses them alone
    mixed = out.loc["mixed"]
    assert _levels(mixed, "adpm")[1]["eps_effective"] == pytest.approx(mixed["adpm_tau"])
    assert mixed["proportional_noise_scale"] == 0.0
    assert mixed["proportional"] == 3.0
    # one row: ADPM falls back (J* = 1/4 + 2/ε² > 1/4); A adds Laplace(Δ/ε)
    one = out.loc["one"]
    assert (one["adpm"], one["adpm_fallback"]) == (4.0, True)
    assert 8 / 2.0 * SLACK * (1 - 1e-15) <= one["hpm_a_noise_scale"] <= 8 / 2.0 * SLACK * STEP
    assert one["hpm_a_n"] == 1


def test_empty_table(engine: Any) -> None:
    out = run_agg(engine, [], hdp_mean("x", eps="eps", lower=0, upper=1), unsafe_seed=8)
    assert len(out) == 1
    assert out["x_mean"].iloc[0] == 0.5
    assert out["x_mean_n"].iloc[0] == 0
    assert out["x_mean_fallback"].iloc[0]
    assert list(out["x_mean_eps_levels"].iloc[0]) == []
