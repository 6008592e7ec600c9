"""One kernel per aggregator: its cells, its finalize and its one output description.

Privacy-relevant module: each finalize calls the aggregator's own finalize function with
the noise context the pipeline built (release key, group key, the spec's unique name), so
the numbers are exactly those of the per-aggregator functions (they are aliases over the
same kernels).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.histogram.auto import resolve_histograms
from hdp_spark.core.histogram.batch import finalize_histograms
from hdp_spark.core.histogram.finalize import HistogramResult
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernel_table import kernel_of, register_kernel
from hdp_spark.core.ldp.release import (
    LdpResult,
    _row_values,
    check_randomized,
    finalize_one,
    output_fields,
)
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.core.ldp.stats import empty_stats
from hdp_spark.core.level_table import LevelGroups
from hdp_spark.core.mean.batch import MeanCells, finalize_mean_columns
from hdp_spark.core.mean.finalize import MeanResult, finalize_mean
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.output_columns import Column, ColumnResults, ListColumn
from hdp_spark.core.partial.heavy_hitters import (
    COUNT_COLUMNS,
    HeavyHittersResult,
    run_heavy_hitters,
)
from hdp_spark.core.partial.histogram_kernel import (
    ATTRIBUTE_HISTOGRAM_FIELDS,
    AttributeHistogramKernel,
)
from hdp_spark.core.partial.mwem import (
    MWEM_COLUMNS,
    MwemResult,
    MwemSpec,
    mwem_requests,
    run_mwem,
)
from hdp_spark.core.partial.projection import (
    MARGINAL_COLUMNS,
    MarginalsResult,
    MarginalsSpec,
    finalize_marginals,
    marginal_requests,
)
from hdp_spark.core.partial.spec import AttributeHistogramSpec, HeavyHittersSpec
from hdp_spark.core.pipeline import (
    LEVEL_ITEMS,
    CategoryRequest,
    CellRequest,
    Engine,
    GroupCells,
    Kernel,
    LdpRequest,
    LevelRequest,
    NoiseContext,
    OutputField,
    Release,
    run_release,
)
from hdp_spark.core.privacy_unit.ldp import is_ldp_release
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.release import plan_levels
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.selection.kernels import (
    SelectedHistogramKernel,
    SelectedMeanKernel,
    selected_kernel_of,
)
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.stats import GroupStats
from hdp_spark.core.user_mean import (
    USER_MEAN_FIELDS,
    UserMeanResult,
    UserMeanSpec,
    run_user_mean,
)
from hdp_spark.errors import ParameterError

__all__ = [
    "ATTRIBUTE_HISTOGRAM_FIELDS",
    "HeavyHittersKernel",
    "HistogramKernel",
    "LdpKernel",
    "MarginalsKernel",
    "MeanKernel",
    "MwemKernel",
    "ReleaseResult",
    "UserMeanKernel",
    "empty_cells",
    "histogram_bin_items",
    "kernel_of",
    "mean_release",
    "release_specs",
]

F, INT, S, B = "float", "int", "str", "bool"


@dataclass(frozen=True, slots=True)
class MeanKernel:
    """The heterogeneous-DP mean (``hdp_mean``)."""

    FIELDS = (
        OutputField("", F), OutputField("_noise_scale", F), OutputField("_ci_low", F),
        OutputField("_ci_high", F), OutputField("_bias_bound", F), OutputField("_n", INT),
        OutputField("_tau", F), OutputField("_method", S), OutputField("_fallback", B),
        OutputField("_eps_levels", "list", LEVEL_ITEMS),
    )

    def fields(self, spec: MeanSpec) -> tuple[OutputField, ...]:
        return self.FIELDS

    def request(self, spec: MeanSpec) -> CellRequest:
        return LevelRequest(spec.eps, spec.eps_grid, (spec,))

    def finalize(self, spec: MeanSpec, cells: GroupCells, noise: NoiseContext) -> MeanResult:
        return finalize_mean(spec, cells.stats, cells.slot, noise.key, noise.group, noise.label)

    def finalize_batch(self, spec: MeanSpec, stats: Sequence[GroupStats], slot: int,
                       key: ReleaseKey, groups: tuple[tuple[object, ...], ...], label: str
                       ) -> Sequence[MeanResult]:
        """:meth:`finalize` of every group, held as columns (records built on first use;
        the output frame is laid out from the columns)."""
        cells = (MeanCells(stats.offsets, stats.levels, stats.counts, stats.totals(slot))
                 if isinstance(stats, LevelGroups) else MeanCells.from_stats(stats, slot))
        return ColumnResults(finalize_mean_columns(spec, cells, slot, key, groups, label))

    def values(self, spec: MeanSpec, r: MeanResult) -> tuple[Any, ...]:
        return (
            r.estimate, r.noise_scale, r.ci_low, r.ci_high, r.bias_bound, r.n, r.tau, r.method,
            r.fallback,
            [{"eps": lv.eps, "n": lv.n, "weight": lv.weight, "eps_effective": lv.eps_effective}
             for lv in r.levels],
        )

    def value_columns(self, spec: MeanSpec, results: Sequence[MeanResult]) -> list[Column]:
        """:meth:`values` of every result, as columns (the ε levels as a ``ListColumn``).

        Privacy:
            None: the released values, laid out by column.
        """
        if isinstance(results, ColumnResults):  # the batch's own columns, no records
            return results.batch.value_columns()
        levels = [lv for r in results for lv in r.levels]
        offsets = [0, *itertools.accumulate(len(r.levels) for r in results)]
        out: list[Column] = [list(map(operator.attrgetter(name), results)) for name in _MEAN_VALUES]
        out.append(ListColumn(offsets, {name: list(map(operator.attrgetter(name), levels))
                                        for name in ("eps", "n", "weight", "eps_effective")}))
        return out


def histogram_bin_items(spec: HistogramSpec, counts: bool = True) -> tuple[OutputField, ...]:
    """Struct fields of one released bin (``counts``: the counts view too)."""
    label = OutputField("category", S if spec.kind == "str" else INT, nullable=False)
    head = (label, *(OutputField(n, F, nullable=False) for n in ("frequency", "ci_low",
                                                                  "ci_high")))
    tail = tuple(OutputField(n, F, nullable=False)
                 for n in ("count", "count_ci_low", "count_ci_high"))
    return head + tail if counts else head


_MEAN_VALUES = ("estimate", "noise_scale", "ci_low", "ci_high", "bias_bound", "n", "tau",
                "method", "fallback")
"""The mean's scalar output fields, in the order of :meth:`MeanKernel.values`."""


@dataclass(frozen=True, slots=True)
class HistogramKernel:
    """The heterogeneous-DP histogram (``hdp_histogram``).

    Inside ``agg`` a group's bins are one list-of-struct column ``<name>`` (category,
    frequency, ci_low, ci_high, count, count_ci_low, count_ci_high; frequencies projected
    onto the simplex when ``project``), plus the scalar fields below.
    """

    project: bool = False

    def fields(self, spec: HistogramSpec) -> tuple[OutputField, ...]:
        return (
            OutputField("", "list", histogram_bin_items(spec)),
            OutputField("_noise_scale", F), OutputField("_bias_bound", F),
            OutputField("_n", INT), OutputField("_method", S), OutputField("_tau", F),
            OutputField("_fallback", B), OutputField("_eps_levels", "list", LEVEL_ITEMS),
        )

    def request(self, spec: HistogramSpec) -> CellRequest:
        return CategoryRequest(spec)

    def finalize(
        self, spec: HistogramSpec, cells: GroupCells, noise: NoiseContext
    ) -> HistogramResult:
        return self.finalize_batch(spec, [cells.stats], cells.slot, noise.key, (noise.group,),
                                   noise.label)[0]

    def finalize_batch(self, spec: HistogramSpec, stats: Sequence[GroupStats], slot: int,
                       key: ReleaseKey, groups: tuple[tuple[object, ...], ...], label: str
                       ) -> list[HistogramResult]:
        """:meth:`finalize` of every group; ``method="auto"`` chooses for all groups in one
        vectorized prediction (the same choices as per group)."""
        specs = resolve_histograms(spec, stats)
        return finalize_histograms(specs, stats, key, groups)

    def values(self, spec: HistogramSpec, r: HistogramResult) -> tuple[Any, ...]:
        freqs = r.frequencies(self.project)
        bins = [
            {"category": label, "frequency": f, "ci_low": lo, "ci_high": hi,
             "count": f * r.n, "count_ci_low": lo * r.n, "count_ci_high": hi * r.n}
            for label, f, (lo, hi) in zip(r.labels, freqs, r.intervals(), strict=True)
        ]
        levels = [{"eps": lv.eps, "n": lv.n, "weight": lv.weight,
                   "eps_effective": lv.eps_effective} for lv in r.levels]
        return (bins, r.noise_scale, r.bias_bound, r.n, r.method, r.tau, r.fallback, levels)


_USER_CLASS_ITEMS = (
    OutputField("step", S), OutputField("k", INT), OutputField("eps", F),
    OutputField("users", INT), OutputField("weight", F), OutputField("eps_effective", F),
)


@dataclass(frozen=True, slots=True)
class UserMeanKernel:
    """The user-level mean (``hdp_user_mean``): interactive, through ``engine.users``."""

    FIELDS = tuple(
        OutputField(suffix, "list", _USER_CLASS_ITEMS) if kind == "classes"
        else OutputField(suffix, kind)
        for suffix, kind in USER_MEAN_FIELDS
    )
    """The output fields, from the one list of the result's columns (``USER_MEAN_FIELDS``)."""
    global_only = False

    def fields(self, spec: UserMeanSpec) -> tuple[OutputField, ...]:
        return self.FIELDS

    def run(self, spec: UserMeanSpec, engine: Engine, by: tuple[str, ...],
            keys: tuple[tuple[object, ...], ...], key: ReleaseKey
            ) -> dict[tuple[object, ...], Any]:
        with engine.users(spec, by, keys) as backend:
            return dict(run_user_mean(spec, backend, by, keys, key).results)

    def values(self, spec: UserMeanSpec, r: UserMeanResult) -> tuple[Any, ...]:
        return tuple(r.as_row("").values())


@dataclass(frozen=True, slots=True)
class HeavyHittersKernel:
    """Partial-DP heavy hitters (``hdp_heavy_hitters``): global only, through
    ``engine.tree_counter``. Inside ``agg``: one list-of-struct column ``<name>`` (the
    attribute values, then noisy_count, count_ci_low, count_ci_high)."""

    global_only = True

    def items(self, spec: HeavyHittersSpec) -> tuple[OutputField, ...]:
        """The released table's columns: attributes, then the counts."""
        return (*(OutputField(d.column, d.output_type + "?") for d in spec.domains),
                *(OutputField(c, "int?") for c in COUNT_COLUMNS))

    def fields(self, spec: HeavyHittersSpec) -> tuple[OutputField, ...]:
        return (OutputField("", "list", self.items(spec)),)

    def run(self, spec: HeavyHittersSpec, engine: Engine, by: tuple[str, ...],
            keys: tuple[tuple[object, ...], ...], key: ReleaseKey
            ) -> dict[tuple[object, ...], Any]:
        with engine.tree_counter(spec) as counter:
            return {(): run_heavy_hitters(spec, counter, key)}

    def table_rows(self, spec: HeavyHittersSpec, r: HeavyHittersResult) -> list[tuple[Any, ...]]:
        """The released keys as tuples in the order of :meth:`items`."""
        def convert(value: object, kind: str) -> object:
            return float(value) if value is not None and kind == "float" else value  # type: ignore[arg-type]

        return [
            tuple(convert(row[d.column], d.output_type) for d in spec.domains)
            + tuple(row[c] for c in COUNT_COLUMNS)
            for row in r.rows
        ]

    def values(self, spec: HeavyHittersSpec, r: HeavyHittersResult) -> tuple[Any, ...]:
        names = [f.suffix for f in self.items(spec)]
        return ([dict(zip(names, t, strict=True)) for t in self.table_rows(spec, r)],)


@dataclass(frozen=True, slots=True)
class MarginalsKernel:
    """Partial-DP marginals by the projection mechanism (``hdp_marginals``): global only,
    one aggregation pass through ``engine.tree_counter``. Inside ``agg``: one
    list-of-struct column ``<name>`` (marginal, the attribute values, noisy_count,
    projected_count, projected_fraction)."""

    global_only = True

    def items(self, spec: MarginalsSpec) -> tuple[OutputField, ...]:
        """The released table's columns."""
        return (OutputField("marginal", S),
                *(OutputField(d.column, d.output_type + "?") for d in spec.domains),
                OutputField(MARGINAL_COLUMNS[0], INT),
                *(OutputField(c, F) for c in MARGINAL_COLUMNS[1:]))

    def fields(self, spec: MarginalsSpec) -> tuple[OutputField, ...]:
        return (OutputField("", "list", self.items(spec)),)

    def run(self, spec: MarginalsSpec, engine: Engine, by: tuple[str, ...],
            keys: tuple[tuple[object, ...], ...], key: ReleaseKey
            ) -> dict[tuple[object, ...], Any]:
        with engine.tree_counter(spec) as counter:
            counts = counter.count_level(marginal_requests(spec), -1)  # every present cell
        tables = [counts.get(i, {}) for i in range(len(spec.workload))]
        return {(): finalize_marginals(spec, tables, key)}

    def table_rows(self, spec: MarginalsSpec, r: MarginalsResult) -> list[tuple[Any, ...]]:
        """The released cells as tuples in the order of :meth:`items`."""
        return _cell_rows(spec, r.rows, MARGINAL_COLUMNS)

    def values(self, spec: MarginalsSpec, r: MarginalsResult) -> tuple[Any, ...]:
        return (_cell_dicts(self.items(spec), self.table_rows(spec, r)),)


def _cell_rows(spec: MarginalsSpec | MwemSpec, rows: Sequence[Mapping[str, Any]],
               columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Per-marginal cell rows as tuples: marginal, each attribute's value (floats as float,
    None outside the marginal), then ``columns``."""
    def convert(value: object, kind: str) -> object:
        return float(value) if value is not None and kind == "float" else value  # type: ignore[arg-type]

    return [
        (row["marginal"], *(convert(row[d.column], d.output_type) for d in spec.domains),
         *(row[c] for c in columns))
        for row in rows
    ]


def _cell_dicts(items: Sequence[OutputField], rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The cell rows as the structs of the ``agg`` list column."""
    names = [f.suffix for f in items]
    return [dict(zip(names, t, strict=True)) for t in rows]


@dataclass(frozen=True, slots=True)
class MwemKernel:
    """Partial-DP MWEM (``hdp_mwem``): global only, one aggregation pass through
    ``engine.tree_counter`` (the exact cells of every workload marginal), then the rounds on
    the driver over the public domain. Inside ``agg``: one list-of-struct column ``<name>``
    (marginal, the attribute values, mwem_fraction)."""

    global_only = True

    def items(self, spec: MwemSpec) -> tuple[OutputField, ...]:
        """The released table's columns."""
        return (OutputField("marginal", S),
                *(OutputField(d.column, d.output_type + "?") for d in spec.domains),
                *(OutputField(c, F) for c in MWEM_COLUMNS))

    def fields(self, spec: MwemSpec) -> tuple[OutputField, ...]:
        return (OutputField("", "list", self.items(spec)),)

    def run(self, spec: MwemSpec, engine: Engine, by: tuple[str, ...],
            keys: tuple[tuple[object, ...], ...], key: ReleaseKey
            ) -> dict[tuple[object, ...], Any]:
        with engine.tree_counter(spec) as counter:
            counts = counter.count_level(mwem_requests(spec), -1)  # every present cell
        return {(): run_mwem(spec, [counts.get(i, {}) for i in range(len(spec.workload))], key)}

    def table_rows(self, spec: MwemSpec, r: MwemResult) -> list[tuple[Any, ...]]:
        """The released answers as tuples in the order of :meth:`items`."""
        return _cell_rows(spec, r.rows, MWEM_COLUMNS)

    def values(self, spec: MwemSpec, r: MwemResult) -> tuple[Any, ...]:
        return (_cell_dicts(self.items(spec), self.table_rows(spec, r)),)


_LDP_LEVEL_ITEMS = (OutputField("eps", F), OutputField("n", INT), OutputField("weight", F))


@dataclass(frozen=True, slots=True)
class LdpKernel:
    """Local-DP aggregation (``ldp_mean``, ``ldp_mean_vector``, ``ldp_distribution``): no
    noise (the reports are already ε_i-LDP); needs marked reports inside ``agg``."""

    def fields(self, spec: Any) -> tuple[OutputField, ...]:
        return tuple(
            OutputField(s, k, _LDP_LEVEL_ITEMS if k == "levels" else ())
            if k != "levels" else OutputField(s, "list", _LDP_LEVEL_ITEMS)
            for s, k in output_fields(spec)
        )

    def request(self, spec: Any) -> CellRequest:
        return LdpRequest(spec)

    def finalize(self, spec: Any, cells: GroupCells, noise: NoiseContext) -> LdpResult:
        return finalize_one(spec, cells.stats)

    def finalize_batch(self, spec: Any, stats: Sequence[Any], slot: int, key: ReleaseKey,
                       groups: tuple[tuple[object, ...], ...], label: str
                       ) -> list[LdpResult]:
        """:meth:`finalize` of every group (post-processing of the reports: no noise, so
        nothing to draw at once)."""
        return [finalize_one(spec, s) for s in stats]

    def values(self, spec: Any, r: LdpResult) -> tuple[Any, ...]:
        return tuple(_row_values(spec, r))


register_kernel(MeanSpec, MeanKernel(), selected=SelectedMeanKernel())
register_kernel(HistogramSpec, HistogramKernel(), selected=SelectedHistogramKernel())
for _types, _kernel in (
    (UserMeanSpec, UserMeanKernel()),
    (HeavyHittersSpec, HeavyHittersKernel()),
    (MarginalsSpec, MarginalsKernel()),
    (MwemSpec, MwemKernel()),
    (AttributeHistogramSpec, AttributeHistogramKernel()),
    ((LdpMeanSpec, LdpVectorMeanSpec, LdpDistributionSpec), LdpKernel()),
):
    register_kernel(_types, _kernel)


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """Everything one release computed.

    Attributes:
        by: group-by columns.
        keys: group keys in output order.
        specs: the aggregators.
        results: ``results[spec.name][key]`` is the released value of one group.
        unsafe_seed: True if the noise came from a caller's seed (not private).
    """

    by: tuple[str, ...]
    keys: tuple[tuple[object, ...], ...]
    specs: tuple[MeanSpec, ...]
    results: Mapping[str, Mapping[tuple[object, ...], MeanResult]] = field(repr=False)
    unsafe_seed: bool = False

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per group: group columns, then each aggregator's fields."""
        kernel = MeanKernel()
        out = []
        for key in self.keys:
            row: dict[str, Any] = dict(zip(self.by, key, strict=True))
            for spec in self.specs:
                values = kernel.values(spec, self.results[spec.name][key])
                row.update((spec.name + f.suffix, v)
                           for f, v in zip(kernel.fields(spec), values, strict=True))
            out.append(row)
        return out


def empty_cells(request: CellRequest) -> Any:
    """The stats of a group with no rows."""
    return empty_stats() if isinstance(request, LdpRequest) else GroupStats(())


def only(kind: type, specs: Sequence[object], message: str) -> None:
    """Raise ParameterError(message) unless every spec is a ``kind``."""
    for spec in specs:
        if not isinstance(spec, kind):
            raise ParameterError(message.format(type(spec).__name__))


def _ldp_check(already_randomized: bool) -> Any:
    def check(engine: Engine, specs: Sequence[object], by: tuple[str, ...]) -> None:
        ldp: list[Any] = [s for s in specs if isinstance(kernel_of(s), LdpKernel)]
        if ldp:
            check_randomized(ldp, engine.report_marks(), already_randomized)

    return check


def release_specs(
    engine: Engine,
    specs: Sequence[object],
    *,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    schema: TableSchema | None = None,
    unsafe_seed: int | str | bytes | None = None,
    kernels: Mapping[int, Kernel] | None = None,
    already_randomized: bool = False,
    unit: UnitOptions | None = None,
) -> Release:
    """One release of any mix of aggregators on ``engine`` (what ``agg`` runs).

    ``kernels`` overrides the kernel of the spec at a position (the histogram alias's
    ``project`` option). LDP specs need reports marked by ``ldp_simulate`` unless
    ``already_randomized`` (``ldp_agg``'s declaration for device reports).
    """
    override = dict(kernels or {})
    position = {id(s): i for i, s in enumerate(specs)}
    selecting = isinstance(keys, SelectKeys) or (unit is not None and not is_ldp_release(specs))
    if selecting and override:
        msg = "`keys=select_keys(...)` is supported by `agg` only (hdp_mean, hdp_histogram)."
        raise ParameterError(msg)

    def pick(spec: object) -> Kernel:
        at = position.get(id(spec))
        if selecting:
            kernel_of(spec)  # the error agg raises for anything that is not an aggregator
            out: Kernel = selected_kernel_of(spec)
            return out
        return override[at] if at in override else kernel_of(spec)

    return run_release(
        engine, specs, pick, by=by, keys=keys, schema=schema, unsafe_seed=unsafe_seed,
        empty=empty_cells, check=_ldp_check(already_randomized), unit=unit,
    )


def mean_release(engine: Engine, specs: Sequence[object], **kwargs: Any) -> ReleaseResult:
    """The means-only release (``release``): a :class:`ReleaseResult`."""
    if isinstance(kwargs.get("keys"), SelectKeys):
        msg = "`keys=select_keys(...)` is supported by `agg` only, not by `release`."
        raise ParameterError(msg)
    plan_levels(specs)  # type: ignore[arg-type]  # the historical checks and messages
    r = release_specs(engine, specs, **kwargs)
    return ReleaseResult(r.by, r.keys, r.specs, r.results, r.unsafe_seed)
