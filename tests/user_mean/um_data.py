"""Data generators and recording helpers shared by the user-mean tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.core import user_mean as core
from hdp_spark.core.noise import LaplaceDraw
from hdp_spark.core.user_mean import steps as um_steps


def example1(
    n: int, *, p: float = 0.5, seed: int = 0, eps: float | np.ndarray = 1.0,
    sigma_p: float | None = None, k: np.ndarray | None = None,
) -> pd.DataFrame:
    """Spec §4.2 B1: p_i ~ Beta (mean p, sd sigma_p, default 1/sqrt(n)), k_i = ceil(n/i),
    Bernoulli rows; ``eps`` is a scalar or one value per user."""
    rng = np.random.default_rng(seed)
    if k is None:
        k = np.ceil(n / np.arange(1, n + 1)).astype(np.int64)
    sp2 = 1.0 / n if sigma_p is None else sigma_p**2
    if sp2 > 0:
        t = p * (1 - p) / sp2 - 1
        pi = rng.beta(p * t, (1 - p) * t, size=n)
    else:
        pi = np.full(n, p)
    user = np.repeat(np.arange(n), k)
    x = (rng.random(user.size) < pi[user]).astype(np.float64)
    e = np.broadcast_to(np.asarray(eps, dtype=np.float64), (n,))[user]
    return pd.DataFrame({"user": user, "x": x, "eps": e})


def sorted_census(c: core.Census) -> tuple[Any, ...]:
    cells = tuple(sorted((g, tuple(sorted((x.k, x.eps, x.users) for x in v)))
                         for g, v in c.cells.items()))
    return (cells, c.invalid_eps_users, c.mixed_eps_users, c.below_grid_users,
            c.mixed_group_users, c.null_user_rows)


@dataclass
class Recorder:
    """Wraps an engine backend and keeps every table it hands to the driver."""

    inner: Any
    log: dict[str, Any] = field(default_factory=dict)

    def census(self) -> core.Census:
        out = self.inner.census()
        self.log["census"] = sorted_census(out)
        return out

    def rank_keys(self, queries: Any) -> Any:
        out = self.inner.rank_keys(queries)
        self.log["rank"] = sorted(out.items(), key=lambda kv: (kv[0].gid, kv[0].k, kv[0].rank))
        return out

    def first_stage(self, cuts: Any) -> core.FirstStage:
        out = self.inner.first_stage(cuts)
        self.log["cuts"] = sorted(cuts.items())
        self.log["mean"] = sorted((g, tuple(sorted(v, key=lambda c: (c.k, c.eps))))
                                  for g, v in out.mean.items())
        self.log["var"] = sorted((g, tuple(sorted(v, key=lambda u: u.key)))
                                 for g, v in out.var.items())
        self.log["fin_counts"] = sorted((g, sorted(v.items())) for g, v in out.fin_counts.items())
        return out

    def final_stage(self, cuts: Any, bounds: Any) -> Any:
        out = self.inner.final_stage(cuts, bounds)
        self.log["bounds"] = sorted((g, sorted(b.items())) for g, b in bounds.items())
        self.log["final"] = sorted((g, tuple(sorted(v, key=lambda c: (c.k, c.eps))))
                                   for g, v in out.items())
        return out


@dataclass
class LaplaceSpy:
    """Records (step, statistic, scale, min sensitivity) of every Laplace draw."""

    calls: list[tuple[Fraction, Fraction, Fraction]] = field(default_factory=list)

    def install(self, monkeypatch: Any) -> LaplaceSpy:
        real = um_steps.laplace_mechanism

        def spy(value: Fraction, scale: Fraction, dmin: Fraction, rng: Any) -> LaplaceDraw:
            self.calls.append((value, scale, dmin))
            return real(value, scale, dmin, rng)

        monkeypatch.setattr(um_steps, "laplace_mechanism", spy)
        return self
