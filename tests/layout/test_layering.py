"""The engine-agnostic core imports no engine: ``hdp_spark.core`` (every module of it) loads
in a fresh interpreter where importing pandas or pyspark fails."""

from __future__ import annotations

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
