"""The kernels of the aggregators released under partition selection (``keys=select_keys``).

Their outputs hold no exact per-group count or ε histogram (both private when group
membership is): the estimate, its interval, the noisy selection weight and the privacy
mode with each row's charge (κ_i = min(ε_i, c) rounded down to the step, and δ).

Intervals: ``ci_low``/``ci_high`` hold the group's own mean (a bin's frequency) on every
data set, hence are the whole public range: with private n and ε histogram nothing public
bounds the effect of weighting rows by κ_i = min(ε_i, c), which ``bias_bound`` (the range)
states. ``noise_ci_low``/``noise_ci_high`` are the noise's (1 - β) interval of the
κ-weighted mean Σ κ_i·x_i/Σ κ_i (proof: :mod:`hdp_spark.core.selection.mechanism`,
"Intervals").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import (
    CategoryRequest,
    CellRequest,
    GroupCells,
    LevelRequest,
    NoiseContext,
    OutputField,
)
from hdp_spark.core.selection.mechanism import (
    Key,
    Selected,
    SelectedHistogram,
    SelectedMean,
    selected_histogram,
    selected_histograms,
    selected_mean,
    selected_means,
)
from hdp_spark.core.stats import GroupStats

__all__ = ["MODE", "UNIT_MODE", "SelectedHistogramKernel", "SelectedMeanKernel",
           "selected_kernel_of"]

F, S = "float", "str"
MODE = "partition_selection"
"""The ``_privacy`` value of every output row released under partition selection."""

SELECTION_FIELDS = (
    OutputField("_weight", F), OutputField("_privacy", S), OutputField("_eps_cap", F),
    OutputField("_eps_step", F), OutputField("_delta", F),
)
"""Per group: W̃ (noisy Σ κ_i, a DP value), the mode, c, γ and δ (public): each row of the
release is charged (γ·⌊min(ε_i, c)/γ⌋, δ)."""


UNIT_MODE = "privacy_unit"
"""The ``_privacy`` value of every output row released under a privacy unit."""


def _selection_values(selected: Selected) -> tuple[Any, ...]:
    sel = selected.selection
    unit = sel.keys_public or (sel.max_groups, sel.max_rows) != (1, 1)
    return (selected.weight_eps, UNIT_MODE if unit else MODE, float(sel.c),
            float(sel.gamma), float(sel.delta))


@dataclass(frozen=True, slots=True)
class SelectedMeanKernel:
    """``hdp_mean`` under partition selection: μ̂ = clip(½ + Ñ/W̃, 0, 1) in value units."""

    FIELDS = (OutputField("", F), OutputField("_ci_low", F), OutputField("_ci_high", F),
              OutputField("_noise_ci_low", F), OutputField("_noise_ci_high", F),
              OutputField("_bias_bound", F), *SELECTION_FIELDS)

    def fields(self, spec: MeanSpec) -> tuple[OutputField, ...]:
        return self.FIELDS

    def request(self, spec: MeanSpec) -> CellRequest:
        return LevelRequest(spec.eps, spec.eps_grid, (spec,))

    def finalize_selected(self, spec: MeanSpec, cells: GroupCells, noise: NoiseContext,
                          selected: Selected) -> SelectedMean:
        return selected_mean(spec, cells.stats, cells.slot, noise.key, noise.group,
                             noise.label, selected)

    def finalize_selected_batch(self, spec: MeanSpec, stats: Sequence[GroupStats], slot: int,
                                key: ReleaseKey, groups: Sequence[Key], label: str,
                                selected: Sequence[Selected]) -> list[SelectedMean]:
        """Every selected group at once: the noise of all groups drawn in one call (the
        same results as :meth:`finalize_selected` per group)."""
        return selected_means(spec, stats, slot, key, groups, label, selected)

    def values(self, spec: MeanSpec, r: SelectedMean) -> tuple[Any, ...]:
        return (r.estimate, r.ci_low, r.ci_high, r.noise_ci_low, r.noise_ci_high,
                r.bias_bound, *_selection_values(r.selected))


@dataclass(frozen=True, slots=True)
class SelectedHistogramKernel:
    """``hdp_histogram`` under partition selection: one list-of-struct column ``<name>``
    (category, frequency, ci_low, ci_high, noise_ci_low, noise_ci_high),
    p̂_j = clip(C̃_j/W̃, 0, 1), and ``<name>_bias_bound`` (1)."""

    def fields(self, spec: HistogramSpec) -> tuple[OutputField, ...]:
        label = OutputField("category", S if spec.kind == "str" else "int", nullable=False)
        items = (label, *(OutputField(n, F, nullable=False)
                          for n in ("frequency", "ci_low", "ci_high", "noise_ci_low",
                                    "noise_ci_high")))
        return (OutputField("", "list", items), OutputField("_bias_bound", F),
                *SELECTION_FIELDS)

    def request(self, spec: HistogramSpec) -> CellRequest:
        return CategoryRequest(spec)

    def finalize_selected(self, spec: HistogramSpec, cells: GroupCells, noise: NoiseContext,
                          selected: Selected) -> SelectedHistogram:
        return selected_histogram(spec, cells.stats, noise.key, noise.group, noise.label,
                                  selected)

    def finalize_selected_batch(self, spec: HistogramSpec, stats: Sequence[GroupStats],
                                slot: int, key: ReleaseKey, groups: Sequence[Key], label: str,
                                selected: Sequence[Selected]) -> list[SelectedHistogram]:
        """Every selected group at once: each group's bins drawn in order from its one
        stream, all groups together (the same results as :meth:`finalize_selected`)."""
        return selected_histograms(spec, stats, key, groups, label, selected)

    def values(self, spec: HistogramSpec, r: SelectedHistogram) -> tuple[Any, ...]:
        bins = [{"category": label, "frequency": p, "ci_low": lo, "ci_high": hi,
                 "noise_ci_low": nlo, "noise_ci_high": nhi}
                for label, p, (lo, hi), (nlo, nhi) in zip(
                    r.labels, r.frequencies, r.intervals(), r.noise_intervals, strict=True)]
        return (bins, r.bias_bound, *_selection_values(r.selected))


def selected_kernel_of(spec: object) -> Any:
    """The partition-selection kernel of ``spec`` (the kernel table's: see
    :func:`hdp_spark.core.kernel_table.selected_kernel_of`).

    Raises:
        ParameterError: ``spec``'s aggregator does not support ``select_keys``.
    """
    from hdp_spark.core.kernel_table import selected_kernel_of as lookup

    return lookup(spec)
