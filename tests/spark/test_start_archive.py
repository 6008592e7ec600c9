"""The class-data-sharing archive of Spark's classes (``hdp_spark/spark/jvm/cds.py``): the
install step trains it, local sessions start with it, and an archive the JVM cannot use
(missing, truncated, another class path) never fails or warns."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from reader_env import reader_env

from hdp_spark.spark.jvm import cds

needs_java = pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
    reason="needs Java 17")


class _Builder:
    """The part of ``SparkSession.Builder`` that ``start_archive`` uses."""

    def __init__(self, **opts: str) -> None:
        self._options = dict(opts)

    def config(self, key: str, value: str) -> _Builder:
        self._options[key] = value
        return self


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _installed() -> Path:
    from hdp_spark.spark.jvm import jar_path, spark_jars

    path = cds.archive(jar_path(), spark_jars())
    assert path is not None, "the install step (scripts/bootstrap.sh) trained no archive"
    return path


def test_with_archive_appends_the_options_and_keeps_the_callers() -> None:
    path = Path("/x/hdp_spark-cds-0123.jsa")
    got = cds.with_archive("-XX:+UseSerialGC", path)
    assert got == f"-XX:+UseSerialGC -XX:SharedArchiveFile={path} {cds.QUIET}"
    assert cds.with_archive("", path) == f"-XX:SharedArchiveFile={path} {cds.QUIET}"
    assert cds.with_archive("-Xmx1g", None) == "-Xmx1g"  # no archive: unchanged


@pytest.mark.parametrize("own", ["-XX:SharedArchiveFile=/mine.jsa", "-Xshare:off",
                                 "-XX:ArchiveClassesAtExit=/dump.jsa"])
def test_with_archive_leaves_the_callers_own_sharing_alone(own: str) -> None:
    assert cds.with_archive(own, Path("/x/a.jsa")) == own


def test_an_archive_path_with_a_space_is_quoted() -> None:
    assert cds.java_options(Path("/my dir/a.jsa")) == (
        f'-XX:SharedArchiveFile="/my dir/a.jsa" {cds.QUIET}')


@needs_java
def test_the_archive_is_named_by_the_jdk_the_jars_and_the_extension(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core_2.13-4.3.0.jar").write_bytes(b"x" * 10)
    jar = tmp_path / "hdp_spark-ext-aaaa.jar"
    jar.write_bytes(b"jar")
    assert cds.archive(jar, jars) is None  # not trained
    # the file the stamp names, as the training writes it (next to the extension's jar)
    name = _trained(jar, jars, b"archive")
    assert cds.archive(jar, jars) == name
    (jars / "spark-sql_2.13-4.3.0.jar").write_bytes(b"y")  # a new pyspark: stale
    assert cds.archive(jar, jars) is None
    (jars / "spark-sql_2.13-4.3.0.jar").unlink()
    assert cds.archive(jar, jars) == name
    other = tmp_path / "hdp_spark-ext-bbbb.jar"  # a rebuilt extension: stale
    other.write_bytes(b"jar")
    assert cds.archive(other, jars) is None


def _trained(jar: Path, jars: Path, content: bytes) -> Path:
    prefix = cds._prefix(jar, jars)
    assert prefix is not None
    path = jar.parent / f"{prefix}{len(content)}.jsa"
    path.write_bytes(content)
    return path


@needs_java
def test_an_archive_of_another_size_than_its_name_is_never_named(tmp_path: Path) -> None:
    """A truncated archive crashes the JDK 17 JVM that maps it (SIGBUS): never named."""
    jar, jars = _fake_install(tmp_path)
    name = _trained(jar, jars, b"archive")
    assert cds.archive(jar, jars) == name
    name.write_bytes(b"arch")  # cut short
    assert cds.archive(jar, jars) is None


def _fake_install(tmp_path: Path) -> tuple[Path, Path]:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core_2.13-4.3.0.jar").write_bytes(b"x")
    jar = tmp_path / "hdp_spark-ext-aaaa.jar"
    jar.write_bytes(b"jar")
    return jar, jars


@needs_java
def test_build_archive_keeps_a_trained_archive_and_drops_older_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jar, jars = _fake_install(tmp_path)
    name = _trained(jar, jars, b"archive")
    # trained already: returned as it is, no training run (this trainer would fail)
    assert cds.build_archive(jar, jars, trainer="hdp_spark.no_such_trainer") == name
    # a trainer that writes its archive: the new one replaces the old, stale ones go
    old = tmp_path / "hdp_spark-cds-0000000000000000-3.jsa"
    old.write_bytes(b"old")
    pkg = tmp_path / "trainers"
    pkg.mkdir()
    (pkg / "writes_archive.py").write_text(
        "import sys\nopen(sys.argv[1], 'wb').write(b'trained archive')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(pkg), *filter(None, [os.environ.get("PYTHONPATH")])]))
    got = cds.build_archive(jar, jars, force=True, trainer="writes_archive")
    assert got.read_bytes() == b"trained archive"
    assert got.name.endswith(f"-{len(b'trained archive')}.jsa")  # its size in its name
    assert cds.archive(jar, jars) == got
    assert not old.exists()
    assert not name.exists()
    assert not list(tmp_path.glob("*.part"))


@needs_java
def test_a_failed_training_names_it_and_leaves_nothing(tmp_path: Path) -> None:
    jar, jars = _fake_install(tmp_path)
    with pytest.raises(cds.CdsBuildError, match="training session failed"):
        cds.build_archive(jar, jars, trainer="hdp_spark.no_such_trainer")
    assert not list(tmp_path.glob("*.jsa*"))


def test_no_java_names_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar, jars = _fake_install(tmp_path)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cds.archive(jar, jars) is None
    with pytest.raises(cds.CdsBuildError, match="needs `java`"):
        cds.build_archive(jar, jars)


@pytest.mark.parametrize(
    ("opts", "env", "mapped"),
    [
        ({"spark.master": "local[2]"}, None, True),
        ({"spark.master": "local-cluster[2,1,1024]"}, None, True),
        ({"spark.remote": "local[2]"}, None, True),  # the local Connect server's JVM
        ({}, None, True),  # no master: PySpark's local[*]
        ({}, "sc://host:15002", False),  # SPARK_REMOTE: a running server's JVM
        ({"spark.master": "yarn"}, None, False),
        ({"spark.remote": "sc://host:15002"}, None, False),
    ],
)
def test_start_archive_maps_it_for_local_sessions_only(
    monkeypatch: pytest.MonkeyPatch, opts: dict[str, str], env: str | None, mapped: bool
) -> None:
    from hdp_spark.spark.extension import DRIVER_OPTIONS, start_archive

    path = Path("/x/hdp_spark-cds-0123.jsa")
    monkeypatch.setattr(cds, "archive", lambda jar, jars: path)
    if env is None:
        monkeypatch.delenv("SPARK_REMOTE", raising=False)
    else:
        monkeypatch.setenv("SPARK_REMOTE", env)
    builder = _Builder(**opts, **{DRIVER_OPTIONS: "-XX:+UseSerialGC"})
    out = start_archive(builder)._options[DRIVER_OPTIONS]
    want = f"-XX:+UseSerialGC {cds.java_options(path)}" if mapped else "-XX:+UseSerialGC"
    assert out == want


def test_configure_starts_a_local_session_with_the_archive(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    import hdp_spark.spark as hs
    from hdp_spark.spark.extension import DRIVER_OPTIONS

    path = Path("/x/hdp_spark-cds-0123.jsa")
    monkeypatch.setattr(cds, "archive", lambda jar, jars: path)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    out = hs.configure(_Builder(**{"spark.master": "local[2]"}))._options
    assert out[DRIVER_OPTIONS] == cds.java_options(path)


@needs_java
def test_the_install_step_trained_the_archive_of_this_jdk_and_pyspark() -> None:
    path = _installed()
    assert path.stat().st_size > 10_000_000  # Spark's classes, not an empty file


@needs_java
@pytest.mark.parametrize("kind", ["missing", "junk", "other class path"])
def test_an_archive_the_jvm_cannot_use_neither_fails_nor_warns(tmp_path: Path,
                                                                kind: str) -> None:
    """The JVM's own behaviour with :func:`cds.java_options`: it starts, says nothing."""
    archive = _installed()
    if kind == "missing":
        path = tmp_path / "gone.jsa"
    elif kind == "junk":
        path = tmp_path / "junk.jsa"
        path.write_bytes(os.urandom(4096))
    else:
        path = archive  # trained on Spark's class path, started on another
        (tmp_path / "Other.class").write_bytes(b"x")  # (an empty directory would not count)
    opts = cds.java_options(path).split()
    proc = subprocess.run([_java(), *opts, "-cp", str(tmp_path), "-version"],
                          capture_output=True, text=True, check=False)
    said = (proc.stdout + proc.stderr).lower()  # the JVM logs to stdout by default
    assert proc.returncode == 0, said
    assert "warning" not in said
    assert "archive" not in said
    if kind == "other class path":  # without the option that quiets it, the JVM warns
        loud = subprocess.run([_java(), f"-XX:SharedArchiveFile={path}", "-cp",
                               str(tmp_path), "-version"],
                              capture_output=True, text=True, check=False)
        assert "Unable to use shared archive" in loud.stdout + loud.stderr


def _mapped(pid: int, archive: Path) -> bool:
    """Whether process ``pid`` has ``archive`` mapped (Linux: its ``/proc/<pid>/maps``; a
    JVM that cannot use an archive unmaps it)."""
    maps = Path(f"/proc/{pid}/maps")
    if not maps.exists():
        pytest.skip("needs /proc (Linux) to see the JVM's mapped files")
    return any(str(archive) in line for line in maps.read_text().splitlines())


@pytest.mark.spark
def test_the_suite_session_starts_with_the_archive_mapped(spark: Any) -> None:
    """The suite's JVMs start with the archive (tests/conftest.py), and the JVM mapped it."""
    archive = _installed()
    jvm = spark._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                .getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in args
    assert _mapped(int(jvm.java.lang.ProcessHandle.current().pid()), archive)


@needs_java
def test_a_readers_session_the_archive_does_not_fit_runs_quietly(tmp_path: Path) -> None:
    """A session as the README builds it (a reader's environment, none of the suite's JVM
    options), whose class path is not the training's (an extra class path entry first, as
    a stale archive after a change of jars): the JVM cannot use the archive ``configure``
    names, runs the query, and prints nothing about it."""
    archive = _installed()
    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "import hdp_spark.spark as hs\n"
        "spark = (hs.configure(SparkSession.builder.master('local[1]'))\n"
        "         .config('spark.driver.extraClassPath', sys.argv[1])\n"
        "         .config('spark.ui.enabled', 'false').getOrCreate())\n"
        "print(spark.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
        "print('pid', spark._jvm.java.lang.ProcessHandle.current().pid())\n"
        "print('sum', spark.range(10).groupBy().sum().collect()[0][0])\n"
        "sys.stdin.readline()\n"  # the JVM stays up until the test has looked at it
    )
    (tmp_path / "Other.class").write_bytes(b"x")  # (an empty directory would not count)
    with subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], env=reader_env(),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        pid = next((int(x.split()[1]) for x in lines if x.startswith("pid ")), None)
        mapped = pid is not None and _mapped(pid, archive)
        out, err = proc.communicate("\n", timeout=600)
    assert proc.returncode == 0, err[-3000:]
    said = "".join(lines) + out + err  # the JVM logs to stdout by default
    assert f"-XX:SharedArchiveFile={archive}" in said
    assert "sum 45" in said
    assert pid is not None, lines
    assert not mapped  # the JVM did not use it
    assert "shared archive" not in said.lower()
    assert "[cds" not in said


def test_the_session_a_job_creates_starts_with_the_archive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job's `[spark]` JVM options are kept and the archive's appended (no JVM: the
    builder's options are read instead of starting a session)."""
    from pyspark.sql import SparkSession

    from hdp_spark.spark import job_adapter
    from hdp_spark.spark.extension import DRIVER_OPTIONS

    path = Path("/x/hdp_spark-cds-0123.jsa")
    monkeypatch.setattr(cds, "archive", lambda jar, jars: path)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", lambda self: dict(self._options))
    options = job_adapter._session(None, [(DRIVER_OPTIONS, "-XX:+UseSerialGC")])
    assert options[DRIVER_OPTIONS] == f"-XX:+UseSerialGC {cds.java_options(path)}"
    remote = job_adapter._session(None, [("spark.remote", "sc://host:15002")])
    assert DRIVER_OPTIONS not in remote
