"""The one front: every public entry point written once, as ``f(engine, ...)``.

Each function here takes a core :class:`~hdp_spark.core.pipeline.Engine` and runs the one
release pipeline (:func:`hdp_spark.core.kernels.release_specs`) or the partial-DP
finalizers on it; the backends (:mod:`hdp_spark.pandas`, :mod:`hdp_spark.spark`) expose
them as ``f(df, ...)`` with :func:`~hdp_spark.front.bind.bind` and their engine class, so
names, keywords, docstrings and outputs are the same on both engines by construction.

Modules: :mod:`~hdp_spark.front.release` (``agg``, ``release``, ``explain``),
:mod:`~hdp_spark.front.histogram`, :mod:`~hdp_spark.front.user_mean`,
:mod:`~hdp_spark.front.partial` (heavy hitters, marginals, MWEM, attribute histograms),
:mod:`~hdp_spark.front.ldp` (aggregation of local-DP reports).
"""

from __future__ import annotations

from typing import Any

__all__ = ["spec_of"]


def spec_of(obj: object) -> Any:
    """The spec an aggregator argument stands for: a Spark Column aggregator hands out its
    spec (``__hdp_spec__``, which refuses Column expressions); anything else is itself.

    Privacy:
        None: unwraps a public spec.
    """
    unwrap = getattr(type(obj), "__hdp_spec__", None)  # on the type: a Column answers any name
    return obj if unwrap is None else unwrap(obj)
