"""A job's published mean carries the release API's ``bias_bound`` and honest interval for
the same data, spec and key (issue 48)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from job_helpers import DATA, GROUPED_RELEASE, write_job

import hdp_spark.pandas as hpd
from hdp_spark.jobs import run_job

DEPTS = ["engineering", "finance", "operations", "research", "sales"]


def test_job_outputs_equal_the_release_api(tmp_path: Path) -> None:
    run = run_job(write_job(tmp_path, releases=GROUPED_RELEASE, seed="intervals"))
    release = next(r for r in run.releases if r.release_id == "salary_by_dept")
    got = pd.read_parquet(release.path / "values.parquet").set_index("dept")
    # the job's first release on a fresh ledger: every ε capped to the budget (4)
    table = pd.read_csv(DATA)
    table["eps"] = table["eps"].astype(float).clip(upper=4.0)
    want = hpd.agg(table, hpd.hdp_mean("salary", eps="eps", lower=20000, upper=250000),
                   by="dept", keys=DEPTS,
                   unsafe_seed="intervals/salary_by_dept/mean").set_index("dept")
    cols = ["salary_mean", "salary_mean_ci_low", "salary_mean_ci_high",
            "salary_mean_bias_bound"]
    assert got.loc[DEPTS, cols].equals(want.loc[DEPTS, cols])
    assert (got["salary_mean_bias_bound"] > 0).all()
    half = (got["salary_mean_ci_high"] - got["salary_mean_ci_low"]) / 2
    assert (half > got["salary_mean_bias_bound"]).all()
