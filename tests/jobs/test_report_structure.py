"""The release report a data owner reads (issue 21): its structure on the bundled sample
jobs, and the numbers of its first screen checked against the ledger and the library.

* Structure (report_helpers.check_report): a first screen per release, values, privacy
  levels summarised as ranges whose labels never print the same, details, budgets, a
  glossary at the end; every plot present, referenced and decodable; the HTML
  self-contained with every image embedded.
* Cost: the per-user charge distribution printed on the first screen is the ledger's.
* Baseline: the single-ε interval is the one the library's own ``uniform`` method gives.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from job_helpers import DATA, GROUPED_RELEASE, REPO, spent_by_user, write_job
from report_helpers import check_report, sample_job, tables

from hdp_spark.core.ledger import UNIT
from hdp_spark.jobs import run_job
from hdp_spark.report.sections import commit_time
from hdp_spark.report.summary import (
    ChargeClass,
    baseline_half_width,
    charge_classes,
    eps_ranges,
    release_cost,
)

EMPLOYEES = ["salary_by_dept", "salary_by_region", "tenure_overall"]
KINDS = ["income_by_region", "occupation_histogram", "frequent_profiles", "attribute_counts",
         "satisfaction_ldp", "profile_marginals", "profile_mwem"]


def test_sample_job_report_structure(engine: Any, tmp_path: Path) -> None:
    job = sample_job(tmp_path, "sample_employees", engine.name)
    run = run_job(job, spark=engine.session)
    assert run.report is not None
    parts = check_report(run.report.parent, EMPLOYEES)
    text = run.report.read_text()
    # budget capping made levels such as 3.451 and 3.475 (4 minus an earlier charge): the
    # report shows them as one range
    region = parts["## Release `salary_by_region`"]
    levels = next(t for t in tables(region) if t[0][0] == "ε allowed")
    assert any("–" in row[0] for row in levels[1:]), levels
    assert len(levels) - 1 <= 8
    # public rows have one wording in every release, whatever budget capped them to
    public_labels = [next(t for t in tables(parts[f"## Release `{r}`"]) if t[0][0] ==
                          "ε allowed")[-1][0] for r in EMPLOYEES]
    assert public_labels[0] == "public: ∞ capped to 4"
    assert all(label.startswith("public: ∞ capped to ") for label in public_labels)
    assert re.fullmatch(r"public: ∞ capped to [0-9.]+–[0-9.]+", public_labels[1])
    # the sum of charges is said to be a total, and matches the ledger's record
    for r in run.releases:
        total = r.record.outcome_data()["budget"]["eps_charged_total"]
        body = parts[f"## Release `{r.release_id}`"]
        assert "a total, not one person's loss" in body
        assert f"All charges added up: {total:,.0f} ε" in body or \
            f"All charges added up: {total:.4g} ε" in body
    # accuracy in the unit the job declares (none claimed for salary), as a share of the
    # value, and the single-ε comparison
    assert "`salary` units" not in text
    assert "± 0.1226 years" in text or re.search(r"± [0-9.]+ years \(", text), text
    assert "% of the value)" in text
    assert "± with one ε for all (ε = 0.1)" in text
    # public rows (ε = +inf in the data) are named and counted apart; nobody else was capped
    # on this first run on a fresh ledger
    dept = parts["## Release `salary_by_dept`"]
    public = int((pd.read_csv(DATA)["eps"] == float("inf")).sum())
    assert public > 0
    assert f"{public:,} public rows (ε = ∞ in the data), capped to the budget" in dept
    assert "had their ε lowered" not in dept
    # the glossary explains the terms this report uses, and none of the others
    glossary = parts["## Glossary"]
    for term in ("privacy for free", "tiny ε", "public rows", "one ε for all"):
        assert term in glossary, term
    for term in ("partition selection", "user-level", "per-attribute", "device-randomized"):
        assert term not in glossary, term
    # the page can be sent as it is: no absolute local path
    for local in (str(tmp_path), str(REPO), str(Path.home())):
        assert local not in text
    assert "`../out/ledger/employees.sqlite` (relative to the job file)" in text
    assert f"engine of this run | {engine.name}" in text
    assert f"Computed by engine {engine.name} and charged in this run" in text
    # the budget left: a sentence and a histogram, not a table of independent quantiles
    budget = parts["## Budget left after this run"]
    assert "share of people" not in budget
    assert "Half of them have at least" in budget
    assert "plots/remaining_budget.png" in budget


def test_all_kinds_report_structure(engine: Any, tmp_path: Path) -> None:
    job = sample_job(tmp_path, "sample_all_kinds", engine.name)
    run = run_job(job, spark=engine.session)
    assert run.report is not None
    parts = check_report(run.report.parent, KINDS)
    assert "nothing charged" in parts["## Release `satisfaction_ldp`"]
    hist = parts["## Release `occupation_histogram`"]
    assert "percentage points" in hist
    # a weighted histogram's interval holds noise and ε-weighting; the part due to the
    # weighting is said in words and shown in its own column (issue 48)
    accuracy = next(ln for ln in hist.splitlines() if ln.startswith("- **Accuracy"))
    assert "of the table's own value, on any data: of which ±" in accuracy
    assert "worst-case effect of weighting rows by their ε" in accuracy
    header = next(t for t in tables(hist) if t[0][0] == "category")[0]
    assert header[2] == "95% interval (noise + ε-weighting)", header
    assert header.index("of which: weighting rows by ε (worst case)") > 2
    assert "left out for lack of budget" in parts["## Release `attribute_counts`"]
    # two aggregators on the same ε: their charges add up per person
    assert "may use up to a person's ε" in parts["## Release `income_by_region`"]


def test_report_of_an_empty_release_and_of_a_republished_one(tmp_path: Path) -> None:
    """A release whose public keys match no row, and a second run that re-publishes: the
    report still has its structure, says so in words, and prints no NaN."""
    releases = GROUPED_RELEASE.replace(
        'keys = ["engineering", "finance", "operations", "research", "sales"]',
        'keys = ["no_such_dept"]')
    job = write_job(tmp_path, releases=releases, report=True)
    first = run_job(job)
    assert first.report is not None
    parts = check_report(first.report.parent, ["salary_by_dept"], levels=False)
    body = parts["## Release `salary_by_dept`"]
    assert "- **For whom:** nobody: no row of the input falls in the release's public" in body
    assert "- **Cost:** nobody was charged." in body
    assert "(fallback)" in body
    assert "nan" not in first.report.read_text().lower()
    again = run_job(write_job(tmp_path, report=True))  # a fresh job on the same ledger...
    assert again.report is not None
    rerun = run_job(write_job(tmp_path, report=True))  # ...run twice: re-published
    assert rerun.report is not None
    assert [r.status for r in rerun.releases] == ["republished", "republished"]
    text = rerun.report.read_text()
    for r in rerun.releases:  # the commit's own time, beside this run's "run at"
        when = commit_time(r.record.committed_at)
        assert when.endswith("+00:00")
        assert "." not in when
        assert (f"_Re-published from the commit of {when} (computed then by engine pandas; "
                "nothing charged now)._") in text
        assert f"Re-published from the commit of {when} (`{r.record.commit_id}`)" in text
    assert "Commit `" not in text
    assert text.count("- **Cost (charged once, when it was first computed; nothing now):**") == 2
    # the same re-publication by a Spark run says that pandas computed the values
    from hdp_spark.report.markdown import render_report

    assert rerun.distribution is not None
    spark_text = render_report(tmp_path / "out", rerun.job.with_engine("spark"),
                               rerun.releases, rerun.distribution, plots=False)
    assert ("engine of this run | spark (releases re-published from earlier runs were "
            "computed by pandas") in spark_text
    assert spark_text.count("(computed then by engine pandas; nothing charged now)._") == 2
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {r["computed_by"] for r in manifest["releases"].values()} == {"pandas"}


def test_charge_distribution_is_the_ledgers(tmp_path: Path) -> None:
    """min / median / max of the per-user charges computed from the published levels equal
    those of the ledger's spends (one release: a user's spend is their charge)."""
    job = write_job(tmp_path, releases=GROUPED_RELEASE, report=True, budget="default = 0.45")
    run = run_job(job)
    outcome = run.releases[0].record.outcome_data()
    agg = outcome["aggregators"][0]
    classes = charge_classes(agg, outcome["rows"], outcome["by"], "effective")
    assert classes is not None
    cost = release_cost([classes])
    assert cost is not None
    spent = sorted(u * UNIT for u in spent_by_user(job).values())
    assert cost.users == len(spent) == 5000
    lo, med, hi = cost.charged
    assert lo == pytest.approx(spent[0], rel=1e-6)
    assert hi == pytest.approx(spent[-1], rel=1e-6)
    assert med == pytest.approx(statistics.median_low(spent), rel=1e-6)
    assert cost.total == pytest.approx(outcome["budget"]["eps_charged_total"], rel=1e-6)
    # budget 0.45 caps every ε above it; the capped users are those with ε > 0.45
    table = pd.read_csv(DATA)
    assert outcome["budget"]["users_capped"] == int((table["eps"] > 0.45).sum())
    assert run.report is not None
    text = run.report.read_text()
    assert "had their ε lowered to the budget they had left" in text


def test_baseline_is_the_uniform_method(engine: Any) -> None:
    """The single-ε interval of the report equals the library's own ``uniform`` method (every
    row at ε_min) on the same public facts: n, ε_min, bounds, β."""
    hpd = engine.module
    table = pd.read_csv(DATA)
    keys = ["engineering", "finance", "operations", "research", "sales"]
    for beta in (0.05, 0.2):
        out = engine.agg(table, hpd.hdp_mean("salary", eps="eps", lower=20000, upper=250000,
                                             method="uniform", beta=beta),
                         by="dept", keys=keys)
        agg = {"kind": "mean", "name": "salary_mean",
               "definition": {"lower": 20000, "upper": 250000, "beta": beta}}
        for _, row in out.iterrows():
            levels = [dict(lv) for lv in row["salary_mean_eps_levels"]]
            expected = (row["salary_mean_ci_high"] - row["salary_mean_ci_low"]) / 2
            got = baseline_half_width(agg, {"salary_mean_eps_levels": levels})
            assert got is not None
            # the library's interval adds a few grid steps (2^-20 of the range) to the
            # continuous Laplace quantile
            assert got == pytest.approx(expected, rel=1e-3), row["dept"]


def test_baseline_edge_cases() -> None:
    agg = {"kind": "mean", "name": "m", "definition": {"lower": 0, "upper": 10, "beta": 0.05}}
    # rows with ε = 0 are left out; public rows count in n but not in ε_min
    row = {"m_eps_levels": [{"eps": 0.0, "n": 5}, {"eps": 0.5, "n": 10},
                            {"eps": math.inf, "n": 10}]}
    assert baseline_half_width(agg, row) == pytest.approx(10 * math.log(20) / (20 * 0.5))
    assert baseline_half_width(agg, {"m_eps_levels": [{"eps": math.inf, "n": 3}]}) is None
    assert baseline_half_width({**agg, "kind": "user_mean"}, row) is None
    hist = {"kind": "histogram", "name": "m", "definition": {"beta": 0.05}}
    assert baseline_half_width(hist, row) == pytest.approx(2 * math.log(20) / (20 * 0.5))


def _cost(levels: list[tuple[float, int, float]]) -> Any:
    cost = release_cost([[ChargeClass("all", e, n, c) for e, n, c in levels]])
    assert cost is not None
    return cost


def test_eps_ranges_merge_capped_levels_and_never_print_alike() -> None:
    # 44 levels after capping (as in the tenure release): 0.1, 0.5, 1, 2, and 40 levels
    # between 2.9107 and 3.04, some equal to 3 digits
    capped = [2.9107441399246454, 2.911177425645292, 2.91161544341594]
    capped += [2.92 + 0.003 * i for i in range(37)]
    levels = [(0.1, 700, 0.1), (0.5, 1800, 0.21), (1.0, 1500, 0.21), (2.0, 700, 0.21)]
    levels += [(e, 3, 0.21) for e in capped]
    ranges = eps_ranges(_cost(levels))
    labels = [r.label for r in ranges]
    assert labels == ["0.1", "0.5", "1", "2", "2.91–3.03"]
    assert sum(r.users for r in ranges) == 4700 + 3 * len(capped)
    assert [r.free_users for r in ranges] == [0, 1800, 1500, 700, 3 * len(capped)]
    # two levels that print alike at 3 digits and must stay apart get more digits
    close = eps_ranges(_cost([(2.9107, 1, 0.1), (2.9112, 1, 0.1), (5.0, 1, 0.1)]),
                       max_ranges=8)
    assert [r.label for r in close] == ["2.9107–2.9112", "5"]
    # many spread-out levels: at most max_ranges ranges, labels unique, users kept
    spread = [(0.01 * 1.3**i, 1, 0.01) for i in range(60)]
    ranges = eps_ranges(_cost(spread), max_ranges=6)
    assert len(ranges) <= 6
    assert len({r.label for r in ranges}) == len(ranges)
    assert sum(r.users for r in ranges) == 60
    # 0 and ∞ keep ranges of their own
    special = eps_ranges(_cost([(0.0, 2, 0.0), (0.1, 2, 0.1), (math.inf, 2, 0.1)]))
    assert [r.label for r in special] == ["0", "0.1", "∞ (public)"]


def test_costs_of_aggregators_on_other_levels_are_not_merged() -> None:
    a = [ChargeClass("x", 1.0, 10, 0.5)]
    b = [ChargeClass("x", 2.0, 10, 0.5)]
    assert release_cost([a, b]) is None
    c = [ChargeClass("x", 1.0, 9, 0.5)]
    assert release_cost([a, c]) is None
    merged = release_cost([a, a])
    assert merged is not None
    assert merged.charged == (1.0, 1.0, 1.0)
    assert merged.free_users == 10
    assert merged.saved == (1.0, 1.0, 1.0)
    assert merged.total == 10.0


def test_the_printed_interval_is_the_released_one(tmp_path: Path) -> None:
    """Issue 48: the report's Values table and first screen print the released
    ``ci_low``/``ci_high``, their ± and the part of it that is the worst-case effect of
    weighting rows by ε (``bias_bound``), the same numbers as the published values."""
    from hdp_spark.report.fmt import fmt_num, fmt_span

    run = run_job(sample_job(tmp_path, "sample_employees"))
    assert run.report is not None
    parts = check_report(run.report.parent, EMPLOYEES)
    release = next(r for r in run.releases if r.release_id == "salary_by_dept")
    values = pd.read_parquet(release.path / "values.parquet").set_index("dept")
    body = parts["## Release `salary_by_dept`"]
    table = next(t for t in tables(body) if t[0][0] == "dept")
    head = table[0]
    assert head[2] == "95% interval (noise + ε-weighting)"
    assert head[5] == "of which: weighting rows by ε (worst case)"
    halves, biases = [], []
    for row in table[1:]:
        v = values.loc[row[0]]
        lo, hi, bias = v["salary_mean_ci_low"], v["salary_mean_ci_high"], v[
            "salary_mean_bias_bound"]
        assert row[2] == f"{fmt_num(lo)} to {fmt_num(hi)}"
        half = (hi - lo) / 2
        assert row[3] == fmt_num(half)
        assert row[5] == fmt_num(min(bias, half))
        assert bias > 0
        halves.append(half)
        biases.append(min(bias, half))
    accuracy = next(ln for ln in body.splitlines() if ln.startswith("- **Accuracy:**"))
    assert f"± {fmt_span(min(halves), max(halves), fmt_num)}" in accuracy
    assert f"of which ± {fmt_span(min(biases), max(biases), fmt_num)}" in accuracy
    assert "worst-case effect of weighting rows by their ε" in accuracy
