"""hdp_spark's JVM extension: the native ``hdp_cells`` aggregate and its group rule.

The Java sources ship in this package (``src/``) and are compiled by the install step
(``python -m hdp_spark.spark.jvm``, which ``scripts/bootstrap.sh`` runs) with the JDK that
Spark already needs, against the jars of the installed pyspark: no network, no Maven. When
the jar is missing or older than its sources or pyspark, :func:`jar_path` builds it (into
this package, or a user cache directory when the package is read-only).

No pyspark import here: building needs only ``javac`` and the pyspark jar directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from hdp_spark.errors import HdpError

__all__ = ["EXTENSIONS_CLASS", "FUNCTION", "JvmBuildError", "build", "jar_path", "spark_jars"]

EXTENSIONS_CLASS = "org.hdpspark.HdpExtensions"
"""The ``spark.sql.extensions`` class of the extension."""

FUNCTION = "hdp_cells"
"""The native aggregate's SQL name."""

_HERE = Path(__file__).resolve().parent
_SOURCES = _HERE / "src"


class JvmBuildError(HdpError):
    """The JVM extension could not be compiled (no JDK, or no pyspark jars)."""


def spark_jars() -> Path:
    """The directory of the jars Spark runs with: ``$SPARK_HOME/jars``, else pyspark's.

    Raises:
        JvmBuildError: pyspark is not installed, or has no jars directory.

    Privacy:
        None: reads no data.
    """
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        msg = "the JVM extension needs pyspark installed (its jars are the class path)."
        raise JvmBuildError(msg)
    jars = Path(spec.origin).parent / "jars"
    if not jars.is_dir():
        msg = f"pyspark has no jars directory at {jars}; set SPARK_HOME."
        raise JvmBuildError(msg)
    return jars


def _stamp(jars: Path) -> str:
    h = hashlib.sha256()
    for src in sorted(_SOURCES.rglob("*.java")):
        h.update(src.relative_to(_SOURCES).as_posix().encode())
        h.update(src.read_bytes())
    catalyst = sorted(p.name for p in jars.glob("spark-catalyst_*.jar"))
    h.update("|".join(catalyst).encode())
    return h.hexdigest()[:16]


def _targets(stamp: str) -> list[Path]:
    name = f"hdp_spark-ext-{stamp}.jar"
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hdp_spark"
    return [_HERE / name, cache / name]


def build(force: bool = False) -> Path:
    """Compile the extension if needed; the jar's path.

    Raises:
        JvmBuildError: no ``javac`` on the PATH (or in ``JAVA_HOME``), no pyspark jars, or
            the compiler failed.

    Privacy:
        None: compiles code; reads no data.
    """
    jars = spark_jars()
    stamp = _stamp(jars)
    targets = _targets(stamp)
    if not force:
        for t in targets:
            if t.is_file():
                return t
    javac = shutil.which("javac")
    if javac is None and os.environ.get("JAVA_HOME"):
        cand = Path(os.environ["JAVA_HOME"]) / "bin" / "javac"
        javac = str(cand) if cand.is_file() else None
    if javac is None:
        msg = "the JVM extension needs `javac` (a JDK 17+) on the PATH or in JAVA_HOME."
        raise JvmBuildError(msg)
    sources = [str(p) for p in sorted(_SOURCES.rglob("*.java"))]
    with tempfile.TemporaryDirectory(prefix="hdp_spark-javac-") as tmp:
        out = Path(tmp) / "classes"
        out.mkdir()
        proc = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", str(out), "-cp", str(jars / "*"),
             *sources],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            msg = f"javac failed compiling the JVM extension:\n{proc.stderr[-2000:]}"
            raise JvmBuildError(msg)
        for target in targets:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                part = target.with_suffix(".part")
                with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
                    z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
                    for cls in sorted(out.rglob("*.class")):
                        z.write(cls, cls.relative_to(out).as_posix())
                os.replace(part, target)
            except OSError:
                continue
            for old in target.parent.glob("hdp_spark-ext-*.jar"):
                if old != target:
                    old.unlink(missing_ok=True)
            return target
    msg = f"no writable place for the JVM extension's jar (tried {[str(t) for t in targets]})."
    raise JvmBuildError(msg)


def jar_path() -> Path:
    """The extension's jar, built first if missing or stale.

    Privacy:
        None: reads no data.
    """
    return build()

