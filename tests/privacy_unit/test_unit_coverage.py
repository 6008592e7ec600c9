"""Monte Carlo coverage of the intervals released under a privacy unit (issue 50), end to end
on the pandas engine, on events tables the mechanism's own tests did not shape: continuous
ε that varies within a person (their smallest counts), values and categories that follow
ε, persons with one row and persons with hundreds, a country holding ~2 % of the rows.

Under a unit the statistics divide by a noisy weight (``hdp_spark/core/privacy_unit/
weights.py``), so the noise interval (``noise_ci_low``/``noise_ci_high``) claims to hold,
with probability >= 1 - β, the k-weighted statistic of the rows the bounding rule kept
(k_p = the steps of the person's per-(person, group) ε, each of their kept rows), and
``ci_low``/``ci_high`` hold the plain statistic on every data set (they are the range).
Here the kept rows are the ones the release itself read (the engine's ``bounded`` frame,
recorded), and the weighted truth is recomputed from them and the person's ε alone: the
cell tables, the weights and the interval are all under test. Misses above
:func:`~audit_stats.max_count` have probability <= 1e-6 each (stated beside each
assertion); the keys are seeded unless ``HDP_TEST_FRESH_KEYS=1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from audit_stats import max_count, seed

import hdp_spark.pandas as hpd
from hdp_spark.core.kernels import release_specs
from hdp_spark.core.privacy_unit import PrivacyUnit
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.privacy_unit.weights import unit_selection
from hdp_spark.pandas.engine import PandasEngine

pytestmark = [pytest.mark.statistical]

KEYS = ["DE", "FR", "IT", "PT"]
CATS = ["a", "b", "c"]
LOWER, UPPER = 0.0, 500.0
BETA = 0.05
REPS = 150


def _events(kind: str, seed_: int = 0) -> pd.DataFrame:
    """An events table: ~1,200 persons, rows per person geometric (mean 3) and 1 % heavy
    persons with 150-400 rows; a person's rows spread over countries (PT ~2 % of rows);
    ``follow``: ε_p log-uniform on [0.05, 5], each row's ε = ε_p·U(1, 3) (the person's
    smallest row is near ε_p), amounts and categories rank-correlated with log ε;
    ``levels``: three ε levels per person, values independent of ε."""
    rng = np.random.default_rng(seed_)
    persons = 1200
    rows = rng.geometric(1 / 3, persons)
    heavy = rng.random(persons) < 0.01
    rows[heavy] = rng.integers(150, 400, heavy.sum())
    uid = np.repeat(np.arange(persons), rows)
    n = len(uid)
    if kind == "follow":
        eps_p = np.exp(rng.uniform(np.log(0.05), np.log(5.0), persons))
        eps = eps_p[uid] * rng.uniform(1.0, 3.0, n)
        z = 0.9 * (np.log(eps_p[uid]) - np.log(0.5)) / 1.3 + rng.normal(0, 1, n)
        amount = UPPER / (1 + np.exp(-z))
        category = np.where(z > 0.7, "a", np.where(z > -0.5, "b", "c"))
    else:
        eps_p = rng.choice([0.1, 1.0, 4.0], persons)
        eps = eps_p[uid]
        amount = rng.uniform(LOWER, UPPER, n)
        category = rng.choice(CATS, n)
    home = rng.choice(KEYS, persons, p=[0.45, 0.35, 0.18, 0.02])
    away = rng.random(n) < 0.3
    country = np.where(away, rng.choice(KEYS, n, p=[0.4, 0.3, 0.28, 0.02]), home[uid])
    return pd.DataFrame({"user_id": uid.astype(np.int64), "country": country,
                         "amount": amount, "category": category, "eps": eps})


class _Recording(PandasEngine):
    """The pandas engine, keeping the frame the release read under the unit."""

    kept: pd.DataFrame | None = None

    def bounded(self, *args: Any, **kwargs: Any) -> PandasEngine:
        out = super().bounded(*args, **kwargs)
        _Recording.kept = out.df
        return out


def _truths(kept: pd.DataFrame, unit: PrivacyUnit) -> dict[str, dict[str, Any]]:
    """Per country, the k-weighted mean and frequencies of the kept rows, from their
    person's ε (the ``eps`` column of the kept rows) alone."""
    selection = unit_selection(unit, KEYS)
    k = np.array([float(selection.units(float(e))) for e in kept["eps"]])
    x = kept["amount"].clip(LOWER, UPPER).to_numpy()
    out: dict[str, dict[str, Any]] = {}
    for c in KEYS:
        at = (kept["country"] == c).to_numpy()
        w = k[at].sum()
        cats = kept["category"].to_numpy()[at]
        out[c] = {"mean": float((k[at] * x[at]).sum() / w),
                  "bins": [float(k[at][cats == j].sum() / w) for j in CATS]}
    return out


@pytest.mark.parametrize("kind", ["follow", "levels"])
def test_noise_intervals_under_a_unit_hold_the_weighted_statistics(kind: str) -> None:
    df = _events(kind)
    unit = PrivacyUnit("user_id", 2, 3)
    specs = (hpd.hdp_mean("amount", eps="eps", lower=LOWER, upper=UPPER, beta=BETA),
             hpd.hdp_histogram("category", eps="eps", categories=CATS, beta=BETA))
    mean_misses, bin_misses, plain_misses, released = 0, 0, 0, 0
    plain = df.groupby("country")["amount"].mean()
    for i in range(REPS):
        _Recording.kept = None
        r = release_specs(_Recording(df), specs, by="country", keys=KEYS,
                          unsafe_seed=seed(f"pu-cover-{kind}-{i}"), unit=UnitOptions(unit))
        kept = _Recording.kept
        assert kept is not None
        assert len(kept) < len(df)  # the rule dropped rows
        truth = _truths(kept, unit)
        for c in KEYS:
            m = r.results[specs[0].name][(c,)]
            h = r.results[specs[1].name][(c,)]
            released += 1
            mean_misses += not (m.noise_ci_low <= truth[c]["mean"] <= m.noise_ci_high)
            assert (m.ci_low, m.ci_high) == (LOWER, UPPER)  # the range: holds every mean
            plain_misses += not (m.noise_ci_low <= plain[c] <= m.noise_ci_high)
            for j, (lo, hi) in enumerate(h.noise_intervals[:len(CATS)]):
                bin_misses += not (lo <= truth[c]["bins"][j] <= hi)
    n = REPS * len(KEYS)
    # each group's interval misses w.p. <= β, independently over the releases' keys (the
    # groups of one release are independent draws too): above max_count w.p. <= 1e-6
    assert mean_misses <= max_count(n, BETA), (mean_misses, n)
    # bins: per bin <= Binomial(n, β); union over the 3 bins, w.p. <= 1e-6 in total
    assert bin_misses <= len(CATS) * max_count(n, BETA, 1e-6 / len(CATS)), (bin_misses, n)
    if kind == "follow":
        # power: the weighting moves the statistic off the plain per-country mean (rows
        # with small ε weigh less and have small amounts; heavy persons' rows are cut):
        # the noise interval is not the group's interval, as the docs say. Measured on the
        # seeded keys: 363 of 600 miss the plain mean (430 the kept rows' unweighted mean),
        # 3 the weighted one; 6 and 9 of 600 and 1,800 on ``levels``
        assert plain_misses > max_count(n, BETA), (plain_misses, n)
    assert released == n
