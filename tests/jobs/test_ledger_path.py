"""One ledger path for both engines: the backend follows the path, not the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from job_helpers import GROUPED_RELEASE, REPO, job_text, records, spent_by_user

from hdp_spark.errors import JobError
from hdp_spark.jobs import load_job, run_job


def _job(tmp: Path, ledger: Path, engine: str = "pandas", backend: str | None = None,
         **kwargs: Any) -> Path:
    """A job file whose `[ledger]` has no backend line unless ``backend`` is given."""
    text = job_text(tmp, engine=engine, ledger=ledger, **kwargs)
    line = 'backend = "sqlite"\n'
    text = text.replace(line, f'backend = "{backend}"\n' if backend else "")
    path = tmp / f"job-{engine}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("engine", ["pandas", "spark"])
@pytest.mark.parametrize("name", ["l.sqlite", "l.db", "l.SQLITE3"])
def test_sqlite_suffix_is_sqlite_on_both_engines(tmp_path: Path, engine: str, name: str) -> None:
    job = load_job(_job(tmp_path, tmp_path / name, engine))
    assert job.ledger_backend == "sqlite"


def test_existing_entry_decides(tmp_path: Path) -> None:
    as_dir = tmp_path / "ledger_dir"
    as_file = tmp_path / "ledger_file"
    for engine in ("pandas", "spark"):
        job = load_job(_job(tmp_path, as_dir, engine))
        # a new path without suffix: the engine's default until it exists
        assert job.ledger_backend == ("sqlite" if engine == "pandas" else "parquet")
    as_dir.mkdir()
    as_file.write_bytes(b"")
    for engine in ("pandas", "spark"):
        assert load_job(_job(tmp_path, as_dir, engine)).ledger_backend == "parquet"
        assert load_job(_job(tmp_path, as_file, engine)).ledger_backend == "sqlite"


def test_sample_job_uses_its_sqlite_ledger_on_spark() -> None:
    job = load_job(REPO / "jobs" / "sample_employees.toml", engine="spark")
    assert job.ledger_backend == "sqlite"


def test_parquet_backend_refuses_a_sqlite_path(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"`\[ledger\] path` must not end in \.sqlite"):
        load_job(_job(tmp_path, tmp_path / "l.sqlite", "spark", backend="parquet"))
    assert not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize(("backend", "kind"), [("sqlite", "dir"), ("parquet", "file")])
def test_ledger_path_of_the_wrong_kind_fails_before_work(
    tmp_path: Path, backend: str, kind: str
) -> None:
    ledger = tmp_path / "ledger"
    if kind == "dir":
        ledger.mkdir()
    else:
        ledger.write_bytes(b"not a ledger")
    job = _job(tmp_path, ledger, backend=backend)
    rule = "must be a SQLite file" if kind == "dir" else "must be a directory"
    with pytest.raises(JobError, match=rf"`\[ledger\] path` {rule}"):
        run_job(job)
    assert not (tmp_path / "out").exists()
    assert ledger.is_dir() == (kind == "dir")


def test_one_sqlite_ledger_shared_by_spark_and_pandas(spark: Any, tmp_path: Path) -> None:
    ledger = tmp_path / "shared.sqlite"
    sjob = _job(tmp_path, ledger, "spark", releases=GROUPED_RELEASE, out=tmp_path / "out")
    first = run_job(sjob, spark=spark)
    assert [r.status for r in first.releases] == ["committed"]
    assert ledger.is_file()  # a .sqlite path never becomes a directory
    spent = spent_by_user(sjob)
    assert len(spent) == 5000
    assert len(records(sjob)) == 1
    # The same job on pandas finds the Spark commit in the same ledger: it re-publishes.
    pjob = _job(tmp_path, ledger, "pandas", releases=GROUPED_RELEASE, out=tmp_path / "out")
    second = run_job(pjob)
    assert [r.status for r in second.releases] == ["republished"]
    assert second.releases[0].record.key == first.releases[0].record.key
    assert second.values("salary_by_dept") == first.values("salary_by_dept")
    assert spent_by_user(pjob) == spent  # nothing charged twice
    assert len(records(pjob)) == 1
