"""Plain-words summaries of a release for the report: cost per user, ε ranges, accuracy,
and the interval a single-ε (homogeneous) library would give.

Everything here is computed from what the release already publishes: its DP values and
intervals, and its per-level tables (ε level, users, ε charged), which are functions of the
public ε vector, the public budgets and the public bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.core.baseline import is_free, single_eps_half_width

__all__ = [
    "PERSON_KINDS",
    "ChargeClass",
    "Cost",
    "EpsRange",
    "ValueRow",
    "baseline_half_width",
    "charge_classes",
    "eps_label",
    "eps_ranges",
    "is_free",
    "release_cost",
    "selection_classes",
    "single_eps_half_width",
    "value_rows",
]

#: Kinds with one global ε per person (partial DP): one output row, ``<name>_records``.
PERSON_KINDS = ("heavy_hitters", "attribute_histograms", "marginals", "mwem")
#: Person kinds whose records are cells of marginals (``marginal`` + the attribute values).
CELL_KINDS = ("marginals", "mwem")

@dataclass(frozen=True, slots=True)
class ChargeClass:
    """Users of one group with one ε level, and what one aggregator charged each of them.

    Attributes:
        group: the group's label ("all" for a global release).
        eps: the ε level each of these users allowed (after capping to their budget).
        users: how many users (public: the ε histogram).
        charged: ε charged to each of them.
    """

    group: str
    eps: float
    users: int
    charged: float


@dataclass(frozen=True, slots=True)
class Cost:
    """The distribution of the per-user charges of a release (or of one aggregator).

    Attributes:
        users: users charged (or read, for a release that charges nothing).
        charged: ``(min, median, max)`` of the per-user charges.
        free_users: users charged less than the ε they allowed (privacy for free).
        saved: ``(min, median, max)`` of ``allowed - charged`` over those users.
        total: the sum of all users' charges.
        classes: the merged classes ``(group, ε, users, allowed, charged)``.
    """

    users: int
    charged: tuple[float, float, float]
    free_users: int
    saved: tuple[float, float, float] | None
    total: float
    classes: tuple[tuple[str, float, int, float, float], ...]


@dataclass(frozen=True, slots=True)
class EpsRange:
    """A range of ε levels shown as one line (``label`` unique within its list)."""

    label: str
    lo: float
    hi: float
    users: int
    free_users: int
    charged_lo: float
    charged_hi: float


@dataclass(frozen=True, slots=True)
class ValueRow:
    """One released value with its released interval (and a single-ε baseline half-width).

    ``low``/``high`` are the released ``ci_low``/``ci_high``: for the mean and the
    histogram they hold the table's own value with probability >= 1 - β on any data, noise
    and reweighting together. ``bias`` is the part of their half-width that holds the
    worst-case effect of weighting rows by their ε (the released ``bias_bound``, a
    function of ε only; 0 for estimators without reweighting and on a fallback).
    """

    label: str
    estimate: float
    low: float
    high: float
    baseline: float | None
    fallback: bool
    bias: float = 0.0


def _f(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def key_label(row: Mapping[str, Any], by: Sequence[str]) -> str:
    """A group's label: its key values joined, or "all" for a global release."""
    return ", ".join(str(row.get(c)) for c in by) if by else "all"


def charge_classes(
    agg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], by: Sequence[str],
    charge_mode: str,
) -> list[ChargeClass] | None:
    """What one aggregator charged, per (group, ε level); None if it charges nothing.

    Row-level kinds (mean, histogram) charge each row the effective ε of its level; the
    user-level mean charges each user once the largest effective ε of the classes of their
    group and level; partial-DP kinds charge every person read the per-person ε; LDP
    aggregation charges nothing. With ``charge = "demand"`` the charge is the level itself.

    Privacy:
        Reads only the release's published per-level tables (ε level, users, effective ε:
        functions of the public ε vector and budgets), never per-user records.
    """
    kind, name = agg["kind"], agg["name"]
    out: list[ChargeClass] = []
    if kind == "ldp_mean":
        return None
    if kind in PERSON_KINDS:
        row = rows[0] if rows else {}
        eps = _f(row.get(f"{name}_eps_person"))
        n = int(_f(row.get(f"{name}_n")) or 0) if row.get(f"{name}_n") is not None else 0
        return [ChargeClass("all", eps, n, eps)] if n and math.isfinite(eps) else []
    for r in rows:
        label = key_label(r, by)
        if kind == "user_mean":
            merged: dict[float, list[float]] = {}
            for c in r.get(f"{name}_classes") or []:
                eps = _f(c.get("eps"))
                cell = merged.setdefault(eps, [0.0, 0.0])
                cell[0] += int(c.get("users") or 0)
                cell[1] = max(cell[1], _f(c.get("eps_effective")))
            for eps, (users, eff) in merged.items():
                charged = eps if charge_mode == "demand" else eff
                out.append(ChargeClass(label, eps, int(users), charged))
            continue
        for lv in r.get(f"{name}_eps_levels") or []:
            eps = _f(lv.get("eps"))
            charged = eps if charge_mode == "demand" else _f(lv.get("eps_effective"))
            out.append(ChargeClass(label, eps, int(lv.get("n") or 0), charged))
    return out


def selection_classes(outcome: Mapping[str, Any]) -> list[ChargeClass] | None:
    """What a partition-selection release charged, per ε level over the whole table (one
    class list for the release: κ_i = min(ε_i, c) is charged once, whichever aggregators
    it has); None for other releases.

    Privacy:
        Reads the outcome's table-wide charge classes (capped ε level, rows, κ): functions
        of the public ε column and parameters; no group's n, no candidate key.
    """
    sel = outcome.get("selection")
    if not isinstance(sel, Mapping):
        return None
    demand = str(outcome.get("budget", {}).get("charge", "effective")) == "demand"
    return [ChargeClass("all", _f(e), int(_f(n)), min(_f(e), _f(sel["c"])) if demand
                        else _f(k))
            for e, n, k in sel.get("charges") or []]


def _quantiles(pairs: Iterable[tuple[float, int]]) -> tuple[float, float, float]:
    """(min, median, max) of values given with multiplicities (lower median)."""
    items = sorted((v, w) for v, w in pairs if w > 0)
    if not items:
        return (math.nan, math.nan, math.nan)
    total = sum(w for _, w in items)
    half, seen, median = (total + 1) // 2, 0, items[-1][0]
    for v, w in items:
        seen += w
        if seen >= half:
            median = v
            break
    return (items[0][0], median, items[-1][0])


def release_cost(per_agg: Sequence[Sequence[ChargeClass]]) -> Cost | None:
    """The per-user charges of aggregators that charge the same users, added up per
    (group, ε level) (sequential composition); None when they cannot be lined up (other
    ε columns or groups): then each aggregator's cost is shown on its own.

    Privacy:
        A function of the per-level tables only (see :func:`charge_classes`): the
        distribution of the per-user charges, which is public in this model.
    """
    if not per_agg:
        return None
    merged: dict[tuple[str, float], list[float]] = {}
    for i, classes in enumerate(per_agg):
        keys = {(c.group, c.eps) for c in classes}
        if i and keys != set(merged):
            return None
        for c in classes:
            cell = merged.setdefault((c.group, c.eps), [float(c.users), 0.0, 0.0])
            if cell[0] != c.users:
                return None
            cell[1] += c.eps
            cell[2] += c.charged if math.isfinite(c.charged) else 0.0
    classes_out = tuple((g, e, int(u), a, ch) for (g, e), (u, a, ch) in merged.items())
    users = sum(c[2] for c in classes_out)
    free = [(a - ch, u) for _, _, u, a, ch in classes_out if is_free(a, ch) and u]
    return Cost(
        users=users,
        charged=_quantiles((ch, u) for _, _, u, _, ch in classes_out),
        free_users=sum(u for _, u in free),
        saved=_quantiles(free) if free else None,
        total=sum(u * ch for _, _, u, _, ch in classes_out),
        classes=classes_out,
    )


def _fmt_eps(x: float, digits: int) -> str:
    if math.isinf(x):
        return "∞ (public)"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


def eps_label(x: float) -> str:
    """An ε for people: three significant digits."""
    return _fmt_eps(x, 3)


def eps_ranges(cost: Cost, *, max_ranges: int = 8) -> list[EpsRange]:
    """The ε levels of a release (what each person allowed it, summed over its aggregators)
    summarised as at most ``max_ranges`` ranges.

    Levels within a factor 1.25 of a range's smallest level share a range (after budget
    capping, levels such as 3.451 and 3.475 become one range "3.45–3.57"); the factor grows
    until at most ``max_ranges`` remain. 0 and ∞ keep ranges of their own. Labels get more
    digits until no two print the same and no range's ends print the same.

    Privacy:
        Counts per range of the public ε histogram; nothing else.
    """
    levels: dict[float, list[float]] = {}
    for _, _eps, users, allowed, charged in cost.classes:
        if not users:
            continue
        cell = levels.setdefault(allowed, [0, 0, math.inf, -math.inf])
        cell[0] += users
        if is_free(allowed, charged):
            cell[1] += users
        cell[2], cell[3] = min(cell[2], charged), max(cell[3], charged)
    ordered = sorted(levels)
    factor = 1.25
    while True:
        groups: list[list[float]] = []
        for e in ordered:
            if groups and _joins(groups[-1][0], e, factor):
                groups[-1].append(e)
            else:
                groups.append([e])
        if len(groups) <= max_ranges or factor > 1e6:
            break
        factor *= 2
    out = []
    for digits in range(3, 18):
        labels = [_range_label(g[0], g[-1], digits) for g in groups]
        ends_apart = all(_fmt_eps(g[0], digits) != _fmt_eps(g[-1], digits)
                         for g in groups if g[0] != g[-1])
        if len(set(labels)) == len(labels) and ends_apart:
            break
    for g, label in zip(groups, labels, strict=True):
        cells = [levels[e] for e in g]
        out.append(EpsRange(label, g[0], g[-1], int(sum(c[0] for c in cells)),
                            int(sum(c[1] for c in cells)), min(c[2] for c in cells),
                            max(c[3] for c in cells)))
    return out


def _joins(first: float, e: float, factor: float) -> bool:
    if first <= 0 or math.isinf(e):
        return False
    return e <= first * factor


def _range_label(lo: float, hi: float, digits: int) -> str:
    a, b = _fmt_eps(lo, digits), _fmt_eps(hi, digits)
    return a if lo == hi else f"{a}–{b}"


def _levels_of(agg: Mapping[str, Any], row: Mapping[str, Any]) -> list[tuple[float, int]]:
    return [(_f(lv.get("eps")), int(lv.get("n") or 0))
            for lv in row.get(f"{agg['name']}_eps_levels") or []]


def baseline_half_width(agg: Mapping[str, Any], row: Mapping[str, Any]) -> float | None:
    """Half-width of the (1 − β) noise interval a single-ε library would publish for this
    group: every row at the group's smallest positive ε (ε_min), Laplace noise.

    Mean: weights 1/n, sensitivity (upper − lower)/n, so the half-width is
    (upper − lower)·ln(1/β) / (n·ε_min). Histogram (shares): a row moves 1/n between two
    bins, scale 2/(n·ε_min), half-width 2·ln(1/β)/(n·ε_min). None for kinds without such a
    baseline here (user-level, partial, local DP) and for groups without private rows.
    Rows with ε = 0 are left out (they ask not to be used) and public rows (ε = ∞) counted.

    Privacy:
        A function of public facts only: n and the ε levels of the group, the bounds, β.
    """
    kind = agg["kind"]
    if kind not in ("mean", "histogram"):
        return None
    beta = float(agg["definition"].get("beta", 0.05))
    span = None
    if kind == "mean":
        span = float(agg["definition"]["upper"]) - float(agg["definition"]["lower"])
    return single_eps_half_width(_levels_of(agg, row), beta, span)


def smallest_eps(agg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The smallest positive finite ε level of an aggregator over all groups."""
    eps = [e for r in rows for e, n in _levels_of(agg, r) if n > 0 and 0 < e < math.inf]
    return min(eps) if eps else None


def value_rows(
    agg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], by: Sequence[str]
) -> list[ValueRow]:
    """Every released value of an aggregator with its interval, one row per value.

    Privacy:
        Released (DP) values and intervals, with the public single-ε baseline.
    """
    name, kind = agg["name"], agg["kind"]
    out: list[ValueRow] = []
    if kind in CELL_KINDS:
        row = rows[0] if rows else {}
        n = _f(row.get(f"{name}_n"))
        cols = list(agg["definition"]["cols"])
        for rec in row.get(f"{name}_records") or []:
            cells = [c for c in cols if c in rec["marginal"].split(",")]
            label = f"{rec['marginal']}: " + " / ".join(
                "other" if rec.get(c) is None else str(rec.get(c)) for c in cells)
            if kind == "marginals":
                out.append(ValueRow(label, _f(rec.get("noisy_count")),
                                    _f(rec.get("count_ci_low")), _f(rec.get("count_ci_high")),
                                    None, False))
            else:  # MWEM: answers of a synthetic distribution, no per-value interval
                people = _f(rec.get("mwem_fraction")) * n
                out.append(ValueRow(label, people, math.nan, math.nan, None, False))
        return out
    if kind in PERSON_KINDS:
        row = rows[0] if rows else {}
        if kind == "heavy_hitters":
            cols = list(agg["definition"]["cols"])
        else:
            cols = ["attribute", "value"]
        for rec in row.get(f"{name}_records") or []:
            label = " / ".join("other" if rec.get(c) is None else str(rec.get(c)) for c in cols)
            out.append(ValueRow(label, _f(rec.get("noisy_count")), _f(rec.get("count_ci_low")),
                                _f(rec.get("count_ci_high")), None, False))
        return out
    intervals = [tuple(map(str, i)) for i in agg.get("intervals", [])]
    if kind == "histogram" and not intervals:  # partition selection: one list column
        for r in rows:
            group = key_label(r, by)
            bias = _f(r.get(f"{name}_bias_bound"))
            for b in r.get(name) or []:
                out.append(ValueRow(f"{group} · {b.get('category')}", _f(b.get("frequency")),
                                    _f(b.get("ci_low")), _f(b.get("ci_high")), None, False,
                                    bias if bias > 0 else 0.0))
        return out
    for r in rows:
        group = key_label(r, by)
        base = baseline_half_width(agg, r)
        fallback = bool(r.get(f"{name}_fallback"))
        for label, est, low, high in intervals:
            text = group if len(intervals) == 1 else (
                label if not by else f"{group} · {label}")
            bias = (_f(r.get(f"{name}_bias_bound"))
                    if kind in ("mean", "histogram", "ldp_mean") else 0.0)
            out.append(ValueRow(text, _f(r.get(est)), _f(r.get(low)), _f(r.get(high)), base,
                                fallback, 0.0 if fallback or not bias > 0 else bias))
    return out
