"""Regenerate the bundled sample table ``data/employees.csv`` (synthetic, fixed seed).

One row per employee: a user id, a department and region (public group attributes), a job
family (categorical), a salary (with a few nulls and out-of-range values), and each
employee's privacy demand ε (a few tiers, some public rows with ε = inf).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

N = 5000
DEPTS = ["engineering", "finance", "operations", "research", "sales"]
REGIONS = ["north", "south", "east", "west", "central", "coastal", "mountain", "islands"]
FAMILIES = ["analyst", "engineer", "manager", "scientist", "support", "director"]
EPS_TIERS = [0.1, 0.5, 1.0, 2.0, float("inf")]
EPS_PROBS = [0.15, 0.35, 0.3, 0.15, 0.05]


def main() -> None:
    rng = np.random.default_rng(20261125)  # design-ok: synthetic sample data, not noise
    dept = rng.choice(DEPTS, N, p=[0.35, 0.1, 0.2, 0.15, 0.2])
    base = {"engineering": 11.6, "finance": 11.4, "operations": 11.0, "research": 11.5,
            "sales": 11.1}
    salary = np.exp(np.array([base[d] for d in dept]) + rng.normal(0, 0.35, N)).round(0)
    salary[rng.choice(N, 20, replace=False)] = np.nan
    salary[rng.choice(N, 5, replace=False)] = 1_000_000.0
    frame = pd.DataFrame(
        {
            "user_id": np.arange(1, N + 1),
            "dept": dept,
            "region": rng.choice(REGIONS, N),
            "job_family": rng.choice(FAMILIES, N, p=[0.2, 0.3, 0.15, 0.15, 0.15, 0.05]),
            "salary": salary,
            "tenure_years": rng.integers(0, 31, N),
            "eps": rng.choice(EPS_TIERS, N, p=EPS_PROBS),
        }
    )
    out = Path(__file__).resolve().parents[1] / "data" / "employees.csv"
    frame.to_csv(out, index=False)
    print(f"wrote {len(frame)} rows to {out}")


if __name__ == "__main__":
    main()
