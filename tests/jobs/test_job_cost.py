"""What a pandas job run costs (issue 53): the validation is the schema's own vectorized
checks unless the job asks for the great-expectations suite, and a re-run draws no plot it
drew before. Each run is a fresh interpreter, so what it imports is what the job needed."""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from job_helpers import REPO, write_job

from hdp_spark.jobs import load_job, run_job

_HEAVY = ("great_expectations", "matplotlib", "matplotlib.pyplot", "scipy.optimize")
_PROBE = (
    "import sys\n"
    "from hdp_spark.jobs import run_job\n"
    "result = run_job(sys.argv[1])\n"
    "print([r.status for r in result.releases])\n"
    f"print(sorted(m for m in {_HEAVY!r} if m in sys.modules))\n"
)


def _run(job: Path) -> tuple[list[str], list[str]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(job)], capture_output=True,
                          text=True, cwd=REPO, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    statuses, imported = proc.stdout.strip().splitlines()[-2:]
    return ast.literal_eval(statuses), ast.literal_eval(imported)


def _quality(job: Path) -> list[dict[str, object]]:
    qdir = load_job(job).ledger.path.parent / "quality"
    return [json.loads(p.read_text()) for p in sorted(qdir.glob("*.json"))]


@pytest.mark.slow
def test_a_default_run_skips_the_suite_and_a_rerun_draws_nothing(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    job = write_job(tmp_path, schema=True, report=True)
    statuses, imported = _run(job)
    assert statuses == ["committed", "committed"]
    # the schema's checks ran (counts in the operator's report) without great-expectations,
    # scipy.optimize or pyplot; matplotlib itself drew the plots
    assert imported == ["matplotlib"]
    (first,) = _quality(job)
    assert first["schema"]["release_ok"] is True  # type: ignore[index]
    assert {r["rule"] for r in first["schema"]["rules"]} >= {  # type: ignore[index]
        "eps:not_null", "user_id:unique", "salary:in_bounds"}
    assert first["expectations"] == {
        "skipped": "not requested ([input] expectations = true runs the suite)"}
    plots = sorted((tmp_path / "out" / "plots").glob("*.png"))
    assert plots
    before = {p: p.stat().st_mtime_ns for p in plots}
    statuses, imported = _run(job)  # a re-run re-publishes: the same plots, not drawn again
    assert statuses == ["republished", "republished"]
    assert imported == []
    assert {p: p.stat().st_mtime_ns for p in plots} == before
    assert (tmp_path / "out" / "report.md").read_text().count("plots/") == len(plots)


def test_the_suite_runs_when_the_job_asks_for_it(tmp_path: Path) -> None:
    pytest.importorskip("great_expectations")
    job = write_job(tmp_path, schema=True, expectations=True)
    run_job(job)
    (doc,) = _quality(job)
    exp = doc["expectations"]
    assert isinstance(exp, dict)
    assert exp["results"]
    assert {r["rule"] for r in exp["results"]} >= {"eps:not_null", "salary:in_bounds"}


def test_asking_for_the_suite_without_great_expectations_warns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "great_expectations", None)  # import raises ImportError
    caplog.set_level(logging.WARNING, logger="hdp_spark")
    job = write_job(tmp_path, schema=True, expectations=True)
    assert [r.status for r in run_job(job).releases] == ["committed", "committed"]
    (doc,) = _quality(job)
    assert doc["expectations"] == {"skipped": "great_expectations is not installed"}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("`[input] expectations = true` but great_expectations is not installed" in m
               for m in warned)
