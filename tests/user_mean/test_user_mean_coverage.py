"""Monte Carlo coverage of the user-level mean's released interval (issue 48).

``ci_low``/``ci_high`` must hold the table's own statistic, the plain mean of the group's
users' own means, with probability >= 1 - β on every data set: they are the final noise's
interval widened by ``bias_bound`` (users outside the final step, weights by k and ε,
clipping; proof in ``hdp_spark/core/user_mean/bias.py``). ``noise_ci_low``/
``noise_ci_high`` are the final noise's interval alone.

Each mix is GROUPS groups of one release on the pandas engine (distinct users per group,
each group a data set drawn afresh from the mix; the noise is independent between groups,
the group key enters every noise context). Each group's interval holds its own mean
w.p. >= 1 - β whatever the data, so the misses are at most Binomial(GROUPS, β) in the
stochastic order and exceed :func:`~tests.audit_stats.max_count` with probability <= 1e-6
(stated beside each assertion). Mixes, chosen against the estimator:

* ``independent``: ε ∈ {0.25, 1, 4} by thirds of users, rates Beta(2, 5) independent of ε
  and k (n = 300 users, k uniform on 1..12 rows each, as below);
* ``eps-comonotone``: ε ∈ {0.25, 1, 4} by thirds of users, the ε = 0.25 users' rows all 0,
  the others' all 1 (weights follow ε);
* ``k-comonotone``: users with 1-2 rows all at 1, users with more rows all at 0 (the final
  step never reads the users with the least data: they are G_mean);
* ``rank-0.5``: ε log-uniform on [0.05, 5], each user's rate from a Gaussian copula with
  Spearman 0.5 with ε, k uniform on 1..12, rows Bernoulli(rate) (n = 300 users);
* ``small-60``: ``rank-0.5`` with 60 users.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from audit_stats import max_count, seed
from scipy import stats as sps

import hdp_spark.pandas as hpd
from hdp_spark import hdp_user_mean

BETA = 0.05
GROUPS = 120
MIXES = ("independent", "eps-comonotone", "k-comonotone", "rank-0.5", "small-60")

pytestmark = [pytest.mark.statistical, pytest.mark.filterwarnings("ignore::UserWarning")]


def _group(mix: str, g: int, rng: np.random.Generator) -> pd.DataFrame:
    n = 60 if mix == "small-60" else 300
    k = rng.integers(1, 13, n)
    if mix == "independent":
        eps = np.array([0.25, 1.0, 4.0])[np.arange(n) % 3]
        rate = rng.beta(2.0, 5.0, n)
    elif mix == "eps-comonotone":
        eps = np.array([0.25, 1.0, 4.0])[np.arange(n) % 3]
        rate = np.where(eps == 0.25, 0.0, 1.0)
    elif mix == "k-comonotone":
        eps = np.array([0.25, 1.0, 4.0])[np.arange(n) % 3]
        rate = np.where(k <= 2, 1.0, 0.0)
    else:
        rho = 2.0 * math.sin(math.pi * 0.5 / 6.0)
        z1 = rng.standard_normal(n)
        z2 = rho * z1 + math.sqrt(1 - rho * rho) * rng.standard_normal(n)
        eps = np.exp(math.log(0.05) + math.log(100.0) * sps.norm.cdf(z1))
        rate = sps.norm.cdf(z2)
    user = np.repeat(np.arange(n), k)
    return pd.DataFrame({"g": g, "user": [f"{g}-{u}" for u in user],
                         "x": (rng.random(len(user)) < rate[user]).astype(float),
                         "eps": eps[user]})


def _coverage(mix: str) -> dict[str, Any]:
    rng = np.random.default_rng(4848)
    df = pd.concat([_group(mix, g, rng) for g in range(GROUPS)], ignore_index=True)
    truth = df.groupby(["g", "user"])["x"].mean().groupby("g").mean()
    spec = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1, beta=BETA)
    out = hpd.user_mean(df, spec, by="g", keys=list(range(GROUPS)),
                        unsafe_seed=seed(f"user-mean-cover-{mix}"))
    p = spec.name
    t = out["g"].map(truth).to_numpy()
    honest = (out[f"{p}_ci_low"] <= t) & (t <= out[f"{p}_ci_high"])
    noise = (out[f"{p}_noise_ci_low"] <= t) & (t <= out[f"{p}_noise_ci_high"])
    return {"honest_misses": int((~honest).sum()), "noise_misses": int((~noise).sum()),
            "fallbacks": int(out[f"{p}_fallback"].sum()),
            "bias": float(out[f"{p}_bias_bound"].median()),
            "half": float(((out[f"{p}_ci_high"] - out[f"{p}_ci_low"]) / 2).median())}


@pytest.mark.parametrize("mix", MIXES)
def test_user_mean_interval_covers_the_users_mean(mix: str) -> None:
    c = _coverage(mix)
    # misses <= Binomial(GROUPS, β) stochastically: above max_count w.p. <= 1e-6
    assert c["honest_misses"] <= max_count(GROUPS, BETA), c
    assert c["fallbacks"] == 0, c  # the mixes exercise the estimator, not its fallback


@pytest.mark.parametrize("mix", ["eps-comonotone", "k-comonotone", "rank-0.5"])
def test_the_noise_interval_alone_misses_on_these_mixes(mix: str) -> None:
    """Power: the final noise's interval misses the users' mean in 119-120 of the 120
    groups of these mixes (measured: the users the final step does not read, or weights that
    follow ε, move its statistic by many noise half-widths); the threshold max_count(120, β) = 20
    is so far below that a fresh key falls under it with probability < 1e-6."""
    c = _coverage(mix)
    assert c["noise_misses"] > max_count(GROUPS, BETA), c
