"""The one front: every public entry point is written once (``hdp_spark.front``) and bound
per backend, so the backends cannot drift apart (issue 30)."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.front import histogram as front_histogram
from hdp_spark.front import ldp as front_ldp
from hdp_spark.front import partial as front_partial
from hdp_spark.front import release as front_release
from hdp_spark.front import user_mean as front_user_mean
from hdp_spark.front.bind import bind

ROOT = Path(__file__).resolve().parents[2]
FRONT = [front_release, front_histogram, front_user_mean, front_partial, front_ldp]
NAMES = sorted(name for module in FRONT for name in module.__all__)
BACKENDS = ["hdp_spark.pandas", "hdp_spark.spark"]


def test_every_front_function_is_bound_by_both_backends() -> None:
    assert len(NAMES) == 16
    for backend in BACKENDS:
        module = importlib.import_module(backend)
        for name in NAMES:
            fn = getattr(module, name)
            front = next(getattr(m, name) for m in FRONT if name in m.__all__)
            assert fn.__module__ == backend, name
            assert fn.__doc__ == front.__doc__, name  # one docstring, shared
            assert "Privacy:" in (fn.__doc__ or ""), name
            params = list(inspect.signature(fn).parameters)
            assert params[0] == "df", name
            assert params[1:] == list(inspect.signature(front).parameters)[1:], name


def test_no_backend_module_defines_an_entry_point() -> None:
    """The bodies live in the front only: no backend module defines a function of the
    front's names (the check would catch a copied alias)."""
    found = []
    for package in ("pandas", "spark"):
        for path in (ROOT / "hdp_spark" / package).glob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.name}:{node.name}" for node in tree.body
                      if isinstance(node, ast.FunctionDef) and node.name in NAMES]
    assert found == []


def test_the_copy_check_can_fail(tmp_path: Path) -> None:
    source = "def agg(df, *specs):\n    return None\n"
    tree = ast.parse(source)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in NAMES]


def test_bound_function_takes_df_by_position_or_keyword() -> None:
    calls: list[object] = []

    def front(engine: object, x: int, *, y: int = 0) -> tuple[object, int, int]:
        """Doc.

        Privacy:
            None.
        """
        calls.append(engine)
        return engine, x, y

    bound = bind(front, lambda df: ("engine", df), "somewhere")
    assert bound("t", 1, y=2) == (("engine", "t"), 1, 2)
    assert bound(df="u", x=3) == (("engine", "u"), 3, 0)
    assert bound.__name__ == "front"
    assert bound.__module__ == "somewhere"
    assert str(inspect.signature(bound)).startswith("(df")
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'df'"):
        bound(x=1)


def test_the_engine_neutral_entry_points_dispatch_on_the_type() -> None:
    import hdp_spark
    from hdp_spark.errors import EngineNotSupportedError

    df = pd.DataFrame({"x": [1.0, 2.0], "eps": [1.0, 1.0]})
    spec = hpd.hdp_mean("x", eps="eps", lower=0, upper=3)
    a = hdp_spark.agg(df, spec, unsafe_seed=1)
    b = hpd.agg(df, spec, unsafe_seed=1)
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(EngineNotSupportedError, match="got list"):
        hdp_spark.agg([1, 2], spec)


_BLOCKED = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "pyspark"):
            raise ImportError(f"blocked engine import: {name}")
        return None

sys.meta_path.insert(0, Block())
import hdp_spark.aggregators, hdp_spark.front.release, hdp_spark.front.histogram
import hdp_spark.front.user_mean, hdp_spark.front.partial, hdp_spark.front.ldp
import hdp_spark.front.dispatch, hdp_spark.front.bind, hdp_spark.explain
print("ok")
"""


def test_front_and_constructors_import_no_engine() -> None:
    proc = subprocess.run([sys.executable, "-c", _BLOCKED], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
