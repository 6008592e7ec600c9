"""The ledger's MAC secret, keyed fingerprints, random commit ids, and the quality report."""

from __future__ import annotations

import json
import logging
import os
import pickle
import sqlite3
import stat
import threading
from pathlib import Path

import pandas as pd
import pytest
from job_helpers import DATA, records, unseal_parquet_to_v1, unseal_to_v3, write_job

from hdp_spark.errors import JobError, LedgerError, SchemaError
from hdp_spark.jobs import check_job, load_job, quality_dir, run_job
from hdp_spark.jobs.fingerprint import file_fingerprint
from hdp_spark.ledger import CommitRecord, ParquetLedger, SqliteLedger, open_ledger
from hdp_spark.ledger._secret import LedgerKey
from hdp_spark.ledger.io import PandasIO


def _secret_of(ledger: SqliteLedger | ParquetLedger) -> str:
    if isinstance(ledger, SqliteLedger):
        conn = sqlite3.connect(ledger.path)
        try:
            row = conn.execute("SELECT value FROM meta WHERE name = 'mac_secret'").fetchone()
        finally:
            conn.close()
        return str(row[0])
    return (ledger.root / "_secret").read_text().strip()


@pytest.fixture(params=["sqlite", "parquet"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _path(tmp: Path, backend: str, name: str = "l") -> Path:
    return tmp / (f"{name}.sqlite" if backend == "sqlite" else name)


def test_secret_is_created_private_and_stable(backend: str, tmp_path: Path) -> None:
    path = _path(tmp_path, backend)
    ledger = open_ledger(backend, path)  # type: ignore[arg-type]
    secret = _secret_of(ledger)
    assert len(secret) == 64
    assert int(secret, 16) != 0
    mode = (path if backend == "sqlite" else path / "_secret").stat().st_mode
    assert stat.S_IMODE(mode) & 0o077 == 0  # owner only
    again = open_ledger(backend, path)  # type: ignore[arg-type]
    assert _secret_of(again) == secret
    assert again.mac(b"x") == ledger.mac(b"x")
    other = open_ledger(backend, _path(tmp_path, backend, "m"))  # type: ignore[arg-type]
    assert _secret_of(other) != secret
    assert other.mac(b"x") != ledger.mac(b"x")
    # the secret is nowhere in the ledger object's text forms or a MAC
    for text in (repr(ledger), str(ledger), repr(ledger._key), ledger.mac(b"x")):
        assert secret not in text


def test_key_cannot_be_pickled_or_printed() -> None:
    key = LedgerKey("ab" * 32, "here")
    assert "ab" * 4 not in repr(key)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(key)


@pytest.mark.parametrize("bad", ["", "zz" * 32, "AB" * 32, "ab" * 31])
def test_malformed_secret_is_a_corrupt_ledger(bad: str, tmp_path: Path) -> None:
    ParquetLedger(tmp_path / "l")
    (tmp_path / "l" / "_secret").write_text(bad)
    with pytest.raises(LedgerError, match="malformed MAC secret") as err:
        ParquetLedger(tmp_path / "l")
    if bad:
        assert bad not in str(err.value)


def test_concurrent_creation_agrees_on_one_secret(tmp_path: Path) -> None:
    macs: list[str] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            macs.append(ParquetLedger(tmp_path / "l").mac(b"same"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(macs)) == 1


def _legacy(backend: str, path: Path) -> CommitRecord:
    """A ledger as an older version left it: no secret, a record without a stored id."""
    ledger = open_ledger(backend, path)  # type: ignore[arg-type]
    key = "ab" * 32
    old = CommitRecord(key, "j", "r", "files-content:" + "0" * 64, "t", '{"rows": []}', 0, 0,
                       commit_id=key[:16])
    with ledger.session(PandasIO()) as s:
        s.commit(old, PandasIO().from_pairs([], []))
    if backend == "sqlite":
        unseal_to_v3(path)  # format 3 had a secret; older ones did not
        conn = sqlite3.connect(path)
        conn.execute("DELETE FROM meta WHERE name = 'mac_secret'")
        conn.commit()
        conn.close()
    else:
        unseal_parquet_to_v1(path)  # format 1 knew no file hashes
        (path / "_secret").unlink()
        for f in (path / "commits").iterdir():
            d = json.loads(f.read_text())
            del d["commit_id"]
            f.write_text(json.dumps(d))
    return old


def test_legacy_ledger_gets_a_secret_and_keeps_its_records(backend: str, tmp_path: Path) -> None:
    path = _path(tmp_path, backend)
    old = _legacy(backend, path)
    ledger = open_ledger(backend, path)  # type: ignore[arg-type]
    assert len(_secret_of(ledger)) == 64
    found = ledger.find(old.key)
    assert found is not None
    assert found.commit_id == old.key[:16]
    assert found == old


def test_commit_ids_are_random_and_checked() -> None:
    a = CommitRecord("cd" * 32, "j", "r", "f", "t", "{}", 0, 0)
    b = CommitRecord("cd" * 32, "j", "r", "f", "t", "{}", 0, 0)
    assert a.commit_id != b.commit_id
    assert a.commit_id != a.key[:16]
    assert CommitRecord.from_json(a.to_json()) == a
    with pytest.raises(LedgerError, match="`commit_id` must be 16 lowercase hex"):
        CommitRecord("cd" * 32, "j", "r", "f", "t", "{}", 0, 0, commit_id="cd" * 32)


def test_fingerprint_is_keyed(tmp_path: Path) -> None:
    a, b = SqliteLedger(tmp_path / "a.sqlite"), SqliteLedger(tmp_path / "b.sqlite")
    fa = file_fingerprint(DATA, "content", None, a.mac)
    assert fa == file_fingerprint(DATA, "content", None, a.mac)
    assert fa != file_fingerprint(DATA, "content", None, b.mac)
    assert fa.startswith("files-content:")


def test_same_input_same_ledger_republishes_with_random_ids(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    first = run_job(job)
    second = run_job(job)
    assert [r.status for r in second.releases] == ["republished", "republished"]
    assert first.fingerprint == second.fingerprint
    for r in first.releases:
        assert r.record.commit_id != r.record.key[:16]
        assert r.path.name == r.record.commit_id
        doc = json.loads((r.path / "values.json").read_text())
        assert "input_fingerprint" not in doc
        text = json.dumps(doc)
        assert r.record.key not in text
        assert r.record.fingerprint.split(":")[1] not in text
    # a fresh ledger (a lost secret) makes the same input a new release, new ids
    job2 = write_job(tmp_path, filename="job2.toml", ledger=tmp_path / "fresh.sqlite",
                     out=tmp_path / "out2")
    third = run_job(job2)
    assert [r.status for r in third.releases] == ["committed", "committed"]
    assert third.fingerprint != first.fingerprint
    assert {r.record.commit_id for r in third.releases}.isdisjoint(
        {r.record.commit_id for r in first.releases})


def _with_bad_values(tmp_path: Path) -> Path:
    data = pd.read_csv(DATA)
    data.loc[:4, "salary"] = 1e9  # above the schema's public bound
    path = tmp_path / "bad.csv"
    data.to_csv(path, index=False)
    return path


def test_quality_counts_go_beside_the_ledger_not_to_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = write_job(tmp_path, data=_with_bad_values(tmp_path), schema=True, report=True)
    with caplog.at_level(logging.INFO):
        run = run_job(job)
    assert all(r.status == "committed" for r in run.releases)
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert not any("violation" in m or "salary:" in m for m in loud)
    spec = load_job(job)
    reports = sorted(quality_dir(spec).glob("t_job-*.json"))
    assert len(reports) == 1
    assert quality_dir(spec) == tmp_path / "quality"
    doc = json.loads(reports[0].read_text())
    assert doc["schema"]["violations"]["salary:in_bounds"] >= 5
    assert doc["input"]["duplicate_user_ids"] == 0
    assert doc["release_blocked"] is False
    out = tmp_path / "out"
    assert not any("quality" in str(p.relative_to(out)) for p in out.rglob("*"))
    assert "violation" not in (out / "report.md").read_text()


def test_quality_report_is_written_when_a_public_rule_stops_the_run(tmp_path: Path) -> None:
    data = pd.read_csv(DATA)
    data.loc[:1, "eps"] = -1.0
    path = tmp_path / "eps.csv"
    data.to_csv(path, index=False)
    job = write_job(tmp_path, data=path, schema=True)
    with pytest.raises(SchemaError):
        run_job(job)
    assert records(job) == []
    (report,) = quality_dir(load_job(job)).glob("t_job-*.json")
    assert json.loads(report.read_text())["release_blocked"] is True


def test_check_prints_quality_counts_for_the_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hdp_spark.cli import main

    job = write_job(tmp_path, data=_with_bad_values(tmp_path), schema=True)
    checked = check_job(job)
    count = checked.quality["schema"]["violations"]["salary:in_bounds"]
    assert count >= 5
    assert main(["check", str(job), "-q"]) == 0
    out = capsys.readouterr().out
    assert f"salary:in_bounds: {count} violation(s)" in out
    assert "operator only" in out
    assert "salary_by_dept: new" in out
    # a dry run writes nothing: no quality report, no ledger, no output directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "job.toml"]
    run_job(job)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert main(["check", str(job), "-q"]) == 0
    assert "salary_by_dept: committed (would re-publish)" in capsys.readouterr().out
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_ledger_inside_the_output_dir_is_refused(tmp_path: Path) -> None:
    job = write_job(tmp_path, ledger=tmp_path / "out" / "ledger.sqlite")
    with pytest.raises(JobError, match=r"`\[ledger\] path` must lie outside `\[output\] path`"):
        run_job(job)
    assert not (tmp_path / "out" / "ledger.sqlite").exists()
    with pytest.raises(JobError, match="must lie outside"):
        check_job(job)


def test_sqlite_file_of_a_new_ledger_is_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        SqliteLedger(tmp_path / "x.sqlite")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.sqlite").stat().st_mode) == 0o600
