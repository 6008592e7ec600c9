"""Layering of the core. The engine-agnostic core imports no engine: ``hdp_spark.core`` (every
module of it) loads in a fresh interpreter where importing pandas or pyspark fails. Its
modules stay under 550 lines, every other module of the package under 600, and only the
mechanisms package (``core/noise``) draws randomness."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_BLOCKED = """
import importlib, pkgutil, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "pyspark"):
            raise ImportError(f"blocked engine import: {name}")
        return None

sys.meta_path.insert(0, Block())
import hdp_spark.core as core
names = [m.name for m in pkgutil.walk_packages(core.__path__, "hdp_spark.core.")]
for name in names:
    importlib.import_module(name)
assert not any(m.split(".")[0] in ("pandas", "pyspark") for m in sys.modules), "engine loaded"
print(len(names))
"""


def test_core_imports_without_pandas_or_pyspark() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKED], capture_output=True, text=True, cwd=ROOT,
        timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.strip()) > 10  # every core module was imported


def test_the_blocker_blocks() -> None:
    """The check can fail: a module importing pandas is refused under the same blocker."""
    code = _BLOCKED.replace("import hdp_spark.core as core", "import pandas  # noqa")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "blocked engine import: pandas" in proc.stderr


CORE = ROOT / "hdp_spark" / "core"
MECHANISMS = CORE / "noise"
MAX_MODULE_LINES = 550
PACKAGE = ROOT / "hdp_spark"
MAX_PACKAGE_MODULE_LINES = 600

_RANDOMNESS = re.compile(
    r"\bsecrets\.|\bos\.urandom\b|\brandom\.|\bnp\.random\b|\bnumpy\.random\b|\bdefault_rng\b"
    r"|\bgetrandbits\b|\brandrange\b|^\s*import (random|secrets)\b|^\s*from (random|secrets) import"
    r"|\brandomgen\b",
    re.MULTILINE,
)


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _randomness_hits(text: str) -> list[str]:
    return [m.group(0) for m in _RANDOMNESS.finditer(text)]


def test_no_core_module_is_too_long() -> None:
    """Every module of the core stays reviewable: at most 550 lines."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in _core_modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long
    assert len(_core_modules()) > 40  # the walk found the core


def _too_long(paths: list[Path], limit: int, base: Path = ROOT) -> dict[str, int]:
    return {
        str(p.relative_to(base)): n
        for p in paths
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit
    }


def test_no_module_of_the_package_is_too_long() -> None:
    """Every module of the package stays readable: at most 600 lines (the core: 550)."""
    modules = sorted(PACKAGE.rglob("*.py"))
    long = _too_long(modules, MAX_PACKAGE_MODULE_LINES)
    assert not long, long
    assert len(modules) > 100  # the walk found the package


def test_the_line_cap_can_fail(tmp_path: Path) -> None:
    for name, lines in (("long.py", MAX_PACKAGE_MODULE_LINES + 1),
                        ("short.py", MAX_PACKAGE_MODULE_LINES)):
        (tmp_path / name).write_text("x = 1\n" * lines, encoding="utf-8")
    found = _too_long(sorted(tmp_path.glob("*.py")), MAX_PACKAGE_MODULE_LINES, tmp_path)
    assert found == {"long.py": MAX_PACKAGE_MODULE_LINES + 1}


def test_only_the_mechanisms_package_draws_randomness() -> None:
    """No module of hdp_spark/core outside core/noise draws randomness (grep-based)."""
    offenders = {
        str(p.relative_to(ROOT)): _randomness_hits(p.read_text(encoding="utf-8"))
        for p in _core_modules()
        if MECHANISMS not in p.parents and _randomness_hits(p.read_text(encoding="utf-8"))
    }
    assert not offenders, offenders
    # the mechanisms package itself does draw, so the pattern can match
    inside = [
        p for p in MECHANISMS.rglob("*.py") if _randomness_hits(p.read_text(encoding="utf-8"))
    ]
    assert len(inside) >= 3, inside


def test_the_randomness_grep_can_fail() -> None:
    for line in ("seed = secrets.randbits(128)", "rng = np.random.default_rng(0)",
                 "x = os.urandom(8)", "import random", "t = rng.getrandbits(3)",
                 "u = random.random()"):
        assert _randomness_hits(line), line
    for line in ("random_state = None", "randomized response", "key.stream(ctx)"):
        assert not _randomness_hits(line), line


_PYSPARK_IMPORT = re.compile(r"^\s*(import|from)\s+pyspark\b", re.MULTILINE)


def test_spark_code_lives_only_under_hdp_spark_spark() -> None:
    """Only ``hdp_spark/spark/`` imports pyspark (the jobs and the ledger reach Spark through
    it: ``spark/job_adapter.py``, ``spark/ledger_io.py``)."""
    package = ROOT / "hdp_spark"
    offenders = sorted(
        str(p.relative_to(ROOT)) for p in package.rglob("*.py")
        if "spark" not in p.relative_to(package).parts[:1]
        and _PYSPARK_IMPORT.search(p.read_text())
    )
    assert offenders == []
    inside = [p for p in (package / "spark").rglob("*.py") if _PYSPARK_IMPORT.search(p.read_text())]
    assert len(inside) >= 5  # the pattern matches real imports


def _top_modules() -> list[str]:
    import pkgutil

    return sorted(f"hdp_spark.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "hdp_spark")])
                  if m.name != "core")


def test_every_top_module_imports_first_in_a_fresh_interpreter() -> None:
    """No import cycle that only an earlier import hides: each top-level module and package
    of hdp_spark is the FIRST import of its own interpreter (a cycle between report, jobs
    and explain once broke ``python -m hdp_spark.spark`` while the test suite, which
    imported them in another order, passed)."""
    names = _top_modules()
    assert {"hdp_spark.spark", "hdp_spark.pandas", "hdp_spark.jobs", "hdp_spark.report",
            "hdp_spark.explain"} <= set(names)
    code = "import importlib, sys; importlib.import_module(sys.argv[1])"
    failed = {}
    for name in names:
        proc = subprocess.run([sys.executable, "-c", code, name], capture_output=True,
                              text=True, cwd=ROOT, timeout=180, check=False)
        if proc.returncode != 0:
            failed[name] = proc.stderr[-1500:]
    assert not failed, failed
