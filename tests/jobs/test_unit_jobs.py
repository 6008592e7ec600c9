"""Job releases under a privacy unit (``[releases.privacy_unit]``, issue 50).

The ledger charges each user ONCE per release, G·R·k·γ of their capped ε (at most their
ε), however many rows or groups they have, rows in the public keys or not; a re-run
charges nothing; the outcome holds the parameters and the per-level charges but no row
count; plan models the charges and allocation refuses; bad settings are named; Spark
publishes and charges the same."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from kinds_helpers import charges_of, small_job, write_csv

from hdp_spark.core.ledger import UNIT
from hdp_spark.errors import JobError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.planning import plan_budget

G, R, CAP = 2, 3, 1.0
STEP = CAP / 1024

RELEASE = """
[[releases]]
id = "spend"
by = "country"
keys = ["DE", "FR", "IT"]
privacy_unit = { max_groups = 2, max_rows = 3 }

  [[releases.aggregators]]
  kind = "mean"
  column = "amount"
  lower = 0
  upper = 500

  [[releases.aggregators]]
  kind = "histogram"
  column = "category"
  categories = ["a", "b"]
"""


def _events(seed: int = 0, persons: int = 150) -> pd.DataFrame:
    """Events: 1-40 rows per person over four countries (one outside the keys); each
    person's ε is constant except person 1's (two values)."""
    rng = np.random.default_rng(seed)
    rows = []
    eps_of = np.exp(rng.uniform(math.log(0.1), math.log(4.0), persons + 1))
    for person in range(1, persons + 1):
        for _ in range(int(rng.integers(1, 40))):
            rows.append({"user_id": person, "country": rng.choice(["DE", "FR", "IT", "XX"]),
                         "amount": float(rng.uniform(0, 500)),
                         "category": str(rng.choice(["a", "b"])),
                         "eps": float(eps_of[person])})
    frame = pd.DataFrame(rows)
    frame.loc[frame["user_id"] == 1, "eps"] = [0.5, 2.0] * int((frame["user_id"] == 1)
                                                              .sum() // 2) + [0.5] * int(
        (frame["user_id"] == 1).sum() % 2)
    frame.loc[frame["user_id"] == 2, "country"] = "XX"  # no row in the public keys
    return frame


def _charge(eps: float) -> float:
    """G·R·⌊⌊min(ε/G, c)/γ⌋/R⌋·γ, computed independently of the library."""
    per_group = math.floor(min(eps / G, CAP) / STEP)
    return G * R * (per_group // R) * STEP


def _job(tmp: Path, frame: pd.DataFrame, **kw: Any) -> Path:
    data = write_csv(frame, tmp / "table.csv")
    return small_job(tmp, data, kw.pop("releases", RELEASE), **kw)


def test_each_user_is_charged_once_whatever_their_rows(tmp_path: Path) -> None:
    frame = _events()
    run = run_job(_job(tmp_path, frame, budget="default = 10.0"))
    rows = run.values("spend")
    assert [r["country"] for r in rows] == ["DE", "FR", "IT"]
    units = charges_of(tmp_path / "ledger.sqlite", "spend")
    for uid, eps in frame.groupby("user_id")["eps"].min().items():
        assert units[str(uid)] == round(_charge(float(eps)) / UNIT), uid
    assert units["2"] > 0  # no row in the public keys: charged all the same
    # person 1: rows at 0.5 and 2.0: charged at 0.5, their ε (what the release spends)
    assert units["1"] == round(_charge(0.5) / UNIT) < round(_charge(2.0) / UNIT)
    record = run.releases[0].record
    assert record.units_charged == sum(units.values())
    outcome = record.outcome_data()
    unit = outcome["privacy_unit"]
    assert (unit["column"], unit["max_groups"], unit["max_rows"]) == ("user_id", G, R)
    assert all(len(c) == 2 for c in unit["charges"])  # [ε level, charge]: no row counts
    assert outcome["budget"]["public_rows"] == 0
    for r in rows:
        assert r["amount_mean_privacy"] == "privacy_unit"
        assert "amount_mean_n" not in r
    # a re-run re-publishes and charges nothing
    again = run_job(_job(tmp_path, frame, budget="default = 10.0"))
    assert again.releases[0].status == "republished"
    assert charges_of(tmp_path / "ledger.sqlite", "spend") == units


def test_budget_caps_the_person(tmp_path: Path) -> None:
    frame = _events(seed=1)
    run_job(_job(tmp_path, frame, budget="default = 0.3"))
    units = charges_of(tmp_path / "ledger.sqlite", "spend")
    assert max(units.values()) * UNIT <= 0.3 + 1e-12
    for uid, eps in frame.groupby("user_id")["eps"].min().items():
        assert units[str(uid)] == round(_charge(min(float(eps), 0.3)) / UNIT), uid


@pytest.mark.parametrize("policy", ["cap", "exclude"])
def test_plan_matches_the_run_for_a_person_with_mixed_eps(tmp_path: Path, policy: str) -> None:
    """Person 1's rows at 0.5 and 2.0, budgets above and between them: the plan and the
    run both use the person's ε (the smallest of their rows), under both policies."""
    frame = _events(seed=3)
    for budget, expect in (("10.0", _charge(0.5)), ("1.0", _charge(0.5))):
        root = tmp_path / f"{policy}-{budget}"
        root.mkdir()
        path = _job(root, frame, budget=f"default = {budget}")
        path.write_text(path.read_text().replace('policy = "cap"', f'policy = "{policy}"'))
        job = load_job(path)
        plan = plan_budget(job)
        sim = plan.selected.simulation.releases[0]
        predicted = {u: int(sim.charges[row]) for u, row in
                     zip(plan.user_ids, plan.user_rows, strict=True) if sim.charges[row]}
        run_job(job)
        units = charges_of(root / "ledger.sqlite", "spend")
        assert predicted == units
        assert units["1"] == round(expect / UNIT)


def test_plan_matches_the_run_and_allocation_refuses(tmp_path: Path) -> None:
    frame = _events(seed=2)
    job = load_job(_job(tmp_path, frame, budget="default = 0.5"))
    plan = plan_budget(job)
    assert not (tmp_path / "ledger.sqlite").exists()  # the plan wrote nothing
    sim = plan.selected.simulation.releases[0]
    predicted = {u: int(sim.charges[row]) for u, row in
                 zip(plan.user_ids, plan.user_rows, strict=True) if sim.charges[row]}
    run_job(job)
    assert predicted == charges_of(tmp_path / "ledger.sqlite", "spend")
    equal = _job(tmp_path / "eq", frame) if (tmp_path / "eq").mkdir() is None else None
    assert equal is not None
    equal.write_text(equal.read_text().replace('policy = "cap"',
                                               'policy = "cap"\nallocation = "equal"'))
    with pytest.raises(JobError, match="uses `privacy_unit`: its weights are private"):
        plan_budget(load_job(equal))


def test_plan_shows_explain_s_public_figures(tmp_path: Path) -> None:
    """The plan's accuracy lines of a unit release are ``explain``'s figures for the same
    aggregators and bounds (no row count: none is public)."""
    import hdp_spark.pandas as hpd
    from hdp_spark.jobs.plan_render import render_plan
    from hdp_spark.report.fmt import fmt_num

    text = render_plan(plan_budget(load_job(_job(tmp_path, _events(seed=3)))))
    ex = hpd.explain(_events(seed=3), hpd.hdp_mean("amount", eps="eps", lower=0, upper=500),
                     hpd.hdp_histogram("category", eps="eps", categories=["a", "b"]),
                     by="country", keys=["DE", "FR", "IT"], privacy_unit="user_id",
                     max_groups=G, max_rows=R)
    for row in ex.head(2).itertuples():
        at = {d["weight"]: d for d in row.half_width_at}[1_000.0]
        cell = f"{fmt_num(at['central_half_width'])} (<= {fmt_num(at['half_width'])})"
        line = next(x for x in text.splitlines() if x.strip().startswith(row.aggregator))
        assert cell in line, (cell, line)
    assert "W = 1,000" in text
    assert "privacy unit: n and the ε histogram are private" in text


@pytest.mark.parametrize(("table", "needle"), [
    ("{ max_rows = 3 }", "requires max_groups, max_rows; `max_groups` is missing"),
    ("{ max_groups = 0, max_rows = 3 }", "`max_groups` must be an int in [1, 10000], got 0"),
    ("{ max_groups = 1, max_rows = 3, colour = 1 }", "colour"),
    ("{ max_groups = 1, max_rows = 3, weight_share = 2 }", "`weight_share` must be in (0, 1)"),
    ("7", "must be a table of max_groups, max_rows, eps_cap, weight_share"),
])
def test_bad_settings_are_named(tmp_path: Path, table: str, needle: str) -> None:
    text = RELEASE.replace("{ max_groups = 2, max_rows = 3 }", table)
    with pytest.raises(JobError) as err:
        load_job(_job(tmp_path, _events(persons=5), releases=text))
    assert needle in str(err.value)


def test_kind_and_selection_rules(tmp_path: Path) -> None:
    text = RELEASE.replace('keys = ["DE", "FR", "IT"]',
                           'select_keys = { delta = 1e-7, c = 1.0, share = 0.4 }').replace(
        "max_rows = 3 }", "max_rows = 3, eps_cap = 2.0 }")
    with pytest.raises(JobError, match="eps_cap` must not be given with `select_keys`"):
        load_job(_job(tmp_path, _events(persons=5), releases=text))
    text = RELEASE.replace('column = "amount"', 'column = "user_id"')
    with pytest.raises(JobError, match="identifies people"):
        load_job(_job(tmp_path, _events(persons=5), releases=text))


@pytest.mark.slow
def test_spark_publishes_and_charges_the_same(tmp_path: Path) -> None:
    frame = _events(seed=3, persons=60)
    local = run_job(_job(tmp_path / "p", frame) if (tmp_path / "p").mkdir() is None else None)
    spark_dir = tmp_path / "s"
    spark_dir.mkdir()
    remote = run_job(_job(spark_dir, frame, engine="spark"))
    assert remote.values("spend") == local.values("spend")
    assert (charges_of(spark_dir / "ledger.sqlite", "spend")
            == charges_of(tmp_path / "p" / "ledger.sqlite", "spend"))


def test_report_and_publication_under_a_neighbour(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Person 5's rows replaced by many more rows in other countries (same id and ε):
    nothing published is determined by the change except DP values; the report says each
    person is counted once and shows no row count."""

    from leak_helpers import Features, assert_no_deterministic_leak, fresh_job_run, text_lines

    table = _events(seed=4, persons=80)
    eps5 = float(table.loc[table["user_id"] == 5, "eps"].iloc[0])
    extra = pd.DataFrame([{"user_id": 5, "country": c, "amount": 499.0, "category": "b",
                           "eps": eps5} for c in ("FR", "IT", "XX") for _ in range(60)])
    neighbour = pd.concat([table[table["user_id"] != 5], extra], ignore_index=True)
    root = tmp_path / "run"
    root.mkdir()
    job = _job(root, table, seed=None, budget="default = 5.0")

    def run(frame: pd.DataFrame) -> Features:
        return fresh_job_run(root, job, frame, caplog)

    _runs, others = assert_no_deterministic_leak(lambda: run(table), lambda: run(neighbour))
    keys = {k[-1] for k in others[0]}
    assert {"amount_mean", "amount_mean_weight", "category_histogram"} <= keys  # not vacuous
    for report in (text_lines(feats, "report.md") for feats in others):  # every neighbour run
        assert "80 people, each counted once" in report
        assert "at most 2 groups and 3 rows per group of theirs are read" in report
