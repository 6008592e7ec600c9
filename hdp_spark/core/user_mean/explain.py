"""User-level mean: what a release will publish about its privacy and accuracy, before it runs.

Everything the user-level mean (Algorithm 2 of Cummings, Feldman, McMillan & Talwar,
*Mean Estimation with User-level Privacy under Data Heterogeneity*, NeurIPS 2022, §4.2)
fixes before it reads a value is a function of public facts only: n, every k_i, the ε_i,
the user ids (through the public order key) and each user's group. So the group sizes, the
initial step's weights, eps_effective and noise scale, the variance step's ε and the
final step's class counts are computed here EXACTLY as the release computes them (the same
functions: :func:`~hdp_spark.core.user_mean.release.cut_groups`,
:func:`~hdp_spark.core.user_mean.steps.initial_design`,
:func:`~hdp_spark.core.user_mean.steps.variance_classes`).

The final step's weights, clip intervals and noise scale depend on the released initial
mean and variance estimate (data-dependent). The paper's accuracy guarantee (Theorem 4.1:
variance within an unspecified constant of the ideal estimator) gives no number, so we
report our own data-independent UPPER BOUND of the final noise scale, valid for every
value the first steps can release (derivation in :func:`final_scale_bound`), labelled as
a bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.core.noise import laplace_noise
from hdp_spark.core.noise.exact import GRID_SLACK
from hdp_spark.core.user_mean.census import (
    Census,
    CensusCell,
    Cut,
    GroupPlan,
    RankQuery,
    order_key,
)
from hdp_spark.core.user_mean.release import cut_groups
from hdp_spark.core.user_mean.spec import KAPPA_L, OrderKey, UserMeanSpec
from hdp_spark.core.user_mean.steps import (
    ClassPrivacy,
    FinalCell,
    FirstStage,
    MeanCell,
    UserBackend,
    VarUser,
    initial_design,
    variance_classes,
    variance_grid_floor,
)

__all__ = ["ArrayUsers", "UserMeanPlan", "explain_user_mean", "final_scale_bound"]

_MARGIN = 1e-9
"""Relative slack that covers float rounding in the bound (the solver works in floats)."""


@dataclass(frozen=True, slots=True)
class UserMeanPlan:
    """What one group of a user-level release will publish, before it runs.

    Exact (equal to the release's columns of the same name): ``users``, ``rows``,
    ``users_var``, ``users_initial``, ``users_final``, ``users_excluded``, ``eps_var``,
    ``eps_initial``, ``fallback``; in ``classes`` every field of the variance and initial
    classes, and step, k, eps and users of the final classes. Data-dependent and given as
    upper bounds: the final classes' ``eps_effective`` (given as their ε; ``weight`` NaN),
    ``eps_final`` (the largest ε in G_fin), ``noise_scale`` and ``half_width``
    (value units).

    Attributes:
        initial_noise_scale: the Laplace scale of the initial mean (value units; exact).
        initial_error: the (1 - β/2) bound α on the initial mean's error (sampling and
            noise, value units; exact, the value the release widens its clip intervals by).
        bound: ``noise_scale`` and ``half_width`` are upper bounds (False on a fallback,
            where they are exact: 0 and half the range).
    """

    users: int
    rows: int
    users_var: int
    users_initial: int
    users_final: int
    users_excluded: int
    eps_var: float
    eps_initial: float
    eps_final: float
    classes: tuple[ClassPrivacy, ...]
    initial_noise_scale: float
    initial_error: float
    noise_scale: float
    half_width: float
    fallback: bool
    bound: bool


def final_scale_bound(
    spec: UserMeanSpec,
    fin_counts: Mapping[tuple[int, float], int],
    n: int,
    m: int,
    k_max: int,
) -> float:
    """An upper bound of the final step's exact noise scale b (unit scale, before the
    2^-20 grid inflation), for every initial mean and variance estimate the release can
    draw.

    Derivation (ours). The solver returns T̂ with g(T̂) <= g(T) for T <= min τ (all classes
    capped; that knot is one of its candidates), and the noise term of g is κ b², so
    b <= sqrt(g(min τ)/κ). With all classes capped:

    * width cap (u_j = T ε_j/W_j): g = (Σ c_j ε_j² s_j²/W_j² + κ)/(Σ c_j ε_j/W_j)². Every
      width satisfies W_j <= 1 and W_j >= min(f_k, 1) (the interval p_init ± (α + f_k) cut
      to [0, 1], p_init in (0, 1)), and s_j² <= 1/(4k) + s2 while
      f_k² >= ln(4n/β)/(2k) + 2 τ_D s2 ln(4n/β), so s_j²/W_j² <= r =
      max(1/4, max(1, 1/τ_D)/(2 ln(4n/β))) for every s2. Hence
      g <= (r Σ c_j ε_j² + κ)/(Σ c_j ε_j)².
    * paper cap (u_j = T ε_j/s_j): g = (Σ c_j ε_j² + κ max_j W_j²/s_j²)/(Σ c_j ε_j/s_j)²
      with s_j <= 1/2, W_j <= 1 and s_j² >= pq/k + (1 - 1/k) min(s2, pq), where
      pq >= (1/m)(1 - 1/m) (p_init is clipped to [1/m, 1 - 1/m]) and s2 is at least the
      variance step's smallest output (or the public variance).

    With one ε and full widths this is about 1/(n_fin ε), the exact scale of a plain
    clipped mean of G_fin.

    Privacy:
        A function of the public class counts, n, m, k_max and the spec only.
    """
    cs = [(k, e, c) for (k, e), c in fin_counts.items() if c > 0]
    sum_ce = math.fsum(c * e for _, e, c in cs)
    sum_ce2 = math.fsum(c * e * e for _, e, c in cs)
    kappa = KAPPA_L
    if spec.cap == "width":
        log_term = math.log(4.0 * n / spec.beta)
        r = max(0.25, max(1.0, 1.0 / spec.tau_d) / (2.0 * log_term)) * (1 + 1e-6)
        g0 = (r * sum_ce2 + kappa) / sum_ce**2
    else:
        pq = (1.0 / m) * (1.0 - 1.0 / m)
        s2_lo = (float(spec.public_variance) / spec.span**2 if spec.public_variance is not None
                 else variance_grid_floor(k_max))
        s2w = min(s2_lo, pq)
        inv_s2 = max(1.0 / (pq / k + (1.0 - 1.0 / k) * s2w) for k, _, _ in cs)
        g0 = (sum_ce2 + kappa * inv_s2) / (2.0 * sum_ce) ** 2
    return math.sqrt(g0 / kappa) * (1 + _MARGIN)


def _half_width_bound(scale: float, beta: float, n_fin: int) -> float:
    """Bound of the release's (1 - β) noise half-width at any exact scale <= ``scale``.

    The release reports g·(⌈T ln(1/β)⌉ + 3) with the integer scale
    T = ⌈b(1 + 2^-20)/g⌉ < b(1 + 2^-20)/g + 1 and grid g <= 2^-20 · min_j d_j
    <= 2^-20 / n_fin (Σ_j c_j d_j <= 1 since W_j <= 1), so the half-width is at most
    b(1 + 2^-20) ln(1/β) + (ln(1/β) + 4) · 2^-20 / n_fin.
    """
    slack = float(GRID_SLACK)
    used = scale * (1 + slack)
    log = math.log(1.0 / beta)
    return (used * log + (log + 4.0) * slack / n_fin) * (1 + _MARGIN)


def _fallback(spec: UserMeanSpec, plan: GroupPlan) -> UserMeanPlan:
    return UserMeanPlan(plan.users, plan.rows, 0, 0, 0, plan.excluded, 0.0, 0.0, 0.0, (),
                        0.0, 0.0, 0.0, spec.span / 2, True, False)


def explain_user_mean(
    spec: UserMeanSpec,
    backend: UserBackend,
    keys: Sequence[tuple[object, ...]],
) -> dict[tuple[object, ...], UserMeanPlan]:
    """The plan of every group of a user-level release.

    ``backend`` is an engine's user backend over the PUBLIC columns only (user ids, ε and
    group columns; the value column replaced by a constant): the census, the rank answers
    and the first stage's class counts are then exactly the release's, and no value is
    read.

    Raises:
        SchemaError, EpsilonColumnError: as the release, for the public columns.

    Privacy:
        A function of the public census (users per group, k and ε), the order keys of
        public user ids and the spec; draws no noise and spends nothing.
    """
    plans, cuts = cut_groups(spec, backend, len(keys))
    out: dict[tuple[object, ...], UserMeanPlan] = {}
    for gid, plan in plans.items():
        if plan.fallback:
            out[keys[gid]] = _fallback(spec, plan)
    if not cuts:
        return out
    first = backend.first_stage(cuts)
    span = spec.span
    for gid in cuts:
        plan = plans[gid]
        init = initial_design(first.mean.get(gid, ()))
        var_users = first.var.get(gid, ())
        if spec.public_variance is None:
            eps_v, var_cls = variance_classes(var_users)
        else:
            eps_v, var_cls = 0.0, ()
        fin = first.fin_counts.get(gid, {})
        fin_cls = tuple(ClassPrivacy("final", k, e, c, math.nan, e)
                        for (k, e), c in sorted(fin.items()))
        scale = final_scale_bound(spec, fin, plan.n, plan.n_mean, plan.k_max)
        noise_init = float(laplace_noise(init.eta, init.min_weight).scale)
        out[keys[gid]] = UserMeanPlan(
            users=plan.users,
            rows=plan.rows,
            users_var=plan.n_var,
            users_initial=plan.n_mean,
            users_final=plan.n_fin,
            users_excluded=plan.excluded,
            eps_var=eps_v,
            eps_initial=max(c.eps_effective for c in init.classes),
            eps_final=max(e for _, e in fin),
            classes=var_cls + init.classes + fin_cls,
            initial_noise_scale=span * noise_init,
            initial_error=span * init.alpha(spec.beta),
            # the scale used, T·g < b(1 + 2^-20) + g with g <= 2^-20 / n_fin (see above)
            noise_scale=span * (scale * (1 + float(GRID_SLACK))
                                + float(GRID_SLACK) / plan.n_fin) * (1 + _MARGIN),
            half_width=span * _half_width_bound(scale, spec.beta, plan.n_fin),
            fallback=False,
            bound=True,
        )
    return out


class ArrayUsers:
    """A user backend over a public per-user table held in numpy arrays (no values).

    Answers the census, the rank queries and the first stage's class counts exactly as
    the engines' backends do (the sums are 0: there are no values), for planning a job's
    user-level means without re-reading the input (:mod:`hdp_spark.jobs.allocation`).

    Args:
        k: rows per user.
        level: each user's ε level (``levels_numpy`` of the capped ε; +inf as the cap).
        gid: each user's group id (-1: outside the key set).
        text: each user's id as text (the order key's input, as the engines cast it).
        spec: the aggregator (its salt).
        cache: order keys already computed (shared between calls on the same users).

    Privacy:
        Holds public facts only: k, ε, group and user id per user.
    """

    def __init__(self, k: npt.NDArray[np.int64], level: npt.NDArray[np.float64],
                 gid: npt.NDArray[np.int64], text: Sequence[str], spec: UserMeanSpec,
                 cache: dict[int, OrderKey] | None = None) -> None:
        self.k, self.level, self.gid, self.text, self.spec = k, level, gid, text, spec
        self._keys = cache if cache is not None else {}

    def _key(self, i: int) -> OrderKey:
        found = self._keys.get(i)
        if found is None:
            found = order_key(self.text[i], self.spec.salt)
            self._keys[i] = found
        return found

    def _cells(self, mask: npt.NDArray[np.bool_]) -> dict[int, dict[tuple[int, float], int]]:
        out: dict[int, dict[tuple[int, float], int]] = {}
        if not mask.any():
            return out
        table = np.stack([self.gid[mask].astype(np.float64), self.k[mask].astype(np.float64),
                          self.level[mask]], axis=1)
        rows, counts = np.unique(table, axis=0, return_counts=True)
        for (g, k, lv), c in zip(rows, counts, strict=True):
            out.setdefault(int(g), {})[(int(k), float(lv))] = int(c)
        return out

    def census(self) -> Census:
        """Users per (group id, k, ε level) of the users inside the key set."""
        cells = self._cells((self.gid >= 0) & (self.level >= 0))
        return Census({g: tuple(CensusCell(k, lv, c) for (k, lv), c in sorted(v.items()))
                       for g, v in cells.items()})

    def rank_keys(self, queries: Sequence[RankQuery]) -> dict[RankQuery, OrderKey]:
        """Exact order statistics of the order keys in each queried bucket."""
        out: dict[RankQuery, OrderKey] = {}
        for q in queries:
            idx = np.flatnonzero((self.gid == q.gid) & (self.k == q.k) & (self.level > 0))
            out[q] = sorted(self._key(int(i)) for i in idx)[q.rank - 1]
        return out

    def _roles(self, cuts: Mapping[int, Cut]) -> npt.NDArray[np.str_]:
        role = np.full(self.k.size, "x", dtype="<U1")
        for gid, cut in cuts.items():
            inside = (self.gid == gid) & (self.level > 0)
            is_var = inside & (self.k > cut.var_k)
            for i in np.flatnonzero(inside & (self.k == cut.var_k)):
                is_var[i] = self._key(int(i)) <= cut.var_key
            is_mean = inside & ~is_var & (self.k < cut.mean_k)
            for i in np.flatnonzero(inside & ~is_var & (self.k == cut.mean_k)):
                is_mean[i] = self._key(int(i)) > cut.mean_key
            role[inside] = "f"
            role[is_var] = "v"
            role[is_mean] = "m"
        return role

    def first_stage(self, cuts: Mapping[int, Cut]) -> FirstStage:
        """G_mean class counts, G_var users and G_fin class counts (sums 0)."""
        role = self._roles(cuts)
        mean = {g: tuple(MeanCell(k, lv, c, 0) for (k, lv), c in sorted(v.items()))
                for g, v in self._cells(role == "m").items()}
        var: dict[int, list[VarUser]] = {}
        for i in np.flatnonzero(role == "v"):
            var.setdefault(int(self.gid[i]), []).append(
                VarUser(int(self.k[i]), float(self.level[i]), 0, self._key(int(i))))
        return FirstStage(mean, {g: tuple(v) for g, v in var.items()}, self._cells(role == "f"))

    def final_stage(
        self, cuts: Mapping[int, Cut], bounds: Mapping[int, Mapping[int, tuple[int, int]]]
    ) -> dict[int, tuple[FinalCell, ...]]:
        """Not available: planning never reads values."""
        msg = "a plan has no values to sum"
        raise NotImplementedError(msg)
