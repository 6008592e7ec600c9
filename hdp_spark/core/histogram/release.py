"""Engine-agnostic orchestration of one histogram release.

The engine returns rows ``(group key, ε level, category code, count)``; this module builds
the per-group level tables (:func:`build_histogram_groups`), finalizes every public key
with one release key (:func:`finalize_histogram_release`) and lays the result out as a long
table, one row per (group, released bin) (:meth:`HistogramRelease.rows`). Backends turn
those rows into a native, materialized table, so reading the output never re-runs the
mechanism.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.histogram.auto import resolve_histograms
from hdp_spark.core.histogram.batch import finalize_histograms
from hdp_spark.core.histogram.finalize import HistogramResult
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import LEVEL_ITEMS, OutputField
from hdp_spark.core.stats import GroupStats, build_groups
from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "COUNT_COLUMNS",
    "HISTOGRAM_COLUMNS",
    "HistogramRelease",
    "build_histogram_groups",
    "check_histogram_options",
    "finalize_histogram_release",
    "long_fields",
]

HISTOGRAM_COLUMNS: tuple[str, ...] = (
    "category",
    "frequency",
    "noise_scale",
    "ci_low",
    "ci_high",
    "bias_bound",
    "n",
    "method",
    "tau",
    "fallback",
    "eps_levels",
)
"""Output columns after the group columns (documented in ``hdp_histogram``)."""

COUNT_COLUMNS: tuple[str, ...] = ("count", "count_ci_low", "count_ci_high")
"""Extra columns of the counts view (``counts=True``): frequency columns × n."""


def long_fields(spec: HistogramSpec, counts: bool) -> tuple[OutputField, ...]:
    """Columns of the long histogram table (one row per group and bin) after the groups."""
    kinds = {"category": "str" if spec.kind == "str" else "int", "n": "int", "method": "str",
             "fallback": "bool"}
    out = [
        OutputField(name, "list", LEVEL_ITEMS, nullable=False) if name == "eps_levels"
        else OutputField(name, kinds.get(name, "float"), nullable=False)
        for name in (*HISTOGRAM_COLUMNS, *(COUNT_COLUMNS if counts else ()))
    ]
    return tuple(out)


def check_histogram_options(
    spec: object, by: tuple[str, ...], project: object, counts: object
) -> HistogramSpec:
    """Validate the public options of a histogram release before any data is read."""
    if not isinstance(spec, HistogramSpec):
        msg = f"`spec` must come from hdp_histogram(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    if not isinstance(project, bool):
        msg = f"`project` must be True or False, got {project!r}."
        raise ParameterError(msg)
    if not isinstance(counts, bool):
        msg = f"`counts` must be True or False, got {counts!r}."
        raise ParameterError(msg)
    if project and spec.other is None:
        msg = (
            "`project=True` needs an `other` bin: with other=None the out-of-domain share "
            "is not released, so the released bins need not sum to 1."
        )
        raise ParameterError(msg)
    taken = set(HISTOGRAM_COLUMNS) | (set(COUNT_COLUMNS) if counts else set())
    clash = [c for c in by if c in taken]
    if clash:
        msg = f"`by` columns must not be named like an output column; got {clash!r}."
        raise ParameterError(msg)
    return spec


def build_histogram_groups(
    spec: HistogramSpec, cells: Iterable[tuple[tuple[object, ...], float, int, int]]
) -> dict[tuple[object, ...], GroupStats]:
    """Assemble engine rows ``(key, level, code, count)`` into per-group level tables.

    Each level row's ``totals`` are the counts of codes 0..k₀ (k₀ = unmatched).

    Raises:
        EpsilonColumnError: if any row carried an invalid ε (a count, never values).
    """
    width = len(spec.categories) + 1
    acc: dict[tuple[tuple[object, ...], float], list[int]] = {}
    for key, level, code, count in cells:
        if not 0 <= code < width:
            msg = "category code out of range"
            raise InternalError(msg)
        row = acc.setdefault((key, float(level)), [0] * width)
        row[code] += int(count)
    return build_groups(
        spec.eps, ((key, level, sum(t), t) for (key, level), t in acc.items())
    )


@dataclass(frozen=True, slots=True)
class HistogramRelease:
    """Everything one histogram release computed.

    Attributes:
        by: group-by columns.
        keys: group keys in output order (``((),)`` for a global release).
        spec: the histogram.
        results: ``results[key]`` is the released histogram of one group.
        project: frequencies are projected onto the simplex.
        counts: the counts view is included.
        unsafe_seed: True if the noise came from a caller's seed (not private).
    """

    by: tuple[str, ...]
    keys: tuple[tuple[object, ...], ...]
    spec: HistogramSpec
    results: Mapping[tuple[object, ...], HistogramResult] = field(repr=False)
    project: bool = False
    counts: bool = False
    unsafe_seed: bool = False

    @property
    def columns(self) -> list[str]:
        """Output column names, in order."""
        return [*self.by, *HISTOGRAM_COLUMNS, *(COUNT_COLUMNS if self.counts else ())]

    def fields(self) -> list[tuple[str, OutputField]]:
        """The long table's columns after the group columns (the one description)."""
        return [(f.suffix, f) for f in long_fields(self.spec, self.counts)]

    def tuples(self) -> list[tuple[Any, ...]]:
        """:meth:`rows` as tuples: group values, then :meth:`fields` in order."""
        names = [*self.by, *(n for n, _ in self.fields())]
        return [tuple(r[n] for n in names) for r in self.rows()]

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per (group, released bin)."""
        out = []
        for key in self.keys:
            r = self.results[key]
            levels = [
                {"eps": lv.eps, "n": lv.n, "weight": lv.weight, "eps_effective": lv.eps_effective}
                for lv in r.levels
            ]
            freqs = r.frequencies(self.project)
            for label, freq, (lo, hi) in zip(r.labels, freqs, r.intervals(), strict=True):
                row: dict[str, Any] = dict(zip(self.by, key, strict=True))
                row.update(
                    category=label,
                    frequency=freq,
                    noise_scale=r.noise_scale,
                    ci_low=lo,
                    ci_high=hi,
                    bias_bound=r.bias_bound,
                    n=r.n,
                    method=r.method,
                    tau=r.tau,
                    fallback=r.fallback,
                    eps_levels=[dict(x) for x in levels],
                )
                if self.counts:
                    row.update(count=freq * r.n, count_ci_low=lo * r.n, count_ci_high=hi * r.n)
                out.append(row)
        return out


def finalize_histogram_release(
    spec: HistogramSpec,
    table: Mapping[tuple[object, ...], GroupStats],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
    release_key: ReleaseKey,
    project: bool = False,
    counts: bool = False,
) -> HistogramRelease:
    """Finalize every group of a histogram release.

    Args:
        spec: the histogram.
        table: per-group level tables (from :func:`build_histogram_groups`).
        by: group-by columns.
        keys: the public key set (None for a global release). Every key gets all bins,
            empty groups included; keys outside the set never appear.
        release_key: the release's secret key.
        project: project each group's frequencies onto the simplex.
        counts: add the counts view.

    Privacy:
        One release: every public key is finalized once with ``release_key``; see
        :func:`~hdp_spark.core.histogram.finalize_histogram`.
    """
    check_histogram_options(spec, by, project, counts)
    order = keys if keys is not None else ((),)
    empty = GroupStats(())
    tables = [table.get(key, empty) for key in order]
    specs = resolve_histograms(spec, tables)  # "auto": every choice in one prediction
    # every bin of every group drawn in one call (the per-group finalize's results)
    done = finalize_histograms(specs, tables, release_key, order)
    results: dict[tuple[object, ...], HistogramResult] = dict(zip(order, done, strict=True))
    return HistogramRelease(by, order, spec, results, project, counts, release_key.unsafe)

