"""User-level heterogeneous mean: Algorithm 2 of Cummings, Feldman, McMillan & Talwar,
*Mean Estimation with User-level Privacy under Data Heterogeneity* (NeurIPS 2022), §4.2.

Privacy-critical: user i's user-level ε_i-DP guarantee depends on this module (group split,
clamping of the per-user means, the three noise scales, the weight solver's Λ).
Argument in short (details under "Privacy argument" below): the groups G_var, G_mean, G_fin
are disjoint and chosen from public facts only, so by parallel composition each user pays
only for the one step that reads its data (the paper's Theorem 4.1, privacy part). Each
step's noise is scaled to that step's user-level sensitivity over the ε_i of its users:
initial mean Lap(max_j w_j/ε_j) with p̂_j ∈ [0, 1]; variance by an exponential mechanism with
score sensitivity 1 at min ε_i; final sum Lap(max_j d_j/ε_j) with d_j = u_j W_j / Z the
largest move of one clipped user. Per-user ε_i is our extension of the paper (which has one
ε), following the heterogeneous DP definition (Definition 1) of Chaudhuri & Courtade,
*Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free* (ISIT 2023).

Each user i holds k_i rows of a bounded value. The release estimates the population mean
p = E[p_i] of the users' own means, weighting users by how much data they hold, under
**user-level** differential privacy: neighbouring tables differ in all rows of one user,
with n (the number of users) and every k_i fixed and public (replace-one, as in the paper).

Pipeline (engine work is native; the driver sees only small tables):

* pass 1 (engine): one row per user: k_i = count, s_i = Σ of the fixed-point encoded clamped
  value (exact integers, :mod:`hdp_spark.core.encoding`), the user's ε_i and group.
* census (engine → driver): users per (group, k, ε level). Public: it holds only k and ε.
* grouping (driver, public data only): users sorted by (k descending, order key), where
  the order key is a hash of the user id with a public salt. G_var = the first L users
  (L = max(⌈ln n⌉, 2)), G_mean = the last m = n − ⌊9n/10⌋, G_fin = the rest. A k bucket
  split by a boundary is cut at an order-key threshold that the engine finds natively
  (:class:`RankQuery`); membership is then a native expression of (k, order key).
* step "initial" (G_mean, the users with the least data): p_init = Σ w_i p̂_i + Lap(η).
* step "variance" (G_var, the users with the most data): exponential mechanism over a
  dyadic grid for the median of squared differences of disjoint pairs (our instance of the
  paper's `variance_ε` input; its own estimator, Lemma F.4, is in an appendix).
* step "final" (G_fin): per (k, ε) class, the engine sums clip(p̂_i, â_k, b̂_k) natively
  (integer clamps broadcast as literals); the driver weighs the classes with an exact
  closed-form minimiser of the paper's objective (eq. 6; the derivation is ours, see
  :func:`solve_user_weights`) and adds Laplace noise.

Privacy argument (each step next to its code below):

* The three groups are disjoint and membership depends only on k, ε and the user id with a
  public salt (all public in this model), never on values. A user's data enters exactly one
  step; every later step uses the earlier steps' *released* (noisy) outputs only. By
  parallel composition with adaptivity the pipeline gives user i the loss of its own step,
  which is at most ε_i (Theorem 4.1 of the paper, which uses the full budget in each
  step for the same reason: there is no split of ε across steps).
* step "initial": user i's p̂_i ∈ [0, 1] (values are clamped to [lower, upper] and imputed
  before encoding: the 1/m-type sensitivity holds only for values in [0, 1], and a mean
  that drops nulls would shrink its denominator with the data), so replacing user i moves
  Σ w_j p̂_j by at most w_i.
  Noise Lap(η) with η = max_j w_j/ε_j gives user i a loss w_i/η <= ε_i. Weights are
  the ADPM weights w ∝ min(ε, τ) (Chaudhuri & Courtade, ISIT 2023, Algorithm 1) over the
  G_mean ε histogram (public); with one ε they are 1/m and η = 1/(mε), i.e. Laplace on the
  sample mean, which §4.2 of the paper says suffices for its `mean_ε` input.
* step "variance": one user is in exactly one disjoint pair, so each count
  cnt_t = #{pairs with d_j <= 2^-t} moves by at most 1 and the score -|cnt_t - M/2| has
  sensitivity 1. The exponential mechanism at ε_var = min over G_var of ε_i is
  ε_var-DP <= ε_i for each of them. It is sampled exactly (uniform proposal, exact
  Bernoulli(exp(-x)) acceptance), so the probabilities are exactly ∝ exp(ε_var·score/2).
* step "final": the weights u_j, the intervals [A_k, B_k] and Z = Σ c_j u_j are functions of
  (k, ε) counts and the released p_init and s2 only. Replacing user i (class j) moves
  S/Z = Σ_j u_j Σ_{i∈j} clip(p̂_i)/Z by at most d_j = u_j W_j / Z, where W_j is the exact width
  of the integer clamp interval. Noise Lap(b) with b = max_j d_j/ε_j, on the ORIGINAL
  widths W_j (the solver works with W_j/ε_j, but clipping and d_j never do: clipping to
  the rescaled widths would give every user loss 1) gives class j a loss d_j/b <= ε_j.
  With one ε this is the paper's Lap(max_j w_j W_j / ε) of Algorithm 2, Step 9.

Every noisy quantity is drawn through :func:`hdp_spark.core.noise.laplace_mechanism` or the
exact exponential mechanism below, from a :class:`~hdp_spark.core.noise.KeyedStream` bound to
(release key, step, aggregator, group, exact pre-noise statistics).

What is proven and what is not: the privacy of every step (above) is proven for any data,
any k and any ε_i. The paper's accuracy guarantee (Theorem 4.1: variance within a constant
of the ideal estimator) holds for one common ε, Bernoulli data and its conditions; for
per-user ε_i (our extension) only the optimality of the final weights for the proxy
objective is checked numerically, no accuracy theorem is claimed.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, Protocol, get_args

import numpy as np

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.keys import context_key
from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.noise import ReleaseKey, bernoulli_exp, encode_context, laplace_mechanism
from hdp_spark.core.noise.exact import RandomSource
from hdp_spark.core.specs import check_bounds, check_column_name
from hdp_spark.core.weights import normalize, solve_clip_level
from hdp_spark.errors import EpsilonColumnError, InternalError, ParameterError, SchemaError

__all__ = [
    "CHI2_MEDIAN",
    "DEFAULT_SALT",
    "KAPPA_L",
    "KAPPA_V",
    "MIN_USERS",
    "USER_MEAN_FIELDS",
    "Census",
    "CensusCell",
    "ClassPrivacy",
    "Cut",
    "FinalCell",
    "FinalDesign",
    "FirstStage",
    "GroupPlan",
    "MeanCell",
    "RankQuery",
    "SolverResult",
    "UserBackend",
    "UserMeanCap",
    "UserMeanRelease",
    "UserMeanResult",
    "UserMeanSpec",
    "VarUser",
    "concentration",
    "design_final",
    "exponential_mechanism",
    "final_step",
    "hdp_user_mean",
    "initial_step",
    "order_key",
    "plan_group",
    "proxy_objective",
    "run_user_mean",
    "solve_user_weights",
    "variance_step",
]

UserMeanCap = Literal["width", "paper"]
USER_MEAN_CAPS: tuple[str, ...] = get_args(UserMeanCap)

MIN_USERS = 20
"""Fewer users (with ε > 0) in a group than this: data-independent fallback (our choice: the
three groups of Algorithms 1 and 2, §3-§4.2 of the paper, need |G_fin| >= 1, m >= 2, L >= 2)."""

KAPPA_L = 2.0
"""Var(Lap(b)) = 2b²: the Laplace factor of the solver's objective. The paper's eqs. (5)-(6)
(§4.1) drop this factor 2 (they write the noise variance as max_i w_i² |b_i - a_i|²/ε²); we use
the exact variance, which changes the solved cap T̂ but not privacy."""

KAPPA_V = 2.5
"""Upward bias factor of the private variance estimate (our choice: Theorem 4.1 of the paper
asks for an over-estimate of σ_p², so the interval of Algorithm 2 covers the ideal one)."""

CHI2_MEDIAN = 0.45493642311957283
"""Median of the χ² distribution with one degree of freedom."""

DEFAULT_SALT = "hdp_spark/user_mean/v1"
"""Public, data-independent salt of the order key that breaks ties in k."""

HASH_HEX = 15
"""The order key uses the first 15 hex digits (60 bits) of SHA-256(salt || user id)."""

KEY_ALL = 1 << 62
"""Order-key sentinel above every 60-bit hash (a threshold that admits the whole bucket)."""

K_NONE = 1 << 62
"""k sentinel above every real k (no user is in G_var)."""

OrderKey = tuple[int, str]
"""(60-bit hash of salt || user id text, user id text): a total order on users."""


# ---------------------------------------------------------------------------------------------
# Specification
# ---------------------------------------------------------------------------------------------


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"`{name}` must be a number, got {value!r}."
        raise ParameterError(msg)
    return float(value)


@dataclass(frozen=True, slots=True)
class UserMeanSpec:
    """A user-level heterogeneous-DP mean (see :func:`hdp_user_mean`).

    Attributes:
        column: value column.
        user: user id column (integers or strings).
        eps: column with each row's ε; it must be the same on all rows of a user.
        lower: public lower bound of the values (smaller values are clamped).
        upper: public upper bound.
        cap: weight cap form: ``"width"`` (u_i = min(1/σ̂_i², T·ε_i/W_i), default) or
            ``"paper"`` (u_i = min(1/σ̂_i², T·ε_i/σ̂_i), the paper's form).
        beta: failure probability of the interval bounds and of the reported interval.
        var_users: size of G_var (default max(⌈ln n⌉, 2)); must be >= 2.
        public_variance: a public upper bound on the variance of the users' means (value
            units squared). When set, no G_var step runs and those users join G_fin.
        tau_d: sub-Gaussian variance proxy factor of the users' means (see
            :func:`concentration`).
        clip_output: clip the released estimate to [lower, upper] (post-processing, bias).
        fill: public value imputed for null/NaN values (default: the midpoint).
        eps_grid: round ε down onto this public grid (bounds the number of ε classes).
        salt: public salt of the tie-breaking order key.
        alias: output column prefix (default ``"<column>_user_mean"``).
    """

    column: str
    user: str
    eps: str
    lower: float
    upper: float
    cap: UserMeanCap = "width"
    beta: float = 0.05
    var_users: int | None = None
    public_variance: float | None = None
    tau_d: float = 1.0
    clip_output: bool = False
    fill: float | None = None
    eps_grid: EpsGrid | None = None
    salt: str = DEFAULT_SALT
    alias: str | None = None

    def __post_init__(self) -> None:
        check_column_name("column", self.column)
        check_column_name("user", self.user)
        check_column_name("eps", self.eps)
        if len({self.column, self.user, self.eps}) != 3:
            msg = (
                "`column`, `user` and `eps` must be three different columns, got "
                f"({self.column!r}, {self.user!r}, {self.eps!r})."
            )
            raise ParameterError(msg)
        lower, upper = check_bounds(self.lower, self.upper)
        if self.cap not in USER_MEAN_CAPS:
            msg = f"`cap` must be one of {', '.join(USER_MEAN_CAPS)}; got {self.cap!r}."
            raise ParameterError(msg)
        beta = _number("beta", self.beta)
        if not 0 < beta < 1:
            msg = f"`beta` must be in (0, 1), got {self.beta!r}."
            raise ParameterError(msg)
        if self.var_users is not None and (
            isinstance(self.var_users, bool)
            or not isinstance(self.var_users, int)
            or self.var_users < 2
        ):
            msg = f"`var_users` must be an integer >= 2 or None, got {self.var_users!r}."
            raise ParameterError(msg)
        if self.public_variance is not None:
            pv = _number("public_variance", self.public_variance)
            if not (math.isfinite(pv) and pv >= 0):
                msg = f"`public_variance` must be finite and >= 0, got {self.public_variance!r}."
                raise ParameterError(msg)
            if self.var_users is not None:
                msg = "`var_users` and `public_variance` exclude each other; set one of them."
                raise ParameterError(msg)
        tau_d = _number("tau_d", self.tau_d)
        if not (math.isfinite(tau_d) and tau_d > 0):
            msg = f"`tau_d` must be finite and > 0, got {self.tau_d!r}."
            raise ParameterError(msg)
        if not isinstance(self.clip_output, bool):
            msg = f"`clip_output` must be True or False, got {self.clip_output!r}."
            raise ParameterError(msg)
        if self.fill is not None:
            fill = _number("fill", self.fill)
            if not lower <= fill <= upper:
                msg = f"`fill` must lie in [lower, upper], got {self.fill!r}."
                raise ParameterError(msg)
        if self.eps_grid is not None and not isinstance(self.eps_grid, EpsGrid):
            msg = f"`eps_grid` must be an EpsGrid or None, got {type(self.eps_grid).__name__}."
            raise ParameterError(msg)
        if not isinstance(self.salt, str):
            msg = f"`salt` must be a string, got {type(self.salt).__name__}."
            raise ParameterError(msg)
        if self.alias is not None:
            check_column_name("alias", self.alias)

    @property
    def name(self) -> str:
        """Prefix of the output columns."""
        return self.alias or f"{self.column}_user_mean"

    @property
    def fill_value(self) -> float:
        """The public imputation value for null/NaN values."""
        return float(self.fill) if self.fill is not None else (self.lower + self.upper) / 2

    @property
    def span(self) -> float:
        """upper - lower."""
        return float(self.upper) - float(self.lower)


def hdp_user_mean(
    column: str,
    *,
    user: str,
    eps: str,
    lower: float,
    upper: float,
    cap: UserMeanCap = "width",
    beta: float = 0.05,
    var_users: int | None = None,
    public_variance: float | None = None,
    tau_d: float = 1.0,
    clip_output: bool = False,
    fill: float | None = None,
    eps_grid: EpsGrid | None = None,
    salt: str = DEFAULT_SALT,
    alias: str | None = None,
) -> UserMeanSpec:
    """User-level heterogeneous-DP mean of ``column`` (Cummings et al., Algorithm 2).

    Pass the result to ``hdp_spark.pandas._user_mean`` or ``hdp_spark.spark._user_mean``.
    Rows are first aggregated per user (k_i rows, per-user mean p̂_i); the estimate is a
    weighted, clipped average of the p̂_i of the middle users plus Laplace noise, with
    weights, clip intervals and noise set from a private initial mean (users with the
    least data) and a private variance estimate (users with the most data).

    Args:
        column: numeric value column.
        user: user id column (integer or string type). All rows of a user are one unit.
        eps: numeric ε column, constant within a user: ε_i > 0 (finite; +inf is lowered
            to a finite cap), or 0 for "do not use my data".
        lower: public lower bound of the values; smaller values are clamped.
        upper: public upper bound; larger values are clamped.
        cap: ``"width"`` (default; u_i = min(1/σ̂_i², T ε_i / W_i), the exact optimum of the
            paper's objective, eq. 6) or ``"paper"`` (min(1/σ̂_i², T ε_i / σ̂_i); up to
            7.7× the variance at ε = 0.1, n = 10³).
        beta: failure probability of the clip intervals' coverage and of the reported
            noise interval.
        var_users: number of users with the most data used for the variance step
            (default max(⌈ln n⌉, 2)).
        public_variance: a public upper bound on the variance of the users' means, in
            value units squared; replaces the private variance step (no budget spent).
        tau_d: sub-Gaussian proxy factor of the users' means (:func:`concentration`; 1 is
            right for p near 1/2).
        clip_output: clip the estimate to [lower, upper] (post-processing; adds bias).
        fill: public value imputed for null/NaN values (default: the midpoint).
        eps_grid: round ε down onto this public geometric grid (for continuous ε).
        salt: public salt of the order key that breaks ties between users with equal k.
        alias: output column prefix (default ``"<column>_user_mean"``).

    Returns:
        A :class:`UserMeanSpec`. The output fields are listed in ``docs/user_mean.md``.

    Raises:
        ParameterError: a parameter breaks its rule.

    Privacy:
        Protected unit: one USER (all of its rows), replace-one: the number of users n and
        every user's row count k_i are public, as in the paper, and so are the ε_i, the
        user ids and each user's group. User i's privacy loss is at most ε_i: the users
        are split into three disjoint groups by (k, order key) -- public data -- and each
        user's data enters only its own group's step, which is ε_i-DP for that user
        (parallel composition). ε_i enters the weights and the noise of its step (our
        per-user extension: final noise Lap(max_j w_j W_j / ε_j), weights ∝ min(1/σ̂², T ε_j / W_j)).
        Values are clamped and imputed, never rejected; invalid or per-user inconsistent
        ε (public) is rejected with a count of users.
    """
    return UserMeanSpec(
        column=column,
        user=user,
        eps=eps,
        lower=lower,
        upper=upper,
        cap=cap,
        beta=beta,
        var_users=var_users,
        public_variance=public_variance,
        tau_d=tau_d,
        clip_output=clip_output,
        fill=fill,
        eps_grid=eps_grid,
        salt=salt,
        alias=alias,
    )


# ---------------------------------------------------------------------------------------------
# Order key (public tie-break) and group plan
# ---------------------------------------------------------------------------------------------


def order_key(text: str, salt: str) -> OrderKey:
    """The public order key of a user id (its text form, as Spark's cast to string).

    Both engines compute the same value: Spark as
    ``conv(substring(sha2(concat(salt, id), 256), 1, 15), 16, 10)``.
    """
    digest = hashlib.sha256((salt + text).encode("utf-8")).hexdigest()
    return int(digest[:HASH_HEX], 16), text


@dataclass(frozen=True, slots=True)
class CensusCell:
    """Users of one (group, k, ε level) cell. Public in this model.

    Attributes:
        k: rows per user.
        eps: the users' ε level (0 = excluded, else in (0, EPS_CAP]).
        users: number of users.
    """

    k: int
    eps: float
    users: int


@dataclass(frozen=True, slots=True)
class Census:
    """The public census an engine returns: cells per group id and violation counts.

    Attributes:
        cells: group id -> cells (any order).
        invalid_eps_users: users with a null, NaN or negative ε on some row.
        mixed_eps_users: users whose rows carry different ε values.
        below_grid_users: users with 0 < ε below the grid's lowest point.
        mixed_group_users: users whose rows fall into different groups.
        null_user_rows: rows with a null user id.
    """

    cells: Mapping[int, tuple[CensusCell, ...]]
    invalid_eps_users: int = 0
    mixed_eps_users: int = 0
    below_grid_users: int = 0
    mixed_group_users: int = 0
    null_user_rows: int = 0

    def check(self, spec: UserMeanSpec) -> None:
        """Raise on violations of the rules of public inputs (counts only, never values)."""
        if self.null_user_rows:
            msg = (
                f"user column `{spec.user}` must not be null; {self.null_user_rows} row(s) "
                "break this rule."
            )
            raise SchemaError(msg)
        if self.invalid_eps_users or self.mixed_eps_users:
            msg = (
                f"Column `{spec.eps}` must hold one ε >= 0 per user, equal on all of the "
                f"user's rows (user-level privacy); {self.invalid_eps_users} user(s) have a "
                f"null, NaN or negative ε and {self.mixed_eps_users} user(s) have rows with "
                "different ε."
            )
            raise EpsilonColumnError(msg)
        if self.below_grid_users:
            msg = (
                f"Column `{spec.eps}` has {self.below_grid_users} user(s) with 0 < ε below the "
                "lowest point of `eps_grid`; lower `eps_grid.lowest` (rounding them up would "
                "weaken privacy)."
            )
            raise EpsilonColumnError(msg)
        if self.mixed_group_users:
            msg = (
                f"every user must fall into one group of `by`; {self.mixed_group_users} "
                "user(s) have rows in several groups (their loss would add up)."
            )
            raise SchemaError(msg)


@dataclass(frozen=True, slots=True)
class RankQuery:
    """Find the order key of rank ``rank`` (1-based, ascending) among the users of one
    (group, k) bucket with ε > 0."""

    gid: int
    k: int
    rank: int


@dataclass(frozen=True, slots=True)
class Cut:
    """Group membership rule of one group (applied natively per user, ε > 0 users only).

    G_var:  k > var_k, or k == var_k and key <= var_key.
    G_mean: not G_var, and k < mean_k, or k == mean_k and key > mean_key.
    G_fin:  every other user with ε > 0.
    """

    var_k: int
    var_key: OrderKey
    mean_k: int
    mean_key: OrderKey


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """Group sizes and boundaries of one group, from public data only.

    Attributes:
        users: users in the group (all ε).
        rows: rows of those users (Σ k).
        excluded: users with ε = 0 (their data is never read).
        n: users with ε > 0.
        n_var, n_mean, n_fin: sizes of G_var, G_mean and G_fin.
        k_max: largest k among users with ε > 0.
        var_k, var_rank, var_whole: boundary bucket of G_var and the rank of the last
            member in it (``var_whole``: the whole bucket is in).
        mean_k, mean_rank, mean_whole: boundary bucket of G_mean; members are the users
            with key rank > ``mean_rank`` (``mean_whole``: the whole bucket is in).
        fallback: the release of this group is the data-independent midpoint.
    """

    users: int
    rows: int
    excluded: int
    n: int
    n_var: int
    n_mean: int
    n_fin: int
    k_max: int
    var_k: int
    var_rank: int
    var_whole: bool
    mean_k: int
    mean_rank: int
    mean_whole: bool
    fallback: bool

    def queries(self, gid: int) -> list[RankQuery]:
        """The rank queries the engine must answer to cut the boundary buckets."""
        if self.fallback:
            return []
        out = []
        if self.n_var and not self.var_whole:
            out.append(RankQuery(gid, self.var_k, self.var_rank))
        if not self.mean_whole:
            out.append(RankQuery(gid, self.mean_k, self.mean_rank))
        return out

    def cut(self, gid: int, answers: Mapping[RankQuery, OrderKey]) -> Cut:
        """The membership rule, given the engine's answers to :meth:`queries`."""
        if self.n_var == 0:
            var_k, var_key = K_NONE, (KEY_ALL, "")
        elif self.var_whole:
            var_k, var_key = self.var_k, (KEY_ALL, "")
        else:
            var_k, var_key = self.var_k, answers[RankQuery(gid, self.var_k, self.var_rank)]
        if self.mean_whole:
            mean_key: OrderKey = (-1, "")
        else:
            mean_key = answers[RankQuery(gid, self.mean_k, self.mean_rank)]
        return Cut(var_k, var_key, self.mean_k, mean_key)


def plan_group(cells: Sequence[CensusCell], spec: UserMeanSpec) -> GroupPlan:
    """Group sizes and boundaries (Algorithms 1-2 of the paper) from the public census of one group.

    L = ``var_users`` or max(⌈ln n⌉, 2) (0 with ``public_variance``), hi = ⌊9n/10⌋,
    m = n - hi. Fewer than :data:`MIN_USERS` users with ε > 0, or no user left for G_fin,
    gives the data-independent fallback (n and k are public, so this choice leaks nothing).
    """
    users = sum(c.users for c in cells)
    rows = sum(c.users * c.k for c in cells)
    excluded = sum(c.users for c in cells if c.eps <= 0)
    per_k: dict[int, int] = {}
    for c in cells:
        if c.eps > 0 and c.users > 0:
            per_k[c.k] = per_k.get(c.k, 0) + c.users
    n = sum(per_k.values())
    if spec.public_variance is not None:
        n_var = 0
    elif spec.var_users is not None:
        n_var = spec.var_users
    else:
        n_var = max(math.ceil(math.log(n)), 2) if n > 0 else 2
    hi = (9 * n) // 10
    n_mean = n - hi
    n_fin = hi - n_var
    if n < MIN_USERS or n_fin < 1:
        return GroupPlan(users, rows, excluded, n, 0, 0, 0, max(per_k, default=0),
                         K_NONE, 0, True, 0, 0, True, True)
    ks_desc = sorted(per_k, reverse=True)
    var_k, var_rank, var_whole = K_NONE, 0, True
    if n_var:
        before = 0
        for k in ks_desc:
            if before + per_k[k] >= n_var:
                var_k, var_rank = k, n_var - before
                var_whole = var_rank == per_k[k]
                break
            before += per_k[k]
    before = 0
    mean_k, mean_rank, mean_whole = 0, 0, True
    for k in reversed(ks_desc):
        if before + per_k[k] >= n_mean:
            take = n_mean - before
            mean_k, mean_rank = k, per_k[k] - take
            mean_whole = mean_rank == 0
            break
        before += per_k[k]
    return GroupPlan(users, rows, excluded, n, n_var, n_mean, n_fin, ks_desc[0],
                     var_k, var_rank, var_whole, mean_k, mean_rank, mean_whole, False)


# ---------------------------------------------------------------------------------------------
# Engine interface
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeanCell:
    """G_mean users of one (k, ε) class: count and exact Σ s_i (fixed point)."""

    k: int
    eps: float
    users: int
    total: int


@dataclass(frozen=True, slots=True)
class VarUser:
    """One G_var user: k, ε level, Σ of its encoded values, and its order key."""

    k: int
    eps: float
    total: int
    key: OrderKey


@dataclass(frozen=True, slots=True)
class FinalCell:
    """G_fin users of one (k, ε) class: count and exact Σ clamp(s_i, A_k, B_k)."""

    k: int
    eps: float
    users: int
    total: int


@dataclass(frozen=True, slots=True)
class FirstStage:
    """What the engine returns once the groups are cut (per group id).

    Attributes:
        mean: G_mean cells.
        var: G_var users (at most ``var_users`` per group).
        fin_counts: G_fin user counts per (k, ε) class.
    """

    mean: Mapping[int, tuple[MeanCell, ...]]
    var: Mapping[int, tuple[VarUser, ...]]
    fin_counts: Mapping[int, Mapping[tuple[int, float], int]]


class UserBackend(Protocol):
    """The four native operations an engine provides (pandas and Spark).

    Membership uses the rule of :class:`Cut` and :func:`order_key`; the final clamp is
    ``min(max(s_i, A_k), B_k)`` on the integer Σ of the user's encoded values.
    """

    def census(self) -> Census:
        """Users per (group id, k, ε level), and violation counts."""
        ...

    def rank_keys(self, queries: Sequence[RankQuery]) -> dict[RankQuery, OrderKey]:
        """Answer every rank query exactly."""
        ...

    def first_stage(self, cuts: Mapping[int, Cut]) -> FirstStage:
        """G_mean cells, G_var users and G_fin class counts of every cut group."""
        ...

    def final_stage(
        self, cuts: Mapping[int, Cut], bounds: Mapping[int, Mapping[int, tuple[int, int]]]
    ) -> dict[int, tuple[FinalCell, ...]]:
        """Per (group id, k, ε): G_fin users and Σ clamp(s_i, A_k, B_k)."""
        ...


# ---------------------------------------------------------------------------------------------
# Step "initial": DP mean of the users with the least data (Algorithm 2, Step 1; per-user ε ours)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassPrivacy:
    """What one (step, k, ε) class of users got.

    Attributes:
        step: ``"variance"``, ``"initial"`` or ``"final"``.
        k: rows per user.
        eps: the users' ε level.
        users: number of users.
        weight: per-user weight in the step's statistic (``nan`` for the variance step).
        eps_effective: the privacy loss bound actually delivered (<= eps).
    """

    step: str
    k: int
    eps: float
    users: int
    weight: float
    eps_effective: float


@dataclass(frozen=True, slots=True)
class InitialMean:
    """Output of the initial step (unit scale).

    Attributes:
        p_init: the released initial mean, clipped to [1/m, 1 - 1/m].
        alpha: (1 - β/2) bound on |p_init_raw - p| (Hoeffding on the weighted mean plus the
            exact noise tail).
        classes: per-class privacy.
    """

    p_init: float
    alpha: float
    classes: tuple[ClassPrivacy, ...]


def initial_step(
    cells: Sequence[MeanCell],
    beta: float,
    key: ReleaseKey,
    context: tuple[object, ...],
) -> InitialMean:
    """Release the initial mean of G_mean.

    Privacy:
        User i of ε level l contributes w_l·p̂_i with p̂_i = s_i/(k_i 2^31) ∈ [0, 1];
        replacing the user's rows moves the statistic by at most w_l. The noise scale
        η = max_l w_l/ε_l (exact, :func:`~hdp_spark.core.weights.normalize`) gives that
        user a loss w_l/η <= ε_l. The weights are ADPM's min(ε, τ) (Chaudhuri & Courtade,
        ISIT 2023, Algorithm 1), a function of the G_mean ε histogram only; with a single
        ε they are 1/m, η = 1/(mε).
    """
    cells = sorted(cells, key=lambda c: (c.eps, c.k))
    m = sum(c.users for c in cells)
    if m < 2:
        msg = "the initial step needs at least 2 users"
        raise InternalError(msg)
    levels = sorted({c.eps for c in cells})
    counts = [sum(c.users for c in cells if c.eps == v) for v in levels]
    phi, tau = solve_clip_level(levels, counts, 8.0)
    weights = normalize(levels, counts, phi, tau)
    w_of = dict(zip(levels, weights.w, strict=True))
    statistic = sum(
        (w_of[c.eps] * Fraction(c.total, c.k * FIXED_ONE) for c in cells), Fraction(0)
    )
    ctx = encode_context(
        (*context, "initial", tuple((c.k, c.eps, c.users, c.total) for c in cells))
    )
    draw = laplace_mechanism(
        statistic, weights.eta, min(w for w in weights.w if w > 0), key.stream(ctx)
    )
    p_init = min(max(float(draw.value), 1.0 / m), 1.0 - 1.0 / m)
    l2 = float(sum((w * w * c for w, c in zip(weights.w, counts, strict=True)), Fraction(0)))
    alpha = math.sqrt(l2 * math.log(4.0 / beta) / 2.0) + draw.half_width(beta / 2.0)
    classes = tuple(
        ClassPrivacy("initial", c.k, c.eps, c.users, float(w_of[c.eps]),
                     float(w_of[c.eps] / weights.eta))
        for c in cells
    )
    return InitialMean(p_init, alpha, classes)


# ---------------------------------------------------------------------------------------------
# Step "variance": exponential mechanism on the users with the most data (Algorithm 2, Step 2)
# ---------------------------------------------------------------------------------------------


def exponential_mechanism(scores: Sequence[int], eps: Fraction, rng: RandomSource) -> int:
    """Index t with probability exactly ∝ exp(eps · scores[t]) (scores are integers).

    Rejection sampling: propose t uniformly, accept with probability
    exp(-eps·(max score - scores[t])) <= 1, drawn by the exact CKS20 Bernoulli. The accepted
    index has probability ∝ exp(eps·scores[t]) exactly; the expected number of proposals is
    at most len(scores). (The caller passes eps/2 per unit of a sensitivity-1 score.)
    """
    if not scores:
        msg = "exponential_mechanism needs candidates"
        raise InternalError(msg)
    if eps < 0:
        msg = "exponential_mechanism needs eps >= 0"
        raise InternalError(msg)
    best = max(scores)
    while True:
        t = rng.randrange(len(scores))
        if bernoulli_exp(eps * (best - scores[t]), rng):
            return t


@dataclass(frozen=True, slots=True)
class VarianceEstimate:
    """Output of the variance step (unit scale).

    Attributes:
        s2: the released variance estimate (over-estimate by design, κ_v = 2.5).
        eps_used: the ε of the exponential mechanism (min ε over G_var), 0 if public.
        classes: per-class privacy.
    """

    s2: float
    eps_used: float
    classes: tuple[ClassPrivacy, ...]


def variance_step(
    users: Sequence[VarUser],
    k_max: int,
    key: ReleaseKey,
    context: tuple[object, ...],
) -> VarianceEstimate:
    """Release the private variance estimate (log-scale median of pair differences) from G_var.

    The users are paired in the public order (k descending, order key); d_j is the
    squared difference of the pair's means (exact rationals).

    Privacy:
        For the grid c_t = 2^-t, t = 0..J with J = ⌈log2 k_max⌉ + 8 (k_max public),
        cnt_t = #{j : d_j <= c_t} and score_t = -|cnt_t - M/2|, kept integral as
        -|2 cnt_t - M| (= 2·score). One user is in one pair, so each cnt_t moves by at most
        1: sensitivity 1. The exponential mechanism at ε_v = min ε over G_var draws t with
        P ∝ exp(ε_v·score_t/2) = exp(ε_v·(2 score_t)/4): ε_v-DP, hence <= ε_i for every
        G_var user. s2 = κ_v·c_t / (2·median(χ²₁)).
    """
    ordered = sorted(users, key=lambda u: (-u.k, u.key))
    if len(ordered) < 2:
        msg = "the variance step needs at least 2 users"
        raise InternalError(msg)
    means = [Fraction(u.total, u.k * FIXED_ONE) for u in ordered]
    pairs = len(means) // 2
    diffs = [(means[2 * j] - means[2 * j + 1]) ** 2 for j in range(pairs)]
    top = max(math.ceil(math.log2(k_max)), 0) + 8
    grid = [Fraction(1, 2**t) for t in range(top + 1)]
    scores = [-abs(2 * sum(1 for d in diffs if d <= c) - pairs) for c in grid]
    eps_v = min(u.eps for u in ordered)
    ctx = encode_context(
        (*context, "variance", k_max, eps_v,
         tuple((u.k, u.eps, u.total, u.key[0], u.key[1]) for u in ordered))
    )
    t = exponential_mechanism(scores, Fraction(eps_v) / 4, key.stream(ctx))
    s2 = KAPPA_V * float(grid[t]) / (2.0 * CHI2_MEDIAN)
    per_class: dict[tuple[int, float], int] = {}
    for u in ordered:
        per_class[(u.k, u.eps)] = per_class.get((u.k, u.eps), 0) + 1
    classes = tuple(
        ClassPrivacy("variance", k, e, c, math.nan, eps_v)
        for (k, e), c in sorted(per_class.items())
    )
    return VarianceEstimate(s2, eps_v, classes)


# ---------------------------------------------------------------------------------------------
# Weight solver: exact minimiser of the paper's eq. (6), extended to per-user ε_i (ours)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SolverResult:
    """Output of :func:`solve_user_weights`.

    Attributes:
        t: the cap T̂ (weights u_j = min(1/s_j², T̂/ρ_j)).
        u: unnormalised per-user weight of each class.
        objective: g(T̂), the proxy variance of the normalised estimator.
    """

    t: float
    u: np.ndarray = field(repr=False)
    objective: float


def proxy_objective(
    t: float, c: np.ndarray, s: np.ndarray, wn: np.ndarray, rho: np.ndarray, kappa: float
) -> float:
    """g(T) = [Σ c u² s² + κ max(u·wn)²] / (Σ c u)² with u = min(1/s², T/ρ) (direct form)."""
    u = np.minimum(1.0 / s**2, t / rho)
    num = float(np.sum(c * u * u * s * s)) + kappa * float(np.max(u * wn)) ** 2
    return num / float(np.sum(c * u)) ** 2


def solve_user_weights(
    c: Sequence[float] | np.ndarray,
    s: Sequence[float] | np.ndarray,
    wn: Sequence[float] | np.ndarray,
    rho: Sequence[float] | np.ndarray,
    kappa: float = KAPPA_L,
) -> SolverResult:
    """Exact minimiser of g(T) over T > 0 (paper eq. 6; closed form ours), O(K log K) for K classes.

    Args:
        c: users per class (> 0).
        s: σ̂ per class (> 0).
        wn: noise width per class, W_j/ε_j (>= 0; per-user ε enters here, with ε <- 1).
        rho: cap denominator per class (> 0): W_j/ε_j (width form) or σ̂_j/ε_j (paper).
        kappa: Laplace variance factor (2 exact; 1 is the paper's).

    Knots τ_j = ρ_j/s_j² (class j is capped iff T < τ_j). On [τ_(r), τ_(r+1)] the uncapped
    set is fixed, g = (a + bT²)/(A + DT)² on each side of T× = sqrt(M0/M1), and the
    minimiser of such a piece is D·a/(b·A) clamped to it. The candidates are the knots and
    these clamped points; g is evaluated in closed form per piece and the best is returned
    (ties: the smallest T). Outside [min τ, max τ] g is constant, so T̂ lies inside.
    """
    ca, sa, wa, ra = (np.asarray(x, dtype=np.float64) for x in (c, s, wn, rho))
    if ca.size == 0 or np.any(ca <= 0) or np.any(sa <= 0) or np.any(ra <= 0):
        msg = "solve_user_weights needs classes with c, s, rho > 0"
        raise InternalError(msg)
    tau = ra / sa**2
    order = np.argsort(tau, kind="stable")
    ca, sa, wa, ra, tau = ca[order], sa[order], wa[order], ra[order], tau[order]
    knots, first = np.unique(tau, return_index=True)
    q = knots.size
    last = np.append(first[1:], tau.size) - 1  # last index of each knot group
    inv = ca / sa**2
    a_pref = np.cumsum(inv)[last]
    m0_pref = np.maximum.accumulate(wa**2 / sa**4)[last]
    b_terms = ca * sa**2 / ra**2
    d_terms = ca / ra
    m1_terms = wa**2 / ra**2
    b_suf = np.append(np.cumsum(b_terms[::-1])[::-1], 0.0)
    d_suf = np.append(np.cumsum(d_terms[::-1])[::-1], 0.0)
    m1_suf = np.append(np.maximum.accumulate(m1_terms[::-1])[::-1], 0.0)
    nxt = last + 1  # first index of the capped suffix for piece r
    big_a, big_b, big_d = a_pref, b_suf[nxt], d_suf[nxt]
    m0, m1 = m0_pref, m1_suf[nxt]

    def g_piece(r: int, t: float) -> float:
        noise = kappa * max(m0[r], t * t * m1[r])
        return float((big_a[r] + big_b[r] * t * t + noise) / (big_a[r] + big_d[r] * t) ** 2)

    best_t, best_g = float(knots[0]), g_piece(0, float(knots[0]))
    for r in range(q):
        cands = [float(knots[r])]
        if r + 1 < q:
            lo, hi = float(knots[r]), float(knots[r + 1])
            pts = [lo, hi]
            if m0[r] > 0 and m1[r] > 0:
                cross = math.sqrt(m0[r] / m1[r])
                if lo < cross < hi:
                    pts = [lo, cross, hi]
            for left, right in itertools.pairwise(pts):
                mid = (left + right) / 2
                if m0[r] >= mid * mid * m1[r]:
                    pa, pb = big_a[r] + kappa * m0[r], big_b[r]
                else:
                    pa, pb = big_a[r], big_b[r] + kappa * m1[r]
                if big_a[r] > 0 and pb > 0:
                    cands.append(min(max(big_d[r] * pa / (pb * big_a[r]), left), right))
        for t in cands:
            gv = g_piece(r, t)
            if gv < best_g or (gv == best_g and t < best_t):
                best_t, best_g = t, gv
    u = np.minimum(1.0 / sa**2, best_t / ra)
    out = np.empty_like(u)
    out[order] = u
    return SolverResult(float(best_t), out, float(best_g))


# ---------------------------------------------------------------------------------------------
# Step "final": weighted, clipped sum of G_fin (Algorithm 2, Steps 3-10; per-user ε ours)
# ---------------------------------------------------------------------------------------------


def concentration(k: int, n: int, s2: float, beta: float, tau_d: float) -> float:
    """f^k(n, s2, β): Hoeffding (within user) + sub-Gaussian (between users), union bound.

    The paper leaves the concentration function f_D^k of Algorithm 2 to an appendix; this form
    is ours. Privacy does not depend on f (it only sets the clip intervals, whose exact
    widths enter the noise), only the bias does."""
    log_term = math.log(4.0 * n / beta)
    return math.sqrt(log_term / (2.0 * k)) + math.sqrt(2.0 * tau_d * s2 * log_term)


@dataclass(frozen=True, slots=True)
class FinalDesign:
    """Everything the final step fixes before the engine's clamped sums.

    Attributes:
        classes: (k, ε) of each G_fin class, in the order of the other fields.
        users: users per class.
        bounds: per k, the integer clamp [A_k, B_k] of s_i (A_k = ⌈â_k k 2^31⌉,
            B_k = ⌊b̂_k k 2^31⌋, [â_k, b̂_k] = p_init ± (α + f^k) ∩ [0, 1]).
        widths: exact widths W_j = (B_k - A_k)/(k 2^31) per class.
        sigma: σ̂ per class (s2 clamp below applied).
        weights: exact u_j per class (the solver's floats, as rationals).
        t: the solver's T̂.
        cap: the cap form.
        z: exact Z = Σ_j c_j u_j.
        sensitivity: exact d_j = u_j W_j / Z per class (one user's largest move).
        scale: exact noise scale b = max_j d_j / ε_j.
        digest: SHA-256 of the canonical encoding of everything above (the noise context
            binds to it, so two designs never share noise).
    """

    classes: tuple[tuple[int, float], ...]
    users: tuple[int, ...]
    bounds: Mapping[int, tuple[int, int]]
    widths: tuple[Fraction, ...]
    sigma: tuple[float, ...]
    weights: tuple[Fraction, ...]
    t: float
    cap: str
    z: Fraction
    sensitivity: tuple[Fraction, ...]
    scale: Fraction
    digest: bytes = field(repr=False)


def design_final(
    fin_counts: Mapping[tuple[int, float], int],
    n: int,
    p_init: float,
    alpha: float,
    s2: float,
    spec: UserMeanSpec,
) -> FinalDesign:
    """Per-class σ̂, clip intervals, widths and weights of G_fin (driver, no data).

    σ̂_k² = p(1-p)/k + (1 - 1/k)·min(s2, p(1-p)) (clamp for the weights only, since
    σ_p² <= p(1-p) by the paper's Lemma 2.1; the unclamped s2 goes into f). For values in
    [0, 1] that are not Bernoulli, p(1-p) bounds the mean within-user variance from above,
    so σ̂ stays a valid (conservative) scale.
    """
    classes = tuple(sorted(fin_counts))
    users = tuple(fin_counts[c] for c in classes)
    pq = p_init * (1.0 - p_init)
    s2w = min(s2, pq)
    bounds: dict[int, tuple[int, int]] = {}
    for k in sorted({k for k, _ in classes}):
        f = concentration(k, n, s2, spec.beta, spec.tau_d)
        lo = max(p_init - alpha - f, 0.0)
        hi = min(p_init + alpha + f, 1.0)
        scale = k * FIXED_ONE
        a_int = math.ceil(Fraction(lo) * scale)
        b_int = max(math.floor(Fraction(hi) * scale), a_int)
        bounds[k] = (a_int, b_int)
    widths = tuple(Fraction(bounds[k][1] - bounds[k][0], k * FIXED_ONE) for k, _ in classes)
    sigma = tuple(math.sqrt(pq / k + (1.0 - 1.0 / k) * s2w) for k, _ in classes)
    eps = np.array([e for _, e in classes], dtype=np.float64)
    w_float = np.array([float(w) for w in widths], dtype=np.float64)
    s_arr = np.array(sigma, dtype=np.float64)
    wn = w_float / eps
    base = w_float if spec.cap == "width" else s_arr
    rho = np.maximum(base, 1e-300) / eps
    sol = solve_user_weights(users, s_arr, wn, rho, KAPPA_L)
    weights = tuple(Fraction(float(x)) for x in sol.u)
    z = sum((u * c for u, c in zip(weights, users, strict=True)), Fraction(0))
    sens = tuple(u * width / z for u, width in zip(weights, widths, strict=True))
    scale = max(d / Fraction(e) for d, (_, e) in zip(sens, classes, strict=True))
    digest = hashlib.sha256(encode_context(
        (spec.cap, sol.t, classes, users, tuple(sorted(bounds.items())), weights, z, scale)
    )).digest()
    return FinalDesign(classes, users, bounds, widths, sigma, weights, sol.t, spec.cap, z, sens,
                       scale, digest)


@dataclass(frozen=True, slots=True)
class FinalRelease:
    """Output of the final step (unit scale)."""

    value: float
    scale: float
    half_width: float
    classes: tuple[ClassPrivacy, ...]


def final_step(
    design: FinalDesign,
    cells: Sequence[FinalCell],
    beta: float,
    key: ReleaseKey,
    context: tuple[object, ...],
) -> FinalRelease:
    """Release S/Z + Lap(b) for G_fin.

    Privacy:
        With Z = Σ_j c_j u_j (a function of the public class counts and of the design),
        the statistic is Σ_j u_j Σ_{i∈j} clamp(s_i, A_k, B_k) / (k 2^31 Z). Replacing one
        user of class j moves it by at most d_j = u_j W_j / Z (its clamped mean stays in
        [A_k, B_k]/(k 2^31), of exact width W_j). Noise scale b = max_j d_j/ε_j (exact):
        the loss of class j is d_j/b <= ε_j (on the original widths; with one
        ε, b = Λ/ε with Λ = max_j w_j W_j, the paper's noise).
    """
    by_class = {(c.k, c.eps): c for c in cells}
    if set(by_class) != set(design.classes):
        msg = "final cells do not match the design's classes"
        raise InternalError(msg)
    for cls, count in zip(design.classes, design.users, strict=True):
        if by_class[cls].users != count:
            msg = "the G_fin class counts changed between passes; cache the input table"
            raise InternalError(msg)
    z, sens, scale = design.z, design.sensitivity, design.scale
    statistic = Fraction(0)
    for (k, eps), u in zip(design.classes, design.weights, strict=True):
        statistic += u * Fraction(by_class[(k, eps)].total, k * FIXED_ONE)
    statistic /= z
    positive = [d for d in sens if d > 0]
    ctx = encode_context(
        (*context, "final", design.digest,
         tuple((k, e, by_class[(k, e)].users, by_class[(k, e)].total) for k, e in design.classes))
    )
    draw = laplace_mechanism(
        statistic, scale, min(positive) if positive else Fraction(1), key.stream(ctx)
    )
    classes = tuple(
        ClassPrivacy("final", k, e, c, float(u / z), float(d / scale) if scale > 0 else 0.0)
        for (k, e), c, u, d in zip(design.classes, design.users, design.weights, sens,
                                   strict=True)
    )
    return FinalRelease(float(draw.value), float(draw.scale), draw.half_width(beta), classes)


# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


USER_MEAN_FIELDS: tuple[tuple[str, str], ...] = (
    ("", "float"),
    ("_noise_scale", "float"),
    ("_ci_low", "float"),
    ("_ci_high", "float"),
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
            self.estimate, self.noise_scale, self.ci_low, self.ci_high, self.users, self.rows,
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
        mid, 0.0, float(spec.lower), float(spec.upper), plan.users, plan.rows, 0, 0, 0,
        plan.excluded, nan, nan, nan, spec.cap, 0.0, 0.0, 0.0, True, (),
    )


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
    census = backend.census()
    census.check(spec)
    plans = {gid: plan_group(census.cells.get(gid, ()), spec) for gid in range(len(keys))}
    queries = [q for gid, p in plans.items() for q in p.queries(gid)]
    answers = backend.rank_keys(queries) if queries else {}
    cuts = {gid: p.cut(gid, answers) for gid, p in plans.items() if not p.fallback}
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
        lo, hi = estimate - half, estimate + half
        if spec.clip_output:
            estimate = min(max(estimate, lower), float(spec.upper))
            lo, hi = max(lo, lower), min(hi, float(spec.upper))
        s2_unit = var.s2 if var else float(spec.public_variance or 0.0) / span**2
        classes = (var.classes if var else ()) + init.classes + fin.classes
        results[keys[gid]] = UserMeanResult(
            estimate=estimate,
            noise_scale=span * fin.scale,
            ci_low=min(lo, estimate),
            ci_high=max(hi, estimate),
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

