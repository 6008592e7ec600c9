"""The job's charge rules on numpy arrays: one implementation for the runner and the plan.

The pandas adapter (:mod:`hdp_spark.jobs._pandas`) applies these to the rows of a
release, the allocation's simulation (:mod:`hdp_spark.jobs.simulation`) to the users'
public profile: both call the same functions, so a plan's charges are a run's charges. The
per-unit arithmetic (capping, ε units, the charge of one row) is
:mod:`hdp_spark.core.ledger`'s; the Spark adapter holds their column-expression twins
(:mod:`hdp_spark.spark.job_adapter`), compared with these by the engine-parity tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from hdp_spark.core.ledger import BudgetPolicy, ChargeMode, charge_units_numpy

__all__ = ["charged_once", "clip_demand", "limit_units", "release_policy", "row_charges"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def limit_units(remaining: IntArray, start: IntArray, share: float) -> IntArray:
    """The cap of a release under a budget allocation, in units:
    ``min(left now, floor(share · left at start))`` (IEEE double product, as on Spark).

    Privacy:
        Never above what a user has left, so no allocation overspends a budget.
    """
    if share >= 1.0:  # the sequential rule: floor(start · share) >= start >= remaining
        return remaining
    part = np.floor(start.astype(np.float64) * float(share)).astype(np.int64)
    out: IntArray = np.minimum(remaining, part)
    return out


def release_policy(policy: BudgetPolicy, one_global_eps: bool) -> BudgetPolicy:
    """The budget rule a release applies: "cap" acts as "exclude" for kinds with one
    global ε per person (a global ε cannot be lowered for one person).

    Privacy:
        A person without budget for the demand is left out (ε 0, charged 0), never read
        at a lower ε than the release's noise assumes.
    """
    return "exclude" if one_global_eps and policy == "cap" else policy


def clip_demand(eps: FloatArray, upper: float) -> FloatArray:
    """ε lowered to ``upper`` where above it (NaN untouched: the release rejects it): the
    demand min(ε, c) of a partition-selection release.

    Privacy:
        Lowers demands only; κ_i of every row is unchanged (see
        :func:`hdp_spark.jobs.selection.clip_point`).
    """
    with np.errstate(invalid="ignore"):
        out: FloatArray = np.where(eps > upper, float(upper), eps)
    return out


def row_charges(effective: FloatArray, eps: FloatArray, mode: ChargeMode) -> IntArray:
    """Units charged to each row: its cell's effective ε (NaN: the row is not in the
    release, charged 0), never above its capped ε's demand
    (:func:`~hdp_spark.core.ledger.charge_units_numpy`).

    Privacy:
        ``effective`` must bound each row's privacy loss (the kind's contract).
    """
    out: IntArray = charge_units_numpy(effective, eps, mode)
    return out


def charged_once(units: IntArray, users: npt.NDArray[Any]) -> IntArray:
    """A user-level aggregator's charges: each user's largest row charge, put ONCE on the
    user's first row (0 on the others), so that summing per user counts it once.

    Privacy:
        The protected unit is the user with all their rows; ε is constant within a user,
        so the largest row charge is the user's loss.
    """
    import pandas as pd

    first = ~pd.Series(users).duplicated().to_numpy()
    most = pd.Series(units).groupby(users, sort=False).transform("max").to_numpy()
    out: IntArray = np.where(first, most, 0).astype(np.int64)
    return out
