"""End to end: a job on the sample table, on both engines; charges re-derived independently."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from job_helpers import DATA, GROUPED_RELEASE, RELEASES, records, spent_by_user, write_job

from hdp_spark.core.ledger import ceil_units, floor_units
from hdp_spark.errors import BudgetExceededError, JobError, SchemaError
from hdp_spark.jobs import run_job

BUDGET = 4.0


def expected_spend(
    run: Any, data: pd.DataFrame, budget: dict[str, float] | float, policy: str = "cap",
    charge: str = "effective",
) -> dict[str, int]:
    """Replay the ledger rules per user from the PUBLISHED per-level tables (single-aggregator
    releases): cap at the remaining budget, look up the effective ε of the user's cell."""
    uid = data["user_id"].astype(str).tolist()
    eps = data["eps"].astype(float).tolist()
    if isinstance(budget, float):
        rem = {u: floor_units(budget) for u in uid}
    else:
        rem = {u: floor_units(budget[u]) for u in uid}
    spent = dict.fromkeys(uid, 0)
    for r in run.releases:
        outcome = r.record.outcome_data()
        by = outcome["by"]
        name = outcome["aggregators"][0]["name"]
        cells = {}
        for row in outcome["rows"]:
            key = tuple(row[c] for c in by)
            for lv in row[f"{name}_eps_levels"]:
                cells[(key, lv["eps"])] = lv["eps_effective"]
        groups = list(zip(*(data[c].tolist() for c in by), strict=True)) if by else [()] * len(uid)
        for u, e, g in zip(uid, eps, groups, strict=True):
            demand = ceil_units(e)
            if demand <= rem[u]:
                capped = e
            elif policy == "cap":
                capped = rem[u] * 2.0**-30
            else:
                capped = 0.0
            key = tuple(g)
            if (key, capped) not in cells:
                continue
            eff = cells[(key, capped)]
            units = ceil_units(capped) if charge == "demand" else min(ceil_units(eff),
                                                                      ceil_units(capped))
            spent[u] += units
            rem[u] -= units
    return {u: s for u, s in spent.items() if s > 0}


def check_outputs(run: Any) -> None:
    manifest = json.loads(run.manifest.read_text())
    for r in run.releases:
        assert (r.path / "values.parquet").is_file()
        doc = json.loads((r.path / "values.json").read_text())
        assert doc["commit_id"] == r.record.commit_id
        assert manifest["releases"][r.release_id]["commit_id"] == r.record.commit_id
        table = pd.read_parquet(r.path / "values.parquet")
        assert len(table) == len(doc["rows"])
        for name in [a["name"] for a in doc["aggregators"]]:
            assert {name, f"{name}_ci_low", f"{name}_ci_high", f"{name}_noise_scale",
                    f"{name}_eps_levels"} <= set(table.columns)
            assert (table[f"{name}_ci_low"] <= table[name]).all()
            assert (table[name] <= table[f"{name}_ci_high"]).all()
        assert "material" not in json.dumps(doc)  # the release key is never written


def test_job_end_to_end(engine: Any, tmp_path: Path) -> None:
    backend = "sqlite" if engine.name == "pandas" else "parquet"
    # Spark: one grouped release (the slow part of a Spark run is the number of jobs)
    releases = RELEASES if engine.name == "pandas" else GROUPED_RELEASE
    job = write_job(tmp_path, engine=engine.name, backend=backend, seed="agree",
                    releases=releases, report=True)
    run = run_job(job, spark=engine.session)
    assert all(r.status == "committed" for r in run.releases)
    check_outputs(run)
    rows = run.values("salary_by_dept")
    assert [r["dept"] for r in rows] == ["engineering", "finance", "operations", "research",
                                         "sales"]
    assert all(20000 <= r["salary_mean"] <= 250000 for r in rows)
    data = pd.read_csv(DATA)
    spent = spent_by_user(job)
    assert spent == expected_spend(run, data, BUDGET)
    assert max(spent.values()) <= floor_units(BUDGET)
    budget = run.releases[0].record.outcome_data()["budget"]
    assert budget["users_charged"] == 5000
    assert budget["users_capped"] == int((data["eps"] == math.inf).sum())
    assert run.distribution is not None
    assert run.distribution.users == 5000
    assert run.distribution.exhausted == 0
    assert run.distribution.total_spent == pytest.approx(sum(spent.values()) * 2.0**-30)
    if engine.name == "spark":
        # Same seed, same pre-noise statistics: pandas releases the same numbers and charges.
        other = tmp_path / "pandas"
        other.mkdir()
        pjob = write_job(other, engine="pandas", seed="agree", releases=releases, report=True)
        prun = run_job(pjob)
        # each ledger keys its fingerprints with its own secret: keys differ across ledgers
        assert {r.record.key for r in prun.releases}.isdisjoint(
            {r.record.key for r in run.releases})
        for r in run.releases:
            assert prun.values(r.release_id) == run.values(r.release_id)
        assert spent_by_user(pjob) == spent
        a, b = prun.distribution, run.distribution
        assert a is not None
        assert b is not None
        assert (a.users, a.exhausted, a.hist_counts, a.hist_edges) == (
            b.users, b.exhausted, b.hist_counts, b.hist_edges)
        assert a.remaining_quantiles == pytest.approx(b.remaining_quantiles)
        assert a.total_spent == pytest.approx(b.total_spent)


def _table_with(tmp_path: Path, **columns: Any) -> Path:
    data = pd.read_csv(DATA)
    for name, values in columns.items():
        data[name] = values
    path = tmp_path / "data.csv"
    data.to_csv(path, index=False)
    return path


def test_budget_column_and_exclude_policy(tmp_path: Path) -> None:
    data = pd.read_csv(DATA)
    budgets = [None if i % 7 == 0 else (0.3 if i % 3 == 0 else 1.5) for i in range(len(data))]
    path = _table_with(tmp_path, budget=budgets)
    job = write_job(tmp_path, data=path, budget='column = "budget"\ndefault = 0.8',
                    policy="exclude")
    run = run_job(job)
    per_user = {str(u): (0.8 if b is None else b) for u, b in zip(data["user_id"], budgets,
                                                                   strict=True)}
    spent = spent_by_user(job)
    assert spent == expected_spend(run, data, per_user, policy="exclude")
    assert all(spent[u] <= floor_units(per_user[u]) for u in spent)
    excluded = run.releases[0].record.outcome_data()["budget"]["users_excluded"]
    assert excluded > 0
    # excluded rows are counted in n but carry weight 0
    levels = [lv for r in run.values("salary_by_dept") for lv in r["salary_mean_eps_levels"]]
    zero = [lv for lv in levels if lv["eps"] == 0.0]
    assert sum(lv["n"] for lv in zero) == excluded
    assert all(lv["weight"] == 0 and lv["eps_effective"] == 0 for lv in zero)


def test_demand_charge_mode(tmp_path: Path) -> None:
    job = write_job(tmp_path, charge="demand", budget="default = 2.5")
    run = run_job(job)
    data = pd.read_csv(DATA)
    spent = spent_by_user(job)
    assert spent == expected_spend(run, data, 2.5, charge="demand")
    assert max(spent.values()) <= floor_units(2.5)


def test_fail_policy_refuses_and_charges_nothing(tmp_path: Path) -> None:
    job = write_job(tmp_path, policy="fail")
    with pytest.raises(BudgetExceededError, match=r"release `salary_by_dept`: 222 user\(s\)"):
        run_job(job)
    assert spent_by_user(job) == {}
    assert records(job) == []
    assert not (tmp_path / "out" / "salary_by_dept").exists()


def test_duplicate_users_stop_the_run(tmp_path: Path) -> None:
    data = pd.read_csv(DATA)
    ids = data["user_id"].copy()
    ids.iloc[:3] = ids.iloc[3]
    path = _table_with(tmp_path, user_id=ids)
    job = write_job(tmp_path, data=path)
    with pytest.raises(JobError, match=r"must be unique .* 3 row\(s\) repeat an id"):
        run_job(job)
    assert records(job) == []


def test_invalid_budgets_stop_the_run(tmp_path: Path) -> None:
    data = pd.read_csv(DATA)
    path = _table_with(tmp_path, budget=[-1.0] * 2 + [1.0] * (len(data) - 2))
    job = write_job(tmp_path, data=path, budget='column = "budget"')
    with pytest.raises(JobError, match=r"`\[budget\] column` `budget`.* 2 row\(s\)"):
        run_job(job)


def test_schema_blocks_bad_eps_before_any_release(tmp_path: Path) -> None:
    data = pd.read_csv(DATA)
    eps = data["eps"].copy()
    eps.iloc[:4] = -1.0
    job = write_job(tmp_path, data=_table_with(tmp_path, eps=eps), schema=True)
    with pytest.raises(SchemaError):
        run_job(job)
    assert records(job) == []
    good = write_job(tmp_path, filename="good.toml", schema=True, ledger=tmp_path / "g.sqlite",
                     out=tmp_path / "good")
    assert [r.status for r in run_job(good).releases] == ["committed", "committed"]
