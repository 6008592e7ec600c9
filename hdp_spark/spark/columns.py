"""Spark Column aggregators: ``df.agg(hdp_mean(...))``, ``groupBy().agg(...)``.

A Column aggregator is two expressions: the native aggregate ``hdp_cells`` of the JVM
extension (one pass with map-side partial aggregation; per (ε level, category code) the row
count and the exact fixed-point sums, over the same native level and encoding expressions as
the release API) and the kernel's finalize as an Arrow pandas UDF over the aggregated rows
(Spark evaluates it after the aggregate, on the executors, one call per batch of groups).

The objects returned by :func:`hdp_mean` and :func:`hdp_histogram` are Spark Columns that
also carry their spec, so the release API (``hs.agg(df, hdp_mean(...))``) keeps accepting
them. The Column is built lazily on a classic session (when Spark first reads it), eagerly on
Spark Connect.

Privacy (the composition rule):
    A Column holds one release key, made when the Column is built. Every *query* that uses
    it is a release of its own: its noise is keyed by the Column's key derived with a
    fingerprint of what the query aggregates (the analyzed input plan, the grouping and the
    aggregate's arguments, computed by the JVM extension at analysis: see
    ``QueryFingerprint``), each group's key, and the group's exact statistics. So:

    - re-evaluating one query (``show``, ``collect``, ``write``, retries, AQE, a cached
      input) gives the same numbers and costs nothing more;
    - two different queries (another filter, projection, ``CASE WHEN``, join, source or
      grouping) draw independent noise, even when their statistics are equal: each costs
      its ε, and the ε of all queries add up (sequential composition);
    - a rewritten file (its path, size and modification time are in the fingerprint), a
      replaced view or a rewritten joined table is another query: fresh noise;
    - whatever could change the rows under one fingerprint (time and session functions,
      nondeterministic expressions and operators such as ``rand``, ``LIMIT`` and
      ``sample``, order-dependent aggregates, sources the fingerprint cannot pin) is
      refused at analysis by the extension's ``QueryGuard``, naming the construct and the
      fix (materialize the input first: ``localCheckpoint()``).

    A query that adds a repartition or a sort is another query (its own release). Which
    groups appear is a privacy decision: in a grouped aggregate a Column needs
    ``keys=select_keys(...)`` (DP partition selection: see ``column_selection`` and the
    extension's ``SelectionPlan``), a public key list, or ``keys="public"`` (the grouping
    values and each group's n are then published). A Column charges no ledger (jobs use
    ``agg``).
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as ClassicColumn
from pyspark.sql.utils import is_remote

from hdp_spark.aggregators.registry import aggregator_of, aggregators
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.spec import HistogramMethod
from hdp_spark.core.kernel_table import ensure_kernel
from hdp_spark.core.kernels import kernel_of
from hdp_spark.core.keys import normalize_keys
from hdp_spark.core.levels import BELOW_GRID_LEVEL, EPS_CAP, EPS_FLOOR, INVALID_LEVEL, EpsGrid
from hdp_spark.core.mean.spec import MeanMethod
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import CategoryRequest, LevelRequest
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import ParameterError
from hdp_spark.spark._common import UNSAFE_SEED_MARK
from hdp_spark.spark.column_finalize import NO_FINGERPRINT, arrow_finalize, struct_fields
from hdp_spark.spark.column_selection import SELECT_PREFIX, selection_of
from hdp_spark.spark.column_unit import keyed_decision, unit_decision
from hdp_spark.spark.extension import (
    MISSING_MESSAGE,
    ExtensionMissingError,
    analyzer_ready,
    install,
)
from hdp_spark.spark.jvm import FUNCTION
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.sql_text import double_array_lit, ident

__all__ = ["GROUPS", "KEYS_PREFIX", "ColumnOrName", "Inputs", "as_column", "built_column",
           "cells_of", "column_of", "hdp_histogram", "hdp_mean", "key_list", "native_cells"]


def _column_field(spec: Any) -> str:
    """The main field of ``spec``'s Column struct (its descriptor's ``column_field``).

    Raises:
        ParameterError: the aggregator is not available as a Column.
    """
    aggregator = aggregator_of(spec)
    request = getattr(aggregator.kernel, "request", None)
    if aggregator.column_field is None or aggregator.column_builder is not None or (
            request is None or not isinstance(request(spec), LevelRequest | CategoryRequest)):
        columns = ", ".join(a.constructor_name for a in aggregators()
                            if a.column_field is not None)
        msg = (f"`{aggregator.constructor_name}` is not available as a Spark Column yet "
               f"(Columns: {columns}); use the release API: hs.agg(df, ...).")
        raise ParameterError(msg)
    return aggregator.column_field


def _carried(spec: Any) -> Any:
    """A function that enters ``spec``'s kernel on the interpreter it runs in: the finalize
    calls it first, so an aggregator registered on the driver only (a plugin's) runs on
    executors whose interpreters never saw the registration."""
    aggregator = aggregator_of(spec)
    entry = (aggregator.spec_types, aggregator.kernel, aggregator.selected)

    def carry() -> None:
        ensure_kernel(*entry)

    return carry


def _finalize_udf(spec: Any, key: ReleaseKey) -> Any:  # design-ok: vectorized, per group batch
    kernel = kernel_of(spec)
    main = _column_field(spec)
    carry = _carried(spec)
    fields = struct_fields(kernel.fields(spec), main)
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable) for n, f in fields])
    arrow_type = to_arrow_type(rtype)

    def finalize(cells: pa.Array) -> pa.Array:  # Arrow in, Arrow out: a scalar Arrow UDF
        carry()
        return arrow_finalize(spec, key, main, cells, arrow_type)

    finalize.__name__ = f"hdp_{aggregator_of(spec).name}_finalize"
    return F.arrow_udf(finalize, rtype)  # type: ignore[attr-defined]  # design-ok: over aggregated rows


ColumnOrName = Column | str
"""A column name or a Spark Column expression, as ``pyspark.sql.functions`` take."""


def _column(c: ColumnOrName) -> Column:
    return F.expr(ident(c)) if isinstance(c, str) else c


def native_cells(eps: ColumnOrName, grid: Any, category: ColumnOrName | None = None,
                 categories: tuple[object, ...] | None = None,
                 values: tuple[tuple[ColumnOrName, float, float, float], ...] = (),
                 groups: str = "cells") -> Column:
    """The ``hdp_cells`` aggregate over the raw ε column, the raw ``category`` column with
    its domain ``categories`` (a histogram), and ``values`` ((column, lower, upper, fill)
    each: a mean). The level rules, the category matching and the encoding run inside it,
    in Java, with the release API's rules and the numpy references' IEEE operations.
    ``groups`` is the group decision the analyzer checks (``"cells"``: none applies, raw
    statistics; ``"none"``: refused when grouped; ``"public"``: declared public).

    Privacy:
        NOT a release: exact pre-noise statistics, for the finalize (and tests) only.
        Per-row rules are public and data-independent; a bad value never raises.
    """
    rules = F.array(*[F.lit(float(v)) for v in (INVALID_LEVEL, BELOW_GRID_LEVEL, EPS_FLOOR,
                                                EPS_CAP, FIXED_ONE)])
    points = (F.lit(None).cast("array<double>") if grid is None
              else F.expr(double_array_lit(grid.points())))
    if categories is None:
        cat, domain = F.lit(0), F.lit(None).cast("array<string>")
    elif all(isinstance(c, str) for c in categories):
        cat = _column(category)  # type: ignore[arg-type]
        domain = F.array(*[F.lit(c) for c in categories])
    else:
        cat = _column(category)  # type: ignore[arg-type]
        domain = F.array(*[F.lit(int(c)) for c in categories]).cast("array<bigint>")  # type: ignore[call-overload]
    args = [_column(eps), cat, rules, points, domain, F.lit(groups)]
    for column, lower, upper, fill in values:
        args += [_column(column), F.lit(float(lower)), F.lit(float(upper)),
                 F.lit(float(fill))]
    out: Column = F.call_function(FUNCTION, *args)
    return out


@dataclass(frozen=True, eq=False)  # Columns do not compare as booleans
class Inputs:
    """The Column expressions a Column aggregator reads in place of its spec's column
    names (``None``: the name itself): ``hdp_mean(F.col("salary") / 1000, ...)``."""

    value: Any = None
    eps: Any = None


def cells_of(spec: Any, groups: str, inputs: Inputs = Inputs()) -> Column:
    """The native aggregate a Column aggregator of ``spec`` finalizes (same arguments, so
    the same query fingerprint: tests use it to read a Column's exact cells).

    Privacy:
        NOT a release: exact statistics (see :func:`native_cells`).
    """
    value = spec.column if inputs.value is None else inputs.value
    eps = spec.eps if inputs.eps is None else inputs.eps
    if isinstance(kernel_of(spec).request(spec), LevelRequest):  # type: ignore[attr-defined]
        return native_cells(eps, spec.eps_grid, groups=groups,
                            values=((value, spec.lower, spec.upper, spec.fill_value),))
    return native_cells(eps, spec.eps_grid, value, tuple(spec.categories), groups=groups)


def _selected_udfs(spec: Any, key: ReleaseKey, selection: SelectKeys) -> tuple[Any, Any]:
    """The two finalizes of a Column under partition selection (see ``column_selection``):
    the selection's (cells -> W̃ or null) and the statistics' (cells, W̃, A -> struct)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    from hdp_spark.core.selection.kernels import selected_kernel_of
    from hdp_spark.spark.column_selection import selected_finalize, selection_weights

    main = _column_field(spec)
    fields = struct_fields(selected_kernel_of(spec).fields(spec), main)
    rtype = T.StructType([T.StructField(n, spark_type(f), f.nullable) for n, f in fields])
    arrow_type = to_arrow_type(rtype)
    kind = aggregator_of(spec).name
    carry = _carried(spec)

    def select(cells: pa.Array) -> pa.Array:
        carry()
        return selection_weights(spec, key, selection, cells)

    def finalize(cells: pa.Array, weights: pa.Array, parts: pa.Array) -> pa.Array:
        carry()
        return selected_finalize(spec, key, selection, cells, weights, parts, arrow_type)

    select.__name__ = f"hdp_{kind}_select"
    finalize.__name__ = f"hdp_{kind}_finalize"
    # nondeterministic: the extension's filter must not be pushed below the selection (which
    # would evaluate it twice); its output is a function of the cells and the key all the same
    weights = F.arrow_udf(select, T.LongType()).asNondeterministic()  # type: ignore[attr-defined]  # design-ok: over aggregated rows
    values = F.arrow_udf(finalize, rtype)  # type: ignore[attr-defined]  # design-ok: over aggregated rows
    return weights, values


def _build(spec: Any, key: ReleaseKey, groups: str, inputs: Inputs) -> Column:
    selection = selection_of(groups)
    if selection is not None:
        cells = cells_of(spec, groups, inputs)
        weights, values = _selected_udfs(spec, key, selection)
        value = values(cells, F.call_function(SELECTION, F.lit("weight")),
                       F.call_function(SELECTION, F.lit("parts")))
        out: Column = F.call_function(SELECTED, value, weights(cells))
    else:
        out = _finalize_udf(spec, key)(cells_of(spec, groups, inputs))  # design-ok
    if key.unsafe:  # a seeded Column's output is marked, as the release API's
        return out.alias(spec.name, metadata={UNSAFE_SEED_MARK: True})
    return out.alias(spec.name)


GROUPS = ("public",)
"""The word a Column aggregator's ``keys=`` takes: ``"public"`` declares the grouping values
public (every group found in the data is published, with its n). ``keys=`` also takes a
public key list (see :func:`_groups`)."""

KEYS_PREFIX = "keys:"
"""How a key list travels to the extension's analyzer rule: the group decision
``keys:<JSON list of keys>`` (``KeyFilter`` in the JVM extension)."""
SELECTED, SELECTION = "hdp_selected", "hdp_selection"
"""The extension's selection marker and placeholder functions (``HdpSelected``)."""


def key_list(keys: object) -> list[list[object]]:
    """A public key list as JSON-ready rows: the release API's rules (``normalize_keys``:
    tuples for several grouping columns, no null, NaN or duplicate, not empty, a set
    sorted), values limited to what a SQL literal of the grouping column's type holds
    exactly: strings, booleans, integers and finite floats.

    Raises:
        ParameterError: not a list of keys, or a key value of another type.

    Privacy:
        The caller's public key list only.
    """
    if isinstance(keys, bytes) or not isinstance(keys, Iterable):
        msg = ("`keys` of a Column aggregator must be 'public', a list of keys or omitted, "
               f"got {type(keys).__name__}.")
        raise ParameterError(msg)
    items = list(keys)
    first = items[0] if items else None
    width = len(first) if isinstance(first, tuple) else 1
    rows = normalize_keys(keys if isinstance(keys, set | frozenset) else items, width)
    for key in rows:
        for value in key:
            ok = isinstance(value, str | bool | int) or (
                isinstance(value, float) and math.isfinite(value))
            if not ok:
                msg = ("`keys` of a Column aggregator hold strings, integers, finite floats "
                       f"or booleans, got {type(value).__name__}; other key types go "
                       "through the release API: hs.agg(df, ..., by=..., keys=[...]).")
                raise ParameterError(msg)
    return [list(key) for key in rows]


def _groups(keys: object) -> str:
    """The group decision of a Column's ``keys=``: ``"none"`` (omitted), ``"public"``, a
    public key list (only rows with those grouping values are aggregated), or
    ``select_keys(...)`` (DP partition selection: only the groups it selects have a row).

    Privacy:
        The key list and the selection's parameters are public inputs of the caller; like
        the release API's, they must not be derived from the data (that cannot be
        detected here).
    """
    if keys is None:
        return "none"
    if isinstance(keys, str):
        if keys in GROUPS:
            return keys
        msg = ("`keys` of a Column aggregator must be 'public' (the grouping values are "
               f"public), a list of public keys, select_keys(...) or omitted, got "
               f"{keys!r}.")
        raise ParameterError(msg)
    if isinstance(keys, SelectKeys):  # the parameters, public: SelectionPlan checks them
        params = {"delta": keys.delta, "c": keys.c, "share": keys.share, "step": keys.step,
                  "neighbours": keys.neighbours}
        return SELECT_PREFIX + json.dumps(params, allow_nan=False, sort_keys=True)
    return KEYS_PREFIX + json.dumps(key_list(keys), allow_nan=False)


class _Aggregate:
    """What both Column classes carry: the spec, the release key, the group decision and
    the Column expressions it reads."""

    spec: Any
    key: ReleaseKey
    groups: str
    inputs: Inputs

    def __hdp_spec__(self) -> Any:
        """The spec for the release API (``hs.agg``): see :func:`hdp_spark.front.spec_of`."""
        if self.inputs.value is not None or self.inputs.eps is not None:
            msg = (f"`{self.spec.name}` reads a Column expression: it works as a Column "
                   "aggregator (df.agg(...), df.groupBy(...).agg(...)); the release API "
                   "(hs.agg) takes column names: add the expression as a column first "
                   "(df.withColumn).")
            raise ParameterError(msg)
        return self.spec

    def unsafe_seed(self, seed: int | str | bytes) -> Column:
        """The same aggregator with noise from a caller's seed (tests only: not private)."""
        return column_of(self.spec, ReleaseKey.resolve(seed), self.groups, self.inputs)

    def over(self, window: Any = None) -> Column:
        """Refused: a Column aggregator is a release per group, not a window function."""
        msg = (f"`{self.spec.name}` cannot be used with `.over(window)`: a Column aggregator "
               "releases one row per group; use `df.groupBy(...).agg(...)` and join the "
               "result back if every row needs its group's release.")
        raise ParameterError(msg)


def built_column(column: Any, build: Callable[[], Column]) -> Any:
    """The JVM column of a classic Column aggregator, built once, on first use: the session's
    extension installed and its analyzer rule present (the query fingerprint binds the
    noise), then ``build()`` (the Column aggregators of every module share this).

    Raises:
        ExtensionMissingError: no active session, or a session built without the extension.

    Privacy:
        None itself; it refuses to build a Column whose noise could not be bound to its
        query.
    """
    built = column.__dict__.get("_built")
    if built is None:
        session = SparkSession.getActiveSession()
        if session is None:
            msg = "a Column aggregator needs an active SparkSession."
            raise ExtensionMissingError(msg)
        install(session)
        if not analyzer_ready(session):
            raise ExtensionMissingError(NO_FINGERPRINT)
        built = build()._jc  # type: ignore[attr-defined]
        object.__setattr__(column, "_built", built)
    return built


class _ClassicAggregate(_Aggregate, ClassicColumn):
    def __init__(self, spec: Any, key: ReleaseKey, groups: str, inputs: Inputs) -> None:
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "_built", None)

    @property
    def _jc(self) -> Any:  # type: ignore[override]
        return built_column(self, lambda: _build(self.spec, self.key, self.groups, self.inputs))

    def __repr__(self) -> str:
        return f"Column<'{type(self.spec).__name__}({self.spec.name})'>"


def column_of(spec: Any, key: ReleaseKey | None = None, groups: str = "none",
              inputs: Inputs = Inputs()) -> Column:
    """The Column aggregator of ``spec`` with a fresh release key (or ``key``) and the
    group decision ``groups`` (``"none"``: refused in a grouped aggregate; ``"public"``).

    Privacy:
        The Column's release key is fresh from the OS CSPRNG unless ``key`` is given
        (tests); see :func:`hdp_mean` for the unit protected and what is public.
    """
    key = key if key is not None else ReleaseKey.resolve(None)
    groups = keyed_decision(groups, key)  # a privacy unit's bounding key (column_unit)
    if is_remote():
        from pyspark.sql.connect.column import Column as ConnectColumn

        class _ConnectAggregate(_Aggregate, ConnectColumn):
            """Checks, when its plan is built, that the server has the extension."""

            def to_plan(self, session: Any) -> Any:
                active = SparkSession.getActiveSession()
                if active is not None and not active.catalog.functionExists(FUNCTION):
                    raise ExtensionMissingError(MISSING_MESSAGE)
                return ConnectColumn.to_plan(self, session)

            def alias(self, *alias: str, **kwargs: Any) -> Any:
                return wrap(ConnectColumn.alias(self, *alias, **kwargs))

            name = alias

        def wrap(built: Any) -> Column:
            col = _ConnectAggregate(built._expr)
            col.spec, col.key, col.groups, col.inputs = spec, key, groups, inputs
            return col

        return wrap(_build(spec, key, groups, inputs))
    return _ClassicAggregate(spec, key, groups, inputs)


def as_column(spec: Any, *, keys: str | Sequence[object] | SelectKeys | None = None
              ) -> Column:
    """The Spark Column aggregator of any registered aggregator's ``spec`` (one whose
    descriptor names a ``column_field``: see :func:`hdp_spark.register_aggregator`), with
    a fresh release key; ``keys`` as in :func:`hdp_mean`.

    ``hs.as_column(hdp_spark.hdp_mean("salary", eps="eps", lower=0, upper=250_000))`` is
    ``hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000)``.

    Raises:
        ParameterError: the aggregator is not available as a Column, or ``keys`` is not a
            group decision.

    Privacy:
        As the aggregator's own Column: one release key, each query a release of its own
        (this module's docstring); what the aggregator protects is documented by its
        constructor.
    """
    from hdp_spark.front import spec_of

    spec = spec_of(spec)
    builder = aggregator_of(spec).column_builder
    if builder is not None:  # the aggregator's own native aggregate and finalize
        module, function = builder.split(":")
        out: Column = getattr(importlib.import_module(module), function)(spec, keys=keys)
        return out
    _column_field(spec)  # refuses an aggregator that has no Column form, before any query
    if keys is not None and isinstance(keys, SelectKeys):
        if aggregator_of(spec).selected is None:
            msg = (f"`keys=select_keys(...)` is not supported by "
                   f"`{aggregator_of(spec).constructor_name}`; pass 'public' or a key list.")
            raise ParameterError(msg)
    return column_of(spec, groups=_groups(keys))


def _input(c: ColumnOrName, role: str) -> tuple[str, Any]:
    """(the name the spec and its outputs use, the expression or None) of a column."""
    if isinstance(c, str):
        return c, None
    if not isinstance(c, Column):
        msg = f"`{role}` must be a column name or a Spark Column, got {type(c).__name__}."
        raise ParameterError(msg)
    if isinstance(c, ClassicColumn):  # the JVM Column's text ("/(salary, 1000)")
        return str(c._jc.toString()), c  # type: ignore[operator]
    return repr(c._expr), c  # type: ignore[attr-defined]  # Spark Connect: the same text


def hdp_mean(
    column: ColumnOrName,
    *,
    eps: ColumnOrName,
    lower: float,
    upper: float,
    method: MeanMethod = "adpm",
    beta: float = 0.05,
    clip_output: bool | None = None,
    fill: float | None = None,
    eps_grid: EpsGrid | None = None,
    alias: str | None = None,
    keys: str | Sequence[object] | SelectKeys | None = None,
    privacy_unit: str | None = None,
    max_groups: int | None = None,
    max_rows: int | None = None,
    eps_cap: float | None = None,
    weight_share: float | None = None,
) -> Column:
    """The heterogeneous-DP mean as a Spark Column aggregator (and a spec for ``agg``).

    Same arguments and rules as :func:`hdp_spark.pandas.hdp_mean`, and ``column`` and ``eps``
    may be Spark Columns (``F.col("salary") / 1000``, ``df.salary``, ``F.coalesce("eps",
    F.lit(0.0))``), as ``pyspark.sql.functions`` take them; the output is then named after the
    expression's text. Use it as ``df.agg(hdp_mean(...))`` or, declaring the grouping values public,
    ``df.groupBy(...).agg(hdp_mean(..., keys="public").alias(...))``: one struct column with the
    fields the release API publishes (``estimate``, ``noise_scale``, ``ci_low``, ``ci_high``,
    ``bias_bound``, ``n``, ``tau``, ``method``, ``fallback``, ``eps_levels``). In a grouped
    aggregate a group decision is needed, or the query fails at analysis: ``keys=select_keys(delta=,
    c=, share=)`` (DP partition selection, the release API's: a group has a row only if the noisy
    sum of its members' min(ε_i, c) passes a threshold set by δ; the struct then holds ``estimate``,
    ``ci_low``, ``ci_high`` (the whole range: n is private), ``noise_ci_low``, ``noise_ci_high`` (of
    the κ-weighted mean), ``bias_bound``, ``weight``, ``privacy``, ``eps_cap``, ``eps_step``,
    ``delta``, no exact n; every hdp_spark aggregator of the ``agg`` must take the same
    ``select_keys`` and ε column, and Spark's exact aggregates are refused beside them),
    ``keys="public"`` (every group found is published) or a public key list, ``keys=["hr", "it"]``
    (tuples for several grouping columns), as the release API's: only rows with those grouping
    values are aggregated, the others are left out of every aggregate of the query; a key without
    rows has no row. ``hs.agg(df, hdp_mean(...))`` still runs the release API with this spec (column
    names only). ``privacy_unit="user_id", max_groups=, max_rows=`` (and ``eps_cap``,
    ``weight_share``), global or with ``keys="public"``: many rows per person, bounded as the
    release API's ``agg(..., privacy_unit=...)`` (docs/privacy_unit.md; ``column_unit``).

    Privacy:
        Each row is protected at its own ε_i (less where the weights give privacy for free);
        the ε column is public, and with ``keys="public"`` so are the grouping values (every
        group present and its n are published). Under ``select_keys`` each row is charged
        (min(ε_i, c) rounded down to the step, δ) for the selection and the statistics
        together, and the grouping values are private. One release key per Column, and each query
        that uses the Column is a release of its own (see this module's docstring): the ε of
        different queries add up; re-evaluating one query adds nothing.
    """
    from hdp_spark.aggregators import hdp_mean as spec_mean

    unit = unit_decision(keys, privacy_unit, max_groups, max_rows, eps_cap, weight_share)
    groups = _groups(keys) if unit is None else unit
    (name, value), (eps_name, eps_expr) = _input(column, "column"), _input(eps, "eps")
    spec = spec_mean(name, eps=eps_name, lower=lower, upper=upper, method=method, beta=beta,
                     clip_output=clip_output, fill=fill, eps_grid=eps_grid, alias=alias)
    return column_of(spec, groups=groups, inputs=Inputs(value, eps_expr))


def hdp_histogram(
    column: ColumnOrName,
    *,
    eps: ColumnOrName,
    categories: Sequence[str] | Sequence[int],
    method: HistogramMethod = "hpf-a",
    beta: float = 0.05,
    other: str | int | None = "other",
    eps_grid: EpsGrid | None = None,
    alias: str | None = None,
    keys: str | Sequence[object] | SelectKeys | None = None,
    privacy_unit: str | None = None,
    max_groups: int | None = None,
    max_rows: int | None = None,
    eps_cap: float | None = None,
    weight_share: float | None = None,
) -> Column:
    """The heterogeneous-DP histogram as a Spark Column aggregator (and a spec for ``agg``).

    Same arguments and rules as :func:`hdp_spark.pandas.hdp_histogram`; the struct's fields
    are the release API's histogram fields (``bins`` holds the released bins). ``column``,
    ``eps``, ``keys`` and the privacy unit's options as in :func:`hdp_mean`.

    Privacy:
        As :func:`hdp_mean`: each row at its own ε_i (under ``select_keys``: charged
        (min(ε_i, c) rounded down, δ)), the ε column public, the grouping values public only
        when declared with ``keys="public"``; each query a release.
    """
    from hdp_spark.aggregators import hdp_histogram as spec_histogram

    unit = unit_decision(keys, privacy_unit, max_groups, max_rows, eps_cap, weight_share)
    groups = _groups(keys) if unit is None else unit
    (name, value), (eps_name, eps_expr) = _input(column, "column"), _input(eps, "eps")
    spec = spec_histogram(name, eps=eps_name, categories=categories, method=method, beta=beta,
                          other=other, eps_grid=eps_grid, alias=alias)
    return column_of(spec, groups=groups, inputs=Inputs(value, eps_expr))
