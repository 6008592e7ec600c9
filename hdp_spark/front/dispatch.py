"""``backend_of``: the engine package of a DataFrame, for the engine-neutral entry points
(``hdp_spark.agg``, ``hdp_spark.histogram``, :mod:`hdp_spark.ldp`)."""

from __future__ import annotations

import importlib
from types import ModuleType

from hdp_spark.errors import EngineNotSupportedError

__all__ = ["backend_of"]


def backend_of(df: object) -> ModuleType:
    """:mod:`hdp_spark.pandas` for a pandas DataFrame, :mod:`hdp_spark.spark` for a Spark
    (classic or Connect) one, imported on first use.

    Raises:
        EngineNotSupportedError: ``df`` is neither (its type is named).

    Privacy:
        None: reads the type of ``df`` only.
    """
    module = type(df).__module__
    if module.startswith("pandas"):
        return importlib.import_module("hdp_spark.pandas")
    if module.startswith("pyspark"):
        return importlib.import_module("hdp_spark.spark")
    msg = f"`df` must be a pandas or Spark DataFrame, got {type(df).__name__}."
    raise EngineNotSupportedError(msg)
