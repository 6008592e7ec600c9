"""Job releases under DP partition selection (``[releases.select_keys]``, issue 22).

The ledger charges every row κ_i = min(ε_i, c) (rounded down to the step) for the whole
release, rows of unreleased groups included, from the capped ε alone; δ is recorded per
release; budget capping happens before the selection; the report states the guarantee;
plan and allocation refuse; bad settings are named; the same job on Spark publishes and
charges the same; nothing published depends on a neighbour's private data (values, group
keys, number of candidate groups)."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from kinds_helpers import charges_of, small_job, write_csv
from leak_helpers import Features, assert_no_deterministic_leak, fresh_job_run

from hdp_spark.core.ledger import UNIT
from hdp_spark.errors import BudgetExceededError, JobError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.planning import plan_budget

C, DELTA = 1.0, 1e-7
STEP = C / 1024

RELEASE = """
[[releases]]
id = "spend"
by = "merchant"
select_keys = { delta = 1e-7, c = 1.0, share = 0.4 }

  [[releases.aggregators]]
  kind = "mean"
  column = "spend"
  lower = 0
  upper = 500

  [[releases.aggregators]]
  kind = "histogram"
  column = "kind"
  categories = ["a", "b"]
"""


def _frame(seed: int = 0) -> pd.DataFrame:
    """Two large merchants and a one-person merchant ("solo", ε = 3, never released at
    δ = 1e-7); one public row (ε = +inf) and one ε = 0 row in "big"."""
    rng = np.random.default_rng(seed)
    sizes = {"big": 1500, "mid": 600, "solo": 1}
    merchant = np.concatenate([[k] * v for k, v in sizes.items()])
    n = len(merchant)
    eps = np.exp(rng.uniform(math.log(0.05), math.log(5), n))
    eps[0], eps[1], eps[-1] = math.inf, 0.0, 3.0
    return pd.DataFrame({
        "user_id": np.arange(1, n + 1), "merchant": merchant, "eps": eps,
        "spend": rng.uniform(0, 500, n).round(2), "kind": rng.choice(["a", "b"], n),
        "budget": np.where(np.arange(n) % 7 == 3, 0.3, 5.0),
    })


def _kappa(eps: np.ndarray) -> np.ndarray:
    """min(ε, c) rounded down to the step, computed independently of the library."""
    return np.floor(np.minimum(eps, C) / STEP) * STEP


def _job(tmp: Path, frame: pd.DataFrame, **kw: Any) -> Path:
    data = write_csv(frame, tmp / "table.csv")
    return small_job(tmp, data, kw.pop("releases", RELEASE), **kw)


def _units(tmp: Path) -> dict[str, int]:
    return charges_of(tmp / "ledger.sqlite", "spend")


def test_every_row_is_charged_kappa_released_group_or_not(tmp_path: Path) -> None:
    frame = _frame()
    run = run_job(_job(tmp_path, frame, budget="default = 2.0"))
    rows = run.values("spend")
    assert [r["merchant"] for r in rows] == ["big", "mid"]  # "solo" is never released
    expected = _kappa(frame["eps"].to_numpy())
    units = _units(tmp_path)
    for uid, k in zip(frame["user_id"], expected, strict=True):
        assert units.get(str(uid), 0) == round(k / UNIT), uid
    solo = str(frame["user_id"].iloc[-1])
    assert units[solo] * UNIT == C  # read by the selection, charged c although unreleased
    assert units[str(frame["user_id"].iloc[0])] * UNIT == C  # ε = +inf counts as c
    assert str(frame["user_id"].iloc[1]) not in units  # ε = 0: charged (0, δ)
    record = run.releases[0].record
    assert record.units_charged == sum(units.values())
    outcome = record.outcome_data()
    assert outcome["budget"]["delta"] == DELTA  # δ recorded per release
    assert record.delta == DELTA
    from hdp_spark.ledger import SqliteLedger

    (stored,) = [r for r in SqliteLedger(tmp_path / "ledger.sqlite").records(None)
                 if r.release_id == "spend"]
    assert stored.delta == DELTA  # read back from the ledger
    assert outcome["selection"]["delta"] == DELTA
    assert outcome["selection"]["c"] == C
    # the table-wide charge classes add up to the rows and the charge
    classes = outcome["selection"]["charges"]
    assert sum(n for _, n, _ in classes) == len(frame)
    assert math.isclose(sum(n * k for _, n, k in classes), expected.sum())
    for r in rows:
        assert r["spend_mean_delta"] == DELTA
        assert r["spend_mean_privacy"] == "partition_selection"
        assert "spend_mean_n" not in r
        assert "spend_mean_eps_levels" not in r
    report = (tmp_path / "out" / "report.md").read_text()
    assert "protected with (κ_i, δ)-DP for this release" in report
    assert "δ = 1e-07" in report
    assert "2 groups chosen privately by partition selection" in report
    assert "solo" not in report
    from report_helpers import check_report

    parts = check_report(tmp_path / "out", ["spend"])
    assert "partition selection, δ (delta)" in parts["## Glossary"]
    # a re-run re-publishes and charges nothing
    again = run_job(_job(tmp_path, frame, budget="default = 2.0"))
    assert again.releases[0].status == "republished"
    assert _units(tmp_path) == units


@pytest.mark.parametrize("policy", ["cap", "exclude"])
def test_budget_rule_applies_before_the_selection(tmp_path: Path, policy: str) -> None:
    frame = _frame()
    budget = 'column = "budget"\ndefault = 5.0'
    run = run_job(_job(tmp_path, frame, budget=budget, policy=policy))
    eps = frame["eps"].to_numpy()
    low = frame["budget"].to_numpy() < 1
    demand = np.minimum(eps, C)  # the whole release demands min(ε, c), not 2·ε
    over = low & (demand > 0.3)
    if policy == "cap":
        capped = np.where(over, 0.3, demand)
    else:
        capped = np.where(over, 0.0, demand)
    units = _units(tmp_path)
    for uid, k in zip(frame["user_id"], _kappa(capped), strict=True):
        assert units.get(str(uid), 0) == round(k / UNIT), uid
        assert units.get(str(uid), 0) * UNIT <= (0.3 if low[uid - 1] else 5.0)
    budget_out = run.releases[0].record.outcome_data()["budget"]
    key = "users_capped" if policy == "cap" else "users_excluded"
    assert budget_out[key] == int(over.sum())
    # ε = +inf with budget 5 > c is not capped: its demand is c
    assert not over[0]
    assert units[str(frame["user_id"].iloc[0])] * UNIT == C


def test_fail_policy_refuses_and_charges_nothing(tmp_path: Path) -> None:
    frame = _frame()
    job = _job(tmp_path, frame, budget='column = "budget"\ndefault = 5.0', policy="fail")
    with pytest.raises(BudgetExceededError, match="policy"):
        run_job(job)
    assert _units(tmp_path) == {}


def test_a_changed_delta_is_a_new_release(tmp_path: Path) -> None:
    frame = _frame()
    run_job(_job(tmp_path, frame))
    first = sum(_units(tmp_path).values())
    other = RELEASE.replace("delta = 1e-7", "delta = 1e-8")
    run = run_job(_job(tmp_path, frame, releases=other))
    assert run.releases[0].status == "committed"
    assert run.releases[0].record.outcome_data()["budget"]["delta"] == 1e-8
    assert run.releases[0].record.units_charged == first


@pytest.mark.parametrize(("policy", "charge"), [
    ("cap", "effective"), ("exclude", "effective"), ("cap", "demand"),
])
def test_plan_predicts_the_charges_exactly(tmp_path: Path, policy: str, charge: str) -> None:
    """`hdp-release plan` charges every row κ of its capped ε, as the run does (user by
    user, with budgets that cap or exclude some users), predicts no accuracy, and reads
    no group column (the groups are private)."""
    from hdp_spark.jobs.planning import public_columns

    job = _job(tmp_path, _frame(), policy=policy,
               budget=f'column = "budget"\ndefault = 5.0\ncharge = "{charge}"')
    assert "merchant" not in public_columns(load_job(job))
    plan = plan_budget(job)
    assert not (tmp_path / "ledger.sqlite").exists()  # the plan wrote nothing
    assert set(plan.allocations) == {"sequential"}
    (preds,) = plan.predictions
    assert {p.basis for p in preds} == {"none"}
    assert len(preds) == 2
    sim = plan.selected.simulation.releases[0]
    predicted = {u: int(sim.charges[row]) for u, row in
                 zip(plan.user_ids, plan.user_rows, strict=True) if sim.charges[row]}
    run_job(job)
    assert predicted == _units(tmp_path)
    assert sim.users_over > 0  # the budgets did bite


def test_allocation_refuses_a_selection_release(tmp_path: Path) -> None:
    equal = _job(tmp_path, _frame(), budget='default = 2.0\nallocation = "equal"')
    with pytest.raises(JobError, match=r"select_keys.*data.*κ_i = min"):
        run_job(equal)
    with pytest.raises(JobError, match=r"select_keys.*data.*κ_i = min"):
        plan_budget(equal)
    assert not (tmp_path / "out").exists()  # refused before anything was read or written


def test_check_reports_users_over_budget(tmp_path: Path) -> None:
    from hdp_spark.jobs import check_job

    frame = _frame()
    checked = check_job(_job(tmp_path, frame, budget='column = "budget"\ndefault = 5.0'))
    (plan,) = checked.plans
    low = frame["budget"].to_numpy() < 1
    assert plan.rows_in_release == len(frame)
    assert plan.users_over_budget == int((low & (np.minimum(frame["eps"], C) > 0.3)).sum())


_BAD = [
    ('select_keys = { delta = 2.0, c = 1.0, share = 0.4 }', "`delta` must be in (0, 1)"),
    ('select_keys = { delta = 1e-7, c = 0, share = 0.4 }', "`c` must be a finite number"),
    ('select_keys = { delta = 1e-7, c = "one", share = 0.4 }', "`c` must be a number"),
    ('select_keys = { delta = 1e-7, c = 1.0, share = 1.0 }', "`share` must be in (0, 1)"),
    ('select_keys = { delta = 1e-7, c = 1.0 }', "`share` is missing"),
    ('select_keys = { delta = 1e-7, c = 1.0, share = 0.4, tau = 2 }',
     "unknown key `tau` in [[releases]] id = 'spend': select_keys; valid keys: c, delta, "
     "neighbours, share, step."),
    ('select_keys = { delta = 1e-7, c = 1.0, share = 0.4, step = 5.0 }', "`step` must be"),
    ('select_keys = { delta = 1e-7, c = 1.0, share = 0.4, neighbours = "x" }',
     "`neighbours` must be one of"),
    ('select_keys = 0.5', "must be a table"),
    # a job publishes row counts per ε level: public under replacement only
    ('select_keys = { delta = 1e-7, c = 1.0, share = 0.4, neighbours = "add_remove" }',
     "neighbours` must be 'replace' in a job"),
]


@pytest.mark.parametrize(("line", "words"), _BAD)
def test_bad_select_keys_settings_are_named(tmp_path: Path, line: str, words: str) -> None:
    text = RELEASE.replace('select_keys = { delta = 1e-7, c = 1.0, share = 0.4 }', line)
    with pytest.raises(JobError) as info:
        load_job(_job(tmp_path, _frame(), releases=text))
    assert words in str(info.value)
    assert "id = 'spend'" in str(info.value)


def test_bad_select_keys_releases_are_named(tmp_path: Path) -> None:
    frame = _frame()
    cases = [
        (RELEASE.replace('by = "merchant"\n', ""), "needs `by`"),
        (RELEASE.replace('by = "merchant"\n', 'by = "merchant"\nkeys = ["big"]\n'),
         "must not be given with `select_keys`"),
        (RELEASE.replace('kind = "histogram"', 'kind = "histogram"\n  project = true'),
         "project` must be false"),
        (RELEASE.replace('kind = "histogram"', 'kind = "histogram"\n  eps = "budget"'),
         "the same `eps` column"),
        (RELEASE.replace('kind = "mean"', 'kind = "user_mean"'), "supports the kinds"),
    ]
    for text, words in cases:
        with pytest.raises(JobError) as info:
            load_job(_job(tmp_path, frame, releases=text))
        assert words in str(info.value), text


@pytest.mark.spark
def test_spark_publishes_and_charges_what_pandas_does(tmp_path: Path, spark: Any) -> None:
    frame = _frame()
    (tmp_path / "p").mkdir()
    (tmp_path / "s").mkdir()
    budget = 'column = "budget"\ndefault = 5.0'
    pandas_run = run_job(_job(tmp_path / "p", frame, budget=budget))
    spark_run = run_job(_job(tmp_path / "s", frame, budget=budget, engine="spark"),
                        spark=spark)
    assert spark_run.values("spend") == pandas_run.values("spend")
    assert charges_of(tmp_path / "s" / "ledger.sqlite", "spend") == \
        charges_of(tmp_path / "p" / "ledger.sqlite", "spend")
    a = pandas_run.releases[0].record.outcome_data()
    b = spark_run.releases[0].record.outcome_data()
    # pandas' CSV parser may read an ε an ulp away from Spark's: levels approx, the rest
    # (rows per level, κ, every other parameter) exact
    sa, sb = a.pop("selection"), b.pop("selection")
    ca, cb = sa.pop("charges"), sb.pop("charges")
    assert sa == sb
    assert [(n, k) for _, n, k in ca] == [(n, k) for _, n, k in cb]
    assert [e for e, _, _ in ca] == pytest.approx([e for e, _, _ in cb], rel=1e-15)
    assert a["budget"] == b["budget"]


def _neighbour(frame: pd.DataFrame) -> pd.DataFrame:
    """Person 5's spend and kind changed, person 6 moved from "big" to a new one-person
    merchant (one more candidate group), the solo person moved to another merchant name:
    same ids, ε and n."""
    out = frame.copy()
    out.loc[out["user_id"] == 5, "spend"] = 499.0 if out.loc[4, "spend"] < 250 else 1.0
    out.loc[out["user_id"] == 5, "kind"] = "a" if out.loc[4, "kind"] == "b" else "b"
    out.loc[out["user_id"] == 6, "merchant"] = "newcomer"
    out.loc[out["merchant"] == "solo", "merchant"] = "solo2"
    return out


def test_selection_job_publishes_nothing_deterministic(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = _frame()
    neighbour = _neighbour(table)
    root = tmp_path / "run"
    root.mkdir()
    job = _job(root, table, seed=None, budget="default = 2.0")

    def run(frame: pd.DataFrame) -> Features:
        return fresh_job_run(root, job, frame, caplog)

    _runs, others = assert_no_deterministic_leak(lambda: run(table), lambda: run(neighbour))
    keys = {k[-1] for k in others[0]}
    assert {"spend_mean", "spend_mean_weight", "kind_histogram"} <= keys  # not vacuous
    text = "\n".join(str(v) for v in others[0].values())
    assert "newcomer" not in text  # candidates never published
    assert "solo2" not in text


def test_stage_times_stay_below_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A selection release's run time grows with its unreleased candidate groups, so no
    stage time is logged above DEBUG (every stage's, the selection release's included)."""
    job = _job(tmp_path, _frame(), budget="default = 2.0")
    with caplog.at_level(logging.DEBUG, logger="hdp_spark"):
        run_job(job)
    timed = [r for r in caplog.records if "done in" in r.getMessage()]
    selection = [r for r in timed if r.getMessage().startswith(("stage release:", "stage "))
                 and ":" in r.getMessage().split()[1]]
    assert selection, "the selection release's stages must still be timed (at DEBUG)"
    assert any(r.getMessage().startswith("stage load") for r in timed)
    assert {r.levelno for r in timed} == {logging.DEBUG}
    assert not [r for r in caplog.records if r.levelno >= logging.INFO
                and re.search(r"\d s\b|seconds", r.getMessage())]


def test_sample_selection_job_runs_and_charges_kappa(tmp_path: Path) -> None:
    from kinds_helpers import PEOPLE, REPO

    text = (REPO / "jobs" / "sample_selection.toml").read_text()
    for old, new in (
        ('path = "../data/people.csv"', f'path = "{PEOPLE}"'),
        ('schema = "../schemas/people.yaml"', f'schema = "{REPO / "schemas" / "people.yaml"}"'),
        ('path = "../out/ledger/people_selection.sqlite"',
         f'path = "{tmp_path / "ledger.sqlite"}"'),
        ('witness = "../out/witness/people_selection.json"',
         f'witness = "{tmp_path / "witness.json"}"'),
        ('path = "../out/sample_selection"', f'path = "{tmp_path / "out"}"'),
    ):
        assert old in text, old
        text = text.replace(old, new)
    job = tmp_path / "job.toml"
    job.write_text(text)
    run = run_job(job)
    rows = run.values("income_by_occupation")
    assert [r["occupation"] for r in rows] == sorted(r["occupation"] for r in rows)
    assert rows  # groups of 176+ people at ε >= 0.25 pass the threshold
    people = pd.read_csv(PEOPLE)
    units = charges_of(tmp_path / "ledger.sqlite", "income_by_occupation")
    expected = _kappa(people["eps"].to_numpy())
    assert {str(u): round(k / UNIT) for u, k in zip(people["user_id"], expected, strict=True)
            if k > 0} == units


@pytest.mark.parametrize("c", [1.5, 2.0, 0.3, 50.0])
def test_clipping_at_c_changes_no_kappa_on_a_grid(c: float) -> None:
    from hdp_spark.core.levels import EpsGrid, levels_numpy
    from hdp_spark.core.selection import select_keys
    from hdp_spark.jobs.selection import charge_table, clip_point

    grid = EpsGrid(ratio=2.0, lowest=0.125, highest=8.0)
    sel = select_keys(delta=1e-7, c=c, share=0.4)
    eps = np.concatenate([np.exp(np.random.default_rng(1).uniform(-2, 3, 500)),
                          [0.0, math.inf, c, 8.0, 100.0]])
    point = clip_point(sel, grid)
    assert point >= c
    clipped = np.where(eps > point, point, eps)
    raw, cut = levels_numpy(eps, grid), levels_numpy(clipped, grid)
    table = charge_table(sel, sorted(set(raw) | set(cut)))
    before = [table[((), lv)] for lv in raw]
    after = [table[((), lv)] for lv in cut]
    if c > grid.highest:  # documented: a public row then gets the grid's top, not c
        assert before[-4] == c
        assert after[-4] == table[((), grid.highest)] < c
        before[-4] = after[-4]
    assert before == after
    assert np.all(clipped <= np.maximum(point, 0))
