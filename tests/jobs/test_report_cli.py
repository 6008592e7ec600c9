"""The report for people, and the command line (the README's main command included)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from job_helpers import REPO, records, spent_by_user, write_job

from hdp_spark.cli import main
from hdp_spark.jobs import run_job

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_is_rendered_with_plots(tmp_path: Path) -> None:
    job = write_job(tmp_path, report=True)
    run = run_job(job)
    assert run.report is not None
    text = run.report.read_text()
    for heading in (
        "# Release report: `t_job`",
        "## Release `salary_by_dept`",
        "## Release `tenure_overall`",
        "### Values",
        "### Privacy levels",
        "### Details",
        "## Budget left after this run",
        "## Glossary",
    ):
        assert heading in text, heading
    for first_screen in ("- **What:**", "- **For whom:**", "- **Accuracy:**", "- **Cost:**",
                         "- **Budget left:**"):
        assert text.count(first_screen) == 2, first_screen
    assert "| engineering |" in text
    assert "95% interval" in text
    assert "public in this model" in text
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert "plots/remaining_budget.png" in images
    assert "plots/salary_by_dept__salary_mean.png" in images
    assert "plots/salary_by_dept__salary_mean__vs_single_eps.png" in images
    assert "plots/salary_by_dept__privacy_levels.png" in images
    for rel in images:
        assert (run.report.parent / rel).read_bytes().startswith(PNG)
    # user ids never appear in the report: the table has ids 1..5000, the report no "user_id"
    assert "user_id" not in text
    # committed numbers are what the report shows
    est = run.values("salary_by_dept")[0]["salary_mean"]
    assert f"| engineering | {est:,.0f} |" in text
    # no internal jargon on the page
    for jargon in ("seed 00", "adpm", "eps_effective", "weight solver", "weight per row",
                   "ε charged (total)"):
        assert jargon not in text, jargon
    assert (run.report.parent / "report.html").is_file()


def test_report_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    job = write_job(tmp_path, report=True)
    run = run_job(job)
    assert run.report is not None
    text = run.report.read_text()
    assert "Plots skipped: install matplotlib" in text
    assert "![" not in text
    assert "## Budget left after this run" in text
    html = (run.report.parent / "report.html").read_text()
    assert "<img" not in html
    assert "Plots skipped" in html


def test_readme_command_runs_the_sample_job(tmp_path: Path) -> None:
    """`python -m hdp_spark.jobs run jobs/sample_employees.toml` from a checkout's root (here
    a copy whose data and schema link to the repository's, so the repository's out/ is not
    touched)."""
    (tmp_path / "jobs").mkdir()
    shutil.copy(REPO / "jobs" / "sample_employees.toml", tmp_path / "jobs")
    (tmp_path / "data").symlink_to(REPO / "data")
    (tmp_path / "schemas").symlink_to(REPO / "schemas")
    env = {k: v for k, v in os.environ.items() if k != "HDP_FAULT_AT"}
    cmd = [sys.executable, "-m", "hdp_spark.jobs", "run", "jobs/sample_employees.toml"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "salary_by_dept: committed" in proc.stdout
    assert proc.stderr == ""  # quiet by default: no warning, and no bar on a pipe
    assert "job sample_employees: 3 committed, 0 re-published; ledger " in proc.stdout
    out = tmp_path / "out" / "sample_employees"
    assert (out / "report.md").is_file()
    assert (out / "manifest.json").is_file()
    assert (tmp_path / "out" / "ledger" / "employees.sqlite").is_file()
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0
    assert again.stdout.count(": republished") == 3


def test_cli_exit_codes_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    assert main(["check", str(job), "-q"]) == 0
    out = capsys.readouterr().out
    assert "salary_by_dept: new; 5000 row(s) in the release, 222 user(s) over" in out
    assert main(["run", str(job), "-q"]) == 0
    assert main(["check", str(job), "-q"]) == 0
    assert "committed (would re-publish)" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(job.read_text().replace('policy = "cap"', 'policy = "nope"'))
    assert main(["run", str(bad), "-q"]) == 2
    assert "`[budget] policy` must be one of" in capsys.readouterr().err
    fail = write_job(tmp_path, filename="fail.toml", policy="fail", ledger=tmp_path / "f.sqlite",
                     out=tmp_path / "out_fail")
    assert main(["run", str(fail), "-q"]) == 3
    assert records(fail) == []
    capsys.readouterr()
    # the first job's outputs cite its ledger: a new ledger for them is refused (exit 6)
    other = write_job(tmp_path, filename="other.toml", ledger=tmp_path / "g.sqlite")
    assert main(["run", str(other), "-q"]) == 6
    err = capsys.readouterr().err
    assert "is missing, but outputs cite it" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "g.sqlite").exists()


def test_histogram_kind_in_a_job(tmp_path: Path) -> None:
    """Histograms plug in by name: wide output, charged from their effective ε, reported."""
    from hdp_spark.jobs import kinds

    if "histogram" not in kinds():
        pytest.skip("hdp_spark.pandas._histogram is not available")
    releases = """
[[releases]]
id = "family_by_dept"
by = ["dept"]
keys = ["engineering", "finance", "operations", "research", "sales"]

  [[releases.aggregators]]
  kind = "histogram"
  column = "job_family"
  categories = ["analyst", "engineer", "manager", "scientist", "support", "director"]

  [[releases.aggregators]]
  kind = "mean"
  column = "tenure_years"
  lower = 0
  upper = 40
"""
    job = write_job(tmp_path, releases=releases, report=True)
    run = run_job(job)
    row = run.values("family_by_dept")[0]
    assert {"job_family_histogram[analyst]", "job_family_histogram[other]_ci_high",
            "job_family_histogram_eps_levels", "tenure_years_mean"} <= set(row)
    budget = run.releases[0].record.outcome_data()["budget"]
    # two aggregators read `eps`: each user is charged by both (sequential composition)
    spent = spent_by_user(job)
    assert max(spent.values()) <= 4 * 2**30
    assert budget["users_charged"] == 5000
    assert run.report is not None
    text = run.report.read_text()
    assert "### Values of `job_family_histogram`" in text
    assert "### Values of `tenure_years_mean`" in text
    assert "| engineering · analyst |" in text
    assert "Each of the release's 2 aggregators may use up to a person's ε" in text


def test_run_on_another_ledger_and_output_says_which_engine_computed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--ledger` / `--output` (the Spark trial command of docs/setup.md) leave the job's own
    ledger and outputs alone; each release line says which engine computed it."""
    job = write_job(tmp_path)
    trial, ledger = tmp_path / "trial", tmp_path / "trial-ledger.sqlite"
    args = ["run", str(job), "--ledger", str(ledger), "--output", str(trial), "-q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.count("(computed by engine pandas)") == 2
    assert ledger.is_file()
    assert (trial / "manifest.json").is_file()
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ledger.sqlite").exists()
    assert main(args) == 0
    assert capsys.readouterr().out.count(
        "(computed earlier by engine pandas, nothing charged now)") == 2
