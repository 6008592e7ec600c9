"""Jobs for every aggregator kind (issue 16): user-level mean, heavy hitters, attribute
histograms and LDP aggregation next to mean and histogram; charges checked against each
mechanism's stated per-unit loss, in exact ledger units."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from job_helpers import spent_by_user
from kinds_helpers import (
    EVENTS,
    HH_RELEASE,
    LDP_RELEASE,
    MEAN_RELEASE,
    PEOPLE,
    USER_MEAN_RELEASE,
    charges_of,
    events_frame,
    people_frame,
    sample_jobs,
    small_job,
    write_csv,
)

from hdp_spark.core.ledger import UNIT, ceil_units, floor_units
from hdp_spark.errors import BudgetExceededError, JobError
from hdp_spark.jobs import load_job, run_job

RELEASES = ["income_by_region", "occupation_histogram", "frequent_profiles",
            "attribute_counts", "satisfaction_ldp", "profile_marginals", "profile_mwem"]


def _level_cells(rows: list[dict[str, Any]], name: str, by: str) -> dict[tuple[str, float], float]:
    return {(r[by], lv["eps"]): lv["eps_effective"] for r in rows for lv in r[f"{name}_eps_levels"]}


def _class_cells(rows: list[dict[str, Any]], name: str, by: str) -> dict[tuple[str, float], float]:
    cells: dict[tuple[str, float], float] = defaultdict(float)
    for r in rows:
        for c in r[f"{name}_classes"]:
            key = (r[by], c["eps"])
            cells[key] = max(cells[key], c["eps_effective"])
    return cells


def _charge(cells: dict[Any, float], key: Any, eps: float) -> int:
    eff = cells.get(key)
    return 0 if eff is None else min(ceil_units(eff), ceil_units(eps))


@pytest.fixture(scope="module")
def pandas_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("kinds_pandas")
    all_job, user_job = sample_jobs(root)
    first = run_job(all_job)
    spent_after_all = spent_by_user(all_job)
    second = run_job(user_job)
    return {"root": root, "all": all_job, "user": user_job, "run_all": first,
            "run_user": second, "spent_all": spent_after_all}


def test_all_kinds_commit_and_report(pandas_run: dict[str, Any]) -> None:
    run = pandas_run["run_all"]
    assert [r.release_id for r in run.releases] == RELEASES
    assert all(r.status == "committed" for r in run.releases)
    report = run.report.read_text()
    for words in ("protecting each user with all their rows",
                  "the most frequent combinations of sex, region, occupation",
                  "a count of people per value of each of age_band, sex",
                  "each attribute protected separately",
                  "from reports each person's device randomized before sending",
                  "- **Cost:** nothing charged"):
        assert words in report, words
    assert "seed 00" not in report
    plots = {p.name for p in (run.report.parent / "plots").iterdir()}
    assert {"income_by_region__income_user_mean.png", "frequent_profiles__heavy_hitters.png",
            "attribute_counts__attribute_histograms.png",
            "satisfaction_ldp__satisfaction_report_mean.png"} <= plots
    hh = run.values("frequent_profiles")[0]
    assert hh["heavy_hitters_records"], "the sample releases some frequent profiles"
    assert json.loads(hh["heavy_hitters_report"])["eps_person"] == hh["heavy_hitters_eps_person"]


def test_row_and_user_level_charges_of_one_release(pandas_run: dict[str, Any]) -> None:
    """mean (per row) + user-level mean (once per user) in one release, exact units."""
    run, ledger = pandas_run["run_all"], load_job(pandas_run["all"]).ledger.path
    rows = run.values("income_by_region")
    mean = _level_cells(rows, "income_mean", "region")
    user = _class_cells(rows, "income_user_mean", "region")
    people = pd.read_csv(PEOPLE)
    expected = {}
    for uid, region, eps in zip(people["user_id"], people["region"], people["eps"],
                                strict=True):
        units = _charge(mean, (region, eps), eps) + _charge(user, (region, eps), eps)
        if units:
            expected[str(uid)] = units
    assert charges_of(ledger, "income_by_region") == expected
    assert max(expected.values()) > 0


def test_heavy_hitters_and_attribute_histograms_charge_the_per_person_eps(
    pandas_run: dict[str, Any],
) -> None:
    run, ledger = pandas_run["run_all"], load_job(pandas_run["all"]).ledger.path
    for release, name in (("frequent_profiles", "heavy_hitters"),
                          ("attribute_counts", "attribute_histograms")):
        row = run.values(release)[0]
        eps_person = row[f"{name}_eps_person"]
        charged = charges_of(ledger, release)
        assert set(charged.values()) == {ceil_units(eps_person)}
        assert len(charged) == row[f"{name}_n"]
        # heavy hitters: everybody had 2.5 left; the attribute histograms (demand 0.5) come
        # after it and leave out the few persons with less than 0.5 left
        assert row[f"{name}_n"] == 2000 if name == "heavy_hitters" else 1900 < len(charged)
        budget = next(r for r in run.releases if r.release_id == release).record \
            .outcome_data()["budget"]
        assert budget["users_excluded"] == 2000 - len(charged)
    ah = run.values("attribute_counts")[0]
    assert ah["attribute_histograms_eps_person"] == pytest.approx(2 * 0.25)


def test_marginals_and_mwem_charge_the_converted_per_person_eps(
    pandas_run: dict[str, Any],
) -> None:
    """zCDP kinds: each person read is charged the CKS20 (ε, δ) conversion of the release's
    per-person ρ at the aggregator's δ; persons with less left are left out."""
    from hdp_spark.core.partial import accounting

    run, ledger = pandas_run["run_all"], load_job(pandas_run["all"]).ledger.path
    for release, name in (("profile_marginals", "marginals"), ("profile_mwem", "mwem")):
        row = run.values(release)[0]
        eps = accounting.eps_cks20(row[f"{name}_rho_person"], 1e-6)
        assert row[f"{name}_delta"] == 1e-6
        assert row[f"{name}_eps_person"] == pytest.approx(eps, rel=1e-12)
        charged = charges_of(ledger, release)
        assert set(charged.values()) == {ceil_units(eps)}
        assert len(charged) == row[f"{name}_n"]
        budget = next(r for r in run.releases if r.release_id == release).record \
            .outcome_data()["budget"]
        assert budget["users_excluded"] == 2000 - len(charged) > 0
    marg = run.values("profile_marginals")[0]
    # all 2-way marginals of 3 attributes: |W| = 3, max deg = 2, σ² = 4/ε₀² rounded up
    assert marg["marginals_rho_person"] == pytest.approx(3 * 0.15**2 / 4, rel=1e-4)


def test_ldp_charges_nothing(pandas_run: dict[str, Any]) -> None:
    run, ledger = pandas_run["run_all"], load_job(pandas_run["all"]).ledger.path
    assert charges_of(ledger, "satisfaction_ldp") == {}
    rec = next(r for r in run.releases if r.release_id == "satisfaction_ldp").record
    assert rec.units_charged == 0
    assert run.values("satisfaction_ldp")[0]["satisfaction_report_mean_n"] > 0


def test_user_level_job_charges_each_user_once(pandas_run: dict[str, Any]) -> None:
    """events.csv has ~5 rows per user: each user is charged once, after capping at their
    remaining budget (shared ledger with the all-kinds job)."""
    run, ledger = pandas_run["run_user"], load_job(pandas_run["user"]).ledger.path
    rows = run.values("ctr_by_region")
    cells = _class_cells(rows, "clicked_user_mean", "region")
    events = pd.read_csv(EVENTS)
    assert events["user_id"].duplicated().any()
    users = events.drop_duplicates("user_id")
    spent = pandas_run["spent_all"]
    expected = {}
    for uid, region, eps in zip(users["user_id"], users["region"], users["eps"], strict=True):
        remaining = max(floor_units(6.0) - spent.get(str(uid), 0), 0)
        capped = eps if ceil_units(eps) <= remaining else float(remaining) * UNIT
        units = _charge(cells, (region, capped), capped)
        if units:
            expected[str(uid)] = units
    charged = charges_of(ledger, "ctr_by_region")
    assert charged == expected
    k = events.groupby("user_id").size()
    # not once per row: a user with k rows is charged at most their ε once
    eps_of = users.set_index("user_id")["eps"]
    assert all(units <= ceil_units(eps_of[int(u)]) for u, units in charged.items())
    assert (k > 1).sum() > 1000


def test_rerun_is_idempotent(pandas_run: dict[str, Any]) -> None:
    before = spent_by_user(pandas_run["all"])
    again = run_job(pandas_run["all"])
    again_user = run_job(pandas_run["user"])
    assert all(r.status == "republished" for r in (*again.releases, *again_user.releases))
    assert spent_by_user(pandas_run["all"]) == before
    for r in again.releases:
        assert again.values(r.release_id) == pandas_run["run_all"].values(r.release_id)


def test_quality_report_holds_the_expectation_results(pandas_run: dict[str, Any]) -> None:
    pytest.importorskip("great_expectations")
    qdir = load_job(pandas_run["all"]).ledger.path.parent / "quality"
    docs = [json.loads(p.read_text()) for p in qdir.glob("sample_all_kinds-*.json")]
    assert docs
    exp = docs[0]["expectations"]
    assert exp["results"]
    assert {"success", "statistics"} <= set(exp)
    # never published
    out = load_job(pandas_run["all"]).output.path
    assert not any("expect_column" in p.read_text(errors="ignore")
                   for p in out.rglob("*") if p.is_file() and p.suffix in (".md", ".json"))


# -- error paths -----------------------------------------------------------------------------


def test_repeated_user_ids_with_a_row_level_kind_are_refused(tmp_path: Path) -> None:
    data = write_csv(events_frame().rename(columns={"clicked": "income"}), tmp_path / "e.csv")
    job = small_job(tmp_path, data, MEAN_RELEASE)
    with pytest.raises(JobError, match=r"must be unique.*row-level aggregators \(mean\)"):
        run_job(job)
    assert not (tmp_path / "out").exists()
    # the same table with only user-level / charge-free kinds runs
    ok = small_job(tmp_path, data, USER_MEAN_RELEASE.replace('"clicked"', '"income"'))
    assert [r.status for r in run_job(ok).releases] == ["committed"]


def test_repeated_ids_need_a_budget_column_constant_per_user(tmp_path: Path) -> None:
    frame = events_frame()
    frame["budget"] = 5.0
    frame.loc[frame.index[1], "budget"] = 3.0  # user 1 has two rows with different budgets
    assert frame["user_id"].iloc[0] == frame["user_id"].iloc[1]
    data = write_csv(frame, tmp_path / "e.csv")
    job = small_job(tmp_path, data, USER_MEAN_RELEASE, budget='column = "budget"')
    with pytest.raises(JobError, match=r"same on every row of a user.*1 user"):
        run_job(job)


def test_ldp_without_already_randomized_is_refused(tmp_path: Path) -> None:
    data = write_csv(people_frame(), tmp_path / "p.csv")
    for text in (LDP_RELEASE.replace("already_randomized = true\n", ""),
                 LDP_RELEASE.replace("already_randomized = true", "already_randomized = false")):
        job = small_job(tmp_path, data, text)
        with pytest.raises(JobError, match=r"ldp_mean.*`already_randomized` must be true"):
            load_job(job)


def test_partial_kinds_refuse_by_and_mixing(tmp_path: Path) -> None:
    data = write_csv(people_frame(), tmp_path / "p.csv")
    grouped = HH_RELEASE.replace('id = "profiles"\n',
                                 'id = "profiles"\nby = ["region"]\nkeys = ["north"]\n')
    with pytest.raises(JobError, match=r"by.*not allowed with kind 'heavy_hitters'"):
        load_job(small_job(tmp_path, data, grouped))
    mixed = HH_RELEASE + """
  [[releases.aggregators]]
  kind = "mean"
  column = "income"
  lower = 0
  upper = 100000
"""
    with pytest.raises(JobError, match=r"must not mix kinds with one global ε per person"):
        load_job(small_job(tmp_path, data, mixed))


def test_user_mean_user_column_must_be_the_ledger_user(tmp_path: Path) -> None:
    frame = events_frame()
    frame["other_id"] = frame["user_id"]
    data = write_csv(frame, tmp_path / "e.csv")
    text = USER_MEAN_RELEASE + '  user = "other_id"\n'
    with pytest.raises(JobError, match=r"user_mean user.*`\[input\] user_id`"):
        load_job(small_job(tmp_path, data, text))


@pytest.mark.parametrize("policy", ["cap", "exclude"])
def test_heavy_hitters_leave_out_persons_without_budget(tmp_path: Path, policy: str) -> None:
    """Budget 3 per person; a mean first spends up to 1; persons left with less than the
    per-person ε (2.5) are not read by the heavy hitters release and are charged 0."""
    frame = people_frame()
    frame["budget"] = np.where(frame["user_id"] % 4 == 0, 2.0, 10.0)
    data = write_csv(frame, tmp_path / "p.csv")
    job = small_job(tmp_path, data, HH_RELEASE, budget='column = "budget"', policy=policy)
    run = run_job(job)
    row = run.values("profiles")[0]
    eps_person = row["heavy_hitters_eps_person"]
    assert 2.0 < eps_person <= 2.5
    charged = charges_of(tmp_path / "ledger.sqlite", "profiles")
    rich = {str(u) for u in frame.loc[frame["budget"] == 10.0, "user_id"]}
    assert set(charged) == rich
    assert set(charged.values()) == {ceil_units(eps_person)}
    assert row["heavy_hitters_n"] == len(rich)
    budget = json.loads(json.dumps(run.releases[0].record.outcome_data()["budget"]))
    assert budget["users_excluded"] == len(frame) - len(rich)


def test_heavy_hitters_fail_policy_refuses_and_charges_nothing(tmp_path: Path) -> None:
    frame = people_frame()
    frame["budget"] = np.where(frame["user_id"] == 5, 1.0, 10.0)
    data = write_csv(frame, tmp_path / "p.csv")
    job = small_job(tmp_path, data, HH_RELEASE, budget='column = "budget"', policy="fail")
    with pytest.raises(BudgetExceededError, match=r"1 user\(s\)"):
        run_job(job)
    assert spent_by_user(job) == {}
    frame["budget"] = 10.0
    write_csv(frame, data)
    assert [r.status for r in run_job(job).releases] == ["committed"]


def test_ldp_only_release_on_a_user_level_table(tmp_path: Path) -> None:
    """LDP aggregation charges nothing, so it may read a table with repeated user ids."""
    frame = events_frame()
    frame["report"] = frame["clicked"] * 10.0
    frame["ldp_eps"] = 1.0
    data = write_csv(frame, tmp_path / "e.csv")
    run = run_job(small_job(tmp_path, data, LDP_RELEASE + USER_MEAN_RELEASE))
    assert [r.status for r in run.releases] == ["committed", "committed"]
    assert run.releases[0].record.units_charged == 0
    assert charges_of(tmp_path / "ledger.sqlite", "ldp") == {}


# -- Spark, fault injection -------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
def test_all_kinds_on_spark_match_pandas(
    spark: Any, pandas_run: dict[str, Any], tmp_path: Path
) -> None:
    """Both sample jobs on Spark (same seed, shared ledger): same charges as pandas, user by
    user; a re-run re-publishes everything and charges nothing."""
    all_job, user_job = sample_jobs(tmp_path, engine="spark")
    run = run_job(all_job, spark=spark)
    assert [r.status for r in run.releases] == ["committed"] * len(RELEASES)
    assert spent_by_user(all_job) == pandas_run["spent_all"]
    for release in RELEASES:
        assert charges_of(tmp_path / "ledger" / "people.sqlite", release) == charges_of(
            load_job(pandas_run["all"]).ledger.path, release), release
    for release in ("occupation_histogram", "frequent_profiles", "attribute_counts",
                    "profile_marginals", "profile_mwem"):
        assert run.values(release) == pandas_run["run_all"].values(release), release
    user = run_job(user_job, spark=spark)
    assert spent_by_user(user_job) == spent_by_user(pandas_run["user"])
    assert user.values("ctr_by_region") == pandas_run["run_user"].values("ctr_by_region")
    before = spent_by_user(all_job)
    again = run_job(all_job, spark=spark)
    assert all(r.status == "republished" for r in again.releases)
    assert spent_by_user(all_job) == before


def test_kill_at_heavy_hitters_commit_recovers(
    tmp_path: Path, pandas_run: dict[str, Any]
) -> None:
    """SIGKILL between the charges and the commit of the heavy-hitters release: the releases
    before it stay committed, nothing of it is charged; the next run commits it once and the
    spend equals the run that never crashed."""
    import signal

    from test_faults import crash

    all_job, _user = sample_jobs(tmp_path)
    proc = crash(all_job, "frequent_profiles:charged")
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    ledger = load_job(all_job).ledger.path
    assert charges_of(ledger, "frequent_profiles") == {}
    assert charges_of(ledger, "income_by_region") != {}
    out = load_job(all_job).output.path
    assert not list(out.glob("frequent_profiles/*/values.json"))
    run = run_job(all_job)
    assert [r.status for r in run.releases] == [
        "republished", "republished", "committed", "committed", "committed", "committed",
        "committed"]
    assert spent_by_user(all_job) == pandas_run["spent_all"]
