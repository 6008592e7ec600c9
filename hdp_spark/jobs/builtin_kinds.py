"""Aggregator kinds beyond ``mean`` and ``histogram``: user-level mean, heavy hitters,
attribute histograms, marginals, MWEM and LDP aggregation (tracker issues 16, 19).

Every kind calls only the PUBLIC release functions of :mod:`hdp_spark.pandas` /
:mod:`hdp_spark.spark` (``user_mean_release``, ``heavy_hitters``,
``attribute_histograms``, ``ldp_release``); the backends' internals are not used.

How each kind is charged by the ledger is stated next to its ``effective`` table below and
in ``docs/jobs.md`` ("Charging rules per kind"). A wrong charge is a privacy breach: every
``effective`` value here is an upper bound of the privacy loss the mechanism's own proof
gives the charged unit.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.core.levels import EPS_CAP
from hdp_spark.errors import InternalError, ParameterError
from hdp_spark.jobs.registry import AggregatorKind, Interval, Key, KindResult, _grid

__all__ = [
    "ATTRIBUTE_HISTOGRAMS",
    "BUILTIN",
    "HEAVY_HITTERS",
    "LDP_MEAN",
    "MARGINALS",
    "MWEM",
    "USER_MEAN",
    "PartialEntry",
]


def _engine(engine: str) -> Any:
    import importlib

    return importlib.import_module(f"hdp_spark.{'pandas' if engine == 'pandas' else 'spark'}")


def _require(params: Mapping[str, Any], *names: str) -> None:
    for name in names:
        if name not in params:
            msg = f"`{name}` is required."
            raise ParameterError(msg)


def _keys_arg(keys: tuple[Key, ...] | None) -> list[Key] | None:
    return list(keys) if keys is not None else None


# -- user-level mean (Cummings et al.) --------------------------------------------------------


def _build_user_mean(params: Mapping[str, Any]) -> Any:
    from hdp_spark.pandas import hdp_user_mean

    p = dict(params)
    _require(p, "column", "eps", "user", "lower", "upper")
    column, user, eps = p.pop("column"), p.pop("user"), p.pop("eps")
    lower, upper = p.pop("lower"), p.pop("upper")
    if "eps_grid" in p:
        p["eps_grid"] = _grid(p["eps_grid"])
    return hdp_user_mean(column, user=user, eps=eps, lower=lower, upper=upper, **p)


def _release_user_mean(
    engine: str, df: Any, specs: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    mod = _engine(engine)
    rows: list[dict[str, Any]] | None = None
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for spec in specs:
        result = mod.user_mean_release(
            df, spec, by=list(by) or None, keys=_keys_arg(keys),
            unsafe_seed=f"{unsafe_seed}/{spec.name}" if unsafe_seed else None,
        )
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
)
"""User-level heterogeneous-DP mean (:func:`hdp_spark.hdp_user_mean`, Cummings et al.); parameters
as its keywords; ``user`` defaults to ``[input] user_id`` (and must equal it)."""


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
            "failure_prob", "beta", "privacy_unit", "max_candidates", "leaf_thresholding"}
_AH_KEYS = {"cols", "domains", "eps0", "other", "beta", "privacy_unit"}


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
    _require(p, "cols", "domains", "eps0")
    if not isinstance(p["cols"], list | tuple) or not all(isinstance(c, str) for c in p["cols"]):
        msg = f"`cols` must be a list of column names, got {p['cols']!r}."
        raise ParameterError(msg)
    p["cols"] = tuple(p["cols"])
    return alias, p


def _build_heavy_hitters(params: Mapping[str, Any]) -> PartialEntry:
    from hdp_spark.pandas import hdp_heavy_hitters

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
    # Basic composition over the d column histograms, each (2/b)-DP with b >= 2/ε₀:
    # d·ε₀ bounds the report's eps_person (d·2/b) from above.
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


def _plain_value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v.item() if hasattr(v, "item") else v


def _table_rows(engine: str, table: Any) -> list[dict[str, Any]]:
    if engine == "pandas":
        records = table.to_dict(orient="records")
    else:
        records = [r.asDict() for r in table.collect()]
    return [{str(k): _plain_value(v) for k, v in r.items()} for r in records]


def _release_heavy_hitters(
    engine: str, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    mod = _engine(engine)
    n = len(df) if engine == "pandas" else int(df.count())
    row: dict[str, Any] = {}
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for entry in entries:
        out = mod.heavy_hitters(
            df, entry.spec, unsafe_seed=f"{unsafe_seed}/{entry.name}" if unsafe_seed else None
        )
        records = [
            {**{c: (None if r[c] is None else str(r[c])) for c in entry.params["cols"]},
             "noisy_count": r["noisy_count"], "count_ci_low": r["count_ci_low"],
             "count_ci_high": r["count_ci_high"]}
            for r in _table_rows(engine, out.table)
        ]
        rep = _report_dict(out.report)
        row.update(_partial_row(entry, n, records, rep))
        effective[entry.name] = _partial_effective(entry, float(out.report.eps_person))
    return KindResult([row], effective, {})


def _partial_row(
    entry: PartialEntry, n: int, records: list[dict[str, Any]], rep: dict[str, Any]
) -> dict[str, Any]:
    name = entry.name
    return {
        f"{name}_records": records,
        f"{name}_n": n,
        f"{name}_eps0": rep["eps0"],
        f"{name}_eps_attribute": rep["eps_attribute"],
        f"{name}_eps_person": rep["eps_person"],
        f"{name}_eps_person_conversion": rep["eps_person_conversion"],
        f"{name}_report": json.dumps(rep, sort_keys=True),
    }


def _release_attribute_histograms(
    engine: str, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    mod = _engine(engine)
    n = len(df) if engine == "pandas" else int(df.count())
    row: dict[str, Any] = {}
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for entry in entries:
        p = dict(entry.params)
        cols = p.pop("cols")
        out = mod.attribute_histograms(
            df, list(cols), **p,
            unsafe_seed=f"{unsafe_seed}/{entry.name}" if unsafe_seed else None,
        )
        records = [
            {"attribute": r["attribute"], "value": r["value"], "code": r["code"],
             "noisy_count": r["noisy_count"], "count_ci_low": r["count_ci_low"],
             "count_ci_high": r["count_ci_high"]}
            for r in _table_rows(engine, out.table)
        ]
        rep = _report_dict(out.report)
        row.update(_partial_row(entry, n, records, rep))
        effective[entry.name] = _partial_effective(entry, float(out.report.eps_person))
    return KindResult([row], effective, {})


def _describe_partial(entry: Any) -> Mapping[str, Any]:
    return {"alias": entry.name, **{k: entry.params[k] for k in sorted(entry.params)}}


def _person_kind(name: str, build: Any, release: Any) -> AggregatorKind:
    """A partial-DP kind: global only, every person charged the same per-person ε."""
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
    )


HEAVY_HITTERS = _person_kind("heavy_hitters", _build_heavy_hitters, _release_heavy_hitters)
"""Partial-DP heavy hitters (:func:`hdp_spark.hdp_heavy_hitters`, Ghazi et al.): parameters as
its keywords (``cols``, ``domains``, ``eps0``, ...) plus ``alias``. One output row:
``<name>_records`` (released records with ``noisy_count`` and its interval), ``_n``,
``_eps0``, ``_eps_attribute``, ``_eps_person``, ``_eps_person_conversion``, ``_report``
(the public report as JSON)."""

ATTRIBUTE_HISTOGRAMS = _person_kind(
    "attribute_histograms", _build_attribute_histograms, _release_attribute_histograms
)
"""Per-attribute histograms (:func:`hdp_spark.pandas.attribute_histograms`, Ghazi et al.):
``cols``, ``domains``, ``eps0``, ``other``, ``beta``, ``privacy_unit``, ``alias``. Output as
heavy hitters, the records being (attribute, value, code, noisy count, interval)."""


# -- partial DP under zCDP: marginals (projection mechanism) and MWEM (Ghazi et al.) ----------

_MARGINALS_KEYS = {"cols", "domains", "eps0", "k", "marginals", "other", "delta", "max_domain",
                   "tol", "max_iter", "privacy_unit"}
_MWEM_KEYS = {"cols", "domains", "eps0", "k", "marginals", "rounds", "per_round", "other",
              "delta", "max_domain", "max_tuples", "privacy_unit"}


def _zcdp_eps(rho: float, delta: float) -> float:
    """The ε the ledger charges for a ρ-zCDP guarantee: ρ-zCDP ⇒ (ε, δ)-DP with ε of
    Canonne, Kamath & Steinke 2020 (``accounting.eps_cks20``; any order α gives a valid
    bound, so an inexact minimisation only over-charges)."""
    from hdp_spark.core.partial import accounting

    return float(accounting.eps_cks20(rho, delta))


def _build_marginals(params: Mapping[str, Any]) -> PartialEntry:
    from hdp_spark.pandas import hdp_marginals

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
    from hdp_spark.pandas import hdp_mwem

    alias, p = _partial_params(params, _MWEM_KEYS)
    cols = p.pop("cols")
    spec = hdp_mwem(cols, **p)
    # Per person ρ <= (ℓ² + ℓ)ε₀²/4 whatever T (the report's ρ uses the rounded ε_T and is
    # at most this), charged as its (ε, δ) conversion at the spec's δ.
    return PartialEntry(alias or "mwem", {"cols": cols, **p}, spec,
                        _zcdp_eps(spec.rho_person, spec.delta))


def _zcdp_row(
    entry: PartialEntry, n: int, records: list[dict[str, Any]], rep: dict[str, Any],
    rho_attribute: float, rho_person: float,
) -> dict[str, Any]:
    name, delta = entry.name, float(entry.spec.delta)
    return {
        f"{name}_records": records,
        f"{name}_n": n,
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


def _cell_records(engine: str, table: Any, cols: Sequence[str], value_cols: Sequence[str]
                  ) -> list[dict[str, Any]]:
    return [
        {"marginal": r["marginal"],
         **{c: (None if r[c] is None else str(r[c])) for c in cols},
         **{c: r[c] for c in value_cols}}
        for r in _table_rows(engine, table)
    ]


def _release_zcdp(engine: str, df: Any, entries: Sequence[Any], unsafe_seed: str | None,
                  which: str) -> KindResult:
    from hdp_spark.core.partial.mwem import MWEM_COLUMNS
    from hdp_spark.core.partial.projection import MARGINAL_COLUMNS
    from hdp_spark.jobs.outputs import json_safe

    mod = _engine(engine)
    n = len(df) if engine == "pandas" else int(df.count())
    row: dict[str, Any] = {}
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    for entry in entries:
        seed = f"{unsafe_seed}/{entry.name}" if unsafe_seed else None
        if which == "marginals":
            out = mod.marginals(df, entry.spec, unsafe_seed=seed)
            rep = _report_dict(out.report)
            rho_attr, rho_person = out.report.rho_attribute, out.report.rho_person
            value_cols = MARGINAL_COLUMNS
        else:
            out = mod.mwem(df, entry.spec, unsafe_seed=seed)
            rep = json_safe(dict(out.report))
            rho_attr, rho_person = out.report["rho_attribute"], out.report["rho_person"]
            value_cols = MWEM_COLUMNS
        records = _cell_records(engine, out.table, entry.params["cols"], value_cols)
        if which == "marginals":
            # Interval of each noisy count (not of the projected one): the discrete Gaussian
            # is σ-subgaussian, P(|Z| >= h) <= 2exp(-h²/(2σ²)) = β for h below (public).
            half = math.floor(math.sqrt(2 * float(entry.spec.budget.sigma2)
                                        * math.log(2 / entry.params["beta"])))
            for r in records:
                r["count_ci_low"] = r["noisy_count"] - half
                r["count_ci_high"] = r["noisy_count"] + half
        mine = _zcdp_row(entry, n, records, rep, float(rho_attr), float(rho_person))
        row.update(mine)
        # Charging argument (docs/jobs.md, "Charging rules per kind"): every person read
        # is charged the (ε, δ) conversion of the release's per-person ρ at the spec's δ.
        effective[entry.name] = _partial_effective(entry, mine[f"{entry.name}_eps_person"])
    return KindResult([row], effective, {})


def _release_marginals(
    engine: str, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    return _release_zcdp(engine, df, entries, unsafe_seed, "marginals")


def _release_mwem(
    engine: str, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    return _release_zcdp(engine, df, entries, unsafe_seed, "mwem")


MARGINALS = _person_kind("marginals", _build_marginals, _release_marginals)
"""Partial-DP marginals by the projection mechanism (:func:`hdp_spark.hdp_marginals`, Ghazi
et al. §4.1): ``cols``, ``domains``, ``eps0``, ``k`` or ``marginals``, ``other``, ``delta``,
``max_domain``, ``tol``, ``max_iter``, ``privacy_unit``, ``alias``. One output row:
``<name>_records`` (one per cell: ``marginal``, the attribute values, ``noisy_count``,
``projected_count``, ``projected_fraction``), ``_n``, ``_eps0``, ``_rho_attribute``,
``_rho_person``, ``_delta``, ``_eps_attribute`` and ``_eps_person`` ((ε, δ) conversions at
``delta``; ``_eps_person`` is what the ledger charges), ``_eps_person_conversion``,
``_report``."""

MWEM = _person_kind("mwem", _build_mwem, _release_mwem)
"""Partial-DP MWEM (:func:`hdp_spark.hdp_mwem`, Ghazi et al. §4.2): ``cols``, ``domains``,
``eps0``, ``k`` or ``marginals``, ``rounds``, ``per_round``, ``other``, ``delta``,
``max_domain``, ``max_tuples``, ``privacy_unit``, ``alias``. Output as ``marginals``, the
records holding ``mwem_fraction``."""


# -- LDP aggregation (Aliakbarpour et al.): post-processing -----------------------------------


@dataclass(frozen=True, slots=True)
class LdpEntry:
    """An LDP mean of a job: the spec and the declaration that its reports are randomized."""

    spec: Any
    already_randomized: bool


def _build_ldp_mean(params: Mapping[str, Any]) -> LdpEntry:
    from hdp_spark.pandas import ldp_mean

    p = dict(params)
    _require(p, "column", "eps", "mechanism")
    declared = p.pop("already_randomized", False)
    if declared is not True:
        msg = (
            "`already_randomized` must be true: the LDP aggregation adds no noise, so the "
            "job file must declare that the report column holds reports randomized on the "
            f"devices (raw values would be released exactly); got {declared!r}."
        )
        raise ParameterError(msg)
    column, eps = p.pop("column"), p.pop("eps")
    return LdpEntry(ldp_mean(column, eps=eps, **p), True)


def _release_ldp_mean(
    engine: str, df: Any, entries: Sequence[Any], by: tuple[str, ...],
    keys: tuple[Key, ...] | None, unsafe_seed: str | None,
) -> KindResult:
    mod = _engine(engine)
    result = mod.ldp_release(
        df, *(e.spec for e in entries), by=list(by) or None, keys=_keys_arg(keys),
        already_randomized=all(e.already_randomized for e in entries),
    )
    # Charging argument (docs/ldp.md): the reports are already ε_i-LDP (randomized and
    # paid for on the devices); the aggregate is post-processing and costs nothing more.
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
                        "already_randomized": e.already_randomized},
    numeric_columns=lambda e: (e.spec.report,),
    unit="none",
)
"""Heterogeneous-LDP mean of already-randomized scalar reports (:func:`hdp_spark.ldp.ldp_mean`,
Aliakbarpour et al.): ``column`` (the report column), ``eps``, ``mechanism`` (``"laplace"`` or
``"rr"``),
``lower``, ``upper``, ``beta``, ``weights``, ``fallback``, ``alias`` and the required
``already_randomized = true``. Charges nothing."""

BUILTIN: tuple[AggregatorKind, ...] = (USER_MEAN, HEAVY_HITTERS, ATTRIBUTE_HISTOGRAMS, LDP_MEAN,
                                       MARGINALS, MWEM)
