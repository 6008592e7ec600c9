"""The ``ldp_mean`` job kind under a privacy unit (issue 50): with ``privacy_unit = "<the
job's user id>"`` a release reads ONE report per person (the release API's rule,
``hdp_spark/core/privacy_unit/ldp.py``), so a person who sent many reports loses at most
their smallest ε to whoever reads the output; the ledger still charges nothing (the
reports were paid for on the devices). Checked: the published row equals
``ldp_agg(..., privacy_unit=...)`` under the job's seed, ``_n`` counts persons, the plan's
prediction is ``explain``'s under the unit, and every rule of the job file is refused by
name before anything runs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from kinds_helpers import charges_of, small_job, write_csv

import hdp_spark.ldp as L
import hdp_spark.pandas as hpd
from hdp_spark.errors import JobError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.planning import plan_budget


def _release(unit: str | None = '"user_id"', extra: str = "", by: str = "") -> str:
    lines = ["", "[[releases]]", 'id = "ldp"', *([by] if by else []), "",
             "  [[releases.aggregators]]", '  kind = "ldp_mean"', '  column = "report"',
             '  eps = "ldp_eps"', '  mechanism = "laplace"', "  lower = 0", "  upper = 10",
             "  already_randomized = true"]
    if unit is not None:
        lines.append(f"  privacy_unit = {unit}")
    return "\n".join(lines) + "\n" + extra


def _reports(users: int = 200, seed: int = 9) -> pd.DataFrame:
    """1-8 Laplace reports per user, the user's ε the same on their rows but one."""
    rng = np.random.default_rng(seed)
    uid = np.repeat(np.arange(1, users + 1), rng.integers(1, 9, users))
    eps = rng.choice([0.25, 0.5], users)[uid - 1]
    x = rng.uniform(0, 10, users)[uid - 1]
    frame = pd.DataFrame({"user_id": uid, "eps": 1.0, "ldp_eps": eps,
                          "household": uid % 7,
                          "report": L.laplace(x, eps, lower=0, upper=10, unsafe_seed="r")})
    frame.loc[0, "ldp_eps"] = 1.0  # a row above its person's smallest ε: not a candidate
    return frame


def _job(tmp: Path, frame: pd.DataFrame, release: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return small_job(tmp, write_csv(frame, tmp / "table.csv"), release)


def test_one_report_per_person_equals_the_release_api(tmp_path: Path) -> None:
    frame = _reports()
    assert frame["user_id"].duplicated().any()
    run = run_job(_job(tmp_path, frame, _release()))
    assert [r.status for r in run.releases] == ["committed"]
    assert charges_of(tmp_path / "ledger.sqlite", "ldp") == {}  # paid on the devices
    row = run.values("ldp")[0]
    spec = L.ldp_mean("report", eps="ldp_eps", mechanism="laplace", lower=0, upper=10)
    table = pd.read_csv(tmp_path / "table.csv")
    want = hpd.ldp_agg(table, spec, already_randomized=True, privacy_unit="user_id",
                       unsafe_seed="small/ldp/ldp_mean").iloc[0]
    assert int(row["report_mean_n"]) == frame["user_id"].nunique()  # persons, not rows
    for name in ("report_mean", "report_mean_ci_low", "report_mean_ci_high",
                 "report_mean_radius", "report_mean_n"):
        assert row[name] == pytest.approx(float(want[name]), rel=0, abs=0)
    rows = run_job(_job(tmp_path / "rows", frame, _release(unit=None))).values("ldp")[0]
    assert int(rows["report_mean_n"]) == len(frame)  # without the unit: every report


def test_the_plan_predicts_explain_under_the_unit(tmp_path: Path) -> None:
    frame = _reports(seed=10)
    plan = plan_budget(load_job(_job(tmp_path, frame, _release())))
    (pred,) = [p for p in plan.predictions[0] if p.kind == "ldp_mean"]
    spec = L.ldp_mean("report", eps="ldp_eps", mechanism="laplace", lower=0, upper=10)
    want = hpd.explain(frame, spec, privacy_unit="user_id").iloc[0]
    assert pred.n == frame["user_id"].nunique() == int(want["n"])
    assert pred.half_width == pytest.approx(float(want["half_width"]))
    run = run_job(_job(tmp_path / "run", frame, _release()))
    assert int(run.values("ldp")[0]["report_mean_n"]) == pred.n


@pytest.mark.parametrize(("release", "needle"), [
    (_release(unit='"household"'),
     r"`\[\[releases\]\] id = 'ldp': privacy_unit` must be the job's `\[input\] user_id` "
     r"\('user_id'\).*got 'household'"),
    (_release(by='by = ["household"]\nkeys = [[0], [1]]'),
     r"`\[\[releases\]\] id = 'ldp': by` is not allowed with `ldp_mean` under "
     r"`privacy_unit`.*got \['household'\]"),
    (_release(unit='""'), r"`privacy_unit` must name the user id column, got ''"),
    (_release(unit="3"), r"`privacy_unit` must name the user id column, got 3"),
])
def test_bad_settings_are_refused_when_loaded(tmp_path: Path, release: str,
                                              needle: str) -> None:
    with pytest.raises(JobError, match=needle):
        load_job(_job(tmp_path, _reports(), release))


def test_a_release_mixing_units_is_refused(tmp_path: Path) -> None:
    other = _release(unit=None).split("\n", 4)[4].replace('column = "report"',
                                                          'column = "report"\n  alias = "b"')
    text = _release() + "\n" + other
    with pytest.raises(JobError, match=r"aggregators` must all be `ldp_mean` with the same "
                                       r"`privacy_unit`.*got \['ldp_mean'\]"):
        load_job(_job(tmp_path, _reports(), text))


def test_spark_publishes_what_pandas_publishes(spark: Any, tmp_path: Path) -> None:
    frame = _reports(users=80, seed=11)
    want = run_job(_job(tmp_path / "p", frame, _release())).values("ldp")[0]
    path = _job(tmp_path / "s", frame, _release())
    path.write_text(path.read_text().replace('engine = "pandas"', 'engine = "spark"'))
    got = run_job(path, spark=spark).values("ldp")[0]
    for name in ("report_mean", "report_mean_radius", "report_mean_n"):
        assert got[name] == pytest.approx(want[name], rel=1e-12)


def test_a_person_s_number_of_reports_is_not_published(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Person 1's reports copied twice more (same ε, same reports): under the unit a
    person's number of rows is private, so nothing published may follow it (the INFO log
    omits the input's row count; `_n` counts persons)."""
    from leak_helpers import Features, assert_no_deterministic_leak, fresh_job_run

    table = _reports(users=60, seed=12)
    one = table[table["user_id"] == 1]
    neighbour = pd.concat([table, one, one], ignore_index=True)
    root = tmp_path / "run"
    root.mkdir()
    job = small_job(root, write_csv(table, root / "table.csv"), _release(), seed=None)

    messages: list[str] = []  # the INFO+ log of every run, table and neighbour

    def run(frame: pd.DataFrame) -> Features:
        feats = fresh_job_run(root, job, frame, caplog)
        messages.extend(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
        return feats

    _runs, others = assert_no_deterministic_leak(lambda: run(table), lambda: run(neighbour))
    keys = {k[-1] for k in others[0]}
    assert {"report_mean", "report_mean_n"} <= keys  # not vacuous
    assert messages
    assert not any("row(s)" in m for m in messages)
