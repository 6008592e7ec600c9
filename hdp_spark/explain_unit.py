"""``explain`` under a privacy unit: what a release will cost and how wide its intervals
get, from the public bounds alone.

Under ``privacy_unit`` a group's row count and ε histogram are private (whether a person is
in a group, and how many rows they have there, are the person's data), so unlike the
one-row-one-person ``explain`` this one reads **no column of the table**: every figure is a
function of the specs, the public bounds (``max_groups``, ``max_rows``), the mechanism's
options (``eps_cap``, ``weight_share``) and the public key set. The mechanism is the
private-weight release of :mod:`hdp_spark.core.privacy_unit.weights`: a statistic is a
noisy weighted sum divided by a noisy total weight W̃ = W + Z_W.

What the intervals depend on is the group's weight W (in ε units): the sum, over the rows
kept, of each row's weight k·γ, i.e. over the group's persons of min(ε_p/G, c) when each
has ``max_rows`` rows there (a group of P persons with ε_p >= G·c and R rows each has
W = P·c). W is private, so ``explain`` gives the noise interval's half-width as a bound at
a public ladder of weights (``half_width_at``).

The bound (derived here; tested against released intervals in
``tests/privacy_unit/test_unit_explain.py``). With probability >= 1 - β the statistic's
noise is within h (its (1 - β/2) half-width) and W̃'s within h_W, and the released noise
interval (:func:`~hdp_spark.core.selection.mechanism.ratio_interval`) is then
[min(n_lo/w_lo, n_lo/w_hi), max(n_hi/w_lo, n_hi/w_hi)] with n = Ñ ± h, w = W̃ ± h_W. Its
width is at most (n_hi - n_lo)/w_lo + max|n|·(1/w_lo - 1/w_hi), where w_lo >= W - 2h_W,
w_hi >= W, n_hi - n_lo = 2h and max|n| <= M + 2h with M the largest |statistic| over data
sets of weight W (a mean's N = Σ k(x̄ - ½): M = W/2; a bin count: M = W). So for
W > 2h_W the half-width is at most

    (h + M·h_W/W + 2h·h_W/W) / (W - 2h_W)

(times the range ``upper - lower`` for a mean; a frequency for a histogram bin), and
cutting to the output range only narrows it. Below 2h_W the bound is half the range.
Beside the bound, ``central_half_width`` is the half-width in the central case (W̃ = W, the
statistic at 0: h/(W - h_W)), what a group of weight W typically gets.

With ``keys=select_keys(...)`` the groups themselves are private: the frame has no group
column and one row per aggregator (the figures are the same for every group), and adds the
selection's public constants: ``delta``, ``threshold`` T·γ (ε units: a group is released
iff W̃ >= T, T = K_c + m*), ``margin`` m*·γ (computed for δ/``max_groups``: a group
holding one person alone, W <= K_c, is released with probability <= δ/G) and
``release_probability_at``: per ladder weight W, P[W + Z >= T] with Z the two-sided
geometric noise of scale t_S steps (P[Z = z] ∝ q^|z|, q = e^{-1/t_S}), which is exact:
P[Z >= d] = q^d/(1 + q) for d >= 1 and 1 - q^{1-d}/(1 + q) for d <= 0 (W in whole steps,
rounded down). ``half_width_at`` holds for a released group of weight W as over public
keys (the release's interval is computed the same way). All of it is a function of the
parameters: still no column is read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from hdp_spark.aggregators.registry import aggregator_of
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernel_table import kernel_of, selected_kernel_of
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import LaplaceDraw, laplace_noise
from hdp_spark.core.pipeline import Engine, OutputField, check_names
from hdp_spark.core.privacy_unit.options import UnitOptions, check_unit
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import ParameterError

__all__ = ["UNIT_EXPLAIN_FIELDS", "UNIT_SELECT_FIELDS", "WEIGHT_LADDER", "central_half_width",
           "explain_unit", "release_probability", "select_figures", "unit_figures",
           "unit_half_width"]

WEIGHT_LADDER: tuple[float, ...] = (10.0, 100.0, 1_000.0, 10_000.0, 100_000.0)
"""The public group weights W (ε units) at which ``half_width_at`` bounds the noise
interval's half-width (W ≈ persons in the group at full weight: see the module docstring)."""

UNIT_EXPLAIN_FIELDS: tuple[OutputField, ...] = (
    OutputField("aggregator", "str", nullable=False),
    OutputField("kind", "str", nullable=False),
    OutputField("method", "str", nullable=False),
    OutputField("beta", "float", nullable=False),
    OutputField("max_groups", "int", nullable=False),
    OutputField("max_rows", "int", nullable=False),
    OutputField("eps_cap", "float", nullable=False),
    OutputField("weight_share", "float", nullable=False),
    OutputField("weight_noise_scale", "float", nullable=False),
    OutputField("weight_half_width", "float", nullable=False),
    OutputField("noise_scale", "float", nullable=False),
    OutputField("noise_half_width", "float", nullable=False),
    OutputField("bias_bound", "float", nullable=False),
    OutputField("half_width_at", "list", (
        OutputField("weight", "float"), OutputField("half_width", "float"),
        OutputField("central_half_width", "float")),
        nullable=False),
)
"""Columns of an explain frame under a privacy unit, after the group columns (documented
in ``explain``)."""

UNIT_SELECT_FIELDS: tuple[OutputField, ...] = (
    OutputField("delta", "float", nullable=False),
    OutputField("threshold", "float", nullable=False),
    OutputField("margin", "float", nullable=False),
    OutputField("release_probability_at", "list", (
        OutputField("weight", "float"), OutputField("probability", "float")),
        nullable=False),
)
"""Columns added under ``keys=select_keys(...)`` (no group columns: the groups are
private)."""

_HALF = Fraction(1, 2)  # the mean numerator's noise grid (selection.mechanism's)


def _noise(spec: MeanSpec | HistogramSpec, selection: SelectKeys, parts: int
           ) -> tuple[float, float, float, float, float]:
    """(W̃'s scale and half-width, the statistic's scale and half-width, M/W), all in ε
    units (steps × γ), exactly as the release computes its half-widths."""
    gamma = selection.gamma
    beta = float(spec.beta) / 2
    w_scale = selection.selection_scale
    w_half = LaplaceDraw(Fraction(0), w_scale, Fraction(1)).half_width(beta)
    if isinstance(spec, MeanSpec):
        scale = selection.mean_scale(parts)
        half = laplace_noise(scale, _HALF).half_width(beta)
        share = 0.5
    else:
        scale = selection.count_scale(parts)
        half = LaplaceDraw(Fraction(0), scale, Fraction(1)).half_width(beta)
        share = 1.0
    g = float(gamma)
    return float(w_scale * gamma), w_half * g, float(scale * gamma), half * g, share


def unit_half_width(noise_half_width: float, weight_half_width: float, share: float,
                    weight: float, span: float) -> float:
    """The bound of the module docstring: the noise interval's half-width at group weight
    ``weight`` (ε units), in output units (``span``: the output range's width; ``share``:
    M/W, ½ for a mean and 1 for a frequency). Half the range where ``weight`` <= 2h_W.

    Privacy:
        A function of public figures only.
    """
    h, hw = noise_half_width, weight_half_width
    if weight <= 2 * hw:
        return span / 2
    bound = (h + share * hw + 2 * h * hw / weight) / (weight - 2 * hw)
    return min(span * bound, span / 2)


def _kernel(spec: object) -> object:
    """The kernel ``agg`` runs ``spec`` with under a unit (its private-weight kernel; the
    plain one where it has none, which :func:`check_unit` then refuses by name)."""
    plain = kernel_of(spec)  # the error agg raises for anything that is not an aggregator
    try:
        return selected_kernel_of(spec)
    except ParameterError:
        return plain


def central_half_width(noise_half_width: float, weight_half_width: float, weight: float,
                       span: float) -> float:
    """The released noise interval's half-width in the central case: W̃ = W and the
    statistic at zero (a mean at the middle of its range, a frequency near 0), i.e.
    h/(W - h_W) in output units (half the range where ``weight`` <= h_W). A typical width,
    not a bound: :func:`unit_half_width` is the bound.

    Privacy:
        A function of public figures only.
    """
    if weight <= weight_half_width:
        return span / 2
    return min(span * noise_half_width / (weight - weight_half_width), span / 2)


def unit_figures(specs: Sequence[object], selection: SelectKeys) -> list[tuple[Any, ...]]:
    """Per spec of one release under a unit (``selection``: the mechanism's parameters with
    the unit's bounds), the values of :data:`UNIT_EXPLAIN_FIELDS` (the explain rows without
    their group key; ``hdp-release plan`` shows the same figures).

    Privacy:
        A function of public figures only.
    """
    parts = len(specs)
    out = []
    for spec in specs:
        assert isinstance(spec, MeanSpec | HistogramSpec)  # check_unit: the unit's kernels
        lower, upper = aggregator_of(spec).output_range(spec)
        span = upper - lower
        w_scale, w_half, scale, half, share = _noise(spec, selection, parts)
        ladder = [{"weight": w, "half_width": unit_half_width(half, w_half, share, w, span),
                   "central_half_width": central_half_width(half, w_half, w, span)}
                  for w in WEIGHT_LADDER]
        unit = span if isinstance(spec, MeanSpec) else 1.0  # a mean's numerator: data units
        out.append((spec.name, aggregator_of(spec).name, "unit", float(spec.beta),
                    selection.max_groups, selection.max_rows, float(selection.c),
                    float(selection.share), w_scale, w_half, scale * unit, half * unit, span,
                    ladder))
    return out


def release_probability(selection: SelectKeys, weight: float) -> float:
    """P[W̃ >= T] for a group of weight ``weight`` (ε units, rounded down to whole steps)
    under ``selection``'s threshold: exact for the two-sided geometric noise (module
    docstring).

    Privacy:
        A function of public figures only.
    """
    steps = math.floor(Fraction(repr(float(weight))) / selection.gamma)
    t = selection.selection_scale
    q = math.exp(-t.denominator / t.numerator)
    d = selection.threshold - steps
    if d >= 1:
        return float(q ** d / (1 + q))
    return float(1 - q ** (1 - d) / (1 + q))


def select_figures(selection: SelectKeys) -> tuple[Any, ...]:
    """The values of :data:`UNIT_SELECT_FIELDS` under ``selection`` (not over public keys).

    Privacy:
        A function of public figures only.
    """
    gamma = float(selection.gamma)
    return (float(selection.delta), selection.threshold * gamma, selection.margin * gamma,
            [{"weight": w, "probability": release_probability(selection, w)}
             for w in WEIGHT_LADDER])


def explain_unit(
    engine: Engine, specs: Sequence[object], *, by: str | Sequence[str] | None, keys: Any,
    unit: UnitOptions,
) -> tuple[tuple[str, ...], list[tuple[str, OutputField]], list[tuple[Any, ...]]]:
    """Explain a release of ``specs`` under ``unit``: (by columns, output columns, rows),
    one row per (public key, aggregator); under ``select_keys`` one row per aggregator,
    no group column, with the selection's figures (:data:`UNIT_SELECT_FIELDS`).

    Raises:
        ParameterError: as ``agg`` under the same unit (the aggregators, one ε column and
            grid, public keys or ``select_keys`` for a grouped call, ``select_keys`` with
            ``by``, no ``eps_cap``/``weight_share`` beside it).

    Privacy:
        Reads no column of the table (n and the ε histogram are private under a unit): the
        output is a function of the specs, the bounds, the options and the caller's public
        key set (or the selection's parameters), and may be published. Under
        ``select_keys`` no group is named: which groups exist is private.
    """
    specs_t = tuple(specs)
    kernels = tuple(_kernel(s) for s in specs_t)
    check_names(specs_t)
    by_t = normalize_by(by, specs_t)
    selection = check_unit(specs_t, kernels, by_t, keys, unit)
    if selection is None:  # local DP: one report per person, its figures are not public
        msg = ("`explain` under `privacy_unit` supports hdp_mean and hdp_histogram; a "
               "local-DP release reads one report per person, so its n is the number of "
               "persons: explain it without `privacy_unit` on a one-row-per-person table.")
        raise ParameterError(msg)
    per_spec = unit_figures(specs_t, selection)
    if isinstance(keys, SelectKeys):  # private groups: none is named, none is read
        extra = select_figures(selection)
        fields = (*UNIT_EXPLAIN_FIELDS, *UNIT_SELECT_FIELDS)
        return (), [(f.suffix, f) for f in fields], [(*row, *extra) for row in per_spec]
    found = engine.release_keys(keys, by_t)
    order = found if found is not None else ((),)
    rows = [(*key, *row) for key in order for row in per_spec]
    return by_t, [(f.suffix, f) for f in UNIT_EXPLAIN_FIELDS], rows
