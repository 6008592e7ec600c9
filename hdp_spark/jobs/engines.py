"""The one place that maps a job's engine name to its adapter, and the engines' preflight.

The engine name (``"pandas"`` or ``"spark"``) of a job file or the CLI is read here and
nowhere else: :func:`make_adapter` returns the :class:`~hdp_spark.jobs.adapter.EngineAdapter`
every other part of the runner works with.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from hdp_spark.errors import EngineUnavailableError
from hdp_spark.jobs.adapter import (
    QUANTILES,
    START,
    AggCharge,
    BudgetDistribution,
    ChargeSummary,
    EngineAdapter,
    InputCheck,
)

__all__ = [
    "QUANTILES",
    "START",
    "AggCharge",
    "BudgetDistribution",
    "ChargeSummary",
    "EngineAdapter",
    "InputCheck",
    "check_engine",
    "java_executable",
    "make_adapter",
]


def java_executable(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``java`` a local Spark would launch, or None.

    Same rule as Spark's launcher (``bin/spark-class``): ``$JAVA_HOME/bin/java`` when
    ``JAVA_HOME`` is set, otherwise ``java`` on ``PATH``.
    """
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        return java if os.path.isfile(java) and os.access(java, os.X_OK) else None
    return shutil.which("java", path=env.get("PATH", os.defpath))


def check_engine(
    engine: str, spark: Any = None, conf: Sequence[tuple[str, str]] = ()
) -> None:
    """Raise if ``engine`` cannot start here; reads and writes nothing.

    For Spark without a given or active session: pyspark must be importable and, unless
    the session is a remote Spark Connect one (``spark.remote`` = ``sc://...``), Java must
    be found the way Spark's launcher finds it (:func:`java_executable`).

    Raises:
        EngineUnavailableError: naming what is missing and how to provide it.
    """
    if engine != "spark" or spark is not None:
        return
    try:
        from hdp_spark.spark.job_adapter import active_session

        active = active_session()
    except ImportError as exc:
        msg = ("the Spark engine needs pyspark, which is not installed: pip install "
               "'pyspark[connect]' (or run with --engine pandas).")
        raise EngineUnavailableError(msg) from exc
    if active:
        return
    remote = dict(conf).get("spark.remote") or os.environ.get("SPARK_REMOTE") or ""
    if remote.startswith("sc://"):
        return
    if java_executable() is not None:
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        msg = (f"the Spark engine needs Java 17, but JAVA_HOME = {home!r} has no executable "
               "bin/java: point JAVA_HOME at a JDK 17 (or run with --engine pandas).")
    else:
        msg = ("the Spark engine needs Java 17, but JAVA_HOME is not set and no `java` is on "
               "PATH: install a JDK 17 and set JAVA_HOME or put `java` on PATH (or run with "
               "--engine pandas).")
    raise EngineUnavailableError(msg)


def make_adapter(
    engine: str, spark: Any = None, conf: Sequence[tuple[str, str]] = ()
) -> EngineAdapter:
    """The adapter of ``engine`` (``"pandas"`` or ``"spark"``).

    Args:
        engine: engine name.
        spark: an existing SparkSession (Spark only); otherwise the active one, or a new one
            configured with ``conf``.
        conf: Spark settings used when a session must be created.

    Privacy:
        Reads no data: the adapter only reads when the runner asks.
    """
    if engine == "pandas":
        from hdp_spark.jobs._pandas import PandasAdapter

        return PandasAdapter()
    from hdp_spark.spark.job_adapter import SparkAdapter

    return SparkAdapter(spark, conf)
