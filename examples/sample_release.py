"""Release private mean salaries per department from the bundled sample table (pandas).

Run (from the repository root, after `bash scripts/run-sample.sh` or `bash scripts/test.sh`
created .venv): .venv/bin/python examples/sample_release.py

(`bash scripts/run-sample.sh` runs the scheduled job on the same table instead: see README.)
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import hdp_spark.pandas as hpd

ROOT = Path(__file__).resolve().parents[1]
DEPARTMENTS = ["engineering", "finance", "operations", "research", "sales", "legal"]


def main() -> None:
    table = pd.read_csv(ROOT / "data" / "employees.csv")
    result = hpd.agg(
        table,
        hpd.hdp_mean("salary", eps="eps", lower=0, upper=250_000, alias="salary_mean"),
        by="dept",
        keys=DEPARTMENTS,  # public key set: "legal" has no rows and still gets a row
    )
    cols = ["dept", "salary_mean", "salary_mean_ci_low", "salary_mean_ci_high",
            "salary_mean_n", "salary_mean_tau", "salary_mean_fallback"]
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(result[cols].to_string(index=False))


if __name__ == "__main__":
    main()
