"""Public constructor of the heterogeneous-DP mean (engine-agnostic; both backends accept
it)."""

from __future__ import annotations

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import MeanMethod, MeanSpec

__all__ = ["hdp_mean"]


def hdp_mean(
    column: str,
    *,
    eps: str,
    lower: float,
    upper: float,
    method: MeanMethod = "adpm",
    beta: float = 0.05,
    clip_output: bool | None = None,
    fill: float | None = None,
    eps_grid: EpsGrid | None = None,
    alias: str | None = None,
) -> MeanSpec:
    """Heterogeneous-DP mean of ``column``, where each row demands its own ε_i.

    Pass the result to ``hdp_spark.pandas.agg`` or ``hdp_spark.spark.agg``.

    Args:
        column: numeric value column.
        eps: numeric column with each row's ε_i (ε_i >= 0; +inf marks a public row).
            Finite ε above 1e100 is treated as 1e100 and positive ε below 1e-100 as 0
            (weight 0): both round down, so both only strengthen a row's guarantee.
        lower: public lower bound of the values; smaller values are clamped.
        upper: public upper bound; larger values are clamped.
        method: how rows are weighted (weights depend on the ε values only):

            * ``"adpm"`` (default) -- the minimax-optimal population mean of Chaudhuri & Courtade:
              w_i ∝ min(ε_i, τ*), τ* from the exact grouped solver (c = 8); falls back
              to the midpoint when its worst-case MSE exceeds that of the midpoint.
            * ``"hpm-a"`` -- Chaudhuri & Courtade's agnostic heuristic, w_i ∝ 1 - exp(-ε_i).
            * ``"hpm-cp"``, ``"hpm-ce"``, ``"hpm-wp"``, ``"hpm-we"`` -- Chaudhuri & Courtade's
              optimized empirical-mean weights (correlated/weakly-correlated data, PAC or
              MSE objective), exact solvers S1/S2.
            * ``"uniform"`` -- everyone at ε_min (what a homogeneous library does).
            * ``"proportional"`` -- w_i ∝ ε_i.
            * ``"drop"`` -- drop the most private ε levels and average the rest, with the
              cut chosen from ε by Chaudhuri & Courtade's correlated objective.
            * ``"ldp-cp"``, ``"ldp-ce"``, ``"ldp-wp"``, ``"ldp-we"`` -- the paper's local-DP
              baseline (Chaudhuri & Courtade, App. B.1): the law of
              Σ_i w_i (x_i + Laplace((upper - lower)/ε_i)) with the weights of the
              matching ``hpm-*`` method, run centrally (to compare with local DP on your
              data). ``noise_scale`` is then the noise's standard deviation.
            * ``"auto"`` -- per group, the central method (every one above except ``ldp-*``)
              with the least predicted error: the worst case, over all data in
              [lower, upper], of the MSE against the group's mean,
              ((upper - lower)·||w - 1/n||₁/2)² + 2·noise_scale², computed from the group's
              ε histogram only (ties: the order above). ``<alias>_method`` says which was
              chosen; ``explain`` shows every candidate's prediction (docs/mean.md).
        beta: the reported interval holds the group's mean with probability >= 1 - beta
            (on every data set in [lower, upper]); also β
            of the PAC methods (``hpm-cp``, ``hpm-wp``, ``ldp-cp``, ``ldp-wp``, ``drop``).
        clip_output: clip the estimate to [lower, upper]; default False for ``adpm``
            (unbiased, as in the paper) and True otherwise. Clipping is post-processing.
        fill: public value imputed for null/NaN values (default: the midpoint).
        eps_grid: round ε down onto this public geometric grid (for continuous ε).
        alias: output column prefix (default ``"<column>_mean"``).

    Returns:
        A :class:`~hdp_spark.core.mean.spec.MeanSpec`. A release outputs, per group,
        the columns ``<alias>`` (the estimate), ``<alias>_noise_scale`` (Laplace scale in
        value units, 0 when no private row carries weight), ``<alias>_ci_low`` /
        ``<alias>_ci_high`` (estimate ± (the (1 - beta) noise half-width +
        ``bias_bound``), cut to [lower, upper] but always containing the estimate -- an
        unclipped ``adpm`` estimate may lie outside the bounds; the whole range for a
        fallback: it holds the group's own mean of the clamped values with probability
        >= 1 - beta on every data set), ``<alias>_bias_bound`` ((upper - lower)·
        ||w - 1/n||₁/2, the worst-case effect of weighting rows by their ε: |Σ w_i x_i -
        mean| on any data, 0 for uniform weights, (upper - lower)/2 for a fallback; a
        function of ε only, proof in :mod:`hdp_spark.core.reweighting`), ``<alias>_n`` (rows),
        ``<alias>_tau`` (clip level τ of capped rules; +inf when nobody is clipped, NaN
        when the rule has none), ``<alias>_method``, ``<alias>_fallback`` (True when the
        output is the data-independent midpoint) and ``<alias>_eps_levels`` (per ε level:
        ``eps``, ``n``, per-row ``weight`` and ``eps_effective`` = weight / η <= eps, the
        privacy each row of the level actually receives; rows above τ get τ for free).

    Raises:
        ParameterError: a parameter breaks its rule.

    Privacy:
        Protected unit: one row (replace-one neighbours; the number of rows n is public).
        Row i's privacy loss is at most ``eps_effective`` of its level, which is <= ε_i
        (``ldp-*``: that of the matching ``hpm-*`` release, to which the rest of the
        local-DP noise is added independently of the data: post-processing).
        ε_i enters only through the weights and the noise scale, both functions of the
        ε histogram, which is public in this model (it is visible in the output). Public
        inputs: ``lower``, ``upper``, ``fill``, the grid and, in a grouped release, the
        key set and each row's group (per-group n and ε histograms are published).
        ``"auto"``: the choice is a function of the group's ε histogram, the bounds and
        beta only (public facts), so each row's guarantee is the chosen method's, every
        candidate being ε_i-DP for row i under the same replace-one model; the local-DP
        baselines are never chosen.
        Values outside [lower, upper] are clamped; null/NaN values are imputed with
        ``fill``; neither raises. Invalid ε (null, NaN, negative, -inf) is rejected with a
        count of rows: ε is public, so the error leaks no data.
    """
    return MeanSpec(
        column=column,
        eps=eps,
        lower=lower,
        upper=upper,
        method=method,
        beta=beta,
        clip_output=clip_output,
        fill=fill,
        eps_grid=eps_grid,
        alias=alias,
    )
