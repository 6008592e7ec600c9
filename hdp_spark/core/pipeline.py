"""The one release pipeline: engines compute cells, kernels finalize them (issue 16).

Privacy-relevant module: it decides which release key and which noise context every
aggregator of a call uses. One fresh :class:`~hdp_spark.core.noise.ReleaseKey` per call;
every kernel binds its noise to a context that starts with its kind and (except heavy
hitters, at most one per call) its output name, and names are unique per call across all
kinds, so two aggregators of one call never share a noise stream.

A release is: validate the specs (one :class:`Kernel` per spec type) -> the engine
resolves the public keys and checks the schema -> the engine computes the cells the cell
kernels ask for (one pass per :class:`CellRequest`; requests on the same ε column and grid
share one pass) -> each kernel finalizes each group on the driver (a pure function of
spec, group cells and noise context; kernels with a batch finalize take all groups of a spec
in one call) while interactive kernels (user-level mean, heavy hitters) drive the engine's
providers -> rows laid out by the kernels' one output description (:class:`OutputField`)
-> the engine materializes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.level_table import LevelTable
from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.output_columns import Column, GroupResults, OutputColumns
from hdp_spark.core.partial.heavy_hitters import TreeCounter
from hdp_spark.core.partial.spec import AttributeHistogramSpec, CodedSpec
from hdp_spark.core.privacy_unit.options import UnitOptions, check_unit, unit_cells
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.privacy_unit.weights import weigh_public
from hdp_spark.core.release import LevelPlan
from hdp_spark.core.schema import TableSchema
from hdp_spark.core.selection.mechanism import Selected, select_groups
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.user_mean import UserBackend, UserMeanSpec
from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "LEVEL_ITEMS",
    "BatchCellKernel",
    "CategoryRequest",
    "CellKernel",
    "CellRequest",
    "Engine",
    "GroupCells",
    "InteractiveKernel",
    "Kernel",
    "LdpRequest",
    "LevelRequest",
    "NoiseContext",
    "OutputField",
    "Release",
    "SelectionKernel",
    "check_names",
    "check_selection",
    "dispatch_cells",
    "run_release",
]

Key = tuple[object, ...]
Keys = tuple[Key, ...]


@dataclass(frozen=True, slots=True)
class OutputField:
    """One output column of a kernel: the one description of names, types and nesting.

    Attributes:
        suffix: appended to the aggregator's name (``""`` is the estimate itself); inside
            a struct, the field name.
        kind: ``float``, ``int``, ``str``, ``bool`` (a ``?`` suffix makes pandas use its
            nullable dtype), ``floats`` (list of doubles) or ``list`` (list of structs
            described by ``items``).
        items: the struct fields of a ``list``.
        nullable: whether the Spark field is nullable.
    """

    suffix: str
    kind: str
    items: tuple[OutputField, ...] = ()
    nullable: bool = True


LEVEL_ITEMS = (
    OutputField("eps", "float"),
    OutputField("n", "int"),
    OutputField("weight", "float"),
    OutputField("eps_effective", "float"),
)
"""Struct fields of a heterogeneous-DP aggregator's ``_eps_levels`` list."""


@dataclass(frozen=True, slots=True)
class LevelRequest:
    """Count and exact encoded sums per (group, ε level): the mean's cells.

    Means on one ε column and grid share one request (one engine pass); ``specs[i]`` is
    the i-th encoded sum of each cell.
    """

    eps: str
    grid: EpsGrid | None
    specs: tuple[MeanSpec, ...]


@dataclass(frozen=True, slots=True)
class CategoryRequest:
    """Count per (group, ε level, category code): the histogram's cells."""

    spec: HistogramSpec


@dataclass(frozen=True, slots=True)
class LdpRequest:
    """Per (group, ε level, report index) sums of local-DP reports."""

    spec: Any  # an LdpSpec (kept Any: the LDP specs import nothing from here)


CellRequest = LevelRequest | CategoryRequest | LdpRequest


@dataclass(frozen=True, slots=True)
class GroupCells:
    """What a cell kernel's finalize sees of one group.

    Attributes:
        stats: the group's table (``GroupStats`` or ``LdpGroupStats``; empty if absent).
        slot: the spec's position in its shared request (which encoded sum is its own).
    """

    stats: Any
    slot: int


@dataclass(frozen=True, slots=True)
class NoiseContext:
    """The noise inputs of one (spec, group): the release key, the group key, the label."""

    key: ReleaseKey
    group: Key
    label: str


class Engine(Protocol):
    """What an engine (pandas, Spark) implements once for every aggregator."""

    def release_keys(self, keys: Any, by: tuple[str, ...]) -> Keys | None:
        """The public key set, normalized and typed like the ``by`` columns."""
        ...

    def check_schema(self, schema: TableSchema, specs: Sequence[object], by: Sequence[str]
                     ) -> None:
        """Declared columns, then blocking rules (counts only); raise before any noise."""
        ...

    def report_marks(self) -> dict[str, str]:
        """``{column: mechanism}`` of the LDP report columns marked by ``ldp_simulate``."""
        ...

    def cells(self, requests: Sequence[CellRequest], by: tuple[str, ...], keys: Keys | None
              ) -> list[Mapping[Key, Any]]:
        """One table ``{group key: stats}`` per request (native expressions only)."""
        ...

    def users(self, spec: UserMeanSpec, by: tuple[str, ...], keys: Keys
              ) -> AbstractContextManager[UserBackend]:
        """The user-level mean's interactive provider (released on exit)."""
        ...

    def tree_counter(self, spec: CodedSpec) -> AbstractContextManager[TreeCounter]:
        """The exact attribute counts of the partial-DP releases (released on exit)."""
        ...

    def attribute_counts(self, spec: AttributeHistogramSpec) -> list[dict[int, int]]:
        """The exact per-attribute counts ``{code: rows}`` of ``attribute_histograms``."""
        ...

    def bounded(self, unit: PrivacyUnit, eps: str, by: tuple[str, ...], keys: Keys | None,
                specs: Sequence[object], key: ReleaseKey) -> Engine:
        """The engine over the rows a release under ``unit`` reads (the bounding rule of
        :mod:`hdp_spark.core.privacy_unit.spec`), ``eps`` holding each person's ε."""
        ...

    def ldp_bounded(self, unit: PrivacyUnit, spec: Any, key: ReleaseKey) -> Engine:
        """The one report per person a local-DP ``spec`` keeps (:mod:`~.privacy_unit.ldp`)."""
        ...

    def public(self, columns: Sequence[str], constants: Mapping[str, float]) -> Engine:
        """An engine over ``columns`` only (those present) plus constant double columns:
        ``explain``'s public projection (ε, group and id columns; values never read)."""
        ...

    def materialize(self, by: tuple[str, ...], columns: Sequence[tuple[str, OutputField]],
                    rows: list[tuple[Any, ...]] | OutputColumns, unsafe: bool) -> Any:
        """Released rows (group values, then ``columns``) as the engine's frame; ``rows``
        as row tuples or as :class:`~hdp_spark.core.output_columns.OutputColumns` (the same
        frame either way)."""
        ...


class Kernel(Protocol):
    """One aggregator, engine-free: its output description and how to lay out a result."""

    def fields(self, spec: Any) -> tuple[OutputField, ...]:
        """The output columns of ``spec`` (suffixes after ``spec.name``)."""
        ...

    def values(self, spec: Any, result: Any) -> tuple[Any, ...]:
        """One group's result as values in the order of :meth:`fields`."""
        ...


@runtime_checkable
class ColumnarKernel(Kernel, Protocol):
    """A kernel that lays out many groups' results as columns at once."""

    def value_columns(self, spec: Any, results: Sequence[Any]) -> list[Column]:
        """The columns of ``[values(spec, r) for r in results]``, equal value for value
        (a ``list`` field as a :class:`~hdp_spark.core.output_columns.ListColumn`).
        Privacy: none, a layout of released values."""
        ...


@runtime_checkable
class CellKernel(Kernel, Protocol):
    """A kernel computed from cells: request once, finalize each group (pure)."""

    def request(self, spec: Any) -> CellRequest:
        """The cells ``spec`` needs."""
        ...

    def finalize(self, spec: Any, cells: GroupCells, noise: NoiseContext) -> Any:
        """One group's released result: a pure function of (spec, cells, noise)."""
        ...


@runtime_checkable
class BatchCellKernel(CellKernel, Protocol):
    """A cell kernel that also finalizes all groups of a spec in one call."""

    def finalize_batch(self, spec: Any, stats: Sequence[Any], slot: int, key: ReleaseKey,
                       groups: Keys, label: str) -> Sequence[Any]:
        """Every group's result, equal to :meth:`CellKernel.finalize` per group: ``stats[g]``
        is group ``groups[g]``'s table, noise bound to (``key``, ``groups[g]``, ``label``)."""
        ...


@runtime_checkable
class SelectionKernel(Kernel, Protocol):
    """A kernel computed from cells under partition selection (``select_keys``)."""

    def request(self, spec: Any) -> CellRequest:
        """The cells ``spec`` needs (the selection reads the first request's table)."""
        ...

    def finalize_selected(self, spec: Any, cells: GroupCells, noise: NoiseContext,
                          selected: Selected) -> Any:
        """One selected group's released result (κ_i weights, no exact n)."""
        ...

    def finalize_selected_batch(self, spec: Any, stats: Sequence[Any], slot: int,
                                key: ReleaseKey, groups: Keys, label: str,
                                selected: Sequence[Selected]) -> Sequence[Any]:
        """:meth:`finalize_selected` of every selected group, result for result."""
        ...


@runtime_checkable
class InteractiveKernel(Kernel, Protocol):
    """A kernel whose mechanism asks the engine several adaptive questions."""

    global_only: bool

    def run(self, spec: Any, engine: Engine, by: tuple[str, ...], keys: Keys,
            key: ReleaseKey) -> dict[Key, Any]:
        """The released result of every group in ``keys``."""
        ...


@dataclass(frozen=True, slots=True)
class Release:
    """Everything one ``agg`` call released.

    Attributes:
        by: group-by columns.
        keys: group keys in output order (``((),)`` for a global release).
        specs: the aggregators, in the caller's order.
        kernels: the kernel of each spec.
        results: ``results[spec.name][key]``: the kernel's result of one group.
        tables: the cell tables per request (pre-noise; never published).
        unsafe_seed: True if the noise came from a caller's seed (not private).
        selection: the partition selection that chose ``keys`` (None: public keys).
    """

    by: tuple[str, ...]
    keys: Keys
    specs: tuple[Any, ...]
    kernels: tuple[Kernel, ...] = field(repr=False)
    results: Mapping[str, Mapping[Key, Any]] = field(repr=False)
    tables: tuple[Mapping[Key, Any], ...] = field(repr=False, default=())
    unsafe_seed: bool = False
    selection: SelectKeys | None = None

    def columns(self) -> list[tuple[str, OutputField]]:
        """(column name, field) of every aggregator column, in output order."""
        return [
            (spec.name + f.suffix, f)
            for spec, kernel in zip(self.specs, self.kernels, strict=True)
            for f in kernel.fields(spec)
        ]

    def rows(self) -> list[tuple[Any, ...]]:
        """One tuple per group: the group values, then every aggregator's values."""
        out = []
        for key in self.keys:
            row: list[Any] = list(key)
            for spec, kernel in zip(self.specs, self.kernels, strict=True):
                row.extend(kernel.values(spec, self.results[spec.name][key]))
            out.append(tuple(row))
        return out

    def output_columns(self) -> OutputColumns:
        """:meth:`rows` as columns: the same values, without a tuple per group (and, for
        kernels with a columnar layout, without a dict per nested item).

        Privacy:
            None: the released values of :meth:`rows`, laid out by column.
        """
        columns: list[Column] = [[key[j] for key in self.keys] for j in range(len(self.by))]
        for spec, kernel in zip(self.specs, self.kernels, strict=True):
            mine = self.results[_name(spec)]
            results = (mine.in_order(self.keys) if isinstance(mine, GroupResults)
                       else [mine[key] for key in self.keys])
            if isinstance(kernel, ColumnarKernel):
                columns.extend(kernel.value_columns(spec, results))
                continue
            values = [kernel.values(spec, r) for r in results]
            columns.extend(map(list, zip(*values, strict=True)) if values
                           else [[] for _ in kernel.fields(spec)])
        return OutputColumns(columns)

    def materialize(self, engine: Engine) -> Any:
        """The engine's frame of this release."""
        return engine.materialize(self.by, self.columns(), self.output_columns(),
                                  self.unsafe_seed)


class _Named(Protocol):
    name: str


def _name(spec: object) -> str:
    """The output name of a spec (every spec type has one; ``kernel_of`` vouched for it)."""
    return cast(_Named, spec).name


def check_names(specs: Sequence[object]) -> None:
    """Raise ParameterError unless there is at least one spec and the names are unique."""
    if not specs:
        msg = "a release needs at least one aggregator, got none."
        raise ParameterError(msg)
    names: set[str] = set()
    for spec in specs:
        name = _name(spec)
        if name in names:
            msg = f"two aggregators share the output name {name!r}; set `alias`."
            raise ParameterError(msg)
        names.add(name)


def check_selection(specs: Sequence[object], kernels: Sequence[Kernel],
                    by: tuple[str, ...]) -> None:
    """Raise ParameterError unless ``specs`` can be released under partition selection:
    a grouped call of aggregators with a selection kernel, all on one ε column and grid
    (the selection weight and every statistic must use the same κ_i)."""
    if not by:
        msg = "`keys=select_keys(...)` chooses group keys: it needs `by`, got None."
        raise ParameterError(msg)
    if not all(isinstance(k, SelectionKernel) for k in kernels):
        msg = "`keys=select_keys(...)` supports hdp_mean and hdp_histogram only."
        raise ParameterError(msg)
    columns = {(s.eps, s.eps_grid) for s in cast(Sequence[MeanSpec | HistogramSpec], specs)}
    if len(columns) > 1:
        msg = (
            "under `keys=select_keys(...)` every aggregator must read the same `eps` column "
            "and `eps_grid` (one κ_i per row drives the selection and every statistic)."
        )
        raise ParameterError(msg)


def _share(requests: Sequence[CellRequest]) -> tuple[list[CellRequest], list[tuple[int, int]]]:
    """Merge the level requests of one ε column and grid; (request index, slot) per spec."""
    merged: list[CellRequest] = []
    where: list[tuple[int, int]] = []
    level_at: dict[tuple[str, EpsGrid | None], int] = {}
    for req in requests:
        if isinstance(req, LevelRequest):
            at = level_at.get((req.eps, req.grid))
            if at is None:
                level_at[(req.eps, req.grid)] = len(merged)
                merged.append(req)
                where.append((len(merged) - 1, 0))
            else:
                prev = merged[at]
                assert isinstance(prev, LevelRequest)
                merged[at] = LevelRequest(req.eps, req.grid, prev.specs + req.specs)
                where.append((at, len(prev.specs)))
        else:
            merged.append(req)
            where.append((len(merged) - 1, 0))
    return merged, where


def run_release(
    engine: Engine,
    specs: Sequence[object],
    kernel_of: Callable[[object], Kernel],
    *,
    by: str | Sequence[str] | None,
    keys: Any,
    schema: TableSchema | None,
    unsafe_seed: int | str | bytes | None,
    empty: Callable[[CellRequest], Any],
    check: Callable[[Engine, Sequence[object], tuple[str, ...]], None] | None = None,
    unit: UnitOptions | None = None,
) -> Release:
    """Run one release of ``specs`` on ``engine`` (the only orchestration).

    Args:
        engine: the engine of the input table.
        specs: the aggregators (any mix of kinds; unique names).
        kernel_of: the kernel of a spec (raises ParameterError for unknown types).
        by, keys, schema, unsafe_seed: as in ``agg``.
        empty: the stats of a group without rows, per request type.
        check: extra checks on public inputs, run before any data is read.
        unit: the privacy unit and its options (None: one row is one person).

    Privacy:
        One fresh release key for the whole call; each (spec, group) draws from streams
        bound to its kind, name and group (see the module docstring).
    """
    specs = tuple(specs)
    kernels = tuple(kernel_of(s) for s in specs)
    check_names(specs)
    by_t = normalize_by(by, specs)
    global_only = [k for k in kernels if isinstance(k, InteractiveKernel) and k.global_only]
    if global_only and by_t:
        msg = ("heavy hitters and marginals (and MWEM) are released for the whole table only: "
               f"`by` must be None when the call includes one, got {by!r}.")
        raise ParameterError(msg)
    if len(global_only) > 1:
        msg = ("a release may include at most one heavy-hitters or marginals aggregator (or "
               "MWEM); call agg twice.")
        raise ParameterError(msg)
    selection = keys if isinstance(keys, SelectKeys) else None
    if unit is not None:
        selection = check_unit(specs, kernels, by_t, keys, unit)  # None: local DP
        found = None if selection and not selection.keys_public else engine.release_keys(keys, by_t)
    elif selection is not None:
        check_selection(specs, kernels, by_t)
        found = None  # candidates: every group in the data (never published as such)
    else:
        found = engine.release_keys(keys, by_t)
    order: Keys = found if found is not None else ((),)
    if check is not None:
        check(engine, specs, by_t)
    if schema is not None:
        engine.check_schema(schema, specs, by_t)
    release_key = ReleaseKey.resolve(unsafe_seed)
    cell_specs = [(s, k) for s, k in zip(specs, kernels, strict=True)
                  if isinstance(k, CellKernel | SelectionKernel)]
    requests = [k.request(s) for s, k in cell_specs]
    merged, where = _share(requests)
    tables = (unit_cells(engine, unit, specs, merged, by_t, found, release_key)
              if unit is not None else engine.cells(merged, by_t, found) if merged else [])
    results: dict[str, Mapping[Key, Any]] = {}
    picked: dict[Key, Selected] | None = None
    if selection is not None and selection.keys_public:  # a privacy unit over public keys
        picked = weigh_public(selection, tables[0], release_key, len(specs), order)
    elif selection is not None:
        picked = select_groups(selection, tables[0], release_key, len(specs))
        order = tuple(picked)  # sorted; unreleased candidates go no further
        tables = [{k: t[k] for k in order if k in t} for t in tables]
    for (spec, kernel), (at, slot) in zip(cell_specs, where, strict=True):
        table, blank = tables[at], empty(merged[at])
        name = _name(spec)
        if picked is not None:
            if not isinstance(kernel, SelectionKernel):  # check_selection refused it
                msg = f"{type(kernel).__name__} has no selection finalize"
                raise InternalError(msg)
            done = kernel.finalize_selected_batch(
                spec, [table.get(k, blank) for k in order], slot, release_key, order, name,
                [picked[k] for k in order])
            results[name] = dict(zip(order, done, strict=True))
            continue
        if not isinstance(kernel, BatchCellKernel):  # selection kernels: with select_keys
            msg = f"{type(kernel).__name__} finalizes only under `select_keys`"
            raise InternalError(msg)
        # one call for every group: what the kernel's finalize gives per group
        stats = (table.select(order) if isinstance(table, LevelTable)
                 else [table.get(k, blank) for k in order])
        batch = kernel.finalize_batch(spec, stats, slot, release_key, order, name)
        results[name] = GroupResults(order, batch)  # no dict or record until read
    for spec, any_kernel in zip(specs, kernels, strict=True):
        if isinstance(any_kernel, InteractiveKernel):
            results[_name(spec)] = any_kernel.run(spec, engine, by_t, order, release_key)
    return Release(by_t, order, specs, kernels, results, tuple(tables), release_key.unsafe,
                   selection)


def dispatch_cells(
    requests: Sequence[CellRequest],
    df: Any,
    by: tuple[str, ...],
    keys: Keys | None,
    *,
    levels: Callable[[Any, list[Any], tuple[str, ...], Keys | None], Sequence[Mapping[Key, Any]]],
    categories: Callable[[Any, HistogramSpec, tuple[str, ...], Keys | None], Mapping[Key, Any]],
    ldp: Callable[[Any, list[Any], tuple[str, ...], Keys | None], Sequence[Mapping[Key, Any]]],
) -> list[Mapping[Key, Any]]:
    """One table per request from an engine's native cell functions, each called as
    ``fn(df, what, by, keys)``: all level requests in one call (as ``LevelPlan``s, one pass
    per ε column and grid), each histogram alone, all LDP specs in one call. Shared by the
    engines so that none repeats the dispatch."""
    out: list[Mapping[Key, Any]] = [{} for _ in requests]
    level_at = [i for i, r in enumerate(requests) if isinstance(r, LevelRequest)]
    if level_at:
        plans = [LevelPlan(r.eps, r.grid, r.specs)
                 for r in (requests[i] for i in level_at) if isinstance(r, LevelRequest)]
        for i, table in zip(level_at, levels(df, plans, by, keys), strict=True):
            out[i] = table
    for i, r in enumerate(requests):
        if isinstance(r, CategoryRequest):
            out[i] = categories(df, r.spec, by, keys)
    ldp_at = [i for i, r in enumerate(requests) if isinstance(r, LdpRequest)]
    if ldp_at:
        ldp_specs = [r.spec for r in requests if isinstance(r, LdpRequest)]
        for i, table in zip(ldp_at, ldp(df, ldp_specs, by, keys), strict=True):
            out[i] = table
    return out

