"""``hdp-release plan`` on jobs with every aggregator kind (issue 20, second slice).

The plan charges what the run then charges: exactly for mean, histogram, heavy hitters,
attribute histograms and the LDP aggregation (which charges nothing), and an upper bound
for the user-level mean (its final step's eps_effective is data-dependent), exact with
charge mode "demand". Its accuracy figures come from ``explain`` (user-level mean, LDP) or
the partial-DP kinds' parameters. "equal"/"optimal" refuse the kinds whose error they
cannot weigh, naming them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from job_helpers import spent_by_user
from kinds_helpers import EVENTS, PEOPLE, charges_of, sample_jobs

from hdp_spark.cli import main
from hdp_spark.errors import JobError
from hdp_spark.jobs import plan_budget, run_job
from hdp_spark.jobs.planning import render_plan


def _with_budget(path: Path, extra: str) -> Path:
    text = path.read_text().replace("[budget]\n", f"[budget]\n{extra}\n", 1)
    path.write_text(text)
    return path


def _release_units(plan: Any, r: int) -> dict[str, int]:
    o = plan.selected.simulation.releases[r]
    return {u: int(o.charges[row]) for u, row in zip(plan.user_ids, plan.user_rows,
                                                     strict=True) if o.charges[row]}


def _plan_units(plan: Any) -> dict[str, int]:
    total = plan.profile.remaining - plan.selected.simulation.remaining
    return {u: int(total[row]) for u, row in zip(plan.user_ids, plan.user_rows, strict=True)
            if total[row]}


def test_plan_predicts_every_kind_exactly_with_demand_charges(tmp_path: Path) -> None:
    every, _user = sample_jobs(tmp_path)
    _with_budget(every, 'charge = "demand"')
    plan = plan_budget(every)
    assert not (tmp_path / "ledger").exists()
    run = run_job(every)
    ledger = tmp_path / "ledger" / "people.sqlite"
    for r, rel in enumerate(plan.releases):
        assert _release_units(plan, r) == charges_of(ledger, rel.id), rel.id
    assert _plan_units(plan) == spent_by_user(every)
    assert [r.status for r in run.releases] == ["committed"] * 7  # incl. marginals, MWEM
    # the partial-DP releases left out exactly the persons without budget for them
    hh = plan.selected.simulation.releases[2]
    assert hh.users_over > 0


def test_user_mean_charges_are_upper_bounds(tmp_path: Path) -> None:
    every, _user = sample_jobs(tmp_path)
    plan = plan_budget(every)  # charge mode "effective"
    sim = plan.selected.simulation
    assert not sim.releases[0].charges_exact  # heterogeneous ε in the final steps
    assert sim.releases[1].charges_exact
    run_job(every)
    ledger = tmp_path / "ledger" / "people.sqlite"
    predicted = _release_units(plan, 0)
    actual = charges_of(ledger, "income_by_region")
    assert set(actual) <= set(predicted)
    assert all(actual[u] <= predicted[u] for u in actual)
    assert sum(actual.values()) < sum(predicted.values())  # a bound, and here a strict one
    assert _release_units(plan, 1) == charges_of(ledger, "occupation_histogram")
    text = render_plan(plan)
    assert "charges are upper bounds" in text


def test_user_level_job_plan(tmp_path: Path) -> None:
    """Repeated user ids (user-level kinds only): one profile row per user; the accuracy
    is ``explain``'s on the input, and with charge mode "demand" the charges are the
    run's."""
    import hdp_spark.pandas as hpd
    from hdp_spark.jobs import load_job

    _every, user = sample_jobs(tmp_path)
    _with_budget(user, 'charge = "demand"')
    plan = plan_budget(user)
    events = pd.read_csv(EVENTS)
    assert plan.users == events["user_id"].nunique()
    job = load_job(user)
    spec = job.releases[0].aggregators[0].spec
    keys = [k[0] for k in job.releases[0].keys]
    direct = hpd.explain(events, spec, by="region", keys=keys)
    preds = plan.predictions[0]
    assert [p.key for p in preds] == [(k,) for k in keys]
    assert [p.half_width for p in preds] == list(direct["half_width"])
    assert [p.noise_scale for p in preds] == list(direct["noise_scale"])
    assert {p.basis for p in preds} == {"bound"}
    run_job(user)
    assert _plan_units(plan) == spent_by_user(user)


def test_plan_of_every_kind_reads_only_public_columns(tmp_path: Path) -> None:
    people = pd.read_csv(PEOPLE)
    rng = np.random.default_rng(3)
    scrambled = people.copy()
    scrambled["income"] = rng.uniform(-1e9, 1e9, len(people))
    scrambled["satisfaction_report"] = rng.uniform(-50, 50, len(people))
    for col in ("sex", "occupation", "age_band"):
        scrambled[col] = scrambled[col].sample(frac=1.0, random_state=4).to_numpy()
    scrambled.to_csv(tmp_path / "scrambled.csv", index=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _ = sample_jobs(tmp_path / "a")
    b, _ = sample_jobs(tmp_path / "b", people=tmp_path / "scrambled.csv")
    assert render_plan(plan_budget(a)) == render_plan(plan_budget(b))


@pytest.mark.parametrize("allocation", ["equal", "optimal"])
def test_allocation_refuses_unweighable_kinds(tmp_path: Path, allocation: str) -> None:
    every, _user = sample_jobs(tmp_path)
    _with_budget(every, f'allocation = "{allocation}"')
    with pytest.raises(JobError, match="kind 'heavy_hitters' cannot be allocated yet"):
        plan_budget(every)
    with pytest.raises(JobError, match="cannot be allocated yet"):
        run_job(every)
    assert not (tmp_path / "ledger").exists()
    assert main(["plan", str(every), "--no-plot"]) == 2


USER_MEANS = """
[[releases]]
id = "ctr_global"
weight = 3.0

  [[releases.aggregators]]
  kind = "user_mean"
  column = "clicked"
  lower = 0
  upper = 1
"""


@pytest.mark.parametrize("allocation", ["equal", "optimal"])
def test_user_mean_allocation(tmp_path: Path, allocation: str) -> None:
    """User-level means are allocated with their explain bound as the error: the plan
    predicts the run (exactly with charge mode "demand"), no user exceeds the budget and
    "optimal" is no worse than the other two."""
    _every, user = sample_jobs(tmp_path)
    text = user.read_text().replace("default = 6.0", "default = 1.5", 1)
    text = text.replace('policy = "cap"',
                        f'policy = "cap"\ncharge = "demand"\nallocation = "{allocation}"', 1)
    user.write_text(text + USER_MEANS)
    plan = plan_budget(user)
    errors = {m: a.error for m, a in plan.allocations.items()}
    assert set(errors) == {"sequential", "equal", "optimal"}
    assert errors["optimal"] <= min(errors["sequential"], errors["equal"])
    assert all(np.isfinite(list(errors.values())))
    sim = plan.selected.simulation
    assert (sim.remaining >= 0).all()
    run = run_job(user)
    assert run.allocation is not None
    assert _plan_units(plan) == spent_by_user(user)


def test_plan_command_on_the_all_kinds_job(tmp_path: Path, capsys: Any) -> None:
    every, _user = sample_jobs(tmp_path)
    png = tmp_path / "plan.png"
    assert main(["plan", str(every), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for word in ("income_user_mean", "heavy_hitters", "attribute_histograms",
                 "satisfaction_report_mean", "charges nothing", "released with probability",
                 "n/a", "bound"):
        assert word in out, word
    assert png.exists()


def test_user_mean_charges_exact_with_one_level_per_group(tmp_path: Path) -> None:
    """One ε level per group: the final step's largest eps_effective is that level, so even
    charge mode "effective" is predicted exactly."""
    events = pd.read_csv(EVENTS)
    levels = {"north": 0.5, "south": 1.0, "east": 2.0, "west": 0.25}
    events["eps"] = events["region"].map(levels)
    events.to_csv(tmp_path / "events.csv", index=False)
    _every, user = sample_jobs(tmp_path, events=tmp_path / "events.csv")
    plan = plan_budget(user)
    assert plan.selected.simulation.releases[0].charges_exact
    run_job(user)
    assert _plan_units(plan) == spent_by_user(user)


def test_all_kinds_plan_is_the_same_on_spark(tmp_path: Path, spark: Any) -> None:
    every, _user = sample_jobs(tmp_path)
    on_pandas = plan_budget(every)
    on_spark = plan_budget(every, engine="spark", spark=spark)
    assert render_plan(on_spark) == render_plan(on_pandas)
