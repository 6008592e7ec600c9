"""The Spark twins of the ledger rules agree with the numpy reference on edge cases."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.ledger import UNIT, floor_units
from hdp_spark.jobs.engines import AggCharge
from hdp_spark.jobs.spec import BudgetSpec


def edge_table() -> tuple[pd.DataFrame, pd.DataFrame]:
    eps_a = [0.1, 2.0, math.inf, 1.0, 0.0, 0.7, 3.0, 1e300, 0.5, 0.25]
    eps_b = [0.1, 0.2, 0.3, 5.0, 0.0, 0.3, math.inf, 0.1, 0.5, 0.25]
    budget = [1.0, 1.0, 2.5, None, 0.0, 1.0, 4.0, 3.0, 0.75, 2.0]
    frame = pd.DataFrame(
        {
            "uid": list(range(10)),
            "g": ["x", "y"] * 5,
            "a": eps_a,
            "b": eps_b,
            "budget": budget,
        }
    )
    spent = pd.DataFrame({"user_id": ["1", "2", "3", "9"],
                          "units": [floor_units(0.5), floor_units(1.0), 7, floor_units(3.0)]})
    return frame, spent


@pytest.mark.spark
@pytest.mark.parametrize("policy", ["cap"])
def test_cap_and_charges_agree(spark: Any, policy: str) -> None:
    from hdp_spark.jobs._pandas import PandasAdapter
    from hdp_spark.spark.job_adapter import SparkAdapter

    frame, spent = edge_table()
    budget = BudgetSpec(default=1.5, column="budget", policy=policy)  # type: ignore[arg-type]
    columns = [("a", 1), ("b", 2)]
    pa_, sa = PandasAdapter(), SparkAdapter(spark)
    p = pa_.cap(pa_.prepare(frame, "uid", budget, spent), columns, budget.policy)
    sdf = spark.createDataFrame(frame.astype({"budget": float}))
    s = sa.cap(sa.prepare(sdf, "uid", budget, sa.io.from_pairs(*pa_.io.to_pairs(spent))),
               columns, budget.policy).toPandas().sort_values("uid").reset_index(drop=True)
    for col in ("a", "b", "__remaining", "__status"):
        np.testing.assert_array_equal(p[col].to_numpy(np.float64), s[col].to_numpy(np.float64))
    # effective ε: half the capped ε per (group, level) cell, as a release could deliver
    aggs = []
    for col in ("a", "b", "b"):
        cells = {((g,), float(lv)): float(lv) / 2
                 for g, lv in zip(p["g"], p[col], strict=True) if g == "x"}
        aggs.append(AggCharge(col, None, cells))
    p_charges, p_sum = pa_.charges(p, ("g",), aggs)
    s_in = spark.createDataFrame(s)
    s_charges, s_sum = sa.charges(s_in, ("g",), aggs)
    assert p_sum == s_sum
    got = dict(zip(*sa.io.to_pairs(s_charges), strict=True))
    assert got == dict(zip(*pa_.io.to_pairs(p_charges), strict=True))
    assert p_sum.overspent == 0
    assert all(units * UNIT <= 4.0 for units in got.values())


@pytest.mark.spark
def test_grid_charges_agree(spark: Any) -> None:
    """With an EpsGrid the Spark charge pass (two-projection level) equals the numpy one."""
    from hdp_spark.core.levels import EpsGrid, levels_numpy
    from hdp_spark.jobs._pandas import PandasAdapter
    from hdp_spark.spark.job_adapter import SparkAdapter

    frame, spent = edge_table()
    budget = BudgetSpec(default=5.0, column="budget", policy="cap")
    pa_, sa = PandasAdapter(), SparkAdapter(spark)
    p = pa_.cap(pa_.prepare(frame, "uid", budget, spent), [("a", 1)], budget.policy)
    sdf = spark.createDataFrame(frame.astype({"budget": float}))
    s = sa.cap(sa.prepare(sdf, "uid", budget, sa.io.from_pairs(*pa_.io.to_pairs(spent))),
               [("a", 1)], budget.policy)
    grid = EpsGrid(ratio=2.0, lowest=0.05, highest=100.0)
    levels = levels_numpy(p["a"].to_numpy(np.float64), grid)
    cells = {((g,), float(lv)): float(lv) / 2
             for g, lv in zip(p["g"], levels, strict=True) if lv > 0}
    aggs = [AggCharge("a", grid, cells)]
    p_charges, p_sum = pa_.charges(p, ("g",), aggs)
    s_charges, s_sum = sa.charges(s, ("g",), aggs)
    assert p_sum == s_sum
    assert dict(zip(*sa.io.to_pairs(s_charges), strict=True)) == dict(
        zip(*pa_.io.to_pairs(p_charges), strict=True))
    assert sum(pa_.io.to_pairs(p_charges)[1]) > 0
