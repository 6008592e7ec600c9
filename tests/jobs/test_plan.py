"""``hdp-release plan`` and budget allocation across a job's releases (issue 20).

The plan replays the runner's budget rule on public columns only; these tests hold it to
the run it predicts (charges per user, exactly), to the ledger it must not touch, and to
the public-columns-only rule (two tables that differ in every value give the same plan).
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from job_helpers import DATA, GLOBAL_RELEASE, GROUPED_RELEASE, REPO, spent_by_user, write_job

from hdp_spark.aggregators import hdp_mean
from hdp_spark.cli import main
from hdp_spark.core.ledger import UNIT
from hdp_spark.errors import EpsilonColumnError, JobError
from hdp_spark.jobs import load_job, plan_budget, run_job
from hdp_spark.jobs.allocation import (
    Profile,
    ReleaseModel,
    allocate,
    error_of,
    lattice,
    simulate,
)
from hdp_spark.jobs.planning import render_plan, write_user_table

REGION_RELEASE = """
[[releases]]
id = "salary_by_region"
by = ["region"]
keys = ["central", "coastal", "east", "islands", "mountain", "north", "south", "west"]
weight = 2.0

  [[releases.aggregators]]
  kind = "mean"
  column = "salary"
  lower = 20000
  upper = 250000
"""
THREE = GROUPED_RELEASE + REGION_RELEASE + GLOBAL_RELEASE


def _budget(default: float, allocation: str) -> str:
    return f'default = {default}\nallocation = "{allocation}"'


def _ledger_bytes(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _plan_units(plan: Any) -> dict[str, int]:
    """Each user's total predicted charge (units) with the job's allocation."""
    sim = plan.selected.simulation
    total = plan.profile.remaining - sim.remaining
    return {u: int(total[r]) for u, r in zip(plan.user_ids, plan.user_rows, strict=True)}


# -- the command --------------------------------------------------------------------------


def test_plan_command_on_the_sample_job(tmp_path: Path, capsys: Any) -> None:
    text = (REPO / "jobs" / "sample_employees.toml").read_text()
    text = text.replace('"../data/', f'"{REPO}/data/').replace('"../schemas/', f'"{REPO}/schemas/')
    text = text.replace('"../out/', f'"{tmp_path}/out/')
    job = tmp_path / "sample.toml"
    job.write_text(text)
    png, users = tmp_path / "plan.png", tmp_path / "users.csv"
    code = main(["plan", str(job), "--plot", str(png), "--users", str(users)])
    out = capsys.readouterr().out
    assert code == 0
    for word in ("salary_by_dept", "salary_by_region", "tenure_overall", "sequential share",
                 "equal share", "optimal share", "half_width", "baseline", "engineering",
                 "budgets after the job", "of which ε-weighting",
                 "worst-case effect of weighting rows by their ε"):
        assert word in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(users)
    assert len(table) == 5000
    assert list(table.columns) == ["user_id", "remaining_before", "charge_salary_by_dept",
                                   "charge_salary_by_region", "charge_tenure_overall",
                                   "remaining_after"]
    assert (table["remaining_after"] >= 0).all()
    assert not (tmp_path / "out").exists()  # no ledger, no output directory created
    # the totals line: optimal <= sequential and <= equal on the sample job
    total = next(line for line in out.splitlines() if line.strip().startswith("total"))
    seq, equal, opt = (float(x) for x in total.split()[1:4])
    assert opt <= seq
    assert opt <= equal


def test_plan_without_plot(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    job = write_job(tmp_path, releases=GLOBAL_RELEASE)
    assert main(["plan", str(job), "--no-plot"]) == 0
    assert "plot:" not in capsys.readouterr().out
    assert list(tmp_path.glob("*.png")) == []
    assert main(["plan", str(job)]) == 0  # default: plan-<job name>.png in the output dir
    assert list(tmp_path.glob("*.png")) == []
    assert (tmp_path / "out" / "plan-t_job.png").exists()


# -- charges nothing, predicts the run exactly ----------------------------------------------


@pytest.mark.parametrize("allocation", ["sequential", "equal", "optimal"])
@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_plan_predicts_the_run_and_touches_no_ledger(
    tmp_path: Path, allocation: str, backend: str
) -> None:
    job = write_job(tmp_path, budget=_budget(1.0, allocation), releases=THREE, backend=backend)
    spec = load_job(job)
    first = plan_budget(job)
    assert not spec.ledger.path.exists()  # planning before the first run creates nothing
    run = run_job(job)
    spent = spent_by_user(job)
    predicted = _plan_units(first)
    assert {u: n for u, n in predicted.items() if n} == spent  # every user, exactly
    sim = first.selected.simulation
    for r, rel in enumerate(run.releases):
        o = sim.releases[r]
        assert rel.record.units_charged == int((o.charges * first.profile.counts).sum())
    if allocation == "sequential":
        assert run.allocation is None
    else:
        assert run.allocation is not None
        assert dict(run.allocation.shares) == {
            m.id: s for m, s in zip(first.releases, first.selected.shares, strict=True)}
    # a plan after the run reads the ledger's spends and leaves its bytes alone
    before = _ledger_bytes(spec.ledger.path)
    second = plan_budget(job)
    assert _ledger_bytes(spec.ledger.path) == before
    start = dict(zip(second.user_ids, second.profile.remaining[second.user_rows], strict=True))
    budget = int(1.0 / UNIT)
    assert all(start[u] == budget - spent.get(u, 0) for u in start)


def test_plan_after_a_run_marks_committed_releases_and_predicts_only_the_rest(
    tmp_path: Path, capsys: Any
) -> None:
    first = write_job(tmp_path, budget="default = 1.0", releases=GROUPED_RELEASE)
    assert "charges nothing" not in render_plan(plan_budget(first))
    run_job(first)
    done = spent_by_user(first)
    # the same job plus a new release: only the new one is predicted, and charged
    job = write_job(tmp_path, "both.toml", budget="default = 1.0", releases=THREE)
    plan = plan_budget(job)
    assert plan.committed == ("salary_by_dept",)
    assert [r.id for r in plan.releases] == ["salary_by_region", "tenure_overall"]
    text = render_plan(plan)
    assert "release salary_by_dept: committed: re-published, charges nothing" in text
    assert "release salary_by_dept (share" not in text  # no prediction for it
    predicted = _plan_units(plan)
    run_job(job)
    after = spent_by_user(job)
    assert {u: n for u, n in predicted.items() if n} == {
        u: n - done.get(u, 0) for u, n in after.items() if n - done.get(u, 0)}
    # everything committed: the plan says a run charges nothing, and draws no plot
    assert main(["plan", str(job)]) == 0
    out = capsys.readouterr().out
    assert out.count("committed: re-published, charges nothing") == 3
    assert "a run would compute nothing and charge nothing" in out
    assert "plot: none" in out


def test_sequential_plan_equals_todays_charges(tmp_path: Path) -> None:
    """The default (no allocation setting) run charges what the sequential plan says."""
    job = write_job(tmp_path, budget="default = 0.8", releases=THREE)
    plan = plan_budget(job)
    assert plan.chosen == "sequential"
    assert plan.selected.shares == (1.0, 1.0, 1.0)
    run_job(job)
    assert {u: n for u, n in _plan_units(plan).items() if n} == spent_by_user(job)


# -- public columns only --------------------------------------------------------------------


def _scrambled(path: Path) -> Path:
    """The sample table with every non-public value changed (and a value column garbled)."""
    df = pd.read_csv(DATA)
    rng = np.random.default_rng(7)
    df["salary"] = rng.uniform(-1e9, 1e9, len(df))
    df["tenure_years"] = "not a number"
    df["job_family"] = df["job_family"].sample(frac=1.0, random_state=3).to_numpy()
    out = path / "scrambled.csv"
    df.to_csv(out, index=False)
    return out


def test_plan_reads_only_public_columns(tmp_path: Path) -> None:
    for sub in ("a", "b", "c"):
        (tmp_path / sub).mkdir()
    a = write_job(tmp_path / "a", budget=_budget(1.0, "optimal"), releases=THREE)
    b = write_job(tmp_path / "b", data=_scrambled(tmp_path), budget=_budget(1.0, "optimal"),
                  releases=THREE)
    pa, pb = plan_budget(a), plan_budget(b)
    assert render_plan(pa) == render_plan(pb)
    ua = write_user_table(pa, tmp_path / "ua.csv").read_bytes()
    ub = write_user_table(pb, tmp_path / "ub.csv").read_bytes()
    assert ua == ub
    # the plan does depend on the public columns (the check can fail)
    df = pd.read_csv(DATA)
    df["eps"] = df["eps"] * 2
    df.to_csv(tmp_path / "eps2.csv", index=False)
    c = write_job(tmp_path / "c", data=tmp_path / "eps2.csv", budget=_budget(1.0, "optimal"),
                  releases=THREE)
    assert render_plan(plan_budget(c)) != render_plan(pa)


def test_plan_is_the_same_on_spark(tmp_path: Path, spark: Any) -> None:
    job = write_job(tmp_path, budget=_budget(1.0, "optimal"), releases=THREE)
    on_pandas = plan_budget(job)
    on_spark = plan_budget(job, engine="spark", spark=spark)
    assert render_plan(on_spark) == render_plan(on_pandas)
    assert _plan_units(on_spark) == _plan_units(on_pandas)


def test_spark_run_with_optimal_allocation_charges_the_plan(tmp_path: Path, spark: Any) -> None:
    job = write_job(tmp_path, engine="spark", budget=_budget(1.0, "optimal"),
                    releases=GROUPED_RELEASE + GLOBAL_RELEASE)
    plan = plan_budget(job, spark=spark)
    run = run_job(job, spark=spark)
    assert run.allocation is not None
    assert {u: n for u, n in _plan_units(plan).items() if n} == spent_by_user(job)


# -- readability at scale ------------------------------------------------------------------


def test_plan_output_does_not_grow_with_users(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    n = 30_000
    df = pd.DataFrame({
        "user_id": np.arange(n),
        "dept": rng.choice(["engineering", "finance", "operations", "research", "sales"], n),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "salary": rng.uniform(0, 1, n),
        "tenure_years": 1.0,
        # 25 ε levels and 4 budgets: many ε classes, a small profile
        "eps": rng.choice(np.round(np.geomspace(0.05, 5.0, 25), 4), n),
        "budget": rng.choice([0.5, 1.0, 2.0, 4.0], n),
    })
    df.to_csv(tmp_path / "big.csv", index=False)
    job = write_job(tmp_path, data=tmp_path / "big.csv",
                    budget='column = "budget"\nallocation = "equal"', releases=THREE)
    text = render_plan(plan_budget(job))
    lines = text.splitlines()
    assert len(lines) < 90
    assert max(len(x) for x in lines) < 160
    # the ε classes of each release are summarized in at most ten ranges
    blocks = text.split("ε allowed")[1:]
    assert len(blocks) == 3
    for block in blocks:
        rows = [x for x in block.splitlines()[2:] if x.strip() and not x.startswith("release")]
        rows = [x for x in rows if re.match(r"^\s+\d", x)]
        assert 1 <= len(rows) <= 10


# -- allocation ----------------------------------------------------------------------------


def _model(rid: str, weight: float, eps: str = "eps") -> ReleaseModel:
    spec = hdp_mean("x", eps=eps, lower=0, upper=1, alias=f"m_{rid}")
    return ReleaseModel(rid, weight, ((),), ((spec.name, spec),), ((eps, 1),))


def _random_profile(seed: int, n: int = 40, k: int = 2) -> Profile:
    rng = np.random.default_rng(seed)
    return Profile(
        counts=rng.integers(1, 30, n).astype(np.int64),
        remaining=np.floor(rng.uniform(0.0, 3.0, n) / UNIT).astype(np.int64),
        eps={"eps": rng.choice([0.05, 0.2, 0.5, 1.0, 2.0, 4.0, math.inf], n)},
        groups=tuple(np.zeros(n, dtype=np.int64) for _ in range(k)),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", ["cap", "exclude"])
def test_no_allocation_exceeds_a_budget(seed: int, policy: Any) -> None:
    profile = _random_profile(seed, k=3)
    models = [_model("a", 1.0), _model("b", 3.0), _model("c", 0.5)]
    for method in ("sequential", "equal", "optimal"):
        alloc = allocate(profile, models, method, policy, "effective")
        spent = sum(o.charges for o in alloc.simulation.releases)
        assert (spent <= profile.remaining).all()
        assert (alloc.simulation.remaining == profile.remaining - spent).all()
        assert (alloc.simulation.remaining >= 0).all()
        assert all(0 < s <= 1 for s in alloc.shares)


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_optimal_beats_brute_force_on_small_cases(seed: int) -> None:
    profile = _random_profile(seed)
    models = [_model("a", 1.0), _model("b", float(seed))]
    opt = allocate(profile, models, "optimal", "cap", "effective")
    brute = min(
        error_of(simulate(profile, models, (a / 20, b / 20), "cap", "effective"), models)
        for a in range(1, 21) for b in range(1, 21)
    )
    assert opt.error <= brute * (1 + 1e-12)
    for other in ("sequential", "equal"):
        assert opt.error <= allocate(profile, models, other, "cap", "effective").error
    # the optimum is not trivially the sequential rule on these cases (the search matters)
    assert len(lattice(2)) == 121


def test_optimal_improves_on_sequential_somewhere() -> None:
    wins = 0
    for seed in range(8, 14):
        profile = _random_profile(seed)
        models = [_model("a", 1.0), _model("b", 4.0)]
        opt = allocate(profile, models, "optimal", "cap", "effective").error
        seq = allocate(profile, models, "sequential", "cap", "effective").error
        wins += opt < seq
    assert wins >= 1


def test_fail_policy_refusal_is_infinite_error() -> None:
    profile = _random_profile(1)
    models = [_model("a", 1.0), _model("b", 1.0)]
    sim = simulate(profile, models, (1.0, 1.0), "fail", "effective")
    assert sim.releases[0].refused
    assert not sim.releases[1].ran
    assert error_of(sim, models) == math.inf
    assert (sim.remaining == profile.remaining).all()


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(("budget", "words"), [
    ('default = 1.0\nallocation = "best"', "`[budget] allocation` must be one of"),
    ('default = 1.0\nallocation = 3', "`[budget] allocation` must be one of"),
])
def test_bad_allocation_setting(tmp_path: Path, budget: str, words: str) -> None:
    with pytest.raises(JobError, match=re.escape(words)):
        load_job(write_job(tmp_path, budget=budget))


@pytest.mark.parametrize("weight", ["-1.0", '"high"', "inf", "true"])
def test_bad_release_weight(tmp_path: Path, weight: str) -> None:
    releases = GLOBAL_RELEASE.replace('id = "tenure_overall"',
                                      f'id = "tenure_overall"\nweight = {weight}')
    with pytest.raises(JobError, match=r"weight` must be a finite number >= 0"):
        load_job(write_job(tmp_path, releases=releases))


HEAVY_HITTERS_RELEASE = """
[[releases]]
id = "frequent"

  [[releases.aggregators]]
  kind = "heavy_hitters"
  cols = ["dept", "region"]
  domains = { dept = ["engineering", "sales"], region = ["north", "south"] }
  eps0 = 1.0
"""


def test_unallocatable_kinds_are_refused(tmp_path: Path) -> None:
    job = write_job(tmp_path, releases=HEAVY_HITTERS_RELEASE, budget=_budget(1.0, "optimal"))
    with pytest.raises(JobError, match="kind 'heavy_hitters' cannot be allocated yet"):
        plan_budget(job)
    with pytest.raises(JobError, match="cannot be allocated yet"):
        run_job(job)
    assert not (tmp_path / "ledger.sqlite").exists()
    assert main(["plan", str(job), "--no-plot"]) == 2


def test_plan_refuses_bad_public_columns(tmp_path: Path) -> None:
    df = pd.read_csv(DATA)
    dup = df.copy()
    dup.loc[3, "user_id"] = dup.loc[2, "user_id"]
    dup.to_csv(tmp_path / "dup.csv", index=False)
    with pytest.raises(JobError, match="must be unique"):
        plan_budget(write_job(tmp_path, data=tmp_path / "dup.csv", filename="a.toml"))
    bad = df.copy()
    bad.loc[5, "eps"] = -1.0
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(EpsilonColumnError, match="1 row"):
        plan_budget(write_job(tmp_path, data=tmp_path / "bad.csv", filename="b.toml"))
    nulls = df.copy().astype({"user_id": "float64"})
    nulls.loc[1, "user_id"] = math.nan
    nulls.to_csv(tmp_path / "null.csv", index=False)
    with pytest.raises(JobError, match="must not be null"):
        plan_budget(write_job(tmp_path, data=tmp_path / "null.csv", filename="c.toml"))
    budgets = df.assign(budget=1.0)
    budgets.loc[9, "budget"] = -2.0
    budgets.to_csv(tmp_path / "budgets.csv", index=False)
    with pytest.raises(JobError, match="budget must be a finite number"):
        plan_budget(write_job(tmp_path, data=tmp_path / "budgets.csv",
                              budget='column = "budget"', filename="d.toml"))
    missing = df.drop(columns=["dept"])
    missing.to_csv(tmp_path / "missing.csv", index=False)
    with pytest.raises(JobError, match="lacks the column"):
        plan_budget(write_job(tmp_path, data=tmp_path / "missing.csv", filename="e.toml"))


def test_report_shows_the_chosen_allocation(tmp_path: Path) -> None:
    job = write_job(tmp_path, budget=_budget(1.0, "equal"),
                    releases=GROUPED_RELEASE + GLOBAL_RELEASE, report=True)
    run = run_job(job)
    assert run.report is not None
    text = run.report.read_text()
    assert "| budget allocation | equal:" in text
    assert "Budget allocation (equal)" in text
    assert "| salary_by_dept | 0.5 |" in text
    assert "| tenure_overall | 0.5 |" in text
    # the default keeps today's wording and shows no share table
    (tmp_path / "seq").mkdir()
    seq = write_job(tmp_path / "seq", releases=GLOBAL_RELEASE, report=True)
    seq_text = run_job(seq).report.read_text()  # type: ignore[union-attr]
    assert "| budget allocation | sequential:" in seq_text
    assert "Budget allocation (" not in seq_text
