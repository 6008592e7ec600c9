"""User-level mean: the specification (:class:`UserMeanSpec`, :func:`hdp_user_mean`)
and the pipeline constants.

Privacy-critical: part of the user-level mean (Algorithm 2 of Cummings, Feldman, McMillan &
Talwar, NeurIPS 2022, §4.2); the privacy argument of the whole pipeline is in the package
docstring of :mod:`hdp_spark.core.user_mean`.
Here: the parameter checks and the constants κ_l,
κ_v that scale the noise-free parts of the design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import check_bounds, check_column_name, check_eps_grid
from hdp_spark.core.validation import number
from hdp_spark.errors import ParameterError

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
    return number(name, value)


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
        check_eps_grid(self.eps_grid)
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


