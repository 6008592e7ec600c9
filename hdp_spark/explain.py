"""``explain``: the accuracy and per-row privacy of a release, before any budget is spent.

In the heterogeneous-DP model the ε column and n are public, and every weight, clip level
τ, noise scale and interval half-width of the mean (HPM/ADPM) and of the histogram (HPF)
is a function of the public ε histogram of a group alone (Chaudhuri & Courtade, *Private
Estimation When Data and Privacy Demands Are Correlated*, FORC 2025, Lemma 1 and §3;
*Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free*, ISIT 2023, §III).
So these figures can be computed from a counts-only pass over the ε and group columns,
with the same functions the release uses (:func:`~hdp_spark.core.mean.finalize.plan_mean`,
:func:`~hdp_spark.core.histogram.finalize.plan_histogram`,
:func:`~hdp_spark.core.noise.laplace_noise`), and they equal what ``agg`` then reports.

The local-DP mean (Aliakbarpour, Fallah, Roy & Stevens, *High-Probability Bounds For
Heterogeneous Local Differential Privacy*, §2.1 and §2.2: Algorithms 1 and 2) adds no noise:
its interval radius is the paper's concentration bound, a function of the ε histogram of
the usable reports. ``explain`` computes it by running the aggregation itself on the ε and
group columns with every report replaced by one constant valid report, so the radius,
weights, n and fallback equal what the release reports whenever every report is usable
(a missing or malformed report is skipped by the release, which lowers its n); the row
says ``half_width_is_bound``.

The user-level mean (Cummings, Feldman, McMillan & Talwar, *Mean Estimation with
User-level Privacy under Data Heterogeneity*, NeurIPS 2022, §4.2) is explained from the
user id, ε and group columns (:func:`explain_user_means`): group sizes, the first steps'
weights, ε and noise exactly, the final step's noise as an upper bound
(:mod:`hdp_spark.core.user_mean.explain`; ``half_width_is_bound``).

Engine-agnostic: the engines call :func:`explain_specs` (or :func:`explain_ldp_rows` on
their LDP aggregation of the public columns, or :func:`explain_user_means` on an engine
over the public columns) and materialize its rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.aggregators.registry import ExplainHook, aggregator_of, aggregators
from hdp_spark.core.baseline import is_free, single_eps_half_width
from hdp_spark.core.histogram.auto import histogram_candidate_errors, resolve_histogram
from hdp_spark.core.histogram.finalize import plan_histogram
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernels import HistogramKernel, MeanKernel, kernel_of
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.ldp.common import rr_factor
from hdp_spark.core.ldp.mean import RADIUS_SLACK, LdpMeanResult, laplace_radius
from hdp_spark.core.ldp.release import LdpReleaseResult
from hdp_spark.core.ldp.specs import LdpMeanSpec
from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.auto import AUTO, mean_candidate_errors
from hdp_spark.core.mean.finalize import LevelPrivacy, plan_mean, resolve_mean
from hdp_spark.core.mean.ldp_baseline import LDP_BASE_METHOD, ldp_noise_figures
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import laplace_noise
from hdp_spark.core.pipeline import LEVEL_ITEMS, Engine, LevelRequest, OutputField, check_names
from hdp_spark.core.reweighting import FALLBACK_BOUND, reweighting_bound, widened
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.stats import GroupStats
from hdp_spark.core.user_mean.explain import explain_user_mean
from hdp_spark.core.user_mean.spec import UserMeanSpec
from hdp_spark.errors import ParameterError

__all__ = [
    "EXPLAIN_FIELDS",
    "LDP_CONSTANT_REPORT",
    "USER_EXPLAIN_FIELDS",
    "Explained",
    "explain_group",
    "explain_hook",
    "explain_ldp_rows",
    "explain_specs",
    "explain_user_means",
]

LDP_CONSTANT_REPORT = 1.0
"""The report every row gets in ``explain``'s LDP aggregation: a valid report of both
mechanisms (a real number for Laplace, the sign +1 for randomized response)."""

EXPLAIN_FIELDS: tuple[OutputField, ...] = (
    OutputField("aggregator", "str", nullable=False),
    OutputField("kind", "str", nullable=False),
    OutputField("method", "str", nullable=False),
    OutputField("n", "int", nullable=False),
    OutputField("beta", "float", nullable=False),
    OutputField("eps_levels", "list", LEVEL_ITEMS, nullable=False),
    OutputField("tau", "float", nullable=False),
    OutputField("noise_scale", "float", nullable=False),
    OutputField("half_width", "float", nullable=False),
    OutputField("noise_half_width", "float?"),
    OutputField("bias_bound", "float?"),
    OutputField("fallback", "bool", nullable=False),
    OutputField("baseline_half_width", "float?"),
    OutputField("free_rows", "int", nullable=False),
    OutputField("half_width_is_bound", "bool", nullable=False),
    OutputField("predicted_rmse", "float", nullable=False),
    OutputField("auto_candidates", "list", (
        OutputField("method", "str"), OutputField("predicted_rmse", "float")),
        nullable=False),
)
"""Columns of an explain frame after the group columns (documented in ``explain``)."""

_CLASS_ITEMS = (
    OutputField("step", "str"), OutputField("k", "int"), OutputField("eps", "float"),
    OutputField("users", "int"), OutputField("weight", "float"),
    OutputField("eps_effective", "float"),
)

USER_EXPLAIN_FIELDS: tuple[OutputField, ...] = (
    OutputField("aggregator", "str", nullable=False),
    OutputField("kind", "str", nullable=False),
    OutputField("method", "str", nullable=False),
    *(OutputField(c, "int", nullable=False) for c in (
        "users", "rows", "users_var", "users_initial", "users_final", "users_excluded")),
    OutputField("beta", "float", nullable=False),
    *(OutputField(c, "float", nullable=False) for c in (
        "eps_var", "eps_initial", "eps_final")),
    OutputField("classes", "list", _CLASS_ITEMS, nullable=False),
    *(OutputField(c, "float", nullable=False) for c in (
        "initial_noise_scale", "initial_error", "noise_scale", "half_width")),
    OutputField("fallback", "bool", nullable=False),
    OutputField("half_width_is_bound", "bool", nullable=False),
)
"""Columns of a user-level explain frame after the group columns (documented in
``explain``)."""


@dataclass(frozen=True, slots=True)
class Explained:
    """What one (group, aggregator) of a release will publish about its accuracy.

    Attributes:
        n: rows in the group.
        levels: per ε level: eps, n, per-row weight, eps_effective (the release's
            ``_eps_levels``).
        tau: clip level (the release's ``_tau``).
        noise_scale: Laplace scale in output units (the release's ``_noise_scale``).
        half_width: half-width of the released (1 - β) interval before it is clipped to
            the output range (mean: data units; histogram: frequency):
            ``noise_half_width + bias_bound``, so the release's ``ci_low``/``ci_high`` are
            its estimate ± this, cut to the range; on a fallback, half the range (the
            release publishes the whole range).
        noise_half_width: the part of ``half_width`` that holds the noise (1 - β).
        bias_bound: the part that holds the worst-case effect of weighting rows by their ε
            (the release's ``_bias_bound``; :mod:`hdp_spark.core.reweighting`).
        fallback: the release outputs the data-independent midpoint/trivial histogram.
        baseline_half_width: the half-width a single-ε library would give with every row
            at the group's smallest positive ε (the report's baseline); None without a
            private row.
        free_rows: rows whose eps_effective is below their ε (privacy for free).
        method: the method released (for ``method="auto"``: the group's choice).
        predicted_rmse: the released method's predicted worst-case RMSE (mean: data units,
            against the group's mean; histogram: per bin) from
            :mod:`hdp_spark.core.mean.auto`; NaN for the local-DP baselines.
        candidates: for ``method="auto"``, every candidate and its predicted RMSE in
            tie-break order (the choice is the first smallest); empty otherwise.
    """

    n: int
    levels: tuple[LevelPrivacy, ...]
    tau: float
    noise_scale: float
    half_width: float
    fallback: bool
    baseline_half_width: float | None
    free_rows: int
    method: str = ""
    predicted_rmse: float = math.nan
    candidates: tuple[tuple[str, float], ...] = ()
    noise_half_width: float = math.nan
    bias_bound: float = math.nan


@dataclass(frozen=True, slots=True)
class _Figures:
    """One group's plan figures: what :func:`explain_group` reports."""

    n: int
    levels: tuple[LevelPrivacy, ...]
    tau: float
    fallback: bool
    scale: float
    half: float
    bias: float
    base_span: float | None


def _mean_figures(spec: MeanSpec, v: list[float], m: list[int]
                  ) -> tuple[Any, MeanSpec, _Figures]:
    span = float(spec.upper) - float(spec.lower)
    table = mean_candidate_errors(v, m, spec.beta, span)
    spec = resolve_mean(spec, v, m)
    mp = plan_mean(spec, v, m)
    if mp.weights is None:
        scale, half, bias = 0.0, 0.0, span * FALLBACK_BOUND
    else:
        weights = mp.weights
        bias = span * reweighting_bound(m, weights.numerators, weights.denominator)
        noise = laplace_noise(mp.weights.eta, mp.min_sensitivity)
        used = noise.scale
        if spec.method in LDP_BASE_METHOD:
            den = mp.weights.denominator
            sd, half_unit = ldp_noise_figures(
                v, m, [p / den for p in mp.weights.numerators], used, noise.granularity,
                spec.beta,
            )
            scale, half = span * sd, span * half_unit
        else:
            scale = span * (used.numerator / used.denominator)
            half = span * noise.half_width(spec.beta)
    return table, spec, _Figures(mp.n, mp.levels, mp.tau, mp.fallback, scale, half, bias,
                                 span)


def _histogram_figures(spec: HistogramSpec, v: list[float], m: list[int]
                       ) -> tuple[Any, HistogramSpec, _Figures]:
    table = histogram_candidate_errors(spec, v, m)
    spec = resolve_histogram(spec, v, m)
    hp = plan_histogram(spec, v, m)
    half = 0.0 if hp.fallback else hp.half_width
    tau = math.nan if hp.weights is None else hp.weights.tau
    return table, spec, _Figures(hp.n, hp.levels, tau, hp.fallback, hp.noise_scale, half,
                                 hp.bias_bound, None)


_FIGURES: dict[type, Any] = {MeanKernel: _mean_figures, HistogramKernel: _histogram_figures}
"""The counts-only plan of each kernel ``explain_specs`` explains."""


def explain_group(spec: MeanSpec | HistogramSpec, stats: GroupStats) -> Explained:
    """The pre-release accuracy figures of one group, from its ε histogram.

    Args:
        spec: an ``hdp_mean`` or ``hdp_histogram`` spec.
        stats: the group's level table (only levels and counts are read).

    Privacy:
        Reads the public ε histogram (levels, counts) and the spec only; draws no noise.
    """
    v, m = list(stats.levels), list(stats.counts)
    beta = spec.beta
    auto = spec.method == AUTO
    figures = _FIGURES.get(type(kernel_of(spec)))
    if figures is None:
        msg = (f"explain_group explains hdp_mean and hdp_histogram, got "
               f"{type(spec).__name__}.")
        raise ParameterError(msg)
    table, spec, f = figures(spec, v, m)
    n, levels, tau, fallback = f.n, f.levels, f.tau, f.fallback
    scale, half, bias, base_span = f.scale, f.half, f.bias, f.base_span
    free = sum(lv.n for lv in levels if is_free(lv.eps, lv.eps_effective))
    baseline = single_eps_half_width(zip(v, m, strict=True), beta, base_span)
    rmse = dict(table).get(spec.method, math.nan)
    # the released interval's half-width: noise + worst-case reweighting error, with the
    # release's rounding margin (on a fallback the whole range: half of it)
    lower, upper = aggregator_of(spec).output_range(spec)
    released = (upper - lower) / 2 if fallback else widened(half + bias, lower, upper)
    return Explained(n, levels, tau, scale, released, fallback, baseline, free,
                     spec.method, rmse, table if auto else (), half, bias)


def explain_hook(specs: Sequence[object]) -> ExplainHook:
    """The one explain hook of ``specs`` (their aggregators' descriptors).

    Raises:
        ParameterError: a spec is not an aggregator, its aggregator has no explain hook,
            or the specs need different hooks (their outputs differ: explain them in
            separate calls).

    Privacy:
        None: reads the types of public specs.
    """
    hooks: dict[int, tuple[ExplainHook, list[str]]] = {}
    for spec in specs:
        aggregator = aggregator_of(spec)
        if aggregator.explain is None:
            names = ", ".join(a.constructor_name for a in aggregators()
                              if a.explain is not None)
            msg = f"explain supports {names} so far, got {type(spec).__name__}."
            raise ParameterError(msg)
        entry = hooks.setdefault(id(aggregator.explain), (aggregator.explain, []))
        entry[1].append(aggregator.constructor_name)
    if len(hooks) > 1:
        families = " and ".join("/".join(sorted(set(names))) for _, names in hooks.values())
        msg = (f"explain takes {families} in separate calls, not both in one call (their "
               f"outputs differ); got {', '.join(type(s).__name__ for s in specs)}.")
        raise ParameterError(msg)
    if not hooks:  # the counts-only explain raises agg's error for an empty call
        return explain_specs
    return next(iter(hooks.values()))[0]


def explain_user_means(
    engine: Engine, specs: Sequence[UserMeanSpec], *, by: str | Sequence[str] | None,
    keys: Any,
) -> tuple[tuple[str, ...], list[tuple[str, OutputField]], list[tuple[Any, ...]]]:
    """Explain user-level means on ``engine``: (by columns, output columns, rows).

    ``engine`` must hold the PUBLIC columns only (user ids, ε and group columns, each
    value column replaced by a constant): its user backend then answers the census, the
    rank queries and the first stage's class counts exactly as in the release.

    Raises:
        ParameterError: as ``user_mean`` for the specs, ``by`` and ``keys``.
        SchemaError, EpsilonColumnError: as ``user_mean`` for the user, ε and group
            columns.

    Privacy:
        Spends nothing, draws no noise, writes nothing; a function of the public census
        (users per group, k, ε), the public order keys and the specs.
    """
    if isinstance(keys, SelectKeys):
        msg = "`explain` does not support `keys=select_keys(...)`: pass a public key set."
        raise ParameterError(msg)
    check_names(specs)
    by_t = normalize_by(by, specs)
    found = engine.release_keys(keys, by_t)
    order = found if found is not None else ((),)
    rows: list[tuple[Any, ...]] = []
    plans = {}
    for spec in specs:
        with engine.users(spec, by_t, order) as backend:
            plans[spec.name] = explain_user_mean(spec, backend, order)
    for key in order:
        for spec in specs:
            p = plans[spec.name][key]
            classes = [{"step": c.step, "k": c.k, "eps": c.eps, "users": c.users,
                        "weight": c.weight, "eps_effective": c.eps_effective}
                       for c in p.classes]
            rows.append((*key, spec.name, "user_mean", spec.cap, p.users, p.rows,
                         p.users_var, p.users_initial, p.users_final, p.users_excluded,
                         float(spec.beta), p.eps_var, p.eps_initial, p.eps_final, classes,
                         p.initial_noise_scale, p.initial_error, p.noise_scale,
                         p.half_width, p.fallback, p.bound))
    return by_t, [(f.suffix, f) for f in USER_EXPLAIN_FIELDS], rows


def _ldp_baseline(spec: LdpMeanSpec, levels: Sequence[tuple[float, int]]) -> float | None:
    """The radius of the same LDP mean with every report at the group's smallest ε."""
    kept = [(e, n) for e, n in levels if n > 0 and 0 < e < math.inf]
    if not kept:
        return None
    n, e = sum(c for _, c in kept), min(x for x, _ in kept)
    half = (float(spec.upper) - float(spec.lower)) / 2.0
    if spec.mechanism == "laplace":
        unit = laplace_radius([1.0 / n], [e], [n], spec.beta)
    else:
        c = rr_factor(e)
        unit = math.sqrt(2.0 * math.log(2.0 / spec.beta) * n * (c / n) ** 2)
    return half * (unit + RADIUS_SLACK)


def explain_ldp_rows(result: LdpReleaseResult) -> list[tuple[Any, ...]]:
    """Explain rows of an LDP aggregation of the public columns (constant reports).

    Privacy:
        A function of the ε histograms of the groups and the specs only (the reports
        were replaced by a constant); adds no noise.
    """
    rows: list[tuple[Any, ...]] = []
    for key in result.keys:
        for spec in result.specs:
            if not isinstance(spec, LdpMeanSpec):  # validated by ldp_specs
                msg = "explain supports scalar ldp_mean only"
                raise ParameterError(msg)
            r = result.results[spec.name][key]
            if not isinstance(r, LdpMeanResult):
                msg = "unexpected LDP result"
                raise ParameterError(msg)
            levels = [{"eps": lv.eps, "n": lv.n, "weight": lv.weight,
                       "eps_effective": lv.eps} for lv in r.levels]
            baseline = _ldp_baseline(spec, [(lv.eps, lv.n) for lv in r.levels])
            rows.append((*key, spec.name, "ldp_mean", spec.mechanism, r.n, float(spec.beta),
                         levels, math.nan, 0.0, r.radius + r.bias_bound, r.radius,
                         r.bias_bound, r.fallback, baseline,
                         0, True,
                         math.nan, []))
    return rows


def _central(spec: object) -> Any:
    """``spec`` if ``explain_specs`` can explain it (a mean or histogram kernel)."""
    if type(kernel_of(spec)) not in _FIGURES:
        msg = (f"explain_specs explains hdp_mean and hdp_histogram, got "
               f"{type(spec).__name__}.")
        raise ParameterError(msg)
    return spec


def explain_specs(
    engine: Engine, specs: Sequence[object], *, by: str | Sequence[str] | None, keys: Any
) -> tuple[tuple[str, ...], list[tuple[str, OutputField]], list[tuple[Any, ...]]]:
    """Explain ``specs`` on ``engine``: (by columns, output columns, rows).

    One counts-only cell pass per (ε column, grid): a :class:`LevelRequest` without specs,
    i.e. row counts per (group, ε level), never a value or category column.

    Raises:
        ParameterError: as ``agg`` for the specs, ``by`` and ``keys``; also for aggregators
            ``explain`` does not support yet.
        SchemaError, EpsilonColumnError: as ``agg`` for the ε and group columns.

    Privacy:
        Spends nothing and writes nothing: reads the ε and group columns (public in this
        model) and the caller's public key set; the output is a function of the per-group
        ε histograms, the specs and the key set.
    """
    if isinstance(keys, SelectKeys):
        msg = "`explain` does not support `keys=select_keys(...)` yet: pass a public key set."
        raise ParameterError(msg)
    specs_t = tuple(_central(s) for s in specs)
    check_names(specs_t)
    by_t = normalize_by(by, specs_t)
    found = engine.release_keys(keys, by_t)
    order = found if found is not None else ((),)
    passes: dict[tuple[str, EpsGrid | None], int] = {}
    for spec in specs_t:
        passes.setdefault((spec.eps, spec.eps_grid), len(passes))
    requests = [LevelRequest(eps, grid, ()) for eps, grid in passes]
    tables = engine.cells(requests, by_t, found)
    empty = GroupStats(())
    rows: list[tuple[Any, ...]] = []
    for key in order:
        for spec in specs_t:
            table = tables[passes[(spec.eps, spec.eps_grid)]]
            e = explain_group(spec, table.get(key, empty))
            levels = [{"eps": lv.eps, "n": lv.n, "weight": lv.weight,
                       "eps_effective": lv.eps_effective} for lv in e.levels]
            kind = aggregator_of(spec).name
            rows.append((*key, spec.name, kind, e.method, e.n, float(spec.beta), levels,
                         e.tau, e.noise_scale, e.half_width, e.noise_half_width,
                         e.bias_bound, e.fallback,
                         e.baseline_half_width, e.free_rows, False, e.predicted_rmse,
                         [{"method": c, "predicted_rmse": r} for c, r in e.candidates]))
    return by_t, [(f.suffix, f) for f in EXPLAIN_FIELDS], rows
