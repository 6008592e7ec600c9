"""Server-side aggregators over local-DP reports (engine-agnostic constructors).

Pass the returned specs to :func:`hdp_spark.pandas.ldp_agg` or :func:`hdp_spark.spark.ldp_agg`
(or :func:`hdp_spark.ldp.agg`, which dispatches on the table's type).
"""

from __future__ import annotations

from typing import Literal

from hdp_spark.core.ldp.common import LdpWeights
from hdp_spark.core.ldp.oracle import FrequencyOracle
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec

__all__ = ["ldp_distribution", "ldp_mean", "ldp_mean_vector"]


def ldp_mean(
    report: str,
    *,
    eps: str,
    mechanism: Literal["laplace", "rr"],
    lower: float = -1.0,
    upper: float = 1.0,
    beta: float = 0.05,
    weights: LdpWeights = "paper",
    fallback: bool = True,
    alias: str | None = None,
) -> LdpMeanSpec:
    """Heterogeneous-LDP mean of scalar reports (Aliakbarpour et al., Alg. 1 / Alg. 2).

    Args:
        report: column of reports: real numbers in data units (``"laplace"``, as returned
            by :func:`hdp_spark.ldp.laplace`) or ±1 (``"rr"``).
        eps: column with the ε_i each report was made with (finite, 0 or >= 2**-20; rows
            with ε = 0 take no part). The exact value is used: never round ε after
            randomizing (the debiasing depends on it). With continuous ε, round it down
            onto a grid on the device *before* randomizing, so that the level table stays
            small.
        mechanism: ``"laplace"`` or ``"rr"``.
        lower: public lower bound the randomizer used (RR: the value reported as -1).
        upper: public upper bound (RR: the value reported as +1).
        beta: the interval holds with probability >= 1 - β.
        weights: ``"paper"`` (Laplace ε²/(1+ε²), RR tanh²(ε/2)), ``"uniform"`` (the paper's
            baseline) or ``"inverse_variance"`` (Laplace ε²/(ε²+8), RR tanh²(ε/2)).
        fallback: release the midpoint when the radius reaches (upper - lower)/2 (the
            trivial estimator; the decision depends on ε only).
        alias: output column prefix (default ``"<report>_mean"``).

    Output columns (prefix = alias):
        ``<p>``: released estimate: the raw estimate clamped to [lower, upper], or the
        midpoint on fallback. ``<p>_raw``: the unbiased weighted estimate (unclamped).
        ``<p>_ci_low``/``<p>_ci_high``: [raw ± radius] ∩ [lower, upper], a (1-β) interval
        for the population mean. ``<p>_radius``: the half-width (explicit-constant bound of
        ours, from the concentration steps of the paper's Theorems 2.1-2.2: Hoeffding +
        sub-exponential for Laplace, Hoeffding for RR).
        ``<p>_mechanism``, ``<p>_weights``. ``<p>_n``: rows used. ``<p>_skipped``: rows
        with ε > 0 whose report was null/NaN (skipped). ``<p>_fallback``.
        ``<p>_eps_levels``: per ε level {eps, n, weight}.

    Privacy:
        The aggregator adds no noise: the reports are already ε_i-LDP (randomized on the
        devices), and the estimate is post-processing. Protected unit: each row's value,
        by its own randomizer. ε_i enters only through the weights and debiasing constants.
        Public: the ε column (hence the ε histogram and n), the bounds, β, and every
        report (the server sees them all in the local model).
    """
    return LdpMeanSpec(report, eps, mechanism, lower, upper, beta, weights, fallback, alias)


def ldp_mean_vector(
    report: str,
    *,
    eps: str,
    d: int,
    radius: float = 1.0,
    beta: float = 0.05,
    weights: LdpWeights = "paper",
    fallback: bool = True,
    alias: str | None = None,
) -> LdpVectorMeanSpec:
    """Heterogeneous-LDP mean of d-dimensional Duchi reports (Aliakbarpour et al., Alg. 3).

    Args:
        report: array column of reports (length d), as returned by
            :func:`hdp_spark.ldp.duchi`. Rows with a null report, a wrong length or a
            NaN coordinate are skipped (counted in ``_skipped``).
        eps: column with each row's ε_i (finite, 0 or >= 2**-20).
        d: dimension.
        radius: public radius r of the ball the data was projected onto.
        beta: the confidence ball holds with probability >= 1 - β.
        weights: ``"paper"`` (ε²), ``"uniform"`` or ``"inverse_variance"`` (tanh²(ε/2),
            recommended when some ε > 1).
        fallback: release the zero vector when the ball's radius reaches r.
        alias: output column prefix (default ``"<report>_mean"``).

    Output columns (prefix = alias):
        ``<p>``: released vector (raw estimate projected onto the ball, or 0 on fallback).
        ``<p>_raw``: unbiased raw estimate. ``<p>_radius``: t with ‖raw - θ‖₂ <= t w.p.
        >= 1 - β (Pinelis). ``<p>_ci_low``/``<p>_ci_high``: per coordinate
        [raw_k ± t] ∩ [-r, r] (simultaneous). ``<p>_mechanism`` (``"duchi"``),
        ``<p>_weights``, ``<p>_n``, ``<p>_skipped``, ``<p>_fallback``, ``<p>_eps_levels``.

    Privacy:
        Adds no noise: each report is already ε_i-LDP for the row's whole vector; the
        estimate is post-processing. Public: ε column, n, d, r, β and the reports.
    """
    return LdpVectorMeanSpec(report, eps, d, radius, beta, weights, fallback, alias)


def ldp_distribution(
    index: str,
    sign: str,
    *,
    eps: str,
    oracle: FrequencyOracle,
    beta: float = 0.05,
    weights: LdpWeights = "paper",
    fallback: bool = True,
    alias: str | None = None,
) -> LdpDistributionSpec:
    """Heterogeneous-LDP distribution over [0, d) from frequency-oracle reports (Alg. 5).

    Args:
        index: integer column with each report's j in [0, m); other values are skipped.
        sign: column with each report's b (±1; other values count by their sign).
        eps: column with each row's ε_i (finite, 0 or >= 2**-20).
        oracle: the :class:`~hdp_spark.ldp.FrequencyOracle` the devices used.
        beta: the ℓ∞ radius holds with probability >= 1 - β (over data, devices and Φ).
        weights: ``"paper"``/``"inverse_variance"`` (tanh²(ε/2)) or ``"uniform"``.
        fallback: release the uniform distribution when the radius reaches 1.
        alias: output column prefix (default ``"<index>_pmf"``).

    Output columns (prefix = alias):
        ``<p>``: released pmf estimate (raw clipped to [0, 1] per category; uniform on
        fallback). ``<p>_raw``: raw estimate (unbiased over Φ; may be negative and need
        not sum to 1). ``<p>_radius``: ℓ∞ radius (JL: randomization + JL terms; Hadamard:
        randomization only). ``<p>_ci_low``/``<p>_ci_high``: [raw ± radius] ∩ [0, 1],
        simultaneous over categories. ``<p>_m``, ``<p>_projection``, ``<p>_weights``,
        ``<p>_n``, ``<p>_skipped``, ``<p>_fallback``, ``<p>_eps_levels``.
        Rows whose value was ⊥ (null, unknown) count in n, so frequencies are relative to
        all rows.

    Privacy:
        Adds no noise: each (j, b) report is already ε_i-LDP; the estimate is
        post-processing. Public: ε column, n, d, m, Φ (its seed) and the reports.
    """
    return LdpDistributionSpec(index, sign, eps, oracle, beta, weights, fallback, alias)
