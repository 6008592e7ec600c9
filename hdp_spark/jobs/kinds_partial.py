"""The partial-DP kinds of a job (Ghazi et al.): ``heavy_hitters``, ``attribute_histograms``,
``marginals`` and ``mwem`` (tracker issue 19).

One global ε per person (``unit = "person"``), no ``by``. Heavy hitters, marginals and MWEM
release through the core pipeline on the engine the job's adapter hands out; attribute
histograms through the front's ``attribute_histograms`` on that engine. Each spec is one
call under the seed ``<seed>/<name>`` (unchanged since the kinds were written). How each
kind is charged is stated next to its ``effective`` table below and in ``docs/jobs.md``
("Charging rules per kind").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.core.kernels import HeavyHittersKernel, MarginalsKernel, release_specs
from hdp_spark.core.partial.mwem import MWEM_COLUMNS
from hdp_spark.core.partial.projection import MARGINAL_COLUMNS
from hdp_spark.errors import InternalError, ParameterError
from hdp_spark.front import partial as front_partial
from hdp_spark.jobs.kind import (
    AggregatorKind,
    Key,
    KindResult,
    ReleaseAdapter,
    require,
)
from hdp_spark.jobs.values import plain

__all__ = ["ATTRIBUTE_HISTOGRAMS", "HEAVY_HITTERS", "MARGINALS", "MWEM", "PARTIAL", "PartialEntry"]


# -- partial DP: heavy hitters and attribute histograms (Ghazi et al.) ------------------------


@dataclass(frozen=True, slots=True)
class PartialEntry:
    """A partial-DP aggregator of a job: its parameters and output name.

    Attributes:
        name: output column prefix (``alias``; default the kind's name).
        params: the keywords of the public function (``cols``, ``domains``, ``eps0``, ...).
        spec: the validated spec (heavy hitters) or None (attribute histograms, whose
            public function takes keywords).
        eps_person: the per-person ε demand (a function of the parameters only).
    """

    name: str
    params: Mapping[str, Any]
    spec: Any
    eps_person: float


_HH_KEYS = {"cols", "domains", "eps0", "delta", "threshold", "count_fraction", "other",
            "failure_prob", "beta", "privacy_unit", "max_candidates", "leaf_thresholding",
            "max_rows"}
_AH_KEYS = {"cols", "domains", "eps0", "other", "beta", "privacy_unit", "max_rows"}


def _partial_params(
    params: Mapping[str, Any], allowed: set[str]
) -> tuple[str | None, dict[str, Any]]:
    p = dict(params)
    p.pop("eps", None)  # the job's default ε column: these kinds take one global ε₀
    alias = p.pop("alias", None)
    if alias is not None and (not isinstance(alias, str) or not alias):
        msg = f"`alias` must be a non-empty name, got {alias!r}."
        raise ParameterError(msg)
    unknown = sorted(set(p) - allowed)
    if unknown:
        msg = f"accepts only {', '.join(sorted(allowed | {'alias'}))}; got {unknown!r}."
        raise ParameterError(msg)
    require(p, "cols", "domains", "eps0")
    if not isinstance(p["cols"], list | tuple) or not all(isinstance(c, str) for c in p["cols"]):
        msg = f"`cols` must be a list of column names, got {p['cols']!r}."
        raise ParameterError(msg)
    p["cols"] = tuple(p["cols"])
    return alias, p


def _build_heavy_hitters(params: Mapping[str, Any]) -> PartialEntry:
    from hdp_spark import hdp_heavy_hitters

    alias, p = _partial_params(params, _HH_KEYS)
    cols = p.pop("cols")
    spec = hdp_heavy_hitters(cols, **p)
    # The per-person ε of the report (Ghazi et al. conversion: min(d·ε_tree, 2·N/t) + ε_count,
    # N = N_int, plus d with leaf thresholding), a function of the parameters only.
    return PartialEntry(alias or "heavy_hitters", {"cols": cols, **p}, spec,
                        float(spec.budget.eps_person))


def _build_attribute_histograms(params: Mapping[str, Any]) -> PartialEntry:
    alias, p = _partial_params(params, _AH_KEYS)
    eps0 = p["eps0"]
    if isinstance(eps0, bool) or not isinstance(eps0, int | float) or not (
            math.isfinite(eps0) and eps0 > 0):
        msg = f"`eps0` must be a finite number > 0, got {eps0!r}."
        raise ParameterError(msg)
    from hdp_spark.core.partial.spec import check_max_rows

    check_max_rows(p.get("max_rows", 1), p.get("privacy_unit"))
    # Basic composition over the d column histograms, each (2R/b)-DP with b >= 2R/ε₀
    # (R = max_rows): d·ε₀ bounds the report's eps_person (d·2R/b) from above.
    return PartialEntry(alias or "attribute_histograms", p, None, len(p["cols"]) * float(eps0))


def _report_dict(report: Any) -> dict[str, Any]:
    from hdp_spark.jobs.outputs import json_safe

    d: dict[str, Any] = json_safe(report.as_dict())
    return d


def _partial_effective(entry: PartialEntry, eps_person: float) -> dict[tuple[Key, float], float]:
    # Charging argument (docs/partial_dp.md, "Per-person conversion"): a person whose whole
    # record changes loses at most the report's eps_person; every person read by the
    # release is charged it (uniform). The runner puts the demand `entry.eps_person`
    # (>= the report's value) in a helper ε column: persons whose remaining budget is
    # below it get ε 0 there and are NOT read by the release (charged 0: cell 0.0).
    if eps_person > entry.eps_person * (1 + 1e-12):
        msg = "the release's per-person ε exceeds its stated demand"
        raise InternalError(msg)
    return {((), entry.eps_person): eps_person, ((), 0.0): 0.0}


def _records(adapter: ReleaseAdapter, table: Any) -> list[dict[str, Any]]:
    """A released table's rows; a NaN cell (pandas' null of a float column) is None."""
    return [{k: plain(v, nan_as_null=True) for k, v in r.items()}
            for r in adapter.to_records(table)]


def _coded_release(adapter: ReleaseAdapter, df: Any, spec: Any, kernel: Any,
                   unsafe_seed: str | None) -> tuple[list[dict[str, Any]], Any]:
    """One heavy-hitters or marginals release through the core pipeline: its table's
    records (the kernel's items, materialized by the engine) and its public report."""
    engine = adapter.engine(df)
    result = release_specs(engine, [spec], unsafe_seed=unsafe_seed).results[spec.name][()]
    columns = [(f.suffix, f) for f in kernel.items(spec)]
    table = engine.materialize((), columns, kernel.table_rows(spec, result),
                               result.report.unsafe_seed)
    return _records(adapter, table), result.report


def _release_heavy_hitters(
    adapter: ReleaseAdapter, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    rows = _RowCount(adapter, df)
    row: dict[str, Any] = {}
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for entry in entries:
        table, report = _coded_release(
            adapter, df, entry.spec, HeavyHittersKernel(),
            f"{unsafe_seed}/{entry.name}" if unsafe_seed else None,
        )
        records = [
            {**{c: (None if r[c] is None else str(r[c])) for c in entry.params["cols"]},
             "noisy_count": r["noisy_count"], "count_ci_low": r["count_ci_low"],
             "count_ci_high": r["count_ci_high"]}
            for r in table
        ]
        rep = _report_dict(report)
        row.update(_partial_row(entry, rows.of(entry), records, rep))
        effective[entry.name] = _partial_effective(entry, float(report.eps_person))
    return KindResult([row], effective, {})


class _RowCount:
    """The input's row count, published as ``<name>_n`` by an aggregator without a
    privacy unit (n is public there), counted once and only if one needs it. Under a
    privacy unit a person's number of rows is private, so nothing publishes it (no
    ``_n``; the marginals' and MWEM's reports hold a DP estimate instead)."""

    def __init__(self, adapter: ReleaseAdapter, df: Any) -> None:
        self._adapter, self._df = adapter, df
        self._n: int | None = None

    def of(self, entry: PartialEntry) -> int | None:
        """``_n`` of ``entry``: the row count, or None under a privacy unit."""
        if entry.params.get("privacy_unit") is not None:
            return None
        if self._n is None:
            self._n = int(self._adapter.count(self._df))
        return self._n


def _partial_row(
    entry: PartialEntry, n: int | None, records: list[dict[str, Any]], rep: dict[str, Any]
) -> dict[str, Any]:
    name = entry.name
    return {
        f"{name}_records": records,
        **({} if n is None else {f"{name}_n": n}),
        f"{name}_eps0": rep["eps0"],
        f"{name}_eps_attribute": rep["eps_attribute"],
        f"{name}_eps_person": rep["eps_person"],
        f"{name}_eps_person_conversion": rep["eps_person_conversion"],
        f"{name}_report": json.dumps(rep, sort_keys=True),
    }


def _release_attribute_histograms(
    adapter: ReleaseAdapter, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    rows = _RowCount(adapter, df)
    row: dict[str, Any] = {}
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for entry in entries:
        p = dict(entry.params)
        cols = p.pop("cols")
        out = front_partial.attribute_histograms(
            adapter.engine(df), list(cols), **p,
            unsafe_seed=f"{unsafe_seed}/{entry.name}" if unsafe_seed else None,
        )
        records = [
            {"attribute": r["attribute"], "value": r["value"], "code": r["code"],
             "noisy_count": r["noisy_count"], "count_ci_low": r["count_ci_low"],
             "count_ci_high": r["count_ci_high"]}
            for r in _records(adapter, out.table)
        ]
        report: Any = out.report
        rep = _report_dict(report)
        row.update(_partial_row(entry, rows.of(entry), records, rep))
        effective[entry.name] = _partial_effective(entry, float(report.eps_person))
    return KindResult([row], effective, {})


def _describe_partial(entry: Any) -> Mapping[str, Any]:
    return {"alias": entry.name, **{k: entry.params[k] for k in sorted(entry.params)}}


def _person_kind(name: str, build: Any, release: Any, keys: set[str]) -> AggregatorKind:
    """A partial-DP kind: global only, every person charged the same per-person ε;
    ``keys`` are its parameters (plus ``alias``, and ``eps``, which it ignores)."""
    accepted = frozenset(keys | {"alias", "eps"})
    return AggregatorKind(
        name=name,
        build=build,
        release=release,
        eps_column=lambda e: f"__eps_person_{e.name}",
        eps_grid=lambda _e: None,
        output_name=lambda e: e.name,
        intervals=lambda _e: (),
        describe=_describe_partial,
        unit="person",
        uniform_eps=lambda e: e.eps_person,
        grouped=False,
        parameters=lambda: accepted,
    )


HEAVY_HITTERS = _person_kind("heavy_hitters", _build_heavy_hitters, _release_heavy_hitters,
                             _HH_KEYS)
"""Partial-DP heavy hitters (:func:`hdp_spark.hdp_heavy_hitters`, Ghazi et al.): parameters as
its keywords (``cols``, ``domains``, ``eps0``, ...) plus ``alias``. One output row:
``<name>_records`` (released records with ``noisy_count`` and its interval), ``_n``,
``_eps0``, ``_eps_attribute``, ``_eps_person``, ``_eps_person_conversion``, ``_report``
(the public report as JSON)."""

ATTRIBUTE_HISTOGRAMS = _person_kind(
    "attribute_histograms", _build_attribute_histograms, _release_attribute_histograms, _AH_KEYS
)
"""Per-attribute histograms (:func:`hdp_spark.pandas.attribute_histograms`, Ghazi et al.):
``cols``, ``domains``, ``eps0``, ``other``, ``beta``, ``privacy_unit``, ``max_rows``,
``alias``. Output as heavy hitters, the records being (attribute, value, code, noisy count,
interval)."""


# -- partial DP under zCDP: marginals (projection mechanism) and MWEM (Ghazi et al.) ----------

_MARGINALS_KEYS = {"cols", "domains", "eps0", "k", "marginals", "other", "delta", "max_domain",
                   "tol", "max_iter", "privacy_unit", "max_rows"}
_MWEM_KEYS = {"cols", "domains", "eps0", "k", "marginals", "rounds", "per_round", "other",
              "delta", "max_domain", "max_tuples", "privacy_unit", "max_rows"}


def _zcdp_eps(rho: float, delta: float) -> float:
    """The ε the ledger charges for a ρ-zCDP guarantee: ρ-zCDP ⇒ (ε, δ)-DP with ε of
    Canonne, Kamath & Steinke 2020 (``accounting.eps_cks20``; any order α gives a valid
    bound, so an inexact minimisation only over-charges)."""
    from hdp_spark.core.partial import accounting

    return float(accounting.eps_cks20(rho, delta))


def _build_marginals(params: Mapping[str, Any]) -> PartialEntry:
    from hdp_spark import hdp_marginals

    alias, p = _partial_params(params, _MARGINALS_KEYS | {"beta"})
    cols = p.pop("cols")
    beta = p.pop("beta", 0.05)
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0 < beta < 1:
        msg = f"`beta` must be in (0, 1), got {beta!r}."
        raise ParameterError(msg)
    spec = hdp_marginals(cols, **p)
    # Per person ρ = |W|/σ² (Theorem 11's ε₀·Δ/Δ₀ in zCDP form), charged as its (ε, δ)
    # conversion at the spec's δ: a function of the parameters only.
    return PartialEntry(alias or "marginals", {"cols": cols, "beta": beta, **p}, spec,
                        _zcdp_eps(spec.budget.rho_person, spec.delta))


def _build_mwem(params: Mapping[str, Any]) -> PartialEntry:
    from hdp_spark import hdp_mwem

    alias, p = _partial_params(params, _MWEM_KEYS)
    cols = p.pop("cols")
    spec = hdp_mwem(cols, **p)
    # Per person ρ <= (ℓ² + ℓ)ε₀²/4 whatever T (the report's ρ uses the rounded ε_T and is
    # at most this), charged as its (ε, δ) conversion at the spec's δ.
    return PartialEntry(alias or "mwem", {"cols": cols, **p}, spec,
                        _zcdp_eps(spec.rho_person, spec.delta))


def _zcdp_row(
    entry: PartialEntry, n: int | None, records: list[dict[str, Any]], rep: dict[str, Any],
    rho_attribute: float, rho_person: float,
) -> dict[str, Any]:
    name, delta = entry.name, float(entry.spec.delta)
    return {
        f"{name}_records": records,
        **({} if n is None else {f"{name}_n": n}),
        f"{name}_eps0": float(entry.spec.eps0),
        f"{name}_rho_attribute": rho_attribute,
        f"{name}_rho_person": rho_person,
        f"{name}_delta": delta,
        f"{name}_eps_attribute": _zcdp_eps(rho_attribute, delta),
        f"{name}_eps_person": _zcdp_eps(rho_person, delta),
        f"{name}_eps_person_conversion": (
            "zCDP (rho_person) converted to (eps, delta)-DP at delta = "
            f"{delta:g} by Canonne-Kamath-Steinke 2020; the ledger charges eps_person"),
        f"{name}_report": json.dumps(rep, sort_keys=True),
    }


def _cell_records(table: list[dict[str, Any]], cols: Sequence[str], value_cols: Sequence[str]
                  ) -> list[dict[str, Any]]:
    return [
        {"marginal": r["marginal"],
         **{c: (None if r[c] is None else str(r[c])) for c in cols},
         **{c: r[c] for c in value_cols}}
        for r in table
    ]


def _release_zcdp(adapter: ReleaseAdapter, df: Any, entries: Sequence[Any], unsafe_seed: str | None,
                  which: str) -> KindResult:
    from hdp_spark.jobs.outputs import json_safe

    rows = _RowCount(adapter, df)
    row: dict[str, Any] = {}
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for entry in entries:
        seed = f"{unsafe_seed}/{entry.name}" if unsafe_seed else None
        if which == "marginals":
            table, report = _coded_release(adapter, df, entry.spec, MarginalsKernel(), seed)
            records = _cell_records(table, entry.params["cols"], MARGINAL_COLUMNS)
            rep = _report_dict(report)
            rho_attr, rho_person = report.rho_attribute, report.rho_person
        else:
            out = front_partial.mwem(adapter.engine(df), entry.spec, unsafe_seed=seed)
            records = _cell_records(_records(adapter, out.table), entry.params["cols"],
                                    MWEM_COLUMNS)
            summary: Any = out.report  # MWEM's report is a dict
            rep = json_safe(dict(summary))
            rho_attr, rho_person = summary["rho_attribute"], summary["rho_person"]
            if entry.spec.privacy_unit is not None:
                # T follows ñ (a DP value) there: charge the bound over every T, which
                # the plan predicts without reading the rows (job_model._person_charge_at)
                rho_person = entry.spec.rho_person
        if which == "marginals":
            # Interval of each noisy count (not of the projected one): the discrete Gaussian
            # is σ-subgaussian, P(|Z| >= h) <= 2exp(-h²/(2σ²)) = β for h below (public).
            half = math.floor(math.sqrt(2 * float(entry.spec.budget.sigma2)
                                        * math.log(2 / entry.params["beta"])))
            for r in records:
                r["count_ci_low"] = r["noisy_count"] - half
                r["count_ci_high"] = r["noisy_count"] + half
        mine = _zcdp_row(entry, rows.of(entry), records, rep, float(rho_attr),
                         float(rho_person))
        row.update(mine)
        # Charging argument (docs/jobs.md, "Charging rules per kind"): every person read
        # is charged the (ε, δ) conversion of the release's per-person ρ at the spec's δ.
        effective[entry.name] = _partial_effective(entry, mine[f"{entry.name}_eps_person"])
    return KindResult([row], effective, {})


def _release_marginals(
    adapter: ReleaseAdapter, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    return _release_zcdp(adapter, df, entries, unsafe_seed, "marginals")


def _release_mwem(
    adapter: ReleaseAdapter, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    return _release_zcdp(adapter, df, entries, unsafe_seed, "mwem")


MARGINALS = _person_kind("marginals", _build_marginals, _release_marginals,
                         _MARGINALS_KEYS | {"beta"})
"""Partial-DP marginals by the projection mechanism (:func:`hdp_spark.hdp_marginals`, Ghazi
et al. §4.1): ``cols``, ``domains``, ``eps0``, ``k`` or ``marginals``, ``other``, ``delta``,
``max_domain``, ``tol``, ``max_iter``, ``privacy_unit``, ``max_rows``, ``alias``. One output
row:
``<name>_records`` (one per cell: ``marginal``, the attribute values, ``noisy_count``,
``projected_count``, ``projected_fraction``), ``_n``, ``_eps0``, ``_rho_attribute``,
``_rho_person``, ``_delta``, ``_eps_attribute`` and ``_eps_person`` ((ε, δ) conversions at
``delta``; ``_eps_person`` is what the ledger charges), ``_eps_person_conversion``,
``_report``."""

MWEM = _person_kind("mwem", _build_mwem, _release_mwem, _MWEM_KEYS)
"""Partial-DP MWEM (:func:`hdp_spark.hdp_mwem`, Ghazi et al. §4.2): ``cols``, ``domains``,
``eps0``, ``k`` or ``marginals``, ``rounds``, ``per_round``, ``other``, ``delta``,
``max_domain``, ``max_tuples``, ``privacy_unit``, ``max_rows``, ``alias``. Output as
``marginals``, the
records holding ``mwem_fraction``."""


PARTIAL: tuple[AggregatorKind, ...] = (HEAVY_HITTERS, ATTRIBUTE_HISTOGRAMS, MARGINALS, MWEM)
"""The partial-DP kinds, in registration order."""
