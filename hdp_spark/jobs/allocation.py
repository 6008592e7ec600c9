"""What a job's releases will cost and deliver, and how to split each user's budget among
them (issue 20): a simulation of the runner's budget rule on public facts only.

A job's releases are run in order; each caps every user's ε at what the user has left
(:mod:`hdp_spark.core.ledger`) and charges the effective ε its rows received. Every one of
these numbers is a function of the public columns: the ε columns, the group keys, the user
ids and the budgets. So the whole chain can be replayed before anything is spent, on a
*profile* of the users: one row per distinct combination of (ε values, group of each
release, remaining budget) with the number of users that share it. The replay
(:mod:`hdp_spark.jobs.simulation`) uses the same functions as a run
(:func:`~hdp_spark.core.ledger.cap_numpy`, :func:`~hdp_spark.core.levels.levels_numpy`,
:func:`~hdp_spark.explain.explain_group` and the charge rules of
:mod:`hdp_spark.jobs.charging`), so its charges are the run's charges.

Allocation. A release ``r`` may use at most the share ``α_r`` (0 < α_r <= 1) of the budget
each user had left when the job started: its cap is ``min(left now, floor(α_r · left at
start))``. ``α = (1, ..., 1)`` is the runner's sequential rule ("sequential": first come,
first served); ``α_r = 1/K`` splits every budget equally over the K releases ("equal");
"optimal" searches α for the smallest weighted predicted error
``Σ_r weight_r · Σ_{group, aggregator} variance / range²`` (the noise variance 2·b² of the
Laplace scale b that ``explain`` predicts, or the squared half-range of a fallback; range 1
for a histogram's frequencies), keeping the best of an exhaustive lattice (K <= 3), the
sequential and equal allocations and a bounded Powell search from the best of them
(scipy). Since the cap never exceeds what a user has left, no allocation can charge a user
more than their budget.

Privacy:
    Reads only public facts: ε values, group keys (and the public key sets), budgets and
    spends (public in this model), the specs and the releases' weights; never a value or
    category column, and it draws no noise. The allocation, the predicted accuracy and the
    charges are functions of these public facts, so publishing them (or letting them shape
    the releases' ε vectors) reveals nothing about the data.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.core.ledger import (
    BudgetPolicy,
    ChargeMode,
)
from hdp_spark.core.levels import EPS_FLOOR, EpsGrid
from hdp_spark.errors import ParameterError
from hdp_spark.jobs.simulation import (
    PersonCharge,
    Profile,
    ReleaseModel,
    ReleaseOutcome,
    SelectionCharge,
    Simulation,
    error_of,
    simulate,
)
from hdp_spark.jobs.spec import ALLOCATIONS, AllocationMethod

__all__ = [
    "ALLOCATIONS",
    "Allocation",
    "AllocationMethod",
    "PersonCharge",
    "Profile",
    "ReleaseModel",
    "ReleaseOutcome",
    "SelectionCharge",
    "Simulation",
    "allocate",
    "error_of",
    "lattice",
    "needs_proxy",
    "simulate",
]

Key = tuple[object, ...]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_LATTICE_MAX_RELEASES = 3
_LATTICE_POINTS = 125
"""Objective evaluations of the exhaustive lattice of "optimal" (K <= 3 releases)."""


@dataclass(frozen=True, slots=True)
class Allocation:
    """An allocation method's shares, its simulation and its weighted predicted error."""

    method: AllocationMethod
    shares: tuple[float, ...]
    simulation: Simulation
    error: float


def _evaluate(
    profile: Profile, releases: Sequence[ReleaseModel], shares: Sequence[float],
    policy: BudgetPolicy, mode: ChargeMode,
) -> tuple[float, Simulation]:
    sim = simulate(profile, releases, shares, policy, mode)
    return error_of(sim, releases), sim


def allocate(
    profile: Profile,
    releases: Sequence[ReleaseModel],
    method: AllocationMethod,
    policy: BudgetPolicy,
    mode: ChargeMode,
) -> Allocation:
    """The shares of ``method`` for the job's releases, with their simulation.

    Args:
        profile: the users' public profile.
        releases: the releases, in run order.
        method: ``"sequential"`` (every share 1: today's rule), ``"equal"`` (1/K each) or
            ``"optimal"`` (smallest weighted predicted error found; never worse than
            sequential or equal, see the module docstring).
        policy: the job's budget policy.
        mode: the job's charge mode.

    Raises:
        ParameterError: unknown ``method``.

    Privacy:
        Computed from public ε columns, group keys, budgets and weights only (see the
        module docstring); no user is ever charged more than their remaining budget.
    """
    k = len(releases)
    if method not in ALLOCATIONS:
        msg = f"`allocation` must be one of {', '.join(ALLOCATIONS)}; got {method!r}."
        raise ParameterError(msg)
    if method == "sequential" or k == 0:
        shares: tuple[float, ...] = (1.0,) * k
    elif method == "equal":
        shares = (1.0 / k,) * k
    else:
        return _optimal(profile, releases, policy, mode)
    err, sim = _evaluate(profile, releases, shares, policy, mode)
    return Allocation(method, shares, sim, err)


def lattice(k: int) -> list[tuple[float, ...]]:
    """The exhaustive lattice of "optimal" for ``k`` releases: every share in
    ``{1/G, 2/G, ..., 1}`` with ``G = floor(125 ** (1/k))`` (empty for k > 3)."""
    if k > _LATTICE_MAX_RELEASES or k == 0:
        return []
    g = math.floor(_LATTICE_POINTS ** (1.0 / k) + 1e-9)
    points = [i / g for i in range(1, g + 1)]
    return [tuple(p) for p in itertools.product(points, repeat=k)]


_PROXY_LEVELS = 256
"""Above this many distinct ε values in a column, "optimal" searches on a proxy profile
whose ε are rounded down onto a geometric grid of at most this many points."""

_PROXY_FINALISTS = 3
"""Best proxy points re-evaluated exactly (besides sequential and equal)."""


PROXY_GRID = EpsGrid(ratio=2.0 ** (1.0 / 32.0), lowest=EPS_FLOOR)
"""The geometric grid (steps of 2.2%) the "optimal" search rounds grid-less ε onto when
there are very many distinct ε values (see :func:`_optimal`)."""


def needs_proxy(profile: Profile, levels: int = _PROXY_LEVELS) -> bool:
    """Whether a simulation of ``profile`` may see more than ``levels`` ε levels in a
    group: an ε column with that many distinct positive finite values, or that many
    distinct budgets (a capped ε is a share of the budget).

    Privacy:
        A function of the public ε columns and budgets only.
    """
    if np.unique(profile.remaining).size > levels:
        return True
    return any(np.unique(e[np.isfinite(e) & (e > 0)]).size > levels
               for e in profile.eps.values())


def _optimal(
    profile: Profile, releases: Sequence[ReleaseModel], policy: BudgetPolicy,
    mode: ChargeMode,
) -> Allocation:
    """The search of "optimal" (module docstring). With very many distinct ε values
    (continuous ε, no ``eps_grid``) every evaluation solves the weights over all of them;
    the lattice and the Powell search then run on a proxy simulation whose grid-less ε
    (after the cap) are rounded down onto :data:`PROXY_GRID`, and the best few proxy
    points, sequential and equal are evaluated exactly: the result is still exact and
    never worse than sequential or equal, only the search itself is approximate."""
    k = len(releases)
    seen: dict[tuple[float, ...], tuple[float, Simulation]] = {}

    def exact(shares: Sequence[float]) -> float:
        key = tuple(min(1.0, max(float(x), 1e-6)) for x in shares)
        if key not in seen:
            seen[key] = _evaluate(profile, releases, key, policy, mode)
        return seen[key][0]

    proxy = needs_proxy(profile)
    searched: dict[tuple[float, ...], float] = {}

    def score(shares: Sequence[float]) -> float:
        key = tuple(min(1.0, max(float(x), 1e-6)) for x in shares)
        if not proxy:
            searched[key] = exact(key)
        elif key not in searched:
            sim = simulate(profile, releases, key, policy, mode, proxy_grid=PROXY_GRID)
            searched[key] = error_of(sim, releases)
        return searched[key]

    starts = [(1.0,) * k, (1.0 / k,) * k, *lattice(k)]
    for x in starts:
        score(x)
    best = min(searched, key=lambda x: (searched[x], -sum(x)))
    if math.isfinite(searched[best]):
        from scipy.optimize import minimize

        minimize(score, np.asarray(best), method="Powell",
                 bounds=[(1e-6, 1.0)] * k, options={"xtol": 1e-3, "ftol": 1e-9,
                                                    "maxfev": 60 * k})
    if proxy:
        finalists = sorted(searched, key=lambda x: (searched[x], -sum(x)))[:_PROXY_FINALISTS]
        for x in [(1.0,) * k, (1.0 / k,) * k, *finalists]:
            exact(x)
    best = min(seen, key=lambda x: (seen[x][0], -sum(x)))
    err, sim = seen[best]
    return Allocation("optimal", best, sim, err)
