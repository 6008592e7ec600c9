"""The engine-neutral entry points: ``hdp_spark.agg`` and ``hdp_spark.histogram`` run the
backend of the DataFrame's type (:func:`backend_of`, also used by :mod:`hdp_spark.ldp`)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from hdp_spark.errors import EngineNotSupportedError

__all__ = ["agg", "backend_of", "histogram"]


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


def agg(df: Any, *specs: Any, **kwargs: Any) -> Any:
    """Release aggregates of a pandas or Spark DataFrame (dispatches on its type).

    Same arguments as :func:`hdp_spark.pandas.agg` / :func:`hdp_spark.spark.agg` (one
    function, :func:`hdp_spark.front.release.agg`).

    Privacy:
        See :func:`hdp_spark.front.release.agg`: one release, one fresh key.
    """
    return backend_of(df).agg(df, *specs, **kwargs)


def histogram(df: Any, spec: Any, **kwargs: Any) -> Any:
    """Release a histogram of a pandas or Spark DataFrame (dispatches on its type).

    Same arguments as :func:`hdp_spark.front.histogram.histogram`.

    Privacy:
        See :func:`hdp_spark.hdp_histogram`.
    """
    return backend_of(df).histogram(df, spec, **kwargs)
