"""Public constructor of the heterogeneous-DP histogram (engine-agnostic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from hdp_spark.core.histogram.spec import HistogramMethod, HistogramSpec
from hdp_spark.core.levels import EpsGrid

__all__ = ["hdp_histogram"]


def hdp_histogram(
    column: str,
    *,
    eps: str,
    categories: Sequence[str] | Sequence[int],
    method: HistogramMethod = "hpf-a",
    beta: float = 0.05,
    other: str | int | None = "other",
    eps_grid: EpsGrid | None = None,
    alias: str | None = None,
) -> HistogramSpec:
    """Heterogeneous-DP normalized histogram of ``column`` over a public domain (HPF of
    Chaudhuri & Courtade).

    Pass the result to ``hdp_spark.pandas._histogram`` or ``hdp_spark.spark._histogram``
    (or :func:`hdp_spark.histogram`, which dispatches on the table's type).

    Args:
        column: the category column (strings for string labels; integers or floats for
            integer labels, compared numerically: 2.0 matches 2, 2.5 matches nothing).
        eps: numeric column with each row's ε_i (ε_i >= 0; +inf marks a public row).
        categories: the public domain: all strings or all integers (|label| <= 2**53), no
            duplicates, at most 100,000. Never derive it from the data.
        method: how rows are weighted (weights depend on the ε values only):

            * ``"hpf-a"`` (default) -- the agnostic heuristic, w_i ∝ 1 - exp(-ε_i);
              recommended by the paper and best in its experiments.
            * ``"hpf-cp"`` / ``"hpf-ce"`` -- optimal weights for correlated data
              (ε and values may be related), PAC (L = ln(k/β)) or MSE (L = ln k) objective,
              exact solver S1.
            * ``"hpf-wp"`` / ``"hpf-we"`` -- weakly-correlated data (values independent of
              ε up to a permutation): both branches S1(L) and S2(c = L), keeping the smaller
              r_WC.
            * ``"hpf-ct"`` / ``"hpf-wt"`` -- the paper's "Turbo" variants of
              ``hpf-cp`` / ``hpf-wp`` (Algorithm 3, App. M): ||w - 1/n||₁² relaxed to
              n||w - 1/n||₂², so one closed-form solver S2 (c = L²/n; WT also tries
              c = L and keeps the smaller objective), L = ln(k/β).
            * ``"k-rappor-c"`` / ``"k-rappor-w"`` -- the paper's local-DP baseline
              (k-RAPPOR: every bit of each row's one-hot report flipped with probability
              1/(1 + e^(ε_i/2)), simulated exactly from the cell counts), combined with
              correlated / weakly-correlated weights. Its ``noise_scale`` is the standard
              deviation of each bin's noise and its intervals are Hoeffding's.
            * ``"uniform"`` -- everyone at ε_min (what a homogeneous library does).
            * ``"proportional"`` -- w_i ∝ ε_i.
            * ``"auto"`` -- per group, the central method (every one above except
              ``k-rappor-*``; ``hpf-ce``/``hpf-we`` only when k >= 2) with the least
              predicted per-bin error: the worst case over all data of the MSE against the
              bin's frequency, ``bias_bound``² + 2·noise_scale², from the group's ε
              histogram, k and beta only (ties: the order above). ``method`` says which
              was chosen; ``explain`` shows every candidate's prediction.

            k is the number of released bins (the categories plus an appended ``other``).
        beta: each bin's interval holds the group's own frequency of the bin with
            probability >= 1 - beta (on every data set); also β of
            ``hpf-cp``, ``hpf-wp``, ``hpf-ct`` and ``hpf-wt``.
        other: the public rule for null and out-of-domain values, which never raise and
            are never dropped. A label not in ``categories`` (default ``"other"``) adds one
            released bin, noised like every bin; a label in ``categories`` sends those rows
            to that bin; ``None`` keeps them in n and in the weights but releases no bin for
            them (the frequencies then sum to the in-domain share). Must have the type of
            the categories (for integer labels pass e.g. ``other=-1`` or ``None``).
        eps_grid: round ε down onto this public geometric grid (for continuous ε).
        alias: name of the histogram, used to separate its noise from other releases'
            (default ``"<column>_histogram"``).

    Returns:
        A :class:`~hdp_spark.core.histogram.HistogramSpec`. A release outputs a long table,
        one row per (group, released bin), with the group columns then:
        ``category`` (label), ``frequency`` (noisy weighted share of the group's rows,
        clipped to [0, 1]; with ``project=True`` the Euclidean projection of the unclipped
        vector onto the simplex), ``noise_scale`` (Laplace scale 2·max w/ε, times
        1 + 2**-20 and rounded up to whole grid steps for the exact sampler; 0 when no
        private row carries weight), ``ci_low``
        / ``ci_high`` (per-bin (1 - beta) interval of the bin's true frequency: the
        unprojected estimate ± (noise half-width + ``bias_bound``), within [0, 1]; [0, 1]
        for a fallback), ``bias_bound`` (||w - 1/n||₁/2 >= every bin's reweighting error
        |Σ w_i 1{x_i = j} - frequency| on any data, included in the interval; a function
        of ε only, proof in :mod:`hdp_spark.core.reweighting`), ``n`` (rows of the group, in or out
        of the domain), ``method``, ``tau`` (clip level of capped rules; +inf when nobody
        is clipped, NaN when the rule has none), ``fallback`` (True when no row may carry
        weight, e.g. all ε = 0 or an empty group: every bin is then 1/2) and
        ``eps_levels`` (per ε level: ``eps``, ``n``, per-row ``weight`` and
        ``eps_effective`` = weight/η <= eps). The counts view (``counts=True``) adds
        ``count``, ``count_ci_low`` and ``count_ci_high`` = the frequency columns × n.

    Raises:
        ParameterError: a parameter breaks its rule.

    Privacy:
        Protected unit: one row (replace-one neighbours; n is public). Replacing one row's
        value moves its weight w_i between at most two bins (ℓ1 sensitivity 2·w_i), and
        every released bin gets Laplace noise of scale 2·η, η = max{w_l/ε_l}, so row i's
        privacy loss is at most ``eps_effective`` of its level, which is <= ε_i (k-RAPPOR:
        each row's randomized report is ε_i-LDP, two bits change with ratio e^(ε_i/2)
        each, and the output is a function of the reports). ε_i enters
        only through the weights and the noise scale, functions of the ε histogram, which
        is public in this model (it is in the output). ``"auto"``: the choice is a
        function of the ε histogram, k and beta (public), so each row's guarantee is the
        chosen method's (every candidate is ε_i-DP under the same replace-one model; the
        local-DP baselines are never chosen). Public inputs: ``categories``,
        ``other``, the grid, and in a grouped release the key set and each row's group
        (per-group n and ε histograms are published). Every bin of the domain is noised,
        empty ones included, so the output reveals nothing about which categories occur.
        Null or out-of-domain values follow the ``other`` rule and never raise. Invalid ε
        (null, NaN, negative, -inf) is rejected with a count of rows: ε is public, so the
        error leaks no data.
    """
    return HistogramSpec(
        column=column,
        eps=eps,
        categories=cast(Any, categories),
        method=method,
        beta=beta,
        other=other,
        eps_grid=eps_grid,
        alias=alias,
    )
