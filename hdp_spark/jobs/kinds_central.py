r"""The heterogeneous-DP kinds of a job: ``mean``, ``histogram``, ``user_mean`` and the LDP
aggregation ``ldp_mean`` (tracker issues 16, 19).

Each release runs through the core pipeline (:func:`~hdp_spark.core.kernels.release_specs`)
on the engine the job's adapter hands out, and its wide output columns are those of the
kernels' :class:`~hdp_spark.core.pipeline.OutputField`\ s. How each kind is charged by the
ledger is stated next to its ``effective`` table below and in ``docs/jobs.md`` ("Charging
rules per kind"). A wrong charge is a privacy breach: every ``effective`` value here is an
upper bound of the privacy loss the mechanism's own proof gives the charged unit.

Noise keys: a release of the runner calls each kind once with the seed
``<unsafe_seed>/<release>/<kind>``; the mean and LDP kinds release all their specs in one
call under it, the histogram and user-mean kinds one call per spec under
``<seed>/<name>``: that is how their seeded numbers were bound from the start, and a
published number for a given seed never changes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.core.histogram.release import check_histogram_options
from hdp_spark.core.kernels import HistogramKernel, mean_release, release_specs
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.ldp.release import LdpReleaseResult, validate_ldp_specs
from hdp_spark.core.levels import EPS_CAP
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.user_mean.release import UserMeanRelease
from hdp_spark.errors import ParameterError
from hdp_spark.jobs.kind import (
    AggregatorKind,
    Interval,
    Key,
    KindResult,
    ReleaseAdapter,
    keywords,
    parse_grid,
    require,
)

__all__ = ["CENTRAL", "HISTOGRAM", "LDP_MEAN", "MEAN", "USER_MEAN", "HistogramEntry", "LdpEntry"]


def _keys_arg(keys: tuple[Key, ...] | None) -> list[Key] | None:
    return list(keys) if keys is not None else None


def _build_mean(params: Mapping[str, Any]) -> MeanSpec:
    from hdp_spark import hdp_mean

    p = dict(params)
    require(p, "column", "eps", "lower", "upper")
    column, eps = p.pop("column"), p.pop("eps")
    lower, upper = p.pop("lower"), p.pop("upper")
    if "eps_grid" in p:
        p["eps_grid"] = parse_grid(p["eps_grid"])
    return hdp_mean(column, eps=eps, lower=lower, upper=upper, **p)


def _release_mean(
    adapter: ReleaseAdapter,
    df: Any,
    specs: Sequence[Any],
    by: tuple[str, ...],
    keys: tuple[Key, ...] | None,
    unsafe_seed: str | None,
) -> KindResult:
    result = mean_release(adapter.engine(df), specs, by=list(by) or None,
                          keys=_keys_arg(keys), unsafe_seed=unsafe_seed)
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    tau: dict[str, dict[Key, float]] = {}
    for spec in specs:
        per = result.results[spec.name]
        effective[spec.name] = {
            (key, lv.eps): lv.eps_effective for key in result.keys for lv in per[key].levels
        }
        tau[spec.name] = {key: per[key].tau for key in result.keys}
    return KindResult(result.rows(), effective, tau)


def _describe_dataclass(spec: Any) -> Mapping[str, Any]:
    return dataclasses.asdict(spec)


MEAN = AggregatorKind(
    name="mean",
    build=_build_mean,
    release=_release_mean,
    eps_column=lambda s: s.eps,
    eps_grid=lambda s: s.eps_grid,
    output_name=lambda s: s.name,
    intervals=lambda s: (Interval(s.name, s.name, s.name + "_ci_low", s.name + "_ci_high"),),
    describe=_describe_dataclass,
    numeric_columns=lambda s: (s.column,),
    parameters=keywords("hdp_mean"),
)
"""Heterogeneous-DP mean (:func:`hdp_spark.hdp_mean`); parameters as its keywords."""


@dataclass(frozen=True, slots=True)
class HistogramEntry:
    """A histogram aggregator of a job: its spec and the release option ``project``."""

    spec: Any
    project: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.project, bool):
            msg = f"`project` must be true or false, got {self.project!r}."
            raise ParameterError(msg)


def _build_histogram(params: Mapping[str, Any]) -> HistogramEntry:
    from hdp_spark import hdp_histogram

    p = dict(params)
    require(p, "column", "eps", "categories")
    column, eps, categories = p.pop("column"), p.pop("eps"), p.pop("categories")
    project = p.pop("project", False)
    if "eps_grid" in p:
        p["eps_grid"] = parse_grid(p["eps_grid"])
    return HistogramEntry(hdp_histogram(column, eps=eps, categories=categories, **p), project)


def _bin(name: str, label: object) -> str:
    return f"{name}[{label}]"


_WIDE_BIN = {"frequency": "", "ci_low": "_ci_low", "ci_high": "_ci_high"}
"""Items of a released bin (:func:`~hdp_spark.core.kernels.histogram_bin_items`) that a job
publishes, as the suffix of the bin's wide column ``<name>[<label>]``; the counts view is
not published by jobs."""


def _wide_row(kernel: HistogramKernel, spec: Any, result: Any) -> dict[str, Any]:
    """One group's histogram as wide columns, from the kernel's output fields: the list
    field (``""``) becomes ``<name>[<label>]``, ``_ci_low``, ``_ci_high`` per bin, every
    other field ``<name><suffix>``."""
    row: dict[str, Any] = {}
    for f, value in zip(kernel.fields(spec), kernel.values(spec, result), strict=True):
        if f.suffix == "":
            for cell in value:
                col = _bin(spec.name, cell["category"])
                row.update({col + suffix: cell[item] for item, suffix in _WIDE_BIN.items()})
        else:
            row[spec.name + f.suffix] = value
    return row


def _release_histogram(
    adapter: ReleaseAdapter,
    df: Any,
    entries: Sequence[Any],
    by: tuple[str, ...],
    keys: tuple[Key, ...] | None,
    unsafe_seed: str | None,
) -> KindResult:
    engine = adapter.engine(df)
    rows: list[dict[str, Any]] | None = None
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    tau: dict[str, dict[Key, float]] = {}
    for entry in entries:
        spec = entry.spec
        name = spec.name
        by_t = normalize_by(list(by) or None, [spec])
        check_histogram_options(spec, by_t, entry.project, False)
        kernel = HistogramKernel(entry.project)
        result = release_specs(
            engine, [spec], by=by_t or None, keys=_keys_arg(keys),
            unsafe_seed=f"{unsafe_seed}/{name}" if unsafe_seed else None,
            kernels={0: kernel},
        )
        per = result.results[name]
        wide = [{**dict(zip(by, key, strict=True)), **_wide_row(kernel, spec, per[key])}
                for key in result.keys]
        if rows is None:
            rows = wide
        else:
            for mine, theirs in zip(rows, wide, strict=True):
                mine.update(theirs)
        effective[name] = {
            (key, lv.eps): lv.eps_effective for key in result.keys for lv in per[key].levels
        }
        tau[name] = {key: per[key].tau for key in result.keys}
    return KindResult(rows or [], effective, tau)


def _describe_histogram(entry: Any) -> Mapping[str, Any]:
    return {**dataclasses.asdict(entry.spec), "project": entry.project}


HISTOGRAM = AggregatorKind(
    name="histogram",
    build=_build_histogram,
    release=_release_histogram,
    eps_column=lambda e: e.spec.eps,
    eps_grid=lambda e: e.spec.eps_grid,
    output_name=lambda e: e.spec.name,
    intervals=lambda e: tuple(
        Interval(str(label), _bin(e.spec.name, label), _bin(e.spec.name, label) + "_ci_low",
                 _bin(e.spec.name, label) + "_ci_high")
        for label in e.spec.labels
    ),
    describe=_describe_histogram,
    parameters=keywords("hdp_histogram", extra=("project",)),
)
"""Heterogeneous-DP histogram (:func:`hdp_spark.hdp_histogram`, Chaudhuri & Courtade); parameters as
its keywords plus ``project``. Wide output: ``<name>[<label>]`` (frequency) with ``_ci_low`` /
``_ci_high`` per released bin, then ``<name>_n``, ``_noise_scale``, ``_bias_bound``, ``_tau``,
``_method``, ``_fallback``, ``_eps_levels``."""


# -- user-level mean (Cummings et al.) --------------------------------------------------------


def _build_user_mean(params: Mapping[str, Any]) -> Any:
    from hdp_spark import hdp_user_mean

    p = dict(params)
    require(p, "column", "eps", "user", "lower", "upper")
    column, user, eps = p.pop("column"), p.pop("user"), p.pop("eps")
    lower, upper = p.pop("lower"), p.pop("upper")
    if "eps_grid" in p:
        p["eps_grid"] = parse_grid(p["eps_grid"])
    return hdp_user_mean(column, user=user, eps=eps, lower=lower, upper=upper, **p)


def _release_user_mean(
    adapter: ReleaseAdapter, df: Any, specs: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    engine = adapter.engine(df)
    rows: list[dict[str, Any]] | None = None
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for spec in specs:
        r = release_specs(
            engine, [spec], by=list(by) or None, keys=_keys_arg(keys),
            unsafe_seed=f"{unsafe_seed}/{spec.name}" if unsafe_seed else None,
        )
        result = UserMeanRelease(r.by, r.keys, spec, r.results[spec.name], r.unsafe_seed)
        mine = result.rows()
        if rows is None:
            rows = mine
        else:
            for a, b in zip(rows, mine, strict=True):
                a.update(b)
        # Charging argument (docs/user_mean.md, "Privacy"): a user of class (step, k, ε)
        # loses at most that class's `eps_effective` (<= ε). Which step a user is in
        # depends on a keyed hash of their id that the public API does not expose, so the
        # ledger charges every user of (group, ε level) the LARGEST eps_effective of any
        # class with that ε level in that group: an upper bound of their actual loss, never
        # more than their ε (<= their capped demand). Users with ε = 0 and fallback groups
        # (data-independent midpoint) are in no class and are charged 0. The runner charges
        # this ONCE per user (``unit = "user"``), not once per row.
        cells: dict[tuple[Key, float], float] = {}
        for key in result.keys:
            for c in result.results[key].classes:
                level = float(c.eps)
                for lv in ((level, math.inf) if level >= EPS_CAP else (level,)):
                    cells[(key, lv)] = max(cells.get((key, lv), 0.0), float(c.eps_effective))
        effective[spec.name] = cells
    return KindResult(rows or [], effective, {})


USER_MEAN = AggregatorKind(
    name="user_mean",
    build=_build_user_mean,
    release=_release_user_mean,
    eps_column=lambda s: s.eps,
    eps_grid=lambda s: s.eps_grid,
    output_name=lambda s: s.name,
    intervals=lambda s: (Interval(s.name, s.name, s.name + "_ci_low", s.name + "_ci_high"),),
    describe=lambda s: dataclasses.asdict(s),
    numeric_columns=lambda s: (s.column,),
    unit="user",
    user_column=lambda s: s.user,
    parameters=keywords("hdp_user_mean"),
)
"""User-level heterogeneous-DP mean (:func:`hdp_spark.hdp_user_mean`, Cummings et al.); parameters
as its keywords; ``user`` defaults to ``[input] user_id`` (and must equal it)."""


# -- LDP aggregation (Aliakbarpour et al.): post-processing -----------------------------------


@dataclass(frozen=True, slots=True)
class LdpEntry:
    """An LDP mean of a job: the spec, the declaration that its reports are randomized and
    its privacy unit (the job's user id: one report per person; None: one report is one
    person)."""

    spec: Any
    already_randomized: bool
    privacy_unit: str | None = None


def _build_ldp_mean(params: Mapping[str, Any]) -> LdpEntry:
    from hdp_spark import ldp_mean

    p = dict(params)
    require(p, "column", "eps", "mechanism")
    declared = p.pop("already_randomized", False)
    if declared is not True:
        msg = (
            "`already_randomized` must be true: the LDP aggregation adds no noise, so the "
            "job file must declare that the report column holds reports randomized on the "
            f"devices (raw values would be released exactly); got {declared!r}."
        )
        raise ParameterError(msg)
    unit = p.pop("privacy_unit", None)
    if unit is not None and (not isinstance(unit, str) or not unit):
        msg = f"`privacy_unit` must name the user id column, got {unit!r}."
        raise ParameterError(msg)
    column, eps = p.pop("column"), p.pop("eps")
    return LdpEntry(ldp_mean(column, eps=eps, **p), True, unit)


def _release_ldp_mean(
    adapter: ReleaseAdapter, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    checked = validate_ldp_specs([e.spec for e in entries])
    units = {e.privacy_unit for e in entries}  # one per release (checked when loaded)
    column = next(iter(units)) if len(units) == 1 else None
    # Under a unit, the release reads ONE report per person (a uniform choice keyed by the
    # release's key: hdp_spark.core.privacy_unit.ldp), so a person's loss to whoever reads
    # the output is at most their smallest ε, however many reports they sent.
    r = release_specs(
        adapter.engine(df), checked, by=list(by) or None, keys=_keys_arg(keys),
        already_randomized=all(e.already_randomized for e in entries),
        unit=UnitOptions(PrivacyUnit(column)) if column is not None else None,
        unsafe_seed=unsafe_seed if column is not None else None,
    )
    result = LdpReleaseResult(r.by, r.keys, checked, r.results, r.tables)
    # Charging argument (docs/ldp.md): the reports are already ε_i-LDP (randomized and
    # paid for on the devices); the aggregate is post-processing and costs nothing more,
    # with or without a privacy unit (which only lowers what the output reveals).
    # No cell is charged (the ε column is not even capped: ε must stay exact).
    return KindResult(result.rows(), {e.spec.name: {} for e in entries}, {})


LDP_MEAN = AggregatorKind(
    name="ldp_mean",
    build=_build_ldp_mean,
    release=_release_ldp_mean,
    eps_column=lambda e: e.spec.eps,
    eps_grid=lambda _e: None,
    output_name=lambda e: e.spec.name,
    intervals=lambda e: (Interval(e.spec.name, e.spec.name, e.spec.name + "_ci_low",
                                  e.spec.name + "_ci_high"),),
    describe=lambda e: {**dataclasses.asdict(e.spec),
                        "already_randomized": e.already_randomized,
                        **({"privacy_unit": e.privacy_unit} if e.privacy_unit else {})},
    numeric_columns=lambda e: (e.spec.report,),
    unit="none",
    parameters=keywords("ldp_mean", rename={"report": "column"},
                        extra=("already_randomized", "privacy_unit")),
)
"""Heterogeneous-LDP mean of already-randomized scalar reports (:func:`hdp_spark.ldp.ldp_mean`,
Aliakbarpour et al.): ``column`` (the report column), ``eps``, ``mechanism`` (``"laplace"`` or
``"rr"``),
``lower``, ``upper``, ``beta``, ``weights``, ``fallback``, ``alias``, the required
``already_randomized = true`` and ``privacy_unit`` (optional: the job's user id; one report
per person, global releases only). Charges nothing."""

CENTRAL: tuple[AggregatorKind, ...] = (MEAN, HISTOGRAM, USER_MEAN, LDP_MEAN)
"""The heterogeneous-DP kinds, in registration order."""
