"""Two processes at once on one ledger: nobody is overspent, nothing is charged twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from job_helpers import REPO, records, spent_by_user, write_job

from hdp_spark.core.ledger import floor_units
from hdp_spark.jobs import run_job

BUDGET = 1.0


def start(job: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "HDP_FAULT_AT"}
    return subprocess.Popen(
        [sys.executable, "-m", "hdp_spark.jobs", "run", str(job), "-q"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_two_jobs_share_one_ledger(tmp_path: Path, backend: str) -> None:
    ledger = tmp_path / ("ledger.sqlite" if backend == "sqlite" else "ledger")
    jobs = [
        write_job(tmp_path, filename=f"{n}.toml", name=n, backend=backend, ledger=ledger,
                  out=tmp_path / n, budget=f"default = {BUDGET}")
        for n in ("job_a", "job_b")
    ]
    procs = [start(j) for j in jobs]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    recs = records(jobs[0])
    assert sorted((r.job, r.release_id) for r in recs) == sorted(
        (j, r) for j in ("job_a", "job_b") for r in ("salary_by_dept", "tenure_overall")
    )
    spent = spent_by_user(jobs[0])
    assert max(spent.values()) <= floor_units(BUDGET)  # never overspent
    assert sum(spent.values()) == sum(r.units_charged for r in recs)
    # the budget was tight: the runs that came later had to cap users
    later = [r.outcome_data()["budget"]["users_capped"] for r in recs[1:]]
    assert max(later) > recs[0].outcome_data()["budget"]["users_capped"]


def test_same_job_twice_at_once_commits_once(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    procs = [start(job), start(job)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outs.append(out)
    assert len(records(job)) == 2
    statuses = " ".join(outs)
    assert statuses.count(": committed") == 2  # each release computed by one process
    assert statuses.count(": republished") == 2  # and re-published by the other
    reference = tmp_path / "reference"
    reference.mkdir()
    fresh = write_job(reference)
    run_job(fresh)
    assert spent_by_user(job) == spent_by_user(fresh)
