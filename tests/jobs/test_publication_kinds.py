"""The publication rule for the new kinds (issues 16, 19), on pandas: the all-kinds sample job
(mean, user-level mean, histogram, heavy hitters, attribute histograms, LDP aggregation,
marginals, MWEM)
runs twice on the people table and once on a neighbour (person 1's income, occupation and
sex changed, person 2's income null; same n, ε, ids and LDP reports). No published feature
may be the same in the runs on the table and different on the neighbour."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest
from kinds_helpers import PEOPLE, sample_jobs
from leak_helpers import Features, assert_no_deterministic_leak, collect

from hdp_spark.jobs import run_job


def _neighbour(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    i = frame.index[frame["user_id"] == 1][0]
    frame.loc[i, "income"] = frame.loc[i, "income"] + 31_337
    frame.loc[i, "occupation"] = "manual" if frame.loc[i, "occupation"] != "manual" else "service"
    frame.loc[i, "sex"] = "M" if frame.loc[i, "sex"] == "F" else "F"
    frame.loc[frame["user_id"] == 2, "income"] = None
    return frame


def test_new_kinds_publish_nothing_deterministic(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "input" / "people.csv"
    data.parent.mkdir()
    table = pd.read_csv(PEOPLE)
    neighbour = _neighbour(PEOPLE)
    assert table["eps"].equals(neighbour["eps"])
    assert table["satisfaction_report"].equals(neighbour["satisfaction_report"])
    root = tmp_path / "run"
    root.mkdir()
    all_job, _ = sample_jobs(root, seed=None, people=data)

    def run(frame: pd.DataFrame) -> Features:
        for sub in ("out_all", "ledger", "witness"):
            shutil.rmtree(root / sub, ignore_errors=True)
        frame.to_csv(data, index=False)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            result = run_job(all_job)
        assert all(r.status == "committed" for r in result.releases)
        return collect(root / "out_all", list(caplog.records),
                       [r.record.commit_id for r in result.releases])

    _runs, others = assert_no_deterministic_leak(lambda: run(table), lambda: run(neighbour))
    # not vacuous: the new kinds' outputs are among the features
    keys = {k[-1] for k in others[0]}
    assert {"heavy_hitters_eps_person", "income_user_mean", "satisfaction_report_mean",
            "marginals_eps_person", "mwem_eps_person", "projected_fraction",
            "mwem_fraction"} <= keys
