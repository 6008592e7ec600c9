"""The suite's xdist groups take effect: under ``-n 2 --dist loadgroup`` the tests that share
a module-scoped fixture run on one worker (``tests/conftest.py`` groups them; pytest-xdist
3.8 alone wrote the group into an attribute pytest 9.2 no longer reads, so every worker
built the fixture, and every worker started its own Spark servers)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import importlib.util
import sys

_spec = importlib.util.spec_from_file_location("hdp_suite_conftest", {str(TESTS / "conftest.py")!r})
_suite = importlib.util.module_from_spec(_spec)
sys.modules["hdp_suite_conftest"] = _suite
_spec.loader.exec_module(_suite)
pytest_collection_modifyitems = _suite.pytest_collection_modifyitems
"""

PROBE = """
import pytest

@pytest.fixture(scope="module")
def shared():
    return 1

@pytest.mark.parametrize("i", range(6))
def test_shared(shared, i):
    assert shared == 1

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    assert i >= 0
"""


def test_tests_of_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probe.py").write_text(PROBE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", "-p", "no:randomly", "test_probe.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\].*PASSED test_probe\.py::(test_\w+)\[\d\](@\S+)?", proc.stdout)
    assert len(ran) == 12, proc.stdout[-3000:]
    shared = {(worker, group) for worker, name, group in ran if name == "test_shared"}
    # one worker, and the group is in the node id (the scheduler keys on it)
    assert len(shared) == 1, shared
    assert next(iter(shared))[1] == "@test_probe.py"
    assert all(group == "" for _, name, group in ran if name == "test_alone")


def _suite_conftest() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("hdp_suite_conftest_groups",
                                                  TESTS / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_each_spark_server_has_its_own_group() -> None:
    """The tests of one server share a group (the server starts once per run); the tests of
    different servers do not (two workers share them: one group for all servers kept one
    worker busy while the other idled)."""
    from types import SimpleNamespace

    group = _suite_conftest()._xdist_group  # type: ignore[attr-defined]

    def of(*fixtures: str) -> str | None:
        item = SimpleNamespace(fixturenames=["spark", *fixtures], nodeid="tests/x.py::t")
        result: str | None = group(item)
        return result

    connect, cluster, bare = (of("connect_server"), of("cluster_server"),
                              of("bare_connect_server"))
    assert len({connect, cluster, bare}) == 3
    assert None not in {connect, cluster, bare}
    assert of("tmp_path", "connect_server") == connect
    both = of("cluster_server", "connect_server")
    assert both not in {connect, cluster, None}
    assert of("connect_server", "cluster_server") == both
    assert of("tmp_path") is None


def test_only_the_grouped_tests_start_connect_on_its_default_port() -> None:
    """A local Spark Connect server started as ``remote("local[2]")`` listens on the default
    port 15002, so two at once (two workers) collide: only the docs' and README's blocks run
    as printed start one that way, and their tests share one group; every job script of the
    suite starts its server on a free port (tests/local_connect.py)."""
    from types import SimpleNamespace

    suite = _suite_conftest()
    default_port = ".remote(" + '"local'  # the call as a block or a job script writes it
    starters = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
                      if default_port in p.read_text(encoding="utf-8"))
    grouped = {test.split("::")[0].removeprefix("tests/")
               for test in suite.DEFAULT_PORT_TESTS}  # type: ignore[attr-defined]
    # local_connect.py starts servers on free ports; test_readme_quickstart.py holds the
    # README's Connect line as text (CONNECT) for test_readme_as_printed.py, which runs it
    assert set(starters) <= grouped | {"local_connect.py", "docs/test_readme_quickstart.py"}, (
        starters)
    for test in suite.DEFAULT_PORT_TESTS:  # type: ignore[attr-defined]
        item = SimpleNamespace(fixturenames=["spark"], nodeid=test + "[connect]")
        assert suite._xdist_group(item) == "connect-default-port"  # type: ignore[attr-defined]
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
         "tests/docs"], cwd=TESTS.parent, capture_output=True, text=True, timeout=300,
        check=False).stdout
    for test in suite.DEFAULT_PORT_TESTS:  # type: ignore[attr-defined]
        assert test in collected, test  # each names a test that exists
