"""Heterogeneous local differential privacy: randomizers and aggregators.

After Aliakbarpour, Fallah, Roy & Stevens, *High-Probability Bounds For Heterogeneous Local
Differential Privacy* (Algorithms 1-5).

Two halves:

* **Client side** (runs on the device, numpy only): :func:`laplace`, :func:`randomized_response`,
  :func:`duchi`, :func:`jl_frequency_report`. Each row carries its own ε_i and its report is
  ε_i-LDP on its own; exact integer-only samplers on a keyed ChaCha20 CSPRNG.
* **Server side**: :func:`ldp_mean`, :func:`ldp_mean_vector`, :func:`ldp_distribution`
  specs, run by :func:`agg` (pandas or Spark, native aggregates per ε level, driver
  finalize). They add no noise: the reports are already private.

:func:`simulate` randomizes a column of a central table, for testing pipelines and
reproducing experiments only (in production the device randomizes). See ``docs/ldp.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.aggregators import ldp_distribution, ldp_mean, ldp_mean_vector
from hdp_spark.core.ldp.common import LDP_EPS_MIN, LdpEpsilonWarning, sphere_constant
from hdp_spark.core.ldp.oracle import FrequencyOracle
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.ldp.randomizers import (
    DuchiRandomizer,
    FrequencyReports,
    JLRandomizer,
    LaplaceRandomizer,
    Randomizer,
    RRRandomizer,
    duchi,
    jl_frequency_report,
    laplace,
    randomized_response,
)

__all__ = [
    "LDP_EPS_MIN",
    "DuchiRandomizer",
    "FrequencyOracle",
    "FrequencyReports",
    "JLRandomizer",
    "LaplaceRandomizer",
    "LdpDistributionSpec",
    "LdpEpsilonWarning",
    "LdpMeanSpec",
    "LdpVectorMeanSpec",
    "RRRandomizer",
    "Randomizer",
    "ReleaseKey",
    "agg",
    "duchi",
    "jl_frequency_report",
    "laplace",
    "ldp_distribution",
    "ldp_mean",
    "ldp_mean_vector",
    "randomized_response",
    "simulate",
    "sphere_constant",
]


def _backend(df: Any) -> Any:
    from hdp_spark.front.dispatch import backend_of

    return backend_of(df)


def agg(
    df: Any,
    *specs: LdpMeanSpec | LdpVectorMeanSpec | LdpDistributionSpec,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    already_randomized: bool = False,
) -> Any:
    """Aggregate LDP reports of a pandas or Spark DataFrame (dispatches on its type).

    Same arguments as :func:`hdp_spark.pandas.ldp_agg` / :func:`hdp_spark.spark.ldp_agg`.

    Privacy:
        Adds no noise (post-processing of ε_i-LDP reports); see :func:`ldp_mean`.
    """
    return _backend(df).ldp_agg(
        df, *specs, by=by, keys=keys, already_randomized=already_randomized
    )


def simulate(
    df: Any,
    column: str,
    *,
    eps: str,
    randomizer: Randomizer,
    output: str | None = None,
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
    id: str | None = None,
) -> Any:
    """SIMULATION helper: randomize ``column`` of a central table (pandas or Spark).

    Same arguments as :func:`hdp_spark.pandas.ldp_simulate`.

    Privacy:
        Each output report is ε_i-LDP, but the table it reads holds raw values: this is
        not a local-DP deployment (the device randomizes in production).
    """
    return _backend(df).ldp_simulate(
        df, column, eps=eps, randomizer=randomizer, output=output, key=key,
        unsafe_seed=unsafe_seed, id=id,
    )
