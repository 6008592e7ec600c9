"""User-level mean: orchestration of one release (census -> cuts -> steps) and its result.

Privacy-critical: part of the user-level mean (Algorithm 2 of Cummings, Feldman, McMillan &
Talwar, NeurIPS 2022, §4.2); the privacy argument of the whole pipeline is in the package
docstring of :mod:`hdp_spark.core.user_mean`.
Here: the order of the steps and which released outputs each reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.keys import context_key
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.reweighting import FALLBACK_BOUND, widened
from hdp_spark.core.user_mean.bias import final_bias_bound
from hdp_spark.core.user_mean.census import Cut, GroupPlan, plan_group
from hdp_spark.core.user_mean.solver import FinalDesign, design_final
from hdp_spark.core.user_mean.spec import UserMeanSpec
from hdp_spark.core.user_mean.steps import (
    ClassPrivacy,
    InitialMean,
    UserBackend,
    VarianceEstimate,
    final_step,
    initial_step,
    variance_step,
)
from hdp_spark.errors import InternalError, ParameterError

# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


USER_MEAN_FIELDS: tuple[tuple[str, str], ...] = (
    ("", "float"),
    ("_noise_scale", "float"),
    ("_ci_low", "float"),
    ("_ci_high", "float"),
    ("_noise_ci_low", "float"),
    ("_noise_ci_high", "float"),
    ("_bias_bound", "float"),
    ("_users", "int"),
    ("_rows", "int"),
    ("_users_var", "int"),
    ("_users_initial", "int"),
    ("_users_final", "int"),
    ("_users_excluded", "int"),
    ("_initial", "float"),
    ("_user_var", "float"),
    ("_t", "float"),
    ("_cap", "str"),
    ("_eps_var", "float"),
    ("_eps_initial", "float"),
    ("_eps_final", "float"),
    ("_fallback", "bool"),
    ("_classes", "classes"),
)
"""Output columns of a user-level mean, as (suffix after the alias, kind)."""


@dataclass(frozen=True, slots=True)
class UserMeanResult:
    """Released user-level mean of one group (fields documented in docs/user_mean.md)."""

    estimate: float
    noise_scale: float
    ci_low: float
    ci_high: float
    noise_ci_low: float
    noise_ci_high: float
    bias_bound: float
    users: int
    rows: int
    users_var: int
    users_initial: int
    users_final: int
    users_excluded: int
    initial: float
    user_var: float
    t: float
    cap: str
    eps_var: float
    eps_initial: float
    eps_final: float
    fallback: bool
    classes: tuple[ClassPrivacy, ...]

    def as_row(self, prefix: str) -> dict[str, Any]:
        """The output columns of this result."""
        values = (
            self.estimate, self.noise_scale, self.ci_low, self.ci_high, self.noise_ci_low,
            self.noise_ci_high, self.bias_bound, self.users, self.rows,
            self.users_var, self.users_initial, self.users_final, self.users_excluded,
            self.initial, self.user_var, self.t, self.cap, self.eps_var, self.eps_initial,
            self.eps_final, self.fallback,
            [{"step": c.step, "k": c.k, "eps": c.eps, "users": c.users, "weight": c.weight,
              "eps_effective": c.eps_effective} for c in self.classes],
        )
        return {prefix + suffix: v for (suffix, _), v in zip(USER_MEAN_FIELDS, values,
                                                             strict=True)}


@dataclass(frozen=True, slots=True)
class UserMeanRelease:
    """Everything one user-level release computed.

    Attributes:
        by: group-by columns.
        keys: group keys in output order (``((),)`` for a global release).
        spec: the aggregator.
        results: released value per group key.
        unsafe_seed: True if the noise came from a caller's seed (not private).
    """

    by: tuple[str, ...]
    keys: tuple[tuple[object, ...], ...]
    spec: UserMeanSpec
    results: Mapping[tuple[object, ...], UserMeanResult] = field(repr=False)
    unsafe_seed: bool = False

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per group: group columns, then the output fields."""
        out = []
        for key in self.keys:
            row: dict[str, Any] = dict(zip(self.by, key, strict=True))
            row.update(self.results[key].as_row(self.spec.name))
            out.append(row)
        return out


def _fallback(spec: UserMeanSpec, plan: GroupPlan) -> UserMeanResult:
    mid = (float(spec.lower) + float(spec.upper)) / 2
    nan = math.nan
    return UserMeanResult(
        mid, 0.0, float(spec.lower), float(spec.upper), mid, mid, spec.span * FALLBACK_BOUND,
        plan.users, plan.rows, 0, 0, 0,
        plan.excluded, nan, nan, nan, spec.cap, 0.0, 0.0, 0.0, True, (),
    )


def cut_groups(
    spec: UserMeanSpec, backend: UserBackend, groups: int
) -> tuple[dict[int, GroupPlan], dict[int, Cut]]:
    """Census -> group plans -> rank queries -> membership cuts (public data only).

    Raises:
        SchemaError, EpsilonColumnError: the census breaks a rule of public inputs.
    """
    census = backend.census()
    census.check(spec)
    plans = {gid: plan_group(census.cells.get(gid, ()), spec) for gid in range(groups)}
    queries = [q for gid, p in plans.items() for q in p.queries(gid)]
    answers = backend.rank_keys(queries) if queries else {}
    cuts = {gid: p.cut(gid, answers) for gid, p in plans.items() if not p.fallback}
    return plans, cuts


def run_user_mean(
    spec: UserMeanSpec,
    backend: UserBackend,
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...],
    release_key: ReleaseKey,
) -> UserMeanRelease:
    """Run one release: census -> cuts -> initial and variance steps -> final step.

    Group ids are positions in ``keys`` (``((),)`` for a global release). Only the public
    census, the rank answers (order keys of public ids), the G_mean per-class sums, the
    G_var users (at most ``var_users`` per group) and the G_fin per-class clamped sums
    reach this function.

    Privacy:
        User i's loss is at most ε_i: each user is in one of three disjoint groups chosen
        from public data (k, ε, id, salt), its data enters only that group's step, and each
        step is ε_i-DP for its users (see the step functions); later steps read only the
        released outputs of earlier ones (parallel composition).
    """
    if not isinstance(spec, UserMeanSpec):
        msg = f"`spec` must come from hdp_user_mean(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    plans, cuts = cut_groups(spec, backend, len(keys))
    results: dict[tuple[object, ...], UserMeanResult] = {}
    for gid, plan in plans.items():
        if plan.fallback:
            results[keys[gid]] = _fallback(spec, plan)
    if not cuts:
        return UserMeanRelease(by, keys, spec, results, release_key.unsafe)
    first = backend.first_stage(cuts)
    span, lower = spec.span, float(spec.lower)
    designs: dict[int, FinalDesign] = {}
    partial: dict[int, tuple[InitialMean, VarianceEstimate | None]] = {}
    for gid in cuts:
        plan = plans[gid]
        base_ctx = ("user_mean", spec.name, spec.column, spec.lower, spec.upper, spec.fill_value,
                    spec.beta, spec.salt, context_key(keys[gid]))
        mean_cells = first.mean.get(gid, ())
        var_users = first.var.get(gid, ())
        fin_counts = first.fin_counts.get(gid, {})
        if (sum(c.users for c in mean_cells) != plan.n_mean or len(var_users) != plan.n_var
                or sum(fin_counts.values()) != plan.n_fin):
            msg = "group sizes changed between passes; cache the input table"
            raise InternalError(msg)
        init = initial_step(mean_cells, spec.beta, release_key, base_ctx)
        if spec.public_variance is not None:
            var = None
            s2 = float(spec.public_variance) / span**2
        else:
            var = variance_step(var_users, plan.k_max, release_key, base_ctx)
            s2 = var.s2
        partial[gid] = (init, var)
        designs[gid] = design_final(fin_counts, plan.n, init.p_init, init.alpha, s2, spec)
    final_cells = backend.final_stage(cuts, {g: d.bounds for g, d in designs.items()})
    for gid, design in designs.items():
        plan = plans[gid]
        init, var = partial[gid]
        base_ctx = ("user_mean", spec.name, spec.column, spec.lower, spec.upper, spec.fill_value,
                    spec.beta, spec.salt, context_key(keys[gid]))
        fin = final_step(design, final_cells.get(gid, ()), spec.beta, release_key,
                         (*base_ctx, init.p_init, init.alpha,
                          var.s2 if var else float(spec.public_variance or 0.0)))
        estimate = lower + span * fin.value
        half = span * fin.half_width
        upper = float(spec.upper)
        bias = span * float(final_bias_bound(design, plan.users))
        reach = widened(half + bias, lower, upper)  # released interval: noise + bias
        lo, hi = estimate - half, estimate + half
        if spec.clip_output:
            estimate = min(max(estimate, lower), upper)
            lo, hi = max(lo, lower), min(hi, upper)
        s2_unit = var.s2 if var else float(spec.public_variance or 0.0) / span**2
        classes = (var.classes if var else ()) + init.classes + fin.classes
        results[keys[gid]] = UserMeanResult(
            estimate=estimate,
            noise_scale=span * fin.scale,
            ci_low=min(max(estimate - reach, lower), estimate),
            ci_high=max(min(estimate + reach, upper), estimate),
            noise_ci_low=min(lo, estimate),
            noise_ci_high=max(hi, estimate),
            bias_bound=bias,
            users=plan.users,
            rows=plan.rows,
            users_var=plan.n_var,
            users_initial=plan.n_mean,
            users_final=plan.n_fin,
            users_excluded=plan.excluded,
            initial=lower + span * init.p_init,
            user_var=span**2 * s2_unit,
            t=design.t,
            cap=spec.cap,
            eps_var=var.eps_used if var else 0.0,
            eps_initial=max(c.eps_effective for c in init.classes),
            eps_final=max(c.eps_effective for c in fin.classes),
            fallback=False,
            classes=classes,
        )
    return UserMeanRelease(by, keys, spec, results, release_key.unsafe)

