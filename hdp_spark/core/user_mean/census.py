"""User-level mean: the public census, the order key and the group plan (G_var, G_mean,
G_fin are cut from public facts only: k, ε, user id with a public salt).

Privacy-critical: part of the user-level mean (Algorithm 2 of Cummings, Feldman, McMillan &
Talwar, NeurIPS 2022, §4.2); the privacy argument of the whole pipeline is in the package
docstring of :mod:`hdp_spark.core.user_mean`.
Here: the group split that makes the three steps disjoint.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hdp_spark.core.user_mean.spec import (
    HASH_HEX,
    K_NONE,
    KEY_ALL,
    MIN_USERS,
    OrderKey,
    UserMeanSpec,
)
from hdp_spark.errors import EpsilonColumnError, SchemaError

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


