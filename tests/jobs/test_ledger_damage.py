"""A damaged ledger is refused, never taken as a fresh start (issue 18).

Every case: a job ran (two releases committed and published), the operator damages the
ledger as it happens in practice (``: > ledger.sqlite``, a deleted file, a partial copy, bytes
corrupted, the newest parquet manifest deleted, a 0-byte delta, an older backup restored),
and the next ``run`` (or ``check``) must stop with exit code 6 and one line naming the cause:
nothing computed, nothing charged, no new output directory, the damage left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from job_helpers import (
    GROUPED_RELEASE,
    RELEASES,
    published,
    records,
    spend_parts,
    spent_by_user,
    write_job,
)

from hdp_spark.cli import main
from hdp_spark.errors import LedgerDamagedError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.ledger import ParquetLedger, SqliteLedger, open_ledger
from hdp_spark.ledger.io import PandasIO


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*args, "-q"])
    return code, capsys.readouterr().err


def _refused(job: Path, capsys: pytest.CaptureFixture[str], match: str) -> None:
    """``run`` and ``check`` both stop with exit code 6 and one line; nothing new appears."""
    out = load_job(job).output.path
    before = sorted(p.relative_to(out) for p in out.rglob("*") if ".staging" not in p.parts)
    for command in ("run", "check"):
        code, err = _run([command, str(job)], capsys)
        assert code == 6, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert match in lines[0]
        assert "restore" in lines[0]
    after = sorted(p.relative_to(out) for p in out.rglob("*") if ".staging" not in p.parts)
    assert after == before  # nothing recomputed or re-published


@pytest.fixture(params=["sqlite", "parquet"])
def ran(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A job of either backend that committed and published both its releases."""
    job = write_job(tmp_path, backend=request.param)
    run = run_job(job)
    assert [r.status for r in run.releases] == ["committed", "committed"]
    return job


def test_outputs_name_their_ledger_and_commit(ran: Path) -> None:
    job = load_job(ran)
    ledger = open_ledger(job.ledger_backend, job.ledger.path)
    assert len(ledger.ledger_id) == 16
    manifest = json.loads((job.output.path / "manifest.json").read_text())
    assert manifest["ledger_id"] == ledger.ledger_id
    docs = published(job.output.path)
    assert set(docs) == ledger.commit_ids() == {r.commit_id for r in records(ran)}
    assert {d["ledger_id"] for d in docs.values()} == {ledger.ledger_id}
    # a fresh ledger draws a fresh id: the id is random, not derived from the data
    other = open_ledger(job.ledger_backend, job.ledger.path.parent / (
        "other.sqlite" if job.ledger_backend == "sqlite" else "other"))
    assert other.ledger_id != ledger.ledger_id


def test_missing_ledger_is_refused_not_recreated(
    ran: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = load_job(ran).ledger.path
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    _refused(ran, capsys, "missing")
    assert not path.exists()


def test_zero_byte_sqlite_ledger_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    run_job(job)
    path = load_job(job).ledger.path
    path.write_bytes(b"")  # `: > ledger.sqlite`
    _refused(job, capsys, "is empty (0 bytes)")
    assert path.stat().st_size == 0
    # without outputs, too: a 0-byte file is never a new ledger
    with pytest.raises(LedgerDamagedError, match="0 bytes"):
        SqliteLedger(path)


def test_truncated_sqlite_ledger_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    run_job(job)
    path = load_job(job).ledger.path
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a partial copy
    _refused(job, capsys, "is damaged")


def test_bytes_corrupted_in_the_middle_are_detected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path)
    run_job(job)
    path = load_job(job).ledger.path
    data = bytearray(path.read_bytes())
    page = 4096
    middle = (len(data) // page // 2) * page
    data[middle + 8: middle + 408] = os.urandom(400)  # inside a b-tree page, past its header
    path.write_bytes(bytes(data))
    _refused(job, capsys, "is damaged")


def test_deleted_newest_parquet_manifest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, backend="parquet")
    run_job(job)
    root = load_job(job).ledger.path
    newest = max((root / "_manifests").iterdir())
    newest.unlink()
    _refused(job, capsys, "lost its newest manifest")
    # even with `_head` gone too, the outputs still cite the lost commit
    (root / "_head").unlink()
    _refused(job, capsys, "older than the outputs")


def test_zero_byte_parquet_delta_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path, backend="parquet")
    run_job(job)
    root = load_job(job).ledger.path
    part = spend_parts(root)[0]
    part.write_bytes(b"")
    _refused(job, capsys, "is truncated or grew")
    with pytest.raises(LedgerDamagedError, match="truncated or grew"):
        ParquetLedger(root).spent(PandasIO())


def test_a_replaced_ledger_is_refused(ran: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A brand-new ledger at the old path (reset by hand) is not the one the outputs cite."""
    path = load_job(ran).ledger.path
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    open_ledger(load_job(ran).ledger_backend, path)  # e.g. created by a script
    _refused(ran, capsys, "is not the ledger the outputs")


def _backup(path: Path, to: Path) -> None:
    """The documented backup: SQLite's online backup API, or a copy of a parquet ledger."""
    if path.is_dir():
        shutil.copytree(path, to)
        return
    src, dst = sqlite3.connect(path), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _restore(backup: Path, path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
        shutil.copytree(backup, path)
    else:
        for extra in ("-wal", "-shm"):
            Path(str(path) + extra).unlink(missing_ok=True)
        shutil.copyfile(backup, path)


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_restore_from_backup(tmp_path: Path, backend: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    first = write_job(tmp_path, backend=backend, releases=GROUPED_RELEASE)
    run_job(first)
    path = load_job(first).ledger.path
    _backup(path, tmp_path / "backup-1")
    both = write_job(tmp_path, filename="both.toml", backend=backend, releases=RELEASES)
    run_job(both)  # commits the second release after the first backup
    spent = spent_by_user(both)
    _backup(path, tmp_path / "backup-2")

    _restore(tmp_path / "backup-1", path)  # too old: it lacks a published commit
    _refused(both, capsys, "older than the outputs")
    assert spent_by_user(both) != spent

    _restore(tmp_path / "backup-2", path)  # current: the run re-publishes, charges nothing
    code, err = _run(["run", str(both)], capsys)
    assert code == 0, err
    assert spent_by_user(both) == spent
    assert [r.status for r in run_job(both).releases] == ["republished", "republished"]


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_damage_is_refused_on_both_engines(engine: Any, backend: str, tmp_path: Path) -> None:
    """The same refusal through ``run_job`` on pandas and Spark: the outputs name their
    ledger, a lost newest commit is found, nothing is computed or charged."""
    job = write_job(tmp_path, engine=engine.name, backend=backend, releases=GROUPED_RELEASE)
    first = run_job(job, spark=engine.session)
    spec = load_job(job)
    ledger = open_ledger(spec.ledger_backend, spec.ledger.path)
    doc = json.loads((first.releases[0].path / "values.json").read_text())
    assert doc["ledger_id"] == ledger.ledger_id
    assert doc["commit_id"] == first.releases[0].record.commit_id
    path = spec.ledger.path
    if backend == "parquet":
        max((path / "_manifests").iterdir()).unlink()  # the only, hence newest, commit
        match = "lost its newest manifest"
    else:
        path.write_bytes(b"")
        match = "0 bytes"
    with pytest.raises(LedgerDamagedError, match=match):
        run_job(job, spark=engine.session)
    assert list(published(spec.output.path)) == [first.releases[0].record.commit_id]
