"""Regenerate the sample tables of the all-kinds jobs (synthetic, fixed seed).

* ``data/people.csv``: one row per person: user id, region (public group attribute), age
  band, sex, occupation (attributes of the partial-DP releases), income, the person's
  central-DP demand ``eps``, and a satisfaction score in [0, 10] that the person's device
  already randomized with the Laplace LDP randomizer at ε ``ldp_eps`` (column
  ``satisfaction_report``; the raw score is not in the table).
* ``data/events.csv``: several rows per user (the same user ids): region, whether an
  impression was clicked (0/1), and the user's ε (constant within a user).

    python scripts/make_kinds_data.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hdp_spark.ldp import laplace

N = 2000
REGIONS = ["north", "south", "east", "west"]
AGES = ["18-29", "30-44", "45-64", "65+"]
SEXES = ["F", "M"]
OCCUPATIONS = ["clerical", "manual", "professional", "service"]
EPS_TIERS = [0.25, 0.5, 1.0, 2.0]
EPS_PROBS = [0.2, 0.35, 0.3, 0.15]
LDP_TIERS = [0.25, 0.5, 1.0]


def main() -> None:
    rng = np.random.default_rng(20261216)  # design-ok: synthetic sample data, not noise
    uid = np.arange(1, N + 1)
    region = rng.choice(REGIONS, N, p=[0.4, 0.3, 0.2, 0.1])
    age = rng.choice(AGES, N, p=[0.3, 0.35, 0.25, 0.1])
    sex = rng.choice(SEXES, N)
    occupation = np.where(
        rng.random(N) < 0.55, "professional",
        rng.choice(OCCUPATIONS, N, p=[0.3, 0.3, 0.1, 0.3]),
    )
    income = np.exp(10.6 + 0.4 * (occupation == "professional") + rng.normal(0, 0.3, N))
    eps = rng.choice(EPS_TIERS, N, p=EPS_PROBS)
    ldp_eps = rng.choice(LDP_TIERS, N)
    satisfaction = np.clip(rng.normal(6.5, 2.0, N), 0, 10)
    report = laplace(satisfaction, ldp_eps, lower=0.0, upper=10.0, unsafe_seed="sample-ldp")
    people = pd.DataFrame({
        "user_id": uid, "region": region, "age_band": age, "sex": sex,
        "occupation": occupation, "income": income.round(0), "eps": eps,
        "satisfaction_report": report.round(6), "ldp_eps": ldp_eps,
    })
    k = 1 + rng.poisson(4, N)  # impressions per user
    rows = np.repeat(np.arange(N), k)
    p_click = np.clip(0.05 + 0.1 * (region[rows] == "north") + rng.normal(0, 0.02, rows.size),
                      0, 1)
    events = pd.DataFrame({
        "user_id": uid[rows], "region": region[rows],
        "clicked": (rng.random(rows.size) < p_click).astype(int), "eps": eps[rows],
    })
    root = Path(__file__).resolve().parents[1] / "data"
    people.to_csv(root / "people.csv", index=False)
    events.to_csv(root / "events.csv", index=False)


if __name__ == "__main__":
    main()
