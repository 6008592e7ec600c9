"""Re-running a committed release re-publishes it: same numbers, nothing charged twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
from job_helpers import DATA, GLOBAL_RELEASE, GROUPED_RELEASE, records, spent_by_user, write_job

from hdp_spark.jobs import run_job


def test_rerun_republishes_without_charging(sample_job: Path) -> None:
    first = run_job(sample_job)
    spent = spent_by_user(sample_job)
    second = run_job(sample_job)
    assert [r.status for r in second.releases] == ["republished", "republished"]
    for a, b in zip(first.releases, second.releases, strict=True):
        assert a.record == b.record
        assert a.path == b.path
        assert first.values(a.release_id) == second.values(b.release_id)
    assert spent_by_user(sample_job) == spent
    assert len(records(sample_job)) == 2


def test_missing_outputs_are_rematerialized_identically(sample_job: Path) -> None:
    first = run_job(sample_job)
    path = first.releases[0].path
    before = (path / "values.json").read_text()
    parquet = pd.read_parquet(path / "values.parquet")
    shutil.rmtree(path)
    second = run_job(sample_job)
    assert second.releases[0].status == "republished"
    assert (path / "values.json").read_text() == before
    pd.testing.assert_frame_equal(pd.read_parquet(path / "values.parquet"), parquet)


def test_changed_data_is_a_new_release(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    first = run_job(job)
    spent = spent_by_user(job)
    data = pd.read_csv(DATA)
    data.loc[0, "salary"] = data.loc[0, "salary"] + 1.0
    changed = tmp_path / "changed.csv"
    data.to_csv(changed, index=False)
    job2 = write_job(tmp_path, filename="job2.toml", data=changed)
    second = run_job(job2)
    assert [r.status for r in second.releases] == ["committed", "committed"]
    assert {r.record.key for r in second.releases}.isdisjoint(
        {r.record.key for r in first.releases}
    )
    after = spent_by_user(job)
    assert sum(after.values()) > sum(spent.values())
    assert len(records(job)) == 4


def test_changed_definition_is_a_new_release_only_for_that_release(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    first = run_job(job)
    job2 = write_job(tmp_path, filename="job2.toml",
                     releases=GROUPED_RELEASE + GLOBAL_RELEASE.replace("upper = 40", "upper = 45"))
    second = run_job(job2)
    assert [r.status for r in second.releases] == ["republished", "committed"]
    assert second.releases[0].record == first.releases[0].record
    manifest = json.loads(second.manifest.read_text())
    assert manifest["releases"]["tenure_overall"]["commit_id"] == \
        second.releases[1].record.commit_id


def test_budget_settings_are_not_part_of_the_release(tmp_path: Path) -> None:
    """Raising budgets does not make a committed release new (it is the same release)."""
    job = write_job(tmp_path)
    run_job(job)
    job2 = write_job(tmp_path, filename="job2.toml", budget="default = 9.0")
    assert [r.status for r in run_job(job2).releases] == ["republished", "republished"]
