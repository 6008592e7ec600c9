"""A release's privacy unit and its options, and the checks on public inputs a release under
one runs before reading any data (see :mod:`hdp_spark.core.privacy_unit.weights`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.privacy_unit.ldp import check_ldp_unit, is_ldp_release, ldp_unit_cells
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.privacy_unit.weights import unit_selection
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import ParameterError

__all__ = ["UnitOptions", "check_unit", "unit_cells"]


@dataclass(frozen=True, slots=True)
class UnitOptions:
    """A release's privacy unit and its mechanism options (``agg``'s ``privacy_unit``,
    ``max_groups``, ``max_rows``, ``eps_cap``, ``weight_share``)."""

    unit: PrivacyUnit
    eps_cap: float | None = None
    weight_share: float | None = None


def check_unit(specs: Sequence[object], kernels: Sequence[object], by: tuple[str, ...],
               keys: Any, options: UnitOptions) -> SelectKeys | None:
    """The mechanism's parameters of a release under a privacy unit, after the checks on
    public inputs: aggregators with a private-weight kernel on one ε column and grid, the
    unit's id column read by none of them nor grouped by, public keys or ``select_keys``
    for a grouped call.
    None for local-DP aggregators (one report per person, global only:
    :func:`~hdp_spark.core.privacy_unit.ldp.check_ldp_unit`).

    Raises:
        ParameterError: a check fails (naming the argument).
    """
    from hdp_spark.core.pipeline import SelectionKernel  # the pipeline imports this module

    if is_ldp_release(specs):
        check_ldp_unit(specs, by, keys, options.unit, options.eps_cap, options.weight_share)
        return None
    if not kernels or not all(isinstance(k, SelectionKernel) for k in kernels):
        msg = ("`privacy_unit` supports hdp_mean and hdp_histogram so far (the other "
               "aggregators take it in a later release).")
        raise ParameterError(msg)
    columns = {(s.eps, s.eps_grid) for s in cast(Sequence[MeanSpec | HistogramSpec], specs)}
    if len(columns) > 1:
        msg = ("under `privacy_unit` every aggregator must read the same `eps` column and "
               "`eps_grid` (one ε per person drives every statistic).")
        raise ParameterError(msg)
    read = {s.column for s in cast(Sequence[MeanSpec | HistogramSpec], specs)}
    if options.unit.column in read | set(by):
        msg = (f"`privacy_unit` column {options.unit.column!r} identifies people: no "
               "aggregator may read it as data and `by` may not group by it.")
        raise ParameterError(msg)
    if isinstance(keys, SelectKeys) and not by:
        msg = "`keys=select_keys(...)` chooses group keys: it needs `by`, got None."
        raise ParameterError(msg)
    if by and keys is None:
        msg = ("under `privacy_unit` a grouped release needs public `keys` or "
               "`keys=select_keys(...)`: which groups a person's rows fall in is private.")
        raise ParameterError(msg)
    return unit_selection(options.unit, keys, eps_cap=options.eps_cap,
                          weight_share=options.weight_share)


def unit_cells(engine: Any, unit: UnitOptions, specs: Sequence[object],
               requests: Sequence[Any], by: tuple[str, ...], keys: Any, key: Any) -> list[Any]:
    """The cell tables of a release under ``unit``: the engine's cells over the rows the
    bounding rule keeps (:meth:`~hdp_spark.core.pipeline.Engine.bounded`), the bounded rows
    released (``close``) once the cells are in; for local-DP aggregators the one report
    per person of :mod:`hdp_spark.core.privacy_unit.ldp`.

    Privacy:
        The bounding rule of :mod:`hdp_spark.core.privacy_unit.spec` (local DP: of
        :mod:`hdp_spark.core.privacy_unit.ldp`), keyed by ``key``.
    """
    if is_ldp_release(specs):
        return ldp_unit_cells(engine, unit.unit, specs, requests, key)
    bounded = engine.bounded(unit.unit, cast(MeanSpec, specs[0]).eps, by, keys, specs, key)
    try:
        return list(bounded.cells(requests, by, keys)) if requests else []
    finally:
        close = getattr(bounded, "close", None)
        if close is not None:
            close()  # the bounded rows a Spark engine cached
