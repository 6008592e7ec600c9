"""A class-data-sharing archive of Spark's classes, so a local Spark JVM starts faster.

A Spark driver JVM loads ~13,000 classes from pyspark's jars at start-up and on its first
queries; parsing and verifying them is most of a local session's start-up CPU. JDK 17 can
write the classes a run loaded to an archive at exit (AppCDS, ``-XX:ArchiveClassesAtExit``)
and map them on later starts (``-XX:SharedArchiveFile``): a local[2] session's start and
first query measured ~40 % less process CPU with it (benchmarks/log/sample_job.md).

The install step (``python -m hdp_spark.spark.jvm``) trains the archive once: a short local
session (:mod:`hdp_spark.spark.jvm._train`) that reads, aggregates, runs a release and a
Column aggregator, and writes the archive when its JVM exits. Its name carries a stamp of
what it depends on (the JDK, pyspark's jars, the extension's jar, the training's code), so a
new pyspark, JDK or extension means no archive until the install step runs again: sessions
then start as they would without it. :func:`java_options` names the archive and turns the
JVM's CDS log off, so an archive the JVM cannot use (another JDK, class path or jar) costs
only its speed, never a warning or a failed start: the JVM falls back to the jars.
A truncated archive would crash the JVM (JDK 17 maps it without checking its length), so
the archive's name carries its size and a file of another size is never named.

No pyspark import here (the training runs in its own process).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from hdp_spark.errors import HdpError

__all__ = ["QUIET", "CdsBuildError", "archive", "build_archive", "driver_options",
           "java_options", "with_archive"]

QUIET = "-Xlog:cds*=off"
"""The JVM option that silences the JVM's CDS log: its "Unable to use shared archive"
warning for an archive it cannot use (the start goes on without it)."""

_PREFIX = "hdp_spark-cds-"


class CdsBuildError(HdpError):
    """The class-data-sharing archive could not be trained (no Java, or the training
    session failed)."""


def _java() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return (Path(home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def _stamp(jar: Path, jars: Path) -> str | None:
    """What the archive depends on: the JDK (its binary and its module image), the names
    and sizes of pyspark's jars, the extension's jar (named by its own stamp) and the
    training session's code."""
    java = _java()
    if java is None:
        return None
    h = hashlib.sha256(str(java).encode())
    modules = java.parent.parent / "lib" / "modules"
    if modules.is_file():
        st = modules.stat()
        h.update(f"|{st.st_size}|{st.st_mtime_ns}".encode())
    for p in sorted(jars.glob("*.jar")):
        h.update(f"|{p.name}:{p.stat().st_size}".encode())
    h.update(f"|{jar.name}|".encode())
    h.update((Path(__file__).parent / "_train.py").read_bytes())  # what the training runs
    return h.hexdigest()[:16]


def _prefix(jar: Path, jars: Path) -> str | None:
    stamp = _stamp(jar, jars)
    return None if stamp is None else f"{_PREFIX}{stamp}-"


def archive(jar: Path, jars: Path) -> Path | None:
    """The archive trained for this JDK, these pyspark ``jars`` and the extension ``jar``,
    or None when none was (or the install step has not run since one of them changed).

    The archive's name ends in its size in bytes, and a file of another size is not used:
    the JDK 17 JVM maps the file without checking its length, and a truncated archive
    crashes it (SIGBUS while mapping, measured).

    Privacy:
        None: reads no data.
    """
    prefix = _prefix(jar, jars)
    if prefix is None:
        return None
    for path in jar.parent.glob(f"{prefix}*.jsa"):
        size = path.name[len(prefix):-len(".jsa")]
        try:
            if size.isdigit() and path.stat().st_size == int(size):
                return path
        except OSError:
            continue
    return None


def java_options(path: Path | None) -> str:
    """The driver's JVM options that map the archive ``path`` ("" for None), its CDS log
    off (an archive the JVM cannot use is then skipped without a word).

    Privacy:
        None: configuration only.
    """
    if path is None:
        return ""
    quoted = f'"{path}"' if any(c in str(path) for c in " \t'\"") else str(path)
    return f"-XX:SharedArchiveFile={quoted} {QUIET}"


def with_archive(options: str, path: Path | None) -> str:
    """``options`` (a ``spark.driver.extraJavaOptions`` value) with :func:`java_options`
    appended, unless there is no archive or ``options`` already chooses the JVM's sharing
    (``-XX:SharedArchiveFile``, ``-XX:ArchiveClassesAtExit``, ``-Xshare``).

    Privacy:
        None: configuration only.
    """
    extra = java_options(path)
    if not extra or any(k in options for k in ("SharedArchiveFile", "ArchiveClassesAtExit",
                                               "-Xshare")):
        return options
    return f"{options} {extra}".strip()


def driver_options(options: str = "") -> str:
    """``options`` (a local driver's ``spark.driver.extraJavaOptions``) with the archive of
    this JDK, pyspark and extension appended (:func:`with_archive`); ``options`` unchanged
    when there is none, or no JDK, pyspark or extension jar to stamp it by.

    Privacy:
        None: configuration only.
    """
    from hdp_spark.spark.jvm import jar_path, spark_jars

    try:
        return with_archive(options, archive(jar_path(), spark_jars()))
    except (HdpError, OSError):
        return options


def build_archive(jar: Path, jars: Path, force: bool = False, timeout: float = 600.0,
                  trainer: str = "hdp_spark.spark.jvm._train") -> Path:
    """Train the archive (a short local session in a subprocess: ``python -m trainer
    ARCHIVE``) unless it exists; its path.

    Older archives next to it are removed once the new one is written.

    Raises:
        CdsBuildError: no ``java``, or the training session failed or wrote no archive.

    Privacy:
        None: the training session aggregates a synthetic table of its own.
    """
    prefix = _prefix(jar, jars)
    if prefix is None:
        msg = "the class-data-sharing archive needs `java` (a JDK 17+) on the PATH or in JAVA_HOME."
        raise CdsBuildError(msg)
    found = archive(jar, jars)
    if found is not None and not force:
        return found
    part = jar.parent / f"{prefix}training-{os.getpid()}.jsa.part"  # one per install step
    part.unlink(missing_ok=True)
    # the training session's environment: the caller's, without a test suite's JVM options
    # (they would replace the training's own) and without a Connect address
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE", "JDK_JAVA_OPTIONS")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", trainer, str(part)],
            env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        part.unlink(missing_ok=True)
        msg = f"the class-data-sharing training session ran over timeout={timeout} s."
        raise CdsBuildError(msg) from exc
    if proc.returncode != 0 or not part.is_file() or part.stat().st_size == 0:
        part.unlink(missing_ok=True)
        tail = (proc.stderr or proc.stdout)[-2000:]
        msg = (f"the class-data-sharing training session failed (exit {proc.returncode}, "
               f"no archive written):\n{tail}")
        raise CdsBuildError(msg)
    path = jar.parent / f"{prefix}{part.stat().st_size}.jsa"
    os.replace(part, path)
    for old in path.parent.glob(f"{_PREFIX}*.jsa"):
        if old != path:
            old.unlink(missing_ok=True)
    return path
