"""Shared fixtures: a session-scoped local[2] Spark session and an engine fixture that runs
the same test on pandas and on Spark (Spark input repartitioned, so row order and
partitioning differ from pandas)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
# Spark's Python workers (used only by the LDP simulation helper) must run this interpreter,
# which has pyarrow and randomgen; the system python3 may have neither.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every JVM the suite starts (the session below, the job servers and their local-cluster
# executors, the CLI, benchmark and docs subprocesses, which inherit this) runs with the
# client compiler only and the serial collector: the tests' Spark jobs are tiny and short,
# so HotSpot's optimizing compiler and parallel GC threads cost CPU they never pay back
# (issue 53: tests/backends/test_mean_engines.py 67 -> 37 CPU s). Neither changes a result.
# A PYSPARK_SUBMIT_ARGS of the caller's own is kept (``pyspark-shell`` alone: the defaults).
# They also map the class-data-sharing archive of Spark's classes the install step trained
# (hdp_spark/spark/jvm/cds.py; a session's start-up and first query ~40 % less CPU), as
# ``hs.configure`` does for a reader's local session: these options replace that one's.
# Executors (local-cluster) get them too: a JVM maps the archive where its class path
# matches the training's and skips it silently otherwise.
JVM_BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _jvm_options() -> str:
    try:
        from hdp_spark.spark.jvm.cds import driver_options
    except ImportError:  # no pyspark: no Spark test runs
        return JVM_BASE_OPTIONS
    return driver_options(JVM_BASE_OPTIONS)


JVM_OPTIONS = _jvm_options()
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    f"--driver-java-options '{JVM_OPTIONS}' "
    f"--conf 'spark.executor.extraJavaOptions={JVM_OPTIONS}' pyspark-shell")

# Property tests draw their examples from a fixed seed (derandomize), so a run's outcome never
# depends on chance, and never fail on timing (no deadline, no too_slow health check: the
# machines are shared). HYPOTHESIS_PROFILE=explore draws new examples each run: use it when
# writing or changing a property, then add any counterexample it finds as an explicit case.
settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Under pytest-xdist (``scripts/test.sh`` runs the whole suite on workers with ``--dist
# loadgroup``) a test goes to any worker unless it shares something costly: the tests that use
# one Spark server (session-scoped, one per test process) run on one worker, so each server
# starts once per run, not once per worker; each server has its own group, so two workers
# share the servers' tests (one group for all of them kept one worker busy 554 s of
# tests/columns while the other idled); the tests of a module that share a module- or
# class-scoped fixture run on one worker, so the fixture is built once.
SERVER_FIXTURES = frozenset({"connect_server", "bare_connect_server", "cluster_server"})
# The tests that run the README's or the docs' Spark Connect blocks as printed start a local
# Connect server on its default port (15002): two at once collide, so they share one group.
# The suite's own job scripts start theirs on free ports (tests/local_connect.py).
DEFAULT_PORT_GROUP = "connect-default-port"
DEFAULT_PORT_TESTS = (
    "tests/docs/test_doc_blocks.py::test_spark_blocks_run_alone",
    "tests/docs/test_readme_as_printed.py::test_spark_quickstart_runs_as_printed_in_a_fresh",
)


def _xdist_group(item: pytest.Item) -> str | None:
    if item.nodeid.startswith(DEFAULT_PORT_TESTS):
        return DEFAULT_PORT_GROUP
    servers = sorted(SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if servers:  # a test of two servers would share a group with neither: one group per set
        return "spark-server-" + "+".join(servers)
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        if defs and defs[-1].scope in ("module", "class", "package"):
            return item.nodeid.split("::")[0]
    return None


def _suffix_node_id(item: pytest.Item, group: str) -> None:
    """Give ``item`` the node id ``<id>@<group>`` that ``--dist loadgroup`` schedules by.

    pytest-xdist (3.8) writes the suffix into ``item._nodeid``, which pytest 9.2 no longer
    reads (``nodeid`` is ``str(item._id)``): the groups were ignored and every worker started
    its own Spark servers. So the worker sets the id itself, as xdist means to."""
    from _pytest.nodeid import coerce_node_id  # the id type of pytest >= 9.2

    item._id = coerce_node_id(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # on an xdist worker under --dist loadgroup whose pytest keeps the id in item._id
    suffix = bool(getattr(config.option, "loadgroup", False)) and all(
        hasattr(item, "_id") for item in items)
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            if suffix:
                _suffix_node_id(item, group)


def pytest_configure(config: pytest.Config) -> None:
    prefix = os.environ.get("HDP_TEST_PROFILE")
    if prefix:  # opt-in: each test's wall and process-tree CPU time (tests/cpu_profile.py)
        from cpu_profile import Profile

        config.pluginmanager.register(_ProfileHook(Profile(prefix)), "hdp-cpu-profile")


class _ProfileHook:
    def __init__(self, profile: Any) -> None:
        self.profile = profile

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        began = self.profile.start()
        yield
        self.profile.stop(item.nodeid, began)


def _java_available() -> bool:
    from shutil import which

    return which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A classic local[2] Spark session shared by the whole test run."""
    pytest.importorskip("pyspark")
    if not _java_available():
        pytest.skip("Spark tests need Java 17")
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    # configure: the Column and SQL aggregators need the extension's analyzer rule, which
    # only a session built with it has (as the README builds its sessions)
    session = (
        hs.configure(SparkSession.builder.master("local[2]"))
        .appName("hdp_spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _server(mode: str) -> Iterator[Any]:
    pytest.importorskip("pyspark.sql.connect" if mode.startswith("connect") else "pyspark")
    if not _java_available():
        pytest.skip("Spark tests need Java 17")
    from spark_servers import JobServer

    server = JobServer(mode)
    yield server
    server.close()


@pytest.fixture(scope="session")
def connect_server() -> Iterator[Any]:
    """The run's one Spark Connect server (configured with the extension), started by the
    first job: ``connect_server.run(job_path)`` runs the job's ``run(session)`` in a new
    session of it (``tests/spark_servers.py``)."""
    yield from _server("connect")


@pytest.fixture(scope="session")
def bare_connect_server() -> Iterator[Any]:
    """The run's one Spark Connect server built without the extension."""
    yield from _server("connect-bare")


@pytest.fixture(scope="session")
def cluster_server() -> Iterator[Any]:
    """The run's one local-cluster[2,1,1024] (classic, configured): two executor JVMs,
    each with its own Python workers."""
    from spark_servers import CLUSTER

    yield from _server(CLUSTER)


@dataclass
class Engine:
    """One engine under test: builds its native frame from pandas and runs the API."""

    name: str
    session: Any = None

    def frame(self, pdf: pd.DataFrame) -> Any:
        """The engine's native table for ``pdf`` (Spark: repartitioned into 3)."""
        if self.name == "pandas":
            return pdf.copy()
        return self.session.createDataFrame(pdf).repartition(3)

    @property
    def module(self) -> Any:
        """``hdp_spark.pandas`` or ``hdp_spark.spark``."""
        if self.name == "pandas":
            import hdp_spark.pandas as mod
        else:
            import hdp_spark.spark as mod
        return mod

    def agg(self, pdf: pd.DataFrame, *specs: Any, **kwargs: Any) -> pd.DataFrame:
        """Run ``agg`` on this engine and return the output as pandas."""
        out = self.module.agg(self.frame(pdf), *specs, **kwargs)
        return out if self.name == "pandas" else out.toPandas()

    def release(self, pdf: pd.DataFrame, *specs: Any, **kwargs: Any) -> Any:
        """Run ``release`` on this engine (engine-neutral result)."""
        return self.module.release(self.frame(pdf), *specs, **kwargs)


@pytest.fixture(params=["pandas", "spark"])
def engine(request: pytest.FixtureRequest) -> Engine:
    """Runs the test once per engine."""
    if request.param == "spark":
        return Engine("spark", request.getfixturevalue("spark"))
    return Engine("pandas")
