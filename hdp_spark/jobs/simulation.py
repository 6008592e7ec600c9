"""The replay of a job's budget rule on the users' public profile (issue 20).

:func:`simulate` runs a job's releases in order on a :class:`Profile` (one row per distinct
combination of public attributes, with the number of users sharing it): each release caps
every user's ε at what the user may use (:func:`~hdp_spark.core.ledger.cap_numpy`), predicts
its accuracy (:func:`~hdp_spark.explain.explain_group`) and charges through the runner's own
rules (:mod:`hdp_spark.jobs.charging`), so its charges are a run's charges. The allocation
methods built on it are in :mod:`hdp_spark.jobs.allocation`.

Privacy:
    Reads only public facts (ε values, group keys, budgets, spends, specs, weights) and
    draws no noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from hdp_spark.aggregators.registry import aggregator_of
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.ledger import FULL, BudgetPolicy, ChargeMode, cap_numpy
from hdp_spark.core.levels import EPS_CAP, EpsGrid, levels_numpy
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.stats import GroupStats, LevelRow, check_levels
from hdp_spark.core.user_mean.census import CensusCell, plan_group
from hdp_spark.core.user_mean.explain import ArrayUsers, UserMeanPlan, explain_user_mean
from hdp_spark.core.user_mean.spec import OrderKey, UserMeanSpec
from hdp_spark.errors import InternalError, ParameterError
from hdp_spark.explain import Explained, explain_group
from hdp_spark.jobs.charging import clip_demand, limit_units, release_policy, row_charges

__all__ = [
    "PersonCharge",
    "Profile",
    "ReleaseModel",
    "ReleaseOutcome",
    "SelectionCharge",
    "Simulation",
    "UnitCharge",
    "error_of",
    "simulate",
]

Key = tuple[object, ...]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Profile:
    """Users grouped by their public attributes (one row per distinct combination).

    Attributes:
        counts: users per profile row.
        remaining: each row's remaining budget (ledger units) when the job starts.
        eps: demanded ε per ε column, per profile row.
        groups: per release, each row's index in the release's key set (0 for a global
            release; -1 for a key outside the public key set: not in the release).
        k: jobs with user-level means: one profile row per user (``counts`` all 1) and
            here its number of rows; None otherwise.
        ids: with ``k``, each user's id as text (the input of the public order key).
    """

    counts: IntArray
    remaining: IntArray
    eps: Mapping[str, FloatArray]
    groups: tuple[IntArray, ...]
    k: IntArray | None = None
    ids: tuple[str, ...] | None = None
    keys_cache: dict[str, dict[int, OrderKey]] = field(default_factory=dict, repr=False,
                                                       compare=False)


@dataclass(frozen=True, slots=True)
class PersonCharge:
    """A kind with one global ε per person (heavy hitters, attribute histograms).

    Attributes:
        name: the aggregator's output name.
        column: the runner's helper ε column (constant ``demand`` on every row).
        demand: the per-person ε demand the budget rule caps.
        charged: the per-person ε the release reports (what a person read is charged;
            <= ``demand``; a function of the parameters only).
        charged_at: for kinds whose reported ε also depends on the public number of rows
            read (MWEM's rounds), that ε as a function of those rows; else None.
    """

    name: str
    column: str
    demand: float
    charged: float
    charged_at: Callable[[int], float] | None = None

    def charge(self, rows: int) -> float:
        """The per-person ε charged when the release reads ``rows`` rows."""
        return self.charged if self.charged_at is None else self.charged_at(rows)


@dataclass(frozen=True, slots=True)
class SelectionCharge:
    """A release under partition selection (``select_keys``): every row read is charged
    κ_i = γ·⌊min(ε_i, c)/γ⌋ of its capped ε level, released group or not.

    Attributes:
        column: the one ε column of its aggregators.
        grid: their ``eps_grid`` (None: exact levels).
        clip: where the runner clips the ε column before the budget rule (c, or the
            grid's point at or above c).
        selection: the public parameters.
    """

    column: str
    grid: EpsGrid | None
    clip: float
    selection: SelectKeys

    def units(self, levels: FloatArray) -> FloatArray:
        """κ of each ε level (vectorized over the distinct levels; invalid levels, < 0,
        get the largest charge c, as the runner's charge table)."""
        out = np.full(levels.shape, np.nan)
        sel = self.selection
        for v in np.unique(levels[~np.isnan(levels)]):
            out[levels == v] = (sel.charge(float(v)) if v >= 0
                                else float(sel.gamma * sel.cap_units))
        return out


@dataclass(frozen=True, slots=True)
class UnitCharge:
    """A release under a privacy unit: every user is charged once, G·R·k·γ of their capped
    ε level (:func:`hdp_spark.core.privacy_unit.weights.person_charge`), whatever their
    rows.

    Attributes:
        column: the one ε column of its aggregators.
        grid: their ``eps_grid`` (None: exact levels).
        selection: the mechanism's public parameters (with the unit's bounds).
        aggregators: ``(output name, spec)`` of its ``hdp_mean`` / ``hdp_histogram`` (for
            the plan's public figures; their accuracy is not simulated).
    """

    column: str
    grid: EpsGrid | None
    selection: SelectKeys
    aggregators: tuple[tuple[str, MeanSpec | HistogramSpec], ...] = ()

    def units(self, levels: FloatArray) -> FloatArray:
        """A person's charge at each ε level (vectorized over the distinct levels)."""
        from hdp_spark.core.privacy_unit.weights import person_charge

        out = np.full(levels.shape, np.nan)
        for v in np.unique(levels[~np.isnan(levels)]):
            out[levels == v] = person_charge(self.selection, float(v))
        return out


@dataclass(frozen=True, slots=True)
class ReleaseModel:
    """What the simulation needs of one release.

    Attributes:
        id: the release id.
        weight: how much the analyst cares about its accuracy (>= 0).
        keys: its public key set (``((),)`` for a global release).
        aggregators: ``(output name, spec)`` of its ``hdp_mean`` / ``hdp_histogram``.
        columns: its ε columns, each with how many aggregators read it (the cap rule's k;
            every kind but the charge-free ones, as the runner caps them).
        users: ``(output name, spec)`` of its user-level means (charged once per user; the
            simulation charges an upper bound, see :func:`simulate`).
        persons: its one-global-ε kinds (heavy hitters, attribute histograms).
        free: output names of its charge-free kinds (LDP aggregation).
        selection: set for a release under partition selection (its charge rule; its
            accuracy is not predicted: which groups survive depends on the data).
        unit: set for a release under a privacy unit (its charge rule, once per user; its
            accuracy is not predicted: its weights are private).
    """

    id: str
    weight: float
    keys: tuple[Key, ...]
    aggregators: tuple[tuple[str, MeanSpec | HistogramSpec], ...]
    columns: tuple[tuple[str, int], ...]
    users: tuple[tuple[str, UserMeanSpec], ...] = ()
    persons: tuple[PersonCharge, ...] = ()
    free: tuple[str, ...] = ()
    selection: SelectionCharge | None = None
    unit: UnitCharge | None = None


@dataclass(frozen=True, slots=True)
class ReleaseOutcome:
    """One release of a simulated job.

    Attributes:
        release_id: the release.
        share: its α (the share of each user's starting budget it may use).
        ran: False when an earlier release was refused (policy "fail" stops the job).
        refused: policy "fail" and some user of the release lacks budget.
        users_over: users whose ε was capped or excluded (or who made it refused).
        charges: units charged to each user of each profile row.
        allowed: each profile row's ε in the release's first ε column after the cap.
        explained: ``(group key, aggregator name, figures)`` per group and aggregator.
        error: ``Σ variance / range²`` over its groups and aggregators (inf if refused).
        capped: each ε column of the release after the budget rule, per profile row.
        users_explained: ``(group key, name, plan)`` of its user-level means.
        charges_exact: False when some user-level mean's charge is an upper bound (a
            final step over several ε levels: its eps_effective is data-dependent).
    """

    release_id: str
    share: float
    ran: bool
    refused: bool
    users_over: int
    charges: IntArray
    allowed: FloatArray
    explained: tuple[tuple[Key, str, Explained], ...]
    error: float
    capped: Mapping[str, FloatArray] = field(default_factory=dict)
    users_explained: tuple[tuple[Key, str, UserMeanPlan], ...] = ()
    charges_exact: bool = True


@dataclass(frozen=True, slots=True)
class Simulation:
    """A simulated job: each release's outcome and every profile row's remaining budget."""

    releases: tuple[ReleaseOutcome, ...]
    remaining: IntArray


def _variance(spec: MeanSpec | HistogramSpec, e: Explained) -> float:
    """Predicted squared error per output unit of range: 2·b² (Laplace), or the squared
    half-range of the data-independent fallback."""
    low, high = aggregator_of(spec).output_range(spec)
    span = high - low
    if e.fallback:
        return (e.half_width / span) ** 2
    return 2.0 * (e.noise_scale / span) ** 2


def _group_stats(levels: FloatArray, counts: IntArray) -> GroupStats:
    values, inverse = np.unique(levels, return_inverse=True)
    sums = np.bincount(inverse, weights=counts, minlength=len(values))
    return GroupStats(tuple(LevelRow(float(v), int(c), ())
                            for v, c in zip(values, sums, strict=True) if c > 0))


def _release(
    profile: Profile, r: int, rel: ReleaseModel, limit: IntArray, policy: BudgetPolicy,
    mode: ChargeMode, proxy_grid: EpsGrid | None = None,
) -> tuple[ReleaseOutcome, IntArray]:
    inside = profile.groups[r] >= 0
    zero = np.zeros(len(profile.counts), dtype=np.int64)
    constant = {p.column: p.demand for p in rel.persons}
    cols = [(profile.eps[c] if c not in constant else np.full(len(zero), constant[c]), m)
            for c, m in rel.columns]
    if rel.selection is not None:  # the runner clips at c first: the demand is min(ε, c)
        cols = [(clip_demand(e, rel.selection.clip), m) for e, m in cols]
    policy = release_policy(policy, bool(rel.persons))  # as the runner
    if cols:
        capped = cap_numpy(cols, limit, policy)
        eps_list, status = list(capped.eps), capped.status
    else:  # charge-free kinds only: nothing is capped
        eps_list, status = [], np.full(len(zero), FULL, dtype=np.int8)
    eps_after = dict(zip([c for c, _ in rel.columns], eps_list, strict=True))
    over = inside & (status != FULL)
    users_over = int(profile.counts[over].sum())
    first = eps_list[0] if eps_list else np.zeros(len(zero))
    if policy == "fail" and users_over:
        return ReleaseOutcome(rel.id, 1.0, True, True, users_over, zero, first, (), math.inf,
                              eps_after), zero
    charges = zero.copy()
    read_rows = int(profile.counts[inside & (status == FULL)].sum())
    for p in rel.persons:  # read only when FULL; charged the reported per-person ε
        eff = np.where(inside & (status == FULL), p.charge(read_rows),
                       np.where(inside, 0.0, np.nan))
        charges += row_charges(eff, eps_after[p.column], mode)
    if rel.selection is not None:  # κ of the capped level on every row read
        sel = rel.selection
        after = eps_after[sel.column]
        eff = np.where(inside, sel.units(levels_numpy(after, sel.grid)), np.nan)
        charges += row_charges(eff, after, mode)
    if rel.unit is not None:  # once per user (one profile row per user), every user
        after = eps_after[rel.unit.column]
        eff = np.where(inside, rel.unit.units(levels_numpy(after, rel.unit.grid)), np.nan)
        charges += row_charges(eff, after, mode)
    users_explained: list[tuple[Key, str, UserMeanPlan]] = []
    exact = True
    um_error = 0.0
    for name, um in rel.users:
        if proxy_grid is not None and um.eps_grid is None:
            um = replace(um, eps_grid=proxy_grid)
        units, plans, is_exact = _user_mean(profile, r, rel, um, eps_after[um.eps], mode)
        charges += units
        exact &= is_exact
        for key, plan in plans:
            users_explained.append((key, name, plan))
            um_error += ((plan.half_width / um.span) ** 2 if plan.fallback
                         else 2.0 * (plan.noise_scale / um.span) ** 2)
    explained: list[tuple[Key, str, Explained]] = []
    error = 0.0
    g_idx = profile.groups[r]
    cached: dict[tuple[str, object], FloatArray] = {}  # by (ε column, grid)
    per_agg: list[tuple[str, MeanSpec | HistogramSpec, FloatArray]] = []
    for name, spec in rel.aggregators:
        grid = spec.eps_grid if spec.eps_grid is not None else proxy_grid
        pass_key: tuple[str, object] = (spec.eps, grid)
        if pass_key not in cached:
            lv = levels_numpy(eps_after[spec.eps], grid)
            bad = {float(v): int(profile.counts[inside & (lv == v)].sum())
                   for v in np.unique(lv[inside]) if v < 0}
            check_levels(spec.eps, bad)
            cached[pass_key] = lv
        per_agg.append((name, spec, cached[pass_key]))
    effective = [np.full(len(zero), np.nan) for _ in per_agg]
    for g, key in enumerate(rel.keys):
        rows = g_idx == g
        for j, (name, spec, lv) in enumerate(per_agg):
            e = explain_group(spec, _group_stats(lv[rows], profile.counts[rows]))
            explained.append((key, name, e))
            error += _variance(spec, e)
            if e.levels:
                eff_levels = np.array([x.eps for x in e.levels], dtype=np.float64)
                eff_values = np.array([x.eps_effective for x in e.levels], dtype=np.float64)
                at = np.searchsorted(eff_levels, lv[rows])
                effective[j][rows] = eff_values[np.clip(at, 0, len(eff_levels) - 1)]
    for (_name, spec, _lv), eff in zip(per_agg, effective, strict=True):
        charges += row_charges(eff, eps_after[spec.eps], mode)
    if np.any(charges > limit):
        msg = "the simulated charges exceed a user's cap"
        raise InternalError(msg)
    outcome = ReleaseOutcome(rel.id, 1.0, True, False, users_over, charges, first,
                             tuple(explained), error + um_error, eps_after,
                             tuple(users_explained), exact)
    return outcome, charges


def _user_mean(
    profile: Profile, r: int, rel: ReleaseModel, spec: UserMeanSpec, eps: FloatArray,
    mode: ChargeMode,
) -> tuple[IntArray, list[tuple[Key, UserMeanPlan]], bool]:
    """A user-level mean's charges, its plan per group and whether the charges are exact
    (profile rows are users here).

    The run charges a user of (group, ε level) the largest eps_effective of that cell's
    classes (:mod:`hdp_spark.jobs.kinds_central`), 0 to users with ε = 0 and in fallback
    groups. The explain of the release (:func:`~hdp_spark.core.user_mean.explain.
    explain_user_mean` on the public per-user table) gives the variance and initial
    classes' eps_effective exactly; a final step over one ε level gives that level
    exactly (its noise is set by the class with the largest d_j/ε_j); over several levels
    each level's eps_effective is data-dependent and bounded by the level.
    """
    lv = levels_numpy(eps, spec.eps_grid)
    g_idx = profile.groups[r]
    inside = g_idx >= 0
    bad = {float(v): int(profile.counts[inside & (lv == v)].sum())
           for v in np.unique(lv[inside]) if v < 0}
    check_levels(spec.eps, bad)
    eff = np.full(len(eps), np.nan)
    exact = True
    plans: list[tuple[Key, UserMeanPlan]] = []
    if profile.k is None or profile.ids is None:  # no per-user table: bound by ε
        for g in range(len(rel.keys)):
            rows = (g_idx == g) & (lv > 0)
            if not plan_group((CensusCell(1, 1.0, int(profile.counts[rows].sum())),),
                              spec).fallback:
                eff[rows] = lv[rows]
                exact = False
        return row_charges(eff, eps, mode), plans, exact
    level = np.where(np.isposinf(lv), EPS_CAP, lv)
    backend = ArrayUsers(profile.k, level, np.where(inside, g_idx, -1), profile.ids, spec,
                         profile.keys_cache.setdefault(spec.salt, {}))
    explained = explain_user_mean(spec, backend, rel.keys)
    for g, key in enumerate(rel.keys):
        plan = explained[key]
        plans.append((key, plan))
        if plan.fallback:
            continue
        final_levels = {c.eps for c in plan.classes if c.step == "final"}
        per_level: dict[float, float] = {}
        for c in plan.classes:
            per_level[c.eps] = max(per_level.get(c.eps, 0.0), c.eps_effective)
        exact &= len(final_levels) <= 1
        rows = (g_idx == g) & (lv > 0)
        values = np.unique(level[rows])
        table = np.array([per_level[float(v)] for v in values], dtype=np.float64)
        eff[rows] = table[np.searchsorted(values, level[rows])]
    return row_charges(eff, eps, mode), plans, exact


def simulate(
    profile: Profile,
    releases: Sequence[ReleaseModel],
    shares: Sequence[float],
    policy: BudgetPolicy,
    mode: ChargeMode,
    *,
    proxy_grid: EpsGrid | None = None,
) -> Simulation:
    """Replay the job's budget rule on ``profile`` with each release's ``share``.

    ``proxy_grid`` (the "optimal" search only) rounds the ε of aggregators without an
    ``eps_grid`` onto this grid: an approximation of the run, never its prediction.

    Raises:
        EpsilonColumnError: an ε column holds an invalid ε in some release (as a run).

    Privacy:
        A function of the profile (public columns), the specs and the shares only.
    """
    if len(shares) != len(releases):
        msg = f"`shares` must give one share per release ({len(releases)}); got {len(shares)}."
        raise ParameterError(msg)
    start = profile.remaining
    remaining = start.copy()
    outcomes: list[ReleaseOutcome] = []
    stopped = False
    for r, (rel, share) in enumerate(zip(releases, shares, strict=True)):
        if stopped:
            none = np.zeros(len(start), dtype=np.int64)
            outcomes.append(ReleaseOutcome(rel.id, float(share), False, False, 0, none,
                                           np.zeros(len(start)), (), math.inf))
            continue
        limit = limit_units(remaining, start, float(share))
        outcome, charges = _release(profile, r, rel, limit, policy, mode, proxy_grid)
        outcomes.append(_with_share(outcome, float(share)))
        remaining = remaining - charges
        stopped = outcome.refused
    return Simulation(tuple(outcomes), remaining)


def _with_share(o: ReleaseOutcome, share: float) -> ReleaseOutcome:
    return ReleaseOutcome(o.release_id, share, o.ran, o.refused, o.users_over, o.charges,
                          o.allowed, o.explained, o.error, o.capped, o.users_explained,
                          o.charges_exact)


def error_of(simulation: Simulation, releases: Sequence[ReleaseModel]) -> float:
    """The weighted predicted error ``Σ_r weight_r · error_r`` (inf if a release is refused)."""
    total = 0.0
    for rel, o in zip(releases, simulation.releases, strict=True):
        if not o.ran or o.refused:
            return math.inf
        total += rel.weight * o.error
    return total
