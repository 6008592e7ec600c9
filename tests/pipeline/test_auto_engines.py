"""``method="auto"`` on both engines (issue 35): the choice is invariant to the private
values (two tables that differ in every value and category but share the ε column and the
groups choose identically), ``explain`` shows the candidates and predicts the choice that
``agg`` then reports in ``_method``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core.histogram.auto import candidates
from hdp_spark.core.mean.auto import MEAN_CANDIDATES

KEYS = ["a", "b", "c", "d", "e"]
CATS = ["u", "v", "w"]


def _table(seed: int) -> pd.DataFrame:
    """Five groups with different ε mixes (so that several methods get chosen)."""
    rng = np.random.default_rng(seed)
    parts = []
    mixes = {
        "a": ([0.05, 0.5, 5.0], [0.3, 0.4, 0.3], 900),
        "b": ([0.01, 2.0], [0.9, 0.1], 300),
        "c": ([1.0], [1.0], 200),
        "d": ([0.001, 0.1, math.inf], [0.5, 0.3, 0.2], 60),
        "e": ([0.02, 0.03], [0.5, 0.5], 4),
    }
    for g, (levels, p, n) in mixes.items():
        parts.append(pd.DataFrame({"g": g, "eps": rng.choice(levels, n, p=p)}))
    out = pd.concat(parts, ignore_index=True)
    out["x"] = rng.uniform(-50, 150, len(out))
    out["c"] = rng.choice([*CATS, "zz"], len(out))
    return out


def _other_values(pdf: pd.DataFrame) -> pd.DataFrame:
    """Every value and category replaced, ε and groups kept."""
    out = pdf.copy()
    out["x"] = np.where(np.arange(len(out)) % 2 == 0, 1e6, -1e6)  # clamped to the bounds
    out["c"] = np.where(np.arange(len(out)) % 3 == 0, None, "u")
    return out


def _specs(mod: Any) -> tuple[Any, Any]:
    return (mod.hdp_mean("x", eps="eps", lower=0, upper=100, method="auto"),
            mod.hdp_histogram("c", eps="eps", categories=CATS, method="auto"))


def _pandas(frame: Any) -> pd.DataFrame:
    return frame if isinstance(frame, pd.DataFrame) else frame.toPandas()


def test_choice_is_invariant_to_the_private_values(engine: Any) -> None:
    mod = engine.module
    pdf = _table(35)
    outs = [engine.agg(t, *_specs(mod), by="g", keys=KEYS, unsafe_seed=1)
            for t in (pdf, _other_values(pdf))]
    methods = [(list(o["x_mean_method"]), list(o["c_histogram_method"])) for o in outs]
    assert methods[0] == methods[1]
    mean_methods, hist_methods = methods[0]
    assert set(mean_methods) <= set(MEAN_CANDIDATES)
    assert set(hist_methods) <= set(candidates(4))
    assert len(set(mean_methods)) >= 2  # the mixes make different choices
    # the per-level privacy of the chosen method is published identically as well
    for name in ("x_mean", "c_histogram"):
        assert [list(map(dict, lv)) if not isinstance(lv, list) else lv
                for lv in outs[0][f"{name}_eps_levels"]] == [
            list(map(dict, lv)) if not isinstance(lv, list) else lv
            for lv in outs[1][f"{name}_eps_levels"]]


def test_explain_shows_the_candidates_and_predicts_the_choice(engine: Any) -> None:
    mod = engine.module
    pdf = _table(36)
    plan = _pandas(mod.explain(engine.frame(pdf), *_specs(mod), by="g", keys=KEYS))
    out = engine.agg(pdf, *_specs(mod), by="g", keys=KEYS, unsafe_seed=2)
    for i, key in enumerate(KEYS):
        for j, (name, names) in enumerate((("x_mean", MEAN_CANDIDATES),
                                           ("c_histogram", candidates(4)))):
            p = plan.iloc[2 * i + j]
            assert p["g"] == key
            table = [dict(c.asDict() if hasattr(c, "asDict") else c)
                     for c in p["auto_candidates"]]
            assert [c["method"] for c in table] == list(names)
            best = min(c["predicted_rmse"] for c in table)
            assert p["method"] == out[f"{name}_method"].iloc[i]
            chosen = next(c for c in table if c["method"] == p["method"])
            assert chosen["predicted_rmse"] == best == p["predicted_rmse"]


def test_explain_of_a_fixed_method_has_no_candidates(engine: Any) -> None:
    mod = engine.module
    plan = _pandas(mod.explain(engine.frame(_table(37)),
                               mod.hdp_mean("x", eps="eps", lower=0, upper=100),
                               by="g", keys=KEYS))
    assert all(len(c) == 0 for c in plan["auto_candidates"])
    assert (plan["method"] == "adpm").all()
    assert (plan["predicted_rmse"] > 0).all()
