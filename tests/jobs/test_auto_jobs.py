"""Jobs accept ``method = "auto"`` (issue 35): the run charges what the plan predicts (the
chosen method's eps_effective per level), the outputs name the chosen method, and the
plan says what was chosen and why."""

from __future__ import annotations

from pathlib import Path

from job_helpers import spent_by_user
from kinds_helpers import charges_of, people_frame, small_job, write_csv

from hdp_spark.core.histogram.auto import HISTOGRAM_CANDIDATES
from hdp_spark.core.mean.auto import MEAN_CANDIDATES
from hdp_spark.jobs import plan_budget, run_job
from hdp_spark.jobs.planning import render_plan

RELEASES = """
[[releases]]
id = "income_auto"
by = ["region"]
keys = ["north", "south", "east"]

  [[releases.aggregators]]
  kind = "mean"
  column = "income"
  lower = 0
  upper = 100000
  method = "auto"

[[releases]]
id = "occupation_auto"

  [[releases.aggregators]]
  kind = "histogram"
  column = "occupation"
  categories = ["manual", "professional"]
  method = "auto"
"""


def test_job_with_auto_methods_charges_what_the_plan_predicts(tmp_path: Path) -> None:
    frame = people_frame()
    frame["eps"] = frame["eps"].where(frame.index % 5 != 0, 0.05)  # a three-level mix
    data = write_csv(frame, tmp_path / "people.csv")
    job = small_job(tmp_path, data, RELEASES, budget='default = 10.0\ncharge = "demand"')
    plan = plan_budget(job)
    text = render_plan(plan)
    assert "auto chose " in text
    assert "runner-up" in text
    run = run_job(job)
    assert [r.status for r in run.releases] == ["committed", "committed"]
    ledger = tmp_path / "ledger.sqlite"
    for r, rel in enumerate(plan.releases):
        o = plan.selected.simulation.releases[r]
        predicted = {u: int(o.charges[row]) for u, row in zip(
            plan.user_ids, plan.user_rows, strict=True) if o.charges[row]}
        assert predicted == charges_of(ledger, rel.id), rel.id
    total = plan.profile.remaining - plan.selected.simulation.remaining
    assert {u: int(total[row]) for u, row in zip(plan.user_ids, plan.user_rows, strict=True)
            if total[row]} == spent_by_user(job)
    means = run.values("income_auto")
    assert {r["income_mean_method"] for r in means} <= set(MEAN_CANDIDATES)
    hist = run.values("occupation_auto")
    assert {r["occupation_histogram_method"] for r in hist} <= set(HISTOGRAM_CANDIDATES)
