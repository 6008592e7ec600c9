"""Engine-agnostic orchestration of a local-DP aggregation.

The engine computes one :class:`~hdp_spark.core.ldp.stats.LdpGroupStats` table per spec;
this module finalizes every (spec, group) on the driver and turns the results into plain
rows with documented columns. No noise is added anywhere (the reports are already private),
so there is no release key: the output is a deterministic function of the level tables,
and both engines give identical outputs for identical reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.ldp.distribution import LdpDistributionResult, finalize_ldp_distribution
from hdp_spark.core.ldp.mean import (
    LdpMeanResult,
    LdpVectorResult,
    finalize_ldp_mean,
    finalize_ldp_vector,
)
from hdp_spark.core.ldp.specs import (
    LdpDistributionSpec,
    LdpMeanSpec,
    LdpSpec,
    LdpVectorMeanSpec,
)
from hdp_spark.core.ldp.stats import CountKind, LdpGroupStats, empty_stats
from hdp_spark.errors import ParameterError

__all__ = [
    "REPORT_MARK",
    "REPORT_MARKS_ATTR",
    "LdpReleaseResult",
    "LdpResult",
    "check_randomized",
    "count_kind",
    "finalize_ldp_release",
    "output_fields",
    "report_columns",
    "report_roles",
    "validate_ldp_specs",
]

LdpResult = LdpMeanResult | LdpVectorResult | LdpDistributionResult

_COMMON_TAIL: tuple[tuple[str, str], ...] = (
    ("_n", "int"),
    ("_skipped", "int"),
    ("_weights", "str"),
    ("_fallback", "bool"),
    ("_eps_levels", "levels"),
)


def _floats(values: tuple[float, ...]) -> list[float]:
    return list(values)


@dataclass(frozen=True, slots=True)
class _Form:
    """What differs between the three local-DP aggregators, once per spec class.

    Attributes:
        head: output columns before the common tail, as (suffix, kind).
        count_kind: how per-index counts add up to rows (see ``build_ldp_groups``).
        reports: (role, spec attribute, mechanism) of each report column.
        finalize: (spec, group statistics) -> result.
        values: result -> the values of ``head``.
    """

    head: tuple[tuple[str, str], ...]
    count_kind: CountKind
    reports: tuple[tuple[str, str, str | None], ...]
    finalize: Callable[[Any, LdpGroupStats], Any]
    values: Callable[[Any], list[Any]]


_FORMS: dict[type, _Form] = {
    LdpMeanSpec: _Form(
        (("", "float"), ("_raw", "float"), ("_ci_low", "float"), ("_ci_high", "float"),
         ("_radius", "float"), ("_bias_bound", "float"), ("_mechanism", "str")),
        "rows", (("report", "report", None),), finalize_ldp_mean,
        lambda r: [r.estimate, r.raw, r.ci_low, r.ci_high, r.radius, r.bias_bound,
                   r.mechanism]),
    LdpVectorMeanSpec: _Form(
        (("", "floats"), ("_raw", "floats"), ("_ci_low", "floats"), ("_ci_high", "floats"),
         ("_radius", "float"), ("_bias_bound", "float"), ("_mechanism", "str")),
        "coordinates", (("report", "report", "duchi"),), finalize_ldp_vector,
        lambda r: [_floats(r.estimate), _floats(r.raw), _floats(r.ci_low),
                   _floats(r.ci_high), r.radius, r.bias_bound, r.mechanism]),
    LdpDistributionSpec: _Form(
        (("", "floats"), ("_raw", "floats"), ("_ci_low", "floats"), ("_ci_high", "floats"),
         ("_radius", "float"), ("_bias_bound", "float"), ("_m", "int"),
         ("_projection", "str")),
        "rows", (("index", "index", "jl"), ("sign", "sign", "jl")),
        finalize_ldp_distribution,
        lambda r: [_floats(r.estimate), _floats(r.raw), _floats(r.ci_low),
                   _floats(r.ci_high), r.radius, r.bias_bound, r.m, r.projection]),
}


def _form(spec: object) -> _Form:
    form = _FORMS.get(type(spec))
    if form is None:
        msg = (
            "aggregators must come from ldp_mean, ldp_mean_vector or ldp_distribution, "
            f"got {type(spec).__name__}."
        )
        raise ParameterError(msg)
    return form


def output_fields(spec: LdpSpec) -> tuple[tuple[str, str], ...]:
    """Output columns of ``spec`` as (suffix after the alias, kind).

    Kinds: ``float``, ``int``, ``str``, ``bool``, ``floats`` (array of doubles) and
    ``levels`` (array of {eps, n, weight} structs).
    """
    return _form(spec).head + _COMMON_TAIL


def count_kind(spec: LdpSpec) -> CountKind:
    """How the engine's per-index counts add up to rows (see ``build_ldp_groups``)."""
    return _form(spec).count_kind


def validate_ldp_specs(specs: Sequence[object]) -> tuple[LdpSpec, ...]:
    """Check the spec types and that output names are unique."""
    if not specs:
        msg = "an aggregation needs at least one aggregator, got none."
        raise ParameterError(msg)
    names: set[str] = set()
    out: list[LdpSpec] = []
    for spec in specs:
        _form(spec)
        checked: LdpSpec = spec  # type: ignore[assignment]  # its class is in _FORMS
        if checked.name in names:
            msg = f"two aggregators share the output name {checked.name!r}; set `alias`."
            raise ParameterError(msg)
        names.add(checked.name)
        out.append(checked)
    return tuple(out)


REPORT_MARK = "hdp_ldp_report"
"""Marker the simulation randomizers put on report columns: the mechanism's name.

pandas: ``DataFrame.attrs["hdp_ldp_reports"][column]``; Spark: field metadata
``{"hdp_ldp_report": mechanism}`` of the column. Checked by ``ldp_agg``."""

REPORT_MARKS_ATTR = "hdp_ldp_reports"
"""pandas ``DataFrame.attrs`` key: ``{report column: mechanism}``."""


def report_roles(spec: LdpSpec) -> tuple[tuple[str, str, str], ...]:
    """(role, column, mechanism of the randomizer that must have produced it) of each
    report column of a spec (role: ``report``, ``index`` or ``sign``)."""
    return tuple((role, str(getattr(spec, attribute)),
                  mechanism or str(getattr(spec, "mechanism")))  # noqa: B009  # ldp_mean's
                 for role, attribute, mechanism in _form(spec).reports)


def report_columns(spec: LdpSpec) -> tuple[tuple[str, str], ...]:
    """(column, mechanism of the randomizer that must have produced it) of a spec."""
    return tuple((column, mechanism) for _, column, mechanism in report_roles(spec))


def check_randomized(
    specs: Sequence[LdpSpec], marks: Mapping[str, str], already_randomized: object
) -> None:
    """Refuse to aggregate a column that no randomizer is known to have produced.

    ``ldp_agg`` adds no noise: on a column of raw values it would release the exact mean
    with an interval that looks private. Report columns written by
    :func:`hdp_spark.pandas.ldp_simulate` / :func:`hdp_spark.spark.ldp_simulate` carry
    :data:`REPORT_MARK`; reports randomized elsewhere (on the devices: the production case)
    need the caller's explicit ``already_randomized=True``.

    Raises:
        ParameterError: ``already_randomized`` is not a bool, a report column carries no
            marker (without ``already_randomized=True``), or a marker names another
            mechanism than the aggregator's.
    """
    if not isinstance(already_randomized, bool):
        msg = f"`already_randomized` must be True or False, got {already_randomized!r}."
        raise ParameterError(msg)
    for spec in specs:
        for column, mechanism in report_columns(spec):
            mark = marks.get(column)
            if mark is None:
                if already_randomized:
                    continue
                msg = (
                    f"`already_randomized`: column `{column}` carries no local randomizer's "
                    f"marker (`{REPORT_MARK}`), so it may hold raw values, and ldp_agg adds "
                    "no noise: it would release their exact statistic. Reports made by "
                    "ldp_simulate carry the marker; for reports randomized on the devices (or "
                    "anywhere else outside this library) pass `already_randomized=True` to "
                    "declare that every row is already an ε_i-LDP report."
                )
                raise ParameterError(msg)
            if mark != mechanism:
                msg = (
                    f"column `{column}` holds `{mark}` reports, but its aggregator expects "
                    f"`{mechanism}` reports; use the aggregator of the randomizer that made "
                    "the reports."
                )
                raise ParameterError(msg)


def finalize_one(spec: LdpSpec, stats: LdpGroupStats) -> LdpResult:
    """Finalize one (spec, group)."""
    out: LdpResult = _form(spec).finalize(spec, stats)
    return out


def _row_values(spec: LdpSpec, r: LdpResult) -> list[Any]:
    head = _form(spec).values(r)
    levels = [{"eps": lv.eps, "n": lv.n, "weight": lv.weight} for lv in r.levels]
    return [*head, r.n, r.skipped, r.weights, r.fallback, levels]


@dataclass(frozen=True, slots=True)
class LdpReleaseResult:
    """Everything one local-DP aggregation computed.

    Attributes:
        by: group-by columns.
        keys: group keys in output order.
        specs: the aggregators.
        results: ``results[spec.name][key]``.
        tables: the pre-finalize level tables, one per spec (engine-equality checks).
    """

    by: tuple[str, ...]
    keys: tuple[tuple[object, ...], ...]
    specs: tuple[LdpSpec, ...]
    results: Mapping[str, Mapping[tuple[object, ...], LdpResult]] = field(repr=False)
    tables: tuple[Mapping[tuple[object, ...], LdpGroupStats], ...] = field(repr=False)

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per group: group columns, then each aggregator's fields."""
        out = []
        for key in self.keys:
            row: dict[str, Any] = dict(zip(self.by, key, strict=True))
            for spec in self.specs:
                r = self.results[spec.name][key]
                values = _row_values(spec, r)
                for (suffix, _), value in zip(output_fields(spec), values, strict=True):
                    row[spec.name + suffix] = value
            out.append(row)
        return out


def finalize_ldp_release(
    specs: Sequence[LdpSpec],
    tables: Sequence[Mapping[tuple[object, ...], LdpGroupStats]],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> LdpReleaseResult:
    """Finalize every (spec, group); groups of the public key set with no rows are empty."""
    order = keys if keys is not None else ((),)
    empty = empty_stats()
    results: dict[str, dict[tuple[object, ...], LdpResult]] = {}
    for spec, table in zip(specs, tables, strict=True):
        results[spec.name] = {key: finalize_one(spec, table.get(key, empty)) for key in order}
    return LdpReleaseResult(by, order, tuple(specs), results, tuple(tables))
