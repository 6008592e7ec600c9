"""The ``explain`` hooks of the aggregators that are not explained from a counts-only pass
(see :class:`~hdp_spark.aggregators.registry.Aggregator`): each reads public columns only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.keys import normalize_by
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.explain import (
    EXPLAIN_FIELDS,
    LDP_CONSTANT_REPORT,
    explain_ldp_rows,
    explain_user_means,
)
from hdp_spark.front.ldp import ldp_release

__all__ = ["explain_ldp_means", "explain_ldp_unit", "explain_user_means_public"]

Explained = tuple[tuple[str, ...], list[Any], list[tuple[Any, ...]]]


def explain_ldp_means(engine: Engine, specs: Sequence[Any], *, by: Any, keys: Any
                      ) -> Explained:
    """Explain scalar local-DP means: the aggregation itself on the ε and group columns
    with one constant valid report per row.

    Privacy:
        The report columns are never read; the output is a function of the ε histograms of
        the groups and the specs.
    """
    public = engine.public([*(s.eps for s in specs), *normalize_by(by)],
                           {s.report: LDP_CONSTANT_REPORT for s in specs})
    result = ldp_release(public, *specs, by=by, keys=keys, already_randomized=True)
    return (result.by, [(f.suffix, f) for f in EXPLAIN_FIELDS], explain_ldp_rows(result))


def explain_ldp_unit(engine: Engine, specs: Sequence[Any], unit: PrivacyUnit) -> Explained:
    """Explain scalar local-DP means under ``unit`` (one report per person, global): per
    aggregator, the explain of :func:`explain_ldp_means` over the one row per person that
    the release keeps (:meth:`~hdp_spark.core.pipeline.Engine.ldp_bounded`), run on the
    id and ε columns with the constant report.

    Privacy:
        Under a unit a local-DP release publishes the number of persons and their ε
        histogram (each person at their smallest ε), the analogues of n and the ε histogram
        of the one-report model (:mod:`hdp_spark.core.privacy_unit.ldp`); this reads the id
        and ε columns only and its output is a function of exactly those. The reports are
        never read: every row holds the same constant report, so which row a person keeps
        (a fresh key orders identical rows) changes nothing.
    """
    columns: list[Any] = []
    rows: list[tuple[Any, ...]] = []
    for spec in specs:
        public = engine.public([unit.column, spec.eps], {spec.report: LDP_CONSTANT_REPORT})
        bounded = public.ldp_bounded(unit, spec, ReleaseKey.fresh())
        try:
            _, columns, part = explain_ldp_means(bounded, [spec], by=None, keys=None)
        finally:
            close = getattr(bounded, "close", None)
            if close is not None:
                close()
        rows.extend(part)
    return (), columns, rows


def explain_user_means_public(engine: Engine, specs: Sequence[Any], *, by: Any, keys: Any
                              ) -> Explained:
    """Explain user-level means on the user id, ε and group columns (each value column
    replaced by a constant).

    Privacy:
        The value columns are never read: see
        :func:`hdp_spark.explain.explain_user_means`.
    """
    read = [*(c for u in specs for c in (u.user, u.eps)), *normalize_by(by)]
    public = engine.public(read, {u.column: float(u.lower) for u in specs
                                  if u.column not in read})
    return explain_user_means(public, specs, by=by, keys=keys)
