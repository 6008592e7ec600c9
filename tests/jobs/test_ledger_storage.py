"""Durable and honest about storage failures (issue 18).

A full disk, a read-only ledger or output directory: one line with the true cause and exit
code 7, found before anything is charged where possible, nothing half-committed. Reading
(``check``, a re-publish-only run) never waits for a writer. Parquet deltas are flushed
before the manifest that commits them.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from job_helpers import (
    GLOBAL_RELEASE,
    GROUPED_RELEASE,
    RELEASES,
    REPO,
    published,
    records,
    write_job,
)

from hdp_spark.cli import main
from hdp_spark.jobs import load_job, run_job
from hdp_spark.ledger import ParquetLedger, open_ledger
from hdp_spark.ledger._fs import DISK_FULL_ENV
from hdp_spark.ledger.io import PandasIO


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*args, "-q"])
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_sqlite_disk_full_at_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    open_ledger("sqlite", load_job(job).ledger.path)  # exists; every later write fails
    monkeypatch.setenv(DISK_FULL_ENV, "ledger")
    code, err = _run(["run", str(job)], capsys)
    assert code == 7, err
    line = _one_line(err)
    assert "disk is full" in line
    assert "no transaction is active" not in line
    monkeypatch.delenv(DISK_FULL_ENV)
    assert records(job) == []
    assert published(load_job(job).output.path) == {}


def test_sqlite_disk_full_at_creation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    monkeypatch.setenv(DISK_FULL_ENV, "ledger")
    code, err = _run(["run", str(job)], capsys)
    assert code == 7, err
    assert "disk is full (creating it" in _one_line(err)
    ledger = load_job(job).ledger.path
    assert not ledger.exists()
    assert [p.name for p in ledger.parent.iterdir() if p.name.startswith(".ledger")] == []


def test_parquet_disk_full_at_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path, backend="parquet")
    monkeypatch.setenv(DISK_FULL_ENV, "ledger")
    code, err = _run(["run", str(job)], capsys)
    assert code == 7, err
    assert "the disk is full (committing)" in _one_line(err)
    monkeypatch.delenv(DISK_FULL_ENV)
    root = load_job(job).ledger.path
    assert records(job) == []
    assert not (root / "_lock").exists()
    for sub in ("spent", "commits", "_tmp"):
        assert list((root / sub).iterdir()) == []


def test_unwritable_outputs_are_found_before_charging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path)
    monkeypatch.setenv(DISK_FULL_ENV, "output")
    code, err = _run(["run", str(job)], capsys)
    assert code == 7, err
    line = _one_line(err)
    assert "`[output] path`" in line
    assert "nothing was charged" in line
    monkeypatch.delenv(DISK_FULL_ENV)
    assert records(job) == []
    assert open_ledger("sqlite", load_job(job).ledger.path).spent(PandasIO()).empty


def _slow_lock_job(tmp_path: Path, **kwargs: object) -> Path:
    job = write_job(tmp_path, **kwargs)  # type: ignore[arg-type]
    job.write_text(job.read_text().replace("lock_timeout = 60", "lock_timeout = 1"))
    return job


def test_reading_never_waits_for_the_sqlite_write_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _slow_lock_job(tmp_path)
    run_job(job)
    holder = sqlite3.connect(load_job(job).ledger.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a running release holds the write lock
    try:
        t0 = time.monotonic()
        code, err = _run(["check", str(job)], capsys)
        assert code == 0, err
        code, err = _run(["run", str(job)], capsys)  # re-publish only
        assert code == 0, err
        assert time.monotonic() - t0 < 30
        # a run that must charge does wait, and says so
        changed = _slow_lock_job(
            tmp_path, filename="changed.toml",
            releases=GROUPED_RELEASE + GLOBAL_RELEASE.replace("upper = 40", "upper = 41"),
        )
        code, err = _run(["run", str(changed)], capsys)
        assert code == 4, err
        assert "stayed locked" in _one_line(err)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_parquet_deltas_are_flushed_before_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hdp_spark.ledger._parquet_session as pq_ledger

    events: list[str] = []
    real_tree, real_publish = pq_ledger.fsync_tree, pq_ledger.publish_exclusive

    def tree(path: Path) -> None:
        events.append(f"fsync {Path(path).name.split('-')[0]}")
        real_tree(path)

    def publish(path: Path, *args: object, **kwargs: object) -> bool:
        events.append(f"publish {path.parent.name}")
        return real_publish(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pq_ledger, "fsync_tree", tree)
    monkeypatch.setattr(pq_ledger, "publish_exclusive", publish)
    ledger = ParquetLedger(tmp_path / "l", compact_every=2)
    from test_ledger_lease import record

    for i in (1, 2):
        with ledger.session(PandasIO()) as s:
            s.commit(record(i), PandasIO().from_pairs(["a"], [i]))
    manifests = [i for i, e in enumerate(events) if e == "publish _manifests"]
    assert len(manifests) == 2
    assert events.index("fsync delta") < manifests[0]
    assert events.index("fsync snap") < manifests[1]


# -- real read-only and full file systems (a mount namespace; skipped where unavailable) ----


def _mount_ns_works(tmp: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c",
         f"mount -t tmpfs -o size=64k tmpfs {tmp}"], capture_output=True, check=False,
    )
    return probe.returncode == 0


def _in_ns(setup: str, job: Path) -> subprocess.CompletedProcess[str]:
    """``python -m hdp_spark.jobs run JOB`` after ``setup`` mount commands, in a new mount
    namespace (the mounts vanish with it)."""
    env = {k: v for k, v in os.environ.items() if k != DISK_FULL_ENV}
    env["PYTHONPATH"] = str(REPO)
    script = f'{setup} && exec {sys.executable} -m hdp_spark.jobs run "$0" -q'
    return subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script,
                           str(job)], env=env, capture_output=True, text=True, cwd=REPO,
                          check=False, timeout=300)


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_read_only_ledger_real_mount(tmp_path: Path, backend: str) -> None:
    if not _mount_ns_works(tmp_path):
        pytest.skip("mount namespaces are not available")
    ledger_dir = tmp_path / "ledger_dir"
    ledger_dir.mkdir()
    ledger = ledger_dir / ("l.sqlite" if backend == "sqlite" else "l")
    job = write_job(tmp_path, backend=backend, ledger=ledger, releases=GROUPED_RELEASE)
    run_job(job)
    before = records(job)
    more = write_job(tmp_path, filename="more.toml", backend=backend, ledger=ledger,
                     releases=RELEASES)
    # the ledger itself is read-only (its directory's data-quality reports stay writable):
    # the committed release re-publishes, the new one is refused before it is computed
    ro = f"mount --bind {ledger} {ledger} && mount -o remount,bind,ro {ledger}"
    done = _in_ns(ro, more)
    assert done.returncode == 7, done.stderr
    line = _one_line(done.stderr)
    assert "read-only" in line
    assert records(job) == before
    assert len(published(load_job(job).output.path)) == 1


def test_read_only_outputs_real_mount(tmp_path: Path) -> None:
    if not _mount_ns_works(tmp_path):
        pytest.skip("mount namespaces are not available")
    job = write_job(tmp_path)
    out = load_job(job).output.path
    out.mkdir()
    ro = f"mount --bind {out} {out} && mount -o remount,bind,ro {out}"
    done = _in_ns(ro, job)
    assert done.returncode == 7, done.stderr
    assert "read-only" in _one_line(done.stderr)
    assert records(job) == []  # found before charging


def test_full_disk_real_tmpfs(tmp_path: Path) -> None:
    if not _mount_ns_works(tmp_path):
        pytest.skip("mount namespaces are not available")
    ledger_dir = tmp_path / "small"
    ledger_dir.mkdir()
    job = write_job(tmp_path, ledger=ledger_dir / "l.sqlite")
    # room for the empty ledger, not for 5000 users' charges
    done = _in_ns(f"mount -t tmpfs -o size=96k tmpfs {ledger_dir}", job)
    assert done.returncode == 7, done.stderr
    assert "disk is full" in _one_line(done.stderr)
    assert published(load_job(job).output.path) == {}


def test_a_creation_killed_midway_leaves_no_ledger_and_its_scratch_is_removed(
    tmp_path: Path,
) -> None:
    """A new SQLite ledger appears whole (``link`` of a complete scratch copy) or not at all;
    the scratch copy of a creation killed with SIGKILL is removed by the next creation."""
    from hdp_spark.ledger import SqliteLedger

    path = tmp_path / "l.sqlite"
    code = (
        "import os, signal, sqlite3\n"
        "from hdp_spark.ledger import sqlite as s\n"
        "real = sqlite3.connect\n"
        "def killed(*a, **k):\n"
        "    c = real(*a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "s.sqlite3.connect = killed\n"
        f"s.SqliteLedger({str(path)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                          "PYTHONPATH": str(REPO)}, capture_output=True, check=False)
    assert proc.returncode == -9
    assert not path.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".l.sqlite.")] != []
    ledger = SqliteLedger(path)
    assert len(ledger.ledger_id) == 16
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".l.sqlite.")] == []


def test_unwritable_outputs_are_found_before_charging_on_both_engines(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hdp_spark.errors import StorageError

    backend = "sqlite" if engine.name == "pandas" else "parquet"
    job = write_job(tmp_path, engine=engine.name, backend=backend, releases=GROUPED_RELEASE)
    monkeypatch.setenv(DISK_FULL_ENV, "output")
    with pytest.raises(StorageError, match="nothing was charged"):
        run_job(job, spark=engine.session)
    monkeypatch.delenv(DISK_FULL_ENV)
    assert records(job) == []


# -- a full disk when the ledger is opened; an output path that is a file (issue 29) ---------


def _statvfs_with(free_blocks: int) -> Any:
    real = os.statvfs

    def fake(path: Any) -> Any:
        st = real(path)
        return os.statvfs_result((st.f_bsize, 4096, st.f_blocks, free_blocks, free_blocks,
                                  st.f_files, st.f_ffree, st.f_favail, st.f_flag,
                                  st.f_namemax))
    return fake


@pytest.mark.parametrize("full", [True, False])
def test_sqlite_disk_io_error_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str], full: bool) -> None:
    """SQLite's bare "disk I/O error" when it cannot make its -shm / -wal files at open
    (what a full disk gives, see the tmpfs test below): one line naming the ledger's path,
    the cause and the fix, exit 7, nothing charged."""
    from hdp_spark.ledger import _sqlite_errors
    from hdp_spark.ledger import sqlite as sqlite_ledger

    job = write_job(tmp_path)
    open_ledger("sqlite", load_job(job).ledger.path)

    def io_error(c: sqlite3.Connection, pragma: str) -> bool:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sqlite_ledger, "pragma_ok", io_error)
    monkeypatch.setattr(_sqlite_errors.os, "statvfs", _statvfs_with(0 if full else 10**6))
    code, err = _run(["run", str(job)], capsys)
    assert code == 7, err
    line = _one_line(err)
    assert f"`{load_job(job).ledger.path}` (`[ledger] path`)" in line
    if full:
        assert "the disk holding it is full (opening it" in line
        assert "Free space on that file system" in line
    else:
        assert "disk I/O error (opening it) although the disk has room" in line
        assert "`-wal` and `-shm`" in line
    assert "Traceback" not in err
    monkeypatch.undo()
    assert records(job) == []
    assert published(load_job(job).output.path) == {}


def test_full_disk_at_open_real_tmpfs(tmp_path: Path) -> None:
    """A ledger on a file system filled up after it was created: SQLite cannot make its
    -shm file and says "disk I/O error"; the run says the disk is full (exit 7)."""
    if not _mount_ns_works(tmp_path):
        pytest.skip("mount namespaces are not available")
    ledger_dir = tmp_path / "small"
    ledger_dir.mkdir()
    ledger = ledger_dir / "l.sqlite"
    job = write_job(tmp_path, ledger=ledger)
    make = (f'{sys.executable} -c "from hdp_spark.ledger import open_ledger; '
            f"open_ledger('sqlite', '{ledger}')\"")
    # full but for 8 KiB: room for the run's data-quality report beside the ledger, not
    # for SQLite's 32 KiB -shm file
    fill = (f"(dd if=/dev/zero of={ledger_dir}/filler bs=4k 2>/dev/null; true) && "
            f"truncate -s -8K {ledger_dir}/filler")
    count = (f'{sys.executable} -c "from hdp_spark.ledger import open_ledger; '
             f"import os; os.remove('{ledger_dir}/filler'); "
             f"print(len(list(open_ledger('sqlite', '{ledger}').records())))\"")
    setup = f"mount -t tmpfs -o size=256k tmpfs {ledger_dir} && {make} && {fill}"
    env = {k: v for k, v in os.environ.items() if k != DISK_FULL_ENV}
    env["PYTHONPATH"] = str(REPO)
    script = (f'{setup} && {{ {sys.executable} -m hdp_spark.jobs run "$0" -q; '
              f'echo "exit=$?" >&2; {count}; }}')
    done = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script,
                           str(job)], env=env, capture_output=True, text=True, cwd=REPO,
                          check=False, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == "exit=7", done.stderr
    assert len(lines) == 2, done.stderr
    assert "the disk holding it is full (opening it" in lines[0]
    assert "disk I/O error" in lines[0]  # SQLite's own words, explained
    assert done.stdout.strip() == "0"  # nothing charged
    assert published(load_job(job).output.path) == {}


@pytest.mark.parametrize("where", ["itself", "parent"])
def test_output_path_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    where: str) -> None:
    """Not "File exists": the setting, the rule and the fix, exit 2, nothing charged."""
    job = write_job(tmp_path)
    out = load_job(job).output.path
    blocker = out  # a file where the directory, or a parent of it, should be
    if where == "parent":
        job.write_text(job.read_text().replace(str(out), str(out / "inner")))
        out = out / "inner"
    blocker.write_text("not a directory\n")
    code, err = _run(["run", str(job)], capsys)
    assert code == 2, err
    line = _one_line(err)
    assert line.count("`[output] path`") == 2
    assert f"`{out}` must be a directory" in line
    assert ("it is a file" if where == "itself" else f"`{blocker}` above it is a file") in line
    assert "nothing was charged" in line
    assert "File exists" not in line
    assert "Not a directory" not in line
    assert blocker.read_text() == "not a directory\n"
    assert "before reading the input" in line  # found in preflight: no ledger was opened
    assert not load_job(job).ledger.path.exists()
    assert records(job) == []


def _in_ns_cli(setup: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m hdp_spark.jobs ARGS`` after ``setup`` mount commands (a mount namespace)."""
    env = {k: v for k, v in os.environ.items() if k != DISK_FULL_ENV}
    env["PYTHONPATH"] = str(REPO)
    script = f'{setup} && exec {sys.executable} -m hdp_spark.jobs "$@"'
    return subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script,
                           "sh", *args], env=env, capture_output=True, text=True, cwd=REPO,
                          check=False, timeout=300)


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_a_read_only_ledger_directory_verifies_and_re_publishes(
    tmp_path: Path, backend: str
) -> None:
    """Issue 51: on a read-only ledger directory (its data-quality reports' too), `verify`
    only reads (exit 0, both backends) and a run that charges nothing re-publishes (exit 0;
    the data-quality report is skipped with one WARNING); a run that must charge is refused
    with exit 7, nothing charged."""
    if not _mount_ns_works(tmp_path):
        pytest.skip("mount namespaces are not available")
    ledger_dir = tmp_path / "ledger_dir"
    ledger_dir.mkdir()
    ledger = ledger_dir / ("l.sqlite" if backend == "sqlite" else "l")
    job = write_job(tmp_path, backend=backend, ledger=ledger, releases=GROUPED_RELEASE)
    run_job(job)
    before = records(job)
    out = load_job(job).output.path
    shutil.rmtree(out / "salary_by_dept")  # the re-publish re-creates it from the ledger
    ro = f"mount --bind {ledger_dir} {ledger_dir} && mount -o remount,bind,ro {ledger_dir}"
    done = _in_ns_cli(ro, "verify", str(ledger), "--backend", backend, "-q")
    assert done.returncode == 0, done.stderr
    assert "nothing damaged" in done.stdout
    done = _in_ns_cli(ro, "run", str(job), "-q")
    assert done.returncode == 0, done.stderr
    assert "data-quality report not written" in done.stderr
    assert "re-published" not in done.stderr  # -q: warnings only
    assert [r.commit_id for r in records(job)] == [r.commit_id for r in before]
    assert set(published(out)) == {before[0].commit_id}
    more = write_job(tmp_path, filename="more.toml", backend=backend, ledger=ledger,
                     releases=RELEASES)
    done = _in_ns_cli(ro, "run", str(more), "-q")
    assert done.returncode == 7, done.stderr
    assert "read-only" in done.stderr.strip().splitlines()[-1]
    assert records(job) == before
