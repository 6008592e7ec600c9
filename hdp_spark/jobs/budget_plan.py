"""What ``hdp-release plan`` computes: the records of a job's budget plan.

Made by :func:`hdp_spark.jobs.planning.plan_budget`, rendered by
:mod:`hdp_spark.jobs.plan_render`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hdp_spark.jobs.allocation import Allocation, AllocationMethod, Profile, ReleaseModel
from hdp_spark.jobs.spec import JobSpec

__all__ = ["JobBudgetPlan", "Prediction"]

Key = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Prediction:
    """The predicted accuracy of one (group, aggregator) of a kind other than
    ``mean``/``histogram``.

    Attributes:
        key: the group key (``()`` for a global release).
        name: the aggregator's output name.
        kind: its kind.
        n: users (user-level mean), reports (LDP) or persons read (partial DP).
        half_width: the (1 - β) interval half-width (value units; counts for partial DP);
            NaN without a prediction.
        noise_scale: the noise scale (0 for the LDP aggregation, whose reports carry it).
        fallback: the release will be the data-independent fallback.
        basis: ``"exact"`` (what the release reports), ``"bound"`` (an upper bound: the
            user-level mean's final step, the LDP radius) or ``"none"``.
        span: the output range (for the plot), NaN for counts.
        note: a short public remark (heavy hitters' detection guarantee).
    """

    key: Key
    name: str
    kind: str
    n: int
    half_width: float
    noise_scale: float
    fallback: bool
    basis: str
    span: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class JobBudgetPlan:
    """Result of :func:`plan_budget`.

    Attributes:
        job: the job.
        users: users in the input.
        releases: the releases as simulated.
        allocations: the result of every allocation method, by name.
        chosen: the job's ``[budget] allocation``.
        profile: the users' public profile.
        user_ids: the user ids (as strings), for :func:`write_user_table`.
        user_rows: each user's profile row.
        predictions: per release, the predicted accuracy of its kinds other than
            ``mean``/``histogram`` with the job's allocation (:class:`Prediction`).
        committed: the job's releases committed already (in job order): a run re-publishes
            them and charges nothing; ``job`` and ``releases`` hold only the others.

    Privacy:
        Everything here is a function of public facts (ε values, group keys, budgets,
        spends, specs, weights). ``user_ids`` / ``user_rows`` tie users to their budgets:
        for the operator (like the ledger), not for publication.
    """

    job: JobSpec
    users: int
    releases: tuple[ReleaseModel, ...]
    allocations: Mapping[AllocationMethod, Allocation]
    chosen: AllocationMethod
    profile: Profile
    user_ids: np.ndarray[Any, Any]
    user_rows: np.ndarray[Any, Any]
    predictions: tuple[tuple[Prediction, ...], ...] = ()
    committed: tuple[str, ...] = ()

    @property
    def selected(self) -> Allocation:
        """The allocation the job uses."""
        return self.allocations[self.chosen]
