"""Crash consistency: kill -9 at every stage, check the invariants, recover, compare.

Invariants after any crash:
  I1. every published output directory belongs to a committed release;
  I2. the ledger's spend is exactly the sum of the committed releases' charges;
  I3. nobody is charged above their budget.
After the next (clean) run: every release is committed once and published, its published
values are the committed ones, and the spend equals that of a run that never crashed (charges
depend on the ε vector only, so they are deterministic).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from job_helpers import REPO, records, spent_by_user, write_job

from hdp_spark.core.ledger import floor_units
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.faults import ENV, STAGES
from hdp_spark.jobs.outputs import json_safe
from hdp_spark.ledger import ParquetLedger, SqliteLedger

BUDGET = 4.0
Crashed = dict[tuple[str, str], tuple[Path, int, str]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """The spend of a run that never crashed."""
    job = write_job(tmp_path_factory.mktemp("reference"))
    run_job(job)
    return spent_by_user(job)


def check_invariants(job_path: Path) -> None:
    job = load_job(job_path)
    recs = records(job_path)
    committed = {r.commit_id: r for r in recs}
    out = job.output.path
    for values in out.glob("*/*/values.json"):  # I1
        if values.parent.parent.name.startswith("."):
            continue  # staging of a crashed run: never read
        commit = values.parent.name
        assert commit in committed, f"published {commit} was never committed"
        doc = json.loads(values.read_text())
        assert doc["commit_id"] == commit
        assert doc["rows"] == json_safe(committed[commit].outcome_data()["rows"])
    spent = spent_by_user(job_path)
    assert sum(spent.values()) == sum(r.units_charged for r in recs)  # I2
    assert len(spent) <= 5000
    if job.ledger_backend == "sqlite":
        assert SqliteLedger(job.ledger.path).audit() == spent
    assert all(v <= floor_units(BUDGET) for v in spent.values())  # I3


def crash(job: Path, stage: str) -> subprocess.Popen[str]:
    """``python -m hdp_spark.jobs run JOB`` with ``HDP_FAULT_AT=stage`` (it kills itself)."""
    env = {**os.environ, ENV: stage}
    return subprocess.Popen(
        [sys.executable, "-m", "hdp_spark.jobs", "run", str(job), "-q"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )


CASES = [("sqlite", s) for s in STAGES] + [
    ("sqlite", "tenure_overall:charged"),
    ("sqlite", "tenure_overall:committed"),
    *[("parquet", s) for s in ("locked", "computed", "charged", "committed", "staged")],
    # the second release's commit folds the two deltas into a snapshot (a compaction)
    ("parquet", "tenure_overall:charged"),
    ("parquet", "tenure_overall:committed"),
]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Crashed:
    """Every case's job, killed at its stage; the processes run a few at a time (they are
    independent: one directory each), which keeps the module fast on small machines."""
    results: Crashed = {}
    pending = list(CASES)
    running: list[tuple[tuple[str, str], Path, subprocess.Popen[str]]] = []
    while pending or running:
        while pending and len(running) < 4:
            backend, stage = case = pending.pop(0)
            tmp = tmp_path_factory.mktemp(f"{backend}-{stage.replace(':', '-')}")
            job = write_job(tmp, backend=backend)
            running.append((case, job, crash(job, stage)))
        case, job, proc = running.pop(0)
        _out, err = proc.communicate(timeout=300)
        results[case] = (job, proc.returncode, err)
    return results


@pytest.mark.parametrize(("backend", "stage"), CASES)
def test_kill_at_stage(backend: str, stage: str, reference: dict[str, int],
                       crashed: Crashed) -> None:
    job, returncode, stderr = crashed[(backend, stage)]
    assert returncode == -signal.SIGKILL, stderr[-2000:]
    check_invariants(job)
    before = {r.commit_id: r for r in records(job)}
    name = stage.split(":")[-1]
    if name in ("loaded", "validated", "locked", "budgets_checked", "computed",
                "charged") and ":" not in stage:
        assert before == {}, "nothing may be committed before the commit point"
        out = load_job(job).output.path
        assert list(out.glob("**/values.json")) == [], "no released value before the commit"
    if name in ("committed", "staged", "published", "reported"):
        assert len(before) >= 1

    run = run_job(job)  # recovery
    check_invariants(job)
    assert spent_by_user(job) == reference
    assert len(records(job)) == 2
    out = load_job(job).output.path
    assert list(out.glob(".staging/*")) == []  # crashed runs' staging cleaned up
    for r in run.releases:
        values = json.loads((r.path / "values.json").read_text())
        assert values["commit_id"] == r.record.commit_id
        if r.record.commit_id in before:  # committed before the crash: same numbers
            assert r.status == "republished"
            assert r.record == before[r.record.commit_id]
    if backend == "parquet":
        root = Path(load_job(job).ledger.path)
        assert not (root / "_lock").exists()
        # files of the crashed, uncommitted attempt (a record holds its noisy outcome) are gone
        manifest = ParquetLedger(root)._latest()
        assert manifest["snapshot"]
        assert manifest["deltas"] == []
        referenced = {Path(e["file"]).name for e in manifest["commits"]}
        assert {p.name for p in (root / "commits").iterdir()} == referenced
        assert list((root / "_tmp").iterdir()) == []


def test_fault_hook_is_inert_without_the_variable(sample_job: Path) -> None:
    assert ENV not in os.environ
    assert [r.status for r in run_job(sample_job).releases] == ["committed", "committed"]
